//! Webhook subscriptions' rows (SPEC §7.6): create, read, change and delete a tenant's
//! subscriptions, rotate their secrets, and keep their delivery attempts.
//!
//! A subscription is a row of `outbox_webhooks`, its cursor the row
//! ([`CURSOR_STREAM`], id) of `outbox_cursors`, its dead letters those of sink
//! [`dead_letter_sink`]`(id)`. Its signing secrets and its extra headers' values are kept
//! sealed ([`SealKey`], bound to the id); [`keys`] opens them for the delivery, and no
//! other function returns them except the secret made by [`create`] and [`rotate`].
//!
//! Every function that takes a `tenant` touches only that tenant's rows (`None`: any
//! tenant, for administrators): another tenant's id is simply not found. The callers
//! (`outbox-http`) check the fields by `outbox_core::webhook`'s rules first; this module
//! enforces what needs the database: the number per tenant, under a per-tenant lock, and
//! the number of secrets in their grace period. Times are `compute_now()`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use outbox_core::Position;
use outbox_core::webhook::{Refusal, Secret};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use sqlx::{PgExecutor, PgPool, Postgres, Transaction};
use time::OffsetDateTime;

use crate::internal::seal::{SealKey, random};
use crate::{Error, Result};

/// The stream of subscriptions' cursors in `outbox_cursors`; the name is the id.
pub const CURSOR_STREAM: &str = "webhooks";
/// How many shards subscriptions are spread over ([`shard_of`]).
pub const SHARDS: u32 = 32;
/// How many secrets may be in their grace period at once, besides the current one.
pub const MAX_OLD_SECRETS: usize = 10;
/// The longest grace period of a rotated secret.
pub const MAX_GRACE: Duration = Duration::from_secs(7 * 24 * 3600);
/// The delivery attempts kept per subscription, newest first.
pub const ATTEMPTS_KEPT: i64 = 100;
/// The bytes of a generated secret.
const GENERATED_SECRET_BYTES: usize = 24;

/// The shard of subscription `id`: the first four bytes of SHA-256(id), big-endian,
/// modulo [`SHARDS`].
pub fn shard_of(id: &str) -> i32 {
    let digest = Sha256::digest(id.as_bytes());
    let word = u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]);
    i32::try_from(word % SHARDS).expect("a shard fits an i32")
}

/// The sink name under which a subscription's dead letters are kept.
pub fn dead_letter_sink(id: &str) -> String {
    format!("webhook:{id}")
}

/// What a new subscription holds, its fields checked already.
#[derive(Debug, Clone, Default)]
pub struct NewWebhook {
    /// The target URL.
    pub url: String,
    /// Type patterns.
    pub types: Vec<String>,
    /// A description.
    pub description: String,
    /// Extra request headers.
    pub headers: BTreeMap<String, String>,
    /// A JSON object of the tenant's own.
    pub metadata: serde_json::Value,
    /// The signing secret; generated when `None`.
    pub secret: Option<Secret>,
}

/// A subscription as every answer shows it (never its secrets or header values).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Webhook {
    /// `wh_` + lowercase ULID.
    pub id: String,
    /// Its tenant.
    pub tenant_id: String,
    /// The target URL.
    pub url: String,
    /// Type patterns.
    pub types: Vec<String>,
    /// Its description.
    pub description: String,
    /// The names of its extra headers.
    pub header_names: Vec<String>,
    /// The tenant's metadata.
    pub metadata: serde_json::Value,
    /// Whether it delivers.
    pub enabled: bool,
    /// Why not: `manual`, `failing` or `gone`.
    pub disabled_reason: Option<String>,
    /// Since when every attempt failed, while they do.
    #[serde(with = "time::serde::rfc3339::option")]
    pub failing_since: Option<OffsetDateTime>,
    /// Its cursor: how far it delivered.
    #[serde(skip)]
    pub position: Position,
    /// Whether retention deleted rows after its cursor (while it was disabled): events it
    /// will never receive.
    pub gap: bool,
    /// When it was created.
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// When it last changed.
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
}

/// What is sealed in a row: the signing secrets and the headers' values.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Sealed {
    current: String,
    #[serde(default)]
    previous: Vec<OldSecret>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

/// A rotated secret and the Unix time its grace period ends.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct OldSecret {
    secret: String,
    until: i64,
}

/// What a delivery needs that is sealed: every secret that signs now, the current one
/// first, and the extra headers.
#[derive(Debug, Clone)]
pub struct Keys {
    /// The current secret, then those still in their grace period.
    pub signing: Vec<Secret>,
    /// The extra request headers, values included.
    pub headers: BTreeMap<String, String>,
}

/// A change to a subscription; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct Patch {
    /// A new URL.
    pub url: Option<String>,
    /// New type patterns.
    pub types: Option<Vec<String>>,
    /// A new description.
    pub description: Option<String>,
    /// New extra headers (all of them).
    pub headers: Option<BTreeMap<String, String>>,
    /// New metadata.
    pub metadata: Option<serde_json::Value>,
    /// Enable (`true`) or disable by hand (`false`).
    pub enabled: Option<bool>,
    /// With `enabled: true`: resume from the head instead of the cursor.
    pub resume_now: bool,
}

/// One delivery attempt or ping, as kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Attempt {
    /// When it started, by the database clock (see [`record_outcome`]).
    #[serde(with = "time::serde::rfc3339")]
    pub time: OffsetDateTime,
    /// The event it carried (a ping's is the ping's own id).
    pub event_id: Option<String>,
    /// The answer's status, when one came.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// How long it took.
    pub duration_ms: u32,
    /// What went wrong, when something did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The first KiB of the answer's body.
    #[serde(skip_serializing_if = "Option::is_none")]
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

const COLUMNS: &str = "w.id, w.tenant_id, w.url, w.types, w.description, w.header_names, w.metadata, w.enabled, \
     w.disabled_reason, w.failing_since, w.created_at, w.updated_at, \
     COALESCE(c.txid, '0'::xid8)::text::bigint, COALESCE(c.seq, 0), \
     EXISTS (SELECT 1 FROM outbox_cursors p WHERE p.stream = 'retention' AND p.name = 'pruned' \
             AND (p.txid, p.seq) > (COALESCE(c.txid, '0'::xid8), COALESCE(c.seq, 0)))";

const FROM: &str = "outbox_webhooks w LEFT JOIN outbox_cursors c ON c.stream = 'webhooks' AND c.name = w.id";

type Row = (
    String,
    String,
    String,
    Vec<String>,
    String,
    Vec<String>,
    serde_json::Value,
    bool,
    Option<String>,
    Option<OffsetDateTime>,
    OffsetDateTime,
    OffsetDateTime,
    i64,
    i64,
    bool,
);

fn from_row(row: Row) -> Webhook {
    let (
        id,
        tenant_id,
        url,
        types,
        description,
        header_names,
        metadata,
        enabled,
        reason,
        failing,
        created,
        updated,
        txid,
        seq,
        gap,
    ) = row;
    let position = Position::new(u64::try_from(txid).unwrap_or(0), u64::try_from(seq).unwrap_or(0));
    Webhook {
        id,
        tenant_id,
        url,
        types,
        description,
        header_names,
        metadata,
        enabled,
        disabled_reason: reason,
        failing_since: failing,
        position,
        gap,
        created_at: created,
        updated_at: updated,
    }
}

/// Creates a subscription of `tenant` starting at the head (it receives what commits
/// after it), refusing a tenant that has `max_per_tenant` already. Answers it with its
/// secret, the only time the secret is shown.
pub async fn create(
    pool: &PgPool,
    key: &SealKey,
    tenant: &str,
    new: &NewWebhook,
    max_per_tenant: u32,
) -> Result<(Webhook, Secret)> {
    let id = format!("wh_{}", ulid::Ulid::generate().to_string().to_ascii_lowercase());
    let secret = match &new.secret {
        Some(secret) => secret.clone(),
        None => Secret::from_bytes(random::<GENERATED_SECRET_BYTES>().map_err(seal_error)?.to_vec())
            .map_err(Error::InvalidRequest)?,
    };
    let sealed = Sealed { current: secret.expose(), previous: Vec::new(), headers: new.headers.clone() };
    let sealed = seal(key, &id, &sealed)?;
    let mut tx = pool.begin().await?;
    lock_tenant(&mut tx, tenant).await?;
    let (count,): (i64,) = sqlx::query_as("SELECT count(*) FROM outbox_webhooks WHERE tenant_id = $1")
        .bind(tenant)
        .fetch_one(&mut *tx)
        .await?;
    if count >= i64::from(max_per_tenant) {
        let rule = format!("tenant {tenant:?} has {count} subscriptions, the most it may have ({max_per_tenant})");
        return Err(Error::Refused(Refusal::new("webhooks", rule)));
    }
    let header_names: Vec<&String> = new.headers.keys().collect();
    sqlx::query(
        "INSERT INTO outbox_webhooks (id, tenant_id, url, types, description, header_names, metadata, sealed, shard)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(&id)
    .bind(tenant)
    .bind(&new.url)
    .bind(&new.types)
    .bind(&new.description)
    .bind(&header_names)
    .bind(&new.metadata)
    .bind(&sealed)
    .bind(shard_of(&id))
    .execute(&mut *tx)
    .await?;
    start_at_head(&mut tx, &id).await?;
    let webhook = fetch(&mut *tx, Some(tenant), &id).await?.expect("the row just written");
    tx.commit().await?;
    Ok((webhook, secret))
}

/// Subscription `id`, if `tenant` (or any, with `None`) has it.
pub async fn get<'e>(executor: impl PgExecutor<'e>, tenant: Option<&str>, id: &str) -> Result<Option<Webhook>> {
    fetch(executor, tenant, id).await
}

async fn fetch<'e>(executor: impl PgExecutor<'e>, tenant: Option<&str>, id: &str) -> Result<Option<Webhook>> {
    let statement = format!("SELECT {COLUMNS} FROM {FROM} WHERE w.id = $1 AND ($2::text IS NULL OR w.tenant_id = $2)");
    let row: Option<Row> =
        sqlx::query_as(sqlx::AssertSqlSafe(statement)).bind(id).bind(tenant).fetch_optional(executor).await?;
    Ok(row.map(from_row))
}

/// Up to `limit` of `tenant`'s subscriptions after id `after`, in id order (ids grow with
/// time, so oldest first).
pub async fn list<'e>(
    executor: impl PgExecutor<'e>,
    tenant: &str,
    after: Option<&str>,
    limit: usize,
) -> Result<Vec<Webhook>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let statement = format!(
        "SELECT {COLUMNS} FROM {FROM} WHERE w.tenant_id = $1 AND ($2::text IS NULL OR w.id > $2) ORDER BY w.id LIMIT $3"
    );
    let rows: Vec<Row> =
        sqlx::query_as(sqlx::AssertSqlSafe(statement)).bind(tenant).bind(after).bind(limit).fetch_all(executor).await?;
    Ok(rows.into_iter().map(from_row).collect())
}

/// Applies `patch` to subscription `id` of `tenant`; `None` when there is no such one.
///
/// Enabling clears the reason and `failing_since`; the cursor stays where it was (no gap),
/// or moves to the head with `resume_now`. Disabling records the reason `manual`.
pub async fn update(
    pool: &PgPool,
    key: &SealKey,
    tenant: Option<&str>,
    id: &str,
    patch: &Patch,
) -> Result<Option<Webhook>> {
    let mut tx = pool.begin().await?;
    let row: Option<(Vec<u8>,)> = sqlx::query_as(
        "SELECT sealed FROM outbox_webhooks WHERE id = $1 AND ($2::text IS NULL OR tenant_id = $2) FOR UPDATE",
    )
    .bind(id)
    .bind(tenant)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((sealed,)) = row else { return Ok(None) };
    let resealed = match &patch.headers {
        Some(headers) => {
            let mut open = open(key, id, &sealed)?;
            open.headers = headers.clone();
            Some(seal(key, id, &open)?)
        }
        None => None,
    };
    let header_names: Option<Vec<&String>> = patch.headers.as_ref().map(|headers| headers.keys().collect());
    sqlx::query(
        "UPDATE outbox_webhooks SET
            url = COALESCE($2, url),
            types = COALESCE($3, types),
            description = COALESCE($4, description),
            header_names = COALESCE($5, header_names),
            metadata = COALESCE($6, metadata),
            sealed = COALESCE($7, sealed),
            enabled = COALESCE($8, enabled),
            disabled_reason = CASE WHEN $8 IS NULL THEN disabled_reason WHEN $8 THEN NULL ELSE 'manual' END,
            failing_since = CASE WHEN $8 THEN NULL ELSE failing_since END,
            updated_at = compute_now()
         WHERE id = $1",
    )
    .bind(id)
    .bind(&patch.url)
    .bind(&patch.types)
    .bind(&patch.description)
    .bind(&header_names)
    .bind(&patch.metadata)
    .bind(&resealed)
    .bind(patch.enabled)
    .execute(&mut *tx)
    .await?;
    if patch.enabled == Some(true) && patch.resume_now {
        start_at_head(&mut tx, id).await?;
    }
    let webhook = fetch(&mut *tx, None, id).await?;
    tx.commit().await?;
    Ok(webhook)
}

/// Deletes subscription `id` of `tenant` with its cursor, attempts and dead letters;
/// `false` when there is no such one.
pub async fn delete(pool: &PgPool, tenant: Option<&str>, id: &str) -> Result<bool> {
    let mut tx = pool.begin().await?;
    let deleted = sqlx::query("DELETE FROM outbox_webhooks WHERE id = $1 AND ($2::text IS NULL OR tenant_id = $2)")
        .bind(id)
        .bind(tenant)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    if deleted == 0 {
        return Ok(false);
    }
    sqlx::query("DELETE FROM outbox_cursors WHERE stream = $1 AND name = $2")
        .bind(CURSOR_STREAM)
        .bind(id)
        .execute(&mut *tx)
        .await?;
    let sink = dead_letter_sink(id);
    sqlx::query("DELETE FROM outbox_dead_letters WHERE sink = $1").bind(&sink).execute(&mut *tx).await?;
    sqlx::query("DELETE FROM outbox_sink_health WHERE sink = $1").bind(&sink).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(true)
}

/// Makes `new` (or a generated secret) the current secret of subscription `id`; the old
/// one keeps signing for `grace` (at most [`MAX_GRACE`]). Refused when
/// [`MAX_OLD_SECRETS`] are still in their grace period. Answers the subscription and the
/// new secret, the only time it is shown; `None` when there is no such subscription.
pub async fn rotate(
    pool: &PgPool,
    key: &SealKey,
    tenant: Option<&str>,
    id: &str,
    new: Option<Secret>,
    grace: Duration,
) -> Result<Option<(Webhook, Secret)>> {
    if grace > MAX_GRACE {
        return Err(Error::Refused(Refusal::new("gracePeriodSeconds", "at most 604800 (7 days)")));
    }
    let secret = match new {
        Some(secret) => secret,
        None => Secret::from_bytes(random::<GENERATED_SECRET_BYTES>().map_err(seal_error)?.to_vec())
            .map_err(Error::InvalidRequest)?,
    };
    let mut tx = pool.begin().await?;
    let row: Option<(Vec<u8>, i64)> = sqlx::query_as(
        "SELECT sealed, extract(epoch FROM compute_now())::bigint FROM outbox_webhooks
         WHERE id = $1 AND ($2::text IS NULL OR tenant_id = $2) FOR UPDATE",
    )
    .bind(id)
    .bind(tenant)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((sealed, now)) = row else { return Ok(None) };
    let mut keys = open(key, id, &sealed)?;
    keys.previous.retain(|old| old.until > now);
    if keys.previous.len() >= MAX_OLD_SECRETS {
        let rule = format!("{MAX_OLD_SECRETS} rotated secrets are still in their grace period; wait for one to end");
        return Err(Error::Refused(Refusal::new("secret", rule)));
    }
    let until = now.saturating_add(i64::try_from(grace.as_secs()).unwrap_or(i64::MAX));
    let old = std::mem::replace(&mut keys.current, secret.expose());
    if grace > Duration::ZERO {
        keys.previous.push(OldSecret { secret: old, until });
    }
    let resealed = seal(key, id, &keys)?;
    sqlx::query("UPDATE outbox_webhooks SET sealed = $2, updated_at = compute_now() WHERE id = $1")
        .bind(id)
        .bind(&resealed)
        .execute(&mut *tx)
        .await?;
    let webhook = fetch(&mut *tx, None, id).await?.expect("the row just updated");
    tx.commit().await?;
    Ok(Some((webhook, secret)))
}

/// What subscription `id`'s delivery signs with and sends, by the database clock now;
/// `None` when there is no such subscription.
pub async fn keys<'e>(executor: impl PgExecutor<'e>, key: &SealKey, id: &str) -> Result<Option<Keys>> {
    let row: Option<(Vec<u8>, i64)> =
        sqlx::query_as("SELECT sealed, extract(epoch FROM compute_now())::bigint FROM outbox_webhooks WHERE id = $1")
            .bind(id)
            .fetch_optional(executor)
            .await?;
    let Some((sealed, now)) = row else { return Ok(None) };
    let open = open(key, id, &sealed)?;
    let mut signing = vec![parse_sealed_secret(&open.current)?];
    for old in open.previous.iter().filter(|old| old.until > now) {
        signing.push(parse_sealed_secret(&old.secret)?);
    }
    Ok(Some(Keys { signing, headers: open.headers }))
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
    let row: Option<AttemptRow> = sqlx::query_as(
        "SELECT at, event_id, status, duration_ms, error, response FROM outbox_webhook_attempts
         WHERE webhook_id = $1 ORDER BY id DESC LIMIT 1",
    )
    .bind(id)
    .fetch_optional(executor)
    .await?;
    Ok(row.map(attempt_from_row))
}

type AttemptRow = (OffsetDateTime, Option<String>, Option<i32>, i32, Option<String>, Option<String>);

fn attempt_from_row((time, event_id, status, duration, error, response): AttemptRow) -> Attempt {
    Attempt {
        time,
        event_id,
        status: status.and_then(|s| u16::try_from(s).ok()),
        duration_ms: u32::try_from(duration).unwrap_or(0),
        error,
        response,
    }
}

/// Subscription `id`'s kept attempts, newest first; `None` when `tenant` has no such one.
pub async fn attempts(pool: &PgPool, tenant: Option<&str>, id: &str) -> Result<Option<Vec<Attempt>>> {
    if fetch(pool, tenant, id).await?.is_none() {
        return Ok(None);
    }
    let rows: Vec<AttemptRow> = sqlx::query_as(
        "SELECT at, event_id, status, duration_ms, error, response FROM outbox_webhook_attempts
         WHERE webhook_id = $1 ORDER BY id DESC",
    )
    .bind(id)
    .fetch_all(pool)
    .await?;
    Ok(Some(rows.into_iter().map(attempt_from_row).collect()))
}

/// Every enabled subscription's id and when it last changed, in id order: what a delivery
/// process compares with the loops it runs.
pub async fn enabled<'e>(executor: impl PgExecutor<'e>) -> Result<Vec<(String, OffsetDateTime)>> {
    Ok(sqlx::query_as("SELECT id, updated_at FROM outbox_webhooks WHERE enabled ORDER BY id")
        .fetch_all(executor)
        .await?)
}

/// When subscription `id` last changed, while it is enabled; `None` when it is disabled or
/// gone: what a delivery checks before each POST, so that a change is in force once answered.
pub async fn enabled_revision<'e>(executor: impl PgExecutor<'e>, id: &str) -> Result<Option<OffsetDateTime>> {
    let row: Option<(OffsetDateTime,)> =
        sqlx::query_as("SELECT updated_at FROM outbox_webhooks WHERE id = $1 AND enabled")
            .bind(id)
            .fetch_optional(executor)
            .await?;
    Ok(row.map(|(updated_at,)| updated_at))
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

/// Serializes creations and counts of one tenant's subscriptions.
async fn lock_tenant(tx: &mut Transaction<'_, Postgres>, tenant: &str) -> Result<()> {
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('outbox_webhooks:' || $1, 0))")
        .bind(tenant)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Puts subscription `id`'s cursor at the head: it delivers what commits from now on. An
/// outbox that retention emptied has its head at the last row pruned, not before it.
async fn start_at_head(tx: &mut Transaction<'_, Postgres>, id: &str) -> Result<()> {
    let head = crate::read::head(&mut **tx).await?;
    let pruned = crate::internal::cursor::load(&mut **tx, crate::internal::retention::PRUNED_STREAM, "pruned").await?;
    let head = pruned.map_or(head, |pruned| pruned.max(head));
    sqlx::query(
        "INSERT INTO outbox_cursors (stream, name, txid, seq, updated_at)
         VALUES ($1, $2, $3::text::xid8, $4, compute_now())
         ON CONFLICT (stream, name) DO UPDATE
            SET txid = EXCLUDED.txid, seq = EXCLUDED.seq, updated_at = EXCLUDED.updated_at",
    )
    .bind(CURSOR_STREAM)
    .bind(id)
    .bind(head.txid.to_string())
    .bind(i64::try_from(head.seq).unwrap_or(i64::MAX))
    .execute(&mut **tx)
    .await?;
    Ok(())
}

fn seal(key: &SealKey, id: &str, sealed: &Sealed) -> Result<Vec<u8>> {
    let plain = serde_json::to_vec(sealed).map_err(|e| Error::InvalidRequest(format!("sealing {id}: {e}")))?;
    key.seal(id, &plain).map_err(seal_error)
}

fn open(key: &SealKey, id: &str, sealed: &[u8]) -> Result<Sealed> {
    let plain = key.open(id, sealed).map_err(seal_error)?;
    serde_json::from_slice(&plain)
        .map_err(|e| Error::Sealed(format!("the sealed value of {id} is not what was sealed: {e}")))
}

fn parse_sealed_secret(text: &str) -> Result<Secret> {
    Secret::parse(text).map_err(|refusal| Error::Sealed(format!("a sealed secret does not parse: {}", refusal.rule)))
}

fn seal_error(error: crate::internal::seal::SealError) -> Error {
    Error::Sealed(error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shard_is_a_stated_hash_of_the_id() {
        // `printf %s wh_example | sha256sum` starts 74d21c69: 0x74d21c69 % 32 = 9.
        assert_eq!(shard_of("wh_example"), 9);
        let shards: std::collections::BTreeSet<i32> = (0..1000).map(|n| shard_of(&format!("wh_{n}"))).collect();
        assert_eq!(shards.len(), SHARDS as usize, "1,000 ids cover every shard");
        assert!(shards.iter().all(|&s| (0..SHARDS as i32).contains(&s)));
    }
}
