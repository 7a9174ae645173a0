//! Retention (SPEC §9): the outbox is not an archive.
//!
//! [`Retention::start`] runs one loop that, every [`RetentionConfig::every`], tries for the
//! lease `singleton:core.retention` (renewing it when it already holds it) and, while it
//! holds it, runs one [`pass`]. A pass deletes rows that every holding durable cursor of
//! the outbox has passed and that are older than `min_age` by `compute_now()`, in
//! statements of at most `batch` rows and at most `max_rounds` statements, so a backlog
//! drains over several passes and no statement runs long (see `outbox_pg::internal::retention` for
//! the SQL and its locks).
//!
//! - No holding cursor → nothing is pruned: without a durable consumer nobody said what
//!   may go.
//! - A cursor of a disabled sink does not hold retention back ([`Holders`]): the server
//!   counts the sinks of its `[[sinks]]` as the enabled ones.
//! - Readers that resume from a pruned position (a list cursor, an SSE `Last-Event-ID`, a
//!   sink re-enabled after its rows went) continue with the oldest row still stored.
//!
//! The deletes are not fenced by the lease: a pass only deletes what every cursor has
//! passed, and cursors only move forward, so two passes racing after a lease change would
//! delete the same kind of rows, never a needed one. The lease keeps the work to one
//! process.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use outbox_core::Position;
use outbox_pg::internal::lease::{self, Lease};
use outbox_pg::internal::retention::{self, HoldingCursor, LEASE};
use outbox_pg::sqlx::PgPool;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use outbox_pg::internal::retention::Holders;

use crate::{Error, Result};

/// How retention runs.
#[derive(Debug, Clone)]
pub struct RetentionConfig {
    /// Between passes (default 5 minutes).
    pub every: Duration,
    /// Rows per delete statement (default 5,000).
    pub batch: u64,
    /// Delete statements per pass at most (default 20).
    pub max_rounds: u64,
    /// How long a pass rests after each delete statement before the next (default 250 ms),
    /// so that publishers' commits are not queued behind a run of deletes' WAL and I/O
    /// (`cargo xtask bench retention` measures it; zero runs the statements back to back).
    pub pause: Duration,
    /// Rows younger than this stay, by `compute_now()` (default 1 hour).
    pub min_age: Duration,
    /// Which durable cursors hold retention back (default: every one).
    pub holders: Holders,
    /// This worker's name in the lease table (default: host, process and a random part).
    pub holder: String,
}

impl Default for RetentionConfig {
    fn default() -> RetentionConfig {
        RetentionConfig {
            every: Duration::from_secs(300),
            batch: 5000,
            max_rounds: 20,
            pause: Duration::from_millis(250),
            min_age: Duration::from_secs(3600),
            holders: Holders::Every,
            holder: crate::default_holder(),
        }
    }
}

/// The longest wait between passes: a week. A longer one would make the lease's TTL
/// (a pass and the wait after it) overflow what a duration and PostgreSQL's interval hold.
const MAX_EVERY: Duration = Duration::from_secs(7 * 24 * 3600);

impl RetentionConfig {
    /// Checks the settings, naming the `[retention]` key of a bad one
    /// ([`Error::Config`]); [`Retention::start`] checks too, a host calls it at start-up.
    pub fn validate(&self) -> Result<()> {
        if self.batch == 0 {
            return Err(Error::config("retention.batch", "must be at least 1"));
        }
        if self.max_rounds == 0 {
            return Err(Error::config("retention.max_rounds", "must be at least 1"));
        }
        if self.every.is_zero() || self.every > MAX_EVERY {
            return Err(Error::config("retention.every_seconds", "must be 1 to 604800 (a week)"));
        }
        if self.holder.is_empty() {
            return Err(Error::config("retention.holder", "must not be empty"));
        }
        Ok(())
    }

    /// How long the lease lasts: a pass and the wait after it, with room to spare.
    fn lease_ttl(&self) -> Duration {
        self.every + self.every.min(Duration::from_secs(60)) + Duration::from_secs(30)
    }
}

/// What one pass did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassReport {
    /// Rows deleted.
    pub deleted: u64,
    /// Delete statements run.
    pub statements: u64,
    /// The lowest holding cursor, which bounded the pass; `None` when no cursor holds the
    /// outbox (and nothing was deleted).
    pub bound: Option<HoldingCursor>,
    /// Whether the pass stopped because `max_rounds` ran out while rows were still deletable.
    pub more: bool,
}

/// Runs one pass now, without a lease (the loop of [`Retention`] takes it first).
pub async fn pass(pool: &PgPool, config: &RetentionConfig) -> Result<PassReport> {
    let cursors = retention::holding_cursors(pool, &config.holders).await?;
    let Some(lowest) = cursors.into_iter().next() else {
        return Ok(PassReport { deleted: 0, statements: 0, bound: None, more: false });
    };
    let mut report = PassReport { deleted: 0, statements: 0, bound: Some(lowest.clone()), more: false };
    let mut after: Option<Position> = None;
    while report.statements < config.max_rounds {
        let pruned = retention::prune_batch(pool, after, lowest.position, config.batch, config.min_age).await?;
        report.statements += 1;
        report.deleted += pruned.deleted;
        if let Some(last) = pruned.last {
            retention::record_pruned(pool, last).await?;
        }
        after = pruned.last.or(after);
        if pruned.deleted < config.batch {
            return Ok(report);
        }
        if report.statements < config.max_rounds && !config.pause.is_zero() {
            tokio::time::sleep(config.pause).await;
        }
    }
    report.more = true;
    Ok(report)
}

/// Counters of the retention loop in this process, for metrics.
#[derive(Debug, Default)]
pub struct RetentionStats {
    /// Passes run here.
    pub passes: AtomicU64,
    /// Rows deleted by this process.
    pub rows_deleted: AtomicU64,
    /// Passes that failed (a database error).
    pub failures: AtomicU64,
    /// Whether this process holds the retention lease now.
    pub holding: AtomicBool,
}

/// The retention loop of one process.
pub struct Retention {
    stats: Arc<RetentionStats>,
    last: Arc<Mutex<Option<PassReport>>>,
    shutdown: watch::Sender<bool>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl Retention {
    /// Checks `config` and spawns the loop on the current tokio runtime. The first pass runs
    /// at once (when the lease is free), then one every `config.every`.
    pub fn start(pool: PgPool, config: RetentionConfig) -> Result<Retention> {
        config.validate()?;
        let stats = Arc::new(RetentionStats::default());
        let last = Arc::new(Mutex::new(None));
        let (shutdown, signal) = watch::channel(false);
        let task = tokio::spawn(run(pool, config, stats.clone(), last.clone(), signal));
        Ok(Retention { stats, last, shutdown, task: Mutex::new(Some(task)) })
    }

    /// This process's counters.
    pub fn stats(&self) -> &Arc<RetentionStats> {
        &self.stats
    }

    /// What the last pass run here did.
    pub fn last_pass(&self) -> Option<PassReport> {
        self.last.lock().clone()
    }

    /// Whether the loop still runs (it ends only on shutdown, or if it panicked).
    pub fn is_running(&self) -> bool {
        self.task.lock().as_ref().is_some_and(|task| !task.is_finished())
    }

    /// Stops the loop after the statement in flight and releases the lease.
    pub async fn shutdown(&self) {
        let _ = self.shutdown.send(true);
        let task = self.task.lock().take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}

impl Drop for Retention {
    fn drop(&mut self) {
        if let Some(task) = self.task.get_mut().as_ref() {
            task.abort();
        }
    }
}

async fn run(
    pool: PgPool,
    config: RetentionConfig,
    stats: Arc<RetentionStats>,
    last: Arc<Mutex<Option<PassReport>>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut held: Option<Lease> = None;
    loop {
        held = keep_lease(&pool, &config, held).await;
        stats.holding.store(held.is_some(), Ordering::Relaxed);
        if held.is_some() {
            stats.passes.fetch_add(1, Ordering::Relaxed);
            match pass(&pool, &config).await {
                Ok(report) => {
                    stats.rows_deleted.fetch_add(report.deleted, Ordering::Relaxed);
                    if report.deleted > 0 {
                        tracing::info!(
                            deleted = report.deleted,
                            statements = report.statements,
                            more = report.more,
                            "retention pass"
                        );
                    }
                    *last.lock() = Some(report);
                }
                Err(error) => {
                    stats.failures.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(%error, "retention pass failed; trying again at the next one");
                }
            }
        }
        tokio::select! {
            () = tokio::time::sleep(config.every) => {}
            _ = shutdown.wait_for(|stop| *stop) => break,
        }
    }
    if let Some(lease) = held {
        let _ = lease::release(&pool, &lease).await;
    }
    stats.holding.store(false, Ordering::Relaxed);
}

/// Renews the lease held, or tries to take it; `None` when another process holds it.
async fn keep_lease(pool: &PgPool, config: &RetentionConfig, held: Option<Lease>) -> Option<Lease> {
    let ttl = config.lease_ttl();
    let renewed = match &held {
        Some(lease) => lease::renew(pool, lease, ttl).await,
        None => Ok(None),
    };
    match renewed {
        Ok(Some(lease)) => return Some(lease),
        Ok(None) => {}
        Err(error) => tracing::warn!(%error, "renewing the retention lease failed"),
    }
    match lease::acquire(pool, LEASE, &config.holder, ttl).await {
        Ok(lease) => lease,
        Err(error) => {
            tracing::warn!(%error, "taking the retention lease failed");
            None
        }
    }
}
