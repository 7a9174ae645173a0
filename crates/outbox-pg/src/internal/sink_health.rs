//! What a sink's loop last reported: its last error and, while it backs off, until when
//! (SPEC §5.7 `GET /sinks`, `outbox sinks list`).
//!
//! The process holding a sink's lease writes a row of `outbox_sink_health` when a delivery
//! call fails ([`record_error`]), when the sink backs off ([`record_failure`]) and when it goes
//! through again after backing off ([`record_recovery`]), so
//! that any process (another server, the CLI) can show the state of a sink it does not run.
//! The writes are not fenced: they describe, they decide nothing. Times come from
//! `compute_now()`.

use std::time::Duration;

use sqlx::PgExecutor;
use time::OffsetDateTime;

use crate::Result;

/// A sink's last report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkHealth {
    /// Until when it backs off, when the last report was a failure.
    pub backing_off_until: Option<OffsetDateTime>,
    /// Whether `backing_off_until` is still ahead, by the database clock.
    pub backing_off: bool,
    /// The last failure's message, kept after a recovery.
    pub last_error: Option<String>,
    /// When it happened.
    pub last_error_at: Option<OffsetDateTime>,
}

/// Records that `sink` failed with `error` and backs off for `delay`.
pub async fn record_failure<'e>(executor: impl PgExecutor<'e>, sink: &str, error: &str, delay: Duration) -> Result<()> {
    let micros = i64::try_from(delay.as_micros()).unwrap_or(i64::MAX);
    sqlx::query(
        "INSERT INTO outbox_sink_health AS h (sink, backing_off_until, last_error, last_error_at, updated_at)
         VALUES ($1, compute_now() + make_interval(secs => $3::float8 / 1e6), $2, compute_now(), compute_now())
         ON CONFLICT (sink) DO UPDATE
            SET backing_off_until = EXCLUDED.backing_off_until, last_error = EXCLUDED.last_error,
                last_error_at = EXCLUDED.last_error_at, updated_at = EXCLUDED.updated_at",
    )
    .bind(sink)
    .bind(error)
    .bind(micros)
    .execute(executor)
    .await?;
    Ok(())
}

/// Records that a delivery call of `sink` failed with `error`, without a backoff (a failure
/// that bisection or a retry handles at once).
pub async fn record_error<'e>(executor: impl PgExecutor<'e>, sink: &str, error: &str) -> Result<()> {
    sqlx::query(
        "INSERT INTO outbox_sink_health AS h (sink, last_error, last_error_at, updated_at)
         VALUES ($1, $2, compute_now(), compute_now())
         ON CONFLICT (sink) DO UPDATE
            SET last_error = EXCLUDED.last_error, last_error_at = EXCLUDED.last_error_at,
                updated_at = EXCLUDED.updated_at",
    )
    .bind(sink)
    .bind(error)
    .execute(executor)
    .await?;
    Ok(())
}

/// Records that `sink` delivered again: it no longer backs off (its last error stays).
pub async fn record_recovery<'e>(executor: impl PgExecutor<'e>, sink: &str) -> Result<()> {
    sqlx::query(
        "UPDATE outbox_sink_health SET backing_off_until = NULL, updated_at = compute_now()
         WHERE sink = $1 AND backing_off_until IS NOT NULL",
    )
    .bind(sink)
    .execute(executor)
    .await?;
    Ok(())
}

/// The last report of `sink`, if it ever failed.
pub async fn get<'e>(executor: impl PgExecutor<'e>, sink: &str) -> Result<Option<SinkHealth>> {
    type Row = (Option<OffsetDateTime>, bool, Option<String>, Option<OffsetDateTime>);
    let row: Option<Row> = sqlx::query_as(
        "SELECT backing_off_until, coalesce(backing_off_until > compute_now(), false), last_error, last_error_at
         FROM outbox_sink_health WHERE sink = $1",
    )
    .bind(sink)
    .fetch_optional(executor)
    .await?;
    Ok(row.map(|(backing_off_until, backing_off, last_error, last_error_at)| SinkHealth {
        backing_off_until,
        backing_off,
        last_error,
        last_error_at,
    }))
}
