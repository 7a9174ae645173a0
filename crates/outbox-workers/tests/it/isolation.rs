//! One failing sink does not slow another (SPEC §7.3).
//!
//! Each sink runs in a loop of its own, so nothing one sink does can hold another back:
//! here sink X is as bad as a sink gets (its delivery call never returns, then it refuses
//! everything and backs off), and sink Y still delivers every event, in order, while X is
//! stuck. The throughput comparison (Y with X down against Y with X healthy, within 10%) is
//! a measurement, printed by `cargo xtask bench sinks`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures_util::future::BoxFuture;
use outbox_core::Event;
use outbox_workers::{Activity, Dispatcher, Sink, SinkError, SinkSpec};

use crate::support::{ScriptedSink, cursor_of, db, fast_config, numbered, publish_and_read, wait_for};

/// A sink whose first call never returns (a receiver that accepted the connection and went
/// silent); later calls are refused, as by a receiver that is down.
struct Stuck {
    calls: Arc<AtomicUsize>,
}

impl Sink for Stuck {
    fn id(&self) -> &str {
        "x"
    }

    fn deliver<'a>(&'a self, _batch: &'a [Event]) -> BoxFuture<'a, Result<(), SinkError>> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            if call == 0 {
                std::future::pending::<()>().await;
            }
            Err(SinkError::retryable("down"))
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sink_stuck_in_a_call_does_not_hold_another_back() {
    let db = db().await;
    let calls = Arc::new(AtomicUsize::new(0));
    let y = ScriptedSink::accepting("y");
    let specs = vec![SinkSpec::new(Stuck { calls: calls.clone() }).batch(10), SinkSpec::new(y.clone()).batch(10)];
    let dispatcher = Dispatcher::start(db.pool.clone(), fast_config(), specs).unwrap();

    publish_and_read(&db.pool, &numbered(50)).await;
    wait_for("x to be stuck in its first call", || async { calls.load(Ordering::SeqCst) == 1 }).await;
    let all = publish_and_read(&db.pool, &numbered(200)).await;
    let last = all.last().unwrap().sequence;
    wait_for("y to deliver everything while x is stuck", || async { cursor_of(&db.pool, "y").await == Some(last) })
        .await;
    assert_eq!(y.delivered(), all, "y got every event once, in order");
    assert_eq!(calls.load(Ordering::SeqCst), 1, "x is still inside its first call");
    assert_eq!(dispatcher.local_state("x").unwrap().activity, Activity::Delivering);
    assert_eq!(cursor_of(&db.pool, "x").await, None, "x recorded nothing");
    dispatcher.shutdown().await;
}
