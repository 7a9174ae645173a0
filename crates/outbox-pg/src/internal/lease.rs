//! Leases: named singletons that one worker holds at a time (SPEC §7.1).
//!
//! A lease is a row of `outbox_leases(name, holder, epoch, expires_at)`. A sink's
//! dispatcher holds [`dispatch_name`]`(sink id)`; retention holds
//! `singleton:core.retention`.
//!
//! # Mechanism
//!
//! - [`acquire`] takes the lease when it is free (no row, or released) or expired,
//!   in one `INSERT … ON CONFLICT DO UPDATE … WHERE expires_at <= compute_now()`.
//!   Every new holder gets the previous epoch plus one; the row is never deleted,
//!   so epochs only grow.
//! - [`renew`] pushes `expires_at` forward while this holder and epoch still hold it
//!   and it has not expired.
//! - [`release`] gives it up at once (holder `''`, `expires_at = compute_now()`),
//!   keeping the row and its epoch.
//! - [`begin_fenced`] opens a transaction whose first statement checks holder,
//!   epoch and expiry and locks the row `FOR SHARE`. Whatever the transaction then
//!   writes (a cursor, a dead letter) commits only if the lease was held: a worker
//!   that lost its lease cannot record progress. The share lock makes a rival's
//!   [`acquire`] wait until the fenced transaction ends, so a new holder always
//!   reads the progress its predecessor committed.
//!
//! # Lifetime
//!
//! Expiry is judged by the database clock, `compute_now()`, never by the worker's
//! own clock; tests move it with [`crate::internal::clock::advance`]. A lease lives until it
//! expires or is released: a worker that dies keeps it until `expires_at`, then
//! anyone may take it. Holders renew well before expiry (a third of the TTL is
//! usual).
//!
//! # Surprises
//!
//! - An expired lease is lost even when nobody else has taken it yet: [`renew`]
//!   and [`begin_fenced`] refuse it, and the worker must [`acquire`] again, which
//!   gives it a new epoch.
//! - [`acquire`] does not hand a lease back to the holder that still holds it: a
//!   holder name must be unique per running worker (host, process and a random
//!   part), or two workers would pass each other's fence.
//! - `compute_now()` is the transaction's start time. A fenced transaction must be
//!   short (check, write, commit): a long one would also hold back every outbox
//!   reader (SPEC §4).

use std::ops::{Deref, DerefMut};
use std::time::Duration;

use sqlx::{PgConnection, PgExecutor, PgPool, Postgres, Transaction};
use time::OffsetDateTime;

use crate::{Error, Result};

/// The prefix of every sink dispatcher's lease name.
pub const DISPATCH_PREFIX: &str = "singleton:outbox-dispatch:";

/// The lease a sink's dispatcher holds: `singleton:outbox-dispatch:<sink id>`.
pub fn dispatch_name(sink_id: &str) -> String {
    format!("{DISPATCH_PREFIX}{sink_id}")
}

/// A lease as its holder knows it: the proof it presents to renew, release and fence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The singleton's name.
    pub name: String,
    /// Who holds it.
    pub holder: String,
    /// How many holders it has had, this one included.
    pub epoch: i64,
    /// When it expires unless renewed, by the database clock.
    pub expires_at: OffsetDateTime,
}

/// A lease row as anyone can see it.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaseInfo {
    /// The singleton's name.
    pub name: String,
    /// The last holder; `None` when the lease was released.
    pub holder: Option<String>,
    /// How many holders it has had.
    pub epoch: i64,
    /// When it expires (or expired), by the database clock; `None` when released.
    pub expires_at: Option<OffsetDateTime>,
    /// Whether it is held now: a holder and `expires_at` after `compute_now()`.
    pub held: bool,
}

/// `ttl` as microseconds for `make_interval`.
fn micros(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_micros()).unwrap_or(i64::MAX)
}

/// Takes the lease `name` for `holder` for `ttl` when it is free or expired.
///
/// Returns `None` when someone holds it (this holder included: see the module's
/// surprises). The new holder's epoch is one more than the last.
///
/// The commit does not wait for the WAL flush (about a millisecond less per takeover on a
/// plain disk). An acquisition lost in a database crash is like a lease that ended early:
/// the fence and renewals check holder and epoch, so the holder's writes pass only while
/// the row names it again, and another holder that takes the lease meanwhile refuses them.
pub async fn acquire<'e>(
    executor: impl PgExecutor<'e>,
    name: &str,
    holder: &str,
    ttl: Duration,
) -> Result<Option<Lease>> {
    if holder.is_empty() {
        return Err(Error::InvalidRequest("a lease holder must have a name".into()));
    }
    let row: Option<(String, String, i64, OffsetDateTime)> = sqlx::query_as(
        "WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true))
         INSERT INTO outbox_leases AS l (name, holder, epoch, expires_at)
         SELECT $1, $2, 1, compute_now() + make_interval(secs => $3::float8 / 1e6) FROM relaxed
         ON CONFLICT (name) DO UPDATE
            SET holder = EXCLUDED.holder, epoch = l.epoch + 1, expires_at = EXCLUDED.expires_at WHERE l.expires_at <= compute_now()
         RETURNING name, holder, epoch, expires_at",
    )
    .bind(name)
    .bind(holder)
    .bind(micros(ttl))
    .fetch_optional(executor)
    .await?;
    Ok(row.map(|(name, holder, epoch, expires_at)| Lease { name, holder, epoch, expires_at }))
}

/// Extends `lease` to `ttl` from now while its holder and epoch still hold it.
///
/// Returns the renewed lease, or `None` when it was lost (expired, released or taken).
pub async fn renew<'e>(executor: impl PgExecutor<'e>, lease: &Lease, ttl: Duration) -> Result<Option<Lease>> {
    let expires_at: Option<OffsetDateTime> = sqlx::query_scalar(
        "UPDATE outbox_leases SET expires_at = compute_now() + make_interval(secs => $4::float8 / 1e6)
         WHERE name = $1 AND holder = $2 AND epoch = $3 AND expires_at > compute_now()
         RETURNING expires_at",
    )
    .bind(&lease.name)
    .bind(&lease.holder)
    .bind(lease.epoch)
    .bind(micros(ttl))
    .fetch_optional(executor)
    .await?;
    Ok(expires_at.map(|expires_at| Lease { expires_at, ..lease.clone() }))
}

/// Gives `lease` up at once, so another worker need not wait for it to expire.
///
/// Returns whether this holder still held it. The row stays (holder `''`, expired), so the
/// next holder's epoch is still one more.
pub async fn release<'e>(executor: impl PgExecutor<'e>, lease: &Lease) -> Result<bool> {
    let done = sqlx::query(
        "UPDATE outbox_leases SET holder = '', expires_at = compute_now()
         WHERE name = $1 AND holder = $2 AND epoch = $3",
    )
    .bind(&lease.name)
    .bind(&lease.holder)
    .bind(lease.epoch)
    .execute(executor)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The lease row `name`, if it was ever taken.
pub async fn get<'e>(executor: impl PgExecutor<'e>, name: &str) -> Result<Option<LeaseInfo>> {
    let row: Option<(String, String, i64, OffsetDateTime, bool)> = sqlx::query_as(
        "SELECT name, holder, epoch, expires_at, holder <> '' AND expires_at > compute_now()
         FROM outbox_leases WHERE name = $1",
    )
    .bind(name)
    .fetch_optional(executor)
    .await?;
    Ok(row.map(|(name, holder, epoch, expires_at, held)| {
        let released = holder.is_empty();
        LeaseInfo {
            name,
            holder: (!released).then_some(holder),
            epoch,
            expires_at: (!released).then_some(expires_at),
            held,
        }
    }))
}

/// The holders of the leases whose names start with `prefix` that are held now (by the
/// database clock): how many processes take part in a shared piece of work.
pub async fn live_holders<'e>(executor: impl PgExecutor<'e>, prefix: &str) -> Result<Vec<String>> {
    Ok(sqlx::query_scalar(
        "SELECT DISTINCT holder FROM outbox_leases
         WHERE starts_with(name, $1) AND holder <> '' AND expires_at > compute_now() ORDER BY holder",
    )
    .bind(prefix)
    .fetch_all(executor)
    .await?)
}

/// A transaction that began by proving `lease` is held (see the module documentation).
///
/// It derefs to the connection, so any query can run in it; [`crate::internal::cursor::advance`]
/// and [`crate::internal::dead_letter::record`] accept nothing else. Dropping it rolls back.
pub struct Fenced {
    tx: Transaction<'static, Postgres>,
    lease: Lease,
}

impl Fenced {
    /// The lease this transaction proved.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// Commits what the transaction wrote.
    pub async fn commit(self) -> Result<()> {
        Ok(self.tx.commit().await?)
    }
}

impl Deref for Fenced {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        &self.tx
    }
}

impl DerefMut for Fenced {
    fn deref_mut(&mut self) -> &mut PgConnection {
        &mut self.tx
    }
}

/// Begins a transaction on `pool` whose first statement checks that `lease` is still held
/// (holder, epoch, not expired) and locks its row `FOR SHARE`.
///
/// Returns `None`, having rolled back, when the lease was lost.
///
/// # Cancel safety
///
/// Dropping the future or the [`Fenced`] rolls the transaction back; nothing is recorded.
pub async fn begin_fenced(pool: &PgPool, lease: &Lease) -> Result<Option<Fenced>> {
    let mut tx = pool.begin().await?;
    let held: Option<i32> = sqlx::query_scalar(
        "SELECT 1 FROM outbox_leases
         WHERE name = $1 AND holder = $2 AND epoch = $3 AND expires_at > compute_now()
         FOR SHARE",
    )
    .bind(&lease.name)
    .bind(&lease.holder)
    .bind(lease.epoch)
    .fetch_optional(&mut *tx)
    .await?;
    if held.is_none() {
        tx.rollback().await?;
        return Ok(None);
    }
    Ok(Some(Fenced { tx, lease: lease.clone() }))
}
