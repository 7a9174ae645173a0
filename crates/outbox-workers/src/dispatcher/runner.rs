//! One sink's loop: read after the cursor, deliver, back off, while the lease is held.
//!
//! The runner is in three parts. [`lease`] is the lease's lifetime: taking it, renewing it
//! beside the work, noticing its loss, releasing it. [`progress`] saves how far the sink got:
//! fenced cursor saves, one of them running beside the next delivery. This module is the loop
//! between them: each step reads a page (or takes the one read beside the last delivery),
//! delivers it ([`deliver`]), and then goes on, waits for the poll interval or backs off.

mod deliver;
pub(crate) mod lease;
mod progress;

use std::sync::Arc;
use std::time::Duration;

use outbox_core::{Event, Position};
use outbox_pg::internal::cursor;
use outbox_pg::internal::lease::Lease;
use outbox_pg::internal::read::read_to_head;
use outbox_pg::internal::sink_health;
use outbox_pg::sqlx::PgPool;
use outbox_pg::tail::Filter;
use outbox_pg::{Lane, MAX_LIMIT, ReadPage, ReadRequest, read_page};
use time::OffsetDateTime;
use tokio::sync::watch;
use tokio::time::Instant;

use self::deliver::Suspect;
use self::progress::Progress;
use super::feed::Feed;
use super::{DispatcherConfig, SinkFilter, SinkSpec};
use crate::backoff::Backoff;
use crate::state::{Activity, LocalState};
use crate::{Sink, SinkError};

/// How often a sink saves a cursor that only moved over rows its filter skipped.
const SKIP_SAVE_INTERVAL: Duration = Duration::from_secs(1);

/// How many rows the tail may hand a caught-up loop between two of its reads before it lets
/// go of it (the loop then reads on its own and takes a new place).
const MEMBER_CAPACITY: usize = 64;

/// How many batches a read beside a delivery takes at most (within the read limit): fewer
/// statements per event, each page delivered batch by batch.
const BATCHES_PER_READ: usize = 4;

/// What ended a wait, a delivery, the work under a lease, or the lease itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Interruption {
    /// Shutdown was asked for.
    Shutdown,
    /// The lease was lost: a renewal or a fenced write found it gone.
    LeaseLost,
    /// The sink's configuration changed ([`Sink::current`]): the loop ends, and its owner
    /// starts another.
    Reconfigured,
}

/// What one step of the loop came to.
enum Step {
    /// Something was delivered or skipped, and more may be waiting: go on at once.
    Progressed,
    /// Caught up: wait for the poll interval.
    Idle,
    /// The sink or the database failed: back off.
    Failed(Failure),
    /// Shutdown was asked for or the lease was lost.
    Interrupted(Interruption),
}

impl From<Interruption> for Step {
    fn from(interruption: Interruption) -> Step {
        Step::Interrupted(interruption)
    }
}

/// A failure that makes the sink back off.
struct Failure {
    message: String,
    retry_after: Option<Duration>,
}

impl Failure {
    fn new(message: String) -> Failure {
        Failure { message, retry_after: None }
    }

    fn sink(error: &SinkError) -> Failure {
        Failure { message: error.message().to_owned(), retry_after: error.retry_after() }
    }

    fn database(error: outbox_pg::Error) -> Failure {
        Failure::new(format!("database: {error}"))
    }
}

/// Reads one sink's pages; independent of the runner, so a read can run beside a delivery.
enum PageReader {
    /// Its own reads.
    Own { pool: PgPool, request: ReadRequest },
    /// One lane's pages from the reads its process shares among the consumer's lanes.
    Lane { feed: Arc<Feed>, lane: Lane, limit: usize },
}

impl PageReader {
    /// Reads one page after `after`; a tenant's page that reaches the end also passes the
    /// other tenants' rows up to the head ([`read_to_head`]).
    async fn read(&self, after: Option<Position>) -> Result<ReadPage, outbox_pg::Error> {
        match self {
            PageReader::Own { pool, request } => read_to_head(pool, &request.clone().after(after)).await,
            PageReader::Lane { feed, lane, limit } => feed.page(*lane, after, *limit).await,
        }
    }
}

/// What the loop knows while it holds one lease; it starts afresh with the next.
struct Work {
    /// The cursor and the saves that move it.
    progress: Progress,
    /// When a skip over unmatched rows was last saved.
    skip_saved_at: Instant,
    /// The next page, read while the last one was delivered, with the position it was read after.
    prefetched: Option<(Option<Position>, ReadPage)>,
    backoff: Backoff,
    /// The event that failed alone, kept across rounds until it is delivered or dead-lettered.
    suspect: Option<Suspect>,
    /// Whether the current round delivered anything.
    delivered_in_round: bool,
    /// Whether a failure was reported to `outbox_sink_health` and no recovery since.
    reported_failure: bool,
    /// The loop's place on the shared tail while it is caught up (kept across waits).
    member: Option<outbox_pg::tail::Member>,
    /// The ordinal before the first event of the page being delivered: `events[i]` is the
    /// sink's event number `base + i + 1` ([`Sink::deliver_numbered`]).
    base: i64,
}

/// One sink's loop and everything it needs.
pub(super) struct Runner {
    pool: PgPool,
    sink: Arc<dyn Sink>,
    filter: SinkFilter,
    batch: usize,
    max_attempts: u32,
    config: Arc<DispatcherConfig>,
    state: watch::Sender<LocalState>,
    shutdown: watch::Receiver<bool>,
    /// Turns true when the lease held now is lost (a fresh, never-set channel between leases).
    lost: watch::Receiver<bool>,
    /// Raises `lost`: what the keeper holds, and what a save running beside a delivery raises
    /// when its fence finds the lease gone, so that the delivery in flight is dropped at once.
    raise_lost: Arc<watch::Sender<bool>>,
    lease_name: String,
    cursor_stream: String,
    cursor_name: String,
    /// The name dead letters and health reports are kept under.
    records: String,
    /// Not before this time may the sink be called again (a `Retry-After`).
    not_before: Option<OffsetDateTime>,
    /// The lease a keeper holds for this loop, when it does not take its own.
    shared: Option<lease::SharedLease>,
    /// The lane this loop delivers (lane 0 of 1: every event).
    lane: Lane,
    /// With lanes: where its pages come from, shared with the consumer's other lanes here.
    feed: Option<Arc<Feed>>,
    /// The consumer's cursor name, whose lanes' cursors this loop's is one of.
    consumer_cursor: String,
}

impl Runner {
    pub(super) fn new(
        pool: PgPool,
        spec: &SinkSpec,
        config: Arc<DispatcherConfig>,
        state: watch::Sender<LocalState>,
        shutdown: watch::Receiver<bool>,
        shared: Option<lease::SharedLease>,
        (lane, feed): (Lane, Option<Arc<Feed>>),
    ) -> Runner {
        Runner {
            pool,
            sink: spec.sink.clone(),
            filter: spec.filter.clone(),
            batch: spec.batch,
            max_attempts: spec.max_attempts,
            config,
            state,
            shutdown,
            lost: lease::never_lost(),
            raise_lost: Arc::new(watch::Sender::new(false)),
            lease_name: spec.names.lease.clone(),
            cursor_stream: spec.names.cursor_stream.clone(),
            cursor_name: cursor::lane_name(&spec.names.cursor_name, lane),
            records: spec.names.records.clone(),
            not_before: None,
            shared,
            lane,
            feed,
            consumer_cursor: spec.names.cursor_name.clone(),
        }
    }

    /// Reads, delivers and records until the lease is lost or shutdown is asked for.
    async fn work(&mut self, lease: &Lease) -> Interruption {
        let mut work = Work {
            progress: Progress::new(),
            skip_saved_at: Instant::now(),
            prefetched: None,
            backoff: Backoff::new(self.config.backoff),
            suspect: None,
            delivered_in_round: false,
            reported_failure: false,
            member: None,
            base: 0,
        };
        let end = self.work_on(lease, &mut work).await;
        // A save still running is waited for (never cut): the lease is released after it.
        let _ = self.saved(&mut work.progress).await;
        end
    }

    async fn work_on(&mut self, lease: &Lease, work: &mut Work) -> Interruption {
        loop {
            if let Err(interruption) = self.interrupted() {
                return interruption;
            }
            work.delivered_in_round = false;
            let mut step = self.step(lease, work).await;
            // Before a wait, the save running beside the loop is collected: its failure or a
            // lost lease counts for this round (after a lost lease or a shutdown, `work` does).
            if matches!(step, Step::Idle | Step::Failed(_))
                && let Err(failed) = self.saved(&mut work.progress).await
            {
                step = failed;
            }
            let waited = match step {
                Step::Progressed => {
                    self.recovered(work).await;
                    Ok(())
                }
                Step::Idle => {
                    self.recovered(work).await;
                    self.update(|state| state.activity = Activity::Idle);
                    match (self.config.tail.clone(), work.progress.after()) {
                        (Some(tail), Some(after)) => self.tail_wait(&tail, &mut work.member, after).await,
                        _ => self.idle_wait(self.config.poll_interval).await,
                    }
                }
                Step::Failed(failure) => self.back_off(work, failure).await,
                Step::Interrupted(interruption) => Err(interruption),
            };
            if let Err(interruption) = waited {
                return interruption;
            }
        }
    }

    /// Whether shutdown was asked for or the lease was lost.
    fn interrupted(&self) -> Result<(), Interruption> {
        if *self.shutdown.borrow() {
            return Err(Interruption::Shutdown);
        }
        if *self.lost.borrow() {
            return Err(Interruption::LeaseLost);
        }
        Ok(())
    }

    /// Waits out the next backoff delay, unless shutdown or a lost lease ends it first.
    async fn back_off(&mut self, work: &mut Work, failure: Failure) -> Result<(), Interruption> {
        if work.delivered_in_round {
            work.backoff.reset();
        }
        let delay = work.backoff.next_delay_at_least(failure.retry_after);
        let until = self.config.clock.now() + delay;
        tracing::warn!(sink = self.sink.id(), error = %failure.message, delay_ms = delay.as_millis() as u64, "backing off");
        self.note_error(&failure.message);
        self.update(|state| state.activity = Activity::BackingOff { until });
        match sink_health::record_failure(&self.pool, &self.records, &failure.message, delay).await {
            Ok(()) => work.reported_failure = true,
            Err(error) => tracing::debug!(sink = self.sink.id(), %error, "reporting the failure failed"),
        }
        self.clock_wait(delay).await
    }

    /// A step went through: the backoff starts over, and a reported failure is over.
    async fn recovered(&self, work: &mut Work) {
        work.backoff.reset();
        if work.reported_failure {
            match sink_health::record_recovery(&self.pool, &self.records).await {
                Ok(()) => work.reported_failure = false,
                Err(error) => tracing::debug!(sink = self.sink.id(), %error, "reporting the recovery failed"),
            }
        }
    }

    /// Loads the cursor once, reads one page after it and delivers it.
    async fn step(&mut self, lease: &Lease, work: &mut Work) -> Step {
        if let Err(failure) = self.load_cursor(&mut work.progress).await {
            return Step::Failed(failure);
        }
        // A read the loop waits for takes one batch, so that delivering starts as soon as it
        // can; the reads beside deliveries take up to four.
        let after = work.progress.after();
        let page = match work.prefetched.take() {
            Some((read_after, page)) if read_after == after => page,
            _ => match self.reader(self.batch).read(after).await {
                Ok(page) => page,
                Err(error) => return Step::Failed(Failure::database(error)),
            },
        };
        if page.events.is_empty() {
            return self.skip(lease, work, &page).await;
        }
        // While a full page is delivered, the next one is read, in a task of its own so that
        // decoding it runs beside the sink's own work: a backlog drains at the pace of the
        // slower of the two instead of their sum. The read always runs to completion (a
        // database call is never cut); the next page is used only if this one went through whole.
        let next_after = Some(page.next_after);
        let prefetch = page.more.then(|| {
            let reader = self.reader((self.batch * BATCHES_PER_READ).clamp(self.batch, MAX_LIMIT));
            tokio::spawn(async move { reader.read(next_after).await.ok() })
        });
        let step = self.deliver_page(lease, work, &page).await;
        if let (Step::Progressed, Some(prefetch)) = (&step, prefetch)
            && let Ok(Some(next)) = prefetch.await
            && work.progress.after() == next_after
        {
            work.prefetched = Some((next_after, next));
        }
        step
    }

    /// A page without events for this sink: read on from where it ended, and save that
    /// position now and then (so that retention can pass rows no filter of it wants).
    async fn skip(&self, lease: &Lease, work: &mut Work, page: &ReadPage) -> Step {
        work.progress.pass(page.next_after);
        if work.skip_saved_at.elapsed() >= SKIP_SAVE_INTERVAL {
            // Rows the old filter skipped may be ones a new filter wants: never save past them.
            match self.sink.current().await {
                Ok(true) => {}
                Ok(false) => return Interruption::Reconfigured.into(),
                Err(error) => return Step::Failed(Failure::sink(&error)),
            }
            let to = (page.next_after, work.progress.ordinal());
            if let Err(step) = self.record(lease, &mut work.progress, to, None).await {
                return step;
            }
            work.skip_saved_at = Instant::now();
        }
        if page.more { Step::Progressed } else { Step::Idle }
    }

    /// What reads this sink's pages of up to `limit` events.
    fn reader(&self, limit: usize) -> PageReader {
        match &self.feed {
            Some(feed) => PageReader::Lane { feed: feed.clone(), lane: self.lane, limit },
            None => PageReader::Own { pool: self.pool.clone(), request: self.request(None, limit) },
        }
    }

    fn request(&self, after: Option<Position>, limit: usize) -> ReadRequest {
        ReadRequest { tenant_id: self.filter.tenant.clone(), patterns: self.filter.types.clone(), ..ReadRequest::all() }
            .lane((self.lane.of > 1).then_some(self.lane))
            .after(after)
            .limit(limit)
    }

    /// The first event after `position` that the sink would receive, if one is visible.
    async fn next_event_after(&self, position: Position) -> Result<Option<Event>, outbox_pg::Error> {
        let mut after = position;
        loop {
            let page: ReadPage = read_page(&self.pool, &self.request(Some(after), 1)).await?;
            if let Some(event) = page.events.into_iter().next() {
                return Ok(Some(event));
            }
            if !page.more || page.next_after <= after {
                return Ok(None);
            }
            after = page.next_after;
        }
    }

    fn stopping(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// Waits `duration` on tokio's timer, unless shutdown or a lost lease ends it first.
    async fn idle_wait(&self, duration: Duration) -> Result<(), Interruption> {
        tokio::select! {
            () = tokio::time::sleep(duration) => self.interrupted(),
            interruption = self.interruption() => Err(interruption),
        }
    }

    /// Waits, caught up at `after`, until the tail hands this loop a matching event (or lets go
    /// of it), at most `tail_fallback`, unless shutdown or a lost lease ends it first.
    ///
    /// The loop keeps its place on the tail across waits. A new place may start past
    /// `after` (the tail's position moves with every transaction id, rows or not), and rows
    /// up to it are never handed over: the loop reads once more at once, and from then on
    /// the place covers everything after what that read saw. What the tail hands over is
    /// drained before the read it wakes, so a row arriving during the read wakes the next wait.
    async fn tail_wait(
        &self,
        tail: &outbox_pg::Tail,
        member: &mut Option<outbox_pg::tail::Member>,
        after: Position,
    ) -> Result<(), Interruption> {
        let place = match member.take() {
            Some(place) if !place.is_detached() => place,
            _ => {
                let filter = Filter { tenant_id: self.filter.tenant.clone(), patterns: self.filter.types.clone() };
                let place = tail.join(filter, after, MEMBER_CAPACITY);
                if place.joined_at() > after {
                    *member = Some(place);
                    return self.interrupted();
                }
                place
            }
        };
        let woken = tokio::select! {
            () = place.ready() => self.interrupted(),
            () = tokio::time::sleep(self.config.tail_fallback) => self.interrupted(),
            interruption = self.interruption() => Err(interruption),
        };
        drop(place.drain());
        *member = Some(place);
        woken
    }

    /// Waits `duration` on the dispatcher's clock, unless shutdown or a lost lease ends it first.
    async fn clock_wait(&self, duration: Duration) -> Result<(), Interruption> {
        tokio::select! {
            () = self.config.clock.sleep(duration) => self.interrupted(),
            interruption = self.interruption() => Err(interruption),
        }
    }

    /// Resolves when shutdown is asked for or the lease is lost.
    async fn interruption(&self) -> Interruption {
        tokio::select! {
            () = raised(self.shutdown.clone()) => Interruption::Shutdown,
            () = raised(self.lost.clone()) => Interruption::LeaseLost,
        }
    }

    fn update(&self, change: impl FnOnce(&mut LocalState)) {
        self.state.send_modify(change);
    }

    /// Notes a failed delivery call here and reports it for every process to see.
    async fn report_error(&self, message: &str) {
        self.note_error(message);
        self.update(|state| state.failed_calls += 1);
        if let Err(error) = sink_health::record_error(&self.pool, &self.records, message).await {
            tracing::debug!(sink = self.sink.id(), %error, "reporting the error failed");
        }
    }

    fn note_error(&self, message: &str) {
        let at = self.config.clock.now();
        self.update(|state| {
            state.last_error = Some(message.to_owned());
            state.last_error_at = Some(at);
        });
    }
}

/// Resolves once `flag` turns true; never when its sender is gone without raising it.
pub(super) async fn raised(mut flag: watch::Receiver<bool>) {
    if flag.wait_for(|raised| *raised).await.is_err() {
        std::future::pending::<()>().await;
    }
}
