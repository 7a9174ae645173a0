//! Outbox workers: the [`Sink`] trait and its [`Dispatcher`] (lease singleton,
//! durable cursor, backoff, bisection, dead letters) and the built-in sinks
//! (SPEC §7).
//!
//! - [`Sink`], [`SinkError`]: where events go, and whether a failure is worth retrying.
//! - [`Dispatcher`]: one loop per [`SinkSpec`], each under the lease
//!   `singleton:outbox-dispatch:<sink id>`, delivering after its durable cursor.
//! - [`sinks`]: `webhook`, `nats`, `redis`, `jsonl`; [`config`] builds them from `[[sinks]]`.
//! - [`encoding`]: `json`, `cloudevents`, `protobuf`.
//! - [`replay()`], [`discard()`], [`sink_status()`]: what the API and CLI operate.
//! - [`retention`]: the pass that prunes what every durable cursor has passed (SPEC §9).
//! - [`doctor`]: [`doctor::self_check`], findings an operator can act on (SPEC §9).
//! - [`WebhookDeliveries`] (feature `webhook`): tenants' webhook subscriptions delivered by
//!   the dispatcher's loop, one per subscription (SPEC §7.6, [`webhooks`]).
//! - [`Subscribers`]: in-process subscribers fed by the process's shared tail (SPEC §6,
//!   [`subscribe`](mod@subscribe)).
//!
//! **Architecture invariant:** this crate reads the outbox and records progress
//! only through `outbox-pg` (never naming `sqlx` itself) and knows nothing of HTTP
//! serving: it never depends on `outbox-http`, `outbox-server` or a server crate.
//! It talks to the outside world only through sinks.
//!
//! ```no_run
//! # async fn demo(pool: outbox_pg::sqlx::PgPool) -> outbox_workers::Result<()> {
//! use outbox_workers::config::{SinkConfig, SinkKind, build_spec};
//! use outbox_workers::{Dispatcher, DispatcherConfig};
//!
//! let mut feed = SinkConfig::new("feed", SinkKind::Redis);
//! feed.url = Some("redis://127.0.0.1:6379".into());
//! let dispatcher = Dispatcher::start(pool, DispatcherConfig::default(), vec![build_spec(&feed)?])?;
//! // … until the process is asked to stop:
//! dispatcher.shutdown().await;
//! # Ok(()) }
//! ```

pub mod backoff;
pub mod clock;
pub mod config;
mod dispatcher;
pub mod doctor;
pub mod encoding;
mod error;
mod replay;
pub mod retention;
mod sink;
pub mod sinks;
mod state;
pub mod subscribe;
pub mod template;
#[cfg(feature = "webhook")]
pub mod webhooks;

pub use backoff::{Backoff, BackoffPolicy};
pub use clock::{Clock, SystemClock};
pub use dispatcher::{ConsumerNames, Dispatcher, DispatcherConfig, SinkFilter, SinkSpec, default_holder};
pub use error::{Error, Result};
pub use replay::{discard, replay};
pub use sink::{Sink, SinkError, check_id};
pub use state::{Activity, LAG_CAP, LaneStatus, LocalState, SinkState, SinkStatus, lane_lags, sink_status};
pub use subscribe::{Subscribers, Subscription};
#[cfg(feature = "webhook")]
pub use webhooks::{WebhookClient, WebhookDeliveries, WebhookDeliveryConfig};

pub use outbox_core as core;
