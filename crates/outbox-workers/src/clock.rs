//! The dispatcher's clock: what it reads for "backing off until …" and how it waits
//! out backoff and `Retry-After`.
//!
//! [`SystemClock`] uses the wall clock and `tokio::time::sleep` (so
//! `tokio::time::pause()` applies to it). Tests inject their own clock to assert a
//! backoff schedule without sleeping. Lease renewal and idle polling do not go
//! through it: lease expiry is judged by the database's real clock.

use std::time::Duration;

use futures_util::future::BoxFuture;
use time::OffsetDateTime;

/// A source of time and of waits.
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> OffsetDateTime;

    /// Waits `duration`.
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()>;
}

/// The wall clock and tokio's timer.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(duration))
    }
}
