//! `cargo xtask bench <which>`: throughput measured side by side in one run, printed as ratios.
//! `publish` is here; `http`, `sinks` and `fanout` have modules of their own.
//!
//! `publish` compares, on the same table and interleaved round by round so that the
//! table's growth and the machine's noise fall on every contender alike:
//! - `publish_many` in transactions of 1, 100 and 1000 events against a raw
//!   `COPY … FROM STDIN` of the same rows in transactions of the same size (the
//!   physical limit of loading rows);
//! - one `publish` + commit against a bare `INSERT` + commit of the same row.

use std::time::{Duration, Instant};

use clap::Subcommand;
use outbox_core::NewEvent;
use serde_json::json;
use sqlx::PgPool;

use crate::services::{ScratchDatabase, postgres};

#[derive(Subcommand)]
pub enum Which {
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

pub fn run(which: Which) -> anyhow::Result<()> {
    if cfg!(debug_assertions) {
        return rerun_in_release();
    }
    let (rows, rounds, singles) = match which {
        Which::Publish { rows, rounds, singles } => (rows, rounds, singles),
        Which::Http => return crate::bench_http::run(),
        Which::Sinks => return crate::bench_sinks::run(),
        Which::Retention { rows } => return crate::bench_retention::run(rows),
        Which::Fanout => return crate::bench_fanout::run(),
        Which::FanoutServer { server_url, database, mode } => {
            return crate::bench_fanout::serve(&server_url, &database, crate::bench_fanout::Mode::parse(&mode)?);
        }
    };
    let server = postgres()?;
    crate::runtime()?.block_on(async {
        let socket = server.socket_dir();
        match &socket {
            Some(dir) => println!("bench publish: connected through the Unix socket in {}", dir.display()),
            None => {
                println!("bench publish: connected over TCP (sqlx 0.9.0 leaves Nagle on: large messages wait ~40 ms)")
            }
        }
        let db = ScratchDatabase::create_via(&server.url(), socket.as_deref(), "outbox_bench").await?;
        let result = bench_publish(&db.pool, rows, rounds, singles).await;
        db.drop_now().await?;
        result
    })
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Contender {
    PublishMany(usize),
    Copy(usize),
    Publish,
    Insert,
}

impl Contender {
    fn label(self) -> String {
        match self {
            Contender::PublishMany(batch) => format!("publish_many batch={batch}"),
            Contender::Copy(batch) => format!("COPY batch={batch}"),
            Contender::Publish => "publish + commit".into(),
            Contender::Insert => "bare INSERT + commit".into(),
        }
    }
}

async fn bench_publish(pool: &PgPool, rows: usize, rounds: usize, singles: usize) -> anyhow::Result<()> {
    let contenders = [
        Contender::PublishMany(1),
        Contender::Copy(1),
        Contender::PublishMany(100),
        Contender::Copy(100),
        Contender::PublishMany(1000),
        Contender::Copy(1000),
        Contender::Publish,
        Contender::Insert,
    ];
    let mut totals = vec![(0_usize, Duration::ZERO); contenders.len()];
    for round in 0..rounds {
        // Every other round runs the contenders in reverse, so that none always follows the
        // same neighbour (a large COPY leaves the server busy writing back for a moment).
        let mut order: Vec<usize> = (0..contenders.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for (slot, contender) in order.into_iter().map(|slot| (slot, &contenders[slot])) {
            let n = match contender {
                Contender::PublishMany(1) | Contender::Copy(1) | Contender::Publish | Contender::Insert => singles,
                _ => rows,
            };
            let elapsed = run_contender(pool, *contender, n).await?;
            totals[slot].0 += n;
            totals[slot].1 += elapsed;
        }
        eprintln!("xtask: bench publish: round {}/{rounds} done", round + 1);
    }
    let rate = |slot: usize| totals[slot].0 as f64 / totals[slot].1.as_secs_f64();
    println!(
        "bench publish: {rounds} rounds, {rows} events per batched contender and {singles} per single one per round"
    );
    for (slot, contender) in contenders.iter().enumerate() {
        println!("  {:<24} {:>10.0} events/s", contender.label(), rate(slot));
    }
    let line = |ours: usize, limit: usize, target: Option<f64>| {
        let ratio = rate(ours) / rate(limit);
        let verdict = match target {
            Some(target) if ratio >= target => format!("meets target >= {target:.2}"),
            Some(target) => format!("MISSES target >= {target:.2}"),
            None => "no target: one-row transactions measure commits, not loading".into(),
        };
        println!("  ratio {} / {} = {ratio:.2} ({verdict})", contenders[ours].label(), contenders[limit].label());
    };
    line(0, 1, None);
    line(2, 3, Some(0.7));
    line(4, 5, Some(0.7));
    line(6, 7, Some(0.9));
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
