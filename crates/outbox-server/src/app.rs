//! The bundled server's router: [`app`] turns an [`AppState`] into the one service that
//! `outbox serve`, `outbox dev` and the tests all run. The routes themselves live in
//! `outbox-http`; this module only mounts them, with the probes and `/metrics` beside.
//!
//! | route | what |
//! |---|---|
//! | `GET/POST /events`, `GET /watch`, `GET /event-types`, `GET /whoami` | [`OutboxService`] (role `http`) |
//! | `POST /admin/streams/close` | revocation, scope `admin` (role `http`, SPEC §5.5) |
//! | `GET /sinks`, `GET /sinks/{id}`, dead letters | [`SinkRoutes`] over the configured [`Sinks`], scope `admin` (role `http`) |
//! | `/webhooks…` | [`WebhookRoutes`], scope `webhooks:write` or `admin` (role `http`) |
//! | `GET /`, `GET /console/…` | the console ([`Console`]): the page, its script, style and `watchEvents` (role `http`) |
//! | `GET /healthz` | liveness: 200 `{"status":"ok"}` |
//! | `GET /readyz` | readiness: the database answers, no migration is pending or drifted, the roles run |
//! | `GET /metrics` | the Prometheus text format ([`metrics`](crate::metrics)) |
//!
//! Anything else is a JSON `NOT_FOUND`; a known path with another method is a JSON
//! `METHOD_NOT_ALLOWED` with `Allow`. A process without the `http` role still answers
//! `/healthz`, `/readyz` and `/metrics`, so an orchestrator can probe every process alike.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use outbox_core::ErrorCode;
use outbox_http::{
    ApiError, Body, BoxFuture, Console, OutboxService, Selector, SinkRoutes, WebhookRoutes, authorize_admin,
    error_response, json_response, method_not_allowed, read_limited,
};
use serde::{Deserialize, Serialize};

use crate::revocation;
use crate::sinks::Sinks;
use crate::state::AppState;

/// The largest body `POST /admin/streams/close` reads.
const CLOSE_BODY_LIMIT: usize = 16 * 1024;

/// The longest revocation reason accepted.
const REASON_LIMIT: usize = 1024;

/// How long `/readyz` waits for the database.
const READY_TIMEOUT: Duration = Duration::from_secs(3);

/// The router: one cheap-to-clone service over the shared state.
#[derive(Clone)]
pub struct App {
    state: Arc<AppState>,
    sinks: SinkRoutes<Sinks>,
    webhooks: WebhookRoutes,
}

/// Builds the router over `state`, with `webhooks` mounted under `/webhooks`.
pub fn app(state: AppState, webhooks: WebhookRoutes) -> App {
    let sinks = SinkRoutes::new(state.sinks.clone(), state.authorizer.clone());
    App { state: Arc::new(state), sinks, webhooks }
}

impl App {
    /// The shared state (the shutdown path ends the service's streams through it).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Answers one request.
    pub async fn handle<B>(&self, request: Request<B>) -> Response<Body>
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: std::fmt::Display,
    {
        let state = &self.state;
        let path = request.uri().path();
        match path {
            "/healthz" => only_get(request.method()).unwrap_or_else(healthz),
            "/readyz" => match only_get(request.method()) {
                Some(refusal) => refusal,
                None => readyz(state).await,
            },
            "/metrics" => match only_get(request.method()) {
                Some(refusal) => refusal,
                None => metrics(state).await,
            },
            "/admin/streams/close" if state.serve_api => match *request.method() {
                Method::POST => close_streams(state, request).await.unwrap_or_else(ApiError::into_response),
                _ => method_not_allowed("POST"),
            },
            _ if state.serve_api && SinkRoutes::<Sinks>::serves(path) => self.sinks.handle(request).await,
            _ if state.serve_api && WebhookRoutes::serves(path) => self.webhooks.handle(request).await,
            _ if state.serve_api && OutboxService::serves(path) => state.service.handle(request).await,
            _ if state.serve_api && Console::serves(path) => Console.handle(request),
            _ => error_response(ErrorCode::NotFound, format!("no route for {path}")),
        }
    }
}

impl<B> hyper::service::Service<Request<B>> for App
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: std::fmt::Display,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response<Body>, Infallible>>;

    fn call(&self, request: Request<B>) -> Self::Future {
        let app = self.clone();
        Box::pin(async move { Ok(app.handle(request).await) })
    }
}

fn only_get(method: &Method) -> Option<Response<Body>> {
    (method != Method::GET && method != Method::HEAD).then(|| method_not_allowed("GET"))
}

#[derive(Serialize)]
struct Status {
    status: &'static str,
}

fn healthz() -> Response<Body> {
    json_response(StatusCode::OK, &Status { status: "ok" })
}

async fn readyz(state: &AppState) -> Response<Body> {
    let status = match tokio::time::timeout(READY_TIMEOUT, state.migrator.status(&state.pool)).await {
        Ok(Ok(status)) => status,
        Ok(Err(error)) => {
            tracing::warn!(%error, "readiness: reading the migration ledger failed");
            return error_response(ErrorCode::Unavailable, "the database does not answer");
        }
        Err(_) => return error_response(ErrorCode::Unavailable, "the database does not answer in time"),
    };
    if !status.drifted.is_empty() {
        let message = format!("migrations changed after they were applied: {}", status.drifted.join(", "));
        return error_response(ErrorCode::Unavailable, message);
    }
    if !status.pending.is_empty() {
        return error_response(ErrorCode::Unavailable, format!("migrations pending: {}", status.pending.join(", ")));
    }
    if let Some(reason) = state.ops.roles_not_running().or_else(|| state.sinks.not_running()) {
        return error_response(ErrorCode::Unavailable, reason);
    }
    json_response(StatusCode::OK, &Status { status: "ready" })
}

async fn metrics(state: &AppState) -> Response<Body> {
    let text = crate::metrics::render(state).await;
    let mut response =
        Response::new(http_body_util::Full::new(Bytes::from(text)).map_err(|never| match never {}).boxed());
    response.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static(crate::metrics::CONTENT_TYPE));
    response
}

/// The body of `POST /admin/streams/close`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CloseRequest {
    session_id: Option<String>,
    agent_id: Option<String>,
    delegation_id: Option<String>,
    identity_id: Option<String>,
    tenant_id: Option<String>,
    #[serde(default)]
    any_agent: bool,
    reason: Option<String>,
}

#[derive(Serialize)]
struct Closed {
    closed: usize,
}

/// Closes the matching streams here, records the revocation for every other process, and
/// refuses a revoked session or identity at once in this process.
async fn close_streams<B>(state: &AppState, request: Request<B>) -> Result<Response<Body>, ApiError>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: std::fmt::Display,
{
    authorize_admin(state.authorizer.as_ref(), request.headers(), "closing streams").await?;
    let (selector, reason) = read_close_request(request.into_body()).await?;
    if let Err(error) = revocation::record(&state.pool, &selector, &reason).await {
        tracing::warn!(%error, "recording a revocation failed");
        return Err(ApiError::new(ErrorCode::Unavailable, "the revocation could not be recorded; try again"));
    }
    state.revocations.insert(&selector);
    let closed = state.service.registry().close_where(&selector, &reason);
    tracing::info!(?selector, closed, reason, "streams closed by an administrator");
    Ok(json_response(StatusCode::OK, &Closed { closed }))
}

async fn read_close_request<B>(body: B) -> Result<(Selector, String), ApiError>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: std::fmt::Display,
{
    let bytes = read_limited(body, CLOSE_BODY_LIMIT).await?;
    let request: CloseRequest = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::invalid(format!("the body must be a JSON object: {e}")))?;
    let reason = request.reason.unwrap_or_else(|| "closed by an administrator".into());
    if reason.chars().count() > REASON_LIMIT {
        return Err(ApiError::invalid(format!("reason: at most {REASON_LIMIT} characters")));
    }
    let selector = Selector::from_fields(
        request.agent_id,
        request.delegation_id,
        request.session_id,
        request.identity_id,
        request.tenant_id,
        request.any_agent,
    )
    .map_err(ApiError::invalid)?;
    Ok((selector, reason))
}
