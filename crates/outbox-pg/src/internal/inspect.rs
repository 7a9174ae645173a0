//! Read-only looks at the database for `outbox doctor` and the metrics (SPEC §9):
//! transactions that hold the xmin horizon back, and leases whose holder is gone.
//!
//! # The xmin horizon
//!
//! Every outbox reader takes only rows of transactions older than the oldest one still
//! running (SPEC §4). Transaction ids are cluster-wide, so *any* transaction that holds one
//! (`pg_stat_activity.backend_xid`), in any database of the cluster, holds every stream
//! back until it ends. A session that only holds a snapshot (`backend_xmin`, e.g. a long
//! `REPEATABLE READ` report) does not stop streams, but keeps vacuum from removing what
//! retention deleted. [`open_transactions`] returns both kinds, telling them apart.
//! Their age is measured by the server's real clock (`xact_start`), not `compute_now()`.

use std::time::Duration;

use sqlx::PgExecutor;
use time::OffsetDateTime;

use crate::Result;

/// A session inside a transaction that holds a transaction id or a snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenTransaction {
    /// The backend's process id (`pg_terminate_backend(pid)` ends it).
    pub pid: i32,
    /// The database it is connected to.
    pub database: Option<String>,
    /// Its `application_name`.
    pub application_name: String,
    /// How long the transaction has been open.
    pub age: Duration,
    /// When its current (or last) query started.
    pub query_start: Option<OffsetDateTime>,
    /// The start of that query's text (at most 200 characters).
    pub query: String,
    /// `active`, `idle in transaction`, …
    pub state: Option<String>,
    /// Whether it holds a transaction id, and so holds every outbox stream back.
    pub holds_streams: bool,
}

/// Transactions open at least `older_than`, oldest first, this session excluded.
pub async fn open_transactions<'e>(
    executor: impl PgExecutor<'e>,
    older_than: Duration,
) -> Result<Vec<OpenTransaction>> {
    type Row = (i32, Option<String>, String, f64, Option<OffsetDateTime>, String, Option<String>, bool);
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT pid, datname, coalesce(application_name, ''),
                extract(epoch FROM clock_timestamp() - xact_start)::float8,
                query_start, left(coalesce(query, ''), 200), state, backend_xid IS NOT NULL
         FROM pg_stat_activity
         WHERE (backend_xid IS NOT NULL OR backend_xmin IS NOT NULL)
           AND xact_start IS NOT NULL AND pid <> pg_backend_pid()
           AND clock_timestamp() - xact_start >= make_interval(secs => $1::float8 / 1e6)
         ORDER BY xact_start",
    )
    .bind(i64::try_from(older_than.as_micros()).unwrap_or(i64::MAX))
    .fetch_all(executor)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(pid, database, application_name, age, query_start, query, state, holds_streams)| OpenTransaction {
            pid,
            database,
            application_name,
            age: Duration::from_secs_f64(age.max(0.0)),
            query_start,
            query,
            state,
            holds_streams,
        })
        .collect())
}

/// How long the oldest transaction holding a transaction id has been open (zero when none):
/// how far back the xmin horizon holds every outbox reader.
pub async fn xmin_horizon_age<'e>(executor: impl PgExecutor<'e>) -> Result<Duration> {
    let age: Option<f64> = sqlx::query_scalar(
        "SELECT extract(epoch FROM clock_timestamp() - min(xact_start))::float8
         FROM pg_stat_activity WHERE backend_xid IS NOT NULL AND pid <> pg_backend_pid()",
    )
    .fetch_one(executor)
    .await?;
    Ok(Duration::from_secs_f64(age.unwrap_or(0.0).max(0.0)))
}

/// A lease whose holder let it expire without releasing it (a process that died or lost
/// the database).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiredLease {
    /// The singleton's name.
    pub name: String,
    /// The holder still named in the row.
    pub holder: String,
    /// When it expired, by the database clock.
    pub expired_at: OffsetDateTime,
}

/// Leases that still name a holder but expired, oldest first.
pub async fn expired_leases<'e>(executor: impl PgExecutor<'e>) -> Result<Vec<ExpiredLease>> {
    let rows: Vec<(String, String, OffsetDateTime)> = sqlx::query_as(
        "SELECT name, holder, expires_at FROM outbox_leases
         WHERE holder <> '' AND expires_at <= compute_now() ORDER BY expires_at, name",
    )
    .fetch_all(executor)
    .await?;
    Ok(rows.into_iter().map(|(name, holder, expired_at)| ExpiredLease { name, holder, expired_at }).collect())
}
