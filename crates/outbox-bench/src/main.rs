//! `cargo xtask bench <which>`: throughput measured side by side in one run, printed as ratios.
//! `publish` is here; `http`, `sinks`, `retention`, `fanout`, `webhooks` and `console` have
//! modules of their own.
//! Every benchmark reaches PostgreSQL over TCP to 127.0.0.1, as users do, and prints the
//! Unix socket's figures beside where it says so; `--socket` measures through the socket alone.
//!
//! `publish` is in `bench_publish`: publishing against the floor (the same rows in a bare
//! table with one ordered key), the alternative statements, SQL publishing and ordered
//! transactions, then `POST /events` from outside (`bench_ingest`).

use clap::Subcommand;

use crate::services::{ScratchDatabase, Transport, Transports, postgres};

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
    /// The nats and redis sinks against bare publish loops.
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
}

pub(crate) fn run(which: Which, transports: Transports) -> anyhow::Result<()> {
    if cfg!(debug_assertions) {
        return rerun_in_release();
    }
    let (rows, rounds, singles) = match which {
        Which::Publish { rows, rounds, singles } => (rows, rounds, singles),
        Which::Storage { events } => {
            let server = postgres()?;
            let url = server.url_over(Transport::Tcp)?;
            return crate::runtime()?.block_on(crate::bench_publish::storage(&url, events));
        }
        Which::Http => return crate::bench_http::run(transports),
        Which::Sinks => return crate::bench_sinks::run(transports),
        Which::Retention { rows } => return crate::bench_retention::run(rows, transports),
        Which::Fanout => return crate::bench_fanout::run(transports),
        Which::Webhooks => return crate::bench_webhooks::run(transports),
        Which::Console => return crate::bench_console::run(),
        Which::FanoutServer { server_url, database, mode } => {
            return crate::bench_fanout::serve(&server_url, &database, crate::bench_fanout::Mode::parse(&mode)?);
        }
    };
    let server = postgres()?;
    let requested = transports;
    let transports = transports.available(&server)?;
    crate::runtime()?.block_on(async {
        let db = ScratchDatabase::create(&server.url_over(Transport::Tcp)?, "outbox_bench").await?;
        let mut pools = Vec::new();
        for &transport in &transports {
            // One connection per transport: its server process is the one whose CPU is counted.
            pools.push((transport, db.pool_on(&server.url_over(transport)?, 1).await?));
        }
        let result = crate::bench_publish::run(&pools, crate::bench_publish::Sizes { rows, rounds, singles }).await;
        db.drop_now().await?;
        result
    })?;
    // Last, from outside: `POST /events` to the real server over each transport.
    crate::bench_ingest::run(&server, requested)
}

/// Benchmarks measure optimized code: a debug `cargo xtask bench …` runs itself again as a
/// release build with the same arguments.
fn rerun_in_release() -> anyhow::Result<()> {
    eprintln!("xtask: building the benchmark in release mode");
    let status = std::process::Command::new(crate::services::cargo())
        .args(["run", "--quiet", "--release", "--package", "xtask", "--"])
        .args(std::env::args().skip(1))
        .status()?;
    if !status.success() {
        anyhow::bail!("the release benchmark failed ({status})");
    }
    Ok(())
}
