//! The database clock, `compute_now()` (SPEC §2.2, `core/0001_clock`).
//!
//! Every timestamp the outbox writes comes from `compute_now()`: `now()` plus an
//! offset kept in the one-row table `compute_clock`. Tests move the offset
//! forward instead of sleeping; production never touches it.

use std::time::Duration;

use sqlx::PgExecutor;
use time::OffsetDateTime;

use crate::Result;

/// Reads `compute_now()`.
pub async fn now<'e>(executor: impl PgExecutor<'e>) -> Result<OffsetDateTime> {
    Ok(sqlx::query_scalar("SELECT compute_now()").fetch_one(executor).await?)
}

/// Moves the database clock forward by `by`, for every session of this database.
pub async fn advance<'e>(executor: impl PgExecutor<'e>, by: Duration) -> Result<()> {
    let micros = i64::try_from(by.as_micros()).unwrap_or(i64::MAX);
    sqlx::query("UPDATE compute_clock SET offset_interval = offset_interval + make_interval(secs => $1::float8 / 1e6)")
        .bind(micros)
        .execute(executor)
        .await?;
    Ok(())
}
