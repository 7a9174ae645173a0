//! Durable cursors: how far a consumer is done with the outbox (SPEC §7.2).
//!
//! A cursor is a row of `outbox_cursors(stream, name, txid, seq, updated_at)`: the
//! position of the last row the consumer is done with. Sinks use stream
//! [`OUTBOX_STREAM`] and name [`sink_name`]`(sink id)`; retention prunes only what
//! every cursor of the outbox has passed (SPEC §9).
//!
//! # Mechanism
//!
//! - [`load`] reads a cursor; a consumer without one starts from the oldest row.
//! - [`advance`] moves a cursor forward, inside a [`Fenced`] transaction only: the
//!   lease was checked by that transaction's first statement, so a worker that lost
//!   its lease cannot move the cursor. [`save`] is check, advance and commit in one
//!   statement; [`save_with_letter`] writes a dead letter in the same fenced transaction.
//! - A cursor never moves backwards: the upsert changes the row only when the new
//!   position is after the stored one (`(txid, seq)` compared as numbers).
//! - Beside the position, a cursor keeps an **ordinal** (core/0017): how many of the
//!   consumer's events lie at or before it, as the consumer counts them. The `_numbered`
//!   functions save it with the position, in the same statement; [`load_mark`] reads both.
//!   Rows after a position never change (the xmin rule), so a consumer that numbers them
//!   from the saved ordinal gives each event the same number every time it delivers it.
//!
//! # Lifetime
//!
//! A cursor lives until someone deletes its row; it outlives every lease, so a new
//! lease holder resumes where the last one saved. `updated_at` is the database clock
//! at the last move.
//!
//! # Surprises
//!
//! - Saving a position at or behind the stored one is not an error: it changes
//!   nothing and reports [`Advance::AlreadyPast`] with the stored position, which
//!   the caller should adopt.
//! - Delivery is at least once: what was delivered after the last save is delivered
//!   again by the next holder.

use outbox_core::Position;
use sqlx::{AssertSqlSafe, PgExecutor, PgPool};

use crate::internal::dead_letter::{self, NewDeadLetter};
use crate::internal::lease::{Fenced, Lease, begin_fenced};
use crate::read::ReadRequest;
use crate::xid8::Xid8;
use crate::xid8::{position, seq_column};
use crate::{Lane, Result};

/// The stream of every cursor over the `outbox` table.
pub const OUTBOX_STREAM: &str = "outbox";

/// A sink's cursor name in [`OUTBOX_STREAM`]: `sink:<sink id>`.
pub fn sink_name(sink_id: &str) -> String {
    format!("sink:{sink_id}")
}

/// A cursor's position and its ordinal: the number of the consumer's events at or before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    /// The position of the last row the consumer is done with.
    pub position: Position,
    /// How many of its events lie at or before `position` (0 when never counted).
    pub ordinal: i64,
}

/// What [`advance`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advance {
    /// The cursor now stands at the given position.
    Moved,
    /// The cursor already stood at or after the given position and stays there.
    AlreadyPast(Position),
    /// The cursor was a lane's and is gone: see [`Saved::Replaced`].
    Replaced,
}

/// What [`save`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Saved {
    /// The cursor now stands at the given position.
    Moved,
    /// The cursor already stood at or after the given position and stays there.
    AlreadyPast(Position),
    /// The lease was no longer held: nothing was written.
    LeaseLost,
    /// The cursor was a lane's (its name has a `#`) and is gone: the consumer's lanes were
    /// laid out again for another count ([`prepare_lanes`]). Nothing was written; a lane's
    /// cursor is only ever created by [`prepare_lanes`], so that a loop of the old layout
    /// finishing a save cannot bring back a cursor that holds retention back.
    Replaced,
}

/// Whether `name` is a lane's cursor ([`lane_name`]).
fn is_lane(name: &str) -> bool {
    name.contains('#')
}

/// The cursor `(stream, name)`, or `None` when it was never saved.
pub async fn load<'e>(executor: impl PgExecutor<'e>, stream: &str, name: &str) -> Result<Option<Position>> {
    let row: Option<(Xid8, i64)> =
        sqlx::query_as("SELECT txid, seq FROM outbox_cursors WHERE stream = $1 AND name = $2")
            .bind(stream)
            .bind(name)
            .fetch_optional(executor)
            .await?;
    Ok(row.map(|(txid, seq)| position(txid, seq)))
}

/// The cursor `(stream, name)` with its ordinal, or `None` when it was never saved.
pub async fn load_mark<'e>(executor: impl PgExecutor<'e>, stream: &str, name: &str) -> Result<Option<Mark>> {
    let row: Option<(Xid8, i64, i64)> =
        sqlx::query_as("SELECT txid, seq, ordinal FROM outbox_cursors WHERE stream = $1 AND name = $2")
            .bind(stream)
            .bind(name)
            .fetch_optional(executor)
            .await?;
    Ok(row.map(|(txid, seq, ordinal)| Mark { position: position(txid, seq), ordinal }))
}

/// Moves the cursor `(stream, name)` forward to `to` inside a fenced transaction; never back.
/// Its ordinal stays as it was.
pub async fn advance(fenced: &mut Fenced, stream: &str, name: &str, to: Position) -> Result<Advance> {
    advance_numbered(fenced, stream, name, to, None).await
}

/// Like [`advance`], also setting the ordinal to `ordinal` when the cursor moves (`None`:
/// unchanged).
pub async fn advance_numbered(
    fenced: &mut Fenced,
    stream: &str,
    name: &str,
    to: Position,
    ordinal: Option<i64>,
) -> Result<Advance> {
    let moved: Option<(Xid8, i64)> = sqlx::query_as(
        "INSERT INTO outbox_cursors AS c (stream, name, txid, seq, ordinal, updated_at)
         SELECT $1, $2, $3, $4, coalesce($5, 0), compute_now()
         WHERE strpos($2, '#') = 0 OR EXISTS (SELECT 1 FROM outbox_cursors WHERE stream = $1 AND name = $2)
         ON CONFLICT (stream, name) DO UPDATE
            SET txid = EXCLUDED.txid, seq = EXCLUDED.seq, updated_at = EXCLUDED.updated_at,
                ordinal = coalesce($5, c.ordinal)
            WHERE (c.txid, c.seq) < (EXCLUDED.txid, EXCLUDED.seq)
         RETURNING txid, seq",
    )
    .bind(stream)
    .bind(name)
    .bind(Xid8(to.txid))
    .bind(seq_column(to))
    .bind(ordinal)
    .fetch_optional(&mut **fenced)
    .await?;
    if moved.is_some() {
        return Ok(Advance::Moved);
    }
    Ok(match load(&mut **fenced, stream, name).await? {
        None if is_lane(name) => Advance::Replaced,
        stored => Advance::AlreadyPast(stored.unwrap_or(to)),
    })
}

/// Whether a cursor save's commit waits for its WAL record to reach disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// As the server is configured (`synchronous_commit`): a save that returned survives a crash.
    Flushed,
    /// `synchronous_commit = off` for this save only: a crash right after it may undo it (the
    /// consumer then repeats what it did since the save before, at least once), but the commit
    /// does not wait for a disk flush. Order and the fence are unchanged.
    Relaxed,
}

/// The statement of [`save`]: the fence, the forward-only upsert and the stored position, in one.
/// Binds: `$1..$3` the lease (name, holder, epoch), `$4` stream, `$5` name, `$6` txid, `$7` seq,
/// `$8` the `synchronous_commit` of this transaction (`NULL`: unchanged), `$9` the ordinal
/// (`NULL`: unchanged). A lane's cursor (a name with `#`) is moved, never created.
///
/// The fence's `FOR SHARE` row lock holds until the statement's own commit, so the lease
/// cannot change hands between the check and the write. The last two columns read the row as
/// it was before the statement (one snapshot), which is the stored position when nothing moved.
pub const SAVE_STATEMENT: &str = "WITH fence AS (
        SELECT set_config('synchronous_commit', coalesce($8, current_setting('synchronous_commit')), true)
        FROM outbox_leases
        WHERE name = $1 AND holder = $2 AND epoch = $3 AND expires_at > compute_now()
        FOR SHARE
    ), moved AS (
        INSERT INTO outbox_cursors AS c (stream, name, txid, seq, ordinal, updated_at)
        SELECT $4, $5, $6, $7, coalesce($9::bigint, 0), compute_now() FROM fence
        WHERE strpos($5, '#') = 0 OR EXISTS (SELECT 1 FROM outbox_cursors WHERE stream = $4 AND name = $5)
        ON CONFLICT (stream, name) DO UPDATE
           SET txid = EXCLUDED.txid, seq = EXCLUDED.seq, updated_at = EXCLUDED.updated_at,
               ordinal = coalesce($9::bigint, c.ordinal)
           WHERE (c.txid, c.seq) < (EXCLUDED.txid, EXCLUDED.seq)
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM fence), EXISTS (SELECT 1 FROM moved), stored.txid, stored.seq
    FROM (SELECT 1) one
    LEFT JOIN outbox_cursors stored ON stored.stream = $4 AND stored.name = $5";

/// Checks `lease`, moves the cursor forward to `to` and commits: one statement, one round
/// trip, as durable as `durability` says. The ordinal stays as it was.
pub async fn save<'e>(
    executor: impl PgExecutor<'e>,
    lease: &Lease,
    stream: &str,
    name: &str,
    to: Position,
    durability: Durability,
) -> Result<Saved> {
    save_numbered(executor, lease, stream, name, to, None, durability).await
}

/// Like [`save`], also setting the ordinal to `ordinal` when the cursor moves (`None`:
/// unchanged), in the same statement: a position and its ordinal are saved together or not at all.
pub async fn save_numbered<'e>(
    executor: impl PgExecutor<'e>,
    lease: &Lease,
    stream: &str,
    name: &str,
    to: Position,
    ordinal: Option<i64>,
    durability: Durability,
) -> Result<Saved> {
    let relaxed = (durability == Durability::Relaxed).then_some("off");
    let (held, moved, txid, seq): (bool, bool, Option<Xid8>, Option<i64>) = sqlx::query_as(SAVE_STATEMENT)
        .bind(&lease.name)
        .bind(&lease.holder)
        .bind(lease.epoch)
        .bind(stream)
        .bind(name)
        .bind(Xid8(to.txid))
        .bind(seq_column(to))
        .bind(relaxed)
        .bind(ordinal)
        .fetch_one(executor)
        .await?;
    Ok(match (held, moved, txid.zip(seq)) {
        (false, _, _) => Saved::LeaseLost,
        (true, true, _) => Saved::Moved,
        (true, false, None) if is_lane(name) => Saved::Replaced,
        (true, false, stored) => Saved::AlreadyPast(stored.map_or(to, |(txid, seq)| position(txid, seq))),
    })
}

/// Writes `letter` and moves the cursor `(stream, name)` forward to `to` in one fenced
/// transaction, as durable as `durability` says: both happen, or neither, and only while
/// `lease` is held. This is how a sink passes a poison event (SPEC §7.4).
///
/// Returns [`Saved::LeaseLost`], having written nothing, when the fence finds the lease
/// gone; [`Saved::AlreadyPast`] when the cursor already stood at or after `to` (the letter
/// is written all the same).
///
/// # Locks and snapshot
///
/// A read-committed transaction ([`begin_fenced`]): its first statement locks the lease row
/// `FOR SHARE`, so a rival's [`crate::internal::lease::acquire`] waits for the commit and then reads
/// this progress; the letter's upsert and the cursor's lock their rows until the commit.
/// Each statement reads its own snapshot; the stored position reported by
/// [`Saved::AlreadyPast`] is read after the upsert that did not move it, in the same
/// transaction. [`Durability::Relaxed`] sets `synchronous_commit = off` for this
/// transaction only (`SET LOCAL`).
///
/// # Cancel safety
///
/// Dropping the future rolls the transaction back: nothing is recorded. (sqlx 0.9's
/// `begin` is not cancel safe: run it to completion where the pool is shared.)
pub async fn save_with_letter(
    pool: &PgPool,
    lease: &Lease,
    stream: &str,
    name: &str,
    to: Position,
    letter: &NewDeadLetter<'_>,
    durability: Durability,
) -> Result<Saved> {
    save_with_letter_numbered(pool, lease, stream, name, (to, None), letter, durability).await
}

/// Like [`save_with_letter`], also setting the ordinal to `to.1` when the cursor moves (`None`:
/// unchanged), in the same transaction.
pub async fn save_with_letter_numbered(
    pool: &PgPool,
    lease: &Lease,
    stream: &str,
    name: &str,
    to: (Position, Option<i64>),
    letter: &NewDeadLetter<'_>,
    durability: Durability,
) -> Result<Saved> {
    let (to, ordinal) = to;
    let Some(mut fenced) = begin_fenced(pool, lease).await? else { return Ok(Saved::LeaseLost) };
    if durability == Durability::Relaxed {
        sqlx::query("SET LOCAL synchronous_commit = off").execute(&mut *fenced).await?;
    }
    dead_letter::record(&mut fenced, letter).await?;
    let advance = advance_numbered(&mut fenced, stream, name, to, ordinal).await?;
    fenced.commit().await?;
    Ok(match advance {
        Advance::Moved => Saved::Moved,
        Advance::AlreadyPast(stored) => Saved::AlreadyPast(stored),
        Advance::Replaced => Saved::Replaced,
    })
}

/// How far every lag is counted (sinks and webhook subscriptions alike): a count that
/// reaches it means "at least this many", and the views say so (`lagCapped`).
pub const LAG_CAP: u64 = 1_000_000;

/// How many visible events matching `request`'s tenant and types lie after `request.after`
/// (`None`: from the oldest row), counting at most `cap`: how far behind the head a cursor is.
///
/// Uses the xmin rule, like [`crate::read_page`]: events of transactions still open do not count.
pub async fn lag<'e>(executor: impl PgExecutor<'e>, request: &ReadRequest, cap: u64) -> Result<u64> {
    let tenant = if request.tenant_id.is_some() { "AND payload->>'tenantId' = $3" } else { "AND $3::text IS NULL" };
    let types = if request.like_patterns().is_some() { "AND topic LIKE ANY($4)" } else { "AND $4::text[] IS NULL" };
    let lane = if request.lane.is_some() {
        "AND outbox_subject_lane(payload->>'subject', $7) = $6"
    } else {
        "AND $6::int IS NULL AND $7::int IS NULL"
    };
    let sql = format!(
        "SELECT count(*) FROM (
            SELECT 1 FROM outbox
            WHERE txid < pg_snapshot_xmin(pg_current_snapshot()) AND (txid, seq) > ($1, $2) {tenant} {types} {lane}
            LIMIT $5
        ) behind"
    );
    let after = request.after.unwrap_or(Position::START);
    let count: i64 = sqlx::query_scalar(AssertSqlSafe(sql))
        .bind(Xid8(after.txid))
        .bind(seq_column(after))
        .bind(&request.tenant_id)
        .bind(request.like_patterns())
        .bind(i64::try_from(cap).unwrap_or(i64::MAX))
        .bind(request.lane_binds().0)
        .bind(request.lane_binds().1)
        .fetch_one(executor)
        .await?;
    Ok(u64::try_from(count).unwrap_or(0))
}

/// Lane `lane`'s cursor of the consumer whose cursor is `name` (SPEC §7.7): `name` itself
/// for a consumer of one lane, else `<name>#<index>/<of>`. The count is part of the name, so
/// the cursors of two lane counts never stand for each other (while processes of a rolling
/// change disagree on it, say).
pub fn lane_name(name: &str, lane: Lane) -> String {
    if lane.of == 1 { name.to_owned() } else { format!("{name}#{}/{}", lane.index, lane.of) }
}

/// The consumer's own cursor name of a lane's cursor name (`billing#3/16` → `billing`).
pub fn consumer_of(name: &str) -> &str {
    name.split_once('#').map_or(name, |(consumer, _)| consumer)
}

/// Makes every cursor of consumer `name`'s `lanes` lanes stand, in one transaction, before
/// one of its lanes loads its own (SPEC §7.7).
///
/// - Every lane's cursor already saved: cursors of another lane count (stale ones) go.
/// - Else the missing lanes start at the slowest of the consumer's cursors of any count:
///   every event at or before it was delivered by the lane it belonged to, so nothing is
///   skipped; what faster lanes had delivered after it is delivered again. The cursors of
///   other counts go in the same transaction.
/// - A consumer with no cursor at all: its lanes start at the beginning (one lane keeps no
///   cursor until its first save, as before lanes).
///
/// Two processes preparing at once take turns on a transaction-scoped advisory lock of the
/// consumer. The writes are not fenced: they only ever put a cursor at or behind a
/// position every lane passed.
pub async fn prepare_lanes(pool: &PgPool, stream: &str, name: &str, lanes: u32) -> Result<()> {
    let wanted: Vec<String> =
        (0..lanes).filter_map(|index| Lane::new(index, lanes)).map(|l| lane_name(name, l)).collect();
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock(outbox_subject_key('outbox:lanes:' || $1 || ':' || $2))")
        .bind(stream)
        .bind(name)
        .execute(&mut *tx)
        .await?;
    let stored: Vec<(String, Xid8, i64, i64)> = sqlx::query_as(
        "SELECT name, txid, seq, ordinal FROM outbox_cursors
         WHERE stream = $1 AND (name = $2 OR starts_with(name, $2 || '#'))",
    )
    .bind(stream)
    .bind(name)
    .fetch_all(&mut *tx)
    .await?;
    let present = |lane: &String| stored.iter().any(|(stored, ..)| stored == lane);
    let stale: Vec<String> =
        stored.iter().map(|(stored, ..)| stored.clone()).filter(|stored| !wanted.contains(stored)).collect();
    if !wanted.iter().all(present) {
        let slowest = stored.iter().map(|(_, txid, seq, ordinal)| (position(*txid, *seq), *ordinal)).min();
        let start = match slowest {
            Some(slowest) => Some(slowest),
            None if lanes > 1 => Some((Position::START, 0)),
            None => None,
        };
        if let Some((start, ordinal)) = start {
            let missing: Vec<&String> = wanted.iter().filter(|lane| !present(lane)).collect();
            sqlx::query(
                "INSERT INTO outbox_cursors (stream, name, txid, seq, ordinal, updated_at)
                 SELECT $1, lane, $3, $4, $5, compute_now() FROM unnest($2::text[]) lane
                 ON CONFLICT (stream, name) DO NOTHING",
            )
            .bind(stream)
            .bind(missing)
            .bind(Xid8(start.txid))
            .bind(seq_column(start))
            .bind(ordinal)
            .execute(&mut *tx)
            .await?;
        }
    }
    if !stale.is_empty() {
        sqlx::query("DELETE FROM outbox_cursors WHERE stream = $1 AND name = ANY($2)")
            .bind(stream)
            .bind(&stale)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Every cursor of consumer `name` (its lanes' or its own), lowest position first.
pub async fn lane_marks<'e>(executor: impl PgExecutor<'e>, stream: &str, name: &str) -> Result<Vec<(String, Mark)>> {
    let rows: Vec<(String, Xid8, i64, i64)> = sqlx::query_as(
        "SELECT name, txid, seq, ordinal FROM outbox_cursors
         WHERE stream = $1 AND (name = $2 OR starts_with(name, $2 || '#'))
         ORDER BY txid, seq, name",
    )
    .bind(stream)
    .bind(name)
    .fetch_all(executor)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(name, txid, seq, ordinal)| (name, Mark { position: position(txid, seq), ordinal }))
        .collect())
}
