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
    deny()?;
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

/// The only workspace crates that may name `sqlx` directly; everything else goes through
/// `outbox-pg` (`outbox_pg::sqlx`). The same rule as `deny.toml`'s wrappers, checked without cargo-deny.
const SQLX_WRAPPERS: &[&str] = &["outbox-pg", "xtask", "outbox-e2e"];
const WORKSPACE: &[&str] = &[
    "outbox-core",
    "outbox-pg",
    "outbox-http",
    "outbox-workers",
    "outbox-client",
    "outbox-server",
    "xtask",
    "outbox-e2e",
];

/// Fails when a crate's normal dependency graph contains a crate its layer forbids, or a crate
/// other than the wrappers depends on `sqlx` directly.
pub fn check_layers() -> anyhow::Result<()> {
    let mut broken = Vec::new();
    for krate in WORKSPACE.iter().filter(|k| !SQLX_WRAPPERS.contains(k)) {
        if direct_dependencies(krate)?.contains("sqlx") {
            broken.push(format!("{krate} depends on sqlx directly: use outbox_pg::sqlx"));
        }
    }
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
    tree(krate, &[])
}

fn direct_dependencies(krate: &str) -> anyhow::Result<BTreeSet<String>> {
    tree(krate, &["--depth", "1", "--edges", "all"])
}

fn tree(krate: &str, extra: &[&str]) -> anyhow::Result<BTreeSet<String>> {
    let edges = if extra.is_empty() { &["--edges", "normal"][..] } else { &[][..] };
    let output = Command::new(cargo())
        .args(["tree", "--package", krate, "--prefix", "none", "--format", "{p}"])
        .args(edges)
        .args(extra)
        .output()
        .context("running cargo tree")?;
    if !output.status.success() {
        bail!("cargo tree -p {krate} failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let text = String::from_utf8(output.stdout)?;
    Ok(text.lines().skip(1).filter_map(|line| line.split_whitespace().next()).map(str::to_owned).collect())
}

/// `cargo deny --offline check bans licenses sources` when cargo-deny is installed; says so when not.
fn deny() -> anyhow::Result<()> {
    let installed = Command::new(cargo()).args(["deny", "--version"]).output().is_ok_and(|o| o.status.success());
    if !installed {
        eprintln!(
            "xtask: cargo-deny is not installed; skipping deny.toml (the layer check above covers its sqlx rule)"
        );
        return Ok(());
    }
    step("cargo deny", &["deny", "--offline", "check", "bans", "licenses", "sources"])
}
