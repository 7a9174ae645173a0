//! Many writers with slow and rolled-back transactions while a reader pages with the xmin read.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use outbox_core::{Event, NewEvent};
use outbox_pg::publish_many;
use outbox_pg::testkit::TestDb;
use outbox_pg::{ReadRequest, read_page};
use rand::Rng;
use serde_json::json;
use std::sync::Mutex;

const WRITERS: usize = 8;
const WRITE_FOR: Duration = Duration::from_secs(5);

#[derive(Default)]
struct Ledger {
    committed: HashSet<String>,
    rolled_back: HashSet<String>,
}

async fn writer(pool: sqlx::PgPool, id: usize, ledger: Arc<Mutex<Ledger>>) {
    let stop = Instant::now() + WRITE_FOR;
    let mut n = 0;
    while Instant::now() < stop {
        let (size, hold_ms, roll_back) = {
            let mut rng = rand::rng();
            (rng.random_range(1..=3), rng.random_range(0..=200), rng.random_bool(0.2))
        };
        let batch: Vec<NewEvent> = (0..size)
            .map(|_| {
                n += 1;
                NewEvent::new("node.joined", "acme", format!("node/w{id}"), json!({"writer": id, "n": n}))
            })
            .collect();
        let mut tx = pool.begin().await.expect("begin");
        let ids = publish_many(&mut *tx, &batch).await.expect("publish");
        tokio::time::sleep(Duration::from_millis(hold_ms)).await;
        if roll_back {
            tx.rollback().await.expect("rollback");
            ledger.lock().unwrap().rolled_back.extend(ids);
        } else {
            tx.commit().await.expect("commit");
            ledger.lock().unwrap().committed.extend(ids);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_paging_reader_sees_exactly_the_committed_events_once_in_order() {
    let db = TestDb::new().await;
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let writers: Vec<_> = (0..WRITERS).map(|id| tokio::spawn(writer(db.pool.clone(), id, ledger.clone()))).collect();

    let mut seen: Vec<Event> = Vec::new();
    let mut request = ReadRequest::all().limit(50);
    let mut reads_while_writing = 0;
    // The reader polls like a live stream does: at once while rows are waiting, else every 10 ms.
    let mut poll = tokio::time::interval(Duration::from_millis(10));
    while writers.iter().any(|w| !w.is_finished()) {
        let page = read_page(&db.pool, &request).await.expect("read");
        request.after = Some(page.next_after);
        let caught_up = !page.more;
        reads_while_writing += usize::from(!page.events.is_empty());
        seen.extend(page.events);
        if caught_up {
            poll.tick().await;
        }
    }
    for w in writers {
        w.await.unwrap();
    }
    let (committed, rolled_back) = {
        let ledger = ledger.lock().unwrap();
        (ledger.committed.clone(), ledger.rolled_back.clone())
    };
    // Drain: every writer has finished, so the rest becomes visible once other tests' older
    // transactions on the same server end.
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.len() < committed.len() && Instant::now() < deadline {
        let page = read_page(&db.pool, &request).await.expect("read");
        request.after = Some(page.next_after);
        let caught_up = !page.more;
        seen.extend(page.events);
        if caught_up {
            poll.tick().await;
        }
    }

    assert!(reads_while_writing > 10, "the reader received events while writers wrote ({reads_while_writing} pages)");
    assert!(committed.len() > 100, "writers committed {} events", committed.len());
    assert!(!rolled_back.is_empty(), "some transactions rolled back");
    let ids: Vec<&String> = seen.iter().map(|e| &e.id).collect();
    let unique: HashSet<&String> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "no event was seen twice");
    let leaked: Vec<&&String> = unique.iter().filter(|id| rolled_back.contains(**id)).collect();
    assert!(leaked.is_empty(), "rolled-back events were read: {leaked:?}");
    let missing = committed.iter().filter(|id| !unique.contains(id)).count();
    assert_eq!(missing, 0, "{missing} of {} committed events were never read", committed.len());
    assert_eq!(unique.len(), committed.len());
    assert!(seen.windows(2).all(|w| w[0].sequence < w[1].sequence), "events arrived in (txid, seq) order");
}
