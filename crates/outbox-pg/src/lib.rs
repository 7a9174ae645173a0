//! Outbox on PostgreSQL.
//!
//! # What an application uses
//!
//! | item | what |
//! |---|---|
//! | [`publish()`], [`publish_many()`] | write events into the caller's own transaction (SPEC §3.1) |
//! | [`Publisher`] | the same with other limits, or refusing types outside a catalog |
//! | [`ordered()`], [`lock_subjects`] | a transaction whose events of its subjects are read in commit order (SPEC §3.7) |
//! | [`Migrator`], [`Migration`] | the schema: owner `core`'s migrations, and the application's own beside them ([`migrate`]) |
//! | [`pool::options`] | the pool settings every Outbox process uses |
//! | [`read_page`], [`ReadRequest`], [`ReadPage`] | the xmin read: one page of committed events after a position (SPEC §4) |
//! | [`Tail`], [`TailOptions`] | the shared tail, one reader per process for every live consumer ([`tail`], SPEC §5.6) |
//! | [`Error`], [`Result`] | what fails, with the API error code it maps to |
//! | [`sqlx`] | the sqlx this crate is built on (0.9): take it from here, and the versions match |
//!
//! Beside them: [`embedded`], a throwaway or persistent PostgreSQL from the machine's own
//! binaries (what `outbox dev` runs), and `testkit` (feature `testkit`), a fresh, migrated
//! database per test. [`internal`] holds what the sibling crates (`outbox-http`,
//! `outbox-workers`, `outbox-server`) build on: leases, cursors, dead letters, retention,
//! revocation, the shared head, the database clock.
//!
//! **Architecture invariant:** this crate knows the database and nothing of
//! HTTP: it never depends on hyper, http or any server crate, and never on
//! `outbox-http` or `outbox-workers`. Everything it returns is an
//! [`outbox_core`] type or one of its own.
//!
//! ```no_run
//! # async fn demo(pool: sqlx::PgPool) -> outbox_pg::Result<()> {
//! use outbox_core::NewEvent;
//! use serde_json::json;
//!
//! let mut tx = pool.begin().await?;
//! // … the application's own change, in `tx` …
//! outbox_pg::publish(&mut *tx, &NewEvent::new("node.joined", "acme", "node/n1", json!({}))).await?;
//! tx.commit().await?;
//! # Ok(()) }
//! ```

pub mod embedded;
mod error;
pub mod internal;
pub mod migrate;
mod ordered;
pub mod pool;
mod publish;
mod read;
pub mod tail;
#[cfg(feature = "testkit")]
pub mod testkit;
mod xid8;

pub use error::{Error, Result};
pub use migrate::{Migration, Migrator};
pub use ordered::{Lane, MAX_LANES, lock_subjects, ordered, subject_key, subject_lane};
pub use publish::{Publisher, publish, publish_many};
pub use read::{MAX_LIMIT, ReadPage, ReadRequest, read_page};
pub use tail::{Tail, TailOptions};

pub use outbox_core as core;
pub use sqlx;
