//! `cargo xtask bench retention`: publishers' and readers' latency without and during a
//! retention pass on a 1,000,000-row outbox with two sink cursors, side by side in one run.
//!
//! PostgreSQL comes up as for the tests; the measurement itself (`retention_measure`) runs in
//! a process of its own, `outbox-bench measure-retention`. PostgreSQL is reached over TCP
//! (`--socket`: through its Unix socket); latency under a pass is measured on one transport.

use std::process::Command;

use anyhow::{Context, bail};

use outbox_services::postgres;

pub(crate) fn run(rows: u64, transports: outbox_services::Transports) -> anyhow::Result<()> {
    let postgres = postgres()?;
    let url = postgres.url_over(transports.primary)?;
    println!("bench retention: PostgreSQL over {}", transports.primary.label());
    let status = Command::new(std::env::current_exe()?)
        .args(["measure-retention", &rows.to_string()])
        .env("DATABASE_URL", url)
        .status()
        .context("running the retention benchmark")?;
    drop(postgres);
    if !status.success() {
        bail!("the retention benchmark failed ({status})");
    }
    Ok(())
}
