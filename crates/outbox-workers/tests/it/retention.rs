//! Retention (SPEC §9): what a pass deletes, what it keeps, the lease, and readers that
//! resume from a pruned position. The clock moves with `compute_now()`'s offset.

use std::sync::atomic::Ordering;
use std::time::Duration;

use outbox_core::Position;
use outbox_pg::internal::{clock, lease, retention::LEASE};
use outbox_pg::sqlx::PgPool;
use outbox_workers::retention::{Holders, Retention, RetentionConfig, pass};
use outbox_workers::{Dispatcher, SinkSpec};

use crate::support::{ScriptedSink, all_events, db, fast_config, numbered, publish, publish_and_read, wait_for};

const TWO_HOURS: Duration = Duration::from_secs(7200);

/// Sets the durable cursor `name` of the outbox to `at`, as a consumer's save would.
pub(crate) async fn set_cursor(pool: &PgPool, name: &str, at: Position) {
    outbox_pg::testkit::set_cursor(pool, name, at).await.expect("set cursor");
}

fn config(batch: u64, max_rounds: u64) -> RetentionConfig {
    RetentionConfig { batch, max_rounds, every: Duration::from_millis(20), ..RetentionConfig::default() }
}

#[tokio::test]
async fn nothing_is_pruned_without_a_durable_cursor() {
    let db = db().await;
    publish_and_read(&db.pool, &numbered(50)).await;
    clock::advance(&db.pool, TWO_HOURS).await.unwrap();
    let report = pass(&db.pool, &config(1000, 20)).await.unwrap();
    assert_eq!((report.deleted, report.bound), (0, None));
    assert_eq!(all_events(&db.pool).await.len(), 50);
}

/// Two sink cursors: the lagging one bounds the pass; a pass deletes at most
/// `batch × max_rounds`; young rows stay.
#[tokio::test]
async fn a_pass_deletes_only_old_rows_every_cursor_passed_in_bounded_rounds() {
    let db = db().await;
    let events = publish_and_read(&db.pool, &numbered(300)).await;
    set_cursor(&db.pool, "sink:ahead", events[299].sequence).await;
    set_cursor(&db.pool, "sink:behind", events[149].sequence).await;

    let young = pass(&db.pool, &config(40, 20)).await.unwrap();
    assert_eq!(young.deleted, 0, "nothing is older than min_age yet");

    clock::advance(&db.pool, TWO_HOURS).await.unwrap();
    let bounded = pass(&db.pool, &config(40, 2)).await.unwrap();
    assert_eq!((bounded.deleted, bounded.statements, bounded.more), (80, 2, true));
    assert_eq!(bounded.bound.unwrap().name, "sink:behind");

    let rest = pass(&db.pool, &config(40, 20)).await.unwrap();
    assert_eq!(rest.deleted, 70);
    assert!(!rest.more);
    let left = all_events(&db.pool).await;
    assert_eq!(left, events[150..].to_vec(), "the rows the lagging cursor still needs survive");
}

#[tokio::test]
async fn a_young_row_stops_the_walk() {
    let db = db().await;
    publish(&db.pool, &numbered(30)).await;
    clock::advance(&db.pool, TWO_HOURS).await.unwrap();
    let events = publish_and_read(&db.pool, &numbered(20)).await;
    set_cursor(&db.pool, "sink:all", events[49].sequence).await;
    let report = pass(&db.pool, &config(1000, 20)).await.unwrap();
    assert_eq!(report.deleted, 30);
    assert_eq!(all_events(&db.pool).await, events[30..].to_vec());
}

/// A disabled sink's cursor does not hold retention; re-enabled, the sink resumes with the
/// oldest row still stored, without an error.
#[tokio::test]
async fn a_disabled_sink_does_not_hold_and_resumes_from_the_oldest_row() {
    let db = db().await;
    let events = publish_and_read(&db.pool, &numbered(100)).await;
    set_cursor(&db.pool, "sink:live", events[79].sequence).await;
    set_cursor(&db.pool, "sink:paused", events[9].sequence).await;
    clock::advance(&db.pool, TWO_HOURS).await.unwrap();

    let only_live = RetentionConfig { holders: Holders::EnabledSinks(vec!["live".into()]), ..config(1000, 20) };
    assert_eq!(pass(&db.pool, &only_live).await.unwrap().deleted, 80);

    let sink = ScriptedSink::accepting("paused");
    let dispatcher = Dispatcher::start(db.pool.clone(), fast_config(), vec![SinkSpec::new(sink.clone())]).unwrap();
    wait_for("the re-enabled sink to deliver what is left", || async { sink.delivered().len() >= 20 }).await;
    dispatcher.shutdown().await;
    assert_eq!(sink.delivered(), events[80..].to_vec(), "it starts with the oldest row still stored");
}

/// The loop runs under `singleton:core.retention`: one process holds it, the other waits,
/// and shutdown releases it.
#[tokio::test]
async fn the_loop_runs_under_the_lease() {
    let db = db().await;
    let events = publish_and_read(&db.pool, &numbered(60)).await;
    set_cursor(&db.pool, "sink:all", events[59].sequence).await;
    clock::advance(&db.pool, TWO_HOURS).await.unwrap();

    let first = Retention::start(db.pool.clone(), RetentionConfig { holder: "first".into(), ..config(25, 1) }).unwrap();
    wait_for("the first loop to hold the lease", || async { first.stats().holding.load(Ordering::Relaxed) }).await;
    let second = Retention::start(db.pool.clone(), config(25, 1)).unwrap();
    wait_for("every row to be pruned over several passes", || async { all_events(&db.pool).await.is_empty() }).await;
    // The last pass's count lands after its DELETE commits, so the table empties first.
    wait_for("the last pass to be counted", || async { first.stats().rows_deleted.load(Ordering::Relaxed) >= 60 })
        .await;
    assert_eq!(first.stats().rows_deleted.load(Ordering::Relaxed), 60);
    assert!(first.stats().passes.load(Ordering::Relaxed) >= 3, "25 rows per pass");
    assert!(!second.stats().holding.load(Ordering::Relaxed));
    assert_eq!(second.stats().passes.load(Ordering::Relaxed), 0);
    assert!(first.is_running());

    first.shutdown().await;
    let row = lease::get(&db.pool, LEASE).await.unwrap().unwrap();
    assert_ne!(row.holder.as_deref(), Some("first"), "released on shutdown");
    wait_for("the second loop to take over", || async { second.stats().holding.load(Ordering::Relaxed) }).await;
    let row = lease::get(&db.pool, LEASE).await.unwrap().unwrap();
    assert_eq!(row.epoch, 2, "a new holder, a new epoch");
    second.shutdown().await;
}
