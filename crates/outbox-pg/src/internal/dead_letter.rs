//! Dead letters: events a sink refused on every attempt while the next one went
//! through (SPEC §7.4).
//!
//! A dead letter is a row of `outbox_dead_letters`: the sink, the event's position
//! and the whole event (in the shape of SPEC §3.3), the last error, how many
//! attempts failed, and when the first and last of them happened.
//!
//! # Mechanism
//!
//! - [`record`] writes one inside a [`Fenced`] transaction, the same one that moves
//!   the sink's cursor past the event: both happen, or neither, and only while the
//!   lease is held.
//! - [`list`] and [`get`] read them; [`mark_replayed`] stamps `replayed_at` after a
//!   replay delivered the event again; [`discard`] deletes one.
//!
//! # Lifetime
//!
//! A dead letter stays until it is discarded; a replayed one stays too, with
//! `replayed_at` set, as a record of what happened. Retention (SPEC §9) never
//! touches this table: the event is copied here, so pruning the outbox row loses
//! nothing.
//!
//! # Surprises
//!
//! - One row per `(sink, position)`: recording the same event again (after a cursor
//!   was moved back by hand) adds the attempts, updates the error and last failure
//!   and clears `replayed_at`.
//! - Marking a replay is conditional on `replayed_at IS NULL`; two replays racing
//!   can both deliver the event (at least once), but only one marks it.

use std::time::Duration;

use outbox_core::{Event, Position};
use sqlx::types::Json;
use sqlx::{AssertSqlSafe, PgExecutor};
use time::OffsetDateTime;

use crate::Result;
use crate::internal::lease::Fenced;
use crate::xid8::Xid8;
use crate::xid8::{position, seq_column};

/// A dead letter as stored (the HTTP routes and the CLI show it through their own view).
#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetter {
    /// Its id, unique across sinks.
    pub id: i64,
    /// The sink that refused the event.
    pub sink: String,
    /// The event's position.
    pub position: Position,
    /// The event itself.
    pub event: Event,
    /// The last refusal's message.
    pub error: String,
    /// How many delivery attempts of this event failed.
    pub attempts: u32,
    /// When the first attempt failed, by the database clock.
    pub first_failed_at: OffsetDateTime,
    /// When the last attempt failed (and the letter was written), by the database clock.
    pub last_failed_at: OffsetDateTime,
    /// When a replay delivered it, if one did.
    pub replayed_at: Option<OffsetDateTime>,
}

/// A dead letter to write.
#[derive(Debug, Clone, Copy)]
pub struct NewDeadLetter<'a> {
    /// The sink that refused the event.
    pub sink: &'a str,
    /// The event.
    pub event: &'a Event,
    /// The last refusal's message.
    pub error: &'a str,
    /// How many attempts failed.
    pub attempts: u32,
    /// How long ago the first attempt failed; `first_failed_at` is `compute_now()` minus this.
    pub failing_for: Duration,
}

/// Which dead letters [`list`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListRequest {
    /// Only this sink's; `None` lists every sink's.
    pub sink: Option<String>,
    /// Include letters already replayed.
    pub include_replayed: bool,
    /// Only ids greater than this (paging).
    pub after_id: Option<i64>,
    /// At most this many, oldest first.
    pub limit: u32,
}

impl ListRequest {
    /// The pending (not replayed) dead letters of `sink`, 100 at a time.
    pub fn pending(sink: impl Into<String>) -> ListRequest {
        ListRequest { sink: Some(sink.into()), include_replayed: false, after_id: None, limit: 100 }
    }
}

/// The most dead letters one [`page`] holds.
pub const MAX_PAGE: u32 = 1000;

/// Which page of one sink's dead letters [`page`] reads: what a route's
/// `?cursor=&limit=&replayed=` or the CLI's `--limit` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    /// Only letters whose id follows this one (the previous page's cursor).
    pub after: Option<i64>,
    /// At most this many letters, 1 to [`MAX_PAGE`] (kept within that).
    pub limit: u32,
    /// Whether letters already replayed are listed too.
    pub include_replayed: bool,
}

impl Page {
    /// The first `limit` pending letters.
    pub fn pending(limit: u32) -> Page {
        Page { after: None, limit, include_replayed: false }
    }
}

/// One `page` of `sink`'s dead letters, oldest first, and whether more follow (one letter
/// more is read to know). The next page is `after` the last letter's id.
pub async fn page<'e>(executor: impl PgExecutor<'e>, sink: &str, page: Page) -> Result<(Vec<DeadLetter>, bool)> {
    let limit = page.limit.clamp(1, MAX_PAGE);
    let request =
        ListRequest { sink: Some(sink.to_owned()), include_replayed: page.include_replayed, after_id: page.after, limit: limit + 1 };
    let mut letters = list(executor, &request).await?;
    let more = letters.len() > limit as usize;
    letters.truncate(limit as usize);
    Ok((letters, more))
}

/// Writes a dead letter inside the fenced transaction that moves the sink's cursor past it;
/// returns its id.
pub async fn record(fenced: &mut Fenced, letter: &NewDeadLetter<'_>) -> Result<i64> {
    let micros = i64::try_from(letter.failing_for.as_micros()).unwrap_or(i64::MAX);
    let id = sqlx::query_scalar(
        "INSERT INTO outbox_dead_letters AS d
            (sink, txid, seq, event, error, attempts, first_failed_at, last_failed_at)
         VALUES ($1, $2, $3, $4, $5, $6, compute_now() - make_interval(secs => $7::float8 / 1e6), compute_now())
         ON CONFLICT (sink, txid, seq) DO UPDATE
            SET event = EXCLUDED.event, error = EXCLUDED.error, attempts = d.attempts + EXCLUDED.attempts,
                last_failed_at = EXCLUDED.last_failed_at, replayed_at = NULL
         RETURNING id",
    )
    .bind(letter.sink)
    .bind(Xid8(letter.event.sequence.txid))
    .bind(seq_column(letter.event.sequence))
    .bind(Json(letter.event))
    .bind(letter.error)
    .bind(i32::try_from(letter.attempts).unwrap_or(i32::MAX))
    .bind(micros)
    .fetch_one(&mut **fenced)
    .await?;
    Ok(id)
}

const COLUMNS: &str = "id, sink, txid, seq, event, error, attempts, first_failed_at, last_failed_at, replayed_at FROM outbox_dead_letters";

type Row = (i64, String, Xid8, i64, Json<Event>, String, i32, OffsetDateTime, OffsetDateTime, Option<OffsetDateTime>);

fn from_row(row: Row) -> DeadLetter {
    let (id, sink, txid, seq, Json(event), error, attempts, first_failed_at, last_failed_at, replayed_at) = row;
    DeadLetter {
        id,
        sink,
        position: position(txid, seq),
        event,
        error,
        attempts: u32::try_from(attempts).unwrap_or(0),
        first_failed_at,
        last_failed_at,
        replayed_at,
    }
}

/// Dead letters matching `request`, oldest first.
pub async fn list<'e>(executor: impl PgExecutor<'e>, request: &ListRequest) -> Result<Vec<DeadLetter>> {
    let sql = format!(
        "SELECT {COLUMNS}
         WHERE ($1::text IS NULL OR sink = $1) AND ($2 OR replayed_at IS NULL) AND id > $3
         ORDER BY id LIMIT $4"
    );
    let rows: Vec<Row> = sqlx::query_as(AssertSqlSafe(sql))
        .bind(&request.sink)
        .bind(request.include_replayed)
        .bind(request.after_id.unwrap_or(0))
        .bind(i64::from(request.limit))
        .fetch_all(executor)
        .await?;
    Ok(rows.into_iter().map(from_row).collect())
}

/// The dead letter `id` of `sink`.
pub async fn get<'e>(executor: impl PgExecutor<'e>, sink: &str, id: i64) -> Result<Option<DeadLetter>> {
    let sql = format!("SELECT {COLUMNS} WHERE sink = $1 AND id = $2");
    let row: Option<Row> = sqlx::query_as(AssertSqlSafe(sql)).bind(sink).bind(id).fetch_optional(executor).await?;
    Ok(row.map(from_row))
}

/// Stamps `replayed_at` on the dead letter `id` of `sink` after a replay delivered it.
/// Returns whether it did (false: no such letter, or already marked).
pub async fn mark_replayed<'e>(executor: impl PgExecutor<'e>, sink: &str, id: i64) -> Result<bool> {
    let done = sqlx::query(
        "UPDATE outbox_dead_letters SET replayed_at = compute_now()
         WHERE sink = $1 AND id = $2 AND replayed_at IS NULL",
    )
    .bind(sink)
    .bind(id)
    .execute(executor)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Deletes the dead letter `id` of `sink`; returns whether it existed.
pub async fn discard<'e>(executor: impl PgExecutor<'e>, sink: &str, id: i64) -> Result<bool> {
    let done = sqlx::query("DELETE FROM outbox_dead_letters WHERE sink = $1 AND id = $2")
        .bind(sink)
        .bind(id)
        .execute(executor)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// How many dead letters each sink has that were not replayed (a doctor finding), by sink.
pub async fn count_pending<'e>(executor: impl PgExecutor<'e>) -> Result<Vec<(String, u64)>> {
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT sink, count(*) FROM outbox_dead_letters WHERE replayed_at IS NULL GROUP BY sink ORDER BY sink",
    )
    .fetch_all(executor)
    .await?;
    Ok(rows.into_iter().map(|(sink, n)| (sink, u64::try_from(n).unwrap_or(0))).collect())
}

