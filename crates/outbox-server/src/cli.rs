//! The command line (SPEC §8.1).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

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
