//! `cargo xtask bench fanout`: what a live stream costs with the shared tail and with
//! per-stream polling (`WatchOptions::shared_tail = false`), and what it costs in the
//! `outbox` binary itself, side by side in one run.
//!
//! Every server runs in a process of its own, so that its resident memory is its own:
//! - **the stand-in**, this binary again (`bench fanout-server`): an `OutboxService` on
//!   hyper's HTTP/1 connection, a pool of 10 with the server's pool options, the `outbox`
//!   binary's allocator and its options ([`SERVER_MALLOC_CONF`]), PostgreSQL over the
//!   primary transport; in the modes `tail`, `polling` and `bare` (below);
//! - **`outbox serve`**, the release binary users run (hyper-util's auto builder, HTTP/1 and
//!   HTTP/2, every role, authentication by API key), started by [`outbox_services::serve`]
//!   with its `DATABASE_URL` over TCP and, beside it, over the Unix socket.
//!
//! For each server, streams of one tenant are opened from this process over loopback, 1,
//! then 1,000, then 10,000 (each step adds to the last), and at each step:
//! - **statements/s** while every stream is idle: `xact_commit + xact_rollback` of the bench
//!   database in `pg_stat_database` over a window (every statement the server runs is one
//!   autocommitted transaction; `pg_stat_statements` is not assumed to be loaded);
//! - **commit-to-client latency**: events published one per transaction; for each stream
//!   and event, the time from just before `COMMIT` to the moment the client read the event;
//! - **resident memory per stream**: the server's `VmRSS` growth since it had no stream,
//!   divided by the streams open.
//!
//! A stand-in mode, `bare`, answers `/watch` with hyper alone (an endless body that says
//! `retry:` and then nothing): its memory per stream is the floor under ours.
//!
//! Targets (issues 4 and 20), applied to the shared tail of the stand-in and of `outbox
//! serve`: 10,000 idle streams cost at most 1.5 × the statements of one; p99 at 10,000
//! streams at most 3 × `poll_ms`; at most 16 KiB per stream.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use outbox_core::NewEvent;
use outbox_http::{OutboxService, WatchOptions};
use rand::Rng;
use serde_json::json;
use sqlx::PgPool;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::http::{Everyone, TENANT};
use outbox_services::serve::{OutboxProcess, ServeOptions, database_url};
use outbox_services::{Postgres, ScratchDatabase, Transport, Transports, postgres};

const POLL_MS: u64 = 100;
const STEPS: [usize; 3] = [1, 1_000, 10_000];
/// Events published per latency measurement, one per transaction.
const EVENTS: usize = 12;
/// The pause between those events, so that deliveries of one do not overlap the next, plus a
/// random part of up to `poll_ms`: commits fall at random phases of the tail's steady poll
/// (a fixed spacing, a multiple of it, would measure one phase twelve times).
const SPACING: Duration = Duration::from_millis(400);
/// How long a latency sample may take before it counts as missing.
const GIVE_UP: Duration = Duration::from_secs(10);
/// The window over which idle statements are counted.
const WINDOW: Duration = Duration::from_secs(6);

/// The jemalloc options `outbox serve` runs with (`SERVER_MALLOC_CONF` in
/// `crates/outbox-server/src/main.rs`), given to the stand-in too, so that its allocator
/// behaves as the binary's; `_RJEM_MALLOC_CONF` in the environment replaces them for both.
const SERVER_MALLOC_CONF: &str = "background_thread:true,dirty_decay_ms:1000,lg_extent_max_active_fit:0";

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `/watch` fed by the shared tail.
    Tail,
    /// `/watch` with each stream polling on its own.
    Polling,
    /// Not the outbox: hyper's HTTP/1 connection with an endless, silent SSE body, the floor
    /// under the memory of any stream served this way.
    Bare,
}

impl Mode {
    fn label(self) -> &'static str {
        match self {
            Mode::Tail => "shared tail",
            Mode::Polling => "per-stream polling",
            Mode::Bare => "bare hyper SSE",
        }
    }

    fn arg(self) -> &'static str {
        match self {
            Mode::Tail => "tail",
            Mode::Polling => "polling",
            Mode::Bare => "bare",
        }
    }

    /// The mode named by `bench fanout-server --mode`.
    pub(crate) fn parse(arg: &str) -> anyhow::Result<Mode> {
        [Mode::Tail, Mode::Polling, Mode::Bare]
            .into_iter()
            .find(|mode| mode.arg() == arg)
            .with_context(|| format!("unknown mode {arg:?}"))
    }
}

/// What serves the streams.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Contender {
    /// The stand-in (`bench fanout-server`) in one of its modes.
    StandIn(Mode),
    /// `outbox serve`, its `DATABASE_URL` over this transport.
    Serve(Transport),
}

impl Contender {
    fn label(self) -> String {
        match self {
            Contender::StandIn(mode) => mode.label().into(),
            Contender::Serve(transport) => format!("outbox serve ({})", transport.label()),
        }
    }
}

/// One step's figures.
#[derive(Default, Clone, Copy)]
struct Figures {
    statements_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    missing: usize,
    kib_per_stream: f64,
}

/// Where the servers reach PostgreSQL, and the `outbox` binary.
struct Setup<'a> {
    postgres: &'a Postgres,
    /// The server's URL over the primary transport: the stand-ins', the admin's, the publisher's.
    primary_url: String,
    binary: std::path::PathBuf,
    db: ScratchDatabase,
    /// The bench database's name.
    name: String,
}

pub(crate) fn run(transports: Transports) -> anyhow::Result<()> {
    let postgres = postgres()?;
    let measured = transports.available(&postgres)?;
    let primary_url = postgres.url_over(transports.primary)?;
    let binary = outbox_services::serve::build()?;
    outbox_services::runtime()?.block_on(async {
        let db = ScratchDatabase::create(&primary_url, "outbox_bench_fanout").await?;
        let name = outbox_services::serve::database_name(&db.pool).await?;
        let setup = Setup { postgres: &postgres, primary_url, binary, db, name };
        let mut contenders: Vec<Contender> =
            [Mode::Tail, Mode::Polling, Mode::Bare].into_iter().map(Contender::StandIn).collect();
        contenders.extend(measured.into_iter().map(Contender::Serve));
        let mut results = Vec::new();
        for contender in contenders {
            results.push((contender, bench_contender(contender, &setup).await?));
        }
        setup.db.drop_now().await?;
        report(&setup.name, transports.primary, &results);
        Ok(())
    })
}

/// A server process of either kind.
enum Server {
    StandIn(ServerProcess),
    Serve(OutboxProcess),
}

impl Server {
    fn start(contender: Contender, setup: &Setup<'_>) -> anyhow::Result<Server> {
        Ok(match contender {
            Contender::StandIn(mode) => Server::StandIn(ServerProcess::start(&setup.primary_url, &setup.name, mode)?),
            Contender::Serve(transport) => {
                let database_url = database_url(&setup.postgres.url_over(transport)?, &setup.name);
                let options = ServeOptions { database_url: &database_url, roles: &["all"], poll_ms: POLL_MS };
                let binary = setup.binary.clone();
                let start = move || OutboxProcess::start(&binary, &options);
                Server::Serve(tokio::task::block_in_place(start)?)
            }
        })
    }

    fn port(&self) -> u16 {
        match self {
            Server::StandIn(server) => server.port,
            Server::Serve(server) => server.port(),
        }
    }

    fn pid(&self) -> u32 {
        match self {
            Server::StandIn(server) => server.pid(),
            Server::Serve(server) => server.pid(),
        }
    }

    fn rss_kib(&self) -> anyhow::Result<u64> {
        match self {
            Server::StandIn(server) => outbox_services::serve::rss_kib(server.pid()),
            Server::Serve(server) => server.rss_kib(),
        }
    }
}

async fn bench_contender(contender: Contender, setup: &Setup<'_>) -> anyhow::Result<Vec<Figures>> {
    let server = Server::start(contender, setup)?;
    let (port, label) = (server.port(), contender.label());
    eprintln!("bench fanout: {label} server pid {} on port {port}", server.pid());
    let admin = sqlx::postgres::PgPoolOptions::new().max_connections(1).connect(&setup.primary_url).await?;
    let clients = Arc::new(Clients::default());
    // One request first, so that the pool and the runtime are warm before the baseline memory.
    warm_up(port).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_empty = server.rss_kib()?;
    let mut figures = Vec::new();
    let mut round = 0;
    for &streams in &STEPS {
        let opened = Instant::now();
        clients.open_up_to(port, streams).await?;
        eprintln!("bench fanout: {label}: {streams} streams open in {:.1?}", opened.elapsed());
        // Let every stream finish its first read and go idle.
        tokio::time::sleep(Duration::from_secs(2)).await;
        if contender == Contender::StandIn(Mode::Bare) {
            let kib_per_stream = (server.rss_kib()?.saturating_sub(rss_empty)) as f64 / streams as f64;
            figures.push(Figures { kib_per_stream, ..Figures::default() });
            continue;
        }
        let statements_per_s = idle_statements(&admin, &setup.name).await?;
        let rss = server.rss_kib()?;
        let latency = latency(&setup.db.pool, &clients, streams, &mut round).await?;
        let kib_per_stream = (rss.saturating_sub(rss_empty)) as f64 / streams as f64;
        figures.push(Figures { statements_per_s, kib_per_stream, ..latency });
        eprintln!(
            "bench fanout: {label} x{streams}: {statements_per_s:.1} statements/s, p50 {:.0} ms, p99 {:.0} ms, {kib_per_stream:.1} KiB/stream",
            latency.p50_ms, latency.p99_ms
        );
    }
    clients.close();
    // `outbox serve` gets its SIGTERM and the time to end its streams and exit.
    tokio::task::block_in_place(move || drop(server));
    admin.close().await;
    Ok(figures)
}

/// Statements per second database `name` runs over [`WINDOW`], as `pg_stat_database` counts
/// its transactions (`bench webhooks` counts the same way).
pub(crate) async fn idle_statements(admin: &PgPool, name: &str) -> anyhow::Result<f64> {
    let count = || async {
        let n: i64 =
            sqlx::query_scalar("SELECT (xact_commit + xact_rollback)::bigint FROM pg_stat_database WHERE datname = $1")
                .bind(name)
                .fetch_one(admin)
                .await?;
        anyhow::Ok(n)
    };
    let (before, started) = (count().await?, Instant::now());
    tokio::time::sleep(WINDOW).await;
    let after = count().await?;
    Ok((after - before) as f64 / started.elapsed().as_secs_f64())
}

/// Publishes [`EVENTS`] events and collects, for every open stream, how long each took.
async fn latency(pool: &PgPool, clients: &Clients, streams: usize, round: &mut usize) -> anyhow::Result<Figures> {
    let first = *round * EVENTS;
    *round += 1;
    let commits: Commits = Arc::new((0..EVENTS).map(|_| OnceLock::new()).collect());
    clients.expect(first, commits.clone());
    for k in 0..EVENTS {
        let event = NewEvent::new("node.joined", TENANT, "node/n1", json!({"k": first + k, "pad": "x".repeat(200)}));
        let mut tx = pool.begin().await?;
        outbox_pg::publish(&mut *tx, &event).await?;
        commits[k].get_or_init(Instant::now);
        tx.commit().await?;
        let jitter = Duration::from_micros(rand::rng().random_range(0..POLL_MS * 1000));
        tokio::time::sleep(SPACING + jitter).await;
    }
    let deadline = Instant::now() + GIVE_UP;
    while clients.received() < streams * EVENTS && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut samples = clients.take_samples();
    let missing = (streams * EVENTS).saturating_sub(samples.len());
    samples.extend(std::iter::repeat_n(GIVE_UP, missing));
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)].as_secs_f64() * 1e3;
    Ok(Figures { p50_ms: at(0.50), p99_ms: at(0.99), missing, ..Figures::default() })
}

/// When each event of a measurement began to commit.
type Commits = Arc<Vec<OnceLock<Instant>>>;

/// The open client connections and what they read.
#[derive(Default)]
struct Clients {
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    shared: Arc<Received>,
}

#[derive(Default)]
struct Received {
    /// The first `k` of the current measurement and when each event's commit began.
    expect: Mutex<Option<(usize, Commits)>>,
    samples: Mutex<Vec<Duration>>,
    count: AtomicUsize,
}

impl Clients {
    async fn open_up_to(&self, port: u16, streams: usize) -> anyhow::Result<()> {
        let have = self.tasks.lock().unwrap().len();
        let mut opening = tokio::task::JoinSet::new();
        let mut next = have;
        while next < streams || !opening.is_empty() {
            while next < streams && opening.len() < 256 {
                opening.spawn(open_stream(port));
                next += 1;
            }
            let Some(opened) = opening.join_next().await else { break };
            let (stream, rest) = opened??;
            let shared = self.shared.clone();
            self.tasks.lock().unwrap().push(tokio::spawn(read_stream(stream, rest, shared)));
        }
        Ok(())
    }

    fn expect(&self, first: usize, commits: Commits) {
        self.shared.samples.lock().unwrap().clear();
        self.shared.count.store(0, Ordering::SeqCst);
        *self.shared.expect.lock().unwrap() = Some((first, commits));
    }

    fn received(&self) -> usize {
        self.shared.count.load(Ordering::SeqCst)
    }

    fn take_samples(&self) -> Vec<Duration> {
        std::mem::take(&mut *self.shared.samples.lock().unwrap())
    }

    fn close(&self) {
        self.tasks.lock().unwrap().drain(..).for_each(|task| task.abort());
    }
}

/// `GET /watch` from now; returns once the response head and the `retry:` frame are read.
async fn open_stream(port: u16) -> anyhow::Result<(TcpStream, Vec<u8>)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.context("connecting")?;
    let request =
        "GET /watch HTTP/1.1\r\nhost: bench\r\nauthorization: Bearer bench\r\naccept: text/event-stream\r\n\r\n";
    stream.write_all(request.as_bytes()).await?;
    let mut buffer = Vec::with_capacity(1024);
    let mut chunk = [0_u8; 1024];
    while !contains(&buffer, b"retry:") {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            bail!("the server closed a stream while opening it: {}", String::from_utf8_lossy(&buffer));
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    if !buffer.starts_with(b"HTTP/1.1 200") {
        bail!("/watch refused: {}", String::from_utf8_lossy(&buffer));
    }
    Ok((stream, Vec::new()))
}

/// Reads a stream until it ends, noting when each `"k":<n>` event arrives.
async fn read_stream(mut stream: TcpStream, mut pending: Vec<u8>, shared: Arc<Received>) {
    let mut chunk = vec![0_u8; 4096];
    loop {
        let n = match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let at = Instant::now();
        pending.extend_from_slice(&chunk[..n]);
        let Some(end) = pending.iter().rposition(|b| *b == b'\n') else { continue };
        let mut rest = &pending[..=end];
        while let Some(found) = find(rest, b"\"k\":") {
            rest = &rest[found + 4..];
            let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
            let Ok(k) = std::str::from_utf8(&rest[..digits]).unwrap_or("").parse::<usize>() else { continue };
            shared.record(k, at);
        }
        pending.drain(..=end);
    }
}

impl Received {
    fn record(&self, k: usize, at: Instant) {
        let expect = self.expect.lock().unwrap();
        let Some((first, commits)) = expect.as_ref() else { return };
        let Some(committed) = k.checked_sub(*first).and_then(|i| commits.get(i)).and_then(OnceLock::get) else {
            return;
        };
        self.samples.lock().unwrap().push(at.saturating_duration_since(*committed));
        self.count.fetch_add(1, Ordering::SeqCst);
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    find(haystack, needle).is_some()
}

async fn warm_up(port: u16) -> anyhow::Result<()> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await?;
    let request =
        "GET /events?limit=1 HTTP/1.1\r\nhost: bench\r\nauthorization: Bearer bench\r\nconnection: close\r\n\r\n";
    stream.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await?;
    if !answer.starts_with(b"HTTP/1.1 200") {
        bail!("the bench server did not answer: {}", String::from_utf8_lossy(&answer));
    }
    Ok(())
}

/// The server, as a process of its own.
struct ServerProcess {
    child: Child,
    port: u16,
}

impl ServerProcess {
    fn start(server_url: &str, database: &str, mode: Mode) -> anyhow::Result<ServerProcess> {
        let exe = std::env::current_exe()?;
        let malloc_conf = std::env::var("_RJEM_MALLOC_CONF").unwrap_or_else(|_| SERVER_MALLOC_CONF.into());
        // Raise the soft limit on open files to the hard one for ten thousand connections.
        let mut child = Command::new("sh")
            .arg("-c")
            .arg("ulimit -n \"$(ulimit -H -n)\" 2>/dev/null; exec \"$0\" \"$@\"")
            .arg(exe)
            .args(["fanout-server", "--server-url", server_url, "--database", database])
            .args(["--mode", mode.arg()])
            .env("_RJEM_MALLOC_CONF", malloc_conf)
            .stdout(Stdio::piped())
            .spawn()
            .context("starting the bench server")?;
        let stdout = child.stdout.take().context("the server's stdout")?;
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line)?;
        let port = line.trim().strip_prefix("listening ").and_then(|p| p.parse().ok());
        let Some(port) = port else { bail!("the bench server said {line:?}, not its port") };
        Ok(ServerProcess { child, port })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `bench fanout-server`: serves `/watch` and `/events` over `database` until killed.
pub(crate) fn serve(server_url: &str, database: &str, mode: Mode) -> anyhow::Result<()> {
    let shared_tail = mode == Mode::Tail;
    let options: sqlx::postgres::PgConnectOptions = server_url.parse()?;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(async {
        let pool = outbox_pg::pool::options()
            .max_connections(10)
            .acquire_timeout(Duration::from_secs(600))
            .connect_with(options.database(database))
            .await?;
        let options = WatchOptions { poll_ms: POLL_MS, shared_tail, ..WatchOptions::default() };
        let service = OutboxService::new(pool, Arc::new(Everyone)).with_options(options);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        println!("listening {}", listener.local_addr()?.port());
        loop {
            let (stream, _) = listener.accept().await?;
            let service = service.clone();
            tokio::spawn(async move {
                let handler = hyper::service::service_fn(move |request: http::Request<hyper::body::Incoming>| {
                    let service = service.clone();
                    async move {
                        if mode == Mode::Bare && request.uri().path() == "/watch" {
                            return Ok(bare_stream());
                        }
                        Ok::<_, std::convert::Infallible>(service.handle(request).await)
                    }
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, handler).await;
            });
        }
    })
}

/// An endless SSE body that says `retry:` and then nothing: the floor under a stream.
fn bare_stream() -> http::Response<outbox_http::Body> {
    use futures_util::StreamExt;
    use http_body_util::{BodyExt, StreamBody};
    let retry = futures_util::stream::once(async {
        Ok::<_, std::convert::Infallible>(hyper::body::Frame::data(bytes::Bytes::from_static(b"retry: 2000\n\n")))
    });
    let body = BodyExt::boxed(StreamBody::new(retry.chain(futures_util::stream::pending())));
    let mut response = http::Response::new(body);
    response.headers_mut().insert("content-type", http::HeaderValue::from_static("text/event-stream"));
    response
}

fn report(database: &str, primary: Transport, results: &[(Contender, Vec<Figures>)]) {
    let bare = Contender::StandIn(Mode::Bare);
    let streaming: Vec<&(Contender, Vec<Figures>)> = results.iter().filter(|(c, _)| *c != bare).collect();
    let figures_of = |wanted: Contender| results.iter().find(|(c, _)| *c == wanted).map(|(_, f)| f);
    println!(
        "bench fanout: poll_ms={POLL_MS}, streams of one tenant over loopback, each server a process of its own: \
         the stand-in (bench fanout-server: hyper's HTTP/1 builder, PostgreSQL over {}) and outbox serve (the \
         release binary, every role); statements/s = pg_stat_database xact_commit+xact_rollback of {database} over \
         {WINDOW:?} while idle",
        primary.label()
    );
    let header: String = streaming.iter().map(|(c, _)| format!(" {:>22}", c.label())).collect();
    println!("  {:<34}{header}", "");
    for (i, streams) in STEPS.iter().enumerate() {
        let row = |what: &str, value: &dyn Fn(&Figures) -> String| {
            let cells: String = streaming.iter().map(|(_, f)| format!(" {:>22}", value(&f[i]))).collect();
            println!("  {:<34}{cells}", format!("{what}, {streams} streams"));
        };
        row("statements/s idle", &|f| format!("{:.1}", f.statements_per_s));
        row("latency p50 / p99 ms", &|f| {
            let missing = if f.missing > 0 { format!(" ({} late)", f.missing) } else { String::new() };
            format!("{:.0} / {:.0}{missing}", f.p50_ms, f.p99_ms)
        });
        row("server RSS per stream KiB", &|f| format!("{:.1}", f.kib_per_stream));
        if let Some(bare) = figures_of(bare) {
            println!(
                "  {:<34} {:>22}",
                format!("{} RSS per stream KiB, {streams}", Mode::Bare.label()),
                format!("{:.1}", bare[i].kib_per_stream)
            );
        }
    }
    let last = STEPS.len() - 1;
    let (most, fewest) = (STEPS[last], STEPS[0]);
    let verdict = |ok: bool| if ok { "meets" } else { "MISSES" };
    for (contender, figures) in &streaming {
        let label = contender.label();
        let ratio = figures[last].statements_per_s / figures[0].statements_per_s;
        println!(
            "  ratio {label}: statements {most} / {fewest} streams = {ratio:.2} ({} target <= 1.5)",
            verdict(ratio <= 1.5)
        );
        let p99 = figures[last].p99_ms / POLL_MS as f64;
        println!("  ratio {label}: p99 at {most} / poll_ms = {p99:.2} ({} target <= 3)", verdict(p99 <= 3.0));
        let kib = figures[last].kib_per_stream;
        println!("  {label}: {kib:.1} KiB per stream at {most} ({} target <= 16)", verdict(kib <= 16.0));
    }
    let at_most = |wanted: Contender| figures_of(wanted).map(|f| f[last]);
    let ratio_line = |what: &str, a: Contender, b: Contender, value: &dyn Fn(&Figures) -> f64| {
        if let (Some(a_figures), Some(b_figures)) = (at_most(a), at_most(b)) {
            let ratio = value(&a_figures) / value(&b_figures);
            println!("  ratio {} / {}: {what} at {most} streams = {ratio:.2}", a.label(), b.label());
        }
    };
    let (tail, polling) = (Contender::StandIn(Mode::Tail), Contender::StandIn(Mode::Polling));
    let (serve_tcp, serve_socket) = (Contender::Serve(Transport::Tcp), Contender::Serve(Transport::Socket));
    ratio_line("statements", polling, tail, &|f| f.statements_per_s);
    ratio_line("memory per stream", tail, bare, &|f| f.kib_per_stream);
    ratio_line("memory per stream", serve_tcp, tail, &|f| f.kib_per_stream);
    ratio_line("memory per stream", serve_socket, tail, &|f| f.kib_per_stream);
    ratio_line("p50 latency", serve_tcp, serve_socket, &|f| f.p50_ms);
    ratio_line("p99 latency", serve_tcp, serve_socket, &|f| f.p99_ms);
    ratio_line("statements idle", serve_tcp, serve_socket, &|f| f.statements_per_s);
}
