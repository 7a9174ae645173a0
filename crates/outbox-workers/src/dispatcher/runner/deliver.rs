//! Delivering one page: bisection and poison events (SPEC §7.4).
//!
//! The page is tried whole. A failing range is split in halves, left first, down to
//! single events; every range that goes through is recorded (a fenced cursor save)
//! before the next is tried, so order is kept and progress survives a crash. A sink
//! that reports which event failed ([`SinkError::at`]) skips the bisection.
//!
//! An event that fails alone is tried again, immediately (or after the receiver's
//! `Retry-After`), until it has failed `max_attempts` times; a refusal that is not
//! retryable uses up its attempts at once. Then the event after it decides:
//!
//! - it goes through: the failing event is a poison event. It is dead-lettered and
//!   the cursor moves past both, in one fenced transaction;
//! - it fails too: the sink itself is down. Nothing is dead-lettered; the loop backs
//!   off and starts the page again later (the failing event's count is kept, so the
//!   next round goes straight to its neighbour);
//! - none is visible yet: the loop backs off until one is.
//!
//! Calls per poison event in a batch of `n`: at most `1 + 2·⌈log2 n⌉` to isolate it,
//! `max_attempts − 1` retries, one for its neighbour, then one for the rest.
//!
//! Every call numbers its events from the page's base ([`Work::base`], the cursor's ordinal
//! when the page was read): a range, a single event or a neighbour gets the numbers of its
//! place after the cursor, whichever way the page was split, and every save records the
//! number of the last event it passes (a dead-lettered one included).

use std::ops::Range;
use std::time::Duration;

use outbox_core::{Event, Position};
use outbox_pg::ReadPage;
use outbox_pg::internal::dead_letter::NewDeadLetter;
use outbox_pg::internal::lease::Lease;
use time::OffsetDateTime;

use super::{Failure, Interruption, Runner, Step, Work, raised};
use crate::SinkError;
use crate::state::Activity;

/// An event that failed on its own, and how often.
pub(super) struct Suspect {
    position: Position,
    attempts: u32,
    first_failed: OffsetDateTime,
    last_error: SinkError,
}

/// What one call of the sink came to.
enum Call {
    Delivered,
    Failed(SinkError),
    /// Shutdown came before the call or its grace period ran out during it, or the lease
    /// was lost: the call was not made, or was dropped.
    Interrupted(Interruption),
    /// The sink's configuration changed after it delivered this many of the events.
    Reconfigured(usize),
}

impl Runner {
    /// Delivers `page` in batches of the sink's size, bisecting failures; see the module
    /// documentation. Each batch's cursor save runs beside the next batch's delivery.
    pub(super) async fn deliver_page(&mut self, lease: &Lease, work: &mut Work, page: &ReadPage) -> Step {
        let events = &page.events;
        work.base = work.progress.ordinal();
        let mut start = 0;
        while start < events.len() {
            let end = (start + self.batch).min(events.len());
            if let Err(step) = self.deliver_batch(lease, work, page, start..end).await {
                return step;
            }
            // A filtered page may have scanned past its last event: its last batch records
            // where the page ended. Only the page's last save, when nothing follows, is
            // waited for.
            let through = work.base + end as i64;
            let recorded = if end < events.len() {
                self.record_behind(lease, &mut work.progress, (events[end - 1].sequence, through)).await
            } else if page.more {
                self.record_behind(lease, &mut work.progress, (page.next_after, through)).await
            } else {
                self.record(lease, &mut work.progress, (page.next_after, through), None).await
            };
            if let Err(step) = recorded {
                return step;
            }
            start = end;
        }
        Step::Progressed
    }

    /// Delivers `page.events[batch]`, bisecting failures. `Err` ends the page with that step
    /// (the loop reads on from the cursor, past any event settled here).
    async fn deliver_batch(
        &mut self,
        lease: &Lease,
        work: &mut Work,
        page: &ReadPage,
        batch: Range<usize>,
    ) -> Result<(), Step> {
        let events = &page.events;
        let mut pending: Vec<Range<usize>> = Vec::with_capacity(32);
        pending.push(batch);
        while let Some(range) = pending.pop() {
            match self.call(&events[range.clone()], number(work, range.start)).await {
                Call::Interrupted(interruption) => return Err(interruption.into()),
                Call::Reconfigured(done) => {
                    let done = range.start + done.min(range.len());
                    self.delivered(lease, work, events, range.start..done).await?;
                    return Err(Interruption::Reconfigured.into());
                }
                // The last range is recorded with the batch, by the caller.
                Call::Delivered if pending.is_empty() => self.note_delivered(work, &events[range]),
                Call::Delivered => self.delivered(lease, work, events, range).await?,
                Call::Failed(error) => {
                    if let Some(index) = error.failed_at().filter(|index| *index < range.len()) {
                        let failing = range.start + index;
                        self.delivered(lease, work, events, range.start..failing).await?;
                        return Err(self.settle(lease, work, page, failing, error).await);
                    }
                    if range.len() == 1 {
                        return Err(self.settle(lease, work, page, range.start, error).await);
                    }
                    let middle = range.start + range.len() / 2;
                    pending.push(middle..range.end);
                    pending.push(range.start..middle);
                }
            }
        }
        Ok(())
    }

    /// Records that `events[delivered]` (possibly none) went through.
    async fn delivered(
        &self,
        lease: &Lease,
        work: &mut Work,
        events: &[Event],
        delivered: Range<usize>,
    ) -> Result<(), Step> {
        let Some(last) = events[delivered.clone()].last() else { return Ok(()) };
        self.note_delivered(work, &events[delivered.clone()]);
        let through = (last.sequence, work.base + delivered.end as i64);
        self.record(lease, &mut work.progress, through, None).await
    }

    /// Notes that `delivered` went through, before its cursor save.
    fn note_delivered(&self, work: &mut Work, delivered: &[Event]) {
        let Some(last) = delivered.last() else { return };
        work.delivered_in_round = true;
        if work.suspect.as_ref().is_some_and(|suspect| suspect.position <= last.sequence) {
            work.suspect = None;
        }
        self.update(|state| state.delivered += delivered.len() as u64);
    }

    /// Decides the fate of `page.events[index]`, which failed alone with `error`.
    async fn settle(
        &mut self,
        lease: &Lease,
        work: &mut Work,
        page: &ReadPage,
        index: usize,
        error: SinkError,
    ) -> Step {
        let event = &page.events[index];
        let mut suspect = match work.suspect.take() {
            Some(suspect) if suspect.position == event.sequence => suspect,
            _ => Suspect {
                position: event.sequence,
                attempts: 0,
                first_failed: self.config.clock.now(),
                last_error: error.clone(),
            },
        };
        self.count_failure(&mut suspect, error);
        while suspect.attempts < self.max_attempts {
            match self.call(std::slice::from_ref(event), number(work, index)).await {
                Call::Delivered => {
                    return match self.delivered(lease, work, &page.events, index..index + 1).await {
                        Ok(()) => Step::Progressed,
                        Err(step) => step,
                    };
                }
                Call::Failed(error) => self.count_failure(&mut suspect, error),
                Call::Interrupted(interruption) => {
                    work.suspect = Some(suspect);
                    return interruption.into();
                }
                // A single event: the sink checks before it sends, so nothing went out.
                Call::Reconfigured(_) => {
                    work.suspect = Some(suspect);
                    return Interruption::Reconfigured.into();
                }
            }
        }
        self.judge_by_neighbour(lease, work, page, index, suspect).await
    }

    fn count_failure(&self, suspect: &mut Suspect, error: SinkError) {
        suspect.attempts =
            if error.is_retryable() { suspect.attempts + 1 } else { suspect.attempts.max(self.max_attempts) };
        suspect.last_error = error;
    }

    /// The event at `index` failed `max_attempts` times: the next event decides whether it
    /// is poison (dead-letter it) or the sink is down (back off).
    async fn judge_by_neighbour(
        &mut self,
        lease: &Lease,
        work: &mut Work,
        page: &ReadPage,
        index: usize,
        suspect: Suspect,
    ) -> Step {
        let event = &page.events[index];
        let neighbour = match page.events.get(index + 1) {
            Some(neighbour) => neighbour.clone(),
            None => match self.next_event_after(event.sequence).await {
                Ok(Some(neighbour)) => neighbour,
                Ok(None) => {
                    let message = format!(
                        "{} (event {} failed; waiting for a later event to judge it)",
                        suspect.last_error, event.sequence
                    );
                    work.suspect = Some(suspect);
                    return Step::Failed(Failure::new(message));
                }
                Err(error) => {
                    work.suspect = Some(suspect);
                    return Step::Failed(Failure::database(error));
                }
            },
        };
        // The neighbour is the sink's next event, in the page or after it: the next number.
        let neighbour_number = number(work, index + 1);
        match self.call(std::slice::from_ref(&neighbour), neighbour_number).await {
            Call::Delivered => self.dead_letter(lease, work, event, (&neighbour, neighbour_number), suspect).await,
            Call::Failed(error) => {
                work.suspect = Some(suspect);
                Step::Failed(Failure::sink(&error))
            }
            Call::Interrupted(interruption) => {
                work.suspect = Some(suspect);
                interruption.into()
            }
            Call::Reconfigured(_) => {
                work.suspect = Some(suspect);
                Interruption::Reconfigured.into()
            }
        }
    }

    /// Writes `event` as a dead letter and moves the cursor past it and its delivered
    /// neighbour (whose number is given).
    async fn dead_letter(
        &mut self,
        lease: &Lease,
        work: &mut Work,
        event: &Event,
        (neighbour, neighbour_number): (&Event, u64),
        suspect: Suspect,
    ) -> Step {
        let failing_for = (self.config.clock.now() - suspect.first_failed).try_into().unwrap_or(Duration::ZERO);
        let letter = NewDeadLetter {
            sink: &self.records,
            event,
            error: suspect.last_error.message(),
            attempts: suspect.attempts,
            failing_for,
        };
        tracing::warn!(sink = self.sink.id(), event = %event.id, position = %event.sequence,
            attempts = suspect.attempts, error = %suspect.last_error, "dead-lettering a poison event");
        work.delivered_in_round = true;
        self.update(|state| state.delivered += 1);
        let through = (neighbour.sequence, i64::try_from(neighbour_number).unwrap_or(i64::MAX));
        match self.record(lease, &mut work.progress, through, Some(letter)).await {
            Ok(()) => Step::Progressed,
            Err(step) => {
                work.suspect = Some(suspect);
                step
            }
        }
    }

    /// Calls the sink once with `batch`, after any `Retry-After` it asked for; see the
    /// module documentation of the dispatcher for shutdown's grace period.
    async fn call(&mut self, batch: &[Event], first: u64) -> Call {
        if let Some(not_before) = self.not_before.take() {
            let wait = not_before - self.config.clock.now();
            if wait.is_positive()
                && let Err(interruption) = self.clock_wait(wait.try_into().unwrap_or(Duration::ZERO)).await
            {
                return Call::Interrupted(interruption);
            }
        }
        if let Err(interruption) = self.interrupted() {
            return Call::Interrupted(interruption);
        }
        self.update(|state| {
            state.activity = Activity::Delivering;
            state.delivery_calls += 1;
        });
        let delivery = tokio::time::timeout(self.config.delivery_timeout, self.sink.deliver_numbered(batch, first));
        tokio::pin!(delivery);
        let outcome = tokio::select! {
            outcome = &mut delivery => outcome,
            () = raised(self.lost.clone()) => return Call::Interrupted(Interruption::LeaseLost),
            () = raised(self.shutdown.clone()) => {
                let grace = tokio::time::timeout(self.config.shutdown_grace, &mut delivery);
                tokio::select! {
                    outcome = grace => match outcome {
                        Ok(outcome) => outcome,
                        Err(_) => return Call::Interrupted(Interruption::Shutdown),
                    },
                    () = raised(self.lost.clone()) => return Call::Interrupted(Interruption::LeaseLost),
                }
            }
        };
        match outcome {
            Ok(Ok(())) => Call::Delivered,
            Ok(Err(error)) if error.is_reconfigured() => Call::Reconfigured(error.failed_at().unwrap_or(0)),
            Ok(Err(error)) => {
                self.report_error(error.message()).await;
                if let Some(after) = error.retry_after() {
                    self.not_before = Some(self.config.clock.now() + after.min(self.config.backoff.max));
                }
                Call::Failed(error)
            }
            Err(_) => {
                let timeout = self.config.delivery_timeout.as_millis();
                let error = SinkError::retryable(format!("delivery timed out after {timeout} ms"));
                self.report_error(error.message()).await;
                Call::Failed(error)
            }
        }
    }
}

/// The sink's number of the page's event at `index` ([`Work::base`]).
fn number(work: &Work, index: usize) -> u64 {
    u64::try_from(work.base).unwrap_or(0) + index as u64 + 1
}
