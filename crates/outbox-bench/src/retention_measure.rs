//! The measurement behind `outbox-bench retention`, in a process of its own (`measure-retention`,
//! with `DATABASE_URL` set).
//!
//! Fills a fresh outbox with `rows` events (100 transactions), puts two sink cursors on it
//! (one at the head, one lagging at 60 %), moves the database clock two hours forward, then
//! measures, side by side in one run, the latency of publishers (`publish` + commit, four
//! at a time) and of readers (a 100-row xmin read from the middle):
//!
//! 1. without retention, for a few seconds;
//! 2. while one retention pass runs (`batch` × `max_rounds` rows at most);
//! 3. without retention again.
//!
//! Prints p50/p99 of (1 + 3) against (2) and their ratios, what the pass deleted, and checks
//! that every row after the lagging cursor survived. Speed is never asserted; a pass that
//! deleted more than `batch × max_rounds` rows or a needed row fails the run.
//!
//! Arguments: `[rows] [batch] [max_rounds] [pause_ms]`, default `1000000 5000 20 250`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use outbox_core::{NewEvent, Position};
use outbox_pg::sqlx::{self, PgPool};
use outbox_pg::testkit::{TestDb, set_cursor};
use outbox_pg::{ReadRequest, read_page};
use outbox_workers::retention::{RetentionConfig, pass};
use parking_lot::Mutex;
use serde_json::json;

const PUBLISHERS: usize = 4;
const QUIET: Duration = Duration::from_secs(3);

/// The measurement, in the process `outbox-bench retention` starts (`measure-retention`):
/// `rows`, then optionally the pass's batch, rounds and pause in milliseconds.
pub(crate) async fn run(args: &[String]) {
    let mut args = args.iter().map(|a| a.parse::<u64>().expect("a number"));
    let rows = args.next().unwrap_or(1_000_000);
    let batch = args.next().unwrap_or(5000);
    let max_rounds = args.next().unwrap_or(20);
    let pause = Duration::from_millis(args.next().unwrap_or(250));
    let db = TestDb::new().await;
    let pool = db.pool.clone();
    let started = Instant::now();
    fill(&pool, rows).await;
    println!("bench retention: {rows} rows in 100 transactions, filled in {:.1?}", started.elapsed());
    let head = position_at(&pool, rows - 1).await;
    let lagging = position_at(&pool, rows * 6 / 10).await;
    set_cursor(&pool, "sink:ahead", head).await.expect("a cursor");
    set_cursor(&pool, "sink:lagging", lagging).await.expect("a cursor");
    sqlx::query("VACUUM ANALYZE outbox").execute(&pool).await.unwrap();
    outbox_pg::internal::clock::advance(&pool, Duration::from_secs(7200)).await.unwrap();
    let middle = position_at(&pool, rows * 8 / 10).await;

    let before = measure(&pool, middle, Load::For(QUIET)).await;
    let config = RetentionConfig { batch, max_rounds, pause, ..RetentionConfig::default() };
    let pass_pool = pool.clone();
    let during = measure(&pool, middle, Load::While(Box::pin(async move { pass(&pass_pool, &config).await }))).await;
    let after = measure(&pool, middle, Load::For(QUIET)).await;
    let report = during.pass.expect("the pass ran");

    let quiet = Samples::merge(&before, &after);
    println!(
        "bench retention: one pass deleted {} rows in {} statements ({:.1?}), at most {batch} x {max_rounds} = {}",
        report.deleted,
        report.statements,
        during.elapsed,
        batch * max_rounds
    );
    println!("{:<34} {:>12} {:>12} {:>8}", "", "without", "during pass", "ratio");
    for (label, quiet, busy) in [
        ("publish + commit p50 (ms)", quiet.publish.percentile(50.0), during.samples.publish.percentile(50.0)),
        ("publish + commit p99 (ms)", quiet.publish.percentile(99.0), during.samples.publish.percentile(99.0)),
        ("read 100 rows p50 (ms)", quiet.read.percentile(50.0), during.samples.read.percentile(50.0)),
        ("read 100 rows p99 (ms)", quiet.read.percentile(99.0), during.samples.read.percentile(99.0)),
    ] {
        println!("{label:<34} {quiet:>12.3} {busy:>12.3} {:>8.2}", busy / quiet);
    }
    println!(
        "{:<34} {:>12} {:>12}",
        "samples (publishes / reads)",
        format!("{} / {}", quiet.publish.0.len(), quiet.read.0.len()),
        format!("{} / {}", during.samples.publish.0.len(), during.samples.read.0.len())
    );

    assert!(report.deleted <= batch * max_rounds, "a pass deleted more than batch x max_rounds");
    let kept: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox WHERE (txid, seq) > ($1::text::xid8, $2)")
        .bind(lagging.txid.to_string())
        .bind(i64::try_from(lagging.seq).unwrap())
        .fetch_one(&pool)
        .await
        .unwrap();
    let published = (quiet.publish.0.len() + during.samples.publish.0.len()) as u64;
    assert_eq!(kept as u64, rows - rows * 6 / 10 - 1 + published, "every row the lagging cursor needs survived");
    println!("bench retention: every row after the lagging cursor survived ({kept})");
}

/// `rows` events in 100 transactions, written by `INSERT … SELECT` in the outbox's shape.
async fn fill(pool: &PgPool, rows: u64) {
    let per = rows.div_ceil(100);
    for chunk in 0..100 {
        let n = per.min(rows.saturating_sub(chunk * per));
        sqlx::query(
            "INSERT INTO outbox (topic, payload)
             SELECT 'node.joined', jsonb_build_object('id', 'evt_' || lpad(i::text, 26, '0'), 'tenantId', 'tenant-' || (i % 100),
                    'subject', 'node/n' || i, 'time', '2026-01-01T00:00:00.000Z', 'data', jsonb_build_object('n', i))
             FROM generate_series($1::bigint, $2::bigint) i",
        )
        .bind(i64::try_from(chunk * per).unwrap())
        .bind(i64::try_from(chunk * per + n).unwrap() - 1)
        .execute(pool)
        .await
        .unwrap();
    }
}

async fn position_at(pool: &PgPool, offset: u64) -> Position {
    outbox_pg::testkit::position_at(pool, offset).await.expect("reading a position").expect("a row at the offset")
}

/// Latencies in milliseconds.
#[derive(Default, Clone)]
struct Latencies(Vec<f64>);

impl Latencies {
    fn percentile(&self, p: f64) -> f64 {
        let mut sorted = self.0.clone();
        sorted.sort_by(f64::total_cmp);
        let index = ((p / 100.0) * (sorted.len().max(1) - 1) as f64).round() as usize;
        sorted.get(index).copied().unwrap_or(f64::NAN)
    }
}

#[derive(Default, Clone)]
struct Samples {
    publish: Latencies,
    read: Latencies,
}

impl Samples {
    fn merge(a: &Measured, b: &Measured) -> Samples {
        let mut merged = a.samples.clone();
        merged.publish.0.extend(&b.samples.publish.0);
        merged.read.0.extend(&b.samples.read.0);
        merged
    }
}

type PassFuture =
    std::pin::Pin<Box<dyn Future<Output = outbox_workers::Result<outbox_workers::retention::PassReport>> + Send>>;

enum Load {
    For(Duration),
    While(PassFuture),
}

struct Measured {
    samples: Samples,
    elapsed: Duration,
    pass: Option<outbox_workers::retention::PassReport>,
}

/// Runs publishers and a reader until `load` ends, recording each call's latency.
async fn measure(pool: &PgPool, middle: Position, load: Load) -> Measured {
    let stop = Arc::new(AtomicBool::new(false));
    let samples = Arc::new(Mutex::new(Samples::default()));
    let mut tasks = Vec::new();
    for publisher in 0..PUBLISHERS {
        let (pool, stop, samples) = (pool.clone(), stop.clone(), samples.clone());
        tasks.push(tokio::spawn(async move {
            let event = NewEvent::new("node.status", "tenant-1", format!("node/p{publisher}"), json!({ "ok": true }));
            while !stop.load(Ordering::Relaxed) {
                let started = Instant::now();
                let mut tx = pool.begin().await.unwrap();
                outbox_pg::publish(&mut *tx, &event).await.unwrap();
                tx.commit().await.unwrap();
                samples.lock().publish.0.push(started.elapsed().as_secs_f64() * 1e3);
            }
        }));
    }
    let (reader_pool, reader_stop, reader_samples) = (pool.clone(), stop.clone(), samples.clone());
    tasks.push(tokio::spawn(async move {
        while !reader_stop.load(Ordering::Relaxed) {
            let started = Instant::now();
            read_page(&reader_pool, &ReadRequest::all().after(Some(middle)).limit(100)).await.unwrap();
            reader_samples.lock().read.0.push(started.elapsed().as_secs_f64() * 1e3);
        }
    }));
    let started = Instant::now();
    let pass = match load {
        Load::For(duration) => {
            tokio::time::sleep(duration).await;
            None
        }
        Load::While(pass) => Some(pass.await.expect("the pass")),
    };
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
    let samples = samples.lock().clone();
    Measured { samples, elapsed, pass }
}
