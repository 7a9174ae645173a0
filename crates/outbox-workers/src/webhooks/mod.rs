//! Webhook subscriptions' deliveries (SPEC §7.6): every enabled subscription is an ordered,
//! durable consumer of its tenant's matching events, delivered one event per POST.
//!
//! Subscriptions are spread over [`SHARDS`](outbox_pg::internal::webhook::SHARDS) shards
//! by a stated hash of their id ([`shard_of`](outbox_pg::internal::webhook::shard_of)).
//! A delivering process holds shard leases (`singleton:outbox-webhooks:shard:<n>`), not
//! one lease per subscription: it takes free shards up to its fair share (the shards
//! divided by the processes taking part, each of which holds a member lease
//! `singleton:outbox-webhooks:member:<holder>`), gives back what it holds above it, and
//! so processes split the shards; a dead process's shards are taken once its leases
//! expire. For each enabled subscription of a shard it holds,
//! [`WebhookDeliveries`] runs the dispatcher loop that runs a configured sink (fenced
//! cursor saves, backoff honouring `Retry-After`, bisection and dead letters) under the
//! shard's lease, with the subscription's own cursor `('webhooks', <id>)` and dead letters
//! and health `webhook:<id>`. Every `refresh` it compares the enabled subscriptions with
//! the loops it runs: a new or re-enabled one gets a loop, a deleted or disabled one's loop
//! stops, and a changed one (a new URL, types, headers or secret) is restarted from its
//! cursor. So a subscription disabled for a while resumes where it stopped, with no gap.
//!
//! A change is in force once it is answered. Each loop delivers under the revision of the
//! subscription it was started with (its `updated_at`), and reads that revision again
//! after it read a batch, before its first POST and before every POST more than 2 ms after
//! the last check, and before it saves a cursor that passed rows its types skipped: one
//! lookup by primary key. A revision that moved (a rotated secret, a new URL, types or
//! headers, a disabled or deleted subscription) ends the loop before that POST, with
//! nothing passed that it did not deliver, and the supervisor starts the new one at once.
//! So every event published after the answer of a `PATCH`, `DELETE` or `rotate-secret` is
//! delivered under it (the event is read only after it commits, and the check comes after
//! the read), and a POST of an event read before the answer goes out as it was only within
//! 2 ms of a check that came before the answer. A notification would arrive some time
//! after the answer, and a check in the cursor's fenced save comes after the POST: neither
//! is in force at the answer. A receiver that answers within 2 ms gets several POSTs per
//! check, so the check costs a fast receiver's throughput nothing measurable.
//!
//! The parts: `shards` spreads the subscriptions and runs their loops, `sink` is one
//! subscription as a sink, `client` is the guarded HTTP client every delivery, ping and
//! replay goes through.
//!
//! Each POST carries the Standard Webhooks headers, signed with every secret that signs
//! now (the current one and those in their grace period, space-separated `v1,…`), and
//! the subscription's extra headers. It goes through one guarded HTTP client: no proxy
//! from the environment, no redirect followed, the timeout of `[webhooks] timeout_ms`, and
//! a resolver that answers only addresses the [`TargetPolicy`] allows, so the connection
//! goes to an address that was checked (an IP literal is checked before the request).
//! 2xx is delivered; 410 disables the subscription at once (`gone`); 408, 429, 5xx, a
//! refused address and connection failures are retried; any other status is a refusal.
//! Every attempt is recorded, and a run of failures longer than `disable_after` disables
//! it (`failing`); either publishes `webhook.disabled` for its tenant. An attempt's time,
//! like `failing_since`, is the database clock's: the loop only measures, by the monotonic
//! clock, when each attempt started, and the recording stamps it
//! ([`record_outcome`](outbox_pg::internal::webhook::record_outcome)).

mod client;
mod shards;
mod sink;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use outbox_core::target::TargetPolicy;
use outbox_pg::internal::seal::SealKey;
use outbox_pg::sqlx::PgPool;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use self::client::WebhookClient;
use self::shards::Supervisor;
use crate::{DispatcherConfig, Error, Result};

/// How the deliveries run.
#[derive(Clone)]
pub struct WebhookDeliveryConfig {
    /// Which addresses a delivery may reach.
    pub targets: TargetPolicy,
    /// How long one POST may take (default 15 s).
    pub timeout: Duration,
    /// How long a run of failures lasts before the subscription is disabled (default 3 days).
    pub disable_after: Duration,
    /// Failures of one event before it can be dead-lettered (default 5).
    pub max_attempts: u32,
    /// How often the enabled subscriptions are compared with the loops (default 1 s).
    pub refresh: Duration,
    /// Leases, polling, backoff and shutdown of every loop.
    pub dispatcher: DispatcherConfig,
}

impl Default for WebhookDeliveryConfig {
    /// The SPEC's defaults.
    fn default() -> WebhookDeliveryConfig {
        WebhookDeliveryConfig {
            targets: TargetPolicy::default(),
            timeout: Duration::from_secs(15),
            disable_after: Duration::from_secs(3 * 24 * 3600),
            max_attempts: 5,
            refresh: Duration::from_secs(1),
            dispatcher: DispatcherConfig::default(),
        }
    }
}

/// The running deliveries of one process.
pub struct WebhookDeliveries {
    shutdown: watch::Sender<bool>,
    task: Mutex<Option<JoinHandle<()>>>,
    delivering: watch::Receiver<BTreeSet<String>>,
}

impl WebhookDeliveries {
    /// Starts comparing the enabled subscriptions with the loops, on the current runtime.
    /// `seal_key` opens the subscriptions' secrets and header values.
    pub fn start(pool: PgPool, seal_key: Arc<SealKey>, config: WebhookDeliveryConfig) -> Result<WebhookDeliveries> {
        if config.dispatcher.holder.is_empty() {
            return Err(Error::config("holder", "must not be empty"));
        }
        let client = WebhookClient::new(pool.clone(), seal_key, &config)?;
        let (shutdown, signal) = watch::channel(false);
        let (publish, delivering) = watch::channel(BTreeSet::new());
        let supervisor = Supervisor::new(pool, config, client, publish);
        let task = Mutex::new(Some(tokio::spawn(supervisor.run(signal))));
        Ok(WebhookDeliveries { shutdown, task, delivering })
    }

    /// The subscriptions whose loops run in this process now, in id order.
    pub fn delivering(&self) -> Vec<String> {
        self.delivering.borrow().iter().cloned().collect()
    }

    /// Stops every loop gracefully (each finishes or abandons its POST and releases its
    /// lease) and waits for them. A second call returns at once.
    pub async fn shutdown(&self) {
        let _ = self.shutdown.send(true);
        let task = self.task.lock().take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}

impl Drop for WebhookDeliveries {
    fn drop(&mut self) {
        if let Some(task) = self.task.get_mut().take() {
            task.abort();
        }
    }
}
