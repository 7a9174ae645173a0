//! `cargo xtask bench <which>`: throughput measured side by side in one run, printed as ratios.
//! `publish` is here; `http`, `sinks`, `retention`, `fanout`, `webhooks` and `console` have
//! modules of their own.
//! Every benchmark reaches PostgreSQL over TCP to 127.0.0.1, as users do, and prints the
//! Unix socket's figures beside where it says so; `--socket` measures through the socket alone.
//!
//! `publish` compares, on the same table and interleaved round by round so that the
//! table's growth and the machine's noise fall on every contender alike, over TCP and
//! through the socket:
//! - `publish_many` in transactions of 1, 100 and 1000 events against a raw
//!   `COPY … FROM STDIN` of the same rows in transactions of the same size (the
//!   physical limit of loading rows);
//! - one `publish` + commit against a bare `INSERT` + commit of the same row;
//! - each batched contender over TCP against the same through the socket;
//! - last, from outside, `POST /events` batches of 100 to the real `outbox serve` with its
//!   `DATABASE_URL` over TCP against the same through the socket (`bench_ingest`).
//!
//! Targets over TCP: `publish_many` ≥ 0.7 of `COPY` at 100 and ≥ 0.8 at 1000, `publish` ≥
//! 0.95 of the bare `INSERT`, and `publish_many` over TCP ≥ 0.9 of the same through the socket.

use std::time::{Duration, Instant};

use clap::Subcommand;
use outbox_core::NewEvent;
use serde_json::json;
use sqlx::PgPool;

use crate::services::{ScratchDatabase, Transport, Transports, postgres};

#[derive(Subcommand)]
pub(crate) enum Which {
    /// Publishing throughput against COPY and a bare INSERT.
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
            pools.push((transport, db.pool_on(&server.url_over(transport)?, 4).await?));
        }
        let result = bench_publish(&pools, Sizes { rows, rounds, singles }).await;
        db.drop_now().await?;
        result
    })?;
    // Last, from outside: `POST /events` to the real server over each transport.
    crate::bench_ingest::run(&server, requested)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Contender {
    PublishMany(usize),
    Copy(usize),
    Publish,
    Insert,
}

impl Contender {
    const ALL: [Contender; 8] = [
        Contender::PublishMany(1),
        Contender::Copy(1),
        Contender::PublishMany(100),
        Contender::Copy(100),
        Contender::PublishMany(1000),
        Contender::Copy(1000),
        Contender::Publish,
        Contender::Insert,
    ];

    fn label(self) -> String {
        match self {
            Contender::PublishMany(batch) => format!("publish_many batch={batch}"),
            Contender::Copy(batch) => format!("COPY batch={batch}"),
            Contender::Publish => "publish + commit".into(),
            Contender::Insert => "bare INSERT + commit".into(),
        }
    }

    /// Events per round: single-event transactions measure commits, and take longer each.
    fn events(self, sizes: Sizes) -> usize {
        match self {
            Contender::PublishMany(1) | Contender::Copy(1) | Contender::Publish | Contender::Insert => sizes.singles,
            _ => sizes.rows,
        }
    }
}

#[derive(Clone, Copy)]
struct Sizes {
    rows: usize,
    rounds: usize,
    singles: usize,
}

/// Every contender over every transport, interleaved round by round on one table.
async fn bench_publish(pools: &[(Transport, PgPool)], sizes: Sizes) -> anyhow::Result<()> {
    let runs: Vec<(Contender, usize)> =
        Contender::ALL.into_iter().flat_map(|c| (0..pools.len()).map(move |p| (c, p))).collect();
    let mut totals = vec![(0_usize, Duration::ZERO); runs.len()];
    for round in 0..sizes.rounds {
        // Every other round runs the contenders in reverse, so that none always follows the
        // same neighbour (a large COPY leaves the server busy writing back for a moment).
        let mut order: Vec<usize> = (0..runs.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for slot in order {
            let (contender, pool) = runs[slot];
            let n = contender.events(sizes);
            totals[slot].0 += n;
            totals[slot].1 += run_contender(&pools[pool].1, contender, n).await?;
        }
        eprintln!("xtask: bench publish: round {}/{} done", round + 1, sizes.rounds);
    }
    let rate = |contender: Contender, pool: usize| {
        let slot = runs.iter().position(|&run| run == (contender, pool)).expect("every contender ran");
        totals[slot].0 as f64 / totals[slot].1.as_secs_f64()
    };
    let primary = pools[0].0.label();
    println!(
        "bench publish: {} rounds, {} events per batched contender and {} per single one per round; PostgreSQL over {}",
        sizes.rounds,
        sizes.rows,
        sizes.singles,
        pools.iter().map(|(t, _)| t.label()).collect::<Vec<_>>().join(" and, beside it, "),
    );
    let header: String = pools.iter().map(|(t, _)| format!("{:>12}", t.label())).collect();
    println!("  {:<24}{header}   events/s", "");
    for contender in Contender::ALL {
        let figures: String = (0..pools.len()).map(|p| format!("{:>12.0}", rate(contender, p))).collect();
        println!("  {:<24}{figures}", contender.label());
    }
    let line = |what: String, ratio: f64, target: Result<f64, &str>| {
        let verdict = match target {
            Ok(target) if ratio >= target => format!("meets target >= {target:.2}"),
            Ok(target) => format!("MISSES target >= {target:.2}"),
            Err(note) => note.to_owned(),
        };
        println!("  ratio {what} = {ratio:.2} ({verdict})");
    };
    let against = |ours: Contender, limit: Contender, target: Result<f64, &str>| {
        let what = format!("{} / {}, {primary}", ours.label(), limit.label());
        line(what, rate(ours, 0) / rate(limit, 0), target);
    };
    against(Contender::PublishMany(1), Contender::Copy(1), Err("no target: one-row transactions measure commits"));
    against(Contender::PublishMany(100), Contender::Copy(100), Ok(0.7));
    against(Contender::PublishMany(1000), Contender::Copy(1000), Ok(0.8));
    against(Contender::Publish, Contender::Insert, Ok(0.95));
    if let [(first, _), (second, _)] = pools {
        for contender in [Contender::PublishMany(100), Contender::PublishMany(1000), Contender::Copy(1000)] {
            let what = format!("{} {} / {}", contender.label(), first.label(), second.label());
            let target = match contender {
                Contender::PublishMany(_) => Ok(0.9),
                _ => Err("reference: what the transport costs a raw load"),
            };
            line(what, rate(contender, 0) / rate(contender, 1), target);
        }
    }
    Ok(())
}

async fn run_contender(pool: &PgPool, contender: Contender, n: usize) -> anyhow::Result<Duration> {
    let events: Vec<NewEvent> = (0..n).map(sample_event).collect();
    let started = Instant::now();
    match contender {
        Contender::PublishMany(batch) => {
            for chunk in events.chunks(batch) {
                let mut tx = pool.begin().await?;
                outbox_pg::publish_many(&mut *tx, chunk).await?;
                tx.commit().await?;
            }
        }
        Contender::Publish => {
            for event in &events {
                let mut tx = pool.begin().await?;
                outbox_pg::publish(&mut *tx, event).await?;
                tx.commit().await?;
            }
        }
        Contender::Copy(batch) => copy_rows(pool, &events, batch).await?,
        Contender::Insert => {
            for event in &events {
                let mut tx = pool.begin().await?;
                sqlx::query("INSERT INTO outbox (topic, payload) VALUES ($1, $2::jsonb)")
                    .bind(&event.event_type)
                    .bind(full_payload(event))
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
            }
        }
    }
    Ok(started.elapsed())
}

/// `COPY outbox (topic, payload) FROM STDIN` of the finished rows, `batch` rows per transaction.
/// Encoding the rows is counted, as publishing's own encoding is.
async fn copy_rows(pool: &PgPool, events: &[NewEvent], batch: usize) -> anyhow::Result<()> {
    for chunk in events.chunks(batch) {
        let mut text = String::with_capacity(chunk.len() * 256);
        for event in chunk {
            text.push_str(&copy_escape(&event.event_type));
            text.push('\t');
            text.push_str(&copy_escape(&full_payload(event)));
            text.push('\n');
        }
        let mut tx = pool.begin().await?;
        let mut copy = tx.copy_in_raw("COPY outbox (topic, payload) FROM STDIN").await?;
        copy.send(text.into_bytes()).await?;
        copy.finish().await?;
        tx.commit().await?;
    }
    Ok(())
}

/// COPY's text format: backslash, tab, newline and carriage return are escaped.
fn copy_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out
}

/// The finished payload a raw writer would store: what publish stores, with its own id and time.
fn full_payload(event: &NewEvent) -> String {
    json!({
        "id": format!("evt_{}", ulid::Ulid::generate().to_string().to_ascii_lowercase()),
        "tenantId": event.tenant_id,
        "subject": event.subject,
        "time": "2026-11-29T10:00:00.000Z",
        "data": event.data,
    })
    .to_string()
}

/// A realistic event: a reservation change of one of three tenants, about 200 bytes of data.
fn sample_event(n: usize) -> NewEvent {
    let tenant = ["acme", "globex", "initech"][n % 3];
    NewEvent::new(
        "reservation.active",
        tenant,
        format!("reservation/rsv_{n:08}"),
        json!({
            "state": "active",
            "previous": "placed",
            "poolId": "pool_01k5y1z2x3w4v5t6s7r8q9p0n1",
            "gpus": 8,
            "gpuModel": "h100-sxm",
            "startsAt": "2026-11-29T10:00:00Z",
            "endsAt": "2026-11-30T10:00:00Z",
        }),
    )
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
