//! One sink's loop: take the lease, keep it, read after the cursor, deliver, back off.

use std::sync::Arc;
use std::time::Duration;

use outbox_core::{Event, Position};
use outbox_pg::cursor::{self, Durability, OUTBOX_STREAM, Saved, sink_name};
use outbox_pg::dead_letter::NewDeadLetter;
use outbox_pg::lease::{self, Lease, dispatch_name};
use outbox_pg::read::{MAX_LIMIT, ReadPage, ReadRequest, read, read_to_head};
use outbox_pg::sink_health;
use outbox_pg::sqlx::PgPool;
use time::OffsetDateTime;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::{DispatcherConfig, SinkFilter, SinkSpec};
use crate::backoff::Backoff;
use crate::state::{Activity, LocalState};
use crate::{Sink, SinkError};

/// How often a sink saves a cursor that only moved over rows its filter skipped.
const SKIP_SAVE_INTERVAL: Duration = Duration::from_secs(1);

/// How many batches a read beside a delivery takes at most (within the read limit): fewer
/// statements per event, each page delivered batch by batch.
const BATCHES_PER_READ: usize = 4;

/// Why a lease was given up.
enum End {
    Shutdown,
    LeaseLost,
}

/// What ended a wait or a delivery early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Interruption {
    Shutdown,
    LeaseLost,
}

impl From<Interruption> for End {
    fn from(interruption: Interruption) -> End {
        match interruption {
            Interruption::Shutdown => End::Shutdown,
            Interruption::LeaseLost => End::LeaseLost,
        }
    }
}

impl From<Interruption> for Step {
    fn from(interruption: Interruption) -> Step {
        match interruption {
            Interruption::Shutdown => Step::Shutdown,
            Interruption::LeaseLost => Step::LeaseLost,
        }
    }
}

/// What one step of the loop came to.
pub(super) enum Step {
    /// Something was delivered or skipped, and more may be waiting: go on at once.
    Progressed,
    /// Caught up: wait for the poll interval.
    Idle,
    /// The sink or the database failed: back off.
    Failed(Failure),
    /// A fenced write found the lease gone.
    LeaseLost,
    /// Shutdown was asked for.
    Shutdown,
}

/// A failure that makes the sink back off.
pub(super) struct Failure {
    pub message: String,
    pub retry_after: Option<Duration>,
}

impl Failure {
    pub fn sink(error: &SinkError) -> Failure {
        Failure { message: error.message().to_owned(), retry_after: error.retry_after() }
    }

    pub fn database(error: outbox_pg::Error) -> Failure {
        Failure { message: format!("database: {error}"), retry_after: None }
    }
}

/// Reads one sink's pages; independent of the runner, so a read can run beside a delivery.
struct PageReader {
    pool: PgPool,
    request: ReadRequest,
}

impl PageReader {
    /// Reads one page after `after`; a tenant's page that reaches the end also passes the
    /// other tenants' rows up to the head ([`read_to_head`]).
    async fn read(&self, after: Option<Position>) -> Result<ReadPage, outbox_pg::Error> {
        read_to_head(&self.pool, &self.request.clone().after(after)).await
    }
}

/// An event that failed on its own, and how often.
pub(super) struct Suspect {
    pub position: Position,
    pub attempts: u32,
    pub first_failed: OffsetDateTime,
    pub last_error: SinkError,
}

/// What a loop knows while it holds the lease.
pub(super) struct Progress {
    /// The durable cursor, once loaded.
    pub cursor: Option<Position>,
    pub loaded: bool,
    /// Where the next read starts: the cursor, or past it over rows the filter skipped.
    pub after: Option<Position>,
    /// When a skip over unmatched rows was last saved.
    pub skip_saved_at: Instant,
    /// The next page, read while the last one was delivered, with the position it was read after.
    pub prefetched: Option<(Option<Position>, ReadPage)>,
    pub backoff: Backoff,
    /// The event that failed alone, kept across rounds until it is delivered or dead-lettered.
    pub suspect: Option<Suspect>,
    /// Whether the current round delivered anything.
    pub delivered_in_round: bool,
    /// Whether a failure was reported to `outbox_sink_health` and no recovery since.
    pub reported_failure: bool,
    /// A cursor save running beside the next delivery, and the position it saves.
    pub saving: Option<(Position, JoinHandle<Result<Saved, Failure>>)>,
}

/// One sink's loop and everything it needs.
pub(super) struct Runner {
    pub pool: PgPool,
    pub sink: Arc<dyn Sink>,
    pub filter: SinkFilter,
    pub batch: usize,
    pub max_attempts: u32,
    pub config: Arc<DispatcherConfig>,
    pub state: watch::Sender<LocalState>,
    pub shutdown: watch::Receiver<bool>,
    /// Turns true when the lease held now is lost (a fresh, never-set channel between leases).
    pub lost: watch::Receiver<bool>,
    lease_name: String,
    cursor_name: String,
    /// Not before this time may the sink be called again (a `Retry-After`).
    pub not_before: Option<OffsetDateTime>,
}

impl Runner {
    pub fn new(
        pool: PgPool,
        spec: &SinkSpec,
        config: Arc<DispatcherConfig>,
        state: watch::Sender<LocalState>,
        shutdown: watch::Receiver<bool>,
    ) -> Runner {
        let id = spec.sink.id();
        Runner {
            pool,
            sink: spec.sink.clone(),
            filter: spec.filter.clone(),
            batch: spec.batch,
            max_attempts: spec.max_attempts,
            config,
            state,
            shutdown,
            lost: never_lost(),
            lease_name: dispatch_name(id),
            cursor_name: sink_name(id),
            not_before: None,
        }
    }

    /// Tries for the lease until shutdown; works while holding it.
    pub async fn run(mut self) {
        while !self.stopping() {
            match lease::acquire(&self.pool, &self.lease_name, &self.config.holder, self.config.lease_ttl).await {
                Ok(Some(lease)) => {
                    if let End::Shutdown = self.hold(&lease).await {
                        self.release(&lease).await;
                        break;
                    }
                }
                Ok(None) => self.update(|state| state.activity = Activity::Standby),
                Err(error) => self.note_error(&format!("acquiring the lease: {error}")),
            }
            if self.idle_wait(self.config.lease_retry).await.is_err() {
                break;
            }
        }
        self.update(|state| {
            state.activity = Activity::Stopped;
            state.lease_epoch = None;
        });
    }

    /// Works under `lease` while a second future renews it.
    ///
    /// A lost lease is a signal, not a cancellation: the work stops at its next wait or
    /// delivery call (a delivery in flight is dropped at once), but a database call in flight
    /// is never cut. sqlx 0.9's `begin` is not cancel safe: cut between `BEGIN` and its answer,
    /// it returns the connection to the pool inside an open transaction, which would hold
    /// every outbox reader back.
    async fn hold(&mut self, lease: &Lease) -> End {
        tracing::info!(sink = self.sink.id(), holder = %lease.holder, epoch = lease.epoch, "lease acquired");
        self.update(|state| {
            state.lease_epoch = Some(lease.epoch);
            state.activity = Activity::Idle;
        });
        self.prepare_sink();
        let (lost, lost_signal) = watch::channel(false);
        self.lost = lost_signal;
        let keeper = keep(self.pool.clone(), lease.clone(), self.config.lease_ttl, self.config.lease_renew, lost);
        let end = {
            let work = self.work(lease);
            tokio::pin!(keeper, work);
            let mut keeping = true;
            loop {
                tokio::select! {
                    end = &mut work => break end,
                    () = &mut keeper, if keeping => keeping = false,
                }
            }
        };
        self.lost = never_lost();
        if let End::LeaseLost = end {
            tracing::warn!(sink = self.sink.id(), epoch = lease.epoch, "lease lost; the batch in flight was abandoned");
            self.update(|state| {
                state.activity = Activity::Standby;
                state.leases_lost += 1;
            });
        }
        self.update(|state| state.lease_epoch = None);
        end
    }

    /// Lets the sink get ready (connect) beside the cursor load and the first read, without
    /// waiting for it; a failure is the first delivery's to meet and report.
    fn prepare_sink(&self) {
        let sink = self.sink.clone();
        tokio::spawn(async move {
            if let Err(error) = sink.prepare().await {
                tracing::debug!(sink = sink.id(), %error, "preparing the sink failed; its first delivery will retry");
            }
        });
    }

    async fn release(&self, lease: &Lease) {
        match lease::release(&self.pool, lease).await {
            Ok(_) => tracing::info!(sink = self.sink.id(), epoch = lease.epoch, "lease released"),
            Err(error) => tracing::warn!(sink = self.sink.id(), %error, "releasing the lease failed; it will expire"),
        }
    }

    /// Reads, delivers and records until the lease is lost or shutdown is asked for.
    async fn work(&mut self, lease: &Lease) -> End {
        let mut progress = Progress {
            cursor: None,
            loaded: false,
            after: None,
            skip_saved_at: Instant::now(),
            prefetched: None,
            backoff: Backoff::new(self.config.backoff),
            suspect: None,
            delivered_in_round: false,
            reported_failure: false,
            saving: None,
        };
        let end = self.work_on(lease, &mut progress).await;
        // A save still running is waited for (never cut): the lease is released after it.
        let _ = self.saved(&mut progress).await;
        end
    }

    async fn work_on(&mut self, lease: &Lease, progress: &mut Progress) -> End {
        loop {
            if let Err(interruption) = self.interrupted() {
                return interruption.into();
            }
            progress.delivered_in_round = false;
            let mut step = self.step(lease, progress).await;
            // Before a wait, the save running beside the loop is collected: its failure or a
            // lost lease counts for this round (after a lost lease or a shutdown, `work` does).
            if matches!(step, Step::Idle | Step::Failed(_))
                && let Err(failed) = self.saved(progress).await
            {
                step = failed;
            }
            let waited = match step {
                Step::Progressed => {
                    self.recovered(progress).await;
                    Ok(())
                }
                Step::Idle => {
                    self.recovered(progress).await;
                    self.update(|state| state.activity = Activity::Idle);
                    self.idle_wait(self.config.poll_interval).await
                }
                Step::Failed(failure) => self.back_off(progress, failure).await,
                Step::LeaseLost => Err(Interruption::LeaseLost),
                Step::Shutdown => Err(Interruption::Shutdown),
            };
            if let Err(interruption) = waited {
                return interruption.into();
            }
        }
    }

    /// Whether shutdown was asked for or the lease was lost.
    pub fn interrupted(&self) -> Result<(), Interruption> {
        if *self.shutdown.borrow() {
            return Err(Interruption::Shutdown);
        }
        if *self.lost.borrow() {
            return Err(Interruption::LeaseLost);
        }
        Ok(())
    }

    /// Waits out the next backoff delay, unless shutdown or a lost lease ends it first.
    async fn back_off(&mut self, progress: &mut Progress, failure: Failure) -> Result<(), Interruption> {
        if progress.delivered_in_round {
            progress.backoff.reset();
        }
        let delay = progress.backoff.next_delay_at_least(failure.retry_after);
        let until = self.config.clock.now() + delay;
        tracing::warn!(sink = self.sink.id(), error = %failure.message, delay_ms = delay.as_millis() as u64, "backing off");
        self.note_error(&failure.message);
        self.update(|state| state.activity = Activity::BackingOff { until });
        match sink_health::record_failure(&self.pool, self.sink.id(), &failure.message, delay).await {
            Ok(()) => progress.reported_failure = true,
            Err(error) => tracing::debug!(sink = self.sink.id(), %error, "reporting the failure failed"),
        }
        self.clock_wait(delay).await
    }

    /// A step went through: the backoff starts over, and a reported failure is over.
    async fn recovered(&self, progress: &mut Progress) {
        progress.backoff.reset();
        if progress.reported_failure {
            match sink_health::record_recovery(&self.pool, self.sink.id()).await {
                Ok(()) => progress.reported_failure = false,
                Err(error) => tracing::debug!(sink = self.sink.id(), %error, "reporting the recovery failed"),
            }
        }
    }

    /// Loads the cursor once, reads one page after it and delivers it.
    async fn step(&mut self, lease: &Lease, progress: &mut Progress) -> Step {
        if !progress.loaded {
            match cursor::load(&self.pool, OUTBOX_STREAM, &self.cursor_name).await {
                Ok(position) => {
                    progress.cursor = position;
                    progress.after = position;
                    progress.loaded = true;
                    self.update(|state| state.position = position);
                }
                Err(error) => return Step::Failed(Failure::database(error)),
            }
        }
        // A read the loop waits for takes one batch, so that delivering starts as soon as it
        // can; the reads beside deliveries take up to four.
        let page = match progress.prefetched.take() {
            Some((after, page)) if after == progress.after => page,
            _ => match self.reader(self.batch).read(progress.after).await {
                Ok(page) => page,
                Err(error) => return Step::Failed(Failure::database(error)),
            },
        };
        if page.events.is_empty() {
            return self.skip(lease, progress, &page).await;
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
        let step = self.deliver_page(lease, progress, &page).await;
        if let (Step::Progressed, Some(prefetch)) = (&step, prefetch)
            && let Ok(Some(next)) = prefetch.await
            && progress.after == next_after
        {
            progress.prefetched = Some((next_after, next));
        }
        step
    }

    /// A page without events for this sink: read on from where it ended, and save that
    /// position now and then (so that retention can pass rows no filter of it wants).
    async fn skip(&self, lease: &Lease, progress: &mut Progress, page: &ReadPage) -> Step {
        progress.after = progress.after.max(Some(page.next_after));
        if progress.skip_saved_at.elapsed() >= SKIP_SAVE_INTERVAL {
            if let Err(step) = self.record(lease, progress, page.next_after, None).await {
                return step;
            }
            progress.skip_saved_at = Instant::now();
        }
        if page.more { Step::Progressed } else { Step::Idle }
    }

    /// What reads this sink's pages of up to `limit` events.
    fn reader(&self, limit: usize) -> PageReader {
        PageReader { pool: self.pool.clone(), request: self.request(None, limit) }
    }

    pub fn request(&self, after: Option<Position>, limit: usize) -> ReadRequest {
        ReadRequest { tenant_id: self.filter.tenant.clone(), patterns: self.filter.types.clone(), ..ReadRequest::all() }
            .after(after)
            .limit(limit)
    }

    /// The first event after `position` that the sink would receive, if one is visible.
    pub async fn next_event_after(&self, position: Position) -> Result<Option<Event>, outbox_pg::Error> {
        let mut after = position;
        loop {
            let page: ReadPage = read(&self.pool, &self.request(Some(after), 1)).await?;
            if let Some(event) = page.events.into_iter().next() {
                return Ok(Some(event));
            }
            if !page.more || page.next_after <= after {
                return Ok(None);
            }
            after = page.next_after;
        }
    }

    /// Moves the cursor to `to` (and writes `letter`) in one fenced transaction, after any
    /// save still running. Nothing is written when the cursor is already there and there
    /// is no letter.
    pub async fn record(
        &self,
        lease: &Lease,
        progress: &mut Progress,
        to: Position,
        letter: Option<NewDeadLetter<'_>>,
    ) -> Result<(), Step> {
        self.saved(progress).await?;
        let already = progress.cursor.map_or(to == Position::START, |cursor| cursor >= to);
        if already && letter.is_none() {
            return Ok(());
        }
        let saved = save(&self.pool, lease, &self.cursor_name, to, letter.as_ref()).await;
        self.settle_save(progress, to, saved, letter.is_some())
    }

    /// Like [`Runner::record`] without a letter, but the save runs beside what the loop
    /// does next (the next page's delivery); the save after it, or the loop's next wait,
    /// collects its outcome first. Saves stay in order and fenced, so a lost lease still
    /// writes nothing; what the next delivery sends meanwhile is delivered at least once,
    /// as after any crash.
    pub async fn record_behind(&self, lease: &Lease, progress: &mut Progress, to: Position) -> Result<(), Step> {
        self.saved(progress).await?;
        if progress.cursor.is_some_and(|cursor| cursor >= to) {
            return Ok(());
        }
        let (pool, lease, name) = (self.pool.clone(), lease.clone(), self.cursor_name.clone());
        let saving = tokio::spawn(async move { save(&pool, &lease, &name, to, None).await });
        progress.after = progress.after.max(Some(to));
        progress.saving = Some((to, saving));
        Ok(())
    }

    /// Waits for the save running beside the loop, if any, and takes in its outcome.
    pub async fn saved(&self, progress: &mut Progress) -> Result<(), Step> {
        let Some((to, saving)) = progress.saving.take() else { return Ok(()) };
        let saved = saving.await.unwrap_or_else(|error| {
            Err(Failure { message: format!("saving the cursor failed: {error}"), retry_after: None })
        });
        self.settle_save(progress, to, saved, false)
    }

    fn settle_save(
        &self,
        progress: &mut Progress,
        to: Position,
        saved: Result<Saved, Failure>,
        lettered: bool,
    ) -> Result<(), Step> {
        let now_at = match saved.map_err(Step::Failed)? {
            Saved::LeaseLost => {
                self.update(|state| state.fenced_out += 1);
                return Err(Step::LeaseLost);
            }
            Saved::Moved => to,
            Saved::AlreadyPast(stored) => {
                tracing::warn!(sink = self.sink.id(), %stored, %to, "the stored cursor was already past this batch");
                stored.max(to)
            }
        };
        progress.cursor = Some(now_at);
        progress.after = progress.after.max(Some(now_at));
        self.update(|state| {
            state.position = Some(now_at);
            state.dead_lettered += u64::from(lettered);
        });
        Ok(())
    }

    pub fn stopping(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// Waits `duration` on tokio's timer, unless shutdown or a lost lease ends it first.
    async fn idle_wait(&self, duration: Duration) -> Result<(), Interruption> {
        tokio::select! {
            () = tokio::time::sleep(duration) => self.interrupted(),
            interruption = self.interruption() => Err(interruption),
        }
    }

    /// Waits `duration` on the dispatcher's clock, unless shutdown or a lost lease ends it first.
    pub async fn clock_wait(&self, duration: Duration) -> Result<(), Interruption> {
        tokio::select! {
            () = self.config.clock.sleep(duration) => self.interrupted(),
            interruption = self.interruption() => Err(interruption),
        }
    }

    /// Resolves when shutdown is asked for or the lease is lost.
    pub async fn interruption(&self) -> Interruption {
        tokio::select! {
            () = raised(self.shutdown.clone()) => Interruption::Shutdown,
            () = raised(self.lost.clone()) => Interruption::LeaseLost,
        }
    }

    pub fn update(&self, change: impl FnOnce(&mut LocalState)) {
        self.state.send_modify(change);
    }

    /// Notes a failed delivery call here and reports it for every process to see.
    pub async fn report_error(&self, message: &str) {
        self.note_error(message);
        self.update(|state| state.failed_calls += 1);
        if let Err(error) = sink_health::record_error(&self.pool, self.sink.id(), message).await {
            tracing::debug!(sink = self.sink.id(), %error, "reporting the error failed");
        }
    }

    pub fn note_error(&self, message: &str) {
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

/// Moves the cursor `name` to `to` (and writes `letter`) in one fenced statement or transaction.
///
/// Progress may be lost in a crash (the events are delivered again, at least once), so the
/// commit need not wait for the WAL flush; its order and the fence are unchanged.
async fn save(
    pool: &PgPool,
    lease: &Lease,
    name: &str,
    to: Position,
    letter: Option<&NewDeadLetter<'_>>,
) -> Result<Saved, Failure> {
    let saved = match letter {
        None => cursor::save(pool, lease, OUTBOX_STREAM, name, to, Durability::Relaxed).await,
        Some(letter) => {
            cursor::save_with_letter(pool, lease, OUTBOX_STREAM, name, to, letter, Durability::Relaxed).await
        }
    };
    saved.map_err(Failure::database)
}

/// A flag that never turns true.
fn never_lost() -> watch::Receiver<bool> {
    watch::channel(false).1
}

/// Renews `lease` every `every` until it is lost, then raises `lost` and returns. A renewal
/// that fails on a database error is retried, and the lease counts as lost once `ttl` passed
/// without a successful one.
async fn keep(pool: PgPool, mut lease: Lease, ttl: Duration, every: Duration, lost: watch::Sender<bool>) {
    renew_until_lost(&pool, &mut lease, ttl, every).await;
    let _ = lost.send(true);
}

async fn renew_until_lost(pool: &PgPool, lease: &mut Lease, ttl: Duration, every: Duration) {
    let mut last_renewed = Instant::now();
    loop {
        tokio::time::sleep(every).await;
        match tokio::time::timeout(every.max(Duration::from_secs(1)), lease::renew(pool, lease, ttl)).await {
            Ok(Ok(Some(renewed))) => {
                *lease = renewed;
                last_renewed = Instant::now();
            }
            Ok(Ok(None)) => return,
            Ok(Err(error)) => tracing::warn!(lease = %lease.name, %error, "renewing the lease failed; retrying"),
            Err(_) => tracing::warn!(lease = %lease.name, "renewing the lease timed out; retrying"),
        }
        if last_renewed.elapsed() >= ttl {
            return;
        }
    }
}
