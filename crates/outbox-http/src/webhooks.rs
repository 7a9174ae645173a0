//! The webhook subscription routes (SPEC §7.6): a tenant manages its own endpoints.
//!
//! | route | answer |
//! |---|---|
//! | `POST /webhooks` | 201, the subscription with its `secret` (shown only here and by `rotate-secret`) |
//! | `GET /webhooks?cursor=&limit=` | `{"items":[…],"cursor":"<id>"}`, oldest first; `cursor` only when more follow |
//! | `GET /webhooks/{id}` | the subscription |
//! | `PATCH /webhooks/{id}` | the changed subscription (`{"enabled":true,"resume":"now"}` skips to the head) |
//! | `DELETE /webhooks/{id}` | `{"deleted":"<id>"}`; its cursor, attempts and dead letters go with it |
//! | `POST /webhooks/{id}/rotate-secret` | the subscription with its new `secret`; the old one signs beside it for `gracePeriodSeconds` (default 86400) |
//! | `GET /webhooks/{id}/attempts` | `{"items":[…]}`, newest first, the last 100 |
//! | `POST /webhooks/{id}/ping` | `{"delivered":…,"status":…,"durationMs":…,"error":…}`: one signed `webhook.ping`, now |
//! | `GET /webhooks/{id}/dead-letters?cursor=&limit=&replayed=true` | `{"items":[DeadLetter…],"cursor":"<id>"}`, oldest first |
//! | `POST /webhooks/{id}/dead-letters/{dl}/replay` | `{"replayed":<dl>}` once the endpoint took it |
//! | `DELETE /webhooks/{id}/dead-letters/{dl}` | `{"discarded":<dl>}` |
//! | `POST /webhooks/{id}/dead-letters/replay` | `{"since": time}`: every pending letter that failed since then, `{"replayed":[…],"refused":[{"id","error"}]}` |
//!
//! Pings and replays go through the host's [`WebhookDelivery`] (the guarded client lives
//! with the deliveries, in `outbox-workers`); without one they answer `UNAVAILABLE`.
//!
//! Scope `webhooks:write` manages the grant's own tenant's subscriptions, `admin` any
//! tenant's (`?tenantId=` names it for a list or a creation). Another tenant's id is
//! `NOT_FOUND`, never `ACCESS_DENIED`: a tenant cannot learn that it exists. Every refusal
//! of the input is `INVALID_INPUT` naming the field and its rule
//! (`outbox_core::webhook`); a URL whose host is, or resolves to, an address the
//! [`TargetPolicy`] refuses is refused at creation (and again at every delivery). Without a
//! seal key every route answers `UNAVAILABLE` naming it.

use std::collections::BTreeMap;
use std::fmt::Display;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::request::Parts;
use http::{Method, Request, Response, StatusCode};
use http_body::Body as HttpBody;
use outbox_core::target::TargetPolicy;
use outbox_core::webhook::{self as rules, PingOutcome, Secret, Url};
use outbox_core::{Catalog, ErrorCode, Pattern};
use outbox_pg::ReadRequest;
use outbox_pg::internal::seal::SealKey;
use outbox_pg::internal::webhook::{self as store, Attempt, NewWebhook, Patch, Webhook};
use outbox_pg::internal::{cursor, dead_letter};
use outbox_pg::sqlx::PgPool;
use serde::{Deserialize, Serialize};

use crate::auth::require_scope;
use crate::query::{Query, number_in};
use crate::{ApiError, Authorizer, Body, BoxFuture, Grant, json_response, read_limited, scope};

/// The largest request body of a webhook route.
const BODY_LIMIT: usize = 64 * 1024;
/// The most subscriptions one page of `GET /webhooks` lists, and the default.
const MAX_PAGE: usize = 100;
/// How far `lag` counts before it says "at least this many".
const LAG_CAP: u64 = 10_000;

/// What only the host's delivery can do: send through its guarded client.
pub trait WebhookDelivery: Send + Sync + 'static {
    /// Sends one signed `webhook.ping` to subscription `id` now and says what happened.
    fn ping<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<PingOutcome, ApiError>>;

    /// Delivers dead letter `letter` of subscription `id` again and marks it replayed.
    fn replay<'a>(&'a self, id: &'a str, letter: i64) -> BoxFuture<'a, Result<(), ApiError>>;
}

/// How the webhook routes behave: the seal key, the limits and which targets are allowed.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// The key secrets are sealed with (`[webhooks] seal_key`); without one every route
    /// answers `UNAVAILABLE`.
    pub seal_key: Option<Arc<SealKey>>,
    /// The most subscriptions a tenant may have (`[webhooks] max_per_tenant`, default 100).
    pub max_per_tenant: u32,
    /// Which addresses a target may have (`allow_private_targets`, `[webhooks] allowed_cidrs`).
    pub targets: TargetPolicy,
    /// How long a rotated secret keeps signing when the request does not say (24 h).
    pub default_grace: Duration,
}

impl Default for WebhookConfig {
    fn default() -> WebhookConfig {
        WebhookConfig {
            seal_key: None,
            max_per_tenant: 100,
            targets: TargetPolicy::default(),
            default_grace: Duration::from_secs(24 * 3600),
        }
    }
}

/// The mountable webhook routes. Clones share the pool, the authorizer and the catalog.
#[derive(Clone)]
pub struct WebhookRoutes {
    pool: PgPool,
    authorizer: Arc<dyn Authorizer>,
    catalog: Arc<Catalog>,
    config: Arc<WebhookConfig>,
    delivery: Option<Arc<dyn WebhookDelivery>>,
}

impl std::fmt::Debug for WebhookRoutes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookRoutes").field("config", &self.config).finish_non_exhaustive()
    }
}

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

/// A subscription as every answer shows it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct View {
    #[serde(flatten)]
    webhook: Webhook,
    headers: BTreeMap<String, &'static str>,
    position: String,
    lag: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_attempt: Option<LastAttempt>,
    #[serde(skip_serializing_if = "Option::is_none")]
    secret: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LastAttempt {
    #[serde(with = "time::serde::rfc3339")]
    time: time::OffsetDateTime,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    duration_ms: u32,
}

#[derive(Serialize)]
struct Items<T> {
    items: Vec<T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cursor: Option<String>,
}

impl WebhookRoutes {
    /// The routes over `pool`, deciding callers with `authorizer`, checking patterns
    /// against `catalog`.
    pub fn new(
        pool: PgPool,
        authorizer: Arc<dyn Authorizer>,
        catalog: Catalog,
        config: WebhookConfig,
    ) -> WebhookRoutes {
        WebhookRoutes { pool, authorizer, catalog: Arc::new(catalog), config: Arc::new(config), delivery: None }
    }

    /// Pings and replays through `delivery`.
    pub fn with_delivery(mut self, delivery: Arc<dyn WebhookDelivery>) -> WebhookRoutes {
        self.delivery = Some(delivery);
        self
    }

    /// Whether `path` is one of the webhook routes (so a host router can delegate to them).
    pub fn serves(path: &str) -> bool {
        path == "/webhooks" || path.starts_with("/webhooks/")
    }

    /// Handles one request. An unknown path under `/webhooks/` is a 404 JSON refusal; a
    /// known path with a method it does not serve is a 405 with `Allow`.
    pub async fn handle<B>(&self, request: Request<B>) -> Response<Body>
    where
        B: HttpBody<Data = Bytes> + Send + 'static,
        B::Error: Display,
    {
        let (parts, body) = request.into_parts();
        Box::pin(self.route(&parts, body)).await.unwrap_or_else(ApiError::into_response)
    }

    async fn route<B>(&self, parts: &Parts, body: B) -> Result<Response<Body>, ApiError>
    where
        B: HttpBody<Data = Bytes> + Send + 'static,
        B::Error: Display,
    {
        let path = parts.uri.path();
        let segments: Vec<&str> = path.trim_end_matches('/').split('/').skip(2).collect();
        let allow = allowed_methods(&segments)
            .ok_or_else(|| ApiError::new(ErrorCode::NotFound, format!("no route for {path}")))?;
        if !allow.split(", ").any(|method| method == parts.method.as_str()) {
            return Err(ApiError::method_not_allowed(allow));
        }
        let key = self.config.seal_key.clone().ok_or_else(|| {
            ApiError::new(
                ErrorCode::Unavailable,
                "webhook subscriptions need a seal key: set [webhooks] seal_key or OUTBOX_WEBHOOK_SEAL_KEY",
            )
        })?;
        let grant = self.authorizer.authorize(&parts.headers).await?;
        require_scope(&grant, scope::WEBHOOKS_WRITE)?;
        let query = Query::parse(parts.uri.query(), &["tenantId", "cursor", "limit", "replayed"])?;
        let requested = query.get("tenantId");
        match (segments.as_slice(), &parts.method) {
            ([], &Method::POST) => {
                let tenant = own_or_named(&grant, requested)?;
                self.create(&key, &tenant, read_limited(body, BODY_LIMIT).await?).await
            }
            ([], _) => self.list(&own_or_named(&grant, requested)?, &query).await,
            ([id], &Method::GET) => {
                let webhook = self.find(&grant, requested, id).await?;
                Ok(json_response(StatusCode::OK, &self.view(webhook, None).await?))
            }
            ([id], &Method::PATCH) => {
                let tenant = scope_of(&grant, requested)?;
                self.update(&key, tenant.as_deref(), id, read_limited(body, BODY_LIMIT).await?).await
            }
            ([id], _) => {
                let tenant = scope_of(&grant, requested)?;
                if !store::delete(&self.pool, tenant.as_deref(), id).await.map_err(pg("deleting a webhook"))? {
                    return Err(not_found(id));
                }
                Ok(json_response(StatusCode::OK, &serde_json::json!({ "deleted": id })))
            }
            ([id, "rotate-secret"], _) => {
                let tenant = scope_of(&grant, requested)?;
                self.rotate(&key, tenant.as_deref(), id, read_limited(body, BODY_LIMIT).await?).await
            }
            ([id, "attempts"], _) => {
                let tenant = scope_of(&grant, requested)?;
                let attempts =
                    store::attempts(&self.pool, tenant.as_deref(), id).await.map_err(pg("reading attempts"))?;
                let items = attempts.ok_or_else(|| not_found(id))?;
                Ok(json_response(StatusCode::OK, &Items { items, cursor: None }))
            }
            ([id, "ping"], _) => {
                let webhook = self.find(&grant, requested, id).await?;
                let outcome = self.delivery()?.ping(&webhook.id).await?;
                Ok(json_response(StatusCode::OK, &outcome))
            }
            ([id, "dead-letters"], _) => {
                let webhook = self.find(&grant, requested, id).await?;
                self.dead_letters(&webhook.id, &query).await
            }
            ([id, "dead-letters", "replay"], _) => {
                let webhook = self.find(&grant, requested, id).await?;
                self.replay_since(&webhook.id, read_limited(body, BODY_LIMIT).await?).await
            }
            ([id, "dead-letters", letter, ..], method) => {
                let webhook = self.find(&grant, requested, id).await?;
                let letter: i64 = letter
                    .parse()
                    .map_err(|_| ApiError::new(ErrorCode::NotFound, format!("no dead letter {letter:?}")))?;
                let records = store::dead_letter_sink(&webhook.id);
                if *method == Method::DELETE {
                    if !dead_letter::discard(&self.pool, &records, letter).await.map_err(pg("discarding"))? {
                        return Err(ApiError::new(ErrorCode::NotFound, format!("no dead letter {letter}")));
                    }
                    return Ok(json_response(StatusCode::OK, &serde_json::json!({ "discarded": letter })));
                }
                self.delivery()?.replay(&webhook.id, letter).await?;
                Ok(json_response(StatusCode::OK, &serde_json::json!({ "replayed": letter })))
            }
            _ => Err(ApiError::new(ErrorCode::NotFound, format!("no route for {path}"))),
        }
    }

    fn delivery(&self) -> Result<&Arc<dyn WebhookDelivery>, ApiError> {
        self.delivery.as_ref().ok_or_else(|| ApiError::new(ErrorCode::Unavailable, "this host delivers no webhooks"))
    }

    async fn dead_letters(&self, id: &str, query: &Query) -> Result<Response<Body>, ApiError> {
        let limit = number_in("limit", query.get("limit"), 1..=1000, 100)?;
        let after_id = match query.get("cursor").filter(|cursor| !cursor.is_empty()) {
            Some(cursor) => {
                Some(cursor.parse::<i64>().map_err(|_| ApiError::invalid("cursor: the last page's cursor"))?)
            }
            None => None,
        };
        let include_replayed = match query.get("replayed") {
            None | Some("false") => false,
            Some("true") => true,
            Some(_) => return Err(ApiError::invalid("replayed must be true or false")),
        };
        let request = dead_letter::ListRequest {
            sink: Some(store::dead_letter_sink(id)),
            include_replayed,
            after_id,
            limit: u32::try_from(limit + 1).unwrap_or(u32::MAX),
        };
        let mut items = dead_letter::list(&self.pool, &request).await.map_err(pg("listing dead letters"))?;
        let more = items.len() > limit;
        items.truncate(limit);
        let cursor = more.then(|| items.last().map(|letter| letter.id.to_string())).flatten();
        Ok(json_response(StatusCode::OK, &Items { items, cursor }))
    }

    /// Replays every pending dead letter of subscription `id` that last failed at or after
    /// the body's `since`, oldest first.
    async fn replay_since(&self, id: &str, body: Bytes) -> Result<Response<Body>, ApiError> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Since {
            #[serde(with = "time::serde::rfc3339")]
            since: time::OffsetDateTime,
        }
        #[derive(Serialize)]
        struct Refused {
            id: i64,
            error: String,
        }
        let Since { since } = parse_body(&body)?;
        let delivery = self.delivery()?;
        let mut request = dead_letter::ListRequest::pending(store::dead_letter_sink(id));
        request.limit = 1000;
        let (mut replayed, mut refused) = (Vec::new(), Vec::new());
        loop {
            let page = dead_letter::list(&self.pool, &request).await.map_err(pg("listing dead letters"))?;
            let Some(last) = page.last() else { break };
            request.after_id = Some(last.id);
            for letter in page.iter().filter(|letter| letter.last_failed_at >= since) {
                match delivery.replay(id, letter.id).await {
                    Ok(()) => replayed.push(letter.id),
                    Err(error) => refused.push(Refused { id: letter.id, error: error.message().to_owned() }),
                }
            }
        }
        Ok(json_response(StatusCode::OK, &serde_json::json!({ "replayed": replayed, "refused": refused })))
    }

    async fn create(&self, key: &SealKey, tenant: &str, body: Bytes) -> Result<Response<Body>, ApiError> {
        let body: CreateBody = parse_body(&body)?;
        let url = self.check_target(&body.url).await?;
        let types = body.types.unwrap_or_else(|| vec!["*".to_owned()]);
        rules::check_types(&types, &self.catalog).map_err(refused)?;
        let description = body.description.unwrap_or_default();
        rules::check_description(&description).map_err(refused)?;
        let headers = body.headers.unwrap_or_default();
        rules::check_headers(&headers).map_err(refused)?;
        let metadata = body.metadata.unwrap_or_else(|| serde_json::json!({}));
        rules::check_metadata(&metadata).map_err(refused)?;
        let secret = body.secret.as_deref().map(Secret::parse).transpose().map_err(refused)?;
        let new = NewWebhook { url: url.to_string(), types, description, headers, metadata, secret };
        let (webhook, secret) = store::create(&self.pool, key, tenant, &new, self.config.max_per_tenant)
            .await
            .map_err(pg("creating a webhook"))?;
        Ok(json_response(StatusCode::CREATED, &self.view(webhook, Some(secret)).await?))
    }

    async fn list(&self, tenant: &str, query: &Query) -> Result<Response<Body>, ApiError> {
        let limit = number_in("limit", query.get("limit"), 1..=MAX_PAGE, MAX_PAGE)?;
        let after = query.get("cursor").filter(|cursor| !cursor.is_empty());
        if let Some(cursor) = after.filter(|cursor| !is_webhook_id(cursor)) {
            return Err(ApiError::invalid(format!(
                "cursor: {cursor:?} is not a subscription id (the last page's cursor)"
            )));
        }
        let mut page = store::list(&self.pool, tenant, after, limit + 1).await.map_err(pg("listing webhooks"))?;
        let more = page.len() > limit;
        page.truncate(limit);
        let cursor = more.then(|| page.last().map(|webhook| webhook.id.clone())).flatten();
        let mut items = Vec::with_capacity(page.len());
        for webhook in page {
            items.push(self.view(webhook, None).await?);
        }
        Ok(json_response(StatusCode::OK, &Items { items, cursor }))
    }

    async fn update(
        &self,
        key: &SealKey,
        tenant: Option<&str>,
        id: &str,
        body: Bytes,
    ) -> Result<Response<Body>, ApiError> {
        let body: PatchBody = parse_body(&body)?;
        let url = match &body.url {
            Some(url) => Some(self.check_target(url).await?.to_string()),
            None => None,
        };
        if let Some(types) = &body.types {
            rules::check_types(types, &self.catalog).map_err(refused)?;
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
        let patch = Patch {
            url,
            types: body.types,
            description: body.description,
            headers: body.headers,
            metadata: body.metadata,
            enabled: body.enabled,
            resume_now: body.resume == Some(Resume::Now),
        };
        let webhook = store::update(&self.pool, key, tenant, id, &patch).await.map_err(pg("changing a webhook"))?;
        let webhook = webhook.ok_or_else(|| not_found(id))?;
        Ok(json_response(StatusCode::OK, &self.view(webhook, None).await?))
    }

    async fn rotate(
        &self,
        key: &SealKey,
        tenant: Option<&str>,
        id: &str,
        body: Bytes,
    ) -> Result<Response<Body>, ApiError> {
        let body: RotateBody =
            if body.iter().all(u8::is_ascii_whitespace) { RotateBody::default() } else { parse_body(&body)? };
        let secret = body.secret.as_deref().map(Secret::parse).transpose().map_err(refused)?;
        let grace = body.grace_period_seconds.map_or(self.config.default_grace, Duration::from_secs);
        let rotated =
            store::rotate(&self.pool, key, tenant, id, secret, grace).await.map_err(pg("rotating a secret"))?;
        let (webhook, secret) = rotated.ok_or_else(|| not_found(id))?;
        Ok(json_response(StatusCode::OK, &self.view(webhook, Some(secret)).await?))
    }

    /// Subscription `id` as `grant` may see it.
    async fn find(&self, grant: &Grant, requested: Option<&str>, id: &str) -> Result<Webhook, ApiError> {
        let tenant = scope_of(grant, requested)?;
        let webhook = store::get(&self.pool, tenant.as_deref(), id).await.map_err(pg("reading a webhook"))?;
        webhook.ok_or_else(|| not_found(id))
    }

    /// The URL checked by the rules and its host by the target policy: an IP literal as
    /// written, a name by every address it resolves to now.
    async fn check_target(&self, text: &str) -> Result<Url, ApiError> {
        let policy = &self.config.targets;
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

    /// The answer's form of `webhook`: headers redacted, its position and lag, its last attempt.
    async fn view(&self, webhook: Webhook, secret: Option<Secret>) -> Result<View, ApiError> {
        let patterns: Vec<Pattern> = webhook.types.iter().filter_map(|text| Pattern::parse(text).ok()).collect();
        let request = ReadRequest::tenant(webhook.tenant_id.clone()).types(patterns).after(webhook.position);
        let lag = cursor::lag(&self.pool, &request, LAG_CAP).await.map_err(pg("measuring a webhook's lag"))?;
        let last = store::last_attempt(&self.pool, &webhook.id).await.map_err(pg("reading attempts"))?;
        let last_attempt = last.as_ref().map(|attempt: &Attempt| LastAttempt {
            time: attempt.time,
            status: attempt.status,
            duration_ms: attempt.duration_ms,
        });
        let headers = webhook.header_names.iter().map(|name| (name.clone(), "<redacted>")).collect();
        let position = webhook.position.dotted();
        Ok(View { webhook, headers, position, lag, last_attempt, secret: secret.map(|secret| secret.expose()) })
    }
}

/// The methods each path serves, `None` for a path that is not a route.
fn allowed_methods(segments: &[&str]) -> Option<&'static str> {
    Some(match segments {
        [] => "GET, POST",
        [id] if !id.is_empty() => "GET, PATCH, DELETE",
        [id, "rotate-secret"] if !id.is_empty() => "POST",
        [id, "attempts"] if !id.is_empty() => "GET",
        [id, "ping"] if !id.is_empty() => "POST",
        [id, "dead-letters"] if !id.is_empty() => "GET",
        [id, "dead-letters", "replay"] if !id.is_empty() => "POST",
        [id, "dead-letters", _, "replay"] if !id.is_empty() => "POST",
        [id, "dead-letters", letter] if !id.is_empty() && !letter.is_empty() => "DELETE",
        _ => return None,
    })
}

/// The tenant a list or a creation is for: the grant's own, or the one named when the grant
/// is an administrator's.
fn own_or_named(grant: &Grant, requested: Option<&str>) -> Result<String, ApiError> {
    Ok(scope_of(grant, requested)?.unwrap_or_else(|| grant.tenant_id.clone()))
}

/// The tenant whose subscriptions a request may touch: the grant's own; for an
/// administrator the one named, or any (`None`).
fn scope_of(grant: &Grant, requested: Option<&str>) -> Result<Option<String>, ApiError> {
    match requested.filter(|tenant| !tenant.is_empty()) {
        Some(tenant) if tenant == grant.tenant_id => Ok(Some(tenant.to_owned())),
        Some(tenant) => {
            outbox_core::validate::check_tenant_id(tenant)
                .map_err(|rule| ApiError::invalid(format!("tenantId {rule}")))?;
            if !grant.is_admin() {
                return Err(ApiError::denied("only an administrator may manage another tenant's webhooks"));
            }
            Ok(Some(tenant.to_owned()))
        }
        None if grant.is_admin() => Ok(None),
        None => Ok(Some(grant.tenant_id.clone())),
    }
}

/// `wh_` and 26 lowercase ULID characters.
fn is_webhook_id(text: &str) -> bool {
    text.strip_prefix("wh_")
        .is_some_and(|ulid| ulid.len() == 26 && ulid.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_lowercase()))
}

fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|error| ApiError::invalid(format!("the body is not a valid request: {error}")))
}

fn refused(refusal: rules::Refusal) -> ApiError {
    ApiError::invalid(refusal.to_string())
}

fn not_found(id: &str) -> ApiError {
    ApiError::new(ErrorCode::NotFound, format!("no webhook subscription {id:?}"))
}

fn pg(context: &'static str) -> impl Fn(outbox_pg::Error) -> ApiError {
    move |error| ApiError::from_pg(context, error)
}
