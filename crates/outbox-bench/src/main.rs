//! `outbox-bench <which>` (or `cargo xtask bench <which>`, which builds it in release and runs
//! it): every benchmark of the workspace, each measuring side by side in one run and printing
//! ratios against its targets. It never fails on a figure; it fails when a measurement cannot
//! be made.
//!
//! Every benchmark reaches PostgreSQL over TCP to 127.0.0.1, as users do, and prints the Unix
//! socket's figures beside where it says so; `--socket` measures through the socket alone.
//! The services come up as for the tests (`outbox_services`).
//!
//! - `publish` ([`publish`], then [`ingest`]): publishing against the floor (the same rows in a
//!   bare table with one ordered key), the alternative statements, SQL publishing and ordered
//!   transactions, then `POST /events` from outside; `storage`: sizes and WAL per event.
//! - `http` ([`http`]): SSE delivery and history pages against the bare xmin query.
//! - `sinks` ([`sinks`], measured by [`sinks_measure`]): the broker sinks against bare loops.
//! - `retention` ([`retention`], [`retention_measure`]): latency without and during a pass.
//! - `fanout` ([`fanout`]): live streams on the shared tail against per-stream polling.
//! - `webhooks` ([`webhooks`]): webhook subscriptions' idle cost, fan-out latency and rate.
//! - `console` ([`console`], [`console_measure`]): the console in headless Chromium.
//!
//! The hidden `fanout-server` and `measure-*` subcommands are the processes of their own that
//! some benchmarks start from this same binary.

mod console;
mod console_measure;
mod fanout;
mod http;
mod ingest;
mod publish;
mod retention;
mod retention_measure;
mod sinks;
mod sinks_measure;
mod webhooks;

use clap::{Parser, Subcommand};
use outbox_services::{ScratchDatabase, Transport, Transports, postgres};

/// The `outbox` binary's allocator, so that what runs in this process (the dispatcher of
/// `sinks`, the server of `fanout`) measures what it would there.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(name = "outbox-bench", about = "Outbox's benchmarks: ratios measured side by side in one run")]
struct Cli {
    /// Reach PostgreSQL through its Unix socket only; by default benchmarks connect over
    /// TCP to 127.0.0.1, as users do, and print the socket's figures beside.
    #[arg(long, global = true)]
    socket: bool,
    #[command(subcommand)]
    which: Which,
}

#[derive(Subcommand)]
pub(crate) enum Which {
    /// Publishing against the floor (a bare table with one ordered key), the alternative
    /// statements, SQL publishing and ordered transactions.
    Publish {
        /// Events per contender per round.
        #[arg(long, default_value_t = 10_000)]
        rows: usize,
        /// Rounds; contenders alternate within each.
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        /// Single-event transactions per contender per round (each commits).
        #[arg(long, default_value_t = 1_000)]
        singles: usize,
    },
    /// Table and index sizes and WAL per event after publishing `events`, before the write
    /// path's migrations and now.
    Storage {
        /// Events to publish into each schema.
        #[arg(long, default_value_t = 1_000_000)]
        events: usize,
    },
    /// SSE delivery and history pages against the bare xmin query.
    Http,
    /// The nats, redis, kafka and rabbitmq sinks against bare client loops and a bare relay.
    Sinks,
    /// Publish and read latency without and during a retention pass.
    Retention {
        /// Rows in the outbox before the pass.
        #[arg(long, default_value_t = 1_000_000)]
        rows: u64,
    },
    /// Live streams on one server: the shared tail against per-stream polling.
    Fanout,
    /// Webhook subscriptions: idle cost at 1 and 1,000, fan-out latency, one subscription's rate.
    Webhooks,
    /// The console in headless Chromium: its longest long task at 1,000 events/s against idle.
    Console,
    /// The server process `bench fanout` starts (not for direct use).
    #[command(hide = true)]
    FanoutServer {
        /// The PostgreSQL server.
        #[arg(long)]
        server_url: String,
        /// The bench database on it.
        #[arg(long)]
        database: String,
        /// `tail`, `polling` (each stream polls) or `bare` (hyper alone).
        #[arg(long)]
        mode: String,
    },
    /// The measurement of `sinks`, in a process of its own (not for direct use).
    #[command(hide = true)]
    MeasureSinks {
        /// Events, batch, rounds.
        args: Vec<String>,
    },
    /// The measurement of `retention`, in a process of its own (not for direct use).
    #[command(hide = true)]
    MeasureRetention {
        /// Rows, then the pass's batch, rounds and pause in milliseconds.
        args: Vec<String>,
    },
    /// The browser side of `console`, in a process of its own (not for direct use).
    #[command(hide = true)]
    MeasureConsole,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match run(cli.which, Transports::new(cli.socket)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("outbox-bench: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(which: Which, transports: Transports) -> anyhow::Result<()> {
    if cfg!(debug_assertions) {
        eprintln!("outbox-bench: built without optimizations; run `cargo xtask bench` for figures that mean something");
    }
    let (rows, rounds, singles) = match which {
        Which::Publish { rows, rounds, singles } => (rows, rounds, singles),
        Which::Storage { events } => {
            let server = postgres()?;
            let url = server.url_over(Transport::Tcp)?;
            return outbox_services::runtime()?.block_on(crate::publish::storage(&url, events));
        }
        Which::Http => return crate::http::run(transports),
        Which::Sinks => return crate::sinks::run(transports),
        Which::Retention { rows } => return crate::retention::run(rows, transports),
        Which::Fanout => return crate::fanout::run(transports),
        Which::Webhooks => return crate::webhooks::run(transports),
        Which::Console => return crate::console::run(),
        Which::MeasureSinks { args } => {
            runtime(2)?.block_on(crate::sinks_measure::run(&args));
            return Ok(());
        }
        Which::MeasureRetention { args } => {
            runtime(4)?.block_on(crate::retention_measure::run(&args));
            return Ok(());
        }
        Which::MeasureConsole => {
            runtime(2)?.block_on(crate::console_measure::run());
            return Ok(());
        }
        Which::FanoutServer { server_url, database, mode } => {
            return crate::fanout::serve(&server_url, &database, crate::fanout::Mode::parse(&mode)?);
        }
    };
    let server = postgres()?;
    let requested = transports;
    let transports = transports.available(&server)?;
    outbox_services::runtime()?.block_on(async {
        let db = ScratchDatabase::create(&server.url_over(Transport::Tcp)?, "outbox_bench").await?;
        let mut pools = Vec::new();
        for &transport in &transports {
            // One connection per transport: its server process is the one whose CPU is counted.
            pools.push((transport, db.pool_on(&server.url_over(transport)?, 1).await?));
        }
        let result = crate::publish::run(&pools, crate::publish::Sizes { rows, rounds, singles }).await;
        db.drop_now().await?;
        result
    })?;
    // Last, from outside: `POST /events` to the real server over each transport.
    crate::ingest::run(&server, requested)
}

/// A multi-threaded runtime of `workers` threads.
fn runtime(workers: usize) -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().worker_threads(workers).enable_all().build()?)
}
