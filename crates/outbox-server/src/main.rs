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

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("OUTBOX_LOG").unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
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
