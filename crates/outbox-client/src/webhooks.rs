//! Webhook subscriptions over HTTP (SPEC §7.6): the routes under `/webhooks`, scope
//! `webhooks:write` for the token's tenant (`admin` for any).

use std::collections::BTreeMap;

pub use outbox_core::webhook::PingOutcome;
use reqwest::Method;
use serde::{Deserialize, Serialize};

use crate::client::{REQUEST_TIMEOUT, protocol, read_json};
use crate::{Client, Result};

/// A subscription as the server shows it (never its secret, header values redacted).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Webhook {
    /// `wh_` + lowercase ULID.
    pub id: String,
    /// Its tenant.
    pub tenant_id: String,
    /// The target URL.
    pub url: String,
    /// Type patterns.
    pub types: Vec<String>,
    /// Its description.
    pub description: String,
    /// Its extra headers, values redacted.
    pub headers: BTreeMap<String, String>,
    /// The tenant's metadata.
    pub metadata: serde_json::Value,
    /// Whether it delivers.
    pub enabled: bool,
    /// Why not: `manual`, `failing` or `gone`.
    #[serde(default)]
    pub disabled_reason: Option<String>,
    /// Since when every attempt failed, while they do (RFC 3339).
    #[serde(default)]
    pub failing_since: Option<String>,
    /// Its cursor.
    pub position: String,
    /// Matching events behind the head (counted up to 10,000).
    pub lag: u64,
    /// Whether retention deleted events after its cursor while it was disabled.
    #[serde(default)]
    pub gap: bool,
    /// The secret: only in the answers of [`Client::create_webhook`] and
    /// [`Client::rotate_webhook_secret`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

/// What [`Client::create_webhook`] sends; `url` is required.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewWebhook {
    /// The target URL (`https://…`).
    pub url: String,
    /// Type patterns (default every type).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub types: Option<Vec<String>>,
    /// A description.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Extra request headers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// A JSON object of the tenant's own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Value>,
    /// `whsec_…`; generated when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

/// What [`Client::update_webhook`] changes; `None` leaves a field as it is.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookPatch {
    /// A new URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// New type patterns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub types: Option<Vec<String>>,
    /// A new description.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// New extra headers (all of them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// New metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Value>,
    /// Enable or disable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// With `enabled: Some(true)`: `"now"` resumes from the head, `"cursor"` (the default)
    /// from where it stopped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume: Option<String>,
}

/// One delivery attempt or ping.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Attempt {
    /// When (RFC 3339).
    pub time: String,
    /// The event it carried.
    #[serde(default)]
    pub event_id: Option<String>,
    /// The answer's status.
    #[serde(default)]
    pub status: Option<u16>,
    /// How long it took.
    pub duration_ms: u32,
    /// What went wrong.
    #[serde(default)]
    pub error: Option<String>,
    /// The first KiB of the answer.
    #[serde(default)]
    pub response: Option<String>,
}

/// A page of subscriptions.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct WebhookPage {
    /// The subscriptions, oldest first.
    pub items: Vec<Webhook>,
    /// Pass to the next call when more follow.
    #[serde(default)]
    pub cursor: Option<String>,
}

#[derive(Deserialize)]
struct Items<T> {
    items: Vec<T>,
}

impl Client {
    /// Creates a subscription (`POST /webhooks`); the answer carries its secret, the only
    /// time it is shown.
    pub async fn create_webhook(&self, new: &NewWebhook) -> Result<Webhook> {
        self.call(Method::POST, "/webhooks", &[], Some(&serde_json::to_value(new).map_err(protocol)?)).await
    }

    /// One page of the subscriptions (`GET /webhooks`), after `cursor`.
    pub async fn list_webhooks(&self, cursor: Option<&str>, limit: Option<u32>) -> Result<WebhookPage> {
        let mut pairs = Vec::new();
        if let Some(cursor) = cursor {
            pairs.push(("cursor", cursor.to_owned()));
        }
        if let Some(limit) = limit {
            pairs.push(("limit", limit.to_string()));
        }
        self.call(Method::GET, "/webhooks", &pairs, None).await
    }

    /// Subscription `id` (`GET /webhooks/{id}`).
    pub async fn webhook(&self, id: &str) -> Result<Webhook> {
        self.call(Method::GET, &format!("/webhooks/{id}"), &[], None).await
    }

    /// Changes subscription `id` (`PATCH /webhooks/{id}`).
    pub async fn update_webhook(&self, id: &str, patch: &WebhookPatch) -> Result<Webhook> {
        let body = serde_json::to_value(patch).map_err(protocol)?;
        self.call(Method::PATCH, &format!("/webhooks/{id}"), &[], Some(&body)).await
    }

    /// Deletes subscription `id` with its cursor, attempts and dead letters.
    pub async fn delete_webhook(&self, id: &str) -> Result<()> {
        let _: serde_json::Value = self.call(Method::DELETE, &format!("/webhooks/{id}"), &[], None).await?;
        Ok(())
    }

    /// Sends one signed `webhook.ping` to subscription `id` now.
    pub async fn ping_webhook(&self, id: &str) -> Result<PingOutcome> {
        self.call(Method::POST, &format!("/webhooks/{id}/ping"), &[], Some(&serde_json::json!({}))).await
    }

    /// Makes a new secret for subscription `id` (the answer carries it); the old one signs
    /// beside it for `grace_seconds` (the server's default, 24 h, when `None`).
    pub async fn rotate_webhook_secret(&self, id: &str, grace_seconds: Option<u64>) -> Result<Webhook> {
        let body = match grace_seconds {
            Some(seconds) => serde_json::json!({ "gracePeriodSeconds": seconds }),
            None => serde_json::json!({}),
        };
        self.call(Method::POST, &format!("/webhooks/{id}/rotate-secret"), &[], Some(&body)).await
    }

    /// Subscription `id`'s last attempts, newest first.
    pub async fn webhook_attempts(&self, id: &str) -> Result<Vec<Attempt>> {
        let items: Items<Attempt> = self.call(Method::GET, &format!("/webhooks/{id}/attempts"), &[], None).await?;
        Ok(items.items)
    }

    async fn call<T: serde::de::DeserializeOwned>(
        &self,
        method: Method,
        route: &str,
        pairs: &[(&str, String)],
        body: Option<&serde_json::Value>,
    ) -> Result<T> {
        let mut request = self.request(method, self.url(route, pairs)).timeout(REQUEST_TIMEOUT);
        if let Some(body) = body {
            request = request.json(body);
        }
        read_json(self.send(request).await?).await
    }
}
