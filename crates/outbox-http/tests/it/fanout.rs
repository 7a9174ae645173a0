//! The shared tail under load (SPEC §5.6): many streams over many tenants, with random
//! filters, disconnects and resumes, slow readers and a buffer small enough to overflow,
//! while writers publish with slow and rolled-back transactions; and streams joining the
//! tail while a writer publishes. Every stream must get exactly its tenant's matching
//! committed events, once each, in order.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use outbox_core::{Event, NewEvent, Pattern, Position};
use outbox_http::WatchOptions;
use outbox_pg::ReadRequest;
use outbox_pg::sqlx::PgPool;
use outbox_pg::testkit::read_to_end;
use rand::Rng;
use serde_json::json;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::support::{SseItem, TestServer, publish};

const TENANTS: usize = 20;
const STREAMS: usize = 200;
const TYPES: [&str; 4] = ["reservation.active", "node.joined", "node.left", "pool.resized"];
/// The filters streams draw from (`None`: every type).
const FILTERS: [Option<&str>; 5] =
    [None, Some("reservation.*"), Some("node.joined"), Some("node.*,pool.resized"), Some("*.left")];

/// Per stream, the position of the last event it must get (`None`: it must get none); set
/// once the writers are done.
type Targets = Option<Arc<Vec<Option<Position>>>>;

#[derive(Clone)]
struct Spec {
    tenant: String,
    filter: Option<&'static str>,
    slow: bool,
    start_after: Duration,
}

impl Spec {
    fn patterns(&self) -> Vec<Pattern> {
        self.filter.map(|list| list.split(',').map(|p| Pattern::parse(p).unwrap()).collect()).unwrap_or_default()
    }

    fn query(&self) -> String {
        let tenant = format!("tenantId={}", self.tenant);
        match self.filter {
            Some(types) => format!("?{tenant}&types={types}"),
            None => format!("?{tenant}"),
        }
    }
}

/// Publishes `transactions` transactions to random tenants: most commit at once, some stay
/// open a while (later ones commit first), some roll back. Returns what committed.
async fn writer(pool: PgPool, writer: usize, transactions: usize) -> Vec<NewEvent> {
    let mut committed = Vec::new();
    for t in 0..transactions {
        let (tenant, size, mode, pause, gap) = {
            let mut rng = rand::rng();
            let tenant = rng.random_range(0..TENANTS);
            (
                tenant,
                rng.random_range(1..=5),
                rng.random_range(0..100),
                rng.random_range(20..80),
                rng.random_range(0..40),
            )
        };
        let rolled_back = mode < 15;
        let batch: Vec<NewEvent> = (0..size)
            .map(|k| {
                let data = json!({"writer": writer, "t": t, "k": k, "rolledBack": rolled_back});
                NewEvent::new(TYPES[(writer + t + k) % TYPES.len()], format!("t{tenant:02}"), "node/n1", data)
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
        tokio::time::sleep(Duration::from_millis(gap)).await; // the writer's own pace
    }
    committed
}

/// Every event of `tenant` matching `patterns` after `after`, read with the xmin rule.
async fn everything(pool: &PgPool, tenant: &str, patterns: &[Pattern], after: Position) -> Vec<Event> {
    let request = ReadRequest::tenant(tenant).types(patterns.to_vec()).after(after);
    read_to_end(pool, &request).await.expect("read")
}

fn reached(targets: &watch::Receiver<Targets>, index: usize, received: &[Event]) -> bool {
    let targets = targets.borrow();
    let Some(targets) = targets.as_ref() else { return false };
    targets[index].is_none_or(|target| received.last().is_some_and(|last| last.sequence >= target))
}

/// One client: connects from the start, takes a few events (slowly, when it is a slow
/// reader) or stays a random while, disconnects, resumes with `Last-Event-ID`, until it
/// has its target.
async fn client(server: Arc<TestServer>, index: usize, spec: Spec, targets: watch::Receiver<Targets>) -> Vec<Event> {
    tokio::time::sleep(spec.start_after).await; // join while the writers are at work
    let mut deadline = None;
    let token = "admin:admin";
    let mut received: Vec<Event> = Vec::new();
    while !reached(&targets, index, &received) {
        if targets.borrow().is_some() && deadline.is_none() {
            deadline = Some(Instant::now() + Duration::from_secs(30));
        }
        if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            let target = targets.borrow().as_ref().map(|t| t[index]);
            let tail = server.service.tail().map(|t| format!("{t:?}"));
            panic!(
                "stream {index} ({} {:?}) did not reach its target {target:?}: {} events, the last {:?}; {tail:?}",
                spec.tenant,
                spec.filter,
                received.len(),
                received.last().map(|e| e.sequence)
            );
        }
        let resume = received.last().map_or(Position::START, |e| e.sequence);
        let headers = [("last-event-id", resume.dotted())];
        let mut stream = server.watch(&spec.query(), token, &headers).await;
        let (take, stay, pause) = {
            let mut rng = rand::rng();
            (rng.random_range(2..=16), rng.random_range(100..1_000), rng.random_range(2..10))
        };
        let leave_at = Instant::now() + Duration::from_millis(stay);
        let mut taken = 0;
        while taken < take && Instant::now() < leave_at && !reached(&targets, index, &received) {
            match stream.next_within(Duration::from_millis(100)).await {
                Ok(Some(SseItem::Event { id, event, data })) => {
                    assert_ne!(event, "error", "stream {index}: {data}");
                    let event: Event = serde_json::from_str(&data).expect("an event");
                    assert_eq!(id.as_deref(), Some(event.sequence.dotted().as_str()));
                    received.push(event);
                    taken += 1;
                    if spec.slow {
                        tokio::time::sleep(Duration::from_millis(pause)).await; // a slow reader
                    }
                }
                Ok(Some(_)) | Err(_) => {}
                Ok(None) => break,
            }
        }
    }
    received
}

fn ids(events: &[Event]) -> Vec<(Position, String)> {
    events.iter().map(|e| (e.sequence, e.id.clone())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_streams_over_twenty_tenants_get_exactly_their_events() {
    let options = WatchOptions { poll_ms: 20, buffer: 4, batch: 20, ..WatchOptions::default() };
    let server = Arc::new(TestServer::with_options(options).await);
    let specs: Vec<Spec> = {
        let mut rng = rand::rng();
        (0..STREAMS)
            .map(|i| Spec {
                tenant: format!("t{:02}", i % TENANTS),
                filter: FILTERS[rng.random_range(0..FILTERS.len())],
                slow: i % 8 == 0,
                start_after: Duration::from_millis(rng.random_range(0..2_000)),
            })
            .collect()
    };
    let (set_targets, targets) = watch::channel(None);
    let clients: Vec<_> = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| tokio::spawn(client(server.clone(), i, spec.clone(), targets.clone())))
        .collect();
    let writers: Vec<_> = (0..6).map(|w| tokio::spawn(writer(server.pool().clone(), w, 50))).collect();
    let mut committed = Vec::new();
    for handle in writers {
        committed.extend(handle.await.expect("a writer"));
    }
    server.settle().await;

    let mut expected = Vec::new();
    for spec in &specs {
        let events = everything(server.pool(), &spec.tenant, &spec.patterns(), Position::START).await;
        let patterns = spec.patterns();
        let matching = committed
            .iter()
            .filter(|e| e.tenant_id == spec.tenant)
            .filter(|e| patterns.is_empty() || patterns.iter().any(|p| p.matches(&e.event_type)))
            .count();
        assert_eq!(events.len(), matching, "the outbox holds exactly the committed events");
        expected.push(events);
    }
    let last: Vec<Option<Position>> = expected.iter().map(|events| events.last().map(|e| e.sequence)).collect();
    set_targets.send_replace(Some(Arc::new(last)));

    for (i, handle) in clients.into_iter().enumerate() {
        let received = handle.await.expect("a client");
        let spec = &specs[i];
        assert_eq!(
            ids(&received),
            ids(&expected[i]),
            "stream {i} ({} {:?}): exactly once, in order",
            spec.tenant,
            spec.filter
        );
        assert!(received.iter().all(|e| e.data.value()["rolledBack"] == false));
    }
    let total: usize = expected.iter().map(Vec::len).sum();
    assert!(total > 1_000, "enough deliveries to mean something: {total}");
    let tail = server.service.tail().expect("streams are fed by the shared tail");
    assert!(tail.detached() > 0, "some stream overflowed its buffer and fell back to its own reads");
}

/// Streams open one after another from the newest position while a writer publishes
/// without pause: each catches up with its own read and joins the tail, which is ahead of
/// it or behind it depending on the moment. None may miss or repeat an event.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn streams_joining_while_a_writer_publishes_miss_nothing() {
    let options = WatchOptions { poll_ms: 5, ..WatchOptions::default() };
    let server = Arc::new(TestServer::with_options(options).await);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (pool, stop) = (server.pool().clone(), stop.clone());
        tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) {
                let batch: Vec<NewEvent> = (n..n + 2)
                    .map(|i| NewEvent::new(TYPES[i % TYPES.len()], "acme", "node/n1", json!({ "n": i })))
                    .collect();
                publish(&pool, &batch).await;
                n += 2;
            }
        })
    };
    // The last event every stream must reach: of all types, and of `node.*`.
    let (set_target, target) = watch::channel(None::<(Position, Position)>);
    let mut streams = Vec::new();
    for i in 0..100 {
        let start = outbox_pg::internal::read::head(server.pool()).await.expect("the head");
        let filter = if i % 3 == 0 { "&types=node.*" } else { "" };
        let mut stream = server.watch(&format!("?cursor={start}{filter}"), "acme:read", &[]).await;
        let mut target = target.clone();
        streams.push(tokio::spawn(async move {
            let mut received = Vec::new();
            loop {
                let done = target.borrow_and_update().map(|(all, node)| if filter.is_empty() { all } else { node });
                if let Some(done) = done
                    && received.last().map_or(start, |e: &Event| e.sequence) >= done
                {
                    return (start, filter, received);
                }
                tokio::select! {
                    item = stream.next_within(Duration::from_secs(30)) => match item.expect("an item in time") {
                        Some(SseItem::Event { data, .. }) => received.push(serde_json::from_str(&data).expect("an event")),
                        Some(_) => {}
                        None => panic!("the stream ended"),
                    },
                    _ = target.changed() => {}
                }
            }
        }));
        tokio::time::sleep(Duration::from_millis(rand::rng().random_range(0..15))).await;
    }
    stop.store(true, Ordering::SeqCst);
    writer.await.expect("the writer");
    server.settle().await;
    let all = everything(server.pool(), "acme", &[], Position::START).await;
    let node = everything(server.pool(), "acme", &[Pattern::parse("node.*").unwrap()], Position::START).await;
    let last = |events: &[Event]| events.last().expect("events").sequence;
    set_target.send_replace(Some((last(&all), last(&node))));

    for handle in streams {
        let (start, filter, received) = handle.await.expect("a stream");
        let patterns: Vec<Pattern> =
            filter.strip_prefix("&types=").map(|p| vec![Pattern::parse(p).unwrap()]).unwrap_or_default();
        let expected = everything(server.pool(), "acme", &patterns, start).await;
        assert_eq!(ids(&received), ids(&expected), "from {start}{filter}: exactly once, in order");
    }
}
