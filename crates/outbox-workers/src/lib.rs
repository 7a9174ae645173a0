//! Outbox workers: the [`Sink`] trait and its [`Dispatcher`] (lease singleton,
//! durable cursor, backoff, bisection, dead letters) (SPEC §7).
//!
//! - [`Sink`], [`SinkError`]: where events go, and whether a failure is worth retrying.
//! - [`Dispatcher`]: one loop per [`SinkSpec`], each under the lease
//!   `singleton:outbox-dispatch:<sink id>`, delivering after its durable cursor.
//! - [`replay()`], [`discard()`], [`sink_status()`]: what the API and CLI operate.
//!
//! **Architecture invariant:** this crate reads the outbox and records progress
//! only through `outbox-pg` (never naming `sqlx` itself) and knows nothing of HTTP
//! serving: it never depends on `outbox-http`, `outbox-server` or a server crate.
//! It talks to the outside world only through sinks.

pub mod backoff;
pub mod clock;
mod dispatcher;
mod error;
mod replay;
mod sink;
mod state;

pub use backoff::{Backoff, BackoffPolicy};
pub use clock::{Clock, SystemClock};
pub use dispatcher::{Dispatcher, DispatcherConfig, SinkFilter, SinkSpec, default_holder};
pub use error::{Error, Result};
pub use replay::{discard, replay};
pub use sink::{Sink, SinkError, check_id};
pub use state::{Activity, LAG_CAP, LocalState, SinkState, SinkStatus, sink_status};

pub use outbox_core as core;
