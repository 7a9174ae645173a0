//! The guarded HTTP client every delivery, ping and replay goes through: no proxy from the
//! environment, no redirect followed, and a resolver that answers only the addresses the
//! [`TargetPolicy`] allows.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use outbox_core::target::TargetPolicy;
use outbox_core::webhook::PingOutcome;
use outbox_core::{Data, Event, Position};
use outbox_pg::internal::seal::SealKey;
use outbox_pg::internal::webhook::{self as store, NewAttempt};
use outbox_pg::sqlx::PgPool;
use time::OffsetDateTime;

use super::WebhookDeliveryConfig;
use super::sink::SubscriptionSink;
use crate::sinks::client_builder;
use crate::{Error, Result};

/// What a ping or a replay needs in any process (one with the `http` role pings): the
/// guarded client, the seal key and the pool.
#[derive(Clone)]
pub struct WebhookClient {
    pub(super) pool: PgPool,
    pub(super) seal_key: Arc<SealKey>,
    pub(super) client: reqwest::Client,
    pub(super) policy: TargetPolicy,
    pub(super) disable_after: Duration,
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
    pub async fn ping(&self, id: &str) -> Result<Option<PingOutcome>> {
        let Some(sink) = self.sink(id).await? else { return Ok(None) };
        let ping = Event {
            id: format!("evt_{}", ulid::Ulid::generate().to_string().to_ascii_lowercase()),
            event_type: "webhook.ping".into(),
            tenant_id: sink.tenant().to_owned(),
            subject: format!("webhook/{id}"),
            time: OffsetDateTime::now_utc(),
            sequence: Position::START,
            data: Data::from(serde_json::json!({ "webhookId": id })),
        };
        let started = Instant::now();
        let answer = sink.send(&ping).await;
        let duration_ms = u32::try_from(started.elapsed().as_millis()).unwrap_or(u32::MAX);
        let error = answer.result.err().map(|error| error.message().to_owned());
        let attempt = NewAttempt {
            started,
            event_id: Some(ping.id),
            status: answer.status,
            duration_ms,
            error: error.clone(),
            response: answer.body,
        };
        store::record_attempt(&self.pool, id, &attempt).await?;
        Ok(Some(PingOutcome { delivered: error.is_none(), status: answer.status, duration_ms, error }))
    }

    /// Delivers dead letter `letter` of subscription `id` again and marks it replayed
    /// (out of order, like a sink's replay). Refused while the subscription is disabled.
    pub async fn replay(&self, id: &str, letter: i64) -> Result<()> {
        let sink = self.sink(id).await?.ok_or_else(|| Error::UnknownSink(id.to_owned()))?;
        crate::replay::replay_kept_as(&self.pool, &sink, &store::dead_letter_sink(id), letter).await
    }

    /// Subscription `id` as a sink, with its secrets and headers as they are now.
    async fn sink(&self, id: &str) -> Result<Option<SubscriptionSink>> {
        let Some(webhook) = store::get(&self.pool, None, id).await? else { return Ok(None) };
        let Some(keys) = store::keys(&self.pool, &self.seal_key, id).await? else { return Ok(None) };
        Ok(Some(SubscriptionSink::new(&webhook, keys, self, None)?))
    }
}

/// The HTTP client every delivery and ping goes through.
fn guarded_client(config: &WebhookDeliveryConfig) -> Result<reqwest::Client> {
    client_builder(config.timeout)
        .no_proxy()
        .dns_resolver(Arc::new(GuardedResolver { policy: config.targets.clone() }))
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
