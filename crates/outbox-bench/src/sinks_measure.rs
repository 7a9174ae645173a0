//! The measurement behind `outbox-bench sinks`, which brings up the services and runs it in a
//! process of its own (`outbox-bench measure-sinks`, whose CPU time is the sinks' alone) with
//! `DATABASE_URL`, `DATABASE_URL_BESIDE`, `NATS_URL`, `REDIS_URL`, `RABBITMQ_STREAM_URL` and
//! `KAFKA_BOOTSTRAP` set.
//!
//! Events/s through the `nats` and `redis` sinks, each driven by a real dispatcher (reading
//! the outbox, delivering, saving its cursor under its lease), against the bare client doing
//! the same deliveries with nothing around them: an async-nats JetStream publish loop of the
//! same messages (acks awaited per batch, as the sink does), and pipelined `XADD`s of the same
//! entries (one pipeline per batch). Then sink isolation: the redis sink beside a healthy
//! nats sink, against the redis sink beside a nats sink whose server is down (connection
//! refused, retried every 10 to 100 ms). And a bare relay: the least any outbox relay to
//! Redis does (a lease, the same reads of the outbox, the next page read while this one is
//! written, pipelined `XADD`s per batch and a fenced cursor save per batch beside the next,
//! as SPEC §7.1–7.2 ask), with no bisection, backoff or state. And the `kafka` sink against
//! a bare idempotent producer loop of the same records to the same broker (every delivery
//! report of a batch awaited before the next), and the `rabbitmq` sink against a bare named
//! stream producer sending the same messages with the same publishing ids (every confirm of a
//! batch awaited before the next).
//!
//! PostgreSQL is reached at `DATABASE_URL`: over TCP, as users reach it (or through the Unix
//! socket when the run asks for it alone), and the targets apply there. When
//! `DATABASE_URL_BESIDE` names the same server another way (its Unix socket), every contender
//! that reads the outbox also runs through it, on the same database, and its figures are
//! printed beside. The bare JetStream and `XADD` loops touch no database and run once a round;
//! both transports' ratios divide by the same figure. Contenders and transports alternate
//! round by round on fresh streams (a contender's runs over both transports one after the
//! other, the order reversed every other round), so the machine's noise falls on all of them.
//!
//! The lines printed are the rates, then the ratios with targets: the nats sink against bare
//! JetStream (≥ 0.7), the kafka sink against the bare producer (≥ 0.7), the rabbitmq sink
//! against the bare stream producer (≥ 0.7), the redis sink against the bare relay (≥ 0.9: what the dispatcher costs
//! over what any relay must do), and the redis sink beside a downed nats sink against beside a
//! healthy one (≥ 0.9); then, for reference, the redis sink and the bare relay against bare
//! `XADD`s (what reading the outbox costs on this machine). Last, the CPU time per event of
//! each contender over each transport, taken from `/proc` around each timed run: this process
//! (`process`: the dispatcher or the bare client), the PostgreSQL backends of the benchmark's
//! database, and Redis (`-` for a part that is not a local process). Rates move with the
//! machine's load from one run to the next; these figures move less, and show where a
//! contender's time goes. From them, the redis sink at full CPU: the rate its CPU per event
//! allows with every core of the machine busy on it, against bare `XADD`s.
//!
//! Arguments: `[events] [batch] [rounds]`, default `20000 500 10`. `BENCH_SINKS_ONLY` (prefixes
//! separated by commas) runs only the contenders whose label starts with one of them, e.g.
//! `BENCH_SINKS_ONLY="redis sink (,bare relay"`; a ratio is printed only when both its sides
//! ran.

use std::time::{Duration, Instant};

use async_nats::jetstream::{self, message::PublishMessage, stream};
use outbox_core::{Event, NewEvent, Position};
use outbox_pg::internal::cursor::{self, Durability, OUTBOX_STREAM, Saved};
use outbox_pg::internal::lease;
use outbox_pg::sqlx::PgPool;
use outbox_pg::sqlx::postgres::PgConnectOptions;
use outbox_pg::testkit::TestDb;
use outbox_pg::{ReadPage, ReadRequest, read_page};
use outbox_workers::config::{SinkConfig, SinkKind, build_spec};
use outbox_workers::encoding::Encoder;
use outbox_workers::{BackoffPolicy, Dispatcher, DispatcherConfig};
use rabbitmq_stream_client::types::Message as StreamMessage;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::json;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Contender {
    NatsSink,
    BareNats,
    RedisSink,
    BareXadd,
    RedisBesideHealthy,
    RedisBesideDown,
    BareRelay,
    KafkaSink,
    BareKafka,
    RabbitmqSink,
    BareRabbitmq,
}

impl Contender {
    const ALL: [Contender; 11] = [
        Contender::NatsSink,
        Contender::BareNats,
        Contender::RedisSink,
        Contender::BareXadd,
        Contender::RedisBesideHealthy,
        Contender::RedisBesideDown,
        Contender::BareRelay,
        Contender::KafkaSink,
        Contender::BareKafka,
        Contender::RabbitmqSink,
        Contender::BareRabbitmq,
    ];

    fn label(self) -> &'static str {
        match self {
            Contender::NatsSink => "nats sink (dispatcher)",
            Contender::BareNats => "bare JetStream publish loop",
            Contender::RedisSink => "redis sink (dispatcher)",
            Contender::BareXadd => "bare pipelined XADD",
            Contender::RedisBesideHealthy => "redis sink, nats sink healthy",
            Contender::RedisBesideDown => "redis sink, nats sink down",
            Contender::BareRelay => "bare relay: read, XADD, save",
            Contender::KafkaSink => "kafka sink (dispatcher)",
            Contender::BareKafka => "bare idempotent producer loop",
            Contender::RabbitmqSink => "rabbitmq sink (dispatcher)",
            Contender::BareRabbitmq => "bare stream producer loop",
        }
    }

    /// Whether it reads the outbox, and so runs over every transport.
    fn reads_outbox(self) -> bool {
        !matches!(self, Contender::BareNats | Contender::BareXadd | Contender::BareKafka | Contender::BareRabbitmq)
    }
}

/// One way of reaching the benchmark's database.
struct Transport {
    /// `TCP` or `socket`.
    label: &'static str,
    pool: PgPool,
}

impl Transport {
    /// The label of the way `url` reaches its server.
    fn label_of(url: &str) -> &'static str {
        let options: PgConnectOptions = url.parse().expect("a PostgreSQL URL");
        if options.get_socket().is_some() || options.get_host().starts_with('/') { "socket" } else { "TCP" }
    }

    /// How a line says that PostgreSQL is reached the way `label` names.
    fn phrase(label: &str) -> &'static str {
        if label == "socket" { "through its Unix socket" } else { "over TCP" }
    }

    /// The benchmark's database through the server `server_url` names (its database replaced).
    async fn beside(db: &TestDb, server_url: &str) -> Transport {
        let options: PgConnectOptions = server_url.parse().expect("DATABASE_URL_BESIDE: a PostgreSQL URL");
        let pool = outbox_pg::pool::options()
            .max_connections(10)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options.database(db.name()))
            .await
            .expect("connecting to the benchmark's database at DATABASE_URL_BESIDE");
        Transport { label: Transport::label_of(server_url), pool }
    }
}

struct Bench {
    events: Vec<Event>,
    batch: usize,
    nats_url: String,
    redis_url: String,
    jetstream: jetstream::Context,
    redis: redis::aio::MultiplexedConnection,
    kafka_bootstrap: String,
    rabbitmq_url: String,
}

/// What the runs of one contender over one transport (an index into the transports) took.
struct Tally {
    contender: Contender,
    transport: usize,
    took: Duration,
    cpu: Cpu,
}

/// Every tally of a benchmark, with what it needs to turn them into figures.
struct Results {
    tallies: Vec<Tally>,
    transports: Vec<&'static str>,
    /// Events per contender over one transport, every round together.
    events: usize,
}

/// The measurement, in the process `outbox-bench sinks` starts (`measure-sinks`): optionally
/// the events, the batch and the rounds.
pub(crate) async fn run(args: &[String]) {
    let args: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let (count, batch, rounds) = (
        args.first().copied().unwrap_or(20_000),
        args.get(1).copied().unwrap_or(500),
        args.get(2).copied().unwrap_or(10),
    );
    let chosen = chosen_contenders();
    let nats_url = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    let redis_url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let db = TestDb::new().await;
    let mut transports = vec![Transport { label: Transport::label_of(&db.url), pool: db.pool.clone() }];
    if let Ok(beside) = std::env::var("DATABASE_URL_BESIDE") {
        transports.push(Transport::beside(&db, &beside).await);
    }
    let events = publish(&db.pool, count).await;
    let jetstream = jetstream::new(async_nats::connect(&nats_url).await.expect("connecting to NATS"));
    let client = redis::Client::open(redis_url.as_str()).expect("Redis URL");
    let redis = client.get_multiplexed_async_connection().await.expect("connecting to Redis");
    let kafka_bootstrap = std::env::var("KAFKA_BOOTSTRAP").expect("KAFKA_BOOTSTRAP: cargo xtask bench sinks sets it");
    let rabbitmq_url = std::env::var("RABBITMQ_STREAM_URL")
        .unwrap_or_else(|_| "rabbitmq-stream://guest:guest@127.0.0.1:5552/%2f".into());
    let bench = Bench { events, batch, nats_url, redis_url, jetstream, redis, kafka_bootstrap, rabbitmq_url };
    eprintln!("bench sinks: published {count} events");

    let mut tallies: Vec<Tally> = chosen
        .iter()
        .flat_map(|&contender| {
            let over = if contender.reads_outbox() { 0..transports.len() } else { 0..1 };
            over.map(move |transport| Tally { contender, transport, took: Duration::ZERO, cpu: Cpu::ZERO })
        })
        .collect();
    for round in 0..rounds {
        let mut order: Vec<usize> = (0..tallies.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for slot in order {
            let tally = &mut tallies[slot];
            let tag = format!("b{}r{round}{}", std::process::id(), ulid::Ulid::generate().to_string().to_lowercase());
            let before = bench.cpu(&db.pool).await;
            tally.took += bench.run(&transports[tally.transport].pool, tally.contender, &tag).await;
            tally.cpu = tally.cpu.add(bench.cpu(&db.pool).await.since(before));
            bench.clean_up(&tag).await;
        }
        eprintln!("bench sinks: round {}/{rounds} done", round + 1);
    }
    let over: Vec<&str> = transports.iter().map(|t| t.label).collect();
    println!(
        "bench sinks: {count} events per contender per round, batch {batch}, {rounds} rounds, contenders alternating; \
         PostgreSQL {}",
        over.iter().map(|label| Transport::phrase(label)).collect::<Vec<_>>().join(", and beside it ")
    );
    let results = Results { tallies, transports: over, events: count * rounds };
    results.print_rates();
    results.print_ratios();
    results.print_cpu();
}

/// The contenders `BENCH_SINKS_ONLY` names, every one when it is not set; exits when it names none.
fn chosen_contenders() -> Vec<Contender> {
    let only = std::env::var("BENCH_SINKS_ONLY").ok();
    let chosen: Vec<Contender> = Contender::ALL
        .into_iter()
        .filter(|c| only.as_deref().is_none_or(|only| only.split(',').any(|prefix| c.label().starts_with(prefix))))
        .collect();
    if chosen.is_empty() {
        let labels: Vec<&str> = Contender::ALL.iter().map(|c| c.label()).collect();
        eprintln!(
            "bench sinks: BENCH_SINKS_ONLY={:?} matches no contender; the labels are {labels:?}",
            only.as_deref().unwrap_or_default()
        );
        std::process::exit(2);
    }
    chosen
}

impl Results {
    /// The tally of `contender` over `transport` (its only one when it reads no outbox).
    fn tally(&self, contender: Contender, transport: usize) -> Option<&Tally> {
        let transport = if contender.reads_outbox() { transport } else { 0 };
        self.tallies.iter().find(|t| t.contender == contender && t.transport == transport)
    }

    fn rate(&self, contender: Contender, transport: usize) -> Option<f64> {
        Some(self.events as f64 / self.tally(contender, transport)?.took.as_secs_f64())
    }

    /// One column per transport, right-aligned in `width`.
    fn columns(&self, width: usize, cell: impl Fn(usize) -> String) -> String {
        (0..self.transports.len()).map(|t| format!("{:>width$}", cell(t))).collect()
    }

    fn print_rates(&self) {
        println!("  {:<30}{}  events/s", "", self.columns(10, |t| self.transports[t].to_owned()));
        for contender in Contender::ALL {
            let Some(rate) = self.rate(contender, 0) else { continue };
            if contender.reads_outbox() {
                let figures = self.columns(10, |t| self.rate(contender, t).map_or("-".into(), |r| format!("{r:.0}")));
                println!("  {:<30}{figures}", contender.label());
            } else {
                let beside = " ".repeat(10 * (self.transports.len() - 1));
                println!("  {:<30}{rate:>10.0}{beside}  (reads no outbox: once a round)", contender.label());
            }
        }
    }

    fn print_ratios(&self) {
        let primary = Transport::phrase(self.transports[0]);
        println!("  {:<38}{}", "", self.columns(8, |t| self.transports[t].to_owned()));
        for (ours, theirs, what, target) in [
            (Contender::NatsSink, Contender::BareNats, "nats sink / bare JetStream publish", Some(0.7)),
            (Contender::KafkaSink, Contender::BareKafka, "kafka sink / bare producer", Some(0.7)),
            (Contender::RabbitmqSink, Contender::BareRabbitmq, "rabbitmq sink / bare stream producer", Some(0.7)),
            (Contender::RedisSink, Contender::BareRelay, "redis sink / bare relay", Some(0.9)),
            (
                Contender::RedisBesideDown,
                Contender::RedisBesideHealthy,
                "redis sink: nats down / nats healthy",
                Some(0.9),
            ),
            (Contender::RedisSink, Contender::BareXadd, "redis sink / bare pipelined XADD", None),
            (Contender::BareRelay, Contender::BareXadd, "bare relay / bare pipelined XADD", None),
        ] {
            let ratio = |t: usize| Some(self.rate(ours, t)? / self.rate(theirs, t)?);
            let Some(first) = ratio(0) else { continue };
            let verdict = match target {
                Some(target) if first >= target => format!("meets target >= {target:.2} {primary}"),
                Some(target) => format!("MISSES target >= {target:.2} {primary}"),
                None => "reference".into(),
            };
            let figures = self.columns(8, |t| ratio(t).map_or("-".into(), |r| format!("{r:.2}")));
            println!("  {what:<38}{figures}  ({verdict})");
        }
        self.print_full_cpu();
    }

    /// Every part of the redis sink is a local process here: its CPU per event bounds how fast
    /// it could go with every core busy on it and nothing else, whatever the dispatcher does.
    fn print_full_cpu(&self) {
        let Ok(cores) = std::thread::available_parallelism() else { return };
        let per_event = |t: usize| {
            let Cpu { this, postgres, redis } = self.tally(Contender::RedisSink, t)?.cpu;
            Some((this? + postgres? + redis?) as f64 / 1e9 / self.events as f64)
        };
        let full_cpu = |t: usize| Some(cores.get() as f64 / per_event(t)?);
        let ratio = |t: usize| Some(full_cpu(t)? / self.rate(Contender::BareXadd, t)?);
        if ratio(0).is_none() {
            return;
        }
        let figures = self.columns(8, |t| ratio(t).map_or("-".into(), |r| format!("{r:.2}")));
        let spent: Vec<String> = (0..self.transports.len())
            .filter_map(|t| {
                let (micros, rate) = (per_event(t)? * 1e6, full_cpu(t)?);
                Some(format!("{} {micros:.2} µs = {rate:.0} events/s", self.transports[t]))
            })
            .collect();
        println!(
            "  {:<38}{figures}  (reference: {cores} cores / CPU per event; {})",
            "redis sink at full CPU / bare XADD",
            spent.join("; ")
        );
    }

    fn print_cpu(&self) {
        let per_event =
            |ns: Option<u64>| ns.map_or("-".to_owned(), |ns| format!("{:.2}", ns as f64 / 1e3 / self.events as f64));
        println!("  {:<30} {:<7} {:>8} {:>11} {:>8}", "CPU µs per event", "over", "process", "PostgreSQL", "Redis");
        for contender in Contender::ALL {
            let mut label = contender.label();
            for tally in self.tallies.iter().filter(|t| t.contender == contender) {
                let Cpu { this, postgres, redis } = tally.cpu;
                let over = if contender.reads_outbox() { self.transports[tally.transport] } else { "-" };
                let row = (per_event(this), per_event(postgres), per_event(redis));
                println!("  {label:<30} {over:<7} {:>8} {:>11} {:>8}", row.0, row.1, row.2);
                label = "";
            }
        }
    }
}
/// The `XADD`s the redis sink makes of `events` (key, id, fields), one pipeline, replies ignored.
fn xadds(tag: &str, events: &[Event], encoder: &Encoder) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    for event in events {
        pipe.cmd("XADD")
            .arg(format!("{tag}:{}", event.tenant_id))
            .arg(format!("{}-{}", event.sequence.txid, event.sequence.seq))
            .arg("id")
            .arg(&event.id)
            .arg("event")
            .arg(encoder.encode(event))
            .ignore();
    }
    pipe
}

/// One page of 1,000 events after `after`.
async fn fetch_page(pool: PgPool, after: Option<Position>) -> ReadPage {
    read_page(&pool, &ReadRequest::all().after(after).limit(1_000)).await.expect("read")
}

/// Publishes `count` events and returns them as the outbox reads them.
async fn publish(pool: &PgPool, count: usize) -> Vec<Event> {
    let batch: Vec<NewEvent> = (0..count)
        .map(|n| {
            let data = json!({"n": n, "state": "active", "note": "a payload of a realistic, modest size"});
            NewEvent::new("reservation.active", ["acme", "globex"][n % 2], format!("reservation/r{n}"), data)
        })
        .collect();
    let mut tx = pool.begin().await.expect("begin");
    for chunk in batch.chunks(10_000) {
        outbox_pg::publish_many(&mut *tx, chunk).await.expect("publish");
    }
    tx.commit().await.expect("commit");
    let mut events = Vec::with_capacity(count);
    let mut request = ReadRequest::all().limit(1_000);
    while events.len() < count {
        let page = read_page(pool, &request).await.expect("read");
        request.after = Some(page.next_after);
        let caught_up = !page.more;
        events.extend(page.events);
        if caught_up && events.len() < count {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    events
}

/// CPU time in nanoseconds, as `/proc/<pid>/task/*/schedstat` counts it: of this process (the
/// dispatcher or the bare client, and the benchmark's own bookkeeping), of the PostgreSQL
/// backends serving the benchmark's database, and of Redis. A part this machine cannot see (a
/// server elsewhere, a system without `/proc`) is `None` and printed as `-`.
#[derive(Clone, Copy)]
struct Cpu {
    this: Option<u64>,
    postgres: Option<u64>,
    redis: Option<u64>,
}

impl Cpu {
    const ZERO: Cpu = Cpu { this: Some(0), postgres: Some(0), redis: Some(0) };

    fn since(self, before: Cpu) -> Cpu {
        let minus = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_sub(b?));
        Cpu {
            this: minus(self.this, before.this),
            postgres: minus(self.postgres, before.postgres),
            redis: minus(self.redis, before.redis),
        }
    }

    fn add(self, other: Cpu) -> Cpu {
        let plus = |a: Option<u64>, b: Option<u64>| Some(a? + b?);
        Cpu {
            this: plus(self.this, other.this),
            postgres: plus(self.postgres, other.postgres),
            redis: plus(self.redis, other.redis),
        }
    }
}

/// The CPU time of process `pid` when it is a local process whose name starts with `name` (a
/// pid reported by a server elsewhere may name an unrelated process here).
fn cpu_of(pid: u32, name: &str) -> Option<u64> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    comm.starts_with(name).then(|| cpu_of_threads(pid)).flatten()
}

/// The CPU time of every thread of process `pid` (a thread that ends meanwhile is left out).
fn cpu_of_threads(pid: u32) -> Option<u64> {
    let threads = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let ran = |schedstat: String| schedstat.split_whitespace().next()?.parse::<u64>().ok();
    Some(threads.flatten().filter_map(|task| ran(std::fs::read_to_string(task.path().join("schedstat")).ok()?)).sum())
}

impl Bench {
    /// The CPU time so far of this process, of the backends connected to the benchmark's
    /// database (a backend that ends between two readings takes its time with it; the pool's
    /// connections stay open), and of Redis.
    async fn cpu(&self, pool: &PgPool) -> Cpu {
        let backends: Option<Vec<i32>> =
            outbox_pg::sqlx::query_scalar("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
                .fetch_all(pool)
                .await
                .ok();
        let postgres = backends.and_then(|pids| {
            let seen: Vec<u64> =
                pids.into_iter().filter_map(|pid| cpu_of(u32::try_from(pid).ok()?, "postgres")).collect();
            (!seen.is_empty()).then(|| seen.iter().sum())
        });
        let mut connection = self.redis.clone();
        let info: Option<String> = redis::cmd("INFO").arg("server").query_async(&mut connection).await.ok();
        let redis_pid = info.as_deref().and_then(|info| {
            info.lines().find_map(|line| line.strip_prefix("process_id:")).and_then(|pid| pid.trim().parse().ok())
        });
        Cpu {
            this: cpu_of_threads(std::process::id()),
            postgres,
            redis: redis_pid.and_then(|pid| cpu_of(pid, "redis")),
        }
    }

    /// Runs `contender` once on streams named after `tag`, reading the outbox through `pool`,
    /// and returns how long it took.
    async fn run(&self, pool: &PgPool, contender: Contender, tag: &str) -> Duration {
        match contender {
            Contender::NatsSink => {
                let mut config = SinkConfig::new(format!("nats-{tag}"), SinkKind::Nats);
                config.url = Some(self.nats_url.clone());
                config.subject = Some(format!("{tag}.{{tenantId}}.{{type}}"));
                config.stream = Some(self.create_stream(tag).await);
                self.through_dispatcher(pool, &[config]).await
            }
            Contender::BareNats => {
                self.create_stream(tag).await;
                self.bare_nats(tag).await
            }
            Contender::RedisSink => {
                let mut config = SinkConfig::new(format!("redis-{tag}"), SinkKind::Redis);
                config.url = Some(self.redis_url.clone());
                config.key = Some(format!("{tag}:{{tenantId}}"));
                self.through_dispatcher(pool, &[config]).await
            }
            Contender::BareRelay => self.bare_relay(pool, tag).await,
            Contender::KafkaSink => {
                let mut config = SinkConfig::new(format!("kafka-{tag}"), SinkKind::Kafka);
                config.brokers = Some(self.kafka_bootstrap.clone());
                config.topic = Some(format!("{tag}.{{tenantId}}"));
                self.through_dispatcher(pool, &[config]).await
            }
            Contender::BareKafka => self.bare_kafka(tag).await,
            Contender::RabbitmqSink => {
                let mut config = SinkConfig::new(format!("rabbitmq-{tag}"), SinkKind::Rabbitmq);
                config.url = Some(self.rabbitmq_url.clone());
                config.stream = Some(tag.to_owned());
                self.through_dispatcher(pool, &[config]).await
            }
            Contender::BareRabbitmq => self.bare_rabbitmq(tag).await,
            Contender::BareXadd => self.bare_xadd(tag).await,
            Contender::RedisBesideHealthy | Contender::RedisBesideDown => {
                let mut redis = SinkConfig::new(format!("redis-{tag}"), SinkKind::Redis);
                redis.url = Some(self.redis_url.clone());
                redis.key = Some(format!("{tag}:{{tenantId}}"));
                let mut nats = SinkConfig::new(format!("nats-{tag}"), SinkKind::Nats);
                nats.subject = Some(format!("{tag}.{{tenantId}}.{{type}}"));
                let healthy = contender == Contender::RedisBesideHealthy;
                if healthy {
                    nats.url = Some(self.nats_url.clone());
                    nats.stream = Some(self.create_stream(tag).await);
                } else {
                    nats.url = Some("nats://127.0.0.1:1".into());
                }
                self.through_dispatcher(pool, &[redis, nats]).await
            }
        }
    }

    /// Deletes what a run on `tag` wrote (its Redis streams, its JetStream and RabbitMQ
    /// streams; a Kafka topic stays).
    async fn clean_up(&self, tag: &str) {
        self.delete_keys(tag).await;
        self.delete_stream(tag).await;
        if let Ok(environment) = self.rabbitmq_environment().await {
            let _ = environment.delete_stream(tag).await;
        }
    }

    async fn rabbitmq_environment(&self) -> Result<rabbitmq_stream_client::Environment, String> {
        let endpoint = outbox_workers::sinks::RabbitmqEndpoint::parse(&self.rabbitmq_url)?;
        endpoint.environment().await.map_err(|e| e.to_string())
    }

    /// The records the kafka sink produces (topic, key, headers, value) through an idempotent
    /// producer configured as the sink's, every delivery report of a batch awaited before the next.
    async fn bare_kafka(&self, tag: &str) -> Duration {
        let producer: FutureProducer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", &self.kafka_bootstrap)
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("partitioner", "murmur2_random")
            .create()
            .expect("a Kafka producer");
        let encoder = Encoder::default();
        let started = Instant::now();
        for chunk in self.events.chunks(self.batch) {
            let mut reports = Vec::with_capacity(chunk.len());
            for event in chunk {
                let (topic, payload, sequence) =
                    (format!("{tag}.{}", event.tenant_id), encoder.encode(event), event.sequence.to_string());
                let headers = OwnedHeaders::new_with_capacity(4)
                    .insert(Header { key: "outbox-id", value: Some(event.id.as_str()) })
                    .insert(Header { key: "outbox-type", value: Some(event.event_type.as_str()) })
                    .insert(Header { key: "outbox-tenant", value: Some(event.tenant_id.as_str()) })
                    .insert(Header { key: "outbox-sequence", value: Some(sequence.as_str()) });
                let record = FutureRecord::to(&topic).key(event.subject.as_str()).payload(&payload).headers(headers);
                reports.push(producer.send_result(record).map_err(|(e, _)| e).expect("produce"));
            }
            for report in reports {
                report.await.expect("a delivery report").map_err(|(e, _)| e).expect("delivered");
            }
        }
        started.elapsed()
    }

    /// The messages the rabbitmq sink publishes (body, properties, publishing ids from 1)
    /// through a named producer on a fresh stream, every confirm of a batch awaited before the next.
    async fn bare_rabbitmq(&self, tag: &str) -> Duration {
        let environment = self.rabbitmq_environment().await.expect("connecting to RabbitMQ");
        let started = Instant::now();
        environment.stream_creator().create(tag).await.expect("creating the stream");
        let mut producer = environment.producer().name(&format!("bare-{tag}")).build(tag).await.expect("a producer");
        let encoder = Encoder::default();
        for (chunk, first) in self.events.chunks(self.batch).zip((1..).step_by(self.batch)) {
            let messages: Vec<StreamMessage> = chunk
                .iter()
                .zip(first..)
                .map(|(event, id)| {
                    let sequence = event.sequence.to_string();
                    StreamMessage::builder()
                        .body(encoder.encode(event))
                        .properties()
                        .content_type(encoder.content_type())
                        .message_builder()
                        .application_properties()
                        .insert("outbox-id", event.id.as_str())
                        .insert("outbox-type", event.event_type.as_str())
                        .insert("outbox-tenant", event.tenant_id.as_str())
                        .insert("outbox-subject", event.subject.as_str())
                        .insert("outbox-sequence", sequence.as_str())
                        .message_builder()
                        .publishing_id(id)
                        .build()
                })
                .collect();
            let confirmed = producer.batch_send_with_confirm(messages).await.expect("publish");
            assert!(confirmed.iter().all(|c| c.confirmed()), "every message confirmed");
        }
        let took = started.elapsed();
        let _ = producer.close().await;
        took
    }

    /// Time for the first of `sinks`, run by one dispatcher on `pool` with the others, to
    /// deliver every event and save its cursor.
    async fn through_dispatcher(&self, pool: &PgPool, sinks: &[SinkConfig]) -> Duration {
        let specs = sinks
            .iter()
            .map(|sink| build_spec(&SinkConfig { batch: self.batch, ..sink.clone() }).expect("sink config"))
            .collect();
        let sink = &sinks[0];
        let config = DispatcherConfig {
            poll_interval: Duration::from_millis(5),
            backoff: BackoffPolicy { initial: Duration::from_millis(10), max: Duration::from_millis(100) },
            ..DispatcherConfig::default()
        };
        let last = self.events.last().map(|e| e.sequence);
        let started = Instant::now();
        let dispatcher = Dispatcher::start(pool.clone(), config, specs).expect("start");
        let mut changes = dispatcher.watch(&sink.id).expect("the sink runs here");
        changes.wait_for(|state| state.position == last).await.expect("the sink's loop ended early");
        let took = started.elapsed();
        if let Some(error) = dispatcher.local_state(&sink.id).and_then(|s| s.last_error) {
            eprintln!("bench sinks: {} saw an error: {error}", sink.id);
        }
        dispatcher.shutdown().await;
        took
    }

    async fn create_stream(&self, tag: &str) -> String {
        let name = tag.to_uppercase();
        let config = stream::Config { name: name.clone(), subjects: vec![format!("{tag}.>")], ..Default::default() };
        self.jetstream.create_stream(config).await.expect("creating the stream");
        name
    }

    async fn delete_stream(&self, tag: &str) {
        let _ = self.jetstream.delete_stream(tag.to_uppercase()).await;
    }

    /// The same messages the nats sink publishes (subject, payload, Nats-Msg-Id), acks awaited
    /// per batch.
    async fn bare_nats(&self, tag: &str) -> Duration {
        let encoder = Encoder::default();
        let started = Instant::now();
        for chunk in self.events.chunks(self.batch) {
            let mut acks = Vec::with_capacity(chunk.len());
            for event in chunk {
                let subject = format!("{tag}.{}.{}", event.tenant_id, event.event_type);
                let message = PublishMessage::build()
                    .payload(encoder.encode(event).into())
                    .message_id(&event.id)
                    .header("Content-Type", encoder.content_type());
                acks.push(self.jetstream.send_publish(subject, message).await.expect("publish"));
            }
            for ack in acks {
                ack.await.expect("ack");
            }
        }
        started.elapsed()
    }

    /// The same entries the redis sink writes (key, id, fields), one pipeline per batch.
    async fn bare_xadd(&self, tag: &str) -> Duration {
        let encoder = Encoder::default();
        let mut connection = self.redis.clone();
        let started = Instant::now();
        for chunk in self.events.chunks(self.batch) {
            let () = xadds(tag, chunk, &encoder).query_async(&mut connection).await.expect("XADD pipeline");
        }
        started.elapsed()
    }

    /// The least an outbox relay to Redis does: take a lease, read pages of 1,000 from the
    /// outbox (the next one while this one is written), one `XADD` pipeline per batch, and each
    /// batch's cursor save (fenced by the lease, not waiting for the WAL flush, as the
    /// dispatcher's) beside the next batch.
    async fn bare_relay(&self, pool: &PgPool, tag: &str) -> Duration {
        let encoder = Encoder::default();
        let mut connection = self.redis.clone();
        let cursor = format!("relay-{tag}");
        let started = Instant::now();
        let lease = lease::acquire(pool, &cursor, "bench", Duration::from_secs(60))
            .await
            .expect("acquiring the relay's lease")
            .expect("a fresh lease is free");
        let mut next = Some(tokio::spawn(fetch_page(pool.clone(), None)));
        let mut saving: Option<tokio::task::JoinHandle<()>> = None;
        let mut relayed = 0;
        while let Some(reading) = next.take() {
            let page = reading.await.expect("read task");
            if page.more {
                next = Some(tokio::spawn(fetch_page(pool.clone(), Some(page.next_after))));
            }
            relayed += page.events.len();
            for chunk in page.events.chunks(self.batch) {
                let () = xadds(tag, chunk, &encoder).query_async(&mut connection).await.expect("XADD pipeline");
                if let Some(saved) = saving.take() {
                    saved.await.expect("save task");
                }
                let (pool, lease, cursor, to) =
                    (pool.clone(), lease.clone(), cursor.clone(), chunk[chunk.len() - 1].sequence);
                saving = Some(tokio::spawn(async move {
                    let saved = cursor::save(&pool, &lease, OUTBOX_STREAM, &cursor, to, Durability::Relaxed).await;
                    assert_eq!(saved.expect("saving the relay's cursor"), Saved::Moved);
                }));
            }
        }
        if let Some(saved) = saving {
            saved.await.expect("save task");
        }
        let took = started.elapsed();
        assert_eq!(relayed, self.events.len(), "the bare relay stopped early");
        took
    }

    async fn delete_keys(&self, tag: &str) {
        let mut connection = self.redis.clone();
        let keys = [format!("{tag}:acme"), format!("{tag}:globex")];
        let _: Result<(), _> = redis::cmd("DEL").arg(&keys).query_async(&mut connection).await;
    }
}
