//! Resuming is exact: across random disconnects while writers publish (with slow and
//! rolled-back transactions), and from history into the live stream.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use outbox_core::{Event, NewEvent, Pattern};
use outbox_pg::ReadRequest;
use outbox_pg::sqlx::PgPool;
use outbox_pg::testkit::read_to_end;
use rand::Rng;
use serde_json::json;

use crate::support::{TestServer, events, numbers, publish};

/// The three types writers rotate through; a filter on the first matches a third.
const TYPES: [&str; 3] = ["reservation.active", "node.joined", "pool.resized"];

/// What one writer committed.
struct Written {
    committed: Vec<NewEvent>,
}

/// Publishes `transactions` transactions for `tenant`: most commit at once, some hold their
/// transaction open for a while before committing (so later transactions commit first),
/// some roll back (their events must never appear).
async fn writer(pool: PgPool, tenant: &'static str, writer: usize, transactions: usize) -> Written {
    let mut committed = Vec::new();
    for t in 0..transactions {
        let (size, mode, pause) = {
            let mut rng = rand::rng();
            (rng.random_range(1..=6), rng.random_range(0..100), rng.random_range(20..120))
        };
        let rolled_back = mode < 15;
        let batch: Vec<NewEvent> = (0..size)
            .map(|k| {
                let kind = TYPES[(writer + t + k) % 3];
                let data = json!({"writer": writer, "t": t, "k": k, "rolledBack": rolled_back});
                NewEvent::new(kind, tenant, format!("node/w{writer}"), data)
            })
            .collect();
        let mut tx = pool.begin().await.expect("begin");
        outbox_pg::publish_many(&mut *tx, &batch).await.expect("publish");
        if mode >= 85 {
            tokio::time::sleep(Duration::from_millis(pause)).await; // a slow transaction, still open
        }
        if rolled_back {
            tx.rollback().await.expect("rollback");
        } else {
            tx.commit().await.expect("commit");
            committed.extend(batch);
        }
        tokio::task::yield_now().await;
    }
    Written { committed }
}

/// Every event of `tenant` matching `patterns`, read with the xmin rule to the visible end.
async fn everything(pool: &PgPool, tenant: &str, patterns: &[Pattern]) -> Vec<Event> {
    read_to_end(pool, &ReadRequest::tenant(tenant).types(patterns.to_vec())).await.expect("read")
}

async fn check_exact_resume(filter: Option<&str>) {
    let server = TestServer::start().await;
    let writers: Vec<_> = (0..4)
        .map(|w| tokio::spawn(writer(server.pool().clone(), "acme", w, 60)))
        .chain([tokio::spawn(writer(server.pool().clone(), "globex", 9, 30))])
        .collect();

    let query = match filter {
        Some(types) => format!("?types={types}&cursor=0.0"),
        None => "?cursor=0.0".to_owned(),
    };
    let mut received: Vec<Event> = Vec::new();
    for _connection in 0..=20 {
        let headers: Vec<(&str, String)> =
            received.last().map(|e| ("last-event-id", e.sequence.dotted())).into_iter().collect();
        let mut stream = server.watch(&query, "acme:read", &headers).await;
        // Disconnect after a few events (often in the middle of a transaction's batch) or at a
        // random moment (possibly in the middle of a frame), whichever comes first.
        let (stay, take) = {
            let mut rng = rand::rng();
            (Duration::from_millis(rng.random_range(0..150)), rng.random_range(1..=6))
        };
        let _ = tokio::time::timeout(stay, async {
            for _ in 0..take {
                received.extend(stream.events(1).await);
            }
        })
        .await;
    }

    let mut committed = Vec::new();
    for handle in writers {
        committed.extend(handle.await.expect("a writer").committed);
    }
    server.settle().await;
    let patterns: Vec<Pattern> = filter.map(|f| vec![Pattern::parse(f).unwrap()]).unwrap_or_default();
    let expected = everything(server.pool(), "acme", &patterns).await;
    let acme_committed = committed.iter().filter(|e| e.tenant_id == "acme");
    let matching = acme_committed.filter(|e| patterns.is_empty() || patterns[0].matches(&e.event_type)).count();
    assert_eq!(expected.len(), matching, "the outbox holds exactly the committed events");
    assert!(expected.len() > 30, "enough events to make the test mean something: {}", expected.len());

    // The last connection reads up to the last event.
    let headers: Vec<(&str, String)> =
        received.last().map(|e| ("last-event-id", e.sequence.dotted())).into_iter().collect();
    let mut stream = server.watch(&query, "acme:read", &headers).await;
    let last = expected.last().map(|e| e.sequence);
    while received.last().map(|e| e.sequence) < last {
        received.extend(stream.events(1).await);
    }

    let ids = |events: &[Event]| events.iter().map(|e| (e.sequence, e.id.clone())).collect::<Vec<_>>();
    assert_eq!(ids(&received), ids(&expected), "every event exactly once, in order");
    assert!(received.iter().all(|e| e.tenant_id == "acme" && e.data.value()["rolledBack"] == false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn resume_is_exact_across_random_disconnects_while_writers_publish() {
    check_exact_resume(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_filtered_stream_resumes_exactly_too() {
    check_exact_resume(Some("reservation.*")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn history_then_live_has_no_gap() {
    let server = TestServer::start().await;
    server.publish(&events("node.joined", "acme", 0, 120)).await;
    server.publish(&events("node.joined", "acme", 120, 130)).await;
    // A writer keeps publishing while the client pages and then opens the stream.
    let stop = Arc::new(AtomicBool::new(false));
    let batches = Arc::new(AtomicUsize::new(0));
    let background = {
        let (pool, stop, batches) = (server.pool().clone(), stop.clone(), batches.clone());
        tokio::spawn(async move {
            let mut n = 1_000;
            while !stop.load(Ordering::SeqCst) {
                publish(&pool, &events("node.joined", "acme", n, 3)).await;
                batches.fetch_add(1, Ordering::SeqCst);
                n += 3;
            }
        })
    };

    let mut history = Vec::new();
    let mut path = "/events?limit=100".to_owned();
    loop {
        let reply = server.get(&path, Some("acme:read")).await;
        history.extend(reply.events());
        match reply.json()["cursor"].as_str() {
            Some(cursor) => path = format!("/events?limit=100&cursor={cursor}"),
            None => break,
        }
    }
    assert!(history.len() >= 250);
    // The last item's sequence; a page cursor would be the colon form, which also works as a dot.
    let last_event_id = history.last().unwrap().sequence.colon().replace(':', ".");
    let mut stream = server.watch("", "acme:read", &[("last-event-id", last_event_id)]).await;
    let opened_at = batches.load(Ordering::SeqCst);
    server
        .wait_until("the writer published more after the stream opened", || {
            batches.load(Ordering::SeqCst) >= opened_at + 5
        })
        .await;
    stop.store(true, Ordering::SeqCst);
    background.await.unwrap();
    server.settle().await;

    let all = everything(server.pool(), "acme", &[]).await;
    let after = &all[history.len()..];
    assert_eq!(history, all[..history.len()], "history is a prefix of the outbox");
    let live = stream.events(after.len()).await;
    assert_eq!(live, after, "the stream continues exactly after the history");
    assert_eq!(numbers(&history[..250]), (0..250).collect::<Vec<_>>());
}
