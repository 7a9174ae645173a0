//! The writers: tasks that publish through `outbox_pg` into their own transactions, over
//! the fault proxy, and record what they attempted and how it ended.
//!
//! Each transaction is one of: a single `publish`; a `publish_many` of up to five events
//! (25 in the `long` profile);
//! one that writes elsewhere first (a row of `torture_side`, so that it holds an older
//! transaction id while it waits) and publishes late; a slow one that waits after
//! publishing; one, on a connection of its own, whose writer "dies" mid-commit: the
//! connection is dropped a few milliseconds after `COMMIT` was sent, answered or not.
//! About one in five is rolled back on purpose. A failure before `COMMIT` rolls the
//! transaction back; a failure during `COMMIT` (or a writer killed before the answer) leaves
//! the outcome unknown, and the checker resolves it from the table. Most events are tenant [`TENANT`]'s, some
//! [`OTHER_TENANT`]'s.
//!
//! [`run_http`] writers publish through `POST /events` of whichever server is up instead
//! (the tenant's own events, one or a batch). An answer that never came (a server killed or
//! stopped, a 5xx) leaves the outcome unknown: each event carries a token in its data, by
//! which [`resolve_tokens`] finds what was stored.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use outbox_core::NewEvent;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use super::checker::Writes;
use super::services::{OTHER_TENANT, TENANT};

/// The types the writers publish.
pub(crate) const TYPES: [&str; 4] = ["node.joined", "node.left", "pool.created", "pool.deleted"];

/// The side table a transaction writes before it publishes.
pub(crate) const SIDE_TABLE: &str = "CREATE TABLE IF NOT EXISTS torture_side (n bigint NOT NULL)";

/// How the writers behave.
#[derive(Clone, Copy)]
pub(crate) struct WriterPlan {
    pub(crate) writers: usize,
    /// The longest a slow transaction waits.
    pub(crate) slow_max: Duration,
    /// The pause between two transactions of one writer, at most.
    pub(crate) pause_max: Duration,
    /// The most events a `publish_many` writes.
    pub(crate) batch_max: usize,
}

/// Runs `plan.writers` writers on `url` until `stop`; returns what they recorded.
pub(crate) async fn run(url: String, plan: WriterPlan, seed: u64, stop: Arc<AtomicBool>) -> anyhow::Result<Writes> {
    let writes = Arc::new(Mutex::new(Writes::default()));
    let mut tasks = Vec::new();
    for number in 0..plan.writers {
        let options: sqlx::postgres::PgConnectOptions = url.parse()?;
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(5))
            .connect_lazy_with(options.clone().application_name(&format!("torture-writer-{number}")));
        let writer = Writer {
            number,
            options: options.application_name(&format!("torture-writer-{number}-killed")),
            pool,
            plan,
            rng: StdRng::seed_from_u64(seed.wrapping_mul(1000).wrapping_add(number as u64)),
            writes: writes.clone(),
        };
        tasks.push(tokio::spawn(writer.run(stop.clone())));
    }
    for task in tasks {
        task.await?;
    }
    let writes = std::mem::take(&mut *writes.lock());
    Ok(writes)
}

struct Writer {
    number: usize,
    /// For a connection of its own, which a [`Shape::Killed`] transaction abandons.
    options: sqlx::postgres::PgConnectOptions,
    pool: sqlx::PgPool,
    plan: WriterPlan,
    rng: StdRng,
    writes: Arc<Mutex<Writes>>,
}

/// What a transaction does before it ends.
enum Shape {
    One,
    Many(usize),
    SideFirst(Duration),
    Slow(Duration),
    /// On a connection of its own, which is dropped (its socket closed) this long after
    /// `COMMIT` was sent, as when the writer's process dies mid-commit.
    Killed(Duration),
}

impl Writer {
    async fn run(mut self, stop: Arc<AtomicBool>) {
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            n += 1;
            let shape = self.shape();
            let roll_back = self.rng.random_bool(0.2);
            let events: Vec<NewEvent> = (0..shape.events()).map(|k| self.event(n, k)).collect();
            self.transaction(n, &shape, &events, roll_back).await;
            let pause = self.rng.random_range(Duration::ZERO..=self.plan.pause_max);
            tokio::time::sleep(pause).await;
        }
        self.pool.close().await;
    }

    fn shape(&mut self) -> Shape {
        let slow = self.rng.random_range(Duration::ZERO..=self.plan.slow_max);
        match self.rng.random_range(0..40) {
            0..=15 => Shape::One,
            16..=27 => Shape::Many(self.rng.random_range(2..=self.plan.batch_max)),
            28..=31 => Shape::SideFirst(slow),
            32..=38 => Shape::Slow(slow),
            _ => Shape::Killed(Duration::from_micros(self.rng.random_range(0..3_000))),
        }
    }

    fn event(&mut self, n: u64, k: usize) -> NewEvent {
        let event_type = TYPES[self.rng.random_range(0..TYPES.len())];
        let tenant = if self.rng.random_bool(0.1) { OTHER_TENANT } else { TENANT };
        let subject = format!("item/{}", self.rng.random_range(0..50));
        NewEvent::new(event_type, tenant, subject, json!({ "writer": self.number, "n": n, "k": k }))
    }

    /// One transaction; records its ids under the outcome.
    async fn transaction(&mut self, n: u64, shape: &Shape, events: &[NewEvent], roll_back: bool) {
        if let Shape::Killed(after) = shape {
            return self.killed(events, *after).await;
        }
        let Ok(mut tx) = self.pool.begin().await else { return };
        if let Shape::SideFirst(wait) = shape {
            let side = sqlx::query("INSERT INTO torture_side (n) VALUES ($1)")
                .bind(i64::try_from(n).unwrap_or(i64::MAX))
                .execute(&mut *tx)
                .await;
            if side.is_err() {
                return;
            }
            tokio::time::sleep(*wait).await;
        }
        let ids = match shape {
            Shape::Many(_) => outbox_pg::publish_many(&mut *tx, events).await,
            _ => outbox_pg::publish(&mut *tx, &events[0]).await.map(|id| vec![id]),
        };
        // A failed statement leaves nothing written: the transaction is rolled back.
        let Ok(ids) = ids else { return };
        if let Shape::Slow(wait) = shape {
            tokio::time::sleep(*wait).await;
        }
        if roll_back {
            let _ = tx.rollback().await;
            self.writes.lock().rolled_back.extend(ids);
            return;
        }
        match tx.commit().await {
            Ok(()) => self.writes.lock().committed.extend(ids),
            // The connection may have died before or after the server committed.
            Err(_) => self.writes.lock().unknown.extend(ids),
        }
    }
}

impl Writer {
    /// A transaction whose writer dies mid-commit: `COMMIT` is sent, and `after` later the
    /// connection is dropped whether or not the answer came. An answer that came is
    /// recorded; otherwise the outcome is unknown, whatever the server did.
    async fn killed(&mut self, events: &[NewEvent], after: Duration) {
        use sqlx::Connection;
        let Ok(mut connection) = sqlx::PgConnection::connect_with(&self.options).await else { return };
        let Ok(mut tx) = connection.begin().await else { return };
        let Ok(ids) = outbox_pg::publish_many(&mut *tx, events).await else { return };
        let outcome = tokio::time::timeout(after, tx.commit()).await;
        let mut writes = self.writes.lock();
        match outcome {
            Ok(Ok(())) => writes.committed.extend(ids),
            Ok(Err(_)) | Err(_) => {
                writes.killed += 1;
                writes.unknown.extend(ids);
            }
        }
        // Dropped without a goodbye: the socket closes as a dead process's would.
        drop(connection);
    }
}

impl Shape {
    fn events(&self) -> usize {
        match self {
            Shape::Many(n) => *n,
            _ => 1,
        }
    }
}

/// What the HTTP writers recorded: their outcomes, and the tokens of events whose outcome
/// is unknown (their ids were never answered).
#[derive(Default)]
pub(crate) struct HttpWrites {
    pub(crate) writes: Writes,
    pub(crate) unknown_tokens: Vec<String>,
    /// Answers 4xx: a writer's bug or the server's, printed.
    pub(crate) refused: usize,
}

/// Runs `writers` HTTP writers against the servers of `ports` until `stop`.
pub(crate) async fn run_http(
    ports: super::services::Ports,
    writers: usize,
    seed: u64,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<HttpWrites> {
    let record = Arc::new(Mutex::new(HttpWrites::default()));
    let client = super::consumers::client()?;
    let mut tasks = Vec::new();
    for number in 0..writers {
        let (ports, client, record, stop) = (ports.clone(), client.clone(), record.clone(), stop.clone());
        let mut rng = StdRng::seed_from_u64(seed.wrapping_mul(7919).wrapping_add(number as u64));
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let port = super::consumers::pick(&ports, &mut rng).await;
                let count = if rng.random_bool(0.5) { 1 } else { rng.random_range(2..=5) };
                let events: Vec<serde_json::Value> = (0..count)
                    .map(|k| {
                        json!({
                            "type": TYPES[rng.random_range(0..TYPES.len())],
                            "tenantId": TENANT,
                            "subject": format!("item/{}", rng.random_range(0..50)),
                            "data": { "http": number, "n": n, "k": k, "token": format!("h{number}-{n}-{k}") },
                        })
                    })
                    .collect();
                let tokens: Vec<String> = (0..count).map(|k| format!("h{number}-{n}-{k}")).collect();
                let body = if count == 1 { events[0].clone() } else { json!({ "events": events }) };
                let answer = client
                    .post(format!("http://127.0.0.1:{port}/events"))
                    .bearer_auth(super::services::TOKEN)
                    .json(&body)
                    .timeout(Duration::from_secs(5))
                    .send()
                    .await;
                let outcome = match answer {
                    Ok(answer) if answer.status().is_success() => answer.json::<Ids>().await.ok().map(Ok),
                    Ok(answer) if answer.status().is_client_error() => Some(Err(())),
                    _ => None,
                };
                {
                    let mut record = record.lock();
                    match outcome {
                        Some(Ok(ids)) => record.writes.committed.extend(ids.ids),
                        Some(Err(())) => record.refused += 1,
                        None => record.unknown_tokens.extend(tokens),
                    }
                }
                tokio::time::sleep(Duration::from_millis(rng.random_range(0..50))).await;
            }
        }));
    }
    for task in tasks {
        task.await?;
    }
    let recorded = std::mem::take(&mut *record.lock());
    Ok(recorded)
}

#[derive(serde::Deserialize)]
struct Ids {
    ids: Vec<String>,
}

/// The ids of the stored events whose data carries one of `tokens`.
pub(crate) async fn resolve_tokens(admin: &sqlx::PgPool, tokens: &[String]) -> anyhow::Result<Vec<String>> {
    let ids: Vec<String> =
        sqlx::query_scalar("SELECT payload->>'id' FROM outbox WHERE payload->'data'->>'token' = ANY($1)")
            .bind(tokens)
            .fetch_all(admin)
            .await?;
    Ok(ids)
}
