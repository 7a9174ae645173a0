//! Shards and loops: a process takes its fair share of the subscriptions' shards and runs
//! one dispatcher loop per enabled subscription of the shards it holds.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use outbox_core::Pattern;
use outbox_pg::Lane;
use outbox_pg::internal::cursor::lane_name;
use outbox_pg::internal::webhook::{self as store, CURSOR_STREAM, Enabled};
use outbox_pg::sqlx::PgPool;
use time::OffsetDateTime;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use super::WebhookDeliveryConfig;
use super::client::WebhookClient;
use super::sink::SubscriptionSink;
use crate::dispatcher::{Balancer, Feed, spawn_loop};
use crate::{ConsumerNames, DispatcherConfig, Error, Result, SinkSpec};

/// Events a subscription's loop takes per step, each still POSTed alone: the attempts and
/// the cursor are recorded once per step.
const DELIVERY_BATCH: usize = 100;

/// One loop: a subscription's, or one lane's of it.
struct Loop {
    id: String,
    shard: i32,
    updated_at: OffsetDateTime,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

/// The name of shard `shard`'s lease.
fn shard_lease(shard: i32) -> String {
    format!("{SHARD_PREFIX}{shard}")
}

/// Every shard's lease name, in shard order.
fn shard_leases() -> Vec<String> {
    (0..store::SHARDS as i32).map(shard_lease).collect()
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
    /// The shards held here.
    shards: Balancer,
    /// The loops, by lane: a subscription's id, or its lane's cursor name (`<id>#<lane>/<lanes>`).
    running: HashMap<String, Loop>,
    /// The reads each subscription's lanes here share, by id, for the revision they run.
    feeds: HashMap<String, (OffsetDateTime, Arc<Feed>)>,
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
        let dispatcher = Arc::new(config.dispatcher.clone());
        Supervisor {
            shards: Balancer::new(pool.clone(), dispatcher.clone(), MEMBER_PREFIX.to_owned()),
            pool,
            dispatcher,
            config,
            client,
            running: HashMap::new(),
            feeds: HashMap::new(),
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
        self.shards.release_all().await;
    }

    /// Takes free shards up to this process's fair share and gives back what it holds above
    /// it ([`Balancer`]), so that processes split the shards and a dead one's are taken over
    /// once its leases expire.
    async fn balance(&mut self) -> Result<()> {
        let set = shard_leases();
        let fair = self.shards.fair_share(set.len()).await?;
        for name in self.shards.above_share(&set, fair) {
            let loops = self.loops_of(&name);
            self.stop(loops).await;
            self.shards.release(&name).await;
        }
        for name in self.shards.take_share(&set, fair).await? {
            tracing::info!(shard = %name, holder = %self.dispatcher.holder, "webhook shard taken");
        }
        Ok(())
    }

    /// The loops of the shard whose lease is `name`.
    fn loops_of(&self, name: &str) -> Vec<String> {
        self.running
            .iter()
            .filter(|(_, running)| shard_lease(running.shard) == name)
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// Stops the loops of shards whose lease was lost.
    async fn forget_lost_shards(&mut self) {
        for name in self.shards.forget_lost() {
            tracing::warn!(shard = %name, "webhook shard lost");
            let loops = self.loops_of(&name);
            self.stop(loops).await;
        }
    }

    fn holds(&self, shard: i32) -> bool {
        self.shards.held(&shard_lease(shard)).is_some()
    }

    /// Stops the loops of `keys` gracefully, all at once, and waits for them.
    async fn stop(&mut self, keys: Vec<String>) {
        let stopping: Vec<Loop> = keys.iter().filter_map(|key| self.running.remove(key)).collect();
        for running in &stopping {
            let _ = running.stop.send(true);
        }
        for running in stopping {
            let _ = running.task.await;
        }
        self.publish_delivering();
    }

    /// Stops the loops of subscriptions gone, disabled, changed or in a shard not held here;
    /// starts the missing ones of the shards held here: one per lane of each subscription,
    /// each lane placed on a shard by its cursor name like a subscription by its id.
    async fn reconcile(&mut self, enabled: Vec<Enabled>) {
        let mut wanted: HashMap<String, (Lane, &Enabled)> = HashMap::new();
        for subscription in &enabled {
            for lane in (0..subscription.lanes).filter_map(|index| Lane::new(index, subscription.lanes)) {
                let key = lane_name(&subscription.id, lane);
                if self.holds(store::shard_of(&key)) {
                    wanted.insert(key, (lane, subscription));
                }
            }
        }
        let stale: Vec<String> = self
            .running
            .iter()
            .filter(|(key, running)| {
                wanted.get(*key).map(|(_, wanted)| wanted.updated_at) != Some(running.updated_at)
                    || running.task.is_finished()
            })
            .map(|(key, _)| key.clone())
            .collect();
        self.stop(stale).await;
        for (key, (lane, subscription)) in wanted {
            if self.running.contains_key(&key) {
                continue;
            }
            match self.spawn(&subscription.id, lane, store::shard_of(&key)).await {
                Ok(Some(running)) => {
                    self.running.insert(key, running);
                }
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(webhook = %subscription.id, %error, "starting a webhook subscription failed; trying again")
                }
            }
        }
        let ids: BTreeSet<&String> = self.running.values().map(|running| &running.id).collect();
        self.feeds.retain(|id, _| ids.contains(id));
        self.publish_delivering();
    }

    /// Publishes which subscriptions have a loop here ([`super::WebhookDeliveries::delivering`]).
    fn publish_delivering(&self) {
        let running: BTreeSet<String> = self.running.values().map(|running| running.id.clone()).collect();
        self.delivering.send_if_modified(|published| {
            let changed = *published != running;
            *published = running;
            changed
        });
    }

    /// Starts the loop of subscription `id`'s `lane`, when its shard is held here and the
    /// subscription still exists: under the revision read here, with the secrets read after it.
    async fn spawn(&mut self, id: &str, lane: Lane, shard: i32) -> Result<Option<Loop>> {
        let Some(published) = self.shards.held(&shard_lease(shard)).map(|held| held.published.clone()) else {
            return Ok(None);
        };
        let Some(webhook) = store::get(&self.pool, None, id).await? else { return Ok(None) };
        if webhook.lanes != lane.of {
            return Ok(None);
        }
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
            .lanes(lane.of)
            .names(names);
        let feed = (lane.of > 1).then(|| self.feed(id, webhook.updated_at, &spec));
        let (stop, signal) = watch::channel(false);
        let (task, _state) =
            spawn_loop(self.pool.clone(), &spec, self.dispatcher.clone(), signal, Some(published), (lane, feed))?;
        Ok(Some(Loop { id: id.to_owned(), shard, updated_at: webhook.updated_at, stop, task }))
    }

    /// The reads subscription `id`'s lanes of revision `updated_at` share here.
    fn feed(&mut self, id: &str, updated_at: OffsetDateTime, spec: &SinkSpec) -> Arc<Feed> {
        match self.feeds.get(id) {
            Some((revision, feed)) if *revision == updated_at => feed.clone(),
            _ => {
                let feed = Arc::new(Feed::new(self.pool.clone(), spec.read_request()));
                self.feeds.insert(id.to_owned(), (updated_at, feed.clone()));
                feed
            }
        }
    }
}

impl Drop for Supervisor {
    /// Aborts whatever still runs, like a crash (after a shutdown nothing does): the leases
    /// stay until they expire.
    fn drop(&mut self) {
        for running in self.running.values() {
            running.task.abort();
        }
    }
}
