//! The [`Sink`] trait: where a dispatcher delivers batches (SPEC §7).
//!
//! A sink receives batches of committed events in `(txid, seq)` order and either
//! takes the whole batch or fails with a [`SinkError`] that says whether trying
//! again is worth it. The dispatcher owns everything else: the lease, the cursor,
//! backoff, bisection and dead letters. A sink must be idempotent on the event id
//! or accept duplicates: delivery is at least once.

use std::time::Duration;

use futures_util::future::BoxFuture;
use outbox_core::Event;

use crate::{Error, Result};

/// A destination for committed events.
///
/// `deliver` returns a boxed future so that sinks can be held as `Box<dyn Sink>` or
/// `Arc<dyn Sink>`; implement it as `Box::pin(async move { … })`.
///
/// # Cancel safety
///
/// The dispatcher drops a delivery in flight when its lease is lost, when it times
/// out, or when shutdown's grace period ends. Nothing is recorded for a dropped
/// delivery, so its events are delivered again later; a sink needs no cleanup
/// beyond what dropping its future does.
pub trait Sink: Send + Sync + 'static {
    /// The sink's id, `^[a-z0-9][a-z0-9_-]{0,63}$`: it names its lease, cursor and dead letters.
    fn id(&self) -> &str;

    /// Delivers `batch` (never empty), oldest first. `Ok` means every event was taken.
    fn deliver<'a>(&'a self, batch: &'a [Event]) -> BoxFuture<'a, Result<(), SinkError>>;

    /// Delivers `batch` as the dispatcher numbers it: `batch[i]` is the sink's event number
    /// `first + i`, counted from 1 over every event the sink's loop was given (delivered or
    /// dead-lettered), and saved beside its cursor. An event gets the same number every time
    /// it is delivered, after a crash too, so a broker that drops a repeated publishing id
    /// (a RabbitMQ named producer) can be handed these numbers. A dead letter's replay has no
    /// number and goes through [`Sink::deliver`]. The default ignores the numbers.
    fn deliver_numbered<'a>(&'a self, batch: &'a [Event], first: u64) -> BoxFuture<'a, Result<(), SinkError>> {
        let _ = first;
        self.deliver(batch)
    }

    /// Gets ready to deliver (opens the broker connection, say), so that the first delivery
    /// does not wait for it. The dispatcher starts it when it takes the sink's lease, beside
    /// loading the cursor and reading the first events, and does not wait for it: a sink
    /// whose deliveries connect on first use should let them wait for the connection this
    /// opens, and a failure here is met again, and reported, by the first delivery. The
    /// default does nothing.
    fn prepare(&self) -> BoxFuture<'_, Result<(), SinkError>> {
        Box::pin(std::future::ready(Ok(())))
    }

    /// Whether the sink is still configured as when its loop started. A sink whose
    /// configuration can change while it runs (a webhook subscription's URL, secrets or
    /// types) answers `false` once it has, and its deliveries fail with
    /// [`SinkError::reconfigured`]: the loop then ends without passing anything the new
    /// configuration may want, and its owner starts it again. The loop asks before it saves
    /// a cursor that only passed rows its filter skipped. The default: always, at no cost.
    fn current(&self) -> BoxFuture<'_, Result<bool, SinkError>> {
        Box::pin(std::future::ready(Ok(true)))
    }

    /// Why the sink can deliver in one ordered lane only, if it can (SPEC §7.7): a sink that
    /// relies on [`Sink::deliver_numbered`] numbering all of its events in one sequence
    /// answers why, and a spec of more lanes is refused with it. The default: any number.
    fn one_lane(&self) -> Option<&'static str> {
        None
    }
}

/// Why a delivery failed, and whether trying again can help.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SinkError {
    message: String,
    retryable: bool,
    retry_after: Option<Duration>,
    failed_at: Option<usize>,
    reconfigured: bool,
}

impl SinkError {
    /// A failure that may pass on another attempt: the receiver is down, busy or slow.
    pub fn retryable(message: impl Into<String>) -> SinkError {
        SinkError { message: message.into(), retryable: true, retry_after: None, failed_at: None, reconfigured: false }
    }

    /// A refusal that another attempt of the same event will not change (e.g. HTTP 400).
    /// A single event refused this way has used up its attempts at once (SPEC §7.4).
    pub fn refused(message: impl Into<String>) -> SinkError {
        SinkError { message: message.into(), retryable: false, retry_after: None, failed_at: None, reconfigured: false }
    }

    /// The sink's configuration changed since its loop started ([`Sink::current`]): not a
    /// failure of the event. The loop records the events before [`SinkError::at`]'s index,
    /// delivers nothing more and ends, with no attempt counted and no backoff.
    pub fn reconfigured(message: impl Into<String>) -> SinkError {
        SinkError { reconfigured: true, ..SinkError::retryable(message) }
    }

    /// The receiver asked not to be called again before `after` (e.g. `Retry-After`).
    pub fn with_retry_after(mut self, after: Duration) -> SinkError {
        self.retry_after = Some(after);
        self
    }

    /// Says that the events before `index` were delivered and the one at `index` failed,
    /// for sinks that deliver one event after another: the dispatcher records the
    /// delivered prefix and goes straight to the failing event instead of bisecting.
    pub fn at(mut self, index: usize) -> SinkError {
        self.failed_at = Some(index);
        self
    }

    /// The failure's description.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether another attempt may pass.
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }

    /// How long the receiver asked to be left alone, if it did.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    /// The index of the failing event when the events before it were delivered.
    pub fn failed_at(&self) -> Option<usize> {
        self.failed_at
    }

    /// Whether the sink's configuration changed ([`SinkError::reconfigured`]).
    pub fn is_reconfigured(&self) -> bool {
        self.reconfigured
    }
}

impl<S: Sink + ?Sized> Sink for Box<S> {
    fn id(&self) -> &str {
        (**self).id()
    }

    fn deliver<'a>(&'a self, batch: &'a [Event]) -> BoxFuture<'a, Result<(), SinkError>> {
        (**self).deliver(batch)
    }

    fn deliver_numbered<'a>(&'a self, batch: &'a [Event], first: u64) -> BoxFuture<'a, Result<(), SinkError>> {
        (**self).deliver_numbered(batch, first)
    }

    fn prepare(&self) -> BoxFuture<'_, Result<(), SinkError>> {
        (**self).prepare()
    }

    fn current(&self) -> BoxFuture<'_, Result<bool, SinkError>> {
        (**self).current()
    }

    fn one_lane(&self) -> Option<&'static str> {
        (**self).one_lane()
    }
}

impl<S: Sink + ?Sized> Sink for std::sync::Arc<S> {
    fn id(&self) -> &str {
        (**self).id()
    }

    fn deliver<'a>(&'a self, batch: &'a [Event]) -> BoxFuture<'a, Result<(), SinkError>> {
        (**self).deliver(batch)
    }

    fn deliver_numbered<'a>(&'a self, batch: &'a [Event], first: u64) -> BoxFuture<'a, Result<(), SinkError>> {
        (**self).deliver_numbered(batch, first)
    }

    fn prepare(&self) -> BoxFuture<'_, Result<(), SinkError>> {
        (**self).prepare()
    }

    fn current(&self) -> BoxFuture<'_, Result<bool, SinkError>> {
        (**self).current()
    }

    fn one_lane(&self) -> Option<&'static str> {
        (**self).one_lane()
    }
}

/// Checks a sink id against `^[a-z0-9][a-z0-9_-]{0,63}$`.
pub fn check_id(id: &str) -> Result<()> {
    let mut bytes = id.bytes();
    let first_ok = bytes.next().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    let rest_ok = bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if !(first_ok && rest_ok && id.len() <= 64) {
        return Err(Error::config(
            format!("sinks[{id}].id"),
            format!("{id:?} must match ^[a-z0-9][a-z0-9_-]{{0,63}}$"),
        ));
    }
    Ok(())
}
