//! Two workers race for one sink's lease with random pauses (SPEC §7.1, §7.2).
//!
//! Each worker is a dispatcher on its own single-threaded runtime and thread, so a pause
//! (a blocking sleep inside its sink, longer than the lease's TTL) freezes the whole worker,
//! lease renewal included, as a stopped process or a long GC pause would. The other worker
//! then takes the lease; when the paused one wakes up, its delivery has "succeeded" and it
//! tries to record it. Triggers in the test database keep, in commit order, every cursor
//! write with the lease that fenced it and every lease acquisition.
//!
//! The race runs for `OUTBOX_LEASE_RACE_SECS` seconds (default 30).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use outbox_core::{Event, Position};
use outbox_pg::sqlx::postgres::PgConnectOptions;
use outbox_pg::testkit::TestDb;
use outbox_workers::{BackoffPolicy, Dispatcher, DispatcherConfig, LocalState, SinkSpec};
use rand::Rng;

use crate::support::{ScriptedSink, Written, all_events, cursor_of, history, numbered, publish, record_history};

const TTL: Duration = Duration::from_millis(300);

fn race_length() -> Duration {
    let seconds = std::env::var("OUTBOX_LEASE_RACE_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(30);
    Duration::from_secs(seconds)
}

/// A sink that, every few calls, freezes its whole worker for longer than the lease lasts.
fn pausing_sink() -> ScriptedSink {
    let calls = AtomicU64::new(0);
    ScriptedSink::new("race", move |_batch: &[Event]| {
        let n = calls.fetch_add(1, Ordering::Relaxed);
        let pause = {
            let mut rng = rand::rng();
            (n % 5 == 4).then(|| Duration::from_millis(rng.random_range(350..700)))
        };
        if let Some(pause) = pause {
            // Deliberately blocking: the worker's runtime (and its lease renewal) stops too.
            std::thread::sleep(pause);
        }
        Ok(())
    })
}

/// Runs one worker until `stop`, on its own thread and runtime; returns what it delivered and its state.
/// Its connections carry `application_name = <holder>`, so the history names the writer.
fn worker(url: String, label: &str, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<(Vec<Event>, LocalState)> {
    let holder = crate::support::unique(&format!("race-{label}-"));
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(async move {
            let options: PgConnectOptions = url.parse().expect("test database URL");
            let options = options.application_name(&holder);
            // The pool options of the `outbox` server, as each worker stands in for one.
            let pool = outbox_pg::pool::options().max_connections(4).connect_with(options).await.expect("worker pool");
            let config = DispatcherConfig {
                holder,
                lease_ttl: TTL,
                lease_renew: Duration::from_millis(80),
                lease_retry: Duration::from_millis(20),
                poll_interval: Duration::from_millis(10),
                backoff: BackoffPolicy { initial: Duration::from_millis(10), max: Duration::from_millis(50) },
                shutdown_grace: Duration::from_secs(2),
                ..DispatcherConfig::default()
            };
            let sink = pausing_sink();
            let spec = SinkSpec::new(sink.clone()).batch(20);
            let dispatcher = Dispatcher::start(pool, config, vec![spec]).expect("start");
            while !stop.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let state = dispatcher.local_state("race").expect("state");
            dispatcher.shutdown().await;
            (sink.delivered(), state)
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_racing_for_one_lease_never_move_the_cursor_back_and_the_loser_never_commits() {
    let db = TestDb::new().await;
    record_history(&db.pool, "race").await;
    let stop = Arc::new(AtomicBool::new(false));
    let workers = [worker(db.url.clone(), "a", stop.clone()), worker(db.url.clone(), "b", stop.clone())];

    let started = Instant::now();
    let mut published = 0;
    while started.elapsed() < race_length() {
        let n = rand::rng().random_range(1..=8);
        publish(&db.pool, &numbered(n)).await;
        published += n;
        tokio::time::sleep(Duration::from_millis(rand::rng().random_range(5..30))).await;
    }
    let events = drain(&db, published).await;
    stop.store(true, Ordering::SeqCst);
    let results: Vec<(Vec<Event>, LocalState)> =
        workers.into_iter().map(|w| w.join().expect("worker thread")).collect();

    let history = history(&db.pool).await;
    check_history(&history);
    let holders: BTreeSet<&str> = history
        .iter()
        .filter_map(|w| match w {
            Written::Lease { holder, .. } => Some(holder.as_str()),
            Written::Cursor { .. } => None,
        })
        .collect();
    assert_eq!(holders.len(), 2, "both workers should have held the lease: {holders:?}");
    let fenced_out: u64 = results.iter().map(|(_, state)| state.fenced_out).sum();
    assert!(fenced_out > 0, "no worker ever tried to record after losing its lease: the race did not test the fence");

    let delivered: BTreeSet<Position> = results.iter().flat_map(|(d, _)| d.iter().map(|e| e.sequence)).collect();
    let missing: Vec<Position> = events.iter().map(|e| e.sequence).filter(|p| !delivered.contains(p)).collect();
    assert!(missing.is_empty(), "events never delivered: {missing:?}");
    eprintln!(
        "lease race: {} events, {} cursor writes, {} lease changes, {fenced_out} fenced-out writes",
        events.len(),
        crate::support::cursor_writes(&history).len(),
        history.len() - crate::support::cursor_writes(&history).len(),
    );
}

/// Waits until the cursor reaches the last of `published` events; returns them all.
async fn drain(db: &TestDb, published: usize) -> Vec<Event> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let events = all_events(&db.pool).await;
        let last = events.last().map(|e| e.sequence);
        if events.len() == published && cursor_of(&db.pool, "race").await == last {
            return events;
        }
        assert!(Instant::now() < deadline, "the workers did not catch up with the last event");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every cursor write moves forward and is made under the lease acquired last.
fn check_history(history: &[Written]) {
    let mut current: Option<(&str, i64)> = None;
    let mut last_position = None;
    for (at, written) in history.iter().enumerate() {
        match written {
            Written::Lease { holder, epoch } => {
                if let Some((_, previous)) = current {
                    assert_eq!(*epoch, previous + 1, "epochs must grow by one at #{at}");
                }
                current = Some((holder, *epoch));
            }
            Written::Cursor { position, writer, holder, epoch } => {
                assert_eq!(
                    Some(writer.as_str()),
                    current.map(|(holder, _)| holder),
                    "cursor write #{at} to {position} was committed by {writer}, not by the current holder {current:?}"
                );
                assert_eq!(Some((holder.as_str(), *epoch)), current, "the fence saw another lease at #{at}");
                assert!(
                    last_position.is_none_or(|last| last < *position),
                    "cursor write #{at} moved backwards or stood still: {last_position:?} -> {position}"
                );
                last_position = Some(*position);
            }
        }
    }
}
