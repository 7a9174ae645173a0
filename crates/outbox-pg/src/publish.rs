//! Publishing: write events into the caller's transaction (SPEC §3.1).
//!
//! The event exists if and only if the caller's transaction commits. A batch is
//! validated whole before anything is written, then written in ONE statement
//! (`INSERT … SELECT FROM unnest(…) WITH ORDINALITY`), so `seq` follows input
//! order. The outbox adds `id` (`evt_` + a lowercase ULID, monotonic within a
//! batch) and stamps `created_at`, the event's `time`, from one reading of
//! `compute_now()` in that same statement. The payload holds `{id, tenantId,
//! subject, data}`: the type is `topic`, the time `created_at`.

use outbox_core::{Catalog, Limits, NewEvent, ValidationError};
use serde::Serialize;
use serde_json::Value;
use sqlx::PgExecutor;

use crate::Result;

/// One event; `$2` is its payload's JSON text. `created_at` is the event's `time`.
const INSERT_ONE: &str = "INSERT INTO outbox (topic, payload, created_at) VALUES ($1, $2::jsonb, compute_now())";

/// A batch in one statement, stamped from one reading of the clock; `WITH ORDINALITY … ORDER
/// BY ord` draws `seq` in input order.
const INSERT_MANY: &str = "INSERT INTO outbox (topic, payload, created_at)
    SELECT e.topic, e.payload::jsonb, clock.now
    FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS e(topic, payload, ord)
    CROSS JOIN (SELECT compute_now() AS now) clock
    ORDER BY e.ord";

/// Writes one event into the caller's transaction; returns its id.
pub async fn publish<'e>(executor: impl PgExecutor<'e>, event: &NewEvent) -> Result<String> {
    Publisher::default().publish(executor, event).await
}

/// Writes a batch into the caller's transaction in one statement; returns the ids in input order.
pub async fn publish_many<'e>(executor: impl PgExecutor<'e>, events: &[NewEvent]) -> Result<Vec<String>> {
    Publisher::default().publish_many(executor, events).await
}

/// Publishing with non-default limits or the strict catalog mode.
#[derive(Debug, Clone, Default)]
pub struct Publisher {
    limits: Limits,
    strict: Option<Catalog>,
}

impl Publisher {
    /// A publisher with the SPEC's default limits, accepting any valid type.
    pub fn new() -> Publisher {
        Publisher::default()
    }

    /// Replaces the size limits.
    pub fn with_limits(mut self, limits: Limits) -> Publisher {
        self.limits = limits;
        self
    }

    /// Refuses types that no entry of `catalog` matches.
    pub fn strict(mut self, catalog: Catalog) -> Publisher {
        self.strict = Some(catalog);
        self
    }

    /// Writes one event; returns its id.
    pub async fn publish<'e>(&self, executor: impl PgExecutor<'e>, event: &NewEvent) -> Result<String> {
        self.validate(std::slice::from_ref(event))?;
        let id = new_ids(1).remove(0);
        sqlx::query(INSERT_ONE)
            .bind(&event.event_type)
            .bind(StoredPayload::new(&id, event).to_json())
            .execute(executor)
            .await?;
        Ok(id)
    }

    /// Writes a batch in one statement, `seq` in input order; returns the ids in input order.
    /// An empty batch writes nothing.
    pub async fn publish_many<'e>(&self, executor: impl PgExecutor<'e>, events: &[NewEvent]) -> Result<Vec<String>> {
        self.validate(events)?;
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let ids = new_ids(events.len());
        let topics: Vec<&str> = events.iter().map(|e| e.event_type.as_str()).collect();
        let payloads: Vec<String> =
            ids.iter().zip(events).map(|(id, event)| StoredPayload::new(id, event).to_json()).collect();
        sqlx::query(INSERT_MANY).bind(&topics).bind(&payloads).execute(executor).await?;
        Ok(ids)
    }

    fn validate(&self, events: &[NewEvent]) -> Result<()> {
        outbox_core::validate::validate_batch(events, &self.limits)?;
        let Some(catalog) = &self.strict else { return Ok(()) };
        match events.iter().position(|e| !catalog.check_type(&e.event_type)) {
            None => Ok(()),
            Some(index) => Err(ValidationError {
                index: Some(index),
                field: "type",
                rule: format!("must belong to the event catalog (got {:?})", events[index].event_type),
            }
            .into()),
        }
    }
}

/// The stored `payload`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StoredPayload<'a> {
    id: &'a str,
    tenant_id: &'a str,
    subject: &'a str,
    data: &'a Value,
}

impl<'a> StoredPayload<'a> {
    fn new(id: &'a str, event: &'a NewEvent) -> StoredPayload<'a> {
        StoredPayload { id, tenant_id: &event.tenant_id, subject: &event.subject, data: &event.data }
    }

    fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a payload of strings and a JSON value always serializes")
    }
}

/// `n` fresh event ids, `evt_` + lowercase ULID, increasing within the call.
fn new_ids(n: usize) -> Vec<String> {
    let mut generator = ulid::Generator::new();
    (0..n)
        .map(|_| {
            let ulid = generator.generate().unwrap_or_else(|_| ulid::Ulid::generate());
            format!("evt_{}", ulid.to_string().to_ascii_lowercase())
        })
        .collect()
}
