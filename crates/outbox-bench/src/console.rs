//! `cargo xtask bench console`: the console stays responsive under a busy stream. The real
//! `outbox serve` (release, role `http`) on a scratch database, the console open in a real
//! headless Chromium, 1,000 events a second published for 10 s; the page's long tasks (the
//! performance timeline's `longtask` entries) are read during 10 idle seconds and during the
//! load, side by side, and the longest is printed against the target (none over 200 ms).
//! It prints; it never fails on a figure.
//!
//! The browser side (`console_measure`, over `outbox_e2e::browser`'s WebDriver client) runs in
//! a process of its own, `outbox-bench measure-console`, with the server's address and its API
//! key; PostgreSQL and Chromium come up as for the tests.

use std::process::Command;

use anyhow::{Context, bail};

use outbox_services::serve::{OutboxProcess, ServeOptions, TOKEN, build, database_name, database_url};
use outbox_services::{ScratchDatabase, Transport, chromium, postgres};

pub(crate) fn run() -> anyhow::Result<()> {
    chromium()?;
    let server = postgres()?;
    let binary = build()?;
    let runtime = outbox_services::runtime()?;
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
    let status = Command::new(std::env::current_exe()?)
        .arg("measure-console")
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
