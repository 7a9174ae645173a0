//! The dispatcher: order, filters, durable cursors, leases between dispatchers, shutdown, state.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::future::BoxFuture;
use outbox_core::{Event, NewEvent, Pattern, Position};
use outbox_pg::internal::lease::{self, dispatch_name};
use outbox_workers::{Dispatcher, DispatcherConfig, Sink, SinkError, SinkFilter, SinkSpec, SinkState, sink_status};
use serde_json::json;
use tokio::sync::Notify;

use crate::support::{
    DEADLINE, ScriptedSink, cursor_of, cursor_writes, db, fast_config, history, numbered, publish_and_read,
    record_history, wait_for,
};

#[tokio::test]
async fn delivers_every_event_once_in_order_and_saves_the_cursor() {
    let db = db().await;
    let events = publish_and_read(&db.pool, &numbered(250)).await;
    let sink = ScriptedSink::accepting("orders");
    let dispatcher =
        Dispatcher::start(db.pool.clone(), fast_config(), vec![SinkSpec::new(sink.clone()).batch(40)]).expect("start");
    let last = events.last().unwrap().sequence;
    wait_for("the cursor to reach the last event", || async { cursor_of(&db.pool, "orders").await == Some(last) })
        .await;
    assert_eq!(sink.delivered(), events);
    assert!(sink.calls().iter().all(|call| call.ok && call.positions.len() <= 40));

    let status = &dispatcher.status().await.unwrap()[0];
    assert_eq!((status.position, status.lag, status.dead_letters), (Some(last), 0, 0));
    assert_eq!(status.lease_holder.as_deref(), Some(dispatcher.holder()));
    wait_for("the sink to go idle", || async { dispatcher.status().await.unwrap()[0].state == SinkState::Idle }).await;
    dispatcher.shutdown().await;
}

/// A read takes several batches at once; each still goes to the sink on its own and has its
/// own cursor save, in order, with nothing coalesced or skipped.
#[tokio::test]
async fn every_batch_of_a_page_is_a_call_of_its_own_and_saved_in_order() {
    let db = db().await;
    record_history(&db.pool, "pages").await;
    let events = publish_and_read(&db.pool, &numbered(203)).await;
    let sink = ScriptedSink::accepting("pages");
    let dispatcher =
        Dispatcher::start(db.pool.clone(), fast_config(), vec![SinkSpec::new(sink.clone()).batch(25)]).expect("start");
    let last = events.last().unwrap().sequence;
    wait_for("the cursor to reach the last event", || async { cursor_of(&db.pool, "pages").await == Some(last) }).await;
    dispatcher.shutdown().await;

    assert_eq!(sink.delivered(), events);
    let calls = sink.calls();
    let sizes: Vec<usize> = calls.iter().map(|call| call.positions.len()).collect();
    let expected: Vec<usize> = events.chunks(25).map(<[Event]>::len).collect();
    assert_eq!(sizes, expected, "every call but the last is a full batch");
    let batch_ends: Vec<Position> = calls.iter().map(|call| *call.positions.last().unwrap()).collect();
    assert_eq!(cursor_writes(&history(&db.pool).await), batch_ends, "one save per batch, in order");
}

#[tokio::test]
async fn a_sink_gets_its_tenant_and_types_only_and_its_cursor_still_passes_the_rest() {
    let db = db().await;
    let mixed: Vec<NewEvent> = (0..60)
        .map(|n| {
            let kind = ["reservation.active", "node.joined", "reservation.ended"][n % 3];
            NewEvent::new(kind, ["acme", "globex"][n % 2], "reservation/r1", json!({ "n": n }))
        })
        .collect();
    let events = publish_and_read(&db.pool, &mixed).await;
    let acme = ScriptedSink::accepting("acme-reservations");
    let nothing = ScriptedSink::accepting("nothing");
    let specs = vec![
        SinkSpec::new(acme.clone()).tenant("acme").types([Pattern::parse("reservation.*").unwrap()]).batch(7),
        SinkSpec::new(nothing.clone()).tenant("initech"),
    ];
    let dispatcher = Dispatcher::start(db.pool.clone(), fast_config(), specs).unwrap();
    let last = events.last().unwrap().sequence;
    for id in ["acme-reservations", "nothing"] {
        wait_for("both cursors to pass every row", || async { cursor_of(&db.pool, id).await == Some(last) }).await;
    }
    let expected: Vec<Event> =
        events.iter().filter(|e| e.tenant_id == "acme" && e.event_type.starts_with("reservation.")).cloned().collect();
    assert_eq!(acme.delivered(), expected);
    assert!(nothing.calls().is_empty(), "a sink whose filter matches nothing was called");
    dispatcher.shutdown().await;
}

#[tokio::test]
async fn a_restarted_dispatcher_resumes_from_the_durable_cursor() {
    let db = db().await;
    let first_half = publish_and_read(&db.pool, &numbered(30)).await;
    let sink = ScriptedSink::accepting("resume");
    let dispatcher = Dispatcher::start(db.pool.clone(), fast_config(), vec![SinkSpec::new(sink.clone())]).unwrap();
    let mid = first_half.last().unwrap().sequence;
    wait_for("the first half", || async { cursor_of(&db.pool, "resume").await == Some(mid) }).await;
    dispatcher.shutdown().await;

    let all = publish_and_read(&db.pool, &numbered(20)).await;
    let again = ScriptedSink::accepting("resume");
    let dispatcher = Dispatcher::start(db.pool.clone(), fast_config(), vec![SinkSpec::new(again.clone())]).unwrap();
    let last = all.last().unwrap().sequence;
    wait_for("the second half", || async { cursor_of(&db.pool, "resume").await == Some(last) }).await;
    assert_eq!(again.delivered(), all[30..].to_vec(), "the second dispatcher started after the saved cursor");
    dispatcher.shutdown().await;
}

#[tokio::test]
async fn one_dispatcher_holds_a_sink_and_another_takes_over_when_it_leaves() {
    let db = db().await;
    let events = publish_and_read(&db.pool, &numbered(20)).await;
    let a = ScriptedSink::accepting("shared");
    let b = ScriptedSink::accepting("shared");
    let first = Dispatcher::start(db.pool.clone(), fast_config(), vec![SinkSpec::new(a.clone())]).unwrap();
    let last = events.last().unwrap().sequence;
    wait_for("a to deliver", || async { cursor_of(&db.pool, "shared").await == Some(last) }).await;
    let second = Dispatcher::start(db.pool.clone(), fast_config(), vec![SinkSpec::new(b.clone())]).unwrap();
    wait_for("b to stand by", || async {
        second.local_state("shared").is_some_and(|s| s.activity == outbox_workers::Activity::Standby)
    })
    .await;
    let status = &second.status().await.unwrap()[0];
    assert_eq!(status.state, SinkState::Idle, "held by the first dispatcher and caught up");
    assert_eq!(status.lease_holder.as_deref(), Some(first.holder()));

    first.shutdown().await;
    let more = publish_and_read(&db.pool, &numbered(5)).await;
    let last = more.last().unwrap().sequence;
    wait_for("b to take over", || async { cursor_of(&db.pool, "shared").await == Some(last) }).await;
    assert_eq!(b.delivered(), more[20..].to_vec());
    assert_eq!(a.delivered(), events);
    let held = lease::get(&db.pool, &dispatch_name("shared")).await.unwrap().unwrap();
    assert_eq!((held.holder.as_deref(), held.epoch), (Some(second.holder()), 2));
    second.shutdown().await;
}

/// A sink whose deliveries wait for the test's word (or forever).
#[derive(Clone)]
struct HeldSink {
    started: Arc<Notify>,
    release: Arc<Notify>,
    finished: Arc<AtomicBool>,
}

impl Sink for HeldSink {
    fn id(&self) -> &str {
        "held"
    }

    fn deliver<'a>(&'a self, _batch: &'a [Event]) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async move {
            self.started.notify_one();
            self.release.notified().await;
            self.finished.store(true, Ordering::SeqCst);
            Ok(())
        })
    }
}

fn held() -> HeldSink {
    HeldSink { started: Arc::default(), release: Arc::default(), finished: Arc::default() }
}

/// A sink whose `prepare` never finishes, counting its calls: deliveries must not wait for it.
#[derive(Clone)]
struct NeverReady {
    inner: ScriptedSink,
    prepared: Arc<AtomicUsize>,
}

impl Sink for NeverReady {
    fn id(&self) -> &str {
        self.inner.id()
    }

    fn deliver<'a>(&'a self, batch: &'a [Event]) -> BoxFuture<'a, Result<(), SinkError>> {
        self.inner.deliver(batch)
    }

    fn prepare(&self) -> BoxFuture<'_, Result<(), SinkError>> {
        self.prepared.fetch_add(1, Ordering::SeqCst);
        Box::pin(std::future::pending())
    }
}

/// `prepare` starts with each lease and runs beside the work: a sink that never gets ready
/// still receives everything, and a new lease holder prepares again.
#[tokio::test]
async fn each_lease_starts_the_sinks_prepare_and_no_delivery_waits_for_it() {
    let db = db().await;
    let events = publish_and_read(&db.pool, &numbered(30)).await;
    let sink = NeverReady { inner: ScriptedSink::accepting("eager"), prepared: Arc::default() };
    let first = Dispatcher::start(db.pool.clone(), fast_config(), vec![SinkSpec::new(sink.clone()).batch(10)]).unwrap();
    let last = events.last().unwrap().sequence;
    wait_for("every event despite prepare", || async { cursor_of(&db.pool, "eager").await == Some(last) }).await;
    assert_eq!(sink.inner.delivered(), events);
    assert_eq!(sink.prepared.load(Ordering::SeqCst), 1, "one prepare for one lease");
    first.shutdown().await;

    let second = Dispatcher::start(db.pool.clone(), fast_config(), vec![SinkSpec::new(sink.clone())]).unwrap();
    wait_for("the next holder prepares", || async { sink.prepared.load(Ordering::SeqCst) == 2 }).await;
    second.shutdown().await;
}

/// `Dispatcher::watch` wakes on each change of a sink's state, so a caller waits for a
/// position without polling; the last value it sees is the state `local_state` reports.
#[tokio::test]
async fn a_sinks_state_can_be_watched_until_it_reaches_a_position() {
    let db = db().await;
    let events = publish_and_read(&db.pool, &numbered(45)).await;
    let sink = ScriptedSink::accepting("watched");
    let dispatcher =
        Dispatcher::start(db.pool.clone(), fast_config(), vec![SinkSpec::new(sink.clone()).batch(10)]).unwrap();
    assert!(dispatcher.watch("nobody").is_none());
    let mut changes = dispatcher.watch("watched").expect("the sink runs here");
    let mut seen = Vec::new();
    let last = events.last().unwrap().sequence;
    while seen.last() != Some(&Some(last)) {
        tokio::time::timeout(DEADLINE, changes.changed()).await.expect("a change in time").expect("the loop runs");
        let position = changes.borrow_and_update().position;
        if seen.last() != Some(&position) {
            seen.push(position);
        }
    }
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "the watched position went back: {seen:?}");
    assert_eq!(dispatcher.local_state("watched").unwrap().position, Some(last));
    assert_eq!(sink.delivered(), events);
    dispatcher.shutdown().await;
}

#[tokio::test]
async fn shutdown_abandons_a_batch_that_outlasts_the_grace_period_and_releases_the_lease() {
    let db = db().await;
    publish_and_read(&db.pool, &numbered(3)).await;
    let sink = held();
    let config = DispatcherConfig { shutdown_grace: Duration::from_millis(200), ..fast_config() };
    let dispatcher = Dispatcher::start(db.pool.clone(), config, vec![SinkSpec::new(sink.clone())]).unwrap();
    sink.started.notified().await;
    dispatcher.shutdown().await;

    assert!(!sink.finished.load(Ordering::SeqCst));
    assert_eq!(cursor_of(&db.pool, "held").await, None, "an abandoned batch moved the cursor");
    let lease = lease::get(&db.pool, &dispatch_name("held")).await.unwrap().unwrap();
    assert_eq!((lease.holder, lease.held), (None, false), "the lease was not released");
}

#[tokio::test]
async fn shutdown_records_a_batch_that_finishes_within_the_grace_period() {
    let db = db().await;
    let events = publish_and_read(&db.pool, &numbered(3)).await;
    let sink = held();
    let dispatcher = Dispatcher::start(db.pool.clone(), fast_config(), vec![SinkSpec::new(sink.clone())]).unwrap();
    sink.started.notified().await;
    let stopping = tokio::spawn(async move { dispatcher.shutdown().await });
    sink.release.notify_one();
    stopping.await.unwrap();
    assert!(sink.finished.load(Ordering::SeqCst));
    assert_eq!(cursor_of(&db.pool, "held").await, Some(events[2].sequence));
    assert!(!lease::get(&db.pool, &dispatch_name("held")).await.unwrap().unwrap().held);
}

#[tokio::test]
async fn a_failing_sink_reports_backing_off_with_its_last_error_and_recovers() {
    let db = db().await;
    let events = publish_and_read(&db.pool, &numbered(4)).await;
    let up = Arc::new(AtomicBool::new(false));
    let switch = up.clone();
    let sink = ScriptedSink::new("flaky", move |_| {
        if switch.load(Ordering::SeqCst) { Ok(()) } else { Err(SinkError::retryable("connection refused")) }
    });
    let config = DispatcherConfig {
        backoff: outbox_workers::BackoffPolicy { initial: Duration::from_secs(1), max: Duration::from_secs(2) },
        ..fast_config()
    };
    let dispatcher = Dispatcher::start(db.pool.clone(), config, vec![SinkSpec::new(sink.clone())]).unwrap();
    wait_for("backing off", || async { dispatcher.status().await.unwrap()[0].state == SinkState::BackingOff }).await;
    let status = &dispatcher.status().await.unwrap()[0];
    assert_eq!(status.last_error.as_deref(), Some("connection refused"));
    assert!(status.backing_off_until.is_some());
    assert_eq!((status.lag, status.position, status.dead_letters), (4, None, 0));
    let shown = serde_json::to_value(status).unwrap();
    assert_eq!(shown["state"], "backingOff");
    assert_eq!(shown["lastError"], "connection refused");
    assert!(shown["backingOffUntil"].as_str().unwrap().ends_with('Z'));

    // Any process sees the same, from what the lease holder reported.
    let elsewhere = sink_status(&db.pool, "flaky", &SinkFilter::default(), 1, None).await.unwrap();
    assert_eq!(elsewhere.state, SinkState::BackingOff);
    assert_eq!(elsewhere.last_error.as_deref(), Some("connection refused"));
    assert_eq!(elsewhere.lease_holder.as_deref(), Some(dispatcher.holder()));
    assert!(elsewhere.backing_off_until.is_some());

    up.store(true, Ordering::SeqCst);
    let last = events.last().unwrap().sequence;
    wait_for("recovery", || async { cursor_of(&db.pool, "flaky").await == Some(last) }).await;
    assert_eq!(sink.delivered(), events);
    wait_for("the recovery to be reported", || async {
        let elsewhere = sink_status(&db.pool, "flaky", &SinkFilter::default(), 1, None).await.unwrap();
        elsewhere.state == SinkState::Idle && elsewhere.backing_off_until.is_none()
    })
    .await;
    let elsewhere = sink_status(&db.pool, "flaky", &SinkFilter::default(), 1, None).await.unwrap();
    assert_eq!(elsewhere.last_error.as_deref(), Some("connection refused"), "the last error stays");
    dispatcher.shutdown().await;
}

#[tokio::test]
async fn start_refuses_bad_and_duplicate_sinks() {
    let db = db().await;
    let duplicate = vec![SinkSpec::new(ScriptedSink::accepting("a")), SinkSpec::new(ScriptedSink::accepting("a"))];
    let error = Dispatcher::start(db.pool.clone(), fast_config(), duplicate).err().unwrap();
    assert_eq!(error.to_string(), "invalid configuration: sinks[a].id: is not unique");
    let bad_id = vec![SinkSpec::new(ScriptedSink::accepting("Bad Id"))];
    assert!(Dispatcher::start(db.pool.clone(), fast_config(), bad_id).is_err());
    let big = vec![SinkSpec::new(ScriptedSink::accepting("big")).batch(1_001)];
    let error = Dispatcher::start(db.pool.clone(), fast_config(), big).err().unwrap();
    assert!(error.to_string().contains("sinks[big].batch"), "{error}");
}

#[tokio::test]
async fn a_loop_that_ends_without_a_shutdown_is_reported() {
    let db = db().await;
    publish_and_read(&db.pool, &numbered(1)).await;
    let boom = ScriptedSink::new("boom", |_| panic!("a sink that panics"));
    let fine = ScriptedSink::accepting("fine");
    let specs = vec![SinkSpec::new(boom), SinkSpec::new(fine)];
    let dispatcher = Dispatcher::start(db.pool.clone(), fast_config(), specs).unwrap();
    wait_for("the panicking loop to end", || async { !dispatcher.ended_loops().is_empty() }).await;
    assert_eq!(dispatcher.ended_loops(), ["boom"]);
    dispatcher.shutdown().await;
    assert!(dispatcher.ended_loops().is_empty(), "after a shutdown, ended loops are expected");
}
