//! `outbox-torture [--profile ci|long] [--seed N] [--minutes M] [--binary PATH]` (also
//! `cargo xtask torture …`): writers, readers and sinks against two real `outbox serve`
//! processes while faults are injected, then a recorded history checked against the table
//! (SPEC §10).
//!
//! The run: a PostgreSQL cluster of its own (so that a fault may restart it), a database
//! there migrated by `outbox migrate`; the fault [`proxy`] in front of it; two servers with
//! every role that reach the database only through the proxy; [`writers`] publishing
//! through `outbox_pg` over the proxy and through `POST /events`; [`consumers`] (a
//! `GET /events` pager, raw SSE clients, some filtered by type, and the Rust client's
//! `watch`) reading from whichever server is up, and in-process subscribers of this
//! process over the proxy; in each server a JSONL sink (one lease, one cursor, a file per
//! process), a NATS, a Redis, a Kafka and a RabbitMQ-stream sink, to brokers of the run's own
//! (`outbox_services::Broker`: a `nats-server`, a `redis-server`, `outbox-kafka-mock` and a
//! RabbitMQ node), read back at the end ([`brokers`]), and a webhook sink to the run's [`receiver`], which also takes the
//! deliveries of a webhook subscription the tenant makes; and a watch of the [`leases`].
//! For the profile's length, [`faults`] drawn from the seed are injected and healed one
//! after the other. Then the writers stop, every consumer drains until it caught up with
//! the table (or stayed quiet for longer than a sink's lease), the truth is read from the
//! table in `(txid, seq)` order, the pages the pager kept are read again, and the
//! [`checker`] prints one line per consumer and every violation. The history is kept as
//! JSON lines in `<target>/torture-runs/<seed>/`; the run fails on any violation.

mod brokers;
pub(crate) mod checker;
mod consumers;
mod faults;
mod leases;
mod proxy;
mod receiver;
mod services;
mod writers;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Parser, ValueEnum};
use outbox_core::Position;
use outbox_pg::embedded::EmbeddedPostgres;
use parking_lot::Mutex;
use serde::Deserialize;

use self::checker::{Consumer, Delivery, Received, Report, Row, Session, Writes};
use self::consumers::Recorder;
use self::faults::Targets;
use self::receiver::Receiver;
use self::services::{Database, OTHER_TENANT, Ports, Server, ServerSetup, TENANT};
use outbox_services::Broker;

/// How long and how hard a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Profile {
    /// A few minutes, what CI runs.
    Ci,
    /// Half an hour or more.
    Long,
}

impl Profile {
    /// As `--profile` takes it.
    fn name(self) -> String {
        self.to_possible_value().expect("no profile is skipped").get_name().to_owned()
    }

    fn minutes(self) -> f64 {
        match self {
            Profile::Ci => 3.0,
            Profile::Long => 30.0,
        }
    }

    fn writers(self) -> writers::WriterPlan {
        match self {
            Profile::Ci => writers::WriterPlan {
                writers: 16,
                slow_max: Duration::from_millis(1500),
                pause_max: Duration::from_millis(100),
                batch_max: 5,
            },
            Profile::Long => writers::WriterPlan {
                writers: 40,
                slow_max: Duration::from_secs(3),
                pause_max: Duration::from_millis(20),
                batch_max: 25,
            },
        }
    }
}

/// The run's options.
#[derive(Parser)]
#[command(
    name = "outbox-torture",
    about = "Writers, readers and every kind of sink against two real servers under seeded faults; the history checked"
)]
struct Options {
    /// `ci` (a few minutes) or `long` (half an hour).
    #[arg(long, value_enum, default_value = "ci")]
    profile: Profile,
    /// The seed of the faults and the writers (random when absent; printed).
    #[arg(long)]
    seed: Option<u64>,
    /// How long faults are injected, in minutes (default: the profile's).
    #[arg(long)]
    minutes: Option<f64>,
    /// The `outbox` binary to run (default: `OUTBOX_BIN`, or built into `<target>/torture`).
    #[arg(long)]
    binary: Option<PathBuf>,
}

/// How many servers run.
const SERVERS: usize = 2;

/// How many writers publish through `POST /events` (besides the profile's writers through
/// `outbox_pg`).
const HTTP_WRITERS: usize = 4;

/// The sinks every server runs: `archive` (JSONL: one lease and cursor, each process
/// appending to its own file), `bus` (NATS), `feed` (Redis), `hooks` (webhook), `log` (Kafka)
/// and `stream` (RabbitMQ streams).
const SINK_IDS: [&str; 6] = ["archive", "bus", "feed", "hooks", "log", "stream"];

/// The webhook sink's signing secret (the SPEC's example).
const WEBHOOK_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// How many brokers run: NATS, Redis, Kafka, RabbitMQ, in [`start_brokers`]'s order.
const BROKERS: usize = 4;

/// The Kafka topic and the RabbitMQ stream the sinks write.
const TOPIC: &str = "torture";

/// How long a drain waits, at most, after the last event any consumer received: longer than
/// a sink's lease (30 s), so that a sink whose holder died is taken over.
const DRAIN_QUIET: Duration = Duration::from_secs(45);

fn main() -> std::process::ExitCode {
    match run(Options::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("outbox-torture: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(options: Options) -> anyhow::Result<()> {
    let seed = options.seed.unwrap_or_else(|| u64::from(rand::random::<u32>()));
    let minutes = options.minutes.unwrap_or(options.profile.minutes());
    let length = Duration::from_secs_f64(minutes * 60.0);
    let profile = options.profile.name();
    println!("torture: seed {seed}, profile {profile}, {minutes} minutes of faults");
    println!("torture: rerun with `cargo xtask torture --profile {profile} --seed {seed} --minutes {minutes}`");
    let binary = match options.binary {
        Some(binary) => binary,
        None => build_outbox()?,
    };
    let mut postgres = services::cluster()?;
    let dir = outbox_services::target_dir()?.join("torture-runs").join(seed.to_string());
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let report =
        outbox_services::runtime()?.block_on(run_with(&binary, &mut postgres, &dir, seed, options.profile, length))?;
    print!("{}", report.summary(50));
    println!("torture: history in {}", dir.display());
    if !report.passed() {
        bail!("torture: {} violations (seed {seed})", report.violations.len());
    }
    println!("torture: passed (seed {seed})");
    Ok(())
}

/// The `outbox` binary: `OUTBOX_BIN` when set, otherwise built (debug) into a target
/// directory of its own, `<target>/torture`: `cargo build -p outbox-server` unifies features
/// otherwise than the build of xtask, so sharing one directory would make each rebuild what
/// the other just built (the end-to-end tests do the same for the same reason).
fn build_outbox() -> anyhow::Result<PathBuf> {
    if let Some(binary) = std::env::var_os("OUTBOX_BIN") {
        let binary = PathBuf::from(binary);
        if !binary.is_file() {
            bail!("OUTBOX_BIN names {}, which is not a file", binary.display());
        }
        println!("torture: running {}", binary.display());
        return Ok(binary);
    }
    let target = outbox_services::target_dir()?.join("torture");
    println!("torture: building the outbox binary into {}", target.display());
    let status = std::process::Command::new(outbox_services::cargo())
        .args(["build", "--quiet", "--package", "outbox-server", "--bin", "outbox", "--target-dir"])
        .arg(&target)
        .status()
        .context("running cargo build")?;
    if !status.success() {
        bail!("building the outbox binary failed ({status})");
    }
    Ok(target.join("debug").join("outbox"))
}

async fn run_with(
    binary: &Path,
    postgres: &mut EmbeddedPostgres,
    dir: &Path,
    seed: u64,
    profile: Profile,
    length: Duration,
) -> anyhow::Result<Report> {
    let mut run = set_up(binary, &postgres.url(), dir, seed).await?;
    let (writing, reading) = start_load(&run, seed, profile).await?;
    inject(&mut run, postgres, &reading.recorders, seed, length).await?;
    let (truth, writes, mut violations) = stop_writing(&run, writing).await?;
    drain(&truth, &reading.recorders, &run.admin).await;
    let recorders = reading.recorders.clone();
    violations.extend(stop_reading(&mut run, reading).await?);
    let report = check(&mut run, dir, &truth, &writes, &recorders, violations).await?;
    report_dead_letters(&run.admin).await?;
    run.admin.close().await;
    if report.passed() {
        run.database.drop_database().await?;
    }
    Ok(report)
}

/// What a run starts before the load: its database behind the fault proxy, its brokers (the
/// Kafka topic followed from the start), the webhook receiver and the servers.
struct Run {
    database: Database,
    /// Straight to the database, not through the proxy.
    admin: sqlx::PgPool,
    proxy: proxy::Proxy,
    /// The database's URL through the proxy.
    proxied: String,
    brokers: Vec<Broker>,
    kafka: Option<brokers::KafkaFollower>,
    receiver: Receiver,
    /// The webhook subscription's record, which the receiver fills.
    subscription: Arc<Recorder>,
    servers: Vec<Server>,
    ports: Ports,
}

async fn set_up(binary: &Path, postgres_url: &str, dir: &Path, seed: u64) -> anyhow::Result<Run> {
    let database = Database::create(postgres_url, seed, binary).await?;
    let admin = sqlx::PgPool::connect(&database.direct_url).await?;
    sqlx::query(writers::SIDE_TABLE).execute(&admin).await?;
    let proxy = proxy::Proxy::start(pg_address(&database.direct_url)?).await?;
    let proxied = services::through(&database.direct_url, proxy.addr().port());
    let brokers = tokio::task::block_in_place(|| start_brokers(dir))?;
    let kafka = Some(brokers::KafkaFollower::start(&brokers[2].url, TOPIC));
    let subscription = Recorder::from_now("webhook subscription", Some(TENANT), &[], Delivery::Interleaved);
    let receiver = Receiver::start(subscription.clone()).await?;
    let setup = ServerSetup {
        binary: binary.to_owned(),
        dir: dir.to_owned(),
        database_url: proxied.clone(),
        sinks: sinks_config(dir, &brokers, &receiver),
    };
    let servers = tokio::task::block_in_place(|| {
        (0..SERVERS).map(|number| Server::start(number, &setup)).collect::<anyhow::Result<Vec<_>>>()
    })?;
    let ports: Ports = Arc::new(Mutex::new(servers.iter().map(Server::port).collect()));
    println!("torture: {SERVERS} servers up, the database through the proxy at {}", proxy.addr());
    Ok(Run { database, admin, proxy, proxied, brokers, kafka, receiver, subscription, servers, ports })
}

/// The writers, running.
struct Writing {
    stop: Arc<AtomicBool>,
    writing: tokio::task::JoinHandle<anyhow::Result<Writes>>,
    http_writing: tokio::task::JoinHandle<anyhow::Result<writers::HttpWrites>>,
}

/// The readers, subscribers and the lease watch, running.
struct Reading {
    stop_readers: Arc<AtomicBool>,
    recorders: Vec<Arc<Recorder>>,
    pages: Arc<Mutex<Vec<consumers::PageSeen>>>,
    subscriptions: Vec<outbox_workers::Subscription>,
    stop_watch: Arc<AtomicBool>,
    watching: tokio::task::JoinHandle<leases::Watched>,
}

async fn start_load(run: &Run, seed: u64, profile: Profile) -> anyhow::Result<(Writing, Reading)> {
    let stop_writers = Arc::new(AtomicBool::new(false));
    let writing = tokio::spawn(writers::run(run.proxied.clone(), profile.writers(), seed, stop_writers.clone()));
    let http_writing = tokio::spawn(writers::run_http(run.ports.clone(), HTTP_WRITERS, seed, stop_writers.clone()));
    let stop_readers = Arc::new(AtomicBool::new(false));
    let base = format!("http://{}", consumers::balancer(run.ports.clone(), seed).await?);
    let (mut recorders, pages) = start_consumers(&run.ports, &base, seed, &stop_readers);
    let in_process: Vec<(Arc<Recorder>, &str)> = vec![
        (Recorder::from_now("subscriber *", None, &[], Delivery::Exact), "*"),
        (Recorder::from_now("subscriber pool.*", None, &["pool.*"], Delivery::Exact), "pool.*"),
    ];
    let subscriptions = consumers::subscribers(&run.proxied, &in_process).await?;
    recorders.extend(in_process.iter().map(|(recorder, _)| recorder.clone()));
    create_subscription(&base, &run.receiver).await?;
    run.subscription.open(None);
    recorders.push(run.subscription.clone());
    let stop_watch = Arc::new(AtomicBool::new(false));
    let watching = tokio::spawn(leases::watch(run.admin.clone(), stop_watch.clone()));
    let writing = Writing { stop: stop_writers, writing, http_writing };
    Ok((writing, Reading { stop_readers, recorders, pages, subscriptions, stop_watch, watching }))
}

/// The profile's length of faults from the seed's schedule, each healed before the next;
/// everything healed at the end.
async fn inject(
    run: &mut Run,
    postgres: &mut EmbeddedPostgres,
    recorders: &[Arc<Recorder>],
    seed: u64,
    length: Duration,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let progress = tokio::spawn(report_progress(recorders.to_vec(), run.proxy.clone(), started));
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut targets = Targets {
        servers: &mut run.servers,
        brokers: &mut run.brokers,
        receiver: &run.receiver,
        ports: &run.ports,
        proxy: &run.proxy,
        admin: &run.admin,
        database: &run.database.name,
        postgres,
        started,
    };
    for (gap, fault) in faults::schedule(seed, length, SERVERS, BROKERS) {
        tokio::time::sleep(gap).await;
        targets.inject(&fault).await?;
        *counts.entry(fault.kind()).or_default() += 1;
    }
    tokio::time::sleep(length.saturating_sub(started.elapsed())).await;
    targets.heal()?;
    progress.abort();
    let counted: Vec<String> = counts.iter().map(|(kind, n)| format!("{kind} {n}")).collect();
    println!("torture: faults injected: {}", counted.join(", "));
    Ok(())
}

/// Stops the writers and reads the truth: the table in `(txid, seq)` order, and what the
/// writers attempted, with the outcomes of unanswered `POST /events` resolved from it.
async fn stop_writing(run: &Run, writing: Writing) -> anyhow::Result<(Vec<Row>, Writes, Vec<String>)> {
    writing.stop.store(true, Ordering::SeqCst);
    let mut writes = writing.writing.await??;
    let http = writing.http_writing.await??;
    let resolved = writers::resolve_tokens(&run.admin, &http.unknown_tokens).await?;
    println!(
        "torture: POST /events: {} events acknowledged, {} whose answer never came ({} of them stored), {} refusals",
        http.writes.committed.len(),
        http.unknown_tokens.len(),
        resolved.len(),
        http.refused
    );
    writes.committed.extend(http.writes.committed.iter().cloned());
    writes.unknown.extend(resolved);
    println!("torture: writers stopped; draining");
    let truth = read_truth(&run.admin).await?;
    let stored: std::collections::HashSet<&str> = truth.iter().map(|row| row.id.as_str()).collect();
    println!(
        "torture: writers: {} events committed, {} rolled back, {} of unknown outcome ({} stored); \
         {} transactions killed mid-commit",
        writes.committed.len(),
        writes.rolled_back.len(),
        writes.unknown.len(),
        writes.unknown.iter().filter(|id| stored.contains(id.as_str())).count(),
        writes.killed
    );
    let mut violations = Vec::new();
    if http.refused > 0 {
        violations.push(format!("POST /events: {} valid publishes refused with a 4xx", http.refused));
    }
    Ok((truth, writes, violations))
}

/// Stops the readers and the lease watch, reads the pager's pages again, and stops the
/// servers; returns the watch's and the pages' violations.
async fn stop_reading(run: &mut Run, reading: Reading) -> anyhow::Result<Vec<String>> {
    reading.stop_readers.store(true, Ordering::SeqCst);
    reading.stop_watch.store(true, Ordering::SeqCst);
    drop(reading.subscriptions);
    let watched = reading.watching.await?;
    println!("torture: {}", watched.line());
    let pages = reading.pages.lock().clone();
    let pages_differ = consumers::reread_pages(&pages, &run.ports).await?;
    println!(
        "torture: history: {} pages read during the faults read again: {} differ",
        pages.len(),
        pages_differ.len()
    );
    for server in &mut run.servers {
        tokio::task::block_in_place(|| server.stop());
    }
    Ok(watched.violations.into_iter().chain(pages_differ).collect())
}

/// Every consumer's record (the brokers' read back) checked against the truth, and kept.
async fn check(
    run: &mut Run,
    dir: &Path,
    truth: &[Row],
    writes: &Writes,
    recorders: &[Arc<Recorder>],
    violations: Vec<String>,
) -> anyhow::Result<Report> {
    let mut consumers: Vec<Consumer> = recorders.iter().map(|recorder| recorder.take_for_check(truth)).collect();
    consumers.push(sink_record(dir)?);
    let hooks = Consumer::redelivered("sink hooks (webhook receiver)", run.receiver.record());
    consumers.push(Consumer { delivery: Delivery::Interleaved, ..hooks });
    let (nats, nats_wrong) = brokers::nats_read_back(&run.brokers[0].url).await?;
    consumers.push(read_back("sink bus (nats, read back)", nats));
    let (redis, redis_wrong) = brokers::redis_read_back(&run.brokers[1].url, &[TENANT, OTHER_TENANT]).await?;
    consumers.push(read_back("sink feed (redis, read back)", redis));
    let rabbitmq = brokers::rabbitmq_read_back(&run.brokers[3].url, TOPIC).await?;
    consumers.push(read_back("sink stream (rabbitmq, read back)", rabbitmq));
    let follower = run.kafka.take().context("the Kafka follower")?;
    let kafka = tokio::task::block_in_place(|| follower.finish())?;
    keep_history(dir, truth, writes, &consumers)?;
    let mut report = checker::check(truth, writes, &consumers);
    let (tally, kafka_violations) = checker::check_partitioned("sink log (kafka, read)", truth, writes, &kafka.records);
    report.tallies.push(tally);
    report.violations.extend(kafka_violations);
    if kafka.skipped > 0 {
        report.violations.push(format!("kafka: {} offsets pruned by the broker before they were read", kafka.skipped));
    }
    if nats_wrong > 0 {
        report.violations.push(format!("nats: {nats_wrong} messages whose Nats-Msg-Id is not their event's id"));
    }
    if redis_wrong > 0 {
        report.violations.push(format!("redis: {redis_wrong} entries whose id is not their event's position"));
    }
    report.violations.extend(violations);
    Ok(report)
}

/// Every 30 s: how much each consumer received, and the proxy's connections.
async fn report_progress(recorders: Vec<Arc<Recorder>>, proxy: proxy::Proxy, started: Instant) {
    loop {
        tokio::time::sleep(Duration::from_secs(30)).await;
        let counts: Vec<String> =
            recorders.iter().map(|recorder| format!("{} {}", recorder.name(), recorder.received())).collect();
        println!(
            "torture: t={:>6.1}s received: {}; {} connections through the proxy",
            started.elapsed().as_secs_f64(),
            counts.join(", "),
            proxy.accepted()
        );
    }
}

/// The address of the PostgreSQL server `url` names.
fn pg_address(url: &str) -> anyhow::Result<std::net::SocketAddr> {
    let options: sqlx::postgres::PgConnectOptions = url.parse()?;
    let host = match options.get_host() {
        "localhost" => "127.0.0.1",
        host if host.starts_with('/') => bail!("the torture run reaches PostgreSQL over TCP; {url} is a socket"),
        host => host,
    };
    let mut addresses = std::net::ToSocketAddrs::to_socket_addrs(&(host, options.get_port()))?;
    addresses.next().context("PostgreSQL's address")
}

/// The pager (and the pages it keeps), the raw SSE clients and the Rust client's streams
/// (through the balancer at `base`), started.
fn start_consumers(
    ports: &Ports,
    base: &str,
    seed: u64,
    stop: &Arc<AtomicBool>,
) -> (Vec<Arc<Recorder>>, Arc<Mutex<Vec<consumers::PageSeen>>>) {
    let mut recorders = Vec::new();
    let pager = Recorder::new("pager", &[], Delivery::Exact);
    let pages = Arc::new(Mutex::new(Vec::new()));
    tokio::spawn(consumers::pager(pager.clone(), pages.clone(), ports.clone(), seed, stop.clone()));
    recorders.push(pager);
    let clients: [(&str, &[&str]); 2] = [("rust-client-all", &[]), ("rust-client-node", &["node.*"])];
    for (n, (name, types)) in clients.into_iter().enumerate() {
        let recorder = Recorder::new(name, types, Delivery::Exact);
        let types = types.iter().map(|t| (*t).to_owned()).collect();
        let seed = seed.wrapping_add(100 + n as u64);
        tokio::spawn(consumers::rust_client(recorder.clone(), base.to_owned(), types, seed, stop.clone()));
        recorders.push(recorder);
    }
    let streams: [(&str, &[&str]); 4] =
        [("sse-all-a", &[]), ("sse-all-b", &[]), ("sse-node", &["node.*"]), ("sse-pool-created", &["pool.created"])];
    for (n, (name, types)) in streams.into_iter().enumerate() {
        let recorder = Recorder::new(name, types, Delivery::Exact);
        let query = if types.is_empty() { "*".to_owned() } else { types.join(",") };
        let seed = seed.wrapping_add(1 + n as u64);
        tokio::spawn(consumers::sse(recorder.clone(), query, ports.clone(), seed, stop.clone()));
        recorders.push(recorder);
    }
    (recorders, pages)
}

/// The tenant's webhook subscription of every type, to the receiver, made through the
/// Rust client as a tenant would.
async fn create_subscription(base: &str, receiver: &Receiver) -> anyhow::Result<()> {
    let client = outbox_client::Client::new(base)?.with_token(services::TOKEN)?;
    let new = outbox_client::webhooks::NewWebhook {
        url: receiver.subscription_url.clone(),
        description: Some("the torture run's subscription".into()),
        ..outbox_client::webhooks::NewWebhook::default()
    };
    let webhook = client.create_webhook(&new).await.context("creating the webhook subscription")?;
    println!("torture: webhook subscription {} to {}", webhook.id, webhook.url);
    Ok(())
}

/// The table in `(txid, seq)` order, once no writer runs.
async fn read_truth(admin: &sqlx::PgPool) -> anyhow::Result<Vec<Row>> {
    let rows: Vec<(String, i64, String, String, String)> = sqlx::query_as(
        // Ordered by the columns themselves, not by the text of the transaction id.
        "SELECT o.txid::text, o.seq, o.payload->>'id', o.payload->>'tenantId', o.topic FROM outbox o
         ORDER BY o.txid, o.seq",
    )
    .fetch_all(admin)
    .await?;
    rows.into_iter()
        .map(|(txid, seq, id, tenant, event_type)| {
            let position = Position { txid: txid.parse()?, seq: u64::try_from(seq)? };
            Ok(Row { id, position, tenant, event_type })
        })
        .collect()
}

/// Waits until every reader received the last event it should and every sink's cursor
/// passed the last row, or all readers stayed quiet for [`DRAIN_QUIET`].
async fn drain(truth: &[Row], recorders: &[Arc<Recorder>], admin: &sqlx::PgPool) {
    let started = Instant::now();
    let last = truth.last().map(|row| row.position);
    loop {
        let readers_done = recorders.iter().all(|recorder| caught_up(truth, &recorder.take_for_check(truth)));
        let sinks_done = match last {
            None => true,
            Some(last) => sink_cursors(admin)
                .await
                .is_ok_and(|cursors| cursors.len() == SINK_IDS.len() && cursors.iter().all(|cursor| *cursor >= last)),
        };
        if readers_done && sinks_done {
            println!("torture: drained in {:.1?}", started.elapsed());
            return;
        }
        let quiet = recorders.iter().map(|recorder| recorder.quiet_for()).min().unwrap_or_default();
        if quiet > DRAIN_QUIET && started.elapsed() > DRAIN_QUIET {
            println!("torture: every consumer quiet for {quiet:.0?}; checking what it has");
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Whether `consumer` received the last event of the truth that it should.
fn caught_up(truth: &[Row], consumer: &Consumer) -> bool {
    let patterns: Vec<outbox_core::Pattern> =
        consumer.types.iter().filter_map(|text| outbox_core::Pattern::parse(text).ok()).collect();
    let last = truth.iter().rev().find(|row| {
        consumer.tenant.as_ref().is_none_or(|tenant| *tenant == row.tenant)
            && (patterns.is_empty() || patterns.iter().any(|pattern| pattern.matches(&row.event_type)))
    });
    let Some(last) = last else { return true };
    consumer.sessions.iter().flat_map(|session| &session.received).any(|received| received.id == last.id)
}

/// The saved cursors of the run's sinks.
async fn sink_cursors(admin: &sqlx::PgPool) -> anyhow::Result<Vec<Position>> {
    let names: Vec<String> = SINK_IDS.iter().map(|id| format!("sink:{id}")).collect();
    let rows: Vec<(String, i64)> =
        sqlx::query_as("SELECT txid::text, seq FROM outbox_cursors WHERE stream = 'outbox' AND name = ANY($1)")
            .bind(&names)
            .fetch_all(admin)
            .await?;
    rows.into_iter().map(|(txid, seq)| Ok(Position { txid: txid.parse()?, seq: u64::try_from(seq)? })).collect()
}

/// Prints the dead letters of every sink (each is an event its sink did not deliver).
async fn report_dead_letters(admin: &sqlx::PgPool) -> anyhow::Result<()> {
    let rows: Vec<(String, i64)> =
        sqlx::query_as("SELECT sink, count(*) FROM outbox_dead_letters GROUP BY sink ORDER BY sink")
            .fetch_all(admin)
            .await?;
    for (sink, count) in rows {
        println!("torture: sink {sink} dead-lettered {count} events");
    }
    Ok(())
}

/// The run's brokers, in the order of the faults' broker numbers: NATS, Redis, Kafka, RabbitMQ.
fn start_brokers(dir: &Path) -> anyhow::Result<Vec<Broker>> {
    let kafka_mock = outbox_services::brokers::kafka_mock_binary()?;
    let brokers = vec![
        Broker::nats_server(dir)?,
        Broker::redis_server(dir, true)?,
        Broker::kafka_mock(&kafka_mock, dir)?,
        Broker::rabbitmq_node(dir)?,
    ];
    let listed: Vec<String> = brokers.iter().map(|broker| format!("{} {}", broker.name, broker.url)).collect();
    println!("torture: brokers of its own: {}", listed.join(", "));
    Ok(brokers)
}

/// The `[[sinks]]` of every server: JSONL to a file of its own, NATS, Redis, Kafka and
/// RabbitMQ to the run's brokers, webhook to the run's receiver.
fn sinks_config(dir: &Path, brokers: &[Broker], receiver: &Receiver) -> String {
    format!(
        "[[sinks]]\nid = \"{jsonl}\"\nkind = \"jsonl\"\npath = \"{dir}/sink-{{server}}.jsonl\"\nbatch = 50\n\n\
         [[sinks]]\nid = \"{nats}\"\nkind = \"nats\"\nurl = \"{nats_url}\"\nsubject = \"torture.{{tenantId}}.{{type}}\"\n\
         stream = \"{stream}\"\nbatch = 50\n\n\
         [[sinks]]\nid = \"{redis}\"\nkind = \"redis\"\nurl = \"{redis_url}\"\nkey = \"torture:{{tenantId}}\"\nbatch = 50\n\n\
         [[sinks]]\nid = \"{webhook}\"\nkind = \"webhook\"\nurl = \"{hook_url}\"\nsecret = \"{WEBHOOK_SECRET}\"\n\
         batch = 50\n\n\
         [[sinks]]\nid = \"{kafka}\"\nkind = \"kafka\"\nbrokers = \"{kafka_url}\"\ntopic = \"{TOPIC}\"\nbatch = 50\n\n\
         [[sinks]]\nid = \"{rabbitmq}\"\nkind = \"rabbitmq\"\nurl = \"{rabbitmq_url}\"\nstream = \"{TOPIC}\"\nbatch = 50\n",
        jsonl = SINK_IDS[0],
        kafka = SINK_IDS[4],
        rabbitmq = SINK_IDS[5],
        kafka_url = brokers[2].url,
        rabbitmq_url = brokers[3].url,
        webhook = SINK_IDS[3],
        hook_url = receiver.url,
        nats = SINK_IDS[1],
        redis = SINK_IDS[2],
        dir = dir.display(),
        nats_url = brokers[0].url,
        redis_url = brokers[1].url,
        stream = brokers::NATS_STREAM,
    )
}

/// A broker's read-back: one session that must hold every event once, in order.
fn read_back(name: &str, received: Vec<Received>) -> Consumer {
    Consumer {
        name: name.to_owned(),
        tenant: None,
        types: Vec::new(),
        delivery: Delivery::Exact,
        durable: true,
        since: None,
        sessions: vec![Session { after: None, received }],
    }
}

#[derive(Deserialize)]
struct SinkLine {
    id: String,
    sequence: Position,
}

/// The JSONL sink's record: each server's file (what that process delivered while it held
/// the lease) cut into sessions wherever a position does not increase.
fn sink_record(dir: &Path) -> anyhow::Result<Consumer> {
    let mut sessions = Vec::new();
    let mut torn = 0;
    for n in 0..SERVERS {
        let Ok(text) = std::fs::read_to_string(dir.join(format!("sink-{n}.jsonl"))) else { continue };
        let mut received = Vec::new();
        for line in text.lines() {
            match serde_json::from_str::<SinkLine>(line) {
                Ok(line) => received.push(Received { id: line.id, position: line.sequence }),
                // A line torn by a kill mid-write; the batch is delivered again.
                Err(_) => torn += 1,
            }
        }
        let file = Consumer::redelivered("", received);
        sessions.extend(file.sessions.into_iter().filter(|session| !session.received.is_empty()));
    }
    if torn > 0 {
        println!("torture: {torn} torn lines in the sink's files (skipped, as readers do)");
    }
    Ok(Consumer {
        name: format!("sink {} (jsonl)", SINK_IDS[0]),
        tenant: None,
        types: Vec::new(),
        delivery: Delivery::Interleaved,
        durable: true,
        since: None,
        sessions,
    })
}

/// Writes the truth, the writers' outcomes and every consumer's sessions as JSON lines.
fn keep_history(dir: &Path, truth: &[Row], writes: &Writes, consumers: &[Consumer]) -> anyhow::Result<()> {
    let mut file = std::io::BufWriter::new(std::fs::File::create(dir.join("truth.jsonl"))?);
    for row in truth {
        writeln!(file, "{}", serde_json::to_string(row)?)?;
    }
    let mut file = std::io::BufWriter::new(std::fs::File::create(dir.join("writes.jsonl"))?);
    let outcomes =
        [("committed", &writes.committed), ("rolled_back", &writes.rolled_back), ("unknown", &writes.unknown)];
    for (outcome, ids) in outcomes {
        for id in ids {
            writeln!(file, "{}", serde_json::json!({ "id": id, "outcome": outcome }))?;
        }
    }
    let mut file = std::io::BufWriter::new(std::fs::File::create(dir.join("consumers.jsonl"))?);
    for consumer in consumers {
        for (number, session) in consumer.sessions.iter().enumerate() {
            let line = serde_json::json!({
                "consumer": consumer.name, "session": number, "after": session.after, "received": session.received,
            });
            writeln!(file, "{line}")?;
        }
    }
    Ok(())
}
