//! Numbered deliveries: every event a sink's loop is given has a number, its place among the
//! sink's events counted from 1 and saved beside the cursor, the same in every call that
//! carries it, across bisection, dead letters, filters and restarts.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use outbox_core::{Event, NewEvent};
use outbox_pg::internal::cursor::{self, OUTBOX_STREAM, sink_name};
use outbox_workers::{Dispatcher, Sink, SinkError, SinkSpec};
use parking_lot::Mutex;
use serde_json::json;

use crate::support::{cursor_of, db, fast_config, publish_and_read, wait_for};

/// Refuses (for good) every call holding the event `poison`; keeps every number it was given.
struct NumberingSink {
    poison: String,
    numbers: Arc<Mutex<Vec<(String, u64)>>>,
}

impl Sink for NumberingSink {
    fn id(&self) -> &str {
        "numbered"
    }

    fn deliver<'a>(&'a self, _batch: &'a [Event]) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async { Err(SinkError::refused("the dispatcher numbers every call")) })
    }

    fn deliver_numbered<'a>(&'a self, batch: &'a [Event], first: u64) -> BoxFuture<'a, Result<(), SinkError>> {
        let mut numbers = self.numbers.lock();
        numbers.extend(batch.iter().zip(first..).map(|(event, number)| (event.id.clone(), number)));
        let refused = batch.iter().any(|event| event.id == self.poison);
        Box::pin(std::future::ready(if refused { Err(SinkError::refused("too large")) } else { Ok(()) }))
    }
}

fn tenants(n: usize, from: usize) -> Vec<NewEvent> {
    (from..from + n)
        .map(|i| NewEvent::new("node.joined", ["acme", "globex"][i % 2], format!("node/n{i}"), json!({ "n": i })))
        .collect()
}

#[tokio::test]
async fn each_event_keeps_its_number_across_bisection_a_dead_letter_a_filter_and_a_restart() {
    let db = db().await;
    let first = publish_and_read(&db.pool, &tenants(300, 0)).await;
    let acme = |events: &[Event]| events.iter().filter(|e| e.tenant_id == "acme").cloned().collect::<Vec<_>>();
    let poison = acme(&first)[77].id.clone();
    let numbers = Arc::new(Mutex::new(Vec::new()));
    let spec = || {
        let sink = NumberingSink { poison: poison.clone(), numbers: numbers.clone() };
        SinkSpec::new(sink).tenant("acme").batch(50).max_attempts(2)
    };
    let dispatcher = Dispatcher::start(db.pool.clone(), fast_config(), vec![spec()]).unwrap();
    let last = first.last().unwrap().sequence;
    wait_for("the first events to be passed", || async { cursor_of(&db.pool, "numbered").await >= Some(last) }).await;
    dispatcher.shutdown().await;

    let all = publish_and_read(&db.pool, &tenants(100, 300)).await;
    let dispatcher = Dispatcher::start(db.pool.clone(), fast_config(), vec![spec()]).unwrap();
    let last = all.last().unwrap().sequence;
    wait_for("every event to be passed", || async { cursor_of(&db.pool, "numbered").await >= Some(last) }).await;
    dispatcher.shutdown().await;

    let expected: HashMap<String, u64> = acme(&all).into_iter().zip(1..).map(|(e, n)| (e.id, n)).collect();
    let given = numbers.lock().clone();
    assert!(given.len() > expected.len(), "the poison's batch was bisected: {} calls' events", given.len());
    for (id, number) in &given {
        assert_eq!(expected.get(id), Some(number), "event {id} was numbered {number}");
    }
    let mark = cursor::load_mark(&db.pool, OUTBOX_STREAM, &sink_name("numbered")).await.unwrap().unwrap();
    assert_eq!(mark.ordinal, expected.len() as i64, "the saved ordinal counts the dead-lettered event too");
}
