//! `cargo xtask ci`: the one command whose local success predicts a green CI.

use std::collections::BTreeSet;
use std::process::Command;

use anyhow::{Context, bail};

use crate::services::cargo;

/// Crates a library may never depend on (normal dependencies, transitively): the layering of
/// SPEC §1. Each line is (crate, forbidden dependencies, why).
const LAYERS: &[(&str, &[&str], &str)] = &[
    (
        "outbox-core",
        &["tokio", "sqlx", "hyper", "http", "mio", "outbox-pg"],
        "core is pure: no runtime, database or HTTP",
    ),
    (
        "outbox-pg",
        &["hyper", "http", "axum", "outbox-http", "outbox-workers", "outbox-server"],
        "pg knows nothing of HTTP",
    ),
    ("outbox-http", &["outbox-workers", "outbox-server"], "http and workers know nothing of each other"),
    ("outbox-workers", &["outbox-http", "outbox-server"], "http and workers know nothing of each other"),
    (
        "outbox-client",
        &["outbox-pg", "sqlx", "outbox-server", "outbox-http", "outbox-workers"],
        "the client depends on core only",
    ),
];

pub fn run() -> anyhow::Result<()> {
    step("cargo fmt --check", &["fmt", "--all", "--", "--check"])?;
    step("cargo clippy", &["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"])?;
    check_layers()?;
    eprintln!("xtask: the dependency graph keeps its layers");
    crate::explain::run(1_000_000)?;
    crate::services::run_tests(&[])
}

fn step(what: &str, args: &[&str]) -> anyhow::Result<()> {
    eprintln!("xtask: {what}");
    let status = Command::new(cargo()).args(args).status().with_context(|| format!("running {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

/// Fails when a crate's normal dependency graph contains a crate its layer forbids.
pub fn check_layers() -> anyhow::Result<()> {
    let mut broken = Vec::new();
    for (krate, forbidden, why) in LAYERS {
        let graph = dependencies(krate)?;
        for name in forbidden.iter().filter(|name| graph.contains(**name)) {
            broken.push(format!("{krate} depends on {name}: {why}"));
        }
    }
    if !broken.is_empty() {
        bail!("the dependency graph breaks its layers:\n  {}", broken.join("\n  "));
    }
    Ok(())
}

fn dependencies(krate: &str) -> anyhow::Result<BTreeSet<String>> {
    let output = Command::new(cargo())
        .args(["tree", "--package", krate, "--edges", "normal", "--prefix", "none", "--format", "{p}"])
        .output()
        .context("running cargo tree")?;
    if !output.status.success() {
        bail!("cargo tree -p {krate} failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let text = String::from_utf8(output.stdout)?;
    Ok(text.lines().skip(1).filter_map(|line| line.split_whitespace().next()).map(str::to_owned).collect())
}
