//! Dead letters: recorded with the cursor in one fenced transaction; listed, replayed, discarded.

use std::time::Duration;

use outbox_core::Event;
use outbox_pg::ReadRequest;
use outbox_pg::internal::clock;
use outbox_pg::internal::cursor::{self, Durability, OUTBOX_STREAM, Saved, sink_name};
use outbox_pg::internal::dead_letter::{self, ListRequest, NewDeadLetter};
use outbox_pg::internal::lease::{Lease, acquire, begin_fenced, dispatch_name};
use outbox_pg::publish_many;
use outbox_pg::testkit::TestDb;

use crate::support::{numbered, read_until};

const TTL: Duration = Duration::from_secs(30);

async fn setup(db: &TestDb, n: usize) -> (Lease, Vec<Event>) {
    let batch: Vec<_> = (0..n).map(numbered).collect();
    publish_many(&db.pool, &batch).await.unwrap();
    let events = read_until(&db.pool, ReadRequest::all(), n).await;
    let lease = acquire(&db.pool, &dispatch_name("billing"), "a", TTL).await.unwrap().unwrap();
    (lease, events)
}

async fn dead_letter(db: &TestDb, lease: &Lease, event: &Event, attempts: u32) -> Option<i64> {
    let mut fenced = begin_fenced(&db.pool, lease).await.unwrap()?;
    let letter = NewDeadLetter {
        sink: "billing",
        event,
        error: "HTTP 400: no such account",
        attempts,
        failing_for: Duration::from_secs(90),
    };
    let id = dead_letter::record(&mut fenced, &letter).await.unwrap();
    cursor::advance(&mut fenced, OUTBOX_STREAM, &sink_name("billing"), event.sequence).await.unwrap();
    fenced.commit().await.unwrap();
    Some(id)
}

#[tokio::test]
async fn a_dead_letter_is_written_with_the_cursor_move_and_keeps_the_whole_event() {
    let db = TestDb::new().await;
    let (lease, events) = setup(&db, 3).await;
    let id = dead_letter(&db, &lease, &events[1], 5).await.unwrap();

    let cursor = cursor::load(&db.pool, OUTBOX_STREAM, &sink_name("billing")).await.unwrap();
    assert_eq!(cursor, Some(events[1].sequence));
    let letter = dead_letter::get(&db.pool, "billing", id).await.unwrap().expect("written");
    assert_eq!(letter.event, events[1]);
    assert_eq!(letter.position, events[1].sequence);
    assert_eq!((letter.attempts, letter.error.as_str()), (5, "HTTP 400: no such account"));
    assert_eq!(letter.last_failed_at - letter.first_failed_at, time::Duration::seconds(90));
    assert_eq!(letter.replayed_at, None);
    assert!(dead_letter::get(&db.pool, "other", id).await.unwrap().is_none(), "ids are per sink");
}

#[tokio::test]
async fn a_lost_lease_writes_no_dead_letter() {
    let db = TestDb::new().await;
    let (lease, events) = setup(&db, 1).await;
    clock::advance(&db.pool, TTL * 2).await.unwrap();
    assert_eq!(dead_letter(&db, &lease, &events[0], 5).await, None);
    assert!(dead_letter::list(&db.pool, &ListRequest::pending("billing")).await.unwrap().is_empty());
}

#[tokio::test]
async fn dead_letters_are_listed_replayed_and_discarded() {
    let db = TestDb::new().await;
    let (lease, events) = setup(&db, 4).await;
    let first = dead_letter(&db, &lease, &events[0], 5).await.unwrap();
    let second = dead_letter(&db, &lease, &events[2], 5).await.unwrap();
    let pending = dead_letter::list(&db.pool, &ListRequest::pending("billing")).await.unwrap();
    assert_eq!(pending.iter().map(|l| l.id).collect::<Vec<_>>(), [first, second]);
    assert_eq!(dead_letter::count_pending(&db.pool).await.unwrap(), [("billing".to_owned(), 2)]);

    assert!(dead_letter::mark_replayed(&db.pool, "billing", first).await.unwrap());
    assert!(!dead_letter::mark_replayed(&db.pool, "billing", first).await.unwrap(), "marked twice");
    let pending = dead_letter::list(&db.pool, &ListRequest::pending("billing")).await.unwrap();
    assert_eq!(pending.iter().map(|l| l.id).collect::<Vec<_>>(), [second]);
    let all = ListRequest { include_replayed: true, ..ListRequest::pending("billing") };
    let all = dead_letter::list(&db.pool, &all).await.unwrap();
    assert_eq!(all.len(), 2);
    assert!(all[0].replayed_at.is_some());
    let paged = ListRequest { include_replayed: true, after_id: Some(first), limit: 10, sink: None };
    assert_eq!(dead_letter::list(&db.pool, &paged).await.unwrap().len(), 1);

    assert!(dead_letter::discard(&db.pool, "billing", second).await.unwrap());
    assert!(!dead_letter::discard(&db.pool, "billing", second).await.unwrap());
    assert!(dead_letter::count_pending(&db.pool).await.unwrap().is_empty());
}

#[tokio::test]
async fn recording_the_same_event_again_adds_attempts_and_clears_the_replay() {
    let db = TestDb::new().await;
    let (lease, events) = setup(&db, 1).await;
    let id = dead_letter(&db, &lease, &events[0], 5).await.unwrap();
    dead_letter::mark_replayed(&db.pool, "billing", id).await.unwrap();
    let again = dead_letter(&db, &lease, &events[0], 3).await.unwrap();
    assert_eq!(again, id);
    let letter = dead_letter::get(&db.pool, "billing", id).await.unwrap().unwrap();
    assert_eq!((letter.attempts, letter.replayed_at), (8, None));
}

fn letter(event: &Event) -> NewDeadLetter<'_> {
    NewDeadLetter { sink: "billing", event, error: "HTTP 400", attempts: 5, failing_for: Duration::from_secs(1) }
}

#[tokio::test]
async fn saving_with_a_letter_writes_both_under_the_lease_or_neither() {
    let db = TestDb::new().await;
    let (lease, events) = setup(&db, 3).await;
    let name = sink_name("billing");
    let save = |lease, index: usize, to: usize, durability| {
        let (pool, name, event, to) = (db.pool.clone(), name.clone(), events[index].clone(), events[to].sequence);
        async move {
            cursor::save_with_letter(&pool, &lease, OUTBOX_STREAM, &name, to, &letter(&event), durability)
                .await
                .unwrap()
        }
    };
    assert_eq!(save(lease.clone(), 0, 1, Durability::Relaxed).await, Saved::Moved);
    assert_eq!(cursor::load(&db.pool, OUTBOX_STREAM, &name).await.unwrap(), Some(events[1].sequence));
    let behind = save(lease.clone(), 0, 0, Durability::Flushed).await;
    assert_eq!(behind, Saved::AlreadyPast(events[1].sequence), "the letter is written, the cursor stays");
    let pending = dead_letter::list(&db.pool, &ListRequest::pending("billing")).await.unwrap();
    assert_eq!((pending.len(), pending[0].attempts), (1, 10));

    clock::advance(&db.pool, TTL * 2).await.unwrap();
    assert_eq!(save(lease, 2, 2, Durability::Relaxed).await, Saved::LeaseLost);
    assert_eq!(cursor::load(&db.pool, OUTBOX_STREAM, &name).await.unwrap(), Some(events[1].sequence));
    assert_eq!(dead_letter::list(&db.pool, &ListRequest::pending("billing")).await.unwrap().len(), 1);
}
