//! The brokers of the torture run: a `nats-server` with JetStream and a `redis-server` of its
//! own (free ports, data in the run's directory), which the faults stop and start again, and
//! the read-back of what the servers' `nats` and `redis` sinks stored there.
//!
//! A stop is SIGTERM (each flushes what it acknowledged: JetStream's file store, Redis's
//! append-only file) and a start runs the same command again, on the same port and data.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use outbox_core::Position;
use serde::Deserialize;

use super::checker::Received;

/// The JetStream stream the `nats` sink publishes into.
pub(crate) const NATS_STREAM: &str = "TORTURE";

/// A broker process the run owns.
pub(crate) struct Broker {
    pub(crate) name: &'static str,
    pub(crate) port: u16,
    command: Vec<String>,
    log: PathBuf,
    child: Option<Child>,
}

impl Broker {
    /// `nats-server -js` on a free port, its store under `dir`.
    pub(crate) fn nats(dir: &Path) -> anyhow::Result<Broker> {
        let binary = crate::services::find_binary("nats-server").context("nats-server is not on PATH")?;
        let port = crate::services::free_port()?;
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
        Broker::start("nats", port, command, dir)
    }

    /// `redis-server` on a free port with an append-only file under `dir`.
    pub(crate) fn redis(dir: &Path) -> anyhow::Result<Broker> {
        let binary = crate::services::find_binary("redis-server").context("redis-server is not on PATH")?;
        let port = crate::services::free_port()?;
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
            "yes".into(),
            "--dir".into(),
            data.display().to_string(),
        ];
        Broker::start("redis", port, command, dir)
    }

    fn start(name: &'static str, port: u16, command: Vec<String>, dir: &Path) -> anyhow::Result<Broker> {
        let mut broker = Broker { name, port, command, log: dir.join(format!("{name}.log")), child: None };
        broker.run()?;
        Ok(broker)
    }

    /// Starts the process and waits until its port answers.
    pub(crate) fn run(&mut self) -> anyhow::Result<()> {
        let log = std::fs::File::options().create(true).append(true).open(&self.log)?;
        let child = Command::new(&self.command[0])
            .args(&self.command[1..])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", self.name))?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if Instant::now() > deadline {
                bail!("{} did not listen on {} within 30 s", self.name, self.port);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// SIGTERM, and wait for the exit.
    pub(crate) fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
            let deadline = Instant::now() + Duration::from_secs(20);
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub(crate) fn is_running(&self) -> bool {
        self.child.is_some()
    }

    pub(crate) fn url(&self) -> String {
        format!("{}://127.0.0.1:{}", self.name, self.port)
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[derive(Deserialize)]
struct Stored {
    id: String,
    sequence: Position,
}

/// Every message of the JetStream stream, in its order, as (event id, position), with the
/// number of messages whose `Nats-Msg-Id` is not their event's id.
///
/// Read through an ordered pull consumer, which fetches in batches: one `get_raw_message` per
/// sequence costs a round trip each, minutes for a long run's million messages.
pub(crate) async fn nats_read_back(url: &str) -> anyhow::Result<(Vec<Received>, usize)> {
    use async_nats::jetstream::consumer::{DeliverPolicy, pull};
    use futures_util::StreamExt;

    let client = async_nats::connect(url).await?;
    let context = async_nats::jetstream::new(client);
    let Ok(mut stream) = context.get_stream(NATS_STREAM).await else { return Ok((Vec::new(), 0)) };
    let state = stream.info().await?.state.clone();
    let mut received = Vec::with_capacity(usize::try_from(state.messages).unwrap_or(0));
    let mut wrong_ids = 0;
    if state.messages == 0 {
        return Ok((received, wrong_ids));
    }
    let consumer = stream
        .create_consumer(pull::OrderedConfig { deliver_policy: DeliverPolicy::All, ..Default::default() })
        .await
        .map_err(|error| anyhow::anyhow!("creating an ordered consumer: {error}"))?;
    let mut messages = consumer.messages().await.map_err(|error| anyhow::anyhow!("reading the stream: {error}"))?;
    while let Some(message) = tokio::time::timeout(Duration::from_secs(30), messages.next())
        .await
        .context("the JetStream read-back stalled for 30 s")?
    {
        let message = message.map_err(|error| anyhow::anyhow!("reading the stream: {error}"))?;
        let sequence =
            message.info().map_err(|error| anyhow::anyhow!("a message's metadata: {error}"))?.stream_sequence;
        let stored: Stored = serde_json::from_slice(&message.payload)?;
        let header = message.headers.as_ref().and_then(|headers| headers.get("Nats-Msg-Id"));
        if header.map(|id| id.as_str()) != Some(stored.id.as_str()) {
            wrong_ids += 1;
        }
        received.push(Received { id: stored.id, position: stored.sequence });
        if sequence >= state.last_sequence {
            break;
        }
    }
    Ok((received, wrong_ids))
}

/// How many entries one XRANGE of [`redis_read_back`] asks for.
const REDIS_PAGE: usize = 10_000;

/// Every entry of the Redis streams `torture:<tenant>`, merged in id order, as (event id,
/// the entry's id read as a position), with the number whose id is not their event's position.
pub(crate) async fn redis_read_back(url: &str, tenants: &[&str]) -> anyhow::Result<(Vec<Received>, usize)> {
    use redis::AsyncCommands;
    let client = redis::Client::open(url)?;
    let mut connection = client.get_multiplexed_async_connection().await?;
    let mut received = Vec::new();
    let mut wrong_ids = 0;
    for tenant in tenants {
        let key = format!("torture:{tenant}");
        // Page by page: one XRANGE of a long run's million entries outlasts the client's
        // response timeout.
        let mut start = "-".to_owned();
        let mut entries = Vec::new();
        loop {
            let reply: redis::streams::StreamRangeReply =
                connection.xrange_count(&key, &start, "+", REDIS_PAGE).await?;
            let Some(last) = reply.ids.last() else { break };
            start = format!("({}", last.id);
            let full = reply.ids.len() == REDIS_PAGE;
            entries.extend(reply.ids);
            if !full {
                break;
            }
        }
        for entry in entries {
            let event: String = entry.get("event").context("an entry without its event")?;
            let stored: Stored = serde_json::from_str(&event)?;
            let position = Position::parse(&entry.id.replace('-', ".")).context("an entry id")?;
            if position != stored.sequence || entry.get::<String>("id").as_deref() != Some(stored.id.as_str()) {
                wrong_ids += 1;
            }
            received.push(Received { id: stored.id, position });
        }
    }
    received.sort_by_key(|received| received.position);
    Ok((received, wrong_ids))
}
