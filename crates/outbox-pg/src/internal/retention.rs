//! The SQL of retention (SPEC §9): which cursors hold the outbox, and one small delete.
//!
//! The job that runs it (a lease, the schedule, the rounds) is `outbox_workers::retention`;
//! this module only knows the table.
//!
//! # Mechanism
//!
//! - [`holding_cursors`] reads the durable cursors of the outbox ([`OUTBOX_STREAM`]) that
//!   hold retention back; a cursor of a sink that is not enabled does not (see [`Holders`]).
//! - [`prune_batch`] deletes, in one short statement, at most `batch` rows that lie after
//!   the previous batch's last row and at or before a bound (the lowest holding cursor),
//!   walking the `(txid, seq)` index in order and stopping at the first row younger than
//!   `min_age` by `compute_now()`. It deletes by `ctid` inside that statement, so it scans
//!   each row once.
//!
//! # Locks
//!
//! A `DELETE` takes `ROW EXCLUSIVE` on the table, which conflicts with neither `INSERT`
//! (publishers) nor `SELECT` (readers), and row locks only on the rows it deletes, which
//! nobody else locks or updates: every cursor has passed them. Readers never wait on it.
//! Each statement is its own short transaction, so its transaction id holds the xmin
//! horizon (SPEC §4) back only for the few milliseconds it runs.
//!
//! # Surprises
//!
//! - `created_at` follows `(txid, seq)` closely but not exactly (it is the writing
//!   transaction's start). A young row stops the walk; older rows behind it wait for a
//!   later pass, which is what "older than `min_age`" asks for anyway.
//! - A reader that resumes from a pruned position reads on from the oldest row still
//!   stored: every read takes rows *after* its position, so nothing is an error.

use std::time::Duration;

use outbox_core::Position;
use sqlx::PgExecutor;

use crate::Result;
use crate::internal::cursor::OUTBOX_STREAM;
use crate::xid8::Xid8;
use crate::xid8::{position, seq_column};

/// The name of the lease the retention job holds.
pub const LEASE: &str = "singleton:core.retention";

/// Which durable cursors of the outbox hold retention back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Holders {
    /// Every cursor of the outbox.
    #[default]
    Every,
    /// Every cursor except those of sinks not in this list: a cursor `sink:<id>` holds only
    /// when `<id>` is listed (an enabled sink); any other cursor (a library user's own
    /// consumer) always holds.
    EnabledSinks(Vec<String>),
}

impl Holders {
    /// Whether the cursor `name` holds retention back.
    pub fn holds(&self, name: &str) -> bool {
        match (self, crate::internal::cursor::consumer_of(name).strip_prefix("sink:")) {
            (Holders::EnabledSinks(enabled), Some(id)) => enabled.iter().any(|e| e == id),
            _ => true,
        }
    }
}

/// A durable cursor of the outbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldingCursor {
    /// Its name, e.g. `sink:billing`.
    pub name: String,
    /// The last row it is done with.
    pub position: Position,
}

/// The cursors of the outbox that `holders` counts, lowest position first: the sinks' and
/// the other consumers' of stream `outbox`, and every enabled webhook subscription's
/// (named `webhook:<id>`); a disabled subscription holds nothing back. A consumer with
/// ordered lanes holds with every lane's cursor (`sink:<id>#<lane>/<lanes>`, SPEC §7.7).
pub async fn holding_cursors<'e>(executor: impl PgExecutor<'e>, holders: &Holders) -> Result<Vec<HoldingCursor>> {
    let rows: Vec<(String, Xid8, i64)> = sqlx::query_as(
        "SELECT name, txid, seq FROM outbox_cursors WHERE stream = $1
             UNION ALL
             SELECT 'webhook:' || c.name, c.txid, c.seq FROM outbox_cursors c
             JOIN outbox_webhooks w ON w.id = split_part(c.name, '#', 1) AND w.enabled
             WHERE c.stream = $2
             ORDER BY txid, seq, name",
    )
    .bind(OUTBOX_STREAM)
    .bind(crate::internal::webhook::CURSOR_STREAM)
    .fetch_all(executor)
    .await?;
    Ok(rows
        .into_iter()
        .filter(|(name, _, _)| holders.holds(name))
        .map(|(name, txid, seq)| HoldingCursor { name, position: position(txid, seq) })
        .collect())
}

/// What one [`prune_batch`] statement did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pruned {
    /// Rows deleted.
    pub deleted: u64,
    /// The last row deleted; the next batch starts after it.
    pub last: Option<Position>,
}

/// The statement of [`prune_batch`] (public for `EXPLAIN`).
///
/// Binds: `$1`/`$2` after (exclusive), `$3`/`$4` the bound (inclusive), `$5` rows at most,
/// `$6` the minimum age in microseconds.
pub const PRUNE_STATEMENT: &str = "
WITH head AS (
    SELECT ctid AS row_id, txid, seq,
           created_at < compute_now() - make_interval(secs => $6::float8 / 1e6) AS old
    FROM outbox
    WHERE (txid, seq) > ($1, $2) AND (txid, seq) <= ($3, $4)
    ORDER BY txid, seq
    LIMIT $5
), doomed AS (
    SELECT row_id FROM (SELECT row_id, bool_and(old) OVER (ORDER BY txid, seq) AS all_old FROM head) h
    WHERE all_old
), gone AS (
    DELETE FROM outbox WHERE ctid = ANY(ARRAY(SELECT row_id FROM doomed)) RETURNING txid, seq
)
SELECT (SELECT count(*) FROM gone),
       (SELECT txid FROM gone ORDER BY txid DESC, seq DESC LIMIT 1),
       (SELECT seq FROM gone ORDER BY txid DESC, seq DESC LIMIT 1)";

/// Deletes at most `batch` rows after `after` (none: from the oldest) and at or before
/// `bound`, in `(txid, seq)` order, stopping at the first row younger than `min_age`.
pub async fn prune_batch<'e>(
    executor: impl PgExecutor<'e>,
    after: Option<Position>,
    bound: Position,
    batch: u64,
    min_age: Duration,
) -> Result<Pruned> {
    let after = after.unwrap_or(Position::START);
    let (deleted, txid, seq): (i64, Option<Xid8>, Option<i64>) = sqlx::query_as(PRUNE_STATEMENT)
        .bind(Xid8(after.txid))
        .bind(seq_column(after))
        .bind(Xid8(bound.txid))
        .bind(seq_column(bound))
        .bind(i64::try_from(batch).unwrap_or(i64::MAX))
        .bind(i64::try_from(min_age.as_micros()).unwrap_or(i64::MAX))
        .fetch_one(executor)
        .await?;
    let last = txid.zip(seq).map(|(txid, seq)| position(txid, seq));
    Ok(Pruned { deleted: u64::try_from(deleted).unwrap_or(0), last })
}

/// The cursor `('retention', 'pruned')`: the last row retention deleted, which only moves
/// forward. A cursor behind it (a disabled webhook subscription's) has missed rows for good.
pub const PRUNED_STREAM: &str = "retention";

/// Records that retention deleted every row up to `through` (a later position than the one
/// stored, or nothing changes).
pub async fn record_pruned<'e>(executor: impl PgExecutor<'e>, through: Position) -> Result<()> {
    sqlx::query(
        "INSERT INTO outbox_cursors AS c (stream, name, txid, seq, updated_at)
         VALUES ($1, 'pruned', $2, $3, compute_now())
         ON CONFLICT (stream, name) DO UPDATE SET txid = EXCLUDED.txid, seq = EXCLUDED.seq, updated_at = EXCLUDED.updated_at
         WHERE (EXCLUDED.txid, EXCLUDED.seq) > (c.txid, c.seq)",
    )
    .bind(PRUNED_STREAM)
    .bind(Xid8(through.txid))
    .bind(seq_column(through))
    .execute(executor)
    .await?;
    Ok(())
}

/// Rows older than `min_age` that lie after `cursor`: what that cursor keeps from being
/// pruned, counted up to `cap`.
pub async fn backlog<'e>(executor: impl PgExecutor<'e>, cursor: Position, min_age: Duration, cap: u64) -> Result<u64> {
    let count: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (
            SELECT 1 FROM outbox
            WHERE (txid, seq) > ($1, $2) AND created_at < compute_now() - make_interval(secs => $3::float8 / 1e6)
            LIMIT $4
        ) pinned",
    )
    .bind(Xid8(cursor.txid))
    .bind(seq_column(cursor))
    .bind(i64::try_from(min_age.as_micros()).unwrap_or(i64::MAX))
    .bind(i64::try_from(cap).unwrap_or(i64::MAX))
    .fetch_one(executor)
    .await?;
    Ok(u64::try_from(count).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::Holders;

    #[test]
    fn disabled_sinks_do_not_hold() {
        let enabled = Holders::EnabledSinks(vec!["billing".into()]);
        assert!(enabled.holds("sink:billing"));
        assert!(enabled.holds("sink:billing#3/16"));
        assert!(!enabled.holds("sink:old"));
        assert!(!enabled.holds("sink:old#1/4"));
        assert!(enabled.holds("my-consumer"));
        assert!(Holders::Every.holds("sink:old"));
    }
}
