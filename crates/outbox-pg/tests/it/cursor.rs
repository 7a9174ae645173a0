//! Durable cursors: fenced saves that never move backwards, and lag.

use std::time::Duration;

use outbox_core::{Pattern, Position};
use outbox_pg::ReadRequest;
use outbox_pg::internal::clock;
use outbox_pg::internal::cursor::{self, Durability, OUTBOX_STREAM, Saved, sink_name};
use outbox_pg::internal::lease::{acquire, dispatch_name};
use outbox_pg::publish_many;
use outbox_pg::testkit::TestDb;
use serde_json::json;

use crate::support::{event, read_until};

const TTL: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_cursor_moves_forward_only_and_only_under_its_lease() {
    let db = TestDb::new().await;
    let name = sink_name("billing");
    assert_eq!(name, "sink:billing");
    assert_eq!(cursor::load(&db.pool, OUTBOX_STREAM, &name).await.unwrap(), None);

    let a = acquire(&db.pool, &dispatch_name("billing"), "a", TTL).await.unwrap().unwrap();
    let save = |lease, to| {
        let pool = db.pool.clone();
        let name = name.clone();
        async move { cursor::save(&pool, &lease, OUTBOX_STREAM, &name, to, Durability::Flushed).await.unwrap() }
    };
    assert_eq!(save(a.clone(), Position::new(10, 5)).await, Saved::Moved);
    assert_eq!(save(a.clone(), Position::new(10, 7)).await, Saved::Moved);
    assert_eq!(save(a.clone(), Position::new(9, 100)).await, Saved::AlreadyPast(Position::new(10, 7)));
    assert_eq!(save(a.clone(), Position::new(10, 7)).await, Saved::AlreadyPast(Position::new(10, 7)));
    assert_eq!(cursor::load(&db.pool, OUTBOX_STREAM, &name).await.unwrap(), Some(Position::new(10, 7)));

    // a loses the lease to b: a's save writes nothing, b's moves the cursor.
    clock::advance(&db.pool, TTL * 2).await.unwrap();
    let b = acquire(&db.pool, &dispatch_name("billing"), "b", TTL).await.unwrap().unwrap();
    assert_eq!(save(a, Position::new(11, 1)).await, Saved::LeaseLost);
    assert_eq!(cursor::load(&db.pool, OUTBOX_STREAM, &name).await.unwrap(), Some(Position::new(10, 7)));
    assert_eq!(save(b, Position::new(11, 2)).await, Saved::Moved);
    assert_eq!(cursor::load(&db.pool, OUTBOX_STREAM, &name).await.unwrap(), Some(Position::new(11, 2)));
}

#[tokio::test]
async fn an_ordinal_moves_with_its_position_in_the_same_fenced_save_and_only_then() {
    let db = TestDb::new().await;
    let name = sink_name("stream");
    let a = acquire(&db.pool, &dispatch_name("stream"), "a", TTL).await.unwrap().unwrap();
    let mark =
        || async { cursor::load_mark(&db.pool, OUTBOX_STREAM, &name).await.unwrap().map(|m| (m.position, m.ordinal)) };
    let save = |lease, to, ordinal| {
        let (pool, name) = (db.pool.clone(), name.clone());
        async move {
            cursor::save_numbered(&pool, &lease, OUTBOX_STREAM, &name, to, ordinal, Durability::Flushed).await.unwrap()
        }
    };
    assert_eq!(mark().await, None);
    assert_eq!(save(a.clone(), Position::new(10, 5), Some(3)).await, Saved::Moved);
    assert_eq!(mark().await, Some((Position::new(10, 5), 3)));
    // A save that does not move the position does not move the ordinal either.
    assert_eq!(save(a.clone(), Position::new(10, 5), Some(9)).await, Saved::AlreadyPast(Position::new(10, 5)));
    assert_eq!(mark().await, Some((Position::new(10, 5), 3)));
    // A save without an ordinal (a skip over other rows) keeps it.
    assert_eq!(save(a.clone(), Position::new(10, 8), None).await, Saved::Moved);
    assert_eq!(mark().await, Some((Position::new(10, 8), 3)));

    let letter_event = publish_and_read_one(&db).await;
    let letter = outbox_pg::internal::dead_letter::NewDeadLetter {
        sink: "stream",
        event: &letter_event,
        error: "too large",
        attempts: 5,
        failing_for: Duration::from_secs(1),
    };
    let to = (Position::new(12, 1), Some(5));
    let saved =
        cursor::save_with_letter_numbered(&db.pool, &a, OUTBOX_STREAM, &name, to, &letter, Durability::Relaxed).await;
    assert_eq!(saved.unwrap(), Saved::Moved);
    assert_eq!(mark().await, Some((Position::new(12, 1), 5)));

    // A lost lease saves neither.
    clock::advance(&db.pool, TTL * 2).await.unwrap();
    let _b = acquire(&db.pool, &dispatch_name("stream"), "b", TTL).await.unwrap().unwrap();
    assert_eq!(save(a, Position::new(13, 1), Some(6)).await, Saved::LeaseLost);
    assert_eq!(mark().await, Some((Position::new(12, 1), 5)));
}

async fn publish_and_read_one(db: &TestDb) -> outbox_core::Event {
    let mut tx = db.pool.begin().await.unwrap();
    publish_many(&mut *tx, &[crate::support::numbered(1)]).await.unwrap();
    tx.commit().await.unwrap();
    read_until(&db.pool, ReadRequest::all(), 1).await.remove(0)
}

#[tokio::test]
async fn positions_compare_as_numbers_in_the_database_too() {
    let db = TestDb::new().await;
    let a = acquire(&db.pool, &dispatch_name("x"), "a", TTL).await.unwrap().unwrap();
    let name = sink_name("x");
    let save = |to| cursor::save(&db.pool, &a, OUTBOX_STREAM, &name, to, Durability::Relaxed);
    assert_eq!(save(Position::new(9, 10)).await.unwrap(), Saved::Moved);
    assert_eq!(save(Position::new(10, 2)).await.unwrap(), Saved::Moved);
    assert_eq!(save(Position::new(9, 99)).await.unwrap(), Saved::AlreadyPast(Position::new(10, 2)));
    let big = Position::new(u64::from(u32::MAX) + 5, 3);
    assert_eq!(save(big).await.unwrap(), Saved::Moved);
    assert_eq!(cursor::load(&db.pool, OUTBOX_STREAM, &name).await.unwrap(), Some(big));
}

#[tokio::test]
async fn lag_counts_visible_matching_events_after_a_cursor() {
    let db = TestDb::new().await;
    let batch: Vec<_> = (0..12)
        .map(|n| event(["node.joined", "reservation.active"][n % 2], ["acme", "globex"][n % 3 % 2], json!({"n": n})))
        .collect();
    publish_many(&db.pool, &batch).await.unwrap();
    let events = read_until(&db.pool, ReadRequest::all(), 12).await;
    assert_eq!(events.len(), 12);

    let lag = |request: ReadRequest, cap| {
        let pool = db.pool.clone();
        async move { cursor::lag(&pool, &request, cap).await.unwrap() }
    };
    assert_eq!(lag(ReadRequest::all(), 100).await, 12);
    assert_eq!(lag(ReadRequest::all(), 5).await, 5, "the count stops at the cap");
    assert_eq!(lag(ReadRequest::all().after(events[8].sequence), 100).await, 3);
    let acme = events.iter().filter(|e| e.tenant_id == "acme").count() as u64;
    assert_eq!(lag(ReadRequest::tenant("acme"), 100).await, acme);
    let reservations = ReadRequest::all().types([Pattern::parse("reservation.*").unwrap()]);
    assert_eq!(lag(reservations, 100).await, 6);
    assert_eq!(lag(ReadRequest::all().after(events[11].sequence), 100).await, 0);
}
