//! The `outbox` binary: configuration, roles, authentication, wiring and the command line.
//!
//! **Architecture invariant:** the server only wires. Every capability lives in a
//! library crate (`outbox-pg`, `outbox-http`, `outbox-workers`); this crate reads
//! configuration, starts what the roles ask for, and maps errors to exit codes.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use outbox_pg::Migrator;
use outbox_pg::embedded::{EmbeddedOptions, EmbeddedPostgres};
use outbox_pg::sqlx;

#[derive(Parser)]
#[command(name = "outbox", version, about = "A transactional outbox for PostgreSQL")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Development: with no DATABASE_URL, start a PostgreSQL of its own in .outbox/pg, migrate it,
    /// and keep it running until Ctrl-C.
    Dev {
        /// Where the embedded cluster keeps its data.
        #[arg(long, default_value = ".outbox/pg")]
        data_dir: PathBuf,
    },
    /// Apply the migrations to DATABASE_URL.
    Migrate {
        /// List what would run, change nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

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
            Command::Dev { data_dir } => dev(data_dir).await,
            Command::Migrate { dry_run } => migrate(dry_run).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("outbox: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn migrate(dry_run: bool) -> anyhow::Result<()> {
    let url = std::env::var("DATABASE_URL").context("DATABASE_URL is not set: point it at the database to migrate")?;
    let pool = sqlx::PgPool::connect(&url).await.context("connecting to DATABASE_URL")?;
    let migrator = Migrator::new();
    if dry_run {
        let pending = migrator.pending(&pool).await?;
        if pending.is_empty() {
            println!("nothing to apply: the database is current");
        }
        pending.iter().for_each(|name| println!("would apply {name}"));
        return Ok(());
    }
    let report = migrator.run(&pool).await?;
    report.applied.iter().for_each(|name| println!("applied {name}"));
    println!("{} applied, {} already current", report.applied.len(), report.skipped);
    Ok(())
}

async fn dev(data_dir: PathBuf) -> anyhow::Result<()> {
    let (url, embedded) = match std::env::var("DATABASE_URL") {
        Ok(url) => (url, None),
        Err(_) => {
            let dir = std::path::absolute(&data_dir).context("resolving the data directory")?;
            eprintln!("outbox dev: starting PostgreSQL in {}", dir.display());
            let options = EmbeddedOptions::persistent(dir).stop_with_process();
            let embedded = tokio::task::spawn_blocking(move || EmbeddedPostgres::start(options))
                .await?
                .context("starting the embedded PostgreSQL")?;
            (embedded.url(), Some(embedded))
        }
    };
    let pool = sqlx::PgPool::connect(&url).await.context("connecting to the database")?;
    let report = Migrator::new().run(&pool).await?;
    println!(
        "outbox dev: database ready at {url} ({} migrations applied, {} current)",
        report.applied.len(),
        report.skipped
    );
    println!("outbox dev: the HTTP routes are not served yet; publish with outbox-pg into this database");
    println!("outbox dev: press Ctrl-C to stop");
    shutdown_signal().await?;
    pool.close().await;
    if let Some(embedded) = embedded {
        tokio::task::spawn_blocking(move || embedded.stop()).await?.context("stopping PostgreSQL")?;
    }
    println!("outbox dev: stopped");
    Ok(())
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate()).context("listening for SIGTERM")?;
    tokio::select! {
        interrupted = tokio::signal::ctrl_c() => interrupted.context("listening for Ctrl-C"),
        _ = terminate.recv() => Ok(()),
    }
}
