//! A subscription's sealed part: its signing secrets and its extra headers' values, sealed
//! with the [`SealKey`] and bound to the id. [`keys`] opens them for the delivery; no other
//! function returns them except the secret made by [`super::create`] and [`rotate`].

use std::collections::BTreeMap;
use std::time::Duration;

use outbox_core::webhook::{Refusal, Secret};
use serde::{Deserialize, Serialize};
use sqlx::{PgExecutor, PgPool};

use super::{Webhook, fetch};
use crate::internal::seal::{SealKey, random};
use crate::{Error, Result};

/// How many secrets may be in their grace period at once, besides the current one.
pub const MAX_OLD_SECRETS: usize = 10;
/// The longest grace period of a rotated secret.
pub const MAX_GRACE: Duration = Duration::from_secs(7 * 24 * 3600);
/// The bytes of a generated secret.
const GENERATED_SECRET_BYTES: usize = 24;

/// What is sealed in a row: the signing secrets and the headers' values.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Sealed {
    pub(super) current: String,
    #[serde(default)]
    previous: Vec<OldSecret>,
    #[serde(default)]
    pub(super) headers: BTreeMap<String, String>,
}

impl Sealed {
    /// A new subscription's: `secret` and `headers`, no rotated secret.
    pub(super) fn new(secret: &Secret, headers: BTreeMap<String, String>) -> Sealed {
        Sealed { current: secret.expose(), previous: Vec::new(), headers }
    }
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

/// `given`, or a new random secret.
pub(super) fn secret_or_generated(given: Option<Secret>) -> Result<Secret> {
    match given {
        Some(secret) => Ok(secret),
        None => Secret::from_bytes(random::<GENERATED_SECRET_BYTES>().map_err(seal_error)?.to_vec())
            .map_err(Error::InvalidRequest),
    }
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
    let secret = secret_or_generated(new)?;
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

pub(super) fn seal(key: &SealKey, id: &str, sealed: &Sealed) -> Result<Vec<u8>> {
    let plain = serde_json::to_vec(sealed).map_err(|e| Error::InvalidRequest(format!("sealing {id}: {e}")))?;
    key.seal(id, &plain).map_err(seal_error)
}

pub(super) fn open(key: &SealKey, id: &str, sealed: &[u8]) -> Result<Sealed> {
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
