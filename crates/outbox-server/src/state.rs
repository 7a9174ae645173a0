//! [`AppState`]: what a server process's routes read, built by
//! [`Server::start`](crate::server::Server::start) and shared by the router
//! ([`app`](crate::app)) and `GET /metrics` ([`metrics`](crate::metrics)).

use std::sync::Arc;

use outbox_http::{Authorizer, OutboxService};
use outbox_pg::Migrator;
use outbox_pg::sqlx::PgPool;

use crate::ops::Ops;
use crate::revocation::Revocations;
use crate::sinks::SharedSinks;

/// Everything the routes need.
pub struct AppState {
    /// The database.
    pub pool: PgPool,
    /// The outbox routes and the registry of open streams.
    pub service: OutboxService,
    /// Who callers are (also used by the admin and sink routes).
    pub authorizer: Arc<dyn Authorizer>,
    /// The revoked sessions and identities, updated at once by the admin route.
    pub revocations: Revocations,
    /// The migrations `/readyz` compares the database with.
    pub migrator: Migrator,
    /// The configured sinks (run here when the process has the `sinks` role).
    pub sinks: SharedSinks,
    /// Whether this process serves the outbox, admin and sink routes (role `http`).
    pub serve_api: bool,
    /// Retention, the metrics' settings and the hooks `/readyz` asks.
    pub ops: Ops,
}
