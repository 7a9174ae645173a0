//! One failing sink does not slow another (SPEC §7.3).
//!
//! Sink Y answers each call after 20 ms, like a receiver across a network; sink X is
//! healthy or down (refusing everything, so it bisects and backs off). Y's time to deliver
//! 200 fresh events is measured with X healthy and with X down, alternating four times;
//! the best of each must be within 10%.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use outbox_core::{Event, Position};
use outbox_workers::{Dispatcher, Sink, SinkError, SinkSpec};

use crate::support::{ScriptedSink, cursor_of, db, fast_config, numbered, publish};

struct SlowReceiver;

impl Sink for SlowReceiver {
    fn id(&self) -> &str {
        "y"
    }

    fn deliver<'a>(&'a self, _batch: &'a [Event]) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok(())
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_failing_sink_does_not_slow_another() {
    let db = db().await;
    let x_up = Arc::new(AtomicBool::new(true));
    let up = x_up.clone();
    let x = ScriptedSink::new(
        "x",
        move |_| if up.load(Ordering::SeqCst) { Ok(()) } else { Err(SinkError::retryable("down")) },
    );
    let specs = vec![SinkSpec::new(x).batch(10), SinkSpec::new(SlowReceiver).batch(10)];
    let dispatcher = Dispatcher::start(db.pool.clone(), fast_config(), specs).unwrap();

    let (mut healthy, mut down) = (Duration::MAX, Duration::MAX);
    for _ in 0..4 {
        for x_healthy in [true, false] {
            x_up.store(x_healthy, Ordering::SeqCst);
            let took = time_y(&db.pool, &dispatcher).await;
            let best = if x_healthy { &mut healthy } else { &mut down };
            *best = (*best).min(took);
        }
    }
    let ratio = down.as_secs_f64() / healthy.as_secs_f64();
    eprintln!("sink y, 200 events: {healthy:?} with x healthy, {down:?} with x down (ratio {ratio:.3})");
    assert!(ratio <= 1.10, "with x down, y took {down:?} against {healthy:?} with x healthy");
    assert!(
        dispatcher.local_state("x").unwrap().last_error.as_deref() == Some("down"),
        "x was never down during the measurement"
    );
    dispatcher.shutdown().await;
}

/// Publishes 200 events and measures how long y takes to record the last of them.
async fn time_y(pool: &outbox_pg::sqlx::PgPool, dispatcher: &Dispatcher) -> Duration {
    publish(pool, &numbered(200)).await;
    let started = Instant::now();
    let head = loop {
        let head = outbox_pg::read::head(pool).await.unwrap();
        if head > Position::START && cursor_of(pool, "y").await < Some(head) {
            break head;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let deadline = started + Duration::from_secs(30);
    while cursor_of(pool, "y").await != Some(head) {
        assert!(
            Instant::now() < deadline,
            "y did not deliver the batch up to {head}: at {:?}; {:?}",
            cursor_of(pool, "y").await,
            dispatcher.local_state("y")
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    started.elapsed()
}
