//! The Outbox client: history pages, a history pager, a reconnecting watch stream, and
//! backfill-then-follow, over the HTTP routes of SPEC §5.3–5.4 (`outbox-http`).
//!
//! - [`Client::list`] reads one page of `GET /events`; [`Client::pager`] walks every page.
//! - [`Client::watch`] opens `GET /watch` (Server-Sent Events, parsed here), reconnects with
//!   `Last-Event-ID` after the server's `retry:` delay, backs off after failures, and ends
//!   with [`Error::Unauthenticated`] or [`Error::AccessDenied`] instead of retrying a
//!   refusal ([`watch`] has the rules).
//! - [`Client::follow`] pages the history from a position, then continues live with no gap
//!   and no duplicate.
//! - [`Client::publish`] and [`Client::publish_many`] write with `POST /events`.
//! - [`webhooks`]: a tenant's webhook subscriptions (`create_webhook`, `list_webhooks`,
//!   `webhook`, `update_webhook`, `delete_webhook`, `ping_webhook`, `rotate_webhook_secret`,
//!   `webhook_attempts`).
//!
//! Every stream is an [`Events`]: a `futures` `Stream` of `Result<Event>` that stops when
//! dropped and ends after the first error it yields.
//!
//! **Architecture invariant:** this crate depends on `outbox-core` and an HTTP client only:
//! a team that consumes events over HTTP never links the database or server crates
//! (`cargo xtask ci` fails when `outbox-pg`, `sqlx`, `outbox-http`, `outbox-workers` or
//! `outbox-server` enter its dependency graph). It speaks the wire format and owns no
//! state beyond one stream's position: saving a checkpoint is the caller's job.
//!
//! ```no_run
//! use outbox_client::{Client, WatchQuery};
//!
//! # async fn run() -> outbox_client::Result<()> {
//! let client = Client::new("http://127.0.0.1:8080")?.with_token("…")?;
//! let query = WatchQuery { types: vec!["reservation.*".into()], ..WatchQuery::default() };
//! let mut events = client.watch(query).await?; // live from here: nothing after this is missed
//! while let Some(event) = events.next().await {
//!     let event = event?; // Unauthenticated / AccessDenied end the stream
//!     println!("{} {} {}", event.sequence, event.event_type, event.subject);
//! }
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod client;
mod error;
mod follow;
mod list;
mod sse;
pub mod watch;
pub mod webhooks;

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::{Stream, StreamExt};
pub use outbox_core as core;
use outbox_core::Event;
/// The HTTP client this crate is built on, for [`Client::with_http_client`] (start from
/// [`http_client_builder`]) and headers.
pub use reqwest;

pub use client::{Client, http_client_builder};
pub use error::{Error, Result};
pub use follow::FollowQuery;
pub use list::{ListQuery, Page};
pub use watch::WatchQuery;

/// Not part of the API: the `text/event-stream` parser that the crate's own fuzz test
/// (`tests/it/fuzz_sse.rs`) feeds directly. Anything here may change or disappear in any
/// release.
#[doc(hidden)]
pub mod __fuzz {
    pub use crate::sse::{Frame, LineTooLong, Parser};
}

/// A stream of events: [`Client::pager`], [`Client::watch`] and [`Client::follow`].
///
/// It yields events in `(txid, seq)` order; after it yields an error it ends. Dropping it
/// closes its connection and cancels any pending delay.
pub struct Events {
    inner: Pin<Box<dyn Stream<Item = Result<Event>> + Send>>,
}

impl Events {
    pub(crate) fn new(stream: impl Stream<Item = Result<Event>> + Send + 'static) -> Events {
        Events { inner: Box::pin(stream) }
    }

    /// The next event, the error that ended the stream, or `None` once it has ended (the
    /// same as `StreamExt::next`, without importing it).
    pub async fn next(&mut self) -> Option<Result<Event>> {
        StreamExt::next(self).await
    }
}

impl Stream for Events {
    type Item = Result<Event>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Event>>> {
        self.inner.as_mut().poll_next(cx)
    }
}

impl fmt::Debug for Events {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Events").finish_non_exhaustive()
    }
}

impl Client {
    /// Every event after `query.cursor`, page by page (`query.limit` per request), until a
    /// page says no more rows follow. An error ends the stream; resume from the last event.
    pub fn pager(&self, query: ListQuery) -> Events {
        list::pager(self.clone(), query)
    }

    /// The live stream of `query`, reconnecting until it is dropped or refused ([`watch`]).
    ///
    /// It answers once the server has opened the stream and told its start position, so a
    /// watch without [`WatchQuery::last_event_id`] starts at the head of that moment: every
    /// event committed after `watch` returns is delivered. Before the first connection,
    /// failures are retried as later ones are (so this waits for a server that is down);
    /// a refusal (`401`, `403`, `400`) is the error.
    pub async fn watch(&self, query: WatchQuery) -> Result<Events> {
        Ok(watch::Watcher::start(self.clone(), query).await?.into_events())
    }

    /// The history after `query.after`, then the live stream from where it ended, with no
    /// gap and no duplicate at the switch. Transient failures are retried in both phases.
    pub fn follow(&self, query: FollowQuery) -> Events {
        follow::follow(self.clone(), query)
    }
}
