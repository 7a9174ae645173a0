//! In-process subscribers (SPEC §6): fed by the shared tail, from the head, each on its own.

use std::sync::Arc;
use std::time::Duration;

use outbox_core::{Event, NewEvent, Pattern};
use outbox_pg::tail::{Tail, TailOptions};
use outbox_workers::Subscribers;
use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::watch;

use crate::support::{db, publish, publish_and_read, wait_for};

fn tail(db: &outbox_pg::testkit::TestDb) -> Tail {
    Tail::new(db.pool.clone(), TailOptions { poll: Duration::from_millis(20), ..TailOptions::default() })
}

fn pattern(text: &str) -> Pattern {
    Pattern::parse(text).unwrap()
}

fn events(event_type: &str, tenant: &str, from: usize, n: usize) -> Vec<NewEvent> {
    (from..from + n).map(|i| NewEvent::new(event_type, tenant, format!("node/n{i}"), json!({ "n": i }))).collect()
}

/// A handler that keeps what it is given.
#[derive(Clone, Default)]
struct Collected(Arc<Mutex<Vec<Event>>>);

impl Collected {
    fn numbers(&self) -> Vec<u64> {
        self.0.lock().iter().map(|e| e.data.value()["n"].as_u64().unwrap()).collect()
    }

    fn len(&self) -> usize {
        self.0.lock().len()
    }

    fn handler(&self) -> impl Fn(Event) -> std::future::Ready<Result<(), String>> + Send + Sync + 'static {
        let events = self.0.clone();
        move |event| {
            events.lock().push(event);
            std::future::ready(Ok(()))
        }
    }
}

#[tokio::test]
async fn a_failing_or_panicking_handler_does_not_stop_another_or_itself() {
    let db = db().await;
    let subscribers = Subscribers::new(db.pool.clone(), tail(&db));
    let calls = Arc::new(Mutex::new((0_usize, 0_usize)));
    let (panics, fails) = (calls.clone(), calls.clone());
    let _panicking = subscribers
        .subscribe(pattern("*"), move |_event| {
            panics.lock().0 += 1;
            async { panic!("a handler that always panics") as Result<(), String> }
        })
        .await
        .unwrap();
    let _failing = subscribers
        .subscribe(pattern("*"), move |_event| {
            fails.lock().1 += 1;
            std::future::ready(Err::<(), _>("a handler that always fails"))
        })
        .await
        .unwrap();
    let collected = Collected::default();
    let _working = subscribers.subscribe(pattern("*"), collected.handler()).await.unwrap();

    publish(&db.pool, &events("node.joined", "acme", 0, 5)).await;
    wait_for("the working handler has every event", || async { collected.len() == 5 }).await;
    wait_for("the others were called for every event", || async { *calls.lock() == (5, 5) }).await;
    assert_eq!(collected.numbers(), [0, 1, 2, 3, 4]);
}

#[tokio::test]
async fn a_subscriber_sees_only_what_becomes_visible_after_it_subscribed() {
    let db = db().await;
    let subscribers = Subscribers::new(db.pool.clone(), tail(&db));
    let early = Collected::default();
    let _early = subscribers.subscribe(pattern("node.*"), early.handler()).await.unwrap();
    publish_and_read(&db.pool, &events("node.joined", "acme", 0, 3)).await;

    let late = Collected::default();
    let _late = subscribers.subscribe(pattern("node.*"), late.handler()).await.unwrap();
    publish(&db.pool, &events("node.left", "globex", 3, 2)).await;
    publish(&db.pool, &events("reservation.active", "acme", 100, 2)).await;
    publish(&db.pool, &events("node.joined", "initech", 5, 1)).await;
    wait_for("both subscribers reach the last event", || async { early.len() == 6 && late.len() == 3 }).await;
    // In order: had the late one been given an earlier event, it would come first.
    assert_eq!(late.numbers(), [3, 4, 5], "every tenant, only matching types, only after subscribing");
    assert_eq!(early.numbers(), [0, 1, 2, 3, 4, 5]);
}

#[tokio::test]
async fn dropping_a_subscription_unsubscribes() {
    let db = db().await;
    let tail = tail(&db);
    let subscribers = Subscribers::new(db.pool.clone(), tail.clone());
    let (dropped, kept) = (Collected::default(), Collected::default());
    let subscription = subscribers.subscribe(pattern("*"), dropped.handler()).await.unwrap();
    let _kept = subscribers.subscribe(pattern("*"), kept.handler()).await.unwrap();
    publish(&db.pool, &events("node.joined", "acme", 0, 1)).await;
    wait_for("both have the first event", || async { dropped.len() == 1 && kept.len() == 1 }).await;
    wait_for("both are on the tail", || async { tail.members() == 2 }).await;

    drop(subscription);
    wait_for("the dropped one left the tail", || async { tail.members() == 1 }).await;
    publish(&db.pool, &events("node.joined", "acme", 1, 2)).await;
    wait_for("the kept one has the later events", || async { kept.len() == 3 }).await;
    assert_eq!(dropped.numbers(), [0], "nothing after the drop");
}

/// A handler stuck on its first event: its inbox overflows, it leaves the tail, and it
/// catches up with reads of its own: every event once, in order. The other subscriber is
/// not held back meanwhile.
#[tokio::test]
async fn a_slow_subscriber_falls_back_to_its_own_reads_and_misses_nothing() {
    let db = db().await;
    let tail = tail(&db);
    let subscribers = Subscribers::new(db.pool.clone(), tail.clone()).with_buffer(4);
    let (gate, opened) = watch::channel(false);
    let slow = Collected::default();
    let slow_handler = {
        let slow = slow.handler();
        move |event: Event| {
            let mut opened = opened.clone();
            let done = slow(event);
            async move {
                opened.wait_for(|open| *open).await.expect("the gate");
                done.await
            }
        }
    };
    let _slow = subscribers.subscribe(pattern("*"), slow_handler).await.unwrap();
    let fast = Collected::default();
    let _fast = subscribers.subscribe(pattern("*"), fast.handler()).await.unwrap();
    // On the tail first, so that the events come from it rather than from a first read.
    wait_for("both are on the tail", || async { tail.members() == 2 }).await;

    for n in 0..10 {
        publish(&db.pool, &events("node.joined", "acme", n * 5, 5)).await;
    }
    wait_for("the fast subscriber has everything while the slow one is stuck", || async { fast.len() == 50 }).await;
    assert!(slow.len() <= 1, "the slow one is stuck in its first event");
    // It left the tail: its inbox overflowed, or a failed read of the tail let every member go
    // to reads of its own (it may have read on its own and joined again before its handler
    // got stuck; either way nobody waited for it). The overflow itself is asserted by the
    // tail's own tests.
    let (overflowed, failed) = (tail.detached(), tail.failed_reads());
    assert!(
        overflowed + failed >= 1,
        "the slow one never left the tail (inboxes overflowed: {overflowed}, failed tail reads: {failed})"
    );

    gate.send_replace(true);
    wait_for("the slow one caught up", || async { slow.len() == 50 }).await;
    assert_eq!(slow.numbers(), (0..50).collect::<Vec<u64>>());
    wait_for("the slow one joined the tail again", || async { tail.members() == 2 }).await;
    publish(&db.pool, &events("node.joined", "acme", 50, 1)).await;
    wait_for("both have the next event", || async { slow.len() == 51 && fast.len() == 51 }).await;
    assert_eq!(fast.numbers(), (0..51).collect::<Vec<u64>>());
}
