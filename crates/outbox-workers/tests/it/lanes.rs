//! Ordered lanes (SPEC §7.7) against a real PostgreSQL and a real receiver on loopback: a
//! laned webhook sink and a laned subscription keep every subject's order under concurrent,
//! slow and rolled-back writers; two processes split a sink's lanes and the survivor of a
//! crash delivers the rest; a poison event holds back its own lane only; changing the count
//! of lanes loses nothing.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use outbox_core::{Event, NewEvent, Position};
use outbox_pg::internal::cursor::{self, Mark, OUTBOX_STREAM, sink_name};
use outbox_pg::internal::dead_letter::{self, ListRequest};
use outbox_pg::internal::seal::SealKey;
use outbox_pg::internal::webhook::{self as store, NewWebhook, Patch};
use outbox_pg::sqlx::PgPool;
use outbox_pg::subject_lane;
use outbox_workers::config::{SinkConfig, SinkKind, build_spec};
use outbox_workers::{Dispatcher, DispatcherConfig, WebhookDeliveries};
use serde_json::json;

use crate::support::{all_events, db, fast_config, own_pool, publish_and_read, wait_for};
use crate::webhook::{Received, Receiver, delayed, secret, status};

/// A webhook sink of `lanes` lanes POSTing to `url`.
fn laned_webhook(id: &str, url: &str, lanes: u32) -> SinkConfig {
    let mut config = SinkConfig::new(id, SinkKind::Webhook);
    config.url = Some(url.into());
    config.secret = Some(secret());
    config.lanes = lanes;
    config
}

/// `count` events of tenant `acme` over `subjects` subjects, numbered from `first`.
fn spread(first: usize, count: usize, subjects: usize) -> Vec<NewEvent> {
    (first..first + count)
        .map(|n| NewEvent::new("node.joined", "acme", format!("node/s{}", n % subjects), json!({ "n": n })))
        .collect()
}

/// What [`concurrent_writers`] commits: six writers of twelve committed transactions of eight.
const COMMITTED: usize = 6 * 12 * 8;

/// Six writers at once, each committing 15 transactions of 8 events over 40 subjects; every
/// fourth transaction rolls back and every third waits before it commits, so commits
/// overtake one another while the consumer reads.
async fn concurrent_writers(pool: &PgPool) {
    let writers = (0..6).map(|writer| {
        let pool = pool.clone();
        tokio::spawn(async move {
            for round in 0..15 {
                let first = (writer * 15 + round) * 8;
                let mut tx = pool.begin().await.expect("begin");
                outbox_pg::publish_many(&mut *tx, &spread(first, 8, 40)).await.expect("publish");
                if round % 3 == 0 {
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
                if round % 4 == 3 {
                    tx.rollback().await.expect("rollback");
                } else {
                    tx.commit().await.expect("commit");
                }
            }
        })
    });
    for writer in writers {
        writer.await.expect("a writer");
    }
}

fn subject_of(request: &Received) -> (String, String) {
    let event: Event = serde_json::from_slice(&request.body).expect("an event");
    (event.subject, event.id)
}

/// Each subject's event ids in the order they first arrived (a repeat after a crash is the
/// at-least-once rule, not a new arrival).
fn first_arrivals(requests: &[Received]) -> BTreeMap<String, Vec<String>> {
    let mut seen = HashSet::new();
    let mut subjects: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for request in requests {
        let (subject, id) = subject_of(request);
        if seen.insert(id.clone()) {
            subjects.entry(subject).or_default().push(id);
        }
    }
    subjects
}

/// Each subject's event ids in history order.
fn history_by_subject(events: &[Event]) -> BTreeMap<String, Vec<String>> {
    let mut subjects: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for event in events {
        subjects.entry(event.subject.clone()).or_default().push(event.id.clone());
    }
    subjects
}

/// Waits until the `count` events published are visible and the receiver has had each at
/// least once; then every subject's first arrivals must be its history, in order.
async fn every_subject_in_order(pool: &PgPool, receiver: &Receiver, count: usize) {
    wait_for("every event visible", || async { all_events(pool).await.len() == count }).await;
    let events = all_events(pool).await;
    wait_for("every event received", || async {
        let received: HashSet<String> = receiver.requests().iter().map(|r| r.id().to_owned()).collect();
        events.iter().all(|event| received.contains(&event.id))
    })
    .await;
    let arrived = first_arrivals(&receiver.requests());
    let expected = history_by_subject(&events);
    assert_eq!(arrived.len(), expected.len(), "every subject received");
    for (subject, ids) in &expected {
        assert_eq!(arrived.get(subject), Some(ids), "{subject}: every event once first, in commit order");
    }
}

/// The cursors of consumer `name` in `stream`, by name.
async fn lane_cursors(pool: &PgPool, stream: &str, name: &str) -> BTreeMap<String, Mark> {
    cursor::lane_marks(pool, stream, name).await.expect("lane cursors").into_iter().collect()
}

/// The names of the cursors of consumer `name` in `stream`.
async fn cursor_names(pool: &PgPool, stream: &str, name: &str) -> BTreeSet<String> {
    lane_cursors(pool, stream, name).await.into_keys().collect()
}

/// The expected cursor names of `lanes` lanes of `name`.
fn lane_names(name: &str, lanes: u32) -> BTreeSet<String> {
    (0..lanes).map(|index| format!("{name}#{index}/{lanes}")).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_laned_sink_keeps_every_subjects_order_under_concurrent_writers() {
    let db = db().await;
    let receiver = Receiver::start(|_, _| delayed(204, Duration::from_millis(2))).await;
    let spec = build_spec(&laned_webhook("lanes", &receiver.url, 8)).unwrap();
    let dispatcher = Dispatcher::start(db.pool.clone(), fast_config(), vec![spec]).unwrap();
    concurrent_writers(&db.pool).await;
    every_subject_in_order(&db.pool, &receiver, COMMITTED).await;
    dispatcher.shutdown().await;

    let events = all_events(&db.pool).await;
    let cursors = lane_cursors(&db.pool, OUTBOX_STREAM, &sink_name("lanes")).await;
    assert_eq!(cursors.keys().cloned().collect::<BTreeSet<_>>(), lane_names("sink:lanes", 8), "a cursor per lane");
    for (name, mark) in &cursors {
        let index: u32 = name.split(['#', '/']).nth(1).unwrap().parse().unwrap();
        let last = events.iter().rfind(|e| subject_lane(&e.subject, 8) == Some(index)).unwrap();
        assert!(mark.position >= last.sequence, "{name} passed its lane's last event");
    }
}

/// Deliveries of subscriptions with short leases and a fast refresh, to loopback.
fn delivery_config(dispatcher: DispatcherConfig) -> outbox_workers::WebhookDeliveryConfig {
    outbox_workers::WebhookDeliveryConfig {
        targets: outbox_core::target::TargetPolicy { allow_private: true, allowed: Vec::new() },
        refresh: Duration::from_millis(50),
        max_attempts: 2,
        timeout: Duration::from_secs(5),
        dispatcher,
        ..outbox_workers::WebhookDeliveryConfig::default()
    }
}

async fn laned_subscription(pool: &PgPool, key: &SealKey, url: &str, lanes: u32) -> String {
    let new = NewWebhook {
        url: url.into(),
        types: vec!["node.*".into()],
        metadata: json!({}),
        lanes: Some(lanes),
        ..NewWebhook::default()
    };
    store::create(pool, key, "acme", &new, 100).await.unwrap().0.id
}

fn seal_key() -> Arc<SealKey> {
    Arc::new(SealKey::parse(&SealKey::generate().unwrap()).unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_laned_subscription_keeps_every_subjects_order_and_a_change_to_its_lanes_loses_nothing() {
    let db = db().await;
    let key = seal_key();
    let receiver = Receiver::start(|_, _| delayed(200, Duration::from_millis(2))).await;
    let id = laned_subscription(&db.pool, &key, &receiver.url, 4).await;
    let running = WebhookDeliveries::start(db.pool.clone(), key.clone(), delivery_config(fast_config())).unwrap();
    concurrent_writers(&db.pool).await;
    every_subject_in_order(&db.pool, &receiver, COMMITTED).await;
    assert_eq!(cursor_names(&db.pool, store::CURSOR_STREAM, &id).await, lane_names(&id, 4));

    // 4 → 16 while events keep coming: the new lanes start at the slowest old cursor.
    let writing = tokio::spawn({
        let pool = db.pool.clone();
        async move {
            for round in 0..10 {
                outbox_pg::publish_many(&pool, &spread(10_000 + round * 20, 20, 40)).await.unwrap();
            }
        }
    });
    let patch = Patch { lanes: Some(16), ..Patch::default() };
    let changed = store::update(&db.pool, &key, Some("acme"), &id, &patch).await.unwrap().unwrap();
    assert_eq!(changed.lanes, 16);
    writing.await.unwrap();
    every_subject_in_order(&db.pool, &receiver, COMMITTED + 200).await;
    wait_for("sixteen lane cursors and no other", || async {
        cursor_names(&db.pool, store::CURSOR_STREAM, &id).await == lane_names(&id, 16)
    })
    .await;
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn two_processes_split_sixteen_lanes_and_after_one_dies_the_other_delivers_the_rest() {
    let db = db().await;
    let receiver = Receiver::start(|_, _| delayed(204, Duration::from_millis(5))).await;
    let config = laned_webhook("split", &receiver.url, 16);
    let (first_pool, second_pool) = (own_pool(&db).await, own_pool(&db).await);
    let first = Dispatcher::start(first_pool.clone(), fast_config(), vec![build_spec(&config).unwrap()]).unwrap();
    let second = Dispatcher::start(second_pool, fast_config(), vec![build_spec(&config).unwrap()]).unwrap();
    let holders = || async {
        let rows: Vec<(String, i64)> = outbox_pg::sqlx::query_as(
            "SELECT holder, count(*) FROM outbox_leases
             WHERE starts_with(name, 'singleton:outbox-dispatch:split#') AND holder <> ''
               AND expires_at > compute_now()
             GROUP BY holder ORDER BY holder",
        )
        .fetch_all(&db.pool)
        .await
        .unwrap();
        rows
    };
    wait_for("the lanes split eight and eight", || async {
        let rows = holders().await;
        rows.len() == 2 && rows.iter().all(|(_, lanes)| *lanes == 8)
    })
    .await;

    outbox_pg::publish_many(&db.pool, &spread(0, 1_500, 300)).await.unwrap();
    let received = || receiver.requests().iter().map(|r| r.id().to_owned()).collect::<HashSet<_>>().len();
    wait_for("a third delivered", || async { received() >= 500 }).await;
    drop(first); // like a crash: its lanes' leases stay until they expire
    first_pool.close().await;
    outbox_pg::internal::clock::advance(&db.pool, Duration::from_secs(30)).await.unwrap();
    wait_for("the survivor holding all sixteen", || async {
        let rows = holders().await;
        rows.len() == 1 && rows[0].1 == 16
    })
    .await;
    every_subject_in_order(&db.pool, &receiver, 1_500).await;
    second.shutdown().await;
    assert!(holders().await.is_empty(), "a shutdown gives every lane back");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_poison_event_holds_back_its_own_lane_only_and_is_dead_lettered() {
    let db = db().await;
    let lanes = 8;
    let poison_subject = "node/s0";
    let poison_lane = subject_lane(poison_subject, lanes).unwrap();
    let refuse = Arc::new(AtomicBool::new(false));
    let receiver = Receiver::start({
        let refuse = refuse.clone();
        move |request, _| {
            let event: Event = serde_json::from_slice(&request.body).unwrap();
            if event.data.get() != r#"{"n":0}"# {
                status(204)
            } else if refuse.load(Ordering::SeqCst) {
                status(400)
            } else {
                status(503)
            }
        }
    })
    .await;
    let mut config = laned_webhook("poison", &receiver.url, lanes);
    config.max_attempts = 1_000;
    let dispatcher = Dispatcher::start(db.pool.clone(), fast_config(), vec![build_spec(&config).unwrap()]).unwrap();
    let events = publish_and_read(&db.pool, &spread(0, 400, 40)).await;
    let in_poison_lane = |event: &Event| subject_lane(&event.subject, lanes) == Some(poison_lane);

    // While the poison event is retried, every other lane delivers all of its events.
    wait_for("every other lane delivered", || async {
        let received: HashSet<String> = receiver.requests().iter().map(|r| r.id().to_owned()).collect();
        events.iter().filter(|e| !in_poison_lane(e)).all(|e| received.contains(&e.id))
    })
    .await;
    let poison_lane_ids: HashSet<&str> = events.iter().filter(|e| in_poison_lane(e)).map(|e| e.id.as_str()).collect();
    let arrived_in_lane: HashSet<String> = receiver
        .requests()
        .iter()
        .map(|r| r.id().to_owned())
        .filter(|id| poison_lane_ids.contains(id.as_str()))
        .collect();
    assert_eq!(arrived_in_lane, HashSet::from([events[0].id.clone()]), "its lane waits behind it, in order");

    // Refused for good: dead-lettered, and its lane goes on.
    refuse.store(true, Ordering::SeqCst);
    every_subject_in_order(&db.pool, &receiver, 400).await;
    let letters = dead_letter::list(&db.pool, &ListRequest::pending("poison")).await.unwrap();
    assert_eq!(letters.iter().map(|l| l.event.id.clone()).collect::<Vec<_>>(), vec![events[0].id.clone()]);
    dispatcher.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sink_restarted_with_sixteen_lanes_instead_of_four_loses_nothing() {
    let db = db().await;
    let receiver = Receiver::start(|_, _| delayed(204, Duration::from_millis(3))).await;
    let four = build_spec(&laned_webhook("regrown", &receiver.url, 4)).unwrap();
    let dispatcher = Dispatcher::start(db.pool.clone(), fast_config(), vec![four]).unwrap();
    outbox_pg::publish_many(&db.pool, &spread(0, 1_200, 200)).await.unwrap();
    let received = || receiver.requests().iter().map(|r| r.id().to_owned()).collect::<HashSet<_>>().len();
    wait_for("some delivered", || async { received() >= 200 }).await;
    dispatcher.shutdown().await;
    let four_cursors = lane_cursors(&db.pool, OUTBOX_STREAM, &sink_name("regrown")).await;
    assert_eq!(four_cursors.keys().cloned().collect::<BTreeSet<_>>(), lane_names("sink:regrown", 4));
    let slowest: Position = four_cursors.values().map(|mark| mark.position).min().unwrap();

    let sixteen = build_spec(&laned_webhook("regrown", &receiver.url, 16)).unwrap();
    let dispatcher = Dispatcher::start(db.pool.clone(), fast_config(), vec![sixteen]).unwrap();
    every_subject_in_order(&db.pool, &receiver, 1_200).await;
    dispatcher.shutdown().await;
    let names = cursor_names(&db.pool, OUTBOX_STREAM, &sink_name("regrown")).await;
    assert_eq!(names, lane_names("sink:regrown", 16), "the four are gone");
    // What came again is what followed the slowest of the four cursors, nothing before it.
    let events = all_events(&db.pool).await;
    let mut times: HashMap<String, usize> = HashMap::new();
    for request in receiver.requests() {
        *times.entry(request.id().to_owned()).or_default() += 1;
    }
    for event in &events {
        if event.sequence <= slowest {
            assert_eq!(times[&event.id], 1, "{} was at or before every cursor: delivered once", event.id);
        }
    }
}
