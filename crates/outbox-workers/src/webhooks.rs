//! Webhook subscriptions' deliveries (SPEC §7.6): every enabled subscription is an ordered,
//! durable consumer of its tenant's matching events, delivered one event per POST.
//!
//! Subscriptions are spread over [`store::SHARDS`] shards by a stated hash of their id
//! ([`store::shard_of`]). A delivering process holds shard leases
//! (`singleton:outbox-webhooks:shard:<n>`), not one lease per subscription: it takes free
//! shards up to its fair share (the shards divided by the processes taking part, each of
//! which holds a member lease `singleton:outbox-webhooks:member:<holder>`), gives back
//! what it holds above it, and so processes split the shards; a dead process's shards are
//! taken once its leases expire. For each enabled subscription of a shard it holds,
//! [`WebhookDeliveries`] runs the dispatcher loop that runs a configured sink (fenced
//! cursor saves, backoff honouring `Retry-After`, bisection and dead letters) under the
//! shard's lease, with the subscription's own cursor `('webhooks', <id>)` and dead letters
//! and health `webhook:<id>`. Every `refresh` it compares the enabled subscriptions with
//! the loops it runs: a new or re-enabled one gets a loop, a deleted or disabled one's loop
//! stops, and a changed one (a new URL, types, headers or secret) is restarted from its
//! cursor. So a subscription disabled for a while resumes where it stopped, with no gap.
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
//! clock, when each attempt started, and the recording stamps it ([`store::record_outcome`]).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use outbox_core::target::TargetPolicy;
use outbox_core::webhook::{Url, literal_ip};
use outbox_core::{Event, Pattern};
use outbox_pg::internal::lease::{self, Lease};
use outbox_pg::internal::seal::SealKey;
use outbox_pg::internal::webhook::{self as store, CURSOR_STREAM, Keys, NewAttempt, Webhook};
use outbox_pg::sqlx::PgPool;
use parking_lot::Mutex;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use time::OffsetDateTime;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::dispatcher::{SharedLease, keep_shared, spawn_loop};
use crate::encoding::{Encoder, Encoding};
use crate::sinks::{WebhookSecret, describe, install_crypto_provider, judge};
use crate::{ConsumerNames, DispatcherConfig, Error, Result, Sink, SinkError, SinkSpec};

/// Events a subscription's loop takes per step, each still POSTed alone: the attempts and
/// the cursor are recorded once per step.
const DELIVERY_BATCH: usize = 100;

/// The most of an answer's body an attempt keeps.
const RESPONSE_KEPT: usize = 1024;

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

/// What a ping or a replay needs in any process (one with the `http` role pings): the
/// guarded client, the seal key and the pool.
#[derive(Clone)]
pub struct WebhookClient {
    pool: PgPool,
    seal_key: Arc<SealKey>,
    client: reqwest::Client,
    policy: TargetPolicy,
    disable_after: Duration,
}

impl WebhookClient {
    /// The client `config` describes, on `pool`, opening secrets with `seal_key`.
    pub fn new(pool: PgPool, seal_key: Arc<SealKey>, config: &WebhookDeliveryConfig) -> Result<WebhookClient> {
        Ok(WebhookClient {
            pool,
            seal_key,
            client: guarded_client(config)?,
            policy: config.targets.clone(),
            disable_after: config.disable_after,
        })
    }

    /// Sends one signed `webhook.ping` (`{"webhookId": …}`) to subscription `id`'s endpoint
    /// now, through the guarded client, and records it as an attempt; moves no cursor and
    /// disables nothing. `None` when there is no such subscription.
    pub async fn ping(&self, id: &str) -> Result<Option<outbox_core::webhook::PingOutcome>> {
        let Some(sink) = self.sink(id).await? else { return Ok(None) };
        let webhook_event = Event {
            id: format!("evt_{}", ulid::Ulid::generate().to_string().to_ascii_lowercase()),
            event_type: "webhook.ping".into(),
            tenant_id: sink.tenant.clone(),
            subject: format!("webhook/{id}"),
            time: OffsetDateTime::now_utc(),
            sequence: outbox_core::Position::START,
            data: outbox_core::Data::from(serde_json::json!({ "webhookId": id })),
        };
        let started = Instant::now();
        let (status, kept, result) = sink.send(&webhook_event).await;
        let duration_ms = u32::try_from(started.elapsed().as_millis()).unwrap_or(u32::MAX);
        let error = result.err().map(|error| error.message().to_owned());
        let attempt = NewAttempt {
            started,
            event_id: Some(webhook_event.id),
            status,
            duration_ms,
            error: error.clone(),
            response: kept,
        };
        store::record_attempt(&self.pool, id, &attempt).await?;
        Ok(Some(outbox_core::webhook::PingOutcome { delivered: error.is_none(), status, duration_ms, error }))
    }

    /// Delivers dead letter `letter` of subscription `id` again and marks it replayed
    /// (out of order, like a sink's replay).
    pub async fn replay(&self, id: &str, letter: i64) -> Result<()> {
        let sink = self.sink(id).await?.ok_or_else(|| Error::UnknownSink(id.to_owned()))?;
        crate::replay::replay_kept_as(&self.pool, &sink, &store::dead_letter_sink(id), letter).await
    }

    /// Subscription `id` as a sink, with its secrets and headers as they are now.
    async fn sink(&self, id: &str) -> Result<Option<SubscriptionSink>> {
        let Some(webhook) = store::get(&self.pool, None, id).await? else { return Ok(None) };
        let Some(keys) = store::keys(&self.pool, &self.seal_key, id).await? else { return Ok(None) };
        Ok(Some(SubscriptionSink::new(&webhook, keys, self)?))
    }
}

/// The running deliveries of one process.
pub struct WebhookDeliveries {
    shutdown: watch::Sender<bool>,
    task: Mutex<Option<JoinHandle<()>>>,
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
        let supervisor = Supervisor {
            pool,
            dispatcher: Arc::new(config.dispatcher.clone()),
            config,
            client,
            held: HashMap::new(),
            member: None,
            running: HashMap::new(),
        };
        Ok(WebhookDeliveries { shutdown, task: Mutex::new(Some(tokio::spawn(supervisor.run(signal)))) })
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

struct Supervisor {
    pool: PgPool,
    config: WebhookDeliveryConfig,
    dispatcher: Arc<DispatcherConfig>,
    client: WebhookClient,
    held: HashMap<i32, Held>,
    member: Option<Held>,
    running: HashMap<String, Loop>,
}

impl Supervisor {
    async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
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
        for (id, updated_at) in wanted {
            if self.running.contains_key(&id) {
                continue;
            }
            match self.spawn(&id, updated_at).await {
                Ok(Some(running)) => {
                    self.running.insert(id, running);
                }
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(webhook = %id, %error, "starting a webhook subscription failed; trying again")
                }
            }
        }
    }

    async fn spawn(&self, id: &str, updated_at: OffsetDateTime) -> Result<Option<Loop>> {
        let shard = store::shard_of(id);
        let Some(held) = self.held.get(&shard) else { return Ok(None) };
        let Some(webhook) = store::get(&self.pool, None, id).await? else { return Ok(None) };
        let Some(keys) = store::keys(&self.pool, &self.client.seal_key, id).await? else { return Ok(None) };
        let types = webhook.types.iter().map(|text| Pattern::parse(text)).collect::<std::result::Result<Vec<_>, _>>();
        let types = types.map_err(|error| Error::config(format!("webhooks[{id}].types"), error.to_string()))?;
        let sink = SubscriptionSink::new(&webhook, keys, &self.client)?;
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
        Ok(Some(Loop { shard, updated_at, stop, task }))
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

/// The HTTP client every delivery and ping goes through.
fn guarded_client(config: &WebhookDeliveryConfig) -> Result<reqwest::Client> {
    install_crypto_provider();
    reqwest::Client::builder()
        .timeout(config.timeout)
        .connect_timeout(config.timeout)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .dns_resolver(Arc::new(GuardedResolver { policy: config.targets.clone() }))
        .user_agent(concat!("outbox/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|error| Error::config("webhooks", format!("building the HTTP client: {error}")))
}

/// Resolves a name and answers only the addresses the policy allows: the connection can
/// go nowhere else.
struct GuardedResolver {
    policy: TargetPolicy,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.policy.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let resolved: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut refusals = Vec::new();
            let allowed: Vec<SocketAddr> = resolved
                .into_iter()
                .filter(|address| match policy.check(address.ip()) {
                    Ok(()) => true,
                    Err(why) => {
                        refusals.push(why);
                        false
                    }
                })
                .collect();
            if allowed.is_empty() {
                let why = if refusals.is_empty() { "no address".to_owned() } else { refusals.join("; ") };
                return Err(format!("{host} resolves to no allowed address: {why}").into());
            }
            let addresses: reqwest::dns::Addrs = Box::new(allowed.into_iter());
            Ok(addresses)
        })
    }
}

/// One subscription as a sink: one signed POST per event.
struct SubscriptionSink {
    id: String,
    tenant: String,
    url: Url,
    signing: Vec<WebhookSecret>,
    headers: HeaderMap,
    encoder: Encoder,
    client: reqwest::Client,
    pool: PgPool,
    policy: TargetPolicy,
    disable_after: Duration,
    /// Set once an attempt disabled the subscription: no request goes out after it,
    /// until the loop is stopped at the next refresh.
    disabled: AtomicBool,
}

impl SubscriptionSink {
    fn new(webhook: &Webhook, keys: Keys, client: &WebhookClient) -> Result<SubscriptionSink> {
        let url = Url::parse(&webhook.url)
            .map_err(|error| Error::config(format!("webhooks[{}].url", webhook.id), error.to_string()))?;
        let signing = keys.signing.iter().map(|secret| WebhookSecret::from_bytes(secret.bytes().to_vec())).collect();
        let mut headers = HeaderMap::new();
        for (name, value) in &keys.headers {
            let field = || format!("webhooks[{}].headers.{name}", webhook.id);
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|e| Error::config(field(), e.to_string()))?;
            let value = HeaderValue::from_str(value).map_err(|e| Error::config(field(), e.to_string()))?;
            headers.insert(name, value);
        }
        Ok(SubscriptionSink {
            id: webhook.id.clone(),
            tenant: webhook.tenant_id.clone(),
            url,
            signing,
            headers,
            encoder: Encoder::new(Encoding::Json, crate::encoding::DEFAULT_SOURCE),
            client: client.client.clone(),
            pool: client.pool.clone(),
            policy: client.policy.clone(),
            disable_after: client.disable_after,
            disabled: AtomicBool::new(false),
        })
    }

    /// One POST of `event`: its attempt, whether the endpoint answered 410, and what it means.
    async fn post(&self, event: &Event) -> (NewAttempt, bool, std::result::Result<(), SinkError>) {
        let started = Instant::now();
        let (status, kept, result) = self.send(event).await;
        let gone = status == Some(410);
        if gone {
            self.disabled.store(true, Ordering::SeqCst);
        }
        let result = if gone {
            Err(SinkError::retryable("the endpoint answered 410 Gone: the subscription is disabled"))
        } else {
            result
        };
        let attempt = NewAttempt {
            started,
            event_id: Some(event.id.clone()),
            status,
            duration_ms: u32::try_from(started.elapsed().as_millis()).unwrap_or(u32::MAX),
            error: result.as_ref().err().map(|error| error.message().to_owned()),
            response: kept,
        };
        (attempt, gone, result)
    }

    /// POSTs the events of `batch` one after the other, up to the first that fails, then
    /// records their attempts and what the last one says in one transaction.
    async fn post_batch(&self, batch: &[Event]) -> std::result::Result<(), SinkError> {
        if self.disabled.load(Ordering::SeqCst) {
            return Err(SinkError::retryable("the subscription is disabled"));
        }
        let mut attempts = Vec::with_capacity(batch.len());
        let (mut result, mut gone) = (Ok(()), false);
        for (index, event) in batch.iter().enumerate() {
            let (attempt, was_gone, outcome) = self.post(event).await;
            attempts.push(attempt);
            if let Err(error) = outcome {
                (result, gone) = (Err(error.at(index)), was_gone);
                break;
            }
        }
        let delivered = result.is_ok();
        match store::record_outcome(&self.pool, &self.id, &attempts, delivered, gone, self.disable_after).await {
            Ok(store::Outcome::Disabled) => {
                self.disabled.store(true, Ordering::SeqCst);
                let error = attempts.last().and_then(|attempt| attempt.error.clone());
                tracing::warn!(webhook = %self.id, ?error, "webhook subscription disabled");
            }
            Ok(store::Outcome::Recorded) => {}
            Err(error) => tracing::warn!(webhook = %self.id, %error, "recording webhook attempts failed"),
        }
        result
    }

    /// The answer's status, the start of its body, and what it means.
    async fn send(&self, event: &Event) -> (Option<u16>, Option<String>, std::result::Result<(), SinkError>) {
        if let Some(ip) = literal_ip(&self.url)
            && let Err(why) = self.policy.check(ip)
        {
            return (None, None, Err(SinkError::retryable(why)));
        }
        let body = self.encoder.encode(event);
        let timestamp = OffsetDateTime::now_utc().unix_timestamp();
        let signature: Vec<String> =
            self.signing.iter().map(|secret| secret.sign(&event.id, timestamp, &body)).collect();
        let sent = self
            .client
            .post(self.url.clone())
            .headers(self.headers.clone())
            .header(CONTENT_TYPE, self.encoder.content_type())
            .header("webhook-id", &event.id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature.join(" "))
            .body(body)
            .send()
            .await;
        let mut response = match sent {
            Ok(response) => response,
            Err(error) => return (None, None, Err(SinkError::retryable(describe(&error)))),
        };
        let status = response.status();
        let judged = judge(status, response.headers());
        let mut kept = Vec::new();
        while kept.len() < RESPONSE_KEPT {
            match response.chunk().await {
                Ok(Some(chunk)) => kept.extend_from_slice(&chunk[..chunk.len().min(RESPONSE_KEPT - kept.len())]),
                _ => break,
            }
        }
        let kept = (!kept.is_empty()).then(|| String::from_utf8_lossy(&kept).into_owned());
        (Some(status.as_u16()), kept, judged)
    }
}

impl Sink for SubscriptionSink {
    fn id(&self) -> &str {
        &self.id
    }

    fn deliver<'a>(&'a self, batch: &'a [Event]) -> BoxFuture<'a, std::result::Result<(), SinkError>> {
        Box::pin(self.post_batch(batch))
    }
}
