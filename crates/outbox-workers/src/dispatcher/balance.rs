//! Sharing a set of leases fairly among the processes that take part: what spreads webhook
//! shards and a sink's lanes (SPEC §7.6, §7.7) over the processes with the role.
//!
//! Each taking part holds a member lease (`<member prefix><holder>`), so every process
//! knows how many share the set. Each takes free leases of the set up to its fair share
//! (the set's size divided by the members, rounded up) and gives back what it holds above
//! it, highest names last taken first. A process that joins takes what the others gave back;
//! a dead one's leases are taken once they expire. Each lease held has a keeper that renews
//! it and publishes it (`Some` while held, `None` once lost) to whoever works under it.

use std::collections::BTreeMap;
use std::sync::Arc;

use outbox_pg::internal::lease::{self, Lease};
use outbox_pg::sqlx::PgPool;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::{DispatcherConfig, SharedLease, keep_shared};
use crate::Result;

/// A lease held, its keeper renewing it.
pub(crate) struct Held {
    pub(crate) lease: Lease,
    /// What the keeper publishes: `None` once the lease is lost.
    pub(crate) published: SharedLease,
    keeper: JoinHandle<()>,
}

/// The leases of one set this process holds.
pub(crate) struct Balancer {
    pool: PgPool,
    config: Arc<DispatcherConfig>,
    member_prefix: String,
    member: Option<Held>,
    held: BTreeMap<String, Held>,
}

impl Balancer {
    /// Shares a set among the holders of leases named `<member_prefix><holder>`.
    pub(crate) fn new(pool: PgPool, config: Arc<DispatcherConfig>, member_prefix: String) -> Balancer {
        Balancer { pool, config, member_prefix, member: None, held: BTreeMap::new() }
    }

    /// Takes (or keeps) this process's member lease and counts the members: at least one.
    pub(crate) async fn members(&mut self) -> Result<usize> {
        if self.member.as_ref().is_none_or(|member| member.published.borrow().is_none()) {
            let name = format!("{}{}", self.member_prefix, self.config.holder);
            self.member = self.take(&name).await?;
        }
        Ok(lease::live_holders(&self.pool, &self.member_prefix).await?.len().max(1))
    }

    /// This process's fair share of a set of `size` leases.
    pub(crate) async fn fair_share(&mut self, size: usize) -> Result<usize> {
        Ok(size.div_ceil(self.members().await?))
    }

    /// The leases of `set` to give back: those held above `fair`, the last of the set first.
    pub(crate) fn above_share(&self, set: &[String], fair: usize) -> Vec<String> {
        let held: Vec<&String> = set.iter().filter(|name| self.held.contains_key(*name)).collect();
        held.iter().rev().take(held.len().saturating_sub(fair)).map(|name| (*name).clone()).collect()
    }

    /// Takes free leases of `set`, in order, while fewer than `fair` are held; returns the
    /// names taken.
    pub(crate) async fn take_share(&mut self, set: &[String], fair: usize) -> Result<Vec<String>> {
        let mut taken = Vec::new();
        for name in set {
            if set.iter().filter(|name| self.held.contains_key(*name)).count() >= fair {
                break;
            }
            if self.held.contains_key(name) {
                continue;
            }
            if let Some(held) = self.take(name).await? {
                self.held.insert(name.clone(), held);
                taken.push(name.clone());
            }
        }
        Ok(taken)
    }

    /// Takes lease `name` when it is free, with a keeper renewing it.
    async fn take(&self, name: &str) -> Result<Option<Held>> {
        let (holder, ttl, every) = (&self.config.holder, self.config.lease_ttl, self.config.lease_renew);
        let Some(lease) = lease::acquire(&self.pool, name, holder, ttl).await? else { return Ok(None) };
        let (publish, published) = watch::channel(Some(lease.clone()));
        let keeper = tokio::spawn(keep_shared(self.pool.clone(), lease.clone(), ttl, every, publish));
        Ok(Some(Held { lease, published, keeper }))
    }

    /// The lease `name` while it is held here.
    pub(crate) fn held(&self, name: &str) -> Option<&Held> {
        self.held.get(name)
    }

    /// Forgets the leases whose keeper found them lost; returns their names.
    pub(crate) fn forget_lost(&mut self) -> Vec<String> {
        let lost: Vec<String> = self
            .held
            .iter()
            .filter(|(_, held)| held.published.borrow().is_none())
            .map(|(name, _)| name.clone())
            .collect();
        for name in &lost {
            self.held.remove(name);
        }
        lost
    }

    /// Gives lease `name` back (whoever worked under it has stopped).
    pub(crate) async fn release(&mut self, name: &str) {
        if let Some(held) = self.held.remove(name) {
            held.keeper.abort();
            if let Err(error) = lease::release(&self.pool, &held.lease).await {
                tracing::warn!(lease = name, %error, "releasing a lease failed; it will expire");
            }
        }
    }

    /// Gives every lease back, the member lease last.
    pub(crate) async fn release_all(&mut self) {
        let names: Vec<String> = self.held.keys().cloned().collect();
        for name in names {
            self.release(&name).await;
        }
        if let Some(member) = self.member.take() {
            member.keeper.abort();
            let _ = lease::release(&self.pool, &member.lease).await;
        }
    }
}

impl Drop for Balancer {
    /// Stops renewing, like a crash (after [`Balancer::release_all`] nothing is held): the
    /// leases stay until they expire.
    fn drop(&mut self) {
        for held in self.held.values().chain(self.member.as_ref()) {
            held.keeper.abort();
        }
    }
}
