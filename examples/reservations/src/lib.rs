//! An example host for Outbox: a tiny reservations service.
//!
//! - Its own route, `POST /reservations/{id}/activate`, changes its own table and
//!   publishes `reservation.active` **in the same transaction**, so the event exists
//!   if and only if the change committed.
//! - It mounts Outbox's `/events`, `/watch` and `/event-types` next to its own routes,
//!   with its own [`Authorizer`]: here a fixed table of API tokens, each bound to a tenant.
//! - It registers its own migration owner, `example`, after Outbox's `core`.
//!
//! Run it with `cargo run -p outbox-example-reservations` (it needs `DATABASE_URL`).

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::sync::Arc;

use http::{Method, Request, Response, StatusCode};
use outbox_core::{ErrorCode, NewEvent};
use outbox_http::{AuthError, Authorizer, Body, BoxFuture, Grant, OutboxService, error_response, json_response, scope};
use outbox_pg::sqlx::PgPool;
use outbox_pg::{Migration, Migrator};
use serde_json::json;

/// The example's migrations: owner `example`, registered after `core`.
pub fn migrator() -> Migrator {
    Migrator::new()
        .register([Migration::new("example/0001_reservations", include_str!("../migrations/0001_reservations.sql"))])
}

/// Tokens of the example: `Bearer <tenant>-token` reads and writes that tenant's events.
pub struct TokenTable;

impl TokenTable {
    fn grant_for(header: Option<&str>) -> Result<Grant, AuthError> {
        let token = header
            .and_then(|value| value.strip_prefix("Bearer "))
            .ok_or_else(|| AuthError::Unauthenticated("send Authorization: Bearer <tenant>-token".into()))?;
        let tenant = token
            .strip_suffix("-token")
            .filter(|t| !t.is_empty())
            .ok_or_else(|| AuthError::Unauthenticated("unknown token".into()))?;
        let scopes: BTreeSet<String> = [scope::EVENTS_READ, scope::EVENTS_WRITE].map(String::from).into();
        Ok(Grant {
            tenant_id: tenant.to_owned(),
            identity_id: Some(format!("user-of-{tenant}")),
            scopes,
            ..Grant::default()
        })
    }
}

impl Authorizer for TokenTable {
    fn authorize<'a>(&'a self, headers: &'a http::HeaderMap) -> BoxFuture<'a, Result<Grant, AuthError>> {
        let header = headers.get(http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        let grant = TokenTable::grant_for(header);
        Box::pin(async move { grant })
    }

    fn reauthorize<'a>(&'a self, _grant: &'a Grant) -> BoxFuture<'a, Result<bool, AuthError>> {
        Box::pin(async { Ok(true) })
    }
}

/// The application: its own state plus the mounted Outbox service.
#[derive(Clone)]
pub struct App {
    pool: PgPool,
    outbox: OutboxService,
}

impl App {
    /// The app on `pool` (already migrated with [`migrator`]).
    pub fn new(pool: PgPool) -> App {
        let outbox = OutboxService::new(pool.clone(), Arc::new(TokenTable));
        App { pool, outbox }
    }

    /// Routes one request: Outbox's paths to Outbox, the rest to the app's own routes.
    pub async fn handle(&self, request: Request<hyper::body::Incoming>) -> Result<Response<Body>, Infallible> {
        if OutboxService::serves(request.uri().path()) {
            return Ok(self.outbox.handle(request).await);
        }
        let path = request.uri().path().to_owned();
        let id = path.strip_prefix("/reservations/").and_then(|rest| rest.strip_suffix("/activate"));
        Ok(match (request.method(), id) {
            (&Method::POST, Some(id)) => self.activate(request.headers(), id).await,
            (_, Some(_)) => error_response(ErrorCode::MethodNotAllowed, "use POST"),
            _ => error_response(ErrorCode::NotFound, format!("no route {path}")),
        })
    }

    /// The app's own change and its event, in one transaction.
    async fn activate(&self, headers: &http::HeaderMap, id: &str) -> Response<Body> {
        let header = headers.get(http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        let grant = match TokenTable::grant_for(header) {
            Ok(grant) => grant,
            Err(error) => return error_response(ErrorCode::Unauthenticated, error.to_string()),
        };
        match self.activate_in_transaction(&grant.tenant_id, id).await {
            Ok(version) => json_response(StatusCode::OK, &json!({ "id": id, "state": "active", "version": version })),
            Err(error) => error_response(error.code(), error.to_string()),
        }
    }

    async fn activate_in_transaction(&self, tenant: &str, id: &str) -> outbox_pg::Result<i64> {
        let mut tx = self.pool.begin().await?;
        let version: i64 = outbox_pg::sqlx::query_scalar(
            "INSERT INTO example_reservations (id, tenant_id, state) VALUES ($1, $2, 'active')
             ON CONFLICT (id) DO UPDATE SET state = 'active', version = example_reservations.version + 1
             RETURNING version",
        )
        .bind(id)
        .bind(tenant)
        .fetch_one(&mut *tx)
        .await?;
        // The subject's version travels with the event, so a consumer can ignore a stale one
        // (see docs/reading.md: (txid, seq) is not always the commit order).
        let event = NewEvent::new(
            "reservation.active",
            tenant,
            format!("reservation/{id}"),
            json!({ "state": "active", "version": version }),
        );
        outbox_pg::publish(&mut *tx, &event).await?;
        tx.commit().await?;
        Ok(version)
    }
}

/// Serves `app` on `listener` until the task is dropped.
pub async fn serve(app: App, listener: tokio::net::TcpListener) -> std::io::Result<()> {
    loop {
        let (stream, _) = listener.accept().await?;
        let app = app.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let app = app.clone();
                async move { app.handle(request).await }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new())
                .serve_connection(io, service)
                .await;
        });
    }
}
