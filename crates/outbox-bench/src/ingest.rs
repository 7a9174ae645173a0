//! `POST /events` into the real `outbox serve` from outside, its `DATABASE_URL` over TCP
//! against the same server on the Unix socket, side by side in one run.
//!
//! Two `outbox serve` processes (the release binary, every role, [`outbox_services::serve`])
//! run on one scratch database, one connected over TCP and one through the socket. Each is
//! sent batches of [`BATCH`] events, `{"events":[…]}`, by [`CLIENTS`] concurrent HTTP/1
//! clients over loopback; the two take turns round by round (the order flips every round), so
//! that the table's growth and the machine's noise fall on both. A first round for each is a
//! warm-up and is not counted.
//!
//! Target (issue 20): the TCP server reaches at least 0.9 × the socket one.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::json;

use outbox_services::serve::{OutboxProcess, ServeOptions, database_url};
use outbox_services::{Postgres, ScratchDatabase, Transport, Transports};

/// Events per `POST /events`.
const BATCH: usize = 100;
/// Concurrent HTTP clients per server.
const CLIENTS: usize = 4;
/// Batches each client sends per round.
const BATCHES_PER_CLIENT: usize = 50;
/// Counted rounds; each server runs once in each.
const ROUNDS: usize = 12;
/// The ratio TCP / socket must reach.
const TARGET: f64 = 0.9;

type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// Runs the benchmark and prints its lines. Blocks the calling thread; it runs on a thread
/// and a runtime of its own, so it may be called from inside another runtime's `block_on`.
pub(crate) fn run(postgres: &Postgres, transports: Transports) -> anyhow::Result<()> {
    let mut urls = Vec::new();
    for transport in transports.available(postgres)? {
        urls.push((transport, postgres.url_over(transport)?));
    }
    let binary = outbox_services::serve::build()?;
    std::thread::scope(|scope| scope.spawn(|| bench(&binary, &urls)).join())
        .map_err(|_| anyhow::anyhow!("bench ingest panicked"))?
}

/// One server's total over the counted rounds.
struct Rate {
    transport: Transport,
    events: usize,
    time: Duration,
}

impl Rate {
    fn per_second(&self) -> f64 {
        self.events as f64 / self.time.as_secs_f64()
    }
}

fn bench(binary: &std::path::Path, urls: &[(Transport, String)]) -> anyhow::Result<()> {
    let runtime = outbox_services::runtime()?;
    let (_, primary_url) = urls.first().context("no transport to measure")?;
    let db = runtime.block_on(ScratchDatabase::create(primary_url, "outbox_bench_ingest"))?;
    let rates = runtime.block_on(outbox_services::serve::database_name(&db.pool));
    let rates = rates.and_then(|name| start_and_measure(&runtime, binary, &name, urls));
    runtime.block_on(db.drop_now())?;
    report(&rates?);
    Ok(())
}

/// Starts one server per transport on `db`, measures them, and stops them.
fn start_and_measure(
    runtime: &tokio::runtime::Runtime,
    binary: &std::path::Path,
    database: &str,
    urls: &[(Transport, String)],
) -> anyhow::Result<Vec<Rate>> {
    let mut servers = Vec::new();
    for (transport, url) in urls {
        let database_url = database_url(url, database);
        let options = ServeOptions { database_url: &database_url, roles: &["all"], poll_ms: 100 };
        let server = OutboxProcess::start(binary, &options)?;
        eprintln!(
            "bench ingest: outbox serve over {} pid {} on port {}",
            transport.label(),
            server.pid(),
            server.port()
        );
        servers.push((*transport, server));
    }
    runtime.block_on(measure(&servers))
}

async fn measure(servers: &[(Transport, OutboxProcess)]) -> anyhow::Result<Vec<Rate>> {
    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let bodies: Vec<Bytes> = (0..CLIENTS).map(batch_body).collect();
    let mut rates: Vec<Rate> =
        servers.iter().map(|(transport, _)| Rate { transport: *transport, events: 0, time: Duration::ZERO }).collect();
    // Round 0 warms both up (connections, the pools, the table's first pages) and is not counted.
    for round in 0..=ROUNDS {
        let mut order: Vec<usize> = (0..servers.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for slot in order {
            let elapsed = one_round(&client, servers[slot].1.port(), &bodies).await?;
            if round > 0 {
                rates[slot].events += CLIENTS * BATCHES_PER_CLIENT * BATCH;
                rates[slot].time += elapsed;
            }
        }
        eprintln!("bench ingest: round {round}/{ROUNDS} done");
    }
    Ok(rates)
}

/// [`CLIENTS`] clients at once, each posting [`BATCHES_PER_CLIENT`] batches one after another;
/// the time until the last is answered.
async fn one_round(client: &HttpClient, port: u16, bodies: &[Bytes]) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let mut clients = tokio::task::JoinSet::new();
    for body in bodies {
        let (client, body) = (client.clone(), body.clone());
        clients.spawn(async move {
            for _ in 0..BATCHES_PER_CLIENT {
                post(&client, port, body.clone()).await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = clients.join_next().await {
        done??;
    }
    Ok(started.elapsed())
}

async fn post(client: &HttpClient, port: u16, body: Bytes) -> anyhow::Result<()> {
    let request = http::Request::post(format!("http://127.0.0.1:{port}/events"))
        .header("authorization", format!("Bearer {}", outbox_services::serve::TOKEN))
        .header("content-type", "application/json")
        .body(Full::new(body))?;
    let response = client.request(request).await.context("POST /events")?;
    let status = response.status();
    let answer = response.into_body().collect().await?.to_bytes();
    if status != http::StatusCode::CREATED {
        bail!("POST /events answered {status}: {}", String::from_utf8_lossy(&answer));
    }
    Ok(())
}

/// `{"events":[…]}` of [`BATCH`] reservation changes of the benchmark tenant, about 200 bytes
/// of data each, as `bench publish` writes them.
fn batch_body(client: usize) -> Bytes {
    let events: Vec<serde_json::Value> = (0..BATCH)
        .map(|n| {
            json!({
                "type": "reservation.active",
                "tenantId": crate::http::TENANT,
                "subject": format!("reservation/rsv_{client:02}{n:06}"),
                "data": crate::publish::sample_data(),
            })
        })
        .collect();
    Bytes::from(json!({ "events": events }).to_string())
}

fn report(rates: &[Rate]) {
    println!(
        "bench ingest: POST /events with batches of {BATCH} from {CLIENTS} clients over loopback HTTP/1, {ROUNDS} \
         rounds of {} batches per server after a warm-up, the servers interleaved; outbox serve (release, every \
         role), one process per transport on one database",
        CLIENTS * BATCHES_PER_CLIENT
    );
    for rate in rates {
        let label = format!("outbox serve, DATABASE_URL over {}", rate.transport.label());
        println!("  {label:<40} {:>10.0} events/s", rate.per_second());
    }
    let of = |transport: Transport| rates.iter().find(|rate| rate.transport == transport);
    match (of(Transport::Tcp), of(Transport::Socket)) {
        (Some(tcp), Some(socket)) => {
            let ratio = tcp.per_second() / socket.per_second();
            let verdict = if ratio >= TARGET { "meets" } else { "MISSES" };
            println!("  ratio POST /events batch={BATCH} TCP / socket = {ratio:.2} ({verdict} target >= {TARGET:.2})");
        }
        _ => println!("  no ratio: one transport measured (--socket, or a PostgreSQL without a Unix socket here)"),
    }
}
