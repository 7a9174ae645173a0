//! The webhook subscription routes (SPEC §7.6): a tenant manages its own endpoints.
//!
//! | route | answer |
//! |---|---|
//! | `POST /webhooks` | 201, the subscription with its `secret` (shown only here and by `rotate-secret`) |
//! | `GET /webhooks?cursor=&limit=` | `{"items":[…],"cursor":"<id>"}`, oldest first; `cursor` only when more follow; one query a page |
//! | `GET /webhooks/{id}` | the subscription |
//! | `PATCH /webhooks/{id}` | the changed subscription (`{"enabled":true,"resume":"now"}` skips to the head) |
//! | `DELETE /webhooks/{id}` | `{"deleted":"<id>"}`; its cursor, attempts and dead letters go with it |
//! | `POST /webhooks/{id}/rotate-secret` | the subscription with its new `secret`; the old one signs beside it for `gracePeriodSeconds` (default 86400) |
//! | `GET /webhooks/{id}/attempts` | `{"items":[…]}`, newest first, the last 100 |
//! | `POST /webhooks/{id}/ping` | `{"delivered":…,"status":…,"durationMs":…,"error":…}`: one signed `webhook.ping`, now |
//! | `GET /webhooks/{id}/dead-letters?cursor=&limit=&replayed=true` | `{"items":[DeadLetter…],"cursor":"<id>"}`, oldest first |
//! | `POST /webhooks/{id}/dead-letters/{dl}/replay` | `{"replayed":<dl>}` once the endpoint took it |
//! | `DELETE /webhooks/{id}/dead-letters/{dl}` | `{"discarded":<dl>}` |
//! | `POST /webhooks/{id}/dead-letters/replay` | `{"since": time}` or `{}`: every pending letter that failed since then (or all), `{"replayed":[…],"refused":[{"id","error"}]}` |
//!
//! A subscription's view carries its `position`, its `lag` (events of its tenant and types
//! after its cursor, counted up to `outbox_pg::internal::cursor::LAG_CAP`) and
//! `"lagCapped": true` when the count stopped there. The routes are chosen once from the
//! path and the method ([`route::WebhookRoute`]), which also gives a 405 its `Allow`; the
//! views are [`views`], the bodies' checks [`bodies`].
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

use std::fmt::Display;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body::Body as HttpBody;
use outbox_core::target::TargetPolicy;
use outbox_core::webhook::{PingOutcome, Secret};
use outbox_core::{Catalog, ErrorCode};
use outbox_pg::internal::dead_letter::{self, DeadLetter, Page};
use outbox_pg::internal::seal::SealKey;
use outbox_pg::internal::webhook::{self as store, Webhook};
use outbox_pg::sqlx::PgPool;
use serde::Serialize;

use crate::auth::require_scope;
use crate::dead_letters::{self, Items, Letters, letters_page};
use crate::query::{Query, number_in};
use crate::route::{pick, read, segments};
use crate::{ApiError, Authorizer, Body, BoxFuture, Grant, json_response, scope};

mod bodies;
pub(crate) mod route;
mod views;

use route::WebhookRoute;
use views::{AttemptView, LANES_CHANGED, WebhookView};

/// The largest request body of a webhook route.
const BODY_LIMIT: usize = 64 * 1024;
/// The most subscriptions one page of `GET /webhooks` lists, and the default.
const MAX_PAGE: usize = 100;

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

/// One request, authorized: who asks, the tenant it names, its query and its body.
struct Call<'a> {
    grant: Grant,
    key: Arc<SealKey>,
    query: Query,
    body: Bytes,
    route: WebhookRoute<'a>,
}

impl Call<'_> {
    fn requested(&self) -> Option<&str> {
        self.query.get("tenantId")
    }

    /// The tenant a list or a creation is for: the grant's own, or the one named when the
    /// grant is an administrator's.
    fn own_or_named(&self) -> Result<String, ApiError> {
        Ok(self.scope()?.unwrap_or_else(|| self.grant.tenant_id.clone()))
    }

    /// The tenant whose subscriptions the request may touch: the grant's own; for an
    /// administrator the one named, or any (`None`).
    fn scope(&self) -> Result<Option<String>, ApiError> {
        let grant = &self.grant;
        match self.requested().filter(|tenant| !tenant.is_empty()) {
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
    ///
    /// It chooses the route, then checks the seal key, the caller, its scope, the query
    /// and the body, in that order.
    pub async fn handle<B>(&self, request: Request<B>) -> Response<Body>
    where
        B: HttpBody<Data = Bytes> + Send + 'static,
        B::Error: Display,
    {
        let (parts, body) = request.into_parts();
        let answer = async {
            let path = parts.uri.path();
            let route = pick(path, &parts.method, WebhookRoute::served(&segments(path)))?;
            let key = self.config.seal_key.clone().ok_or_else(|| {
                ApiError::new(
                    ErrorCode::Unavailable,
                    "webhook subscriptions need a seal key: set [webhooks] seal_key or OUTBOX_WEBHOOK_SEAL_KEY",
                )
            })?;
            let grant = self.authorizer.authorize(&parts.headers).await?;
            require_scope(&grant, scope::WEBHOOKS_WRITE)?;
            let (query, body) = read(&route, &parts.uri, body, BODY_LIMIT).await?;
            self.answer(&Call { grant, key, query, body, route }).await
        };
        Box::pin(answer).await.unwrap_or_else(ApiError::into_response)
    }

    async fn answer(&self, call: &Call<'_>) -> Result<Response<Body>, ApiError> {
        use WebhookRoute as R;
        match call.route {
            R::Create => self.create(call).await,
            R::List => self.list(call).await,
            R::Get(id) => Ok(ok(&self.view(call.scope()?.as_deref(), id, None).await?)),
            R::Update(id) => self.update(call, id).await,
            R::Delete(id) => {
                let deleted = store::delete(&self.pool, call.scope()?.as_deref(), id).await;
                if !deleted.map_err(pg("deleting a webhook"))? {
                    return Err(not_found(id));
                }
                Ok(ok(&serde_json::json!({ "deleted": id })))
            }
            R::RotateSecret(id) => self.rotate(call, id).await,
            R::Attempts(id) => {
                let attempts = store::attempts(&self.pool, call.scope()?.as_deref(), id).await;
                let attempts = attempts.map_err(pg("reading attempts"))?.ok_or_else(|| not_found(id))?;
                Ok(ok(&Items::all(attempts.into_iter().map(AttemptView::from).collect())))
            }
            R::Ping(id) => {
                let webhook = self.find(call, id).await?;
                Ok(ok(&self.delivery()?.ping(&webhook.id).await?))
            }
            R::DeadLetters(id) => {
                let webhook = self.find(call, id).await?;
                let page = dead_letters::page(&call.query)?;
                let letters = dead_letter::page(&self.pool, &store::dead_letter_sink(&webhook.id), page).await;
                let (letters, more) = letters.map_err(pg("listing dead letters"))?;
                Ok(ok(&letters_page(&letters, more)))
            }
            R::ReplayAll(id) => {
                let webhook = self.find(call, id).await?;
                let letters = WebhookLetters { routes: self, id: &webhook.id, delivery: self.delivery()?.as_ref() };
                Ok(ok(&dead_letters::replay_all(&letters, &call.body).await?))
            }
            R::Replay(id, letter) | R::Discard(id, letter) => self.letter(call, id, letter).await,
        }
    }

    /// Replays (`POST …/replay`) or discards (`DELETE`) one dead letter.
    async fn letter(&self, call: &Call<'_>, id: &str, letter: &str) -> Result<Response<Body>, ApiError> {
        let webhook = self.find(call, id).await?;
        let letter: i64 =
            letter.parse().map_err(|_| ApiError::new(ErrorCode::NotFound, format!("no dead letter {letter:?}")))?;
        if let WebhookRoute::Replay(..) = call.route {
            self.delivery()?.replay(&webhook.id, letter).await?;
            return Ok(ok(&serde_json::json!({ "replayed": letter })));
        }
        let records = store::dead_letter_sink(&webhook.id);
        if !dead_letter::discard(&self.pool, &records, letter).await.map_err(pg("discarding"))? {
            return Err(ApiError::new(ErrorCode::NotFound, format!("no dead letter {letter}")));
        }
        Ok(ok(&serde_json::json!({ "discarded": letter })))
    }

    fn delivery(&self) -> Result<&Arc<dyn WebhookDelivery>, ApiError> {
        self.delivery.as_ref().ok_or_else(|| ApiError::new(ErrorCode::Unavailable, "this host delivers no webhooks"))
    }

    async fn create(&self, call: &Call<'_>) -> Result<Response<Body>, ApiError> {
        let tenant = call.own_or_named()?;
        let new = bodies::new_webhook(&call.body, &self.catalog, &self.config.targets).await?;
        let (webhook, secret) = store::create(&self.pool, &call.key, &tenant, &new, self.config.max_per_tenant)
            .await
            .map_err(pg("creating a webhook"))?;
        Ok(json_response(StatusCode::CREATED, &self.view(None, &webhook.id, Some(secret)).await?))
    }

    /// One page of subscriptions with their lag and newest attempt: one query.
    async fn list(&self, call: &Call<'_>) -> Result<Response<Body>, ApiError> {
        let tenant = call.own_or_named()?;
        let limit = number_in("limit", call.query.get("limit"), 1..=MAX_PAGE, MAX_PAGE)?;
        let after = call.query.get("cursor").filter(|cursor| !cursor.is_empty());
        if let Some(cursor) = after.filter(|cursor| !is_webhook_id(cursor)) {
            return Err(ApiError::invalid(format!(
                "cursor: {cursor:?} is not a subscription id (the last page's cursor)"
            )));
        }
        let mut page = store::list(&self.pool, &tenant, after, limit + 1).await.map_err(pg("listing webhooks"))?;
        let more = page.len() > limit;
        page.truncate(limit);
        let cursor = more.then(|| page.last().map(|overview| overview.webhook.id.clone())).flatten();
        let items = page.into_iter().map(|overview| WebhookView::new(overview, None)).collect();
        Ok(ok(&Items { items, cursor }))
    }

    async fn update(&self, call: &Call<'_>, id: &str) -> Result<Response<Body>, ApiError> {
        let tenant = call.scope()?;
        let patch = bodies::patch(&call.body, &self.catalog, &self.config.targets).await?;
        let before = store::get(&self.pool, tenant.as_deref(), id).await.map_err(pg("reading a webhook"))?;
        let lanes_before = before.ok_or_else(|| not_found(id))?.lanes;
        let updated = store::update(&self.pool, &call.key, tenant.as_deref(), id, &patch).await;
        let webhook = updated.map_err(pg("changing a webhook"))?.ok_or_else(|| not_found(id))?;
        let view = self.view(None, &webhook.id, None).await?;
        Ok(ok(&if webhook.lanes == lanes_before { view } else { view.with_notice(LANES_CHANGED) }))
    }

    async fn rotate(&self, call: &Call<'_>, id: &str) -> Result<Response<Body>, ApiError> {
        let tenant = call.scope()?;
        let (secret, grace) = bodies::rotation(&call.body, self.config.default_grace)?;
        let rotated = store::rotate(&self.pool, &call.key, tenant.as_deref(), id, secret, grace).await;
        let (webhook, secret) = rotated.map_err(pg("rotating a secret"))?.ok_or_else(|| not_found(id))?;
        Ok(ok(&self.view(None, &webhook.id, Some(secret)).await?))
    }

    /// Subscription `id` as the call may see it.
    async fn find(&self, call: &Call<'_>, id: &str) -> Result<Webhook, ApiError> {
        let tenant = call.scope()?;
        let webhook = store::get(&self.pool, tenant.as_deref(), id).await.map_err(pg("reading a webhook"))?;
        webhook.ok_or_else(|| not_found(id))
    }

    /// The answer's form of subscription `id` of `tenant` (`None`: any), read with its lag
    /// and newest attempt in one query, and each lane's in another when it has lanes.
    async fn view(&self, tenant: Option<&str>, id: &str, secret: Option<Secret>) -> Result<WebhookView, ApiError> {
        let overview = store::overview(&self.pool, tenant, id).await.map_err(pg("reading a webhook"))?;
        let overview = overview.ok_or_else(|| not_found(id))?;
        if overview.webhook.lanes == 1 {
            return Ok(WebhookView::new(overview, secret));
        }
        let lanes = store::lane_lags(&self.pool, &overview.webhook).await.map_err(pg("reading a webhook's lanes"))?;
        Ok(WebhookView::new(overview, secret).with_lanes(lanes))
    }
}

/// One subscription's dead letters, as a bulk replay reads and replays them.
struct WebhookLetters<'a> {
    routes: &'a WebhookRoutes,
    id: &'a str,
    delivery: &'a dyn WebhookDelivery,
}

impl Letters for WebhookLetters<'_> {
    fn page(&self, page: Page) -> BoxFuture<'_, Result<(Vec<DeadLetter>, bool), ApiError>> {
        Box::pin(async move {
            let records = store::dead_letter_sink(self.id);
            dead_letter::page(&self.routes.pool, &records, page).await.map_err(pg("listing dead letters"))
        })
    }

    fn replay(&self, id: i64) -> BoxFuture<'_, Result<(), ApiError>> {
        self.delivery.replay(self.id, id)
    }
}

/// `wh_` and 26 lowercase ULID characters.
fn is_webhook_id(text: &str) -> bool {
    text.strip_prefix("wh_")
        .is_some_and(|ulid| ulid.len() == 26 && ulid.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_lowercase()))
}

fn ok(value: &impl Serialize) -> Response<Body> {
    json_response(StatusCode::OK, value)
}

fn not_found(id: &str) -> ApiError {
    ApiError::new(ErrorCode::NotFound, format!("no webhook subscription {id:?}"))
}

fn pg(context: &'static str) -> impl Fn(outbox_pg::Error) -> ApiError {
    move |error| ApiError::from_pg(context, error)
}
