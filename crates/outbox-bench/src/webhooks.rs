//! `cargo xtask bench webhooks`: what webhook subscriptions cost, side by side in one run,
//! PostgreSQL over TCP (SPEC §7.6, issue 23).
//!
//! One process runs `outbox_workers::WebhookDeliveries` as the server does (the shared tail
//! feeding caught-up subscriptions, shard leases) against a receiver on loopback that
//! answers 200 at once:
//! - **idle statements/s** with 1 and with 1,000 idle subscriptions: `xact_commit +
//!   xact_rollback` of the bench database in `pg_stat_database` over a window, as `bench
//!   fanout` counts them (target: 1,000
//!   cost at most 1.5 × one);
//! - **commit-to-receiver** p50/p99 for events that match 100 subscriptions, one per
//!   transaction, each delivery timed from just before `COMMIT` (target: p99 ≤ 3 × the tail's
//!   `poll_ms` plus the receiver's own time, here none);
//! - **delivered events/s through one subscription** against a bare loop of signed POSTs of
//!   the same bodies to the same receiver with the same client settings (target ≥ 0.7),
//!   each rate taken at the receiver between the first and the last arrival.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use outbox_core::NewEvent;
use outbox_core::target::TargetPolicy;
use outbox_pg::internal::seal::SealKey;
use outbox_pg::internal::webhook::{self as store, NewWebhook};
use outbox_workers::{DispatcherConfig, WebhookDeliveries, WebhookDeliveryConfig};
use parking_lot::Mutex;
use serde_json::json;
use sqlx::PgPool;

use crate::fanout::idle_statements;
use outbox_services::{ScratchDatabase, Transport, Transports, postgres};

const POLL_MS: u64 = 100;
const LATENCY_EVENTS: usize = 12;
const THROUGHPUT_EVENTS: usize = 10_000;

pub(crate) fn run(_transports: Transports) -> anyhow::Result<()> {
    let server = postgres()?;
    outbox_services::runtime()?.block_on(async {
        let url = server.url_over(Transport::Tcp)?;
        let db = ScratchDatabase::create(&url, "outbox_bench_webhooks").await?;
        let pool = db.pool_on(&url, 10).await?;
        let admin = db.pool_on(&url, 2).await?;
        let result = bench(&pool, &admin, db_name(&db)).await;
        pool.close().await;
        admin.close().await;
        db.drop_now().await?;
        result
    })
}

fn db_name(db: &ScratchDatabase) -> String {
    db.pool.connect_options().get_database().unwrap_or_default().to_owned()
}

/// A receiver on loopback: notes when each event id arrived.
struct Receiver {
    url: String,
    arrivals: Arc<Mutex<BTreeMap<String, Vec<Instant>>>>,
}

async fn receiver() -> anyhow::Result<Receiver> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/hook", listener.local_addr()?);
    let arrivals: Arc<Mutex<BTreeMap<String, Vec<Instant>>>> = Arc::default();
    let note = arrivals.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let note = note.clone();
            let service = hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                let note = note.clone();
                async move {
                    let id = request.headers().get("webhook-id").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
                    let _ = request.into_body().collect().await;
                    note.lock().entry(id).or_default().push(Instant::now());
                    Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::new())))
                }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service),
            );
        }
    });
    Ok(Receiver { url, arrivals })
}

impl Receiver {
    /// Events per second between the first and the last first arrival of `ids`.
    fn rate(&self, ids: &[String]) -> f64 {
        let arrivals = self.arrivals.lock();
        let firsts: Vec<Instant> = ids.iter().filter_map(|id| arrivals.get(id)?.first().copied()).collect();
        let (Some(first), Some(last)) = (firsts.iter().min(), firsts.iter().max()) else { return 0.0 };
        firsts.len().saturating_sub(1) as f64 / last.duration_since(*first).as_secs_f64().max(f64::MIN_POSITIVE)
    }
}

async fn subscribe(pool: &PgPool, key: &SealKey, tenant: &str, url: &str, n: usize) -> anyhow::Result<()> {
    for _ in 0..n {
        let new =
            NewWebhook { url: url.into(), types: vec!["node.*".into()], metadata: json!({}), ..NewWebhook::default() };
        store::create(pool, key, tenant, &new, 10_000).await?;
    }
    Ok(())
}

fn deliveries(pool: &PgPool, key: &Arc<SealKey>) -> anyhow::Result<(WebhookDeliveries, outbox_pg::Tail)> {
    let tail = outbox_pg::Tail::new(
        pool.clone(),
        outbox_pg::TailOptions { poll: Duration::from_millis(POLL_MS), ..outbox_pg::TailOptions::default() },
    );
    let config = WebhookDeliveryConfig {
        targets: TargetPolicy { allow_private: true, allowed: Vec::new() },
        dispatcher: DispatcherConfig { tail: Some(tail.clone()), ..DispatcherConfig::default() },
        ..WebhookDeliveryConfig::default()
    };
    Ok((WebhookDeliveries::start(pool.clone(), key.clone(), config)?, tail))
}

async fn wait_until(what: &str, mut done: impl FnMut() -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !done() {
        anyhow::ensure!(Instant::now() < deadline, "gave up waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

async fn bench(pool: &PgPool, admin: &PgPool, name: String) -> anyhow::Result<()> {
    let key = Arc::new(SealKey::parse(&SealKey::generate()?)?);
    let receiver = receiver().await?;

    // Idle: one subscription, then a thousand, each caught up and waiting on the tail.
    subscribe(pool, &key, "idle", &receiver.url, 1).await?;
    let (running, tail) = deliveries(pool, &key)?;
    wait_until("the subscription waiting on the tail", || tail.members() == 1).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let one = idle_statements(admin, &name).await?;
    subscribe(pool, &key, "idle", &receiver.url, 999).await?;
    eprintln!("bench webhooks: 1,000 subscriptions created; waiting for every loop to wait on the tail");
    wait_until("1,000 loops waiting on the tail", || tail.members() == 1_000).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let thousand = idle_statements(admin, &name).await?;
    running.shutdown().await;
    sqlx::query("DELETE FROM outbox_webhooks").execute(pool).await?;

    // Latency: events matching 100 subscriptions.
    subscribe(pool, &key, "fan", &receiver.url, 100).await?;
    let (running, tail) = deliveries(pool, &key)?;
    wait_until("100 loops waiting on the tail", || tail.members() == 100).await?;
    let mut samples = Vec::new();
    for k in 0..LATENCY_EVENTS {
        let event = NewEvent::new("node.joined", "fan", "node/n1", json!({ "k": k }));
        let mut tx = pool.begin().await?;
        let id = outbox_pg::publish(&mut *tx, &event).await?;
        let committing = Instant::now();
        tx.commit().await?;
        let arrivals = receiver.arrivals.clone();
        wait_until("an event at 100 subscriptions", || arrivals.lock().get(&id).is_some_and(|a| a.len() >= 100))
            .await?;
        let times = receiver.arrivals.lock().get(&id).cloned().unwrap_or_default();
        samples.extend(times.iter().map(|at| at.duration_since(committing).as_secs_f64() * 1e3));
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    running.shutdown().await;
    sqlx::query("DELETE FROM outbox_webhooks").execute(pool).await?;
    samples.sort_by(f64::total_cmp);
    let quantile = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
    let (p50, p99) = (quantile(0.5), quantile(0.99));

    // Throughput through one subscription, against a bare loop of signed POSTs. Both rates
    // are taken at the receiver, from the first of the events' arrivals to the last, so the
    // subscription's start (its shard lease, its first read) is not counted as delivery.
    subscribe(pool, &key, "flow", &receiver.url, 1).await?;
    let events: Vec<NewEvent> =
        (0..THROUGHPUT_EVENTS).map(|k| NewEvent::new("node.joined", "flow", "node/n1", json!({ "k": k }))).collect();
    let mut ids = Vec::with_capacity(THROUGHPUT_EVENTS);
    for chunk in events.chunks(1_000) {
        ids.extend(outbox_pg::publish_many(pool, chunk).await?);
    }
    outbox_pg::testkit::settle(pool, Duration::from_secs(60)).await;
    let (running, _tail) = deliveries(pool, &key)?;
    let arrivals = receiver.arrivals.clone();
    wait_until("every event through one subscription", || {
        let arrivals = arrivals.lock();
        ids.iter().all(|id| arrivals.contains_key(id))
    })
    .await?;
    running.shutdown().await;
    let through_one = receiver.rate(&ids);
    let bare_ids = bare_posts(&receiver.url, THROUGHPUT_EVENTS).await?;
    let bare = receiver.rate(&bare_ids);

    println!("bench webhooks: PostgreSQL over TCP, the shared tail polling every {POLL_MS} ms, a receiver on loopback");
    println!("  idle statements/s, 1 subscription          {one:8.1}");
    println!("  idle statements/s, 1,000 subscriptions     {thousand:8.1}");
    println!(
        "  commit to receiver, 100 subscriptions      p50 {p50:.0} ms, p99 {p99:.0} ms ({} deliveries)",
        samples.len()
    );
    println!("  one subscription                           {through_one:8.0} events/s");
    println!("  bare signed POSTs                          {bare:8.0} events/s");
    let verdict = |ok: bool| if ok { "meets" } else { "misses" };
    let idle = thousand / one.max(f64::MIN_POSITIVE);
    println!("  ratio idle 1,000 / 1 = {idle:.2} ({} target <= 1.50)", verdict(idle <= 1.5));
    let bound = 3.0 * POLL_MS as f64;
    println!("  p99 = {p99:.0} ms ({} target <= {bound:.0} ms)", verdict(p99 <= bound));
    let ratio = through_one / bare;
    println!("  ratio one subscription / bare POSTs = {ratio:.2} ({} target >= 0.70)", verdict(ratio >= 0.7));
    Ok(())
}

/// `count` signed POSTs of event-sized bodies, one after the other, as the delivery sends
/// them; returns their ids.
async fn bare_posts(url: &str, count: usize) -> anyhow::Result<Vec<String>> {
    use base64::Engine;
    use hmac::{KeyInit, Mac};
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(15))
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .build()
        .context("a client")?;
    let key = [7u8; 24];
    let mut ids = Vec::with_capacity(count);
    for k in 0..count {
        let body =
            json!({"id": format!("evt_bare_{k}"), "type": "node.joined", "tenantId": "flow", "subject": "node/n1",
            "time": "2026-12-01T00:00:00.000Z", "sequence": "1.1", "data": {"k": k}})
            .to_string();
        let timestamp = time::OffsetDateTime::now_utc().unix_timestamp();
        let mut mac = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(&key).expect("any key length");
        mac.update(format!("evt_bare_{k}.{timestamp}.").as_bytes());
        mac.update(body.as_bytes());
        let signature = format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes()));
        let response = client
            .post(url)
            .header("content-type", "application/json")
            .header("webhook-id", format!("evt_bare_{k}"))
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(body)
            .send()
            .await?;
        anyhow::ensure!(response.status().is_success(), "the receiver answered {}", response.status());
        ids.push(format!("evt_bare_{k}"));
    }
    Ok(ids)
}
