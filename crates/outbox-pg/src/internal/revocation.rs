//! Recorded revocations: the SQL of `outbox_revocations` (SPEC §5.5).
//!
//! A revocation is a row of `outbox_revocations(id, kind, value, reason, revoked_at)`: a
//! selector (`kind`, `value`) whose open streams every process closes, and, for sessions and
//! identities, whose tokens it refuses afterwards. The table belongs to migration owner
//! `server` (`server/0001_revocations`), which the host registers; what a selector means is
//! the HTTP layer's business, so this module speaks of plain `kind` and `value` text.
//!
//! # Mechanism
//!
//! - [`record`] inserts one row, autocommitted when given a pool.
//! - [`recent`] returns every row above an id *and* every row of the last minute, oldest
//!   first. `id` is drawn at insert, not at commit, so a row with a lower id can commit after
//!   a higher one was seen; the minute of lookback catches it, and the caller skips the ids it
//!   has already acted on.
//!
//! # Surprises
//!
//! - The table's `CHECK` refuses a `kind` outside `session`, `identity`, `agent`,
//!   `delegation` and `tenant_any_agent`: [`record`] then fails with a database error.
//! - A revocation transaction open for more than a minute can be missed by [`recent`]: record
//!   revocations in short transactions (or autocommitted).

use sqlx::PgExecutor;
use time::OffsetDateTime;

use crate::Result;

/// A recorded revocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revocation {
    /// Its id, drawn at insert.
    pub id: i64,
    /// The selector's kind (`session`, `identity`, `agent`, `delegation`, `tenant_any_agent`).
    pub kind: String,
    /// The selector's value: the session, identity, agent, delegation or tenant id.
    pub value: String,
    /// Why it was revoked, as the closed streams are told.
    pub reason: String,
    /// When it was recorded, by the database clock.
    pub revoked_at: OffsetDateTime,
}

/// Records a revocation of `(kind, value)` for every process to act on; returns its id.
///
/// One `INSERT`; `revoked_at` is `compute_now()`. It takes the row lock of the new row only
/// and reads nothing, so it waits for no other transaction.
pub async fn record<'e>(executor: impl PgExecutor<'e>, kind: &str, value: &str, reason: &str) -> Result<i64> {
    let id =
        sqlx::query_scalar("INSERT INTO outbox_revocations (kind, value, reason) VALUES ($1, $2, $3) RETURNING id")
            .bind(kind)
            .bind(value)
            .bind(reason)
            .fetch_one(executor)
            .await?;
    Ok(id)
}

/// The revocations with an id above `above_id`, and every one of the last minute (by
/// `compute_now()`), in id order: what a poller that has seen every id up to `above_id`
/// may not have acted on yet (see the module documentation).
///
/// One `SELECT` in the statement's own read-committed snapshot; it locks nothing.
pub async fn recent<'e>(executor: impl PgExecutor<'e>, above_id: i64) -> Result<Vec<Revocation>> {
    let rows: Vec<(i64, String, String, String, OffsetDateTime)> = sqlx::query_as(
        "SELECT id, kind, value, reason, revoked_at FROM outbox_revocations
         WHERE id > $1 OR revoked_at > compute_now() - interval '1 minute' ORDER BY id",
    )
    .bind(above_id)
    .fetch_all(executor)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(id, kind, value, reason, revoked_at)| Revocation { id, kind, value, reason, revoked_at })
        .collect())
}
