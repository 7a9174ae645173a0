//! In-process subscribers (SPEC §6): call a function for each committed event of a type.
//!
//! [`Subscribers`] hands out [`Subscription`]s fed by the process's shared tail
//! (`outbox_pg::tail`), the same reader that feeds the live HTTP streams, so a thousand
//! subscriptions cost the database no more than one. Each subscription
//! - starts at the head when it is made: it sees the events that become visible after
//!   [`Subscribers::subscribe`] returns, never those visible before;
//! - runs its handler on its own task, one event at a time, in `(txid, seq)` order, across
//!   every tenant;
//! - survives its handler: an error or a panic is logged and the next event is handled;
//! - never holds another back: one that falls more than `buffer` events behind leaves the
//!   tail and catches up with reads of its own;
//! - ends when it is dropped (or [`Subscription::cancel`]led), even in the middle of a handler.
//!
//! The position lives in memory only: events published while no subscription runs, or
//! while the process is down, are not seen. Use a sink (SPEC §7) when every event must be.

use std::fmt::Display;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures_util::FutureExt;
use outbox_core::{Event, Pattern};
use outbox_pg::ReadRequest;
use outbox_pg::internal::read::head;
use outbox_pg::sqlx::PgPool;
use outbox_pg::tail::{Follower, Tail};
use tokio::task::JoinHandle;

use crate::Result;

/// The events a subscription reads at a time while it catches up.
const READ_LIMIT: usize = 500;
/// How long a subscription waits after a failed read before it tries again.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Where a process's in-process subscriptions come from. Clones share the tail.
#[derive(Clone, Debug)]
pub struct Subscribers {
    pool: PgPool,
    tail: Tail,
    buffer: usize,
}

impl Subscribers {
    /// Subscriptions over `pool`, fed by `tail` (the process's shared tail, which the HTTP
    /// streams may share), each holding at most 1,000 undelivered events before it falls
    /// back to reads of its own.
    pub fn new(pool: PgPool, tail: Tail) -> Subscribers {
        Subscribers { pool, tail, buffer: 1_000 }
    }

    /// Holds at most `events` undelivered events per subscription (at least 1).
    pub fn with_buffer(mut self, events: usize) -> Subscribers {
        self.buffer = events.max(1);
        self
    }

    /// Calls `handler` with every event whose type matches `pattern` that becomes visible
    /// from now on, until the returned [`Subscription`] is dropped. Fails only when the head
    /// cannot be read.
    pub async fn subscribe<H, F, E>(&self, pattern: Pattern, handler: H) -> Result<Subscription>
    where
        H: Fn(Event) -> F + Send + Sync + 'static,
        F: Future<Output = std::result::Result<(), E>> + Send + 'static,
        E: Display + 'static,
    {
        // The tail's position, read before the head, may be further: nothing lies between.
        let tail_position = self.tail.position();
        let head = head(&self.pool).await?;
        let start = tail_position.map_or(head, |position| position.max(head));
        let request = ReadRequest::all().types([pattern.clone()]).limit(READ_LIMIT);
        let follower = Follower::new(self.pool.clone(), request, start)
            .on_tail(self.tail.clone(), self.buffer)
            .complete_at_start();
        let task = tokio::spawn(run(follower, pattern, handler));
        Ok(Subscription { task })
    }
}

/// A running subscription. Dropping it unsubscribes.
#[derive(Debug)]
pub struct Subscription {
    task: JoinHandle<()>,
}

impl Subscription {
    /// Unsubscribes (the same as dropping it).
    pub fn cancel(self) {}
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Feeds the handler until the task is aborted.
async fn run<H, F, E>(mut follower: Follower, pattern: Pattern, handler: H)
where
    H: Fn(Event) -> F + Send + Sync + 'static,
    F: Future<Output = std::result::Result<(), E>> + Send + 'static,
    E: Display + 'static,
{
    loop {
        let events = if follower.read_due() {
            match follower.read().await {
                Ok(events) => events,
                Err(error) => {
                    tracing::warn!(%error, %pattern, "a subscription's read failed; retrying");
                    tokio::time::sleep(RETRY_AFTER).await;
                    continue;
                }
            }
        } else {
            follower.take()
        };
        if events.is_empty() {
            if !follower.read_due() {
                follower.ready().await;
            }
            continue;
        }
        for event in events {
            handle(&handler, &pattern, event.event().clone()).await;
        }
    }
}

/// Runs the handler on one event; an error or a panic is logged, never propagated.
async fn handle<H, F, E>(handler: &H, pattern: &Pattern, event: Event)
where
    H: Fn(Event) -> F,
    F: Future<Output = std::result::Result<(), E>>,
    E: Display + 'static,
{
    let (id, position) = (event.id.clone(), event.sequence);
    match AssertUnwindSafe(async { handler(event).await }).catch_unwind().await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::warn!(%error, %pattern, %id, %position, "a subscriber's handler failed"),
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_owned());
            tracing::error!(panic = message, %pattern, %id, %position, "a subscriber's handler panicked");
        }
    }
}
