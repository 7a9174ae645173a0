//! A subscription's delivery attempts and pings: the newest [`ATTEMPTS_KEPT`] are kept, and
//! [`record_outcome`] also decides whether a run of failures disables the subscription.

use std::time::{Duration, Instant};

use sqlx::postgres::PgRow;
use sqlx::{PgExecutor, PgPool, Postgres, Row as _, Transaction};
use time::OffsetDateTime;

use crate::Result;

/// The delivery attempts kept per subscription, newest first.
pub const ATTEMPTS_KEPT: i64 = 100;

/// One delivery attempt or ping, as kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// When it started, by the database clock (see [`record_outcome`]).
    pub time: OffsetDateTime,
    /// The event it carried (a ping's is the ping's own id).
    pub event_id: Option<String>,
    /// The answer's status, when one came.
    pub status: Option<u16>,
    /// How long it took.
    pub duration_ms: u32,
    /// What went wrong, when something did.
    pub error: Option<String>,
    /// The first KiB of the answer's body.
    pub response: Option<String>,
}

/// One delivery attempt or ping to record. It carries no time of day: the recording stamps
/// it by the database clock, from how long ago it `started` (see [`record_outcome`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAttempt {
    /// When it started, by the monotonic clock of the process that made it.
    pub started: Instant,
    /// The event it carried (a ping's is the ping's own id).
    pub event_id: Option<String>,
    /// The answer's status, when one came.
    pub status: Option<u16>,
    /// How long it took.
    pub duration_ms: u32,
    /// What went wrong, when something did.
    pub error: Option<String>,
    /// The first KiB of the answer's body.
    pub response: Option<String>,
}

/// The columns of an attempt, each named `<prefix><column>`: what [`attempt_from_row`] reads.
pub(super) fn attempt_columns(table: &str, prefix: &str) -> String {
    ["at", "event_id", "status", "duration_ms", "error", "response"]
        .map(|column| format!("{table}.{column} AS {prefix}{column}"))
        .join(", ")
}

/// The attempt in the columns `<prefix>at`, `<prefix>event_id`, …; `None` when `at` is
/// NULL (a subscription that made none, read through a left join).
pub(super) fn attempt_from_row(row: &PgRow, prefix: &str) -> std::result::Result<Option<Attempt>, sqlx::Error> {
    let column = |name: &str| format!("{prefix}{name}");
    let Some(time) = row.try_get::<Option<OffsetDateTime>, _>(column("at").as_str())? else { return Ok(None) };
    let status: Option<i32> = row.try_get(column("status").as_str())?;
    let duration: Option<i32> = row.try_get(column("duration_ms").as_str())?;
    Ok(Some(Attempt {
        time,
        event_id: row.try_get(column("event_id").as_str())?,
        status: status.and_then(|s| u16::try_from(s).ok()),
        duration_ms: duration.and_then(|d| u32::try_from(d).ok()).unwrap_or(0),
        error: row.try_get(column("error").as_str())?,
        response: row.try_get(column("response").as_str())?,
    }))
}

/// Records an attempt of subscription `id` (a ping's, say), stamped by the database clock
/// as [`record_outcome`] says, and forgets all but the newest [`ATTEMPTS_KEPT`].
pub async fn record_attempt(pool: &PgPool, id: &str, attempt: &NewAttempt) -> Result<()> {
    let mut tx = pool.begin().await?;
    insert_attempts(&mut tx, Instant::now(), id, std::slice::from_ref(attempt)).await?;
    tx.commit().await?;
    Ok(())
}

/// Inserts `attempts` of subscription `id` in one statement, in their order (their ids
/// ascend with it), then forgets all but the newest [`ATTEMPTS_KEPT`] in a second.
///
/// `began` is when `tx` began, by the monotonic clock: the instant its `compute_now()`
/// stands for (`now()` is the transaction's start). Each attempt's time is `compute_now()`
/// minus how long before `began` it started.
async fn insert_attempts(
    tx: &mut Transaction<'_, Postgres>,
    began: Instant,
    id: &str,
    attempts: &[NewAttempt],
) -> Result<()> {
    if attempts.is_empty() {
        return Ok(());
    }
    let ago: Vec<i64> = attempts
        .iter()
        .map(|a| i64::try_from(began.saturating_duration_since(a.started).as_micros()).unwrap_or(i64::MAX))
        .collect();
    let event_ids: Vec<Option<&str>> = attempts.iter().map(|a| a.event_id.as_deref()).collect();
    let statuses: Vec<Option<i32>> = attempts.iter().map(|a| a.status.map(i32::from)).collect();
    let durations: Vec<i32> = attempts.iter().map(|a| i32::try_from(a.duration_ms).unwrap_or(i32::MAX)).collect();
    let errors: Vec<Option<&str>> = attempts.iter().map(|a| a.error.as_deref()).collect();
    let responses: Vec<Option<&str>> = attempts.iter().map(|a| a.response.as_deref()).collect();
    sqlx::query(
        "INSERT INTO outbox_webhook_attempts (webhook_id, at, event_id, status, duration_ms, error, response)
         SELECT $1, compute_now() - make_interval(secs => a.ago_micros::float8 / 1e6),
                a.event_id, a.status, a.duration_ms, a.error, a.response
         FROM unnest($2::int8[], $3::text[], $4::int4[], $5::int4[], $6::text[], $7::text[])
              WITH ORDINALITY AS a(ago_micros, event_id, status, duration_ms, error, response, n)
         ORDER BY a.n",
    )
    .bind(id)
    .bind(&ago)
    .bind(&event_ids)
    .bind(&statuses)
    .bind(&durations)
    .bind(&errors)
    .bind(&responses)
    .execute(&mut **tx)
    .await?;
    sqlx::query(
        "DELETE FROM outbox_webhook_attempts WHERE webhook_id = $1 AND id <= (
            SELECT id FROM outbox_webhook_attempts WHERE webhook_id = $1 ORDER BY id DESC OFFSET $2 LIMIT 1)",
    )
    .bind(id)
    .bind(ATTEMPTS_KEPT)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Subscription `id`'s newest attempt, if it made one.
pub async fn last_attempt<'e>(executor: impl PgExecutor<'e>, id: &str) -> Result<Option<Attempt>> {
    Ok(read_attempts(executor, id, 1).await?.pop())
}

/// Subscription `id`'s kept attempts, newest first; `None` when `tenant` has no such one.
pub async fn attempts(pool: &PgPool, tenant: Option<&str>, id: &str) -> Result<Option<Vec<Attempt>>> {
    if super::fetch(pool, tenant, id).await?.is_none() {
        return Ok(None);
    }
    Ok(Some(read_attempts(pool, id, ATTEMPTS_KEPT).await?))
}

/// Up to `limit` of subscription `id`'s attempts, newest first.
async fn read_attempts<'e>(executor: impl PgExecutor<'e>, id: &str, limit: i64) -> Result<Vec<Attempt>> {
    let statement = format!(
        "SELECT {} FROM outbox_webhook_attempts a WHERE webhook_id = $1 ORDER BY id DESC LIMIT $2",
        attempt_columns("a", "")
    );
    let rows = sqlx::query(sqlx::AssertSqlSafe(statement))
        .bind(id)
        .bind(limit)
        .try_map(|row: PgRow| attempt_from_row(&row, ""))
        .fetch_all(executor)
        .await?;
    Ok(rows.into_iter().flatten().collect())
}

/// What [`record_outcome`] did to the subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing changed but the attempt and the failing time.
    Recorded,
    /// It is disabled now: `failing` after `disable_after` of failures only, or `gone`
    /// after a 410. A `webhook.disabled` event was published for its tenant.
    Disabled,
}

/// Records `attempts` of subscription `id` (in order) and what the last says: a success ends a run of
/// failures; a failure starts one (`failing_since`) or, when the run has lasted
/// `disable_after`, disables the subscription (`failing`). `gone` (the endpoint answered
/// 410) disables it at once. Disabling publishes `webhook.disabled` (subject
/// `webhook/<id>`, data `{webhookId, reason, failingSince}`) for its tenant in the same
/// transaction.
///
/// # Times
///
/// Every time written is the database clock's, `compute_now()`, never the caller's wall
/// clock. `failing_since` is this transaction's `compute_now()`. The attempts of one batch
/// were made one after the other, and stamping them all with that one time would say they
/// were made together, after the last had ended. So each attempt's time is `compute_now()`
/// minus how long before the transaction began it [`started`](NewAttempt::started), as the
/// process's monotonic clock measured it: the attempts keep their order and spacing, each
/// is off by no more than the `BEGIN`'s round trip, and none is later than `compute_now()`
/// (a `started` after the transaction began counts as no time before it).
pub async fn record_outcome(
    pool: &PgPool,
    id: &str,
    attempts: &[NewAttempt],
    delivered: bool,
    gone: bool,
    disable_after: Duration,
) -> Result<Outcome> {
    let mut tx = pool.begin().await?;
    insert_attempts(&mut tx, Instant::now(), id, attempts).await?;
    let seconds = i64::try_from(disable_after.as_secs()).unwrap_or(i64::MAX);
    let disabled: Option<(String, String, Option<OffsetDateTime>)> = if delivered {
        sqlx::query("UPDATE outbox_webhooks SET failing_since = NULL WHERE id = $1 AND failing_since IS NOT NULL")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        None
    } else {
        // Only a subscription that is disabled now changes `updated_at`: the delivery
        // restarts a subscription's loop when it changes, and a failure must not.
        let row: Option<(String, bool, Option<OffsetDateTime>)> = sqlx::query_as(
            "UPDATE outbox_webhooks w SET
                failing_since = COALESCE(w.failing_since, compute_now()),
                enabled = NOT d.disable,
                disabled_reason = CASE WHEN NOT d.disable THEN NULL WHEN $2 THEN 'gone' ELSE 'failing' END,
                updated_at = CASE WHEN d.disable THEN compute_now() ELSE w.updated_at END
             FROM (SELECT $2 OR COALESCE(failing_since, compute_now()) <= compute_now() - make_interval(secs => $3)
                          AS disable
                   FROM outbox_webhooks WHERE id = $1) d
             WHERE w.id = $1 AND w.enabled
             RETURNING w.tenant_id, d.disable, w.failing_since",
        )
        .bind(id)
        .bind(gone)
        .bind(seconds as f64)
        .fetch_optional(&mut *tx)
        .await?;
        row.filter(|(_, disable, _)| *disable).map(|(tenant, _, since)| {
            let reason = if gone { "gone" } else { "failing" };
            (tenant, reason.to_owned(), since)
        })
    };
    let outcome = match disabled {
        Some((tenant, reason, since)) => {
            let since = since.and_then(|since| since.format(&time::format_description::well_known::Rfc3339).ok());
            let data = serde_json::json!({ "webhookId": id, "reason": reason, "failingSince": since });
            let event = outbox_core::NewEvent::new("webhook.disabled", tenant, format!("webhook/{id}"), data);
            crate::publish(&mut *tx, &event).await?;
            Outcome::Disabled
        }
        None => Outcome::Recorded,
    };
    tx.commit().await?;
    Ok(outcome)
}

