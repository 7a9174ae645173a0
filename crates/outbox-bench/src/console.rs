//! `cargo xtask bench console`: the console stays responsive under a busy stream. The real
//! `outbox serve` (release, role `http`) on a scratch database, the console open in a real
//! headless Chromium, 1,000 events a second published for 10 s; the page's long tasks (the
//! performance timeline's `longtask` entries) are read during 10 idle seconds and during the
//! load, side by side, and the longest is printed against the target (none over 200 ms).
//! It prints; it never fails on a figure.
//!
//! The browser side is `tests/examples/bench_console.rs` (package `outbox-e2e`, which holds
//! the WebDriver client), run in release with the server's address, its API key and the
//! database; xtask brings up PostgreSQL and Chromium as for the tests.

use std::process::Command;

use anyhow::{Context, bail};

use crate::outbox_process::{OutboxProcess, ServeOptions, TOKEN, build, database_name, database_url};
use crate::services::{ScratchDatabase, Transport, cargo, chromium, postgres};

pub(crate) fn run() -> anyhow::Result<()> {
    chromium()?;
    let server = postgres()?;
    let binary = build()?;
    let runtime = crate::runtime()?;
    let url = server.url_over(Transport::Tcp)?;
    let db = runtime.block_on(ScratchDatabase::create(&url, "outbox_bench_console"))?;
    let database = database_url(&url, &runtime.block_on(database_name(&db.pool))?);
    let result = measure(&binary, &database);
    runtime.block_on(db.drop_now())?;
    drop(server);
    result
}

fn measure(binary: &std::path::Path, database: &str) -> anyhow::Result<()> {
    let options = ServeOptions { database_url: database, roles: &["http"], poll_ms: 100 };
    let process = OutboxProcess::start(binary, &options)?;
    let status = Command::new(cargo())
        .args(["run", "--release", "--quiet", "-p", "outbox-e2e", "--example", "bench_console"])
        .env("OUTBOX_URL", format!("http://127.0.0.1:{}", process.port()))
        .env("OUTBOX_TOKEN", TOKEN)
        .status()
        .context("running the console benchmark")?;
    drop(process);
    if !status.success() {
        bail!("the console benchmark failed ({status})");
    }
    Ok(())
}
