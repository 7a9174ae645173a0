//! `cargo xtask bench sinks`: events/s through the `nats`, `redis`, `kafka` and `rabbitmq`
//! sinks against bare client loops and a bare relay, side by side in one run, printed as
//! ratios. Targets: the nats sink ≥ 0.7 of a bare JetStream publish loop; the kafka sink ≥ 0.7
//! of a bare idempotent producer loop to the same broker; the rabbitmq sink ≥ 0.7 of a bare
//! named stream producer loop; the redis sink ≥ 0.9 of a bare relay
//! (lease, reads, pipelined `XADD`s, a cursor save per batch: the least any relay to Redis
//! does); one sink's throughput beside a sink that is down ≥ 0.9 of beside a healthy one.
//! For reference, the redis sink and the bare relay against bare `XADD`s (what reading the
//! outbox costs), and each contender's CPU time per event: its own, PostgreSQL's and Redis's.
//!
//! PostgreSQL is reached over TCP to its address (127.0.0.1 for a local one), as users reach
//! it, and the targets apply there; every contender that reads the outbox also runs through
//! the server's Unix socket in the same run, interleaved with the TCP runs, and its figures
//! are printed beside. `--socket` measures through the socket alone. The bare client loops
//! touch no database and run once a round.
//!
//! The services come up as for the tests (PostgreSQL, NATS with JetStream, Redis, RabbitMQ
//! streams, a Kafka-protocol broker); the measurement itself (`sinks_measure`) runs in a
//! process of its own, `outbox-bench measure-sinks`, so that its CPU time is the sinks' alone.
//! It gets the primary transport's
//! server URL as `DATABASE_URL` and the one beside, when there is one, as
//! `DATABASE_URL_BESIDE`.

use std::process::Command;

use anyhow::{Context, bail};

use outbox_services::{Transports, kafka, nats, postgres, rabbitmq, redis};

pub(crate) fn run(transports: Transports) -> anyhow::Result<()> {
    let postgres = postgres()?;
    let nats = nats()?;
    let redis = redis()?;
    let rabbitmq = rabbitmq()?;
    let kafka = kafka()?;
    let over = transports.available(&postgres)?;
    let mut command = Command::new(std::env::current_exe()?);
    command
        .arg("measure-sinks")
        .env("DATABASE_URL", postgres.url_over(over[0])?)
        .env("NATS_URL", &nats.url)
        .env("REDIS_URL", &redis.url)
        .env("RABBITMQ_STREAM_URL", &rabbitmq)
        .env("KAFKA_BOOTSTRAP", &kafka);
    match over.get(1) {
        Some(&beside) => command.env("DATABASE_URL_BESIDE", postgres.url_over(beside)?),
        None => command.env_remove("DATABASE_URL_BESIDE"),
    };
    let status = command.status().context("running the sinks benchmark")?;
    drop((postgres, nats, redis));
    if !status.success() {
        bail!("the sinks benchmark failed ({status})");
    }
    Ok(())
}
