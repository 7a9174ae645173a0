//! Outbox over HTTP: handlers any hyper-based host can mount.
//!
//! [`OutboxService`] serves history (`GET /events`), publishing
//! (`POST /events`), the live Server-Sent-Events stream (`GET /watch`), the
//! catalog (`GET /event-types`), SPEC §5, and the caller's own grant (`GET /whoami`). It takes a plain [`http::Request`]
//! and answers a plain [`http::Response`] ([`OutboxService::handle`]), and is
//! also a `tower_service::Service`, so any hyper-based host mounts it next to
//! its own routes. The host decides who the caller is through its
//! [`Authorizer`], which turns request headers into a [`Grant`]; open streams
//! are kept in a [`WatchRegistry`] so that a revocation closes them at once.
//!
//! [`Console`] serves the console (`GET /`, SPEC §8.3): one page, its script and style and
//! the standalone `watchEvents` module, embedded and served with a strict policy; it reads
//! the routes above with the user's token.
//!
//! [`SinkRoutes`] serves the sink and dead-letter routes (`GET /sinks`, SPEC §5.7) over the
//! host's [`SinkAdmin`], and [`WebhookRoutes`] the webhook subscriptions (`/webhooks`, SPEC
//! §7.6), mounted the same way; both answer dead letters as [`DeadLetterView`]s. A host's own routes reuse the edge:
//! [`read_limited`] for a bounded body, [`authorize_admin`] for an administrator's route,
//! [`method_not_allowed`], [`error_response`], [`json_response`] and [`ApiError`].
//!
//! **Architecture invariant:** this crate reads and writes the outbox only
//! through `outbox-pg` (and names sqlx only as `outbox_pg::sqlx`). It knows
//! nothing of `outbox-workers` (sinks, retention, subscribers: the sink routes
//! reach the sinks only through the host's `SinkAdmin`), of the bundled server's
//! configuration, or of how tokens are issued and checked: that is the host's
//! `Authorizer`. It runs no server of its own.
//!
//! ```no_run
//! use std::sync::Arc;
//! use outbox_http::{AuthError, Authorizer, BoxFuture, Grant, OutboxService};
//!
//! struct OneToken;
//!
//! impl Authorizer for OneToken {
//!     fn authorize<'a>(&'a self, headers: &'a http::HeaderMap) -> BoxFuture<'a, Result<Grant, AuthError>> {
//!         Box::pin(async move {
//!             match headers.get(http::header::AUTHORIZATION) {
//!                 Some(value) if value == "Bearer s3cret" => Ok(Grant::new("acme", ["events:read"])),
//!                 _ => Err(AuthError::Unauthenticated("a valid bearer token is required".into())),
//!             }
//!         })
//!     }
//!     fn reauthorize<'a>(&'a self, _grant: &'a Grant) -> BoxFuture<'a, Result<bool, AuthError>> {
//!         Box::pin(async { Ok(true) })
//!     }
//! }
//!
//! # async fn demo(pool: outbox_pg::sqlx::PgPool, request: http::Request<outbox_http::Body>) {
//! let service = OutboxService::new(pool, Arc::new(OneToken));
//! let response = service.handle(request).await; // GET /events, GET /watch, …
//! # drop(response);
//! # }
//! ```

#![warn(missing_docs)]

mod auth;
mod body;
pub mod console;
mod dead_letters;
mod error;
mod event_types;
mod list;
pub mod proto;
mod publish;
mod query;
mod registry;
mod route;
pub mod scope;
mod service;
mod sinks;
mod stats;
mod watch;
mod webhooks;
mod whoami;

pub use auth::{AuthError, Authorizer, Grant, authorize_admin};
pub use body::read_limited;
pub use console::Console;
pub use dead_letters::DeadLetterView;
pub use error::{ApiError, error_response, json_response, method_not_allowed};
pub use registry::{Selector, WatchRegistry};
pub use service::{DEFAULT_BODY_LIMIT, OutboxService};
pub use sinks::{DeadLetterPage, MAX_DEAD_LETTER_PAGE, SinkAdmin, SinkRoutes};
pub use stats::HttpStats;
pub use watch::WatchOptions;
pub use webhooks::{WebhookConfig, WebhookDelivery, WebhookRoutes};

pub use outbox_core as core;

/// Not part of the API: the route parsers that the crate's own fuzz tests
/// (`tests/it/fuzz_query.rs`, `tests/it/fuzz_json_body.rs`) call without a server. Anything
/// here may change or disappear in any release.
#[doc(hidden)]
pub mod __fuzz {
    pub use crate::list::read_request;
    pub use crate::publish::parse_events;
    pub use crate::watch::stream_request;
}

/// The body of every response: a boxed body of bytes that cannot fail.
pub type Body = http_body_util::combinators::BoxBody<bytes::Bytes, std::convert::Infallible>;

/// A boxed, sendable future, as [`Authorizer`] methods return.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;
