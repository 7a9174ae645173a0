//! Outbox on PostgreSQL.
//!
//! - [`migrate`]: the migration runner and the embedded SQL of owner `core` (SPEC §2).
//! - [`publish()`] and [`publish_many()`]: write events into the caller's transaction (SPEC §3.1).
//! - [`read`]: the xmin read, the one way every reader takes rows from the outbox (SPEC §4).
//! - [`head`]: the head read once for every caller asking at the same time.
//! - [`retention`]: which cursors hold the outbox, and the small deletes of retention (SPEC §9).
//! - [`revocation`]: the rows of `outbox_revocations` that close streams in every process.
//! - [`inspect`]: long transactions, the xmin horizon's age and expired leases, for the doctor.
//! - [`tail`]: the shared tail, one reader per process for every live consumer, and the
//!   [`Follower`](tail::Follower) that catches a consumer up and joins it to the tail (SPEC §5.6).
//! - [`pool`]: the pool options every outbox process uses (no ping per checkout).
//! - [`embedded`]: a throwaway or persistent PostgreSQL from the machine's own binaries.
//! - `testkit` (feature `testkit`): a fresh, migrated database per test.
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

pub mod clock;
pub mod cursor;
pub mod dead_letter;
pub mod embedded;
mod error;
pub mod head;
pub mod inspect;
pub mod lease;
pub mod migrate;
pub mod pool;
mod publish;
pub mod read;
pub mod retention;
pub mod revocation;
pub mod sink_health;
pub mod tail;
#[cfg(feature = "testkit")]
pub mod testkit;
mod xid8;

pub use error::{Error, Result};
pub use migrate::{Migration, Migrator};
pub use publish::{Publisher, publish, publish_many};
pub use read::{ReadPage, ReadRequest, read};
pub use xid8::Xid8;

pub use outbox_core as core;
pub use sqlx;
