//! Webhook subscriptions' rows (SPEC §7.6): create, read, change and delete a tenant's
//! subscriptions; their sealed secrets ([`secrets`]) and their delivery attempts
//! ([`attempts`](mod@attempts)) have modules of their own.
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
//!
//! [`overview`] and [`list`] read a subscription with what its views show beside it (its
//! lag, counted up to [`LAG_CAP`], and its newest attempt) in one statement: a page of
//! subscriptions is one query.

use std::collections::BTreeMap;

use outbox_core::Position;
use outbox_core::webhook::{Refusal, Secret};
use sha2::{Digest, Sha256};
use sqlx::postgres::PgRow;
use sqlx::{AssertSqlSafe, PgExecutor, PgPool, Postgres, Row as _, Transaction};
use time::OffsetDateTime;

use crate::internal::cursor::{LAG_CAP, lane_name};
use crate::internal::seal::SealKey;
use crate::{Error, Lane, Result};

pub mod attempts;
pub mod secrets;

pub use attempts::{
    ATTEMPTS_KEPT, Attempt, NewAttempt, Outcome, attempts, last_attempt, record_attempt, record_outcome,
};
pub use secrets::{Keys, MAX_GRACE, MAX_OLD_SECRETS, keys, rotate};

use secrets::{Sealed, open, seal, secret_or_generated};

/// The stream of subscriptions' cursors in `outbox_cursors`; the name is the id.
pub const CURSOR_STREAM: &str = "webhooks";
/// How many shards subscriptions are spread over ([`shard_of`]).
pub const SHARDS: u32 = 32;

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
    /// Ordered lanes, 1 to 256 (SPEC §7.7); one when `None`.
    pub lanes: Option<u32>,
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
    /// A new number of ordered lanes: the new lanes start at the slowest old lane's cursor.
    pub lanes: Option<u32>,
}

/// A subscription's row (never its secrets or header values).
#[derive(Debug, Clone, PartialEq)]
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
    pub failing_since: Option<OffsetDateTime>,
    /// How many ordered lanes it delivers in (SPEC §7.7).
    pub lanes: u32,
    /// Its cursor (the slowest lane's): how far it delivered everything.
    pub position: Position,
    /// Whether retention deleted rows after its cursor (while it was disabled): events it
    /// will never receive.
    pub gap: bool,
    /// When it was created.
    pub created_at: OffsetDateTime,
    /// When it last changed.
    pub updated_at: OffsetDateTime,
}

/// A subscription with what its views show beside it, read in the same statement.
#[derive(Debug, Clone, PartialEq)]
pub struct Overview {
    /// The subscription.
    pub webhook: Webhook,
    /// The visible events of its tenant matching its types after its cursor, counted up
    /// to [`LAG_CAP`].
    pub lag: u64,
    /// Its newest attempt, if it made one.
    pub last_attempt: Option<Attempt>,
}

impl Overview {
    /// Whether the count of `lag` stopped at [`LAG_CAP`]: "at least this many".
    pub fn lag_capped(&self) -> bool {
        self.lag >= LAG_CAP
    }
}

/// A subscription's columns, named as [`from_row`] reads them: the row, its cursor (the
/// start when it has none yet) and whether retention pruned past it.
const COLUMNS: &str = "w.id, w.tenant_id, w.url, w.types, w.description, w.header_names, w.metadata, w.enabled, \
     w.disabled_reason, w.failing_since, w.created_at, w.updated_at, w.lanes, \
     COALESCE(c.txid, '0'::xid8)::text::bigint AS txid, COALESCE(c.seq, 0) AS seq, \
     EXISTS (SELECT 1 FROM outbox_cursors p WHERE p.stream = 'retention' AND p.name = 'pruned' \
             AND (p.txid, p.seq) > (COALESCE(c.txid, '0'::xid8), COALESCE(c.seq, 0))) AS gap";

/// The subscription and its slowest cursor: its own, or its slowest lane's (SPEC §7.7).
const FROM: &str = "outbox_webhooks w LEFT JOIN LATERAL (
        SELECT txid, seq FROM outbox_cursors
        WHERE stream = 'webhooks' AND (name = w.id OR starts_with(name, w.id || '#'))
        ORDER BY txid, seq LIMIT 1
    ) c ON true";

/// The lag of the subscription `w` after cursor `c` (`$1` is the cap) under the xmin rule,
/// as `cursor::lag` counts it, with the types matched as `Pattern::to_sql_like` writes
/// them (`*` alone, or no type, matches all), and `lane` a further condition on `o`.
fn lag_join(lane: &str) -> String {
    format!(
        r"
    LEFT JOIN LATERAL (
        SELECT count(*) AS lag FROM (
            SELECT 1 FROM outbox o
            WHERE o.txid < pg_snapshot_xmin(pg_current_snapshot())
              AND (o.txid, o.seq) > (COALESCE(c.txid, '0'::xid8), COALESCE(c.seq, 0))
              AND o.payload->>'tenantId' = w.tenant_id
              AND (cardinality(w.types) = 0 OR EXISTS (
                  SELECT 1 FROM unnest(w.types) t(pattern)
                  WHERE t.pattern ~ '^\*+$' OR o.topic LIKE replace(replace(replace(replace(
                      t.pattern, '\', '\\'), '%', '\%'), '_', '\_'), '*', '%')))
              {lane}
            LIMIT $1
        ) behind
    ) l ON true"
    )
}

/// What [`overview`] and [`list`] add to [`FROM`]: the lag after the slowest cursor and
/// the newest attempt.
fn overview_joins() -> String {
    format!(
        "{} LEFT JOIN LATERAL (
            SELECT * FROM outbox_webhook_attempts a WHERE a.webhook_id = w.id ORDER BY a.id DESC LIMIT 1
        ) a ON true",
        lag_join("")
    )
}

/// A row of [`COLUMNS`], by column name.
fn from_row(row: &PgRow) -> std::result::Result<Webhook, sqlx::Error> {
    let txid: i64 = row.try_get("txid")?;
    let seq: i64 = row.try_get("seq")?;
    Ok(Webhook {
        id: row.try_get("id")?,
        tenant_id: row.try_get("tenant_id")?,
        url: row.try_get("url")?,
        types: row.try_get("types")?,
        description: row.try_get("description")?,
        header_names: row.try_get("header_names")?,
        metadata: row.try_get("metadata")?,
        enabled: row.try_get("enabled")?,
        disabled_reason: row.try_get("disabled_reason")?,
        failing_since: row.try_get("failing_since")?,
        lanes: u32::try_from(row.try_get::<i32, _>("lanes")?).unwrap_or(1),
        position: Position::new(u64::try_from(txid).unwrap_or(0), u64::try_from(seq).unwrap_or(0)),
        gap: row.try_get("gap")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

/// A row of [`overview_statement`].
fn overview_from_row(row: PgRow) -> std::result::Result<Overview, sqlx::Error> {
    let lag: i64 = row.try_get("lag")?;
    Ok(Overview {
        webhook: from_row(&row)?,
        lag: u64::try_from(lag).unwrap_or(0),
        last_attempt: attempts::attempt_from_row(&row, "last_")?,
    })
}

/// The statement of [`overview`] and [`list`], with `filter` (its binds from `$2`) and `tail`.
pub fn overview_statement(filter: &str, tail: &str) -> String {
    format!(
        "SELECT {COLUMNS}, l.lag, {} FROM {FROM} {} WHERE {filter} {tail}",
        attempts::attempt_columns("a", "last_"),
        overview_joins()
    )
}

fn cap() -> i64 {
    i64::try_from(LAG_CAP).unwrap_or(i64::MAX)
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
    let secret = secret_or_generated(new.secret.clone())?;
    let sealed = seal(key, &id, &Sealed::new(&secret, new.headers.clone()))?;
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
        "INSERT INTO outbox_webhooks (id, tenant_id, url, types, description, header_names, metadata, sealed, shard, lanes)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
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
    .bind(i32::try_from(new.lanes.unwrap_or(1)).unwrap_or(1))
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

pub(crate) async fn fetch<'e>(
    executor: impl PgExecutor<'e>,
    tenant: Option<&str>,
    id: &str,
) -> Result<Option<Webhook>> {
    let statement = format!("SELECT {COLUMNS} FROM {FROM} WHERE w.id = $1 AND ($2::text IS NULL OR w.tenant_id = $2)");
    let row = sqlx::query(AssertSqlSafe(statement))
        .bind(id)
        .bind(tenant)
        .try_map(|row: PgRow| from_row(&row))
        .fetch_optional(executor)
        .await?;
    Ok(row)
}

/// Subscription `id` with its lag and newest attempt, if `tenant` (or any, with `None`) has it.
pub async fn overview<'e>(executor: impl PgExecutor<'e>, tenant: Option<&str>, id: &str) -> Result<Option<Overview>> {
    let statement = overview_statement("w.id = $2 AND ($3::text IS NULL OR w.tenant_id = $3)", "");
    let row = sqlx::query(AssertSqlSafe(statement))
        .bind(cap())
        .bind(id)
        .bind(tenant)
        .try_map(overview_from_row)
        .fetch_optional(executor)
        .await?;
    Ok(row)
}

/// One ordered lane of a subscription (SPEC §7.7), as its detail shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneLag {
    /// The lane's index, 0 to `lanes - 1`.
    pub lane: u32,
    /// Its cursor (the start when it has none yet).
    pub position: Position,
    /// Its events after its cursor, counted up to [`LAG_CAP`].
    pub lag: u64,
}

/// Each lane of `webhook` with its cursor and lag, lane 0 first: one statement.
pub async fn lane_lags<'e>(executor: impl PgExecutor<'e>, webhook: &Webhook) -> Result<Vec<LaneLag>> {
    let names: Vec<String> = (0..webhook.lanes)
        .filter_map(|index| Lane::new(index, webhook.lanes))
        .map(|l| lane_name(&webhook.id, l))
        .collect();
    let statement = format!(
        "SELECT (n.ordinality - 1)::int AS lane, COALESCE(c.txid, '0'::xid8)::text::bigint AS txid,
                COALESCE(c.seq, 0) AS seq, l.lag
         FROM outbox_webhooks w
         CROSS JOIN unnest($2::text[]) WITH ORDINALITY n(name, ordinality)
         LEFT JOIN outbox_cursors c ON c.stream = 'webhooks' AND c.name = n.name
         {}
         WHERE w.id = $4 ORDER BY n.ordinality",
        lag_join("AND ($3 = 1 OR outbox_subject_lane(o.payload->>'subject', $3) = n.ordinality - 1)")
    );
    let rows: Vec<(i32, i64, i64, i64)> = sqlx::query_as(AssertSqlSafe(statement))
        .bind(cap())
        .bind(&names)
        .bind(i32::try_from(webhook.lanes).unwrap_or(1))
        .bind(&webhook.id)
        .fetch_all(executor)
        .await?;
    Ok(rows
        .into_iter()
        .map(|(lane, txid, seq, lag)| LaneLag {
            lane: u32::try_from(lane).unwrap_or(0),
            position: Position::new(u64::try_from(txid).unwrap_or(0), u64::try_from(seq).unwrap_or(0)),
            lag: u64::try_from(lag).unwrap_or(0),
        })
        .collect())
}

/// Up to `limit` of `tenant`'s subscriptions after id `after`, in id order (ids grow with
/// time, so oldest first), each with its lag and newest attempt: one statement.
pub async fn list<'e>(
    executor: impl PgExecutor<'e>,
    tenant: &str,
    after: Option<&str>,
    limit: usize,
) -> Result<Vec<Overview>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let statement =
        overview_statement("w.tenant_id = $2 AND ($3::text IS NULL OR w.id > $3)", "ORDER BY w.id LIMIT $4");
    let rows = sqlx::query(AssertSqlSafe(statement))
        .bind(cap())
        .bind(tenant)
        .bind(after)
        .bind(limit)
        .try_map(overview_from_row)
        .fetch_all(executor)
        .await?;
    Ok(rows)
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
            lanes = COALESCE($9, lanes),
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
    .bind(patch.lanes.and_then(|lanes| i32::try_from(lanes).ok()))
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
    delete_cursors(&mut tx, id).await?;
    let sink = dead_letter_sink(id);
    sqlx::query("DELETE FROM outbox_dead_letters WHERE sink = $1").bind(&sink).execute(&mut *tx).await?;
    sqlx::query("DELETE FROM outbox_sink_health WHERE sink = $1").bind(&sink).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(true)
}

/// An enabled subscription as a delivery process runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enabled {
    /// Its id.
    pub id: String,
    /// When it last changed: its revision.
    pub updated_at: OffsetDateTime,
    /// How many ordered lanes it delivers in.
    pub lanes: u32,
}

/// Every enabled subscription's id, revision and lanes, in id order: what a delivery
/// process compares with the loops it runs.
pub async fn enabled<'e>(executor: impl PgExecutor<'e>) -> Result<Vec<Enabled>> {
    let rows: Vec<(String, OffsetDateTime, i32)> =
        sqlx::query_as("SELECT id, updated_at, lanes FROM outbox_webhooks WHERE enabled ORDER BY id")
            .fetch_all(executor)
            .await?;
    Ok(rows
        .into_iter()
        .map(|(id, updated_at, lanes)| Enabled { id, updated_at, lanes: u32::try_from(lanes).unwrap_or(1) })
        .collect())
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

/// Serializes creations and counts of one tenant's subscriptions.
async fn lock_tenant(tx: &mut Transaction<'_, Postgres>, tenant: &str) -> Result<()> {
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('outbox_webhooks:' || $1, 0))")
        .bind(tenant)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Deletes subscription `id`'s cursors: its own and its lanes'.
async fn delete_cursors(tx: &mut Transaction<'_, Postgres>, id: &str) -> Result<()> {
    sqlx::query("DELETE FROM outbox_cursors WHERE stream = $1 AND (name = $2 OR starts_with(name, $2 || '#'))")
        .bind(CURSOR_STREAM)
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Puts subscription `id`'s cursor at the head: it delivers what commits from now on. An
/// outbox that retention emptied has its head at the last row pruned, not before it. Its
/// lanes' cursors go: each lane starts from this one (SPEC §7.7).
async fn start_at_head(tx: &mut Transaction<'_, Postgres>, id: &str) -> Result<()> {
    delete_cursors(tx, id).await?;
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
