//! The configured sinks of a process: the `sinks` role runs them, and every process (and the
//! CLI) can show their state and operate their dead letters (SPEC §5.7, §7, §8.1).
//!
//! [`Sinks::new`] builds every `[[sinks]]` table (nothing connects yet) and, when asked to
//! run them, starts one [`Dispatcher`] for all of them. Status and dead letters come from
//! the database, so a process that does not run a sink shows it too; a replay delivers
//! through this process's own instance of the sink, whether or not its loop runs here.
//! [`Sinks`] is the [`SinkAdmin`] that `outbox_http::SinkRoutes` serves `GET /sinks` over.

use std::sync::Arc;

use outbox_core::ErrorCode;
use outbox_http::{ApiError, BoxFuture, DeadLetterPage, SinkAdmin};
use outbox_pg::internal::dead_letter::{self, DeadLetter};
use outbox_pg::sqlx::PgPool;
use outbox_workers::config::{SinkConfig, build_spec};
use outbox_workers::{Dispatcher, DispatcherConfig, Error, Result, SinkSpec, SinkStatus, sink_status};

/// The most dead letters one page lists (the routes' limit too).
pub const MAX_PAGE: u32 = outbox_http::MAX_DEAD_LETTER_PAGE;

/// The configured sinks, and their dispatcher when this process runs them.
pub struct Sinks {
    pool: PgPool,
    specs: Vec<SinkSpec>,
    dispatcher: Option<Dispatcher>,
}

impl Sinks {
    /// Builds every sink of `configs`; starts a dispatcher for them when `run` is set and
    /// there is at least one.
    pub fn new(pool: PgPool, configs: &[SinkConfig], run: bool) -> Result<Sinks> {
        let specs = configs.iter().map(build_spec).collect::<Result<Vec<_>>>()?;
        let dispatcher = match run && !specs.is_empty() {
            true => Some(Dispatcher::start(pool.clone(), DispatcherConfig::default(), specs.clone())?),
            false => None,
        };
        Ok(Sinks { pool, specs, dispatcher })
    }

    /// Whether this process runs the sinks' loops.
    pub fn running(&self) -> bool {
        self.dispatcher.is_some()
    }

    /// Why the `sinks` role is not running as it should, if it is not: the loops that ended.
    pub fn not_running(&self) -> Option<String> {
        let ended = self.dispatcher.as_ref()?.ended_loops();
        (!ended.is_empty()).then(|| format!("the loops of sinks {} ended", ended.join(", ")))
    }

    /// The ids of the configured sinks, in configuration order.
    pub fn ids(&self) -> Vec<&str> {
        self.specs.iter().map(|spec| spec.sink.id()).collect()
    }

    /// What this process's loop of sink `id` knows, when it runs here.
    pub fn local_state(&self, id: &str) -> Option<outbox_workers::LocalState> {
        self.dispatcher.as_ref().and_then(|dispatcher| dispatcher.local_state(id))
    }

    /// The status of every configured sink, in configuration order.
    pub async fn statuses(&self) -> Result<Vec<SinkStatus>> {
        let mut all = Vec::with_capacity(self.specs.len());
        for spec in &self.specs {
            all.push(self.status_of(spec).await?);
        }
        Ok(all)
    }

    /// The status of sink `id`.
    pub async fn status(&self, id: &str) -> Result<SinkStatus> {
        self.status_of(self.find(id)?).await
    }

    async fn status_of(&self, spec: &SinkSpec) -> Result<SinkStatus> {
        let id = spec.sink.id();
        let local = self.dispatcher.as_ref().and_then(|dispatcher| dispatcher.local_state(id));
        sink_status(&self.pool, id, &spec.filter, spec.lanes, local.as_ref()).await
    }

    /// One `page` of sink `id`'s dead letters (oldest first), and whether more follow.
    pub async fn dead_letters(&self, id: &str, page: DeadLetterPage) -> Result<(Vec<DeadLetter>, bool)> {
        self.find(id)?;
        Ok(dead_letter::page(&self.pool, id, page).await?)
    }

    /// Delivers dead letter `letter` of sink `id` again and marks it replayed.
    pub async fn replay(&self, id: &str, letter: i64) -> Result<()> {
        outbox_workers::replay(&self.pool, self.find(id)?.sink.as_ref(), letter).await
    }

    /// Deletes dead letter `letter` of sink `id`.
    pub async fn discard(&self, id: &str, letter: i64) -> Result<()> {
        self.find(id)?;
        outbox_workers::discard(&self.pool, id, letter).await
    }

    /// Stops the loops gracefully, if they run here: the batch in flight finishes or is
    /// abandoned without moving its cursor, and the leases are released.
    pub async fn shutdown(&self) {
        if let Some(dispatcher) = &self.dispatcher {
            dispatcher.shutdown().await;
        }
    }

    fn find(&self, id: &str) -> Result<&SinkSpec> {
        self.specs.iter().find(|spec| spec.sink.id() == id).ok_or_else(|| Error::UnknownSink(id.to_owned()))
    }
}

impl SinkAdmin for Sinks {
    type Status = SinkStatus;

    fn statuses(&self) -> BoxFuture<'_, std::result::Result<Vec<SinkStatus>, ApiError>> {
        Box::pin(async move { Sinks::statuses(self).await.map_err(refusal) })
    }

    fn status<'a>(&'a self, id: &'a str) -> BoxFuture<'a, std::result::Result<SinkStatus, ApiError>> {
        Box::pin(async move { Sinks::status(self, id).await.map_err(refusal) })
    }

    fn dead_letters<'a>(
        &'a self,
        id: &'a str,
        page: DeadLetterPage,
    ) -> BoxFuture<'a, std::result::Result<(Vec<DeadLetter>, bool), ApiError>> {
        Box::pin(async move { Sinks::dead_letters(self, id, page).await.map_err(refusal) })
    }

    fn replay<'a>(&'a self, id: &'a str, letter: i64) -> BoxFuture<'a, std::result::Result<(), ApiError>> {
        Box::pin(async move { Sinks::replay(self, id, letter).await.map_err(refusal) })
    }

    fn discard<'a>(&'a self, id: &'a str, letter: i64) -> BoxFuture<'a, std::result::Result<(), ApiError>> {
        Box::pin(async move { Sinks::discard(self, id, letter).await.map_err(refusal) })
    }
}

/// The refusal for a workers error: its code and message, and no database internals.
pub(crate) fn refusal(error: Error) -> ApiError {
    match error {
        Error::Database(inner) => {
            tracing::warn!(error = %inner, "a sink route failed on the database");
            ApiError::new(ErrorCode::Unavailable, "the database did not answer; try again")
        }
        other => ApiError::new(other.code(), other.to_string()),
    }
}

/// A shared handle, as the routes and the server keep it.
pub type SharedSinks = Arc<Sinks>;
