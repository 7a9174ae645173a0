//! Ordered transactions: one subject's events in commit order (SPEC §3.7).
//!
//! Positions are `(txid, seq)`, and a transaction id is the order in which transactions
//! started writing, not the order in which they committed. A transaction that wrote
//! something first (holding an older id) and then publishes an event of subject X after a
//! younger transaction published one of X and committed is read *before* it: the two events
//! of X come out in the opposite order of their commits. The xmin rule keeps positions
//! stable; it does not reorder them.
//!
//! An ordered transaction begins by locking its subjects with `outbox_lock_subjects`
//! (migration `core/0014_sql_publishing`): a transaction-scoped advisory lock on each, keyed
//! by [`subject_key`], taken in ascending key order so that two writers never wait on each
//! other in a cycle. A second writer of a subject waits until
//! the first has committed or rolled back, and only then takes its transaction id, so
//! their events of that subject are read in commit order. The call is refused with
//! `INVALID_INPUT` when the transaction already holds a transaction id: its events could
//! then still be read before those of a writer that committed first.
//!
//! What it costs: writers of one subject run one after the other, each holding its locks
//! until it ends; writers of other subjects are not slowed. Plain [`crate::publish`] is
//! right when the subject's events come from one writer at a time anyway, or when their
//! consumers order by something of their own (a version in `data`).

use outbox_core::validate::is_valid_subject;
use sha2::{Digest, Sha256};
use sqlx::{AssertSqlSafe, PgExecutor, PgPool, Postgres, Transaction};

use crate::{Error, Result};

/// Begins a transaction on `pool` that holds the locks of `subjects`: publish their events
/// in it and commit; their events are read in commit order among ordered writers.
///
/// The locks are those `outbox_lock_subjects` takes (the distinct [`subject_key`]s, in
/// ascending order), and they travel with the `BEGIN` in one query string, `SELECT
/// pg_advisory_xact_lock(k₁); …; BEGIN`: an ordered transaction costs the round trips of a
/// plain one. The locks are taken in the implicit transaction that PostgreSQL opens for a
/// query string, which `BEGIN` then turns into the caller's transaction, locks included;
/// that transaction has written nothing, so it holds no transaction id. A lock that fails (a
/// `lock_timeout`, a cancel) fails that implicit transaction alone: the connection goes back
/// to the pool idle, never inside a failed transaction. The statement runs in a task of its
/// own, so a caller that gives up while the lock is awaited (a timeout, a dropped request)
/// leaves the task to finish and roll back, rather than a pooled connection left inside an
/// open transaction.
///
/// # Errors
/// [`Error::InvalidRequest`] (`INVALID_INPUT`) for a subject that breaks the subject rule
/// (SPEC §3.2); [`Error::Database`] when the database fails.
pub async fn ordered<S: AsRef<str>>(pool: &PgPool, subjects: &[S]) -> Result<Transaction<'static, Postgres>> {
    let subjects: Vec<&str> = subjects.iter().map(AsRef::as_ref).collect();
    if !subjects.iter().all(|subject| is_valid_subject(subject)) {
        // The function refuses it, naming the subject and the rule as SQL callers see them.
        let mut tx = pool.begin().await?;
        lock_subjects(&mut *tx, &subjects).await?;
        return Ok(tx);
    }
    let mut keys: Vec<i64> = subjects.iter().map(|subject| subject_key(subject)).collect();
    keys.sort_unstable();
    keys.dedup();
    let mut statement = String::new();
    for key in keys {
        statement.push_str(&format!("SELECT pg_advisory_xact_lock({key}); "));
    }
    statement.push_str("BEGIN");
    let pool = pool.clone();
    let begun = tokio::spawn(async move { pool.begin_with(AssertSqlSafe(statement)).await });
    match begun.await {
        Ok(begun) => begun.map_err(refusal),
        Err(join) if join.is_panic() => std::panic::resume_unwind(join.into_panic()),
        Err(_) => Err(Error::Database(sqlx::Error::Io(std::io::Error::other(
            "the runtime shut down as the transaction began",
        )))),
    }
}

/// Locks `subjects` in the caller's transaction, which must not have written anything
/// yet (its first statement, or after reads only).
///
/// # Errors
/// [`Error::InvalidRequest`] (`INVALID_INPUT`) when the transaction already holds a
/// transaction id, or a subject breaks the subject rule; [`Error::Database`] otherwise.
pub async fn lock_subjects<'e, S: AsRef<str>>(executor: impl PgExecutor<'e>, subjects: &[S]) -> Result<()> {
    let subjects: Vec<&str> = subjects.iter().map(AsRef::as_ref).collect();
    sqlx::query("SELECT outbox_lock_subjects($1)").bind(&subjects).execute(executor).await.map_err(refusal)?;
    Ok(())
}

/// The advisory lock key of `subject`: the first 8 bytes of SHA-256 of
/// `outbox:subject:<subject>`, big-endian, as a signed 64-bit integer. Another program
/// that takes `pg_advisory_xact_lock` of this key serializes with ordered writers.
pub fn subject_key(subject: &str) -> i64 {
    let digest = Sha256::digest(format!("outbox:subject:{subject}").as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(first)
}

/// The most lanes a sink or a subscription may have (SPEC §7.7).
pub const MAX_LANES: u32 = 256;

/// The lane of `subject` among `lanes` (SPEC §7.7): the top 63 bits of its
/// [`subject_key`] modulo `lanes`, the same number as SQL's
/// `outbox_subject_lane(subject, lanes)`. `None` when `lanes` is not 1 to [`MAX_LANES`].
pub fn subject_lane(subject: &str, lanes: u32) -> Option<u32> {
    if !(1..=MAX_LANES).contains(&lanes) {
        return None;
    }
    let top = (subject_key(subject) as u64) >> 1;
    u32::try_from(top % u64::from(lanes)).ok()
}

/// One of a consumer's ordered lanes (SPEC §7.7): the events whose subject's lane among
/// [`Lane::of`] is [`Lane::index`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lane {
    /// Which lane, `0 ..of`.
    pub index: u32,
    /// How many lanes there are, 1 to [`MAX_LANES`].
    pub of: u32,
}

impl Lane {
    /// Lane `index` of `of`; `None` unless `of` is 1 to [`MAX_LANES`] and `index` below it.
    pub fn new(index: u32, of: u32) -> Option<Lane> {
        ((1..=MAX_LANES).contains(&of) && index < of).then_some(Lane { index, of })
    }

    /// Whether an event about `subject` belongs to this lane.
    pub fn holds(&self, subject: &str) -> bool {
        subject_lane(subject, self.of) == Some(self.index)
    }
}

/// The database's refusal (SQLSTATE 22023) as `INVALID_INPUT`, anything else as it is.
fn refusal(error: sqlx::Error) -> Error {
    match error.as_database_error() {
        Some(db) if db.code().as_deref() == Some("22023") => Error::InvalidRequest(db.message().to_owned()),
        _ => Error::Database(error),
    }
}
