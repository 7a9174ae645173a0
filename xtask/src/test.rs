//! `cargo xtask test` and `cargo xtask services`: the services up, then every test.

use std::process::Command;

use anyhow::{Context, bail};
use outbox_services::{Broker, cargo, chromium, kafka, nats, postgres, rabbitmq, redis, target_dir};

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
    // Everything is built once, in one build whose features match the tests': the `outbox`
    // binary the end-to-end tests run (named to them, so that they do not build it again),
    // and the tools' binaries (`outbox-torture`, which `cargo xtask ci` runs next).
    let cargo_args = args.iter().take_while(|arg| *arg != "--");
    let built = Command::new(cargo()).args(["build", "--workspace", "--all-targets"]).args(cargo_args).status();
    if !built.context("running cargo build --all-targets")?.success() {
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
