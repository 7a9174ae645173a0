//! The shared tail and its followers (SPEC §5.6), without HTTP: followers that start at
//! random moments and positions, with tiny inboxes, while a writer publishes with slow and
//! rolled-back transactions, each get exactly their matching events, once, in order, and
//! their positions pass the last row even when their filter matched nothing near it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use outbox_core::{Event, NewEvent, Pattern, Position};
use outbox_pg::ReadRequest;
use outbox_pg::internal::read::head;
use outbox_pg::tail::{Follower, Tail, TailOptions};
use outbox_pg::testkit::{TestDb, read_to_end, settle};
use rand::Rng;
use serde_json::json;
use tokio::sync::watch;

const TENANTS: [&str; 3] = ["acme", "globex", "initech"];
const TYPES: [&str; 3] = ["node.joined", "node.left", "pool.resized"];

async fn writer(pool: sqlx::PgPool, stop: Arc<AtomicBool>) {
    let mut n = 0;
    while !stop.load(Ordering::SeqCst) {
        let (tenant, size, hold, roll_back) = {
            let mut rng = rand::rng();
            (rng.random_range(0..3), rng.random_range(1..=4), rng.random_bool(0.1), rng.random_bool(0.15))
        };
        let batch: Vec<NewEvent> = (0..size)
            .map(|k| {
                n += 1;
                NewEvent::new(TYPES[(n + k) % 3], TENANTS[tenant], "node/n1", json!({"n": n, "rolledBack": roll_back}))
            })
            .collect();
        let mut tx = pool.begin().await.expect("begin");
        outbox_pg::publish_many(&mut *tx, &batch).await.expect("publish");
        if hold {
            tokio::time::sleep(Duration::from_millis(30)).await; // a slow transaction, still open
        }
        if roll_back {
            tx.rollback().await.expect("rollback");
        } else {
            tx.commit().await.expect("commit");
        }
    }
}

/// Follows until its position reaches `target`, as a stream or subscriber does.
async fn follow(mut follower: Follower, mut target: watch::Receiver<Option<Position>>) -> (Vec<Event>, Position) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut received = Vec::new();
    loop {
        let done = *target.borrow_and_update();
        if done.is_some_and(|done| follower.position() >= done) {
            return (received, follower.position());
        }
        assert!(Instant::now() < deadline, "a follower never reached {done:?}: {follower:?}");
        if follower.read_due() {
            received.extend(follower.read().await.expect("read").iter().map(|e| e.event().clone()));
            continue;
        }
        let taken = follower.take();
        if !taken.is_empty() {
            received.extend(taken.iter().map(|e| e.event().clone()));
            continue;
        }
        // A live follower's position follows the tail's only when it takes: look again now
        // and then, as a stream does before each keep-alive.
        tokio::select! {
            () = follower.ready() => {}
            _ = target.changed() => {}
            () = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
    }
}

async fn everything(pool: &sqlx::PgPool, request: &ReadRequest, after: Position) -> Vec<Event> {
    read_to_end(pool, &request.clone().after(after)).await.expect("read")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn followers_get_exactly_their_events_from_any_start() {
    let db = TestDb::new().await;
    let tail = Tail::new(db.pool.clone(), TailOptions { poll: Duration::from_millis(5), batch: 7 });
    let stop = Arc::new(AtomicBool::new(false));
    let writing = tokio::spawn(writer(db.pool.clone(), stop.clone()));
    let (set_target, target) = watch::channel(None);
    let mut followers = Vec::new();
    for _ in 0..40 {
        let (tenant, pattern, capacity, from_start) = {
            let mut rng = rand::rng();
            let pattern = ["*", "node.*", "pool.resized", "*.left"][rng.random_range(0..4)];
            (rng.random_range(0..4), pattern, rng.random_range(1..8), rng.random_bool(0.3))
        };
        let mut request = ReadRequest::all().types([Pattern::parse(pattern).unwrap()]).limit(5);
        if tenant < 3 {
            request.tenant_id = Some(TENANTS[tenant].to_owned());
        }
        let start = if from_start { Position::START } else { head(&db.pool).await.expect("head") };
        let follower = Follower::new(db.pool.clone(), request.clone(), start).on_tail(tail.clone(), capacity);
        followers.push((request, start, tokio::spawn(follow(follower, target.clone()))));
        tokio::time::sleep(Duration::from_millis(rand::rng().random_range(0..40))).await; // join at random moments
    }
    stop.store(true, Ordering::SeqCst);
    writing.await.expect("the writer");
    // Every committed row visible first (other tests' transactions hold xmin back).
    let last = settle(&db.pool, Duration::from_secs(30)).await;
    set_target.send_replace(Some(last));

    for (request, start, handle) in followers {
        let (received, position) = handle.await.expect("a follower");
        let expected = everything(&db.pool, &request, start).await;
        let ids = |events: &[Event]| events.iter().map(|e| e.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&received), ids(&expected), "{:?} {:?} from {start}", request.tenant_id, request.patterns);
        assert!(received.iter().all(|e| e.data.value()["rolledBack"] == false));
        assert!(position >= last, "the position passes the last row, matching or not");
    }
    assert!(tail.detached() > 0, "some tiny inbox overflowed and its follower fell back to its own reads");
}

/// A failed read of the tail lets every member go and is counted apart from overflows; the
/// follower then reads on its own, joins again once reads work, and misses nothing.
#[tokio::test]
async fn a_failed_tail_read_lets_every_member_go_and_is_counted() {
    let db = TestDb::new().await;
    let tail = Tail::new(db.pool.clone(), TailOptions { poll: Duration::from_millis(20), ..TailOptions::default() });
    let start = head(&db.pool).await.expect("head");
    let mut follower =
        Follower::new(db.pool.clone(), ReadRequest::all(), start).on_tail(tail.clone(), 100).complete_at_start();
    assert!(follower.is_live() && tail.members() == 1);

    sqlx::query("ALTER TABLE outbox RENAME TO outbox_away").execute(&db.pool).await.expect("rename");
    // Nothing is published meanwhile: the member's inbox wakes only when the tail lets it go.
    let patience = Duration::from_secs(30);
    tokio::time::timeout(patience, follower.ready()).await.expect("the tail never let the member go");
    assert_eq!(tail.failed_reads(), 1, "the failed read was not counted");
    assert!(!follower.is_live(), "the member was not let go");
    assert_eq!((tail.members(), tail.detached()), (0, 0), "a failed read is not an overflow");
    sqlx::query("ALTER TABLE outbox_away RENAME TO outbox").execute(&db.pool).await.expect("rename back");

    let batch: Vec<NewEvent> =
        (0..3).map(|n| NewEvent::new("node.joined", "acme", "node/n1", json!({"n": n}))).collect();
    let mut tx = db.pool.begin().await.expect("begin");
    outbox_pg::publish_many(&mut *tx, &batch).await.expect("publish");
    tx.commit().await.expect("commit");
    settle(&db.pool, Duration::from_secs(30)).await;
    let deadline = Instant::now() + patience;
    let mut received = Vec::new();
    while received.len() < 3 {
        if follower.read_due() {
            received.extend(follower.read().await.expect("read").iter().map(|e| e.event().clone()));
            continue;
        }
        received.extend(follower.take().iter().map(|e| e.event().clone()));
        if received.len() < 3 {
            let left = deadline.saturating_duration_since(Instant::now());
            tokio::time::timeout(left, follower.ready()).await.expect("the follower never caught up");
        }
    }
    let numbers: Vec<u64> = received.iter().map(|e| e.data.value()["n"].as_u64().unwrap()).collect();
    assert_eq!(numbers, [0, 1, 2]);
    assert_eq!(tail.members(), 1, "it joined the tail again");
}
