//! `cargo xtask bench sinks`: events/s through the `nats` and `redis` sinks against bare
//! client loops of the same deliveries, side by side in one run, printed as ratios
//! (targets: both ≥ 0.7), and one sink's throughput beside a sink that is down against beside
//! a healthy one (target ≥ 0.9). For reference, a bare relay (lease, reads, `XADD`s, a cursor
//! save per batch) against the redis sink and against bare `XADD`s, and each contender's CPU
//! time per event: its own, PostgreSQL's and Redis's.
//!
//! The services come up as for the tests (PostgreSQL, NATS with JetStream, Redis); the
//! measurement itself is `crates/outbox-workers/examples/bench_sinks.rs`, run in release
//! mode, so that xtask does not need the broker clients. A local PostgreSQL is reached
//! through its Unix socket, as by `bench publish`: sqlx 0.9.0 leaves Nagle's algorithm on
//! for TCP, which would measure that instead of the sinks.

use std::process::Command;

use anyhow::{Context, bail};

use crate::services::{cargo, nats, postgres, redis};

pub fn run() -> anyhow::Result<()> {
    let postgres = postgres()?;
    let nats = nats()?;
    let redis = redis()?;
    let url = match postgres.socket_url() {
        Some(url) => {
            println!("bench sinks: PostgreSQL through its Unix socket");
            url
        }
        None => postgres.url(),
    };
    let status = Command::new(cargo())
        .args(["run", "--release", "--quiet", "-p", "outbox-workers", "--example", "bench_sinks"])
        .env("DATABASE_URL", url)
        .env("NATS_URL", &nats.url)
        .env("REDIS_URL", &redis.url)
        .status()
        .context("running the sinks benchmark")?;
    drop((postgres, nats, redis));
    if !status.success() {
        bail!("the sinks benchmark failed ({status})");
    }
    Ok(())
}
