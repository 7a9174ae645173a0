//! [`OutboxService`]: the routes of SPEC §5 as one mountable service.

use std::convert::Infallible;
use std::fmt::Display;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::request::Parts;
use http::{Method, Request, Response};
use http_body::Body as HttpBody;
use outbox_core::{Catalog, ErrorCode};
use outbox_pg::Publisher;
use outbox_pg::internal::head::SharedHead;
use outbox_pg::sqlx::PgPool;
use outbox_pg::tail::Tail;
use tokio::sync::watch;

use crate::{
    ApiError, Authorizer, Body, BoxFuture, HttpStats, WatchOptions, WatchRegistry, event_types, list, publish, whoami,
};

/// The largest `POST /events` body accepted by default: 16 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 16 * 1024 * 1024;

/// Each path this service serves and the methods it allows there.
const ROUTES: &[(&str, &str)] =
    &[("/events", "GET, POST"), ("/watch", "GET"), ("/event-types", "GET"), ("/whoami", "GET")];

/// The mountable service: `GET`/`POST /events`, `GET /watch`, `GET /event-types`, `GET /whoami`.
///
/// Clones share the pool, the authorizer, the registry of open streams, the shared tail and
/// the shutdown signal, so a host can hand a clone to each connection.
#[derive(Clone)]
pub struct OutboxService {
    pub(crate) pool: PgPool,
    pub(crate) authorizer: Arc<dyn Authorizer>,
    pub(crate) options: WatchOptions,
    pub(crate) registry: WatchRegistry,
    pub(crate) catalog: Arc<Catalog>,
    pub(crate) publisher: Publisher,
    pub(crate) body_limit: usize,
    pub(crate) stats: Arc<HttpStats>,
    tail: Arc<OnceLock<Tail>>,
    /// Where streams "from now" find the head, one read for all that open together.
    pub(crate) heads: SharedHead,
    shutdown: Arc<watch::Sender<bool>>,
}

impl OutboxService {
    /// A service reading and writing through `pool`, deciding callers with `authorizer`, with
    /// the SPEC's stream options, a registry of its own and an empty catalog (Outbox's own
    /// families alone, [`Catalog::empty`]).
    pub fn new(pool: PgPool, authorizer: Arc<dyn Authorizer>) -> OutboxService {
        OutboxService {
            heads: SharedHead::new(pool.clone()),
            pool,
            authorizer,
            options: WatchOptions::default(),
            registry: WatchRegistry::new(),
            catalog: Arc::new(Catalog::empty()),
            publisher: Publisher::new(),
            body_limit: DEFAULT_BODY_LIMIT,
            stats: Arc::default(),
            tail: Arc::new(OnceLock::new()),
            shutdown: Arc::new(watch::channel(false).0),
        }
    }

    /// With these `/watch` options (see [`WatchOptions::validate`] to check them first).
    pub fn with_options(mut self, options: WatchOptions) -> OutboxService {
        self.options = options;
        self
    }

    /// Feeds live streams from `tail`, the process's shared tail, which in-process subscribers
    /// may share. Without it the service starts its own tail (polling every `poll_ms`) when
    /// the first stream opens. Ignored when [`WatchOptions::shared_tail`] is `false`.
    pub fn with_tail(mut self, tail: Tail) -> OutboxService {
        self.tail = Arc::new(OnceLock::from(tail));
        self
    }

    /// The tail that feeds this service's streams (started on first use), or `None` when
    /// [`WatchOptions::shared_tail`] is `false` and each stream reads on its own.
    pub fn tail(&self) -> Option<Tail> {
        let tail = self.tail.get_or_init(|| Tail::new(self.pool.clone(), self.options.tail()));
        self.options.shared_tail.then(|| tail.clone())
    }

    /// Registers streams in `registry`, which the host's revocation handlers also hold.
    pub fn with_registry(mut self, registry: WatchRegistry) -> OutboxService {
        self.registry = registry;
        self
    }

    /// Answers `GET /event-types` with `catalog`, which replaces the one the service had:
    /// `Catalog::new(your_families)`, or a preset such as `Catalog::control_plane()` grown
    /// with `with_extra`.
    pub fn with_catalog(mut self, catalog: Catalog) -> OutboxService {
        self.catalog = Arc::new(catalog);
        self
    }

    /// Publishes `POST /events` with `publisher` (other limits, or the strict catalog mode).
    pub fn with_publisher(mut self, publisher: Publisher) -> OutboxService {
        self.publisher = publisher;
        self
    }

    /// Refuses `POST /events` bodies larger than `bytes` (default [`DEFAULT_BODY_LIMIT`]).
    pub fn with_body_limit(mut self, bytes: usize) -> OutboxService {
        self.body_limit = bytes;
        self
    }

    /// The registry of this service's open streams.
    pub fn registry(&self) -> &WatchRegistry {
        &self.registry
    }

    /// What this service (and its clones) served: list requests, streams, events sent.
    pub fn stats(&self) -> &Arc<HttpStats> {
        &self.stats
    }

    /// Whether this service serves `path` (so a host router can delegate to it).
    pub fn serves(path: &str) -> bool {
        allowed_methods(path).is_some()
    }

    /// Handles one request. An unknown path is a 404 JSON refusal; a known path with a method
    /// it does not serve is a 405 with `Allow`.
    pub async fn handle<B>(&self, request: Request<B>) -> Response<Body>
    where
        B: HttpBody<Data = Bytes> + Send + 'static,
        B::Error: Display,
    {
        let (parts, body) = request.into_parts();
        // Boxed: hyper keeps the allocation of a connection's request future for as long as
        // the connection lives, so an open stream would hold the largest route's state
        // (about 5 KiB) for hours; a box is freed as soon as the response is ready.
        Box::pin(self.route(&parts, body)).await.unwrap_or_else(ApiError::into_response)
    }

    /// Ends every open stream (graceful shutdown): each finishes the frame it is sending and
    /// closes; `/watch` requests that arrive afterwards are refused with `UNAVAILABLE`.
    pub fn shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    pub(crate) fn is_shut_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    pub(crate) fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    async fn route<B>(&self, parts: &Parts, body: B) -> Result<Response<Body>, ApiError>
    where
        B: HttpBody<Data = Bytes> + Send + 'static,
        B::Error: Display,
    {
        let path = parts.uri.path();
        let Some(allow) = allowed_methods(path) else {
            return Err(ApiError::new(ErrorCode::NotFound, "no such route"));
        };
        match (path, &parts.method) {
            ("/events", &Method::GET) => list::list(self, parts).await,
            ("/events", &Method::POST) => publish::publish(self, parts, body).await,
            ("/watch", &Method::GET) => crate::watch::watch(self, parts).await,
            ("/event-types", &Method::GET) => event_types::event_types(self, parts).await,
            ("/whoami", &Method::GET) => whoami::whoami(self, parts).await,
            _ => Err(ApiError::method_not_allowed(allow)),
        }
    }
}

fn allowed_methods(path: &str) -> Option<&'static str> {
    ROUTES.iter().find(|(route, _)| *route == path).map(|(_, allow)| *allow)
}

impl std::fmt::Debug for OutboxService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutboxService").field("options", &self.options).field("registry", &self.registry).finish()
    }
}

impl<B> tower_service::Service<Request<B>> for OutboxService
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Display,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let service = self.clone();
        Box::pin(async move { Ok(service.handle(request).await) })
    }
}
