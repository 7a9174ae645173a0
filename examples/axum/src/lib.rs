//! Outbox in an axum 0.8 application: a small shop whose `POST /orders` writes an order and
//! its `order.placed` event in one transaction, with Outbox's routes mounted under
//! `/outbox` and an in-process subscriber. `docs/library.md` walks through it.
//!
//! - [`migrator`]: Outbox's migrations (owner `core`), then the shop's own (owner `shop`).
//! - [`catalog`]: the shop's own families; none of a preset's.
//! - [`app`]: the router and the subscribers, sharing one tail.
//!
//! Run it with `cargo run -p outbox-example-axum` (it needs `DATABASE_URL`).

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use outbox_core::{Catalog, CatalogEntry, ErrorCode, NewEvent, Pattern};
use outbox_http::{AuthError, Authorizer, BoxFuture, Grant, OutboxService, error_response, scope};
use outbox_pg::sqlx::PgPool;
use outbox_pg::{Migration, Migrator, Tail, TailOptions};
use outbox_workers::Subscribers;
use serde::Deserialize;
use serde_json::json;

/// Outbox's schema, then the shop's table: one runner, one ledger, one lock.
pub fn migrator() -> Migrator {
    Migrator::new().register([Migration::new("shop/0001_orders", include_str!("../migrations/0001_orders.sql"))])
}

/// What the shop publishes, as `GET /outbox/event-types` lists it (after it, Outbox's own
/// `webhook.ping`, `webhook.disabled`).
pub fn catalog() -> Catalog {
    let orders = Pattern::parse("order.*").expect("a valid pattern");
    Catalog::new([CatalogEntry::new(orders, "order/{id}", "shop", "Orders placed: { item, quantity }")])
}

/// A pool with the settings every Outbox process uses (`outbox_pg::pool::options`).
pub async fn connect(url: &str) -> anyhow::Result<PgPool> {
    Ok(outbox_pg::pool::options().max_connections(10).connect(url).await?)
}

/// The router (the shop's `POST /orders`, Outbox under `/outbox`) and the in-process
/// subscribers, fed by the same shared tail as `/outbox/watch`.
pub fn app(pool: PgPool) -> (Router, Subscribers) {
    let tail = Tail::new(pool.clone(), TailOptions::default());
    let outbox = OutboxService::new(pool.clone(), Arc::new(Tokens)).with_catalog(catalog()).with_tail(tail.clone());
    let subscribers = Subscribers::new(pool.clone(), tail);
    let router = Router::new()
        .route("/orders", post(place_order))
        // `/outbox/events`, `/outbox/watch`, `/outbox/event-types`: axum strips the prefix.
        .nest_service("/outbox", outbox)
        .with_state(pool);
    (router, subscribers)
}

/// `POST /orders`'s body.
#[derive(Debug, Deserialize)]
struct NewOrder {
    id: String,
    item: String,
    quantity: i32,
}

/// The order and its event in one transaction: both commit or neither does.
async fn place_order(State(pool): State<PgPool>, headers: HeaderMap, Json(order): Json<NewOrder>) -> Response {
    let grant = match Tokens::grant(&headers) {
        Ok(grant) => grant,
        Err(error) => return error_response(ErrorCode::Unauthenticated, error.to_string()).into_response(),
    };
    match insert_and_publish(&pool, &grant.tenant_id, &order).await {
        Ok(event_id) => (StatusCode::CREATED, Json(json!({ "id": order.id, "eventId": event_id }))).into_response(),
        Err(error) => error_response(error.code(), error.to_string()).into_response(),
    }
}

async fn insert_and_publish(pool: &PgPool, tenant: &str, order: &NewOrder) -> outbox_pg::Result<String> {
    let mut tx = pool.begin().await?;
    outbox_pg::sqlx::query("INSERT INTO shop_orders (id, tenant_id, item, quantity) VALUES ($1, $2, $3, $4)")
        .bind(&order.id)
        .bind(tenant)
        .bind(&order.item)
        .bind(order.quantity)
        .execute(&mut *tx)
        .await?;
    let data = json!({ "item": order.item, "quantity": order.quantity });
    let event = NewEvent::new("order.placed", tenant, format!("order/{}", order.id), data);
    let id = outbox_pg::publish(&mut *tx, &event).await?;
    tx.commit().await?;
    Ok(id)
}

/// The example's tokens: `Bearer <tenant>-token` reads and writes that tenant's events. A
/// real application checks its own sessions or JWTs here.
struct Tokens;

impl Tokens {
    fn grant(headers: &HeaderMap) -> Result<Grant, AuthError> {
        let tenant = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .and_then(|token| token.strip_suffix("-token"))
            .filter(|tenant| outbox_core::validate::is_valid_tenant_id(tenant))
            .ok_or_else(|| AuthError::Unauthenticated("send Authorization: Bearer <tenant>-token".into()))?;
        Ok(Grant::new(tenant, [scope::EVENTS_READ, scope::EVENTS_WRITE]))
    }
}

impl Authorizer for Tokens {
    fn authorize<'a>(&'a self, headers: &'a HeaderMap) -> BoxFuture<'a, Result<Grant, AuthError>> {
        let grant = Tokens::grant(headers);
        Box::pin(async move { grant })
    }

    fn reauthorize<'a>(&'a self, _grant: &'a Grant) -> BoxFuture<'a, Result<bool, AuthError>> {
        Box::pin(async { Ok(true) })
    }
}

/// Serves `router` on `listener` until the task is dropped.
pub async fn serve(router: Router, listener: tokio::net::TcpListener) -> std::io::Result<()> {
    axum::serve(listener, router).await
}
