//! `cargo xtask test` and `cargo xtask services`: the services up, then every test.

use std::process::Command;

use anyhow::{Context, bail};
use outbox_services::{Broker, cargo, chromium, kafka, nats, postgres, rabbitmq, redis, target_dir};

/// `cargo xtask test`: the services up ([`Services::bring_up`]), everything built
/// ([`build_all`]), then every test ([`Services::run_tests`]).
pub(crate) fn run_tests(args: &[String]) -> anyhow::Result<()> {
    let services = Services::bring_up()?;
    build_all(args.iter().take_while(|arg| *arg != "--"))?;
    services.run_tests(args)
}

/// Everything in one build whose features are the tests' (`cargo build --workspace
/// --all-targets`): every test, the `outbox` binary the end-to-end tests run, and the tools'
/// binaries (`outbox-torture`, which `cargo xtask ci` runs). `cargo test` then builds nothing.
pub(crate) fn build_all<'a>(cargo_args: impl IntoIterator<Item = &'a String>) -> anyhow::Result<()> {
    eprintln!("xtask: cargo build --workspace --all-targets");
    let built = Command::new(cargo()).args(["build", "--workspace", "--all-targets"]).args(cargo_args).status();
    if !built.context("running cargo build --all-targets")?.success() {
        bail!("building the workspace failed");
    }
    Ok(())
}

/// What the tests need, up while this lives: PostgreSQL, NATS (JetStream), Redis, RabbitMQ
/// streams, Kafka, Chromium and the SQL examples' packages.
pub(crate) struct Services {
    postgres: outbox_services::Postgres,
    nats: Broker,
    redis: Broker,
    rabbitmq: String,
    kafka: String,
}

impl Services {
    pub(crate) fn bring_up() -> anyhow::Result<Services> {
        chromium()?;
        let services =
            Services { postgres: postgres()?, nats: nats()?, redis: redis()?, rabbitmq: rabbitmq()?, kafka: kafka()? };
        crate::sql_examples::prepare()?;
        Ok(services)
    }

    /// `cargo test --workspace --no-fail-fast <args>` with `DATABASE_URL`, `NATS_URL`,
    /// `REDIS_URL`, `RABBITMQ_STREAM_URL`, `KAFKA_BOOTSTRAP` and `OUTBOX_BIN` (the binary
    /// [`build_all`] made) set.
    pub(crate) fn run_tests(&self, args: &[String]) -> anyhow::Result<()> {
        let binary = target_dir()?.join("debug").join("outbox");
        let status = Command::new(cargo())
            .args(["test", "--workspace", "--no-fail-fast"])
            .args(args)
            .env("OUTBOX_BIN", &binary)
            .env("DATABASE_URL", self.postgres.url())
            .env("NATS_URL", &self.nats.url)
            .env("REDIS_URL", &self.redis.url)
            .env("RABBITMQ_STREAM_URL", &self.rabbitmq)
            .env("KAFKA_BOOTSTRAP", &self.kafka)
            .status()
            .context("running cargo test")?;
        if !status.success() {
            bail!("cargo test failed ({status})");
        }
        Ok(())
    }
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
    if keep.iter().any(Broker::is_ours) {
        eprintln!("xtask: the throwaway NATS and Redis servers stop with this process; press Ctrl-C to stop them");
        loop {
            std::thread::park();
        }
    }
    Ok(())
}
