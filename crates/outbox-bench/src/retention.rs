//! `cargo xtask bench retention`: publishers' and readers' latency without and during a
//! retention pass on a 1,000,000-row outbox with two sink cursors, side by side in one run.
//!
//! PostgreSQL comes up as for the tests; the measurement itself is
//! `crates/outbox-workers/examples/bench_retention.rs`, run in release mode, so that xtask
//! does not need the workers crate (and its broker clients). PostgreSQL is reached over TCP
//! (`--socket`: through its Unix socket); latency under a pass is measured on one transport.

use std::process::Command;

use anyhow::{Context, bail};

use crate::services::{cargo, postgres};

pub(crate) fn run(rows: u64, transports: crate::services::Transports) -> anyhow::Result<()> {
    let postgres = postgres()?;
    let url = postgres.url_over(transports.primary)?;
    println!("bench retention: PostgreSQL over {}", transports.primary.label());
    let status = Command::new(cargo())
        .args(["run", "--release", "--quiet", "-p", "outbox-workers", "--example", "bench_retention", "--"])
        .arg(rows.to_string())
        .env("DATABASE_URL", url)
        .status()
        .context("running the retention benchmark")?;
    drop(postgres);
    if !status.success() {
        bail!("the retention benchmark failed ({status})");
    }
    Ok(())
}
