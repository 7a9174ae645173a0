//! Running a server process: [`Server::start`] wires the configuration into an [`App`] on a
//! bound listener and starts the sinks' loops when the process has the `sinks` role;
//! [`Server::run`] serves until a shutdown signal. Each accepted connection is served in
//! HTTP/1 or HTTP/2 by the `connection` module, which tells them apart without reading a byte.
//!
//! # Shutdown
//!
//! On the signal the listener closes (no new connections), [`OutboxService::shutdown`]
//! ends every open stream (an endless SSE body would otherwise hold its connection open
//! forever), and hyper-util's graceful shutdown lets every connection finish the response
//! it is writing. Connections still open after [`GRACE`] are abandoned. Then the sinks'
//! loops stop: a batch in flight gets its grace to finish (and is recorded if it does),
//! else is abandoned without moving its cursor, and every lease is released.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use hyper_util::server::graceful::GracefulShutdown;
use outbox_core::webhook::PingOutcome;
use outbox_http::{ApiError, BoxFuture, OutboxService, WebhookDelivery, WebhookRoutes};
use outbox_pg::sqlx::PgPool;
use outbox_pg::tail::Tail;
use outbox_workers::{Subscribers, WebhookClient, WebhookDeliveries};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::app::{App, app};
use crate::auth::TokenAuthorizer;
use crate::config::{Config, Role};
use crate::ops::Ops;
use crate::revocation::{Poller, Revocations, migrator};
use crate::sinks::Sinks;
use crate::state::AppState;

mod connection;

/// How long open connections get to finish after the signal.
pub const GRACE: Duration = Duration::from_secs(10);

/// The webhook subscription routes over `config`'s `[webhooks]`; without a seal key they
/// answer `UNAVAILABLE`, and start-up says so.
fn webhook_routes(
    config: &Config,
    pool: &PgPool,
    authorizer: Arc<dyn outbox_http::Authorizer>,
) -> anyhow::Result<WebhookRoutes> {
    let seal_key = &config.webhooks.seal_key;
    if seal_key.is_none() && config.roles.has(Role::Http) {
        tracing::warn!(
            "webhook subscriptions are off: no [webhooks] seal_key (env OUTBOX_WEBHOOK_SEAL_KEY); their routes answer UNAVAILABLE"
        );
    }
    let delivery = match seal_key {
        Some(key) => {
            Some(WebhookClient::new(pool.clone(), key.clone(), &config.webhooks.deliveries(config.targets()))?)
        }
        None => None,
    };
    let routes =
        WebhookRoutes::new(pool.clone(), authorizer, config.catalog.clone(), config.webhooks.routes(config.targets()));
    Ok(match delivery {
        Some(client) => routes.with_delivery(Arc::new(ClientDelivery(client))),
        None => routes,
    })
}

/// Pings and replays of the webhook routes through the deliveries' guarded client.
struct ClientDelivery(WebhookClient);

impl WebhookDelivery for ClientDelivery {
    fn ping<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<PingOutcome, ApiError>> {
        Box::pin(async move {
            let outcome = self.0.ping(id).await.map_err(crate::sinks::refusal)?;
            outcome.ok_or_else(|| {
                ApiError::new(outbox_core::ErrorCode::NotFound, format!("no webhook subscription {id:?}"))
            })
        })
    }

    fn replay<'a>(&'a self, id: &'a str, letter: i64) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move { self.0.replay(id, letter).await.map_err(crate::sinks::refusal) })
    }
}

/// The webhook subscriptions' deliveries, in a process with the `sinks` role and a seal key.
/// Caught-up subscriptions wait on the process's shared `tail` instead of polling.
fn webhook_deliveries(config: &Config, pool: &PgPool, tail: &Tail) -> anyhow::Result<Option<WebhookDeliveries>> {
    let Some(seal_key) = &config.webhooks.seal_key else { return Ok(None) };
    if !config.roles.has(Role::Sinks) {
        return Ok(None);
    }
    let mut deliveries = config.webhooks.deliveries(config.targets());
    deliveries.dispatcher.tail = Some(tail.clone());
    Ok(Some(WebhookDeliveries::start(pool.clone(), seal_key.clone(), deliveries).context("the webhook deliveries")?))
}

/// A server process's HTTP side, bound and ready to serve.
pub struct Server {
    listener: TcpListener,
    app: App,
    poller: JoinHandle<()>,
    subscribers: Option<Subscribers>,
    deliveries: Option<WebhookDeliveries>,
}

impl Server {
    /// Builds the process's shared tail, the authorizer, the outbox service, the in-process
    /// subscribers (role `subscribers`), the revocation poller and the sinks from `config`
    /// (starting the sinks' loops when the process has the `sinks` role), and binds
    /// `config.listen`. The database must be migrated already.
    pub async fn start(config: &Config, pool: PgPool) -> anyhow::Result<Server> {
        let tail = Tail::new(pool.clone(), config.tail());
        let subscribers = config.roles.has(Role::Subscribers).then(|| Subscribers::new(pool.clone(), tail.clone()));
        let revocations = Revocations::new();
        let authorizer = Arc::new(TokenAuthorizer::new(&config.auth, revocations.clone())?);
        let service = OutboxService::new(pool.clone(), authorizer.clone())
            .with_options(config.watch)
            .with_catalog(config.catalog.clone())
            .with_tail(tail.clone());
        let webhooks = webhook_routes(config, &pool, authorizer.clone())?;
        let deliveries = webhook_deliveries(config, &pool, &tail)?;
        let poller = Poller::start(pool.clone(), revocations.clone(), service.registry().clone())
            .await
            .context("reading outbox_revocations")?;
        let listener =
            TcpListener::bind(config.listen).await.with_context(|| format!("listening on {}", config.listen))?;
        let sinks = Sinks::new(pool.clone(), &config.sinks, config.roles.has(Role::Sinks)).context("the sinks")?;
        if sinks.running() {
            tracing::info!(sinks = ?sinks.ids(), "role sinks: running the sinks");
        }
        let mut ops = Ops::start(config, &pool)?;
        ops.tail = Some(Arc::new(tail));
        let state = AppState {
            pool,
            service,
            authorizer,
            revocations,
            migrator: migrator(),
            sinks: Arc::new(sinks),
            serve_api: config.roles.has(Role::Http),
            ops,
        };
        let poller = tokio::spawn(poller.run());
        Ok(Server { listener, app: app(state, webhooks), poller, subscribers, deliveries })
    }

    /// Where in-process subscriptions come from (SPEC §6), fed by the same shared tail as the
    /// live streams; `None` without the `subscribers` role.
    pub fn subscribers(&self) -> Option<&Subscribers> {
        self.subscribers.as_ref()
    }

    /// The address the listener is bound to (the port, when `listen` asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().expect("a bound listener has an address")
    }

    /// The router (tests use its state).
    pub fn app(&self) -> &App {
        &self.app
    }

    /// Serves until `shutdown` resolves, then shuts down gracefully: the HTTP side first,
    /// then the sinks' and webhook subscriptions' loops (the batch in flight finishes or is
    /// abandoned without moving its cursor, and the leases are released).
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let Server { listener, app, poller, subscribers: _, deliveries } = self;
        serve(listener, app.clone(), shutdown).await;
        app.state().sinks.shutdown().await;
        if let Some(deliveries) = deliveries {
            deliveries.shutdown().await;
        }
        app.state().ops.shutdown().await;
        poller.abort();
    }
}

/// Accepts connections on `listener` for `app` until `shutdown`, then closes the listener,
/// ends the open streams and waits (at most [`GRACE`]) for the connections to finish.
pub async fn serve(listener: TcpListener, app: App, shutdown: impl Future<Output = ()>) {
    let graceful = GracefulShutdown::new();
    let builders = Arc::new(connection::Builders::new());
    let (stopping, stopping_seen) = tokio::sync::watch::channel(());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    let watcher = graceful.watcher();
                    let stopping = stopping_seen.clone();
                    tokio::spawn(connection::serve(stream, app.clone(), builders.clone(), watcher, stopping));
                }
                Err(error) => {
                    // Out of file descriptors and the like: wait instead of spinning.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    stopping.send_replace(());
    app.state().service.shutdown();
    if tokio::time::timeout(GRACE, graceful.shutdown()).await.is_err() {
        tracing::warn!("connections still open {GRACE:?} after the shutdown signal were abandoned");
    }
}
