//! `cargo xtask bench http`: what HTTP costs on top of the xmin read, side by side in one run.
//!
//! One tenant's events are read three ways from the same table, interleaved round by round:
//! - the bare xmin query (`outbox_pg::read_page`) in pages of 1,000, straight from the pool;
//! - `GET /events?limit=1000` pages over loopback HTTP, each page parsed back into events;
//! - one `GET /watch` Server-Sent-Events stream over loopback, from the start to the last event.
//!
//! Each is measured over TCP and through the Unix socket (`--socket`: the socket alone),
//! interleaved. Targets, over TCP: SSE ≥ 0.5 of the bare query, `/events` ≥ 0.6.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use outbox_core::{Event, NewEvent, Position};
use outbox_http::{AuthError, Authorizer, BoxFuture, Grant, OutboxService, WatchOptions, scope};
use outbox_pg::{ReadRequest, read_page};
use serde_json::json;
use sqlx::PgPool;

use outbox_services::{ScratchDatabase, Transport, Transports, postgres};

/// The tenant of every benchmark request (`bench http` and `bench fanout`).
pub(crate) const TENANT: &str = "bench";
const PAGE: usize = 1_000;

pub(crate) fn run(transports: Transports) -> anyhow::Result<()> {
    let (events, rounds) = (50_000, 3);
    let server = postgres()?;
    let transports = transports.available(&server)?;
    outbox_services::runtime()?.block_on(async {
        let db = ScratchDatabase::create(&server.url_over(Transport::Tcp)?, "outbox_bench_http").await?;
        fill(&db.pool, events).await?;
        let mut sides = Vec::new();
        for &transport in &transports {
            sides.push(Side::start(transport, db.pool_on(&server.url_over(transport)?, 4).await?).await?);
        }
        let result = bench(&sides, events, rounds).await;
        sides.iter().for_each(|side| side.service.shutdown());
        db.drop_now().await?;
        result
    })
}

/// The contenders over one transport: a pool, and a service on it served over loopback.
struct Side {
    transport: Transport,
    pool: PgPool,
    service: OutboxService,
    port: u16,
}

impl Side {
    async fn start(transport: Transport, pool: PgPool) -> anyhow::Result<Side> {
        let options = WatchOptions { batch: PAGE, poll_ms: 20, ..WatchOptions::default() };
        let service = OutboxService::new(pool.clone(), Arc::new(Everyone)).with_options(options);
        let port = serve(service.clone()).await?;
        Ok(Side { transport, pool, service, port })
    }
}

/// Every request is the benchmark tenant with `events:read`.
pub(crate) struct Everyone;

impl Authorizer for Everyone {
    fn authorize<'a>(&'a self, _headers: &'a http::HeaderMap) -> BoxFuture<'a, Result<Grant, AuthError>> {
        let scopes: BTreeSet<String> = [scope::EVENTS_READ].map(String::from).into();
        Box::pin(async move { Ok(Grant { tenant_id: TENANT.into(), scopes, ..Grant::default() }) })
    }

    fn reauthorize<'a>(&'a self, _grant: &'a Grant) -> BoxFuture<'a, Result<bool, AuthError>> {
        Box::pin(async { Ok(true) })
    }
}

const CONTENDERS: [&str; 3] =
    ["bare xmin query (outbox_pg::read_page)", "GET /events pages", "GET /watch (one SSE client)"];

async fn bench(sides: &[Side], events: usize, rounds: usize) -> anyhow::Result<()> {
    let client: Client<HttpConnector, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let mut totals = vec![[Duration::ZERO; CONTENDERS.len()]; sides.len()];
    for round in 0..rounds {
        for (side, totals) in sides.iter().zip(&mut totals) {
            totals[0] += timed(bare(&side.pool, events)).await?;
            totals[1] += timed(pages(&client, side.port, events)).await?;
            totals[2] += timed(stream(&client, side.port, events)).await?;
        }
        eprintln!("bench http: round {}/{rounds} done", round + 1);
    }
    let rate = |side: usize, slot: usize| (events * rounds) as f64 / totals[side][slot].as_secs_f64();
    println!("bench http: {rounds} rounds of {events} events of one tenant, pages of {PAGE}, loopback");
    let header: String = sides.iter().map(|side| format!("{:>12}", side.transport.label())).collect();
    println!("  {:<36}{header}   events/s", "PostgreSQL over");
    for (slot, label) in CONTENDERS.iter().enumerate() {
        let figures: String = (0..sides.len()).map(|side| format!("{:>12.0}", rate(side, slot))).collect();
        println!("  {label:<36}{figures}");
    }
    for (what, slot, target) in [("GET /watch / bare query", 2, 0.5), ("GET /events / bare query", 1, 0.6)] {
        let ratios: Vec<f64> = (0..sides.len()).map(|side| rate(side, slot) / rate(side, 0)).collect();
        report(what, &ratios, sides, target);
    }
    Ok(())
}

/// The ratio over each transport; the target applies to the first.
fn report(what: &str, ratios: &[f64], sides: &[Side], target: f64) {
    let verdict = if ratios[0] >= target { "meets" } else { "MISSES" };
    let beside: String = ratios
        .iter()
        .zip(sides)
        .skip(1)
        .map(|(ratio, side)| format!(", {ratio:.2} {}", side.transport.label()))
        .collect();
    let primary = sides[0].transport.label();
    println!("  ratio {what} = {:.2} {primary}{beside} ({verdict} target >= {target:.2} over {primary})", ratios[0]);
}

async fn timed(work: impl std::future::Future<Output = anyhow::Result<()>>) -> anyhow::Result<Duration> {
    let started = Instant::now();
    work.await?;
    Ok(started.elapsed())
}

async fn fill(pool: &PgPool, events: usize) -> anyhow::Result<()> {
    let batch: Vec<NewEvent> = (0..1_000)
        .map(|n| {
            let data = json!({"state": "active", "poolId": "pool_01k5y1z2x3w4v5t6s7r8q9p0n1", "gpus": 8, "n": n});
            NewEvent::new("reservation.active", TENANT, format!("reservation/rsv_{n:06}"), data)
        })
        .collect();
    for _ in 0..events.div_ceil(batch.len()) {
        outbox_pg::publish_many(pool, &batch).await?;
    }
    // The xmin rule: wait until every row is visible.
    let deadline = Instant::now() + Duration::from_secs(30);
    while count_visible(pool).await? < events {
        if Instant::now() > deadline {
            bail!("the benchmark's rows did not become visible within 30 s (a long transaction on the server?)");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

async fn count_visible(pool: &PgPool) -> anyhow::Result<usize> {
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox WHERE txid < pg_snapshot_xmin(pg_current_snapshot())")
        .fetch_one(pool)
        .await?;
    Ok(usize::try_from(n)?)
}

async fn bare(pool: &PgPool, events: usize) -> anyhow::Result<()> {
    let mut request = ReadRequest::tenant(TENANT).limit(PAGE);
    let mut seen = 0;
    while seen < events {
        let page = read_page(pool, &request).await?;
        seen += page.events.len();
        request.after = Some(page.next_after);
    }
    Ok(())
}

async fn get(
    client: &Client<HttpConnector, Empty<Bytes>>,
    port: u16,
    path: &str,
) -> anyhow::Result<http::Response<hyper::body::Incoming>> {
    let uri: http::Uri = format!("http://127.0.0.1:{port}{path}").parse()?;
    let request = http::Request::get(uri).header("authorization", "Bearer bench").body(Empty::new())?;
    let response = client.request(request).await.context("requesting")?;
    if !response.status().is_success() {
        bail!("{path} answered {}", response.status());
    }
    Ok(response)
}

#[derive(serde::Deserialize)]
struct Page {
    items: Vec<Event>,
    cursor: Option<String>,
}

async fn pages(client: &Client<HttpConnector, Empty<Bytes>>, port: u16, events: usize) -> anyhow::Result<()> {
    let mut cursor: Option<String> = None;
    let mut seen = 0;
    while seen < events {
        let path = match &cursor {
            Some(cursor) => format!("/events?limit={PAGE}&cursor={cursor}"),
            None => format!("/events?limit={PAGE}"),
        };
        let body = get(client, port, &path).await?.into_body().collect().await?.to_bytes();
        let page: Page = serde_json::from_slice(&body)?;
        seen += page.items.len();
        cursor = page.cursor.or_else(|| page.items.last().map(|e| e.sequence.colon()));
    }
    Ok(())
}

async fn stream(client: &Client<HttpConnector, Empty<Bytes>>, port: u16, events: usize) -> anyhow::Result<()> {
    let start = Position::START;
    let mut body = get(client, port, &format!("/watch?cursor={start}")).await?.into_body();
    let (mut seen, mut pending) = (0, String::new());
    while seen < events {
        let frame = body.frame().await.context("the stream ended early")??;
        let Ok(chunk) = frame.into_data() else { continue };
        pending.push_str(std::str::from_utf8(&chunk)?);
        while let Some(end) = pending.find("\n\n") {
            let block: String = pending.drain(..end + 2).collect();
            if let Some(data) = block.lines().find_map(|line| line.strip_prefix("data: ")) {
                let _event: Event = serde_json::from_str(data)?;
                seen += 1;
            }
        }
    }
    Ok(())
}

/// Serves `service` on 127.0.0.1 and a free port; returns the port.
async fn serve(service: OutboxService) -> anyhow::Result<u16> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let service = service.clone();
            tokio::spawn(async move {
                let handler = hyper::service::service_fn(move |request| {
                    let service = service.clone();
                    async move { Ok::<_, std::convert::Infallible>(service.handle(request).await) }
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(io, handler)
                    .await;
            });
        }
    });
    Ok(port)
}
