//! The lease's lifetime: take it, keep it beside the work, notice its loss, release it.
//!
//! A second future renews the lease while the loop works. When a renewal finds the lease
//! lost (or none succeeded for a whole TTL), it raises the runner's `lost` flag; the loop
//! sees the flag at its next wait or delivery call. A lost lease is a signal, never a
//! cancellation: a database call of the work always runs to its end (only a renewal that
//! takes longer than its period, or a second, is given up and tried again).

use std::sync::Arc;
use std::time::Duration;

use outbox_pg::internal::lease::{self, Lease};
use outbox_pg::sqlx::PgPool;
use tokio::sync::watch;
use tokio::time::Instant;

use super::{Interruption, Runner};
use crate::state::Activity;

/// A lease a loop works under without taking it: a keeper (a webhook shard's) holds it and
/// publishes it, `Some` while held and `None` once lost; its renewals keep the epoch.
pub(crate) type SharedLease = watch::Receiver<Option<Lease>>;

impl Runner {
    /// Tries for the lease until shutdown; works while holding it. A loop given a shared
    /// lease works while its keeper holds that instead, and never takes or releases it.
    pub(crate) async fn run(mut self) {
        if let Some(shared) = self.shared.take() {
            return self.run_shared(shared).await;
        }
        while !self.stopping() {
            match lease::acquire(&self.pool, &self.lease_name, &self.config.holder, self.config.lease_ttl).await {
                Ok(Some(lease)) => {
                    let lost = self.fresh_lost_flag();
                    let (ttl, every) = (self.config.lease_ttl, self.config.lease_renew);
                    let keeper = keep(self.pool.clone(), lease.clone(), ttl, every, lost);
                    if let Interruption::Shutdown | Interruption::Reconfigured = self.hold(&lease, keeper).await {
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

    /// Works whenever the keeper publishes a lease, until shutdown.
    ///
    /// A fenced save can find the lease lost before the keeper does (another holder took it
    /// after it expired, while this process stood still): the keeper then still publishes
    /// the lost lease until its next renewal. The loop does not work under that lease again:
    /// it waits until the keeper publishes another one (or none, when it notices).
    async fn run_shared(mut self, mut shared: SharedLease) {
        let mut lost_epoch = None;
        while !self.stopping() {
            let held = shared.borrow_and_update().clone();
            match held {
                Some(lease) if Some(lease.epoch) != lost_epoch => {
                    let lost = self.fresh_lost_flag();
                    let keeper = follow_shared(shared.clone(), lease.epoch, lost);
                    match self.hold(&lease, keeper).await {
                        Interruption::Shutdown | Interruption::Reconfigured => break,
                        Interruption::LeaseLost => lost_epoch = Some(lease.epoch),
                    }
                }
                _ => {
                    self.update(|state| state.activity = Activity::Standby);
                    let shutdown = self.shutdown.clone();
                    tokio::select! {
                        changed = shared.changed() => if changed.is_err() { break },
                        () = super::raised(shutdown) => break,
                    }
                }
            }
        }
        self.update(|state| {
            state.activity = Activity::Stopped;
            state.lease_epoch = None;
        });
    }

    /// Works under `lease` while `keeper` (the renewals, or a shared lease's follower)
    /// runs beside; `keeper` raises the runner's `lost` flag when the lease is gone.
    ///
    /// A lost lease is a signal, not a cancellation: the work stops at its next wait or
    /// delivery call (a delivery in flight is dropped at once), but a database call in flight
    /// is never cut. sqlx 0.9's `begin` is not cancel safe: cut between `BEGIN` and its answer,
    /// it returns the connection to the pool inside an open transaction, which would hold
    /// every outbox reader back.
    /// A new `lost` flag for the next lease; returns what raises it.
    fn fresh_lost_flag(&mut self) -> Arc<watch::Sender<bool>> {
        let raise = Arc::new(watch::Sender::new(false));
        self.lost = raise.subscribe();
        self.raise_lost = raise.clone();
        raise
    }

    async fn hold(&mut self, lease: &Lease, keeper: impl std::future::Future<Output = ()>) -> Interruption {
        tracing::info!(sink = self.sink.id(), holder = %lease.holder, epoch = lease.epoch, "lease acquired");
        self.update(|state| {
            state.lease_epoch = Some(lease.epoch);
            state.activity = Activity::Idle;
        });
        self.prepare_sink();
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
        if let Some(feed) = &self.feed {
            feed.leave(self.lane.index).await;
        }
        if let Interruption::LeaseLost = end {
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
}

/// Raises `lost` once the shared lease is no longer the one of `epoch` (lost, or taken
/// again under another epoch), or its keeper is gone.
async fn follow_shared(mut shared: SharedLease, epoch: i64, lost: Arc<watch::Sender<bool>>) {
    while shared.changed().await.is_ok() {
        if shared.borrow().as_ref().map(|lease| lease.epoch) != Some(epoch) {
            break;
        }
    }
    lost.send_replace(true);
}

/// Renews `lease` every `every` until it is lost, then raises `lost` and returns (what a
/// webhook shard's keeper runs too).
#[cfg_attr(not(feature = "webhook"), allow(dead_code))]
pub(crate) async fn keep_shared(
    pool: PgPool,
    lease: Lease,
    ttl: Duration,
    every: Duration,
    published: watch::Sender<Option<Lease>>,
) {
    let mut lease = lease;
    renew_until_lost(&pool, &mut lease, ttl, every).await;
    published.send_replace(None);
}

/// A flag that never turns true.
pub(super) fn never_lost() -> watch::Receiver<bool> {
    watch::channel(false).1
}

/// Renews `lease` every `every` until it is lost, then raises `lost` and returns. A renewal
/// that fails on a database error is retried, and the lease counts as lost once `ttl` passed
/// without a successful one.
async fn keep(pool: PgPool, mut lease: Lease, ttl: Duration, every: Duration, lost: Arc<watch::Sender<bool>>) {
    renew_until_lost(&pool, &mut lease, ttl, every).await;
    lost.send_replace(true);
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
