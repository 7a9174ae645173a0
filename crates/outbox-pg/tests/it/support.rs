//! Helpers shared by the tests.

use std::time::{Duration, Instant};

use outbox_core::{Event, NewEvent, Position};
use outbox_pg::{ReadRequest, read_page};
use serde_json::json;
use sqlx::PgPool;

/// A valid event of `event_type` in `tenant` with `data`.
pub(crate) fn event(event_type: &str, tenant: &str, data: serde_json::Value) -> NewEvent {
    NewEvent::new(event_type, tenant, "node/n1", data)
}

/// A small valid event numbered `n`.
pub(crate) fn numbered(n: usize) -> NewEvent {
    event("node.joined", "acme", json!({ "n": n }))
}

/// Reads with `request` from its `after` until `want` events arrived or 20 s passed.
/// Under the xmin rule, rows become visible only when every older transaction of the whole
/// server (other tests' too) has finished, so a test waits for visibility with a deadline.
pub(crate) async fn read_until(pool: &PgPool, mut request: ReadRequest, want: usize) -> Vec<Event> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut poll = tokio::time::interval(Duration::from_millis(20));
    let mut seen = Vec::new();
    while seen.len() < want && Instant::now() < deadline {
        let page = read_page(pool, &request).await.expect("read");
        request.after = Some(page.next_after);
        let caught_up = !page.more;
        seen.extend(page.events);
        if caught_up {
            poll.tick().await;
        }
    }
    seen
}

/// The positions of `events`.
pub(crate) fn positions(events: &[Event]) -> Vec<Position> {
    events.iter().map(|e| e.sequence).collect()
}

/// Waits until `condition` holds, checking every 20 ms; fails after 20 s naming `what`.
pub(crate) async fn wait_until<F, Fut>(what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(20);
    while !condition().await {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
