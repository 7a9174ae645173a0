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
    #[command(after_help = DEV_HELP)]
    Dev(DevArgs),
    /// Production: serve the roles of the configuration.
    #[command(
        after_help = "Examples:\n  outbox serve --config /etc/outbox/outbox.toml\n  DATABASE_URL=postgres://outbox@db/outbox outbox serve --roles http --listen 0.0.0.0:8080"
    )]
    Serve(ServeArgs),
    /// Apply the migrations to DATABASE_URL (or the configuration's database_url).
    #[command(
        after_help = "Examples:\n  DATABASE_URL=postgres://outbox@db/outbox outbox migrate --dry-run\n  outbox migrate --config /etc/outbox/outbox.toml"
    )]
    Migrate(MigrateArgs),
    /// Check the database for what stops events from flowing: dead letters, stalled sinks,
    /// long transactions, retention backlog, expired leases, migrations. Exits 1 on any error.
    #[command(after_help = DOCTOR_EXAMPLES)]
    Doctor(DoctorArgs),
    /// Tokens for the HTTP routes.
    #[command(subcommand)]
    Token(TokenCommand),
    /// The configured sinks: position, lag, state, last error, lease holder.
    #[command(subcommand)]
    Sinks(SinksCommand),
    /// Events a sink refused on every attempt: list, replay, discard.
    #[command(subcommand, name = "dead-letters")]
    DeadLetters(DeadLettersCommand),
    /// Watch, list and publish events over HTTP (any Outbox server, through outbox-client).
    #[command(subcommand, after_help = EVENTS_EXAMPLES)]
    Events(EventsCommand),
    /// A tenant's webhook subscriptions over HTTP: create, list, show, update, delete, ping, rotate-secret, attempts.
    #[command(subcommand, after_help = WEBHOOKS_EXAMPLES)]
    Webhooks(WebhooksCommand),
}

/// How a listing prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned columns for people (data abbreviated, control characters escaped).
    Table,
    /// One terminal-safe JSON object per line, for programs (the shape of the HTTP API).
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

const DEV_HELP: &str = "\
The address, the console link and an admin token are printed last, between two rules,
once everything has started.

Logs: warnings and errors only. The operational lines (roles started, leases and webhook
shards taken) are at the info level, and a sink's or subscription's failed deliveries show
in the console rather than the log: --verbose shows them all, and OUTBOX_LOG takes any
filter (OUTBOX_LOG=debug, OUTBOX_LOG=outbox_workers=debug).

Examples:
  outbox dev --demo
  outbox dev --verbose
  DATABASE_URL=postgres://localhost/outbox outbox dev --listen 127.0.0.1:0";

/// `outbox dev`.
#[derive(Debug, Args)]
pub struct DevArgs {
    /// Publish sample events across three tenants, append them to a JSONL sink
    /// (.outbox/demo-sink.jsonl) and post the first tenant's to a webhook receiver inside
    /// outbox dev, which refuses the first reservation.placed so a dead letter appears.
    #[arg(long)]
    pub demo: bool,
    /// Show the operational log lines (the info level) too; OUTBOX_LOG overrides.
    #[arg(long, short)]
    pub verbose: bool,
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

const DOCTOR_EXAMPLES: &str = "\
Needs only the database (DATABASE_URL or database_url), not a running server. Each finding
has a check, a severity (error, warning, info), a message, a fix and sometimes a count.
Exit codes: 0 no error finding, 1 an error finding (or the database could not be reached).

Examples:
  DATABASE_URL=postgres://outbox@db/outbox outbox doctor
  outbox doctor --config /etc/outbox/outbox.toml --format json | jq 'select(.severity == \"error\")'
  OUTBOX_DOCTOR_LONG_TX_SECONDS=10 outbox doctor";

/// `outbox doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The configuration file: database_url, [[sinks]], [retention], [doctor] (default: OUTBOX_CONFIG).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// table or json (one finding per line).
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
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
    #[command(
        after_help = "Examples:\n  OUTBOX_JWT_SECRET=… outbox token issue --tenant acme --scopes \"events:read\" --ttl 1h --sid ses_1"
    )]
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

/// `outbox events …`: the HTTP API from the command line, through `outbox-client`.
#[derive(Debug, Subcommand)]
pub enum EventsCommand {
    /// Follow the live stream: one JSON line per event, reconnecting until Ctrl-C or --count.
    #[command(after_help = WATCH_EXAMPLES)]
    Watch(EventsWatchArgs),
    /// Read the history: one page, or every page with --all.
    #[command(after_help = LIST_EXAMPLES)]
    List(EventsListArgs),
    /// Publish one event, or a batch from a JSON-lines file (or standard input).
    #[command(after_help = PUBLISH_EXAMPLES)]
    Publish(EventsPublishArgs),
}

const EVENTS_EXAMPLES: &str = "\
Examples:
  export OUTBOX_TOKEN=…    # printed by `outbox dev`, or `outbox token issue`
  outbox events watch --url http://127.0.0.1:8080 --types 'reservation.*' --count 5
  outbox events list --limit 20 --format table
  outbox events publish --type node.joined --tenant acme --subject node/n1 --data '{\"gpus\":8}'";

const WATCH_EXAMPLES: &str = "\
Each line is the event's JSON on one line; control and escape characters in it are
escaped (\\u001b, \\n, …), so a payload cannot move the cursor or restyle the terminal.

Examples:
  outbox events watch --url http://127.0.0.1:8080 --token \"$TOKEN\"
  outbox events watch --types 'reservation.*,node.joined' --count 5
  outbox events watch --tenant globex --since 88213.51120   # admin token; resume after a position
  outbox events watch --since 0.0 | jq .type                  # everything stored, then live";

const LIST_EXAMPLES: &str = "\
In the json format each line is one event; when more events follow, the next page's
cursor is printed on standard error.

Examples:
  outbox events list --url http://127.0.0.1:8080 --token \"$TOKEN\" --limit 20
  outbox events list --types 'node.*' --cursor 88213:51120 --format table
  outbox events list --subject reservation/rsv_01 --all > history.jsonl";

const PUBLISH_EXAMPLES: &str = "\
Prints the new event ids, one per line. A batch file holds one event per line, in the
shape of POST /events: {\"type\":…,\"tenantId\":…,\"subject\":…,\"data\":{…}}. Every line is
checked before anything is sent; each request of --batch-size lines is one transaction.

Examples:
  outbox events publish --type reservation.active --tenant acme --subject reservation/rsv_01 --data '{\"state\":\"active\"}'
  outbox events publish --file events.jsonl
  generate-events | outbox events publish --file -";

/// `outbox webhooks …`: the webhook subscription routes, through `outbox-client`.
#[derive(Debug, Subcommand)]
pub enum WebhooksCommand {
    /// One JSON line per subscription, every page.
    List(WebhooksListArgs),
    /// Create a subscription; prints it with its secret, shown only here.
    Create(WebhooksCreateArgs),
    /// Print one subscription.
    Show(WebhookIdArgs),
    /// Change a subscription's URL, types or description, or enable or disable it.
    Update(WebhooksUpdateArgs),
    /// Delete a subscription with its cursor, attempts and dead letters.
    Delete(WebhookIdArgs),
    /// Send one signed webhook.ping now and print the outcome.
    Ping(WebhookIdArgs),
    /// Make a new secret; the old one keeps signing for --grace seconds.
    #[command(name = "rotate-secret")]
    RotateSecret(WebhooksRotateArgs),
    /// The last attempts, newest first, one JSON line each.
    Attempts(WebhookIdArgs),
}

const WEBHOOKS_EXAMPLES: &str = "\
Every answer prints as terminal-safe JSON lines. A token with webhooks:write manages its
own tenant's subscriptions; an admin token any tenant's by id.

Examples:
  export OUTBOX_TOKEN=…
  outbox webhooks create --endpoint https://billing.example.com/hooks --types 'reservation.*'
  outbox webhooks list
  outbox webhooks update wh_01j… --enabled false
  outbox webhooks update wh_01j… --enabled true --resume now
  outbox webhooks ping wh_01j…
  outbox webhooks rotate-secret wh_01j… --grace 3600";

/// `outbox webhooks list`.
#[derive(Debug, Args)]
pub struct WebhooksListArgs {
    #[command(flatten)]
    pub server: ServerArgs,
}

/// A subcommand that names one subscription.
#[derive(Debug, Args)]
pub struct WebhookIdArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// The subscription's id (wh_…).
    pub id: String,
}

/// `outbox webhooks create`.
#[derive(Debug, Args)]
pub struct WebhooksCreateArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// The endpoint the subscription posts to (https://…).
    #[arg(long, value_name = "URL")]
    pub endpoint: String,
    /// Comma-separated type patterns (default: every type).
    #[arg(long, value_delimiter = ',')]
    pub types: Vec<String>,
    /// A description.
    #[arg(long)]
    pub description: Option<String>,
    /// An extra request header, as "Name: value" (repeatable).
    #[arg(long = "request-header", value_name = "NAME: VALUE")]
    pub request_headers: Vec<String>,
    /// The signing secret (whsec_…); generated when absent.
    #[arg(long, env = "OUTBOX_WEBHOOK_SECRET", hide_env_values = true)]
    pub secret: Option<String>,
}

/// `outbox webhooks update`.
#[derive(Debug, Args)]
pub struct WebhooksUpdateArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// The subscription's id (wh_…).
    pub id: String,
    /// A new endpoint.
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// New comma-separated type patterns.
    #[arg(long, value_delimiter = ',')]
    pub types: Option<Vec<String>>,
    /// A new description.
    #[arg(long)]
    pub description: Option<String>,
    /// Enable (true) or disable (false).
    #[arg(long)]
    pub enabled: Option<bool>,
    /// With --enabled true: resume from "cursor" (every event since, the default) or "now".
    #[arg(long, value_parser = ["cursor", "now"])]
    pub resume: Option<String>,
}

/// `outbox webhooks rotate-secret`.
#[derive(Debug, Args)]
pub struct WebhooksRotateArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// The subscription's id (wh_…).
    pub id: String,
    /// How long the old secret keeps signing, in seconds (default 86400, at most 604800).
    #[arg(long)]
    pub grace: Option<u64>,
}

/// Where `outbox events` finds the server by default: what `outbox dev` serves.
pub const DEFAULT_URL: &str = "http://127.0.0.1:8080";

/// Where the server is and how to authenticate: shared by every `outbox events` command.
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// The server's base URL.
    #[arg(long, env = "OUTBOX_URL", default_value = DEFAULT_URL)]
    pub url: String,
    /// The bearer token: a JWT or an API key.
    #[arg(long, env = "OUTBOX_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// An extra header for every request, as "Name: value" (repeatable).
    #[arg(long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// Where the host mounts the routes, e.g. /outbox for /outbox/events.
    #[arg(long, value_name = "PATH")]
    pub path_prefix: Option<String>,
}

/// `outbox events watch`.
#[derive(Debug, Args)]
pub struct EventsWatchArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// Another tenant than the token's (needs the admin scope).
    #[arg(long)]
    pub tenant: Option<String>,
    /// Comma-separated type patterns, e.g. 'reservation.*,node.joined' (default: every type).
    #[arg(long, value_delimiter = ',')]
    pub types: Vec<String>,
    /// Start strictly after this position, 88213.51120 or 88213:51120 (0.0 = everything
    /// stored); default: from now.
    #[arg(long, value_name = "CURSOR")]
    pub since: Option<outbox_core::Position>,
    /// Exit 0 after this many events.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    /// The longest wait between reconnection attempts, in seconds.
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    pub max_backoff: u64,
}

/// `outbox events list`.
#[derive(Debug, Args)]
pub struct EventsListArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// Another tenant than the token's (needs the admin scope).
    #[arg(long)]
    pub tenant: Option<String>,
    /// Comma-separated type patterns (default: every type).
    #[arg(long, value_delimiter = ',')]
    pub types: Vec<String>,
    /// Only events about this exact subject, e.g. reservation/rsv_01.
    #[arg(long)]
    pub subject: Option<String>,
    /// Start strictly after this position (either form); default: the oldest stored event.
    #[arg(long, value_name = "CURSOR")]
    pub cursor: Option<outbox_core::Position>,
    /// Events per page, 1–1000 (the server's default is 100).
    #[arg(long, value_name = "N")]
    pub limit: Option<u32>,
    /// Follow the cursor through every page to the end of the history.
    #[arg(long)]
    pub all: bool,
    /// How to print.
    #[arg(long, value_enum, default_value_t = Format::Json)]
    pub format: Format,
}

/// `outbox events publish`.
#[derive(Debug, Args)]
pub struct EventsPublishArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// The event type, e.g. reservation.active.
    #[arg(long = "type", value_name = "TYPE", required_unless_present = "file")]
    pub event_type: Option<String>,
    /// The event's tenant.
    #[arg(long, required_unless_present = "file")]
    pub tenant: Option<String>,
    /// What the event is about, <kind>/<id>.
    #[arg(long, required_unless_present = "file")]
    pub subject: Option<String>,
    /// The event's data: a JSON object.
    #[arg(long, default_value = "{}", value_name = "JSON")]
    pub data: String,
    /// Publish the events of a JSON-lines file instead; - reads standard input.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["event_type", "tenant", "subject", "data"])]
    pub file: Option<PathBuf>,
    /// Events per request (and per transaction) when publishing a file, 1–10000.
    #[arg(long, default_value_t = 1000, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub batch_size: u32,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// Every subcommand's arguments are consistent (unique names, valid defaults): clap checks
    /// this only when a command is parsed, so a mistake would otherwise panic at run time.
    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }
}
