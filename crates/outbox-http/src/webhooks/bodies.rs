//! The bodies of the webhook routes that change a subscription, each checked by
//! `outbox_core::webhook`'s rules (and the URL by the target policy) into what
//! `outbox-pg` stores. Every refusal is `INVALID_INPUT` naming the field and its rule.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use outbox_core::Catalog;
use outbox_core::target::TargetPolicy;
use outbox_core::webhook::{self as rules, Secret, Url};
use outbox_pg::internal::webhook::{NewWebhook, Patch};
use serde::Deserialize;

use crate::ApiError;
use crate::body::parse_json;

/// `POST /webhooks`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CreateBody {
    url: String,
    #[serde(default)]
    types: Option<Vec<String>>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    headers: Option<BTreeMap<String, String>>,
    #[serde(default)]
    metadata: Option<serde_json::Value>,
    #[serde(default)]
    secret: Option<String>,
    #[serde(default)]
    lanes: Option<u32>,
}

/// `PATCH /webhooks/{id}`'s body.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PatchBody {
    url: Option<String>,
    types: Option<Vec<String>>,
    description: Option<String>,
    headers: Option<BTreeMap<String, String>>,
    metadata: Option<serde_json::Value>,
    enabled: Option<bool>,
    resume: Option<Resume>,
    lanes: Option<u32>,
}

/// Where an enabled subscription resumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Resume {
    /// From its cursor: every event since it was disabled (the default).
    Cursor,
    /// From the head: what commits from now on.
    Now,
}

/// `POST /webhooks/{id}/rotate-secret`'s body (it may be empty).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RotateBody {
    secret: Option<String>,
    grace_period_seconds: Option<u64>,
}

/// A creation's body, checked: what the new subscription holds.
pub(super) async fn new_webhook(
    body: &[u8],
    catalog: &Catalog,
    targets: &TargetPolicy,
) -> Result<NewWebhook, ApiError> {
    let body: CreateBody = parse_json(body)?;
    let url = check_target(targets, &body.url).await?;
    let types = body.types.unwrap_or_else(|| vec!["*".to_owned()]);
    rules::check_types(&types, catalog).map_err(refused)?;
    let description = body.description.unwrap_or_default();
    rules::check_description(&description).map_err(refused)?;
    let headers = body.headers.unwrap_or_default();
    rules::check_headers(&headers).map_err(refused)?;
    let metadata = body.metadata.unwrap_or_else(|| serde_json::json!({}));
    rules::check_metadata(&metadata).map_err(refused)?;
    let secret = body.secret.as_deref().map(Secret::parse).transpose().map_err(refused)?;
    let lanes = body.lanes.map(check_lanes).transpose()?;
    Ok(NewWebhook { url: url.to_string(), types, description, headers, metadata, secret, lanes })
}

/// A `PATCH`'s body, checked: the change it asks for.
pub(super) async fn patch(body: &[u8], catalog: &Catalog, targets: &TargetPolicy) -> Result<Patch, ApiError> {
    let body: PatchBody = parse_json(body)?;
    let url = match &body.url {
        Some(url) => Some(check_target(targets, url).await?.to_string()),
        None => None,
    };
    if let Some(types) = &body.types {
        rules::check_types(types, catalog).map_err(refused)?;
    }
    if let Some(description) = &body.description {
        rules::check_description(description).map_err(refused)?;
    }
    if let Some(headers) = &body.headers {
        rules::check_headers(headers).map_err(refused)?;
    }
    if let Some(metadata) = &body.metadata {
        rules::check_metadata(metadata).map_err(refused)?;
    }
    if body.resume.is_some() && body.enabled != Some(true) {
        return Err(ApiError::invalid("resume: only with \"enabled\": true"));
    }
    Ok(Patch {
        url,
        types: body.types,
        description: body.description,
        headers: body.headers,
        metadata: body.metadata,
        enabled: body.enabled,
        resume_now: body.resume == Some(Resume::Now),
        lanes: body.lanes.map(check_lanes).transpose()?,
    })
}

/// A rotation's body (empty: a generated secret and `default_grace`): the new secret, if
/// given, and how long the old one keeps signing.
pub(super) fn rotation(body: &[u8], default_grace: Duration) -> Result<(Option<Secret>, Duration), ApiError> {
    let body: RotateBody =
        if body.iter().all(u8::is_ascii_whitespace) { RotateBody::default() } else { parse_json(body)? };
    let secret = body.secret.as_deref().map(Secret::parse).transpose().map_err(refused)?;
    Ok((secret, body.grace_period_seconds.map_or(default_grace, Duration::from_secs)))
}

/// The URL checked by the rules and its host by the target policy: an IP literal as
/// written, a name by every address it resolves to now.
async fn check_target(policy: &TargetPolicy, text: &str) -> Result<Url, ApiError> {
    let url = rules::check_url(text, policy.allow_private).map_err(refused)?;
    let refuse = |why: String| ApiError::invalid(format!("url: {why}"));
    if let Some(ip) = rules::literal_ip(&url) {
        policy.check(ip).map_err(refuse)?;
        return Ok(url);
    }
    let host = url.host_str().unwrap_or_default().to_owned();
    let port = url.port_or_known_default().unwrap_or(443);
    let addresses: Vec<IpAddr> = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(|e| refuse(format!("{host} does not resolve ({e})")))?
        .map(|address| address.ip())
        .collect();
    if addresses.is_empty() {
        return Err(refuse(format!("{host} resolves to no address")));
    }
    for ip in addresses {
        policy.check(ip).map_err(|why| refuse(format!("{host} resolves to {why}")))?;
    }
    Ok(url)
}

/// The number of ordered lanes a subscription delivers on (SPEC §7.7).
fn check_lanes(lanes: u32) -> Result<u32, ApiError> {
    if (1..=outbox_pg::MAX_LANES).contains(&lanes) {
        Ok(lanes)
    } else {
        Err(ApiError::invalid(format!("lanes: {lanes} is not between 1 and {}", outbox_pg::MAX_LANES)))
    }
}

fn refused(refusal: rules::Refusal) -> ApiError {
    ApiError::invalid(refusal.to_string())
}
