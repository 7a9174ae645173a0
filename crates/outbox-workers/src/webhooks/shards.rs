//! Shards and loops: a process takes its fair share of the subscriptions' shards and runs
//! one dispatcher loop per enabled subscription of the shards it holds.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use outbox_core::Pattern;
use outbox_pg::internal::lease::{self, Lease};
use outbox_pg::internal::webhook::{self as store, CURSOR_STREAM};
use outbox_pg::sqlx::PgPool;
use time::OffsetDateTime;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use super::WebhookDeliveryConfig;
use super::client::WebhookClient;
use super::sink::SubscriptionSink;
use crate::dispatcher::{SharedLease, keep_shared, spawn_loop};
use crate::{ConsumerNames, DispatcherConfig, Error, Result, SinkSpec};

/// Events a subscription's loop takes per step, each still POSTed alone: the attempts and
/// the cursor are recorded once per step.
const DELIVERY_BATCH: usize = 100;

/// One subscription's loop.
struct Loop {
    shard: i32,
    updated_at: OffsetDateTime,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

/// A shard this process holds: the lease its keeper renews and publishes to the loops.
struct Held {
    lease: Lease,
    published: SharedLease,
    keeper: JoinHandle<()>,
}

/// The name of shard `shard`'s lease.
fn shard_lease(shard: i32) -> String {
    format!("{SHARD_PREFIX}{shard}")
}

/// The prefix of the shards' leases.
const SHARD_PREFIX: &str = "singleton:outbox-webhooks:shard:";
/// The prefix of the members' leases: each delivering process holds one, so that every
/// process knows how many share the shards.
const MEMBER_PREFIX: &str = "singleton:outbox-webhooks:member:";

/// Compares the enabled subscriptions with the loops, every `refresh` and whenever a loop
/// finds its subscription changed.
pub(super) struct Supervisor {
    pool: PgPool,
    config: WebhookDeliveryConfig,
    dispatcher: Arc<DispatcherConfig>,
    client: WebhookClient,
    held: HashMap<i32, Held>,
    member: Option<Held>,
    running: HashMap<String, Loop>,
    /// Raised by a loop's sink that found its subscription changed.
    changed: Arc<Notify>,
    /// The subscriptions whose loops run, published after every change.
    delivering: watch::Sender<BTreeSet<String>>,
}

impl Supervisor {
    pub(super) fn new(
        pool: PgPool,
        config: WebhookDeliveryConfig,
        client: WebhookClient,
        delivering: watch::Sender<BTreeSet<String>>,
    ) -> Supervisor {
        Supervisor {
            pool,
            dispatcher: Arc::new(config.dispatcher.clone()),
            config,
            client,
            held: HashMap::new(),
            member: None,
            running: HashMap::new(),
            changed: Arc::new(Notify::new()),
            delivering,
        }
    }

    pub(super) async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        let mut next_balance = Instant::now();
        while !*shutdown.borrow() {
            self.forget_lost_shards().await;
            if Instant::now() >= next_balance {
                if let Err(error) = self.balance().await {
                    tracing::warn!(%error, "taking webhook shards failed; trying again");
                }
                next_balance = Instant::now() + self.dispatcher.lease_retry;
            }
            match store::enabled(&self.pool).await {
                Ok(enabled) => self.reconcile(enabled).await,
                Err(error) => tracing::warn!(%error, "reading the webhook subscriptions failed; trying again"),
            }
            tokio::select! {
                _ = shutdown.changed() => {}
                () = tokio::time::sleep(self.config.refresh) => {}
                () = self.changed.notified() => {}
            }
        }
        let running: Vec<String> = self.running.keys().cloned().collect();
        self.stop(running).await;
        self.running.clear();
        let shards: Vec<i32> = self.held.keys().copied().collect();
        for shard in shards {
            self.release(shard).await;
        }
        if let Some(member) = self.member.take() {
            member.keeper.abort();
            let _ = lease::release(&self.pool, &member.lease).await;
        }
    }

    /// Takes free shards up to this process's fair share (the shards divided by the
    /// processes taking part, rounded up) and gives back what it holds above it, so that
    /// processes split the shards and a dead one's are taken over once its leases expire.
    async fn balance(&mut self) -> Result<()> {
        let holder = self.dispatcher.holder.clone();
        if self.member.as_ref().is_none_or(|member| member.published.borrow().is_none()) {
            self.member = self.take(&format!("{MEMBER_PREFIX}{holder}")).await?;
        }
        let members = lease::live_holders(&self.pool, MEMBER_PREFIX).await?.len().max(1);
        let fair = store::SHARDS.div_ceil(u32::try_from(members).unwrap_or(u32::MAX)) as usize;
        while self.held.len() > fair {
            let Some(&shard) = self.held.keys().max() else { break };
            self.release(shard).await;
        }
        for shard in 0..store::SHARDS as i32 {
            if self.held.len() >= fair {
                break;
            }
            if self.held.contains_key(&shard) {
                continue;
            }
            if let Some(held) = self.take(&shard_lease(shard)).await? {
                tracing::info!(shard, holder = %holder, "webhook shard taken");
                self.held.insert(shard, held);
            }
        }
        Ok(())
    }

    /// Takes lease `name` when it is free, with a keeper renewing it.
    async fn take(&self, name: &str) -> Result<Option<Held>> {
        let (holder, ttl, every) = (&self.dispatcher.holder, self.dispatcher.lease_ttl, self.dispatcher.lease_renew);
        let Some(lease) = lease::acquire(&self.pool, name, holder, ttl).await? else { return Ok(None) };
        let (publish, published) = watch::channel(Some(lease.clone()));
        let keeper = tokio::spawn(keep_shared(self.pool.clone(), lease.clone(), ttl, every, publish));
        Ok(Some(Held { lease, published, keeper }))
    }

    /// Stops the loops of shards whose lease was lost.
    async fn forget_lost_shards(&mut self) {
        let lost: Vec<i32> =
            self.held.iter().filter(|(_, held)| held.published.borrow().is_none()).map(|(shard, _)| *shard).collect();
        for shard in lost {
            tracing::warn!(shard, "webhook shard lost");
            self.held.remove(&shard);
            let loops: Vec<String> =
                self.running.iter().filter(|(_, running)| running.shard == shard).map(|(id, _)| id.clone()).collect();
            self.stop(loops).await;
        }
    }

    /// Stops shard `shard`'s loops and gives its lease back.
    async fn release(&mut self, shard: i32) {
        let loops: Vec<String> =
            self.running.iter().filter(|(_, running)| running.shard == shard).map(|(id, _)| id.clone()).collect();
        self.stop(loops).await;
        if let Some(held) = self.held.remove(&shard) {
            held.keeper.abort();
            if let Err(error) = lease::release(&self.pool, &held.lease).await {
                tracing::warn!(shard, %error, "releasing a webhook shard failed; it will expire");
            }
        }
    }

    /// Stops the loops of `ids` gracefully, all at once, and waits for them.
    async fn stop(&mut self, ids: Vec<String>) {
        let stopping: Vec<Loop> = ids.iter().filter_map(|id| self.running.remove(id)).collect();
        for running in &stopping {
            let _ = running.stop.send(true);
        }
        for running in stopping {
            let _ = running.task.await;
        }
        self.publish_delivering();
    }

    /// Stops the loops of subscriptions gone, disabled, changed or in a shard not held here;
    /// starts the missing ones of the shards held here.
    async fn reconcile(&mut self, enabled: Vec<(String, OffsetDateTime)>) {
        let wanted: HashMap<String, OffsetDateTime> =
            enabled.into_iter().filter(|(id, _)| self.held.contains_key(&store::shard_of(id))).collect();
        let stale: Vec<String> = self
            .running
            .iter()
            .filter(|(id, running)| wanted.get(*id) != Some(&running.updated_at) || running.task.is_finished())
            .map(|(id, _)| id.clone())
            .collect();
        self.stop(stale).await;
        for id in wanted.into_keys() {
            if self.running.contains_key(&id) {
                continue;
            }
            match self.spawn(&id).await {
                Ok(Some(running)) => {
                    self.running.insert(id, running);
                }
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(webhook = %id, %error, "starting a webhook subscription failed; trying again")
                }
            }
        }
        self.publish_delivering();
    }

    /// Publishes which subscriptions have a loop here ([`super::WebhookDeliveries::delivering`]).
    fn publish_delivering(&self) {
        let running: BTreeSet<String> = self.running.keys().cloned().collect();
        self.delivering.send_if_modified(|published| {
            let changed = *published != running;
            *published = running;
            changed
        });
    }

    /// Starts subscription `id`'s loop, when its shard is held here and it still exists:
    /// under the revision read here, with the secrets read after it.
    async fn spawn(&self, id: &str) -> Result<Option<Loop>> {
        let shard = store::shard_of(id);
        let Some(held) = self.held.get(&shard) else { return Ok(None) };
        let Some(webhook) = store::get(&self.pool, None, id).await? else { return Ok(None) };
        let Some(keys) = store::keys(&self.pool, &self.client.seal_key, id).await? else { return Ok(None) };
        let types = webhook.types.iter().map(|text| Pattern::parse(text)).collect::<std::result::Result<Vec<_>, _>>();
        let types = types.map_err(|error| Error::config(format!("webhooks[{id}].types"), error.to_string()))?;
        let sink = SubscriptionSink::new(&webhook, keys, &self.client, Some(self.changed.clone()))?;
        let names = ConsumerNames {
            lease: shard_lease(shard),
            cursor_stream: CURSOR_STREAM.to_owned(),
            cursor_name: id.to_owned(),
            records: store::dead_letter_sink(id),
        };
        let spec = SinkSpec::new(sink)
            .tenant(webhook.tenant_id.clone())
            .types(types)
            .batch(DELIVERY_BATCH)
            .max_attempts(self.config.max_attempts)
            .names(names);
        let (stop, signal) = watch::channel(false);
        let (task, _state) =
            spawn_loop(self.pool.clone(), &spec, self.dispatcher.clone(), signal, Some(held.published.clone()))?;
        Ok(Some(Loop { shard, updated_at: webhook.updated_at, stop, task }))
    }
}

impl Drop for Supervisor {
    /// Aborts whatever still runs, like a crash (after a shutdown nothing does): the leases
    /// stay until they expire.
    fn drop(&mut self) {
        for running in self.running.values() {
            running.task.abort();
        }
        for held in self.held.values().chain(self.member.as_ref()) {
            held.keeper.abort();
        }
    }
}
