//! One subscription as a [`Sink`]: one signed POST per event, under the revision of the
//! subscription it was built from.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use outbox_core::Event;
use outbox_core::webhook::{Url, literal_ip};
use outbox_pg::internal::webhook::{self as store, Keys, NewAttempt, Webhook};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use time::OffsetDateTime;
use tokio::sync::Notify;

use super::client::WebhookClient;
use crate::encoding::{DEFAULT_SOURCE, Encoder, Encoding};
use crate::sinks::{Answer, SignedPost, WebhookSecret};
use crate::{Error, Result, Sink, SinkError};

/// The most of an answer's body an attempt keeps.
const RESPONSE_KEPT: usize = 1024;

/// How long before a POST the check of the subscription's revision it goes out under may
/// have started: a receiver that answers within it gets several POSTs a check.
const CHECK_FRESH: Duration = Duration::from_millis(2);

/// One subscription as a sink.
pub(super) struct SubscriptionSink {
    id: String,
    /// The subscription's `updated_at` when it was read: every POST checks it first.
    revision: OffsetDateTime,
    tenant: String,
    url: Url,
    signing: Vec<WebhookSecret>,
    headers: HeaderMap,
    encoder: Encoder,
    client: WebhookClient,
    /// Told when the check finds the subscription changed, so that its loop is started
    /// again at once (`None` for a ping's or a replay's sink).
    changed: Option<Arc<Notify>>,
}

impl SubscriptionSink {
    /// `webhook` with `keys` (read after it), sending through `client`.
    pub(super) fn new(
        webhook: &Webhook,
        keys: Keys,
        client: &WebhookClient,
        changed: Option<Arc<Notify>>,
    ) -> Result<SubscriptionSink> {
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
            revision: webhook.updated_at,
            tenant: webhook.tenant_id.clone(),
            url,
            signing,
            headers,
            encoder: Encoder::new(Encoding::Json, DEFAULT_SOURCE),
            client: client.clone(),
            changed,
        })
    }

    /// The subscription's tenant.
    pub(super) fn tenant(&self) -> &str {
        &self.tenant
    }

    /// POSTs `event` through the guarded client: the answer's status, the start of its
    /// body, and what it means. An IP literal is checked before the request.
    pub(super) async fn send(&self, event: &Event) -> Answer {
        if let Some(ip) = literal_ip(&self.url)
            && let Err(why) = self.client.policy.check(ip)
        {
            return Answer { status: None, body: None, result: Err(SinkError::retryable(why)) };
        }
        let post = SignedPost {
            client: &self.client.client,
            url: &self.url,
            encoder: &self.encoder,
            secrets: &self.signing,
            headers: Some(&self.headers),
            keep: RESPONSE_KEPT,
        };
        post.send(event).await
    }

    /// `Ok` while the subscription is enabled and unchanged since this sink was built; a
    /// [`SinkError::reconfigured`] once it is not.
    async fn check_current(&self) -> std::result::Result<(), SinkError> {
        let why = match store::enabled_revision(&self.client.pool, &self.id).await {
            Ok(Some(revision)) if revision == self.revision => return Ok(()),
            Ok(Some(_)) => "the subscription changed",
            Ok(None) => "the subscription is disabled or deleted",
            Err(error) => return Err(SinkError::retryable(format!("reading the subscription: {error}"))),
        };
        Err(self.reconfigured(why))
    }

    fn reconfigured(&self, why: &str) -> SinkError {
        if let Some(changed) = &self.changed {
            changed.notify_one();
        }
        SinkError::reconfigured(why)
    }

    /// One POST of `event` and its attempt; a 410 answer says the subscription is gone.
    async fn post(&self, event: &Event) -> (NewAttempt, std::result::Result<(), SinkError>) {
        let started = Instant::now();
        let answer = self.send(event).await;
        let result = if answer.status == Some(410) {
            Err(SinkError::retryable("the endpoint answered 410 Gone: the subscription is disabled"))
        } else {
            answer.result
        };
        let attempt = NewAttempt {
            started,
            event_id: Some(event.id.clone()),
            status: answer.status,
            duration_ms: u32::try_from(started.elapsed().as_millis()).unwrap_or(u32::MAX),
            error: result.as_ref().err().map(|error| error.message().to_owned()),
            response: answer.body,
        };
        (attempt, result)
    }

    /// POSTs the events of `batch` one after the other, each under a check that the
    /// subscription is as it was, made after the batch was read and at most [`CHECK_FRESH`]
    /// before the POST, up to the first that fails or the first check that does not pass;
    /// then records the attempts and what the last one says in one transaction.
    async fn post_batch(&self, batch: &[Event]) -> std::result::Result<(), SinkError> {
        let mut attempts = Vec::with_capacity(batch.len());
        let mut failed = None;
        let mut checked_at: Option<Instant> = None;
        for (index, event) in batch.iter().enumerate() {
            if checked_at.is_none_or(|at| at.elapsed() > CHECK_FRESH) {
                let at = Instant::now();
                if let Err(error) = self.check_current().await {
                    return self.record(&attempts, None).await.and(Err(error.at(index)));
                }
                checked_at = Some(at);
            }
            let (attempt, result) = self.post(event).await;
            attempts.push(attempt);
            if let Err(error) = result {
                failed = Some(error.at(index));
                break;
            }
        }
        self.record(&attempts, failed).await
    }

    /// Records `attempts` (none is nothing to record); `failed` is the last one's failure.
    /// A subscription disabled by them (`gone`, or failing for too long) ends its loop.
    async fn record(&self, attempts: &[NewAttempt], failed: Option<SinkError>) -> std::result::Result<(), SinkError> {
        let Some(last) = attempts.last() else { return failed.map_or(Ok(()), Err) };
        let (delivered, gone) = (failed.is_none(), last.status == Some(410));
        let disable_after = self.client.disable_after;
        match store::record_outcome(&self.client.pool, &self.id, attempts, delivered, gone, disable_after).await {
            Ok(store::Outcome::Disabled) => {
                tracing::warn!(webhook = %self.id, error = ?last.error, "webhook subscription disabled");
                let index = failed.as_ref().and_then(SinkError::failed_at).unwrap_or(attempts.len());
                return Err(self.reconfigured("the subscription was disabled").at(index));
            }
            Ok(store::Outcome::Recorded) => {}
            Err(error) => tracing::warn!(webhook = %self.id, %error, "recording webhook attempts failed"),
        }
        failed.map_or(Ok(()), Err)
    }
}

impl Sink for SubscriptionSink {
    fn id(&self) -> &str {
        &self.id
    }

    fn deliver<'a>(&'a self, batch: &'a [Event]) -> BoxFuture<'a, std::result::Result<(), SinkError>> {
        Box::pin(self.post_batch(batch))
    }

    fn current(&self) -> BoxFuture<'_, std::result::Result<bool, SinkError>> {
        Box::pin(async move {
            match self.check_current().await {
                Ok(()) => Ok(true),
                Err(error) if error.is_reconfigured() => Ok(false),
                Err(error) => Err(error),
            }
        })
    }
}
