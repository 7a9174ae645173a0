//! The lease's lifetime: take it, keep it beside the work, notice its loss, release it.
//!
//! A second future renews the lease while the loop works. When a renewal finds the lease
//! lost (or none succeeded for a whole TTL), it raises the runner's `lost` flag; the loop
//! sees the flag at its next wait or delivery call. A lost lease is a signal, never a
//! cancellation: a database call of the work always runs to its end (only a renewal that
//! takes longer than its period, or a second, is given up and tried again).

use std::time::Duration;

use outbox_pg::internal::lease::{self, Lease};
use outbox_pg::sqlx::PgPool;
use tokio::sync::watch;
use tokio::time::Instant;

use super::{Interruption, Runner};
use crate::state::Activity;

impl Runner {
    /// Tries for the lease until shutdown; works while holding it.
    pub(crate) async fn run(mut self) {
        while !self.stopping() {
            match lease::acquire(&self.pool, &self.lease_name, &self.config.holder, self.config.lease_ttl).await {
                Ok(Some(lease)) => {
                    if let Interruption::Shutdown = self.hold(&lease).await {
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
    async fn hold(&mut self, lease: &Lease) -> Interruption {
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

/// A flag that never turns true.
pub(super) fn never_lost() -> watch::Receiver<bool> {
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
