//! The command line (SPEC §8.1).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// `outbox`: a transactional outbox for PostgreSQL.
#[derive(Debug, Parser)]
#[command(name = "outbox", version, about = "A transactional outbox for PostgreSQL")]
pub struct Cli {
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Development: a PostgreSQL of its own in .outbox/pg (unless DATABASE_URL is set),
    /// migrated, every role served on 127.0.0.1:8080, an admin token printed.
    Dev(DevArgs),
    /// Production: serve the roles of the configuration.
    Serve(ServeArgs),
    /// Apply the migrations to DATABASE_URL (or the configuration's database_url).
    Migrate(MigrateArgs),
    /// Tokens for the HTTP routes.
    #[command(subcommand)]
    Token(TokenCommand),
    /// The configured sinks: position, lag, state, last error, lease holder.
    #[command(subcommand)]
    Sinks(SinksCommand),
    /// Events a sink refused on every attempt: list, replay, discard.
    #[command(subcommand, name = "dead-letters")]
    DeadLetters(DeadLettersCommand),
}

/// How a listing prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned columns for people.
    Table,
    /// One JSON object per line, for programs (the shape of the HTTP API).
    Json,
}

/// `outbox sinks …`.
#[derive(Debug, Subcommand)]
pub enum SinksCommand {
    /// Each configured sink's state, read from the database (no running server needed).
    ///
    /// Example: DATABASE_URL=postgres://… outbox sinks list --config outbox.toml
    List(SinksListArgs),
}

/// `outbox sinks list`.
#[derive(Debug, Args)]
pub struct SinksListArgs {
    /// The configuration file whose [[sinks]] are listed (default: OUTBOX_CONFIG).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// table or json.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// `outbox dead-letters …`.
#[derive(Debug, Subcommand)]
pub enum DeadLettersCommand {
    /// A sink's dead letters, oldest first.
    ///
    /// Example: outbox dead-letters list --sink billing --config outbox.toml
    List(DeadLettersListArgs),
    /// Deliver dead letters again through their sink; each is marked replayed when the sink
    /// takes it. Exits 1 if any was refused.
    ///
    /// Example: outbox dead-letters replay --sink billing 17 18   (or --all)
    Replay(DeadLettersActArgs),
    /// Delete dead letters.
    ///
    /// Example: outbox dead-letters discard --sink billing 17
    Discard(DeadLettersActArgs),
}

/// `outbox dead-letters list`.
#[derive(Debug, Args)]
pub struct DeadLettersListArgs {
    /// The sink (an id of the configuration's [[sinks]]).
    #[arg(long)]
    pub sink: String,
    /// Also list letters already replayed.
    #[arg(long)]
    pub replayed: bool,
    /// At most this many.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub limit: u32,
    /// The configuration file (default: OUTBOX_CONFIG).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// table or json.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// `outbox dead-letters replay|discard`.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("which").required(true).args(["ids", "all"]))]
pub struct DeadLettersActArgs {
    /// The sink (an id of the configuration's [[sinks]]).
    #[arg(long)]
    pub sink: String,
    /// The dead letters' ids, as `dead-letters list` shows them.
    pub ids: Vec<i64>,
    /// Every pending dead letter of the sink.
    #[arg(long)]
    pub all: bool,
    /// The configuration file (default: OUTBOX_CONFIG).
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// `outbox dev`.
#[derive(Debug, Args)]
pub struct DevArgs {
    /// Publish a steady trickle of sample events across three tenants.
    #[arg(long)]
    pub demo: bool,
    /// Where to listen (port 0 picks a free port; the bound address is printed).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Where the embedded cluster keeps its data; the dev secret lives next to it.
    #[arg(long, default_value = ".outbox/pg")]
    pub data_dir: PathBuf,
}

/// `outbox serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The configuration file (default: OUTBOX_CONFIG, else none).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Comma-separated roles: http, sinks, retention, subscribers, all.
    #[arg(long)]
    pub roles: Option<String>,
    /// The listen address, e.g. 0.0.0.0:8080.
    #[arg(long)]
    pub listen: Option<SocketAddr>,
}

/// `outbox migrate`.
#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// List what would run, change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The configuration file (for database_url).
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// `outbox token …`.
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Print a JWT signed with the configured HS256 secret.
    Issue(IssueArgs),
}

/// `outbox token issue`.
#[derive(Debug, Args)]
pub struct IssueArgs {
    /// The tenant the token reads (claim tenant_id).
    #[arg(long)]
    pub tenant: String,
    /// Space-separated scopes, e.g. "events:read admin" (claim scope).
    #[arg(long)]
    pub scopes: String,
    /// Lifetime: seconds, or 90s, 15m, 1h, 7d.
    #[arg(long, default_value = "1h")]
    pub ttl: String,
    /// The identity (claim sub).
    #[arg(long)]
    pub sub: Option<String>,
    /// The session (claim sid), so it can be revoked with {"sessionId": …}.
    #[arg(long)]
    pub sid: Option<String>,
    /// The configuration file (for auth.jwt_secret).
    #[arg(long)]
    pub config: Option<PathBuf>,
}
