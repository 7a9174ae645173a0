//! The `outbox` binary: parses the command line, runs the command, maps errors to exit codes.
//!
//! Exit codes: 0 success, 1 failure, 2 bad command line or configuration.

use std::process::ExitCode;

use clap::Parser;
use outbox_server::cli::{Cli, Command, DeadLettersCommand, SinksCommand, TokenCommand};
use outbox_server::commands;
use outbox_server::config::ConfigError;

/// jemalloc rather than the system's allocator: an idle `/watch` stream holds less resident
/// memory with it (`cargo xtask bench fanout`, `docs/development.md`). With glibc's, a
/// connection's large and mostly untouched buffers (hyper's 8 KiB for reading and for
/// writing) often land on pages that earlier short-lived work had made resident.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options for the commands that serve (`serve`, `dev`): memory freed in a burst
/// goes back to the system within about a second, instead of to the next allocations of
/// other sizes.
///
/// By default jemalloc keeps freed pages for 10 s and carves what it needs from them, so a
/// connection opened after a burst of short-lived work gets its mostly untouched 8 KiB
/// buffers on pages that are already resident, and keeps them for its life. With these,
/// freed pages are reused only for allocations of their own size
/// (`lg_extent_max_active_fit:0`) and a background thread returns the rest after a second
/// (`background_thread:true,dirty_decay_ms:1000`), so new buffers land on fresh pages, of
/// which only what is touched becomes resident. `cargo xtask bench fanout` measured 16.2 KiB
/// per idle stream at 10,000 streams with jemalloc's defaults and 10.1 with these, and
/// `POST /events` throughput within the noise of the defaults (`docs/development.md`).
const SERVER_MALLOC_CONF: &str = "background_thread:true,dirty_decay_ms:1000,lg_extent_max_active_fit:0";

/// The variable jemalloc reads its options from (this build's symbols have the `_rjem_` prefix).
const MALLOC_CONF_VAR: &str = "_RJEM_MALLOC_CONF";

/// Runs this binary again, in place, with [`SERVER_MALLOC_CONF`] in its environment, unless
/// the environment already names jemalloc options (its own, or these on the second run).
/// jemalloc reads its options once, before `main`, from the environment or from a symbol the
/// program exports; the workspace forbids the `unsafe` that exporting one takes. Returns only
/// when the binary could not be run again, and then serves with jemalloc's defaults.
#[cfg(all(unix, not(target_env = "msvc")))]
fn with_server_allocator_options() {
    use std::os::unix::process::CommandExt;
    if std::env::var_os(MALLOC_CONF_VAR).is_some() {
        return;
    }
    let Ok(binary) = std::env::current_exe() else { return };
    let mut args = std::env::args_os();
    let mut again = std::process::Command::new(binary);
    if let Some(name) = args.next() {
        again.arg0(name);
    }
    let error = again.args(args).env(MALLOC_CONF_VAR, SERVER_MALLOC_CONF).exec();
    eprintln!("outbox: running with jemalloc's default options ({MALLOC_CONF_VAR}): {error}");
}

#[cfg(not(all(unix, not(target_env = "msvc"))))]
fn with_server_allocator_options() {}

/// What `outbox dev` logs unless `--verbose` or `OUTBOX_LOG` asks for more: warnings and
/// errors, but not a delivery's failures (a sink or subscription backing off, an event
/// dead-lettered), which the console shows where they belong, beside the sink.
const DEV_LOG: &str = "warn,outbox_workers::dispatcher::runner=error";

/// The log filter: `OUTBOX_LOG` when set, else `info`, except for `outbox dev` without
/// `--verbose` ([`DEV_LOG`]): its operational lines (roles started, leases and shards
/// taken) would bury what it prints for a newcomer.
fn log_filter(command: &Command) -> tracing_subscriber::EnvFilter {
    let asked = std::env::var("OUTBOX_LOG").ok().filter(|filter| !filter.is_empty());
    let default = match command {
        Command::Dev(args) if !args.verbose => DEV_LOG,
        _ => "info",
    };
    asked.and_then(|filter| tracing_subscriber::EnvFilter::try_new(filter).ok()).unwrap_or_else(|| default.into())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt().with_env_filter(log_filter(&cli.command)).with_writer(std::io::stderr).init();
    if matches!(cli.command, Command::Serve(_) | Command::Dev(_)) {
        with_server_allocator_options();
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("outbox: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Dev(args) => commands::dev::run(args).await,
            Command::Serve(args) => commands::serve::run(args).await,
            Command::Migrate(args) => commands::migrate::run(args).await,
            Command::Doctor(args) => commands::doctor::run(args).await,
            Command::Token(TokenCommand::Issue(args)) => commands::token::issue(args),
            Command::Sinks(SinksCommand::List(args)) => commands::sinks::list(args).await,
            Command::DeadLetters(DeadLettersCommand::List(args)) => commands::sinks::list_dead_letters(args).await,
            Command::DeadLetters(DeadLettersCommand::Replay(args)) => commands::sinks::replay(args).await,
            Command::DeadLetters(DeadLettersCommand::Discard(args)) => commands::sinks::discard(args).await,
            Command::Events(command) => commands::events::run(command).await,
            Command::Webhooks(command) => commands::webhooks::run(command).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("outbox: {error:#}");
            let config = error.chain().any(|cause| cause.is::<ConfigError>());
            ExitCode::from(if config { 2 } else { 1 })
        }
    }
}
