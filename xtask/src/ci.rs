//! `cargo xtask ci`: the one command whose local success predicts a green CI.

mod node;
mod statements;
mod tidy;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use self::statements::Package;
use outbox_services::cargo;

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
    (
        "outbox-proto",
        &["tokio", "sqlx", "hyper", "http", "mio", "outbox-pg", "outbox-http", "outbox-workers", "outbox-server"],
        "proto is data that http and workers share: no runtime, database or HTTP",
    ),
    ("outbox-http", &["outbox-workers", "outbox-server"], "http and workers know nothing of each other"),
    (
        "xtask",
        &["rdkafka", "rdkafka-sys", "async-nats", "redis", "rabbitmq-stream-client", "reqwest", "hyper"],
        "xtask builds no broker client and no HTTP stack: the benchmarks and the torture run are crates of their own",
    ),
    (
        "outbox-services",
        &["rdkafka", "rdkafka-sys", "async-nats", "redis", "rabbitmq-stream-client", "reqwest"],
        "the launcher of the services starts processes and knows no broker's client",
    ),
    ("outbox-workers", &["outbox-http", "outbox-server"], "http and workers know nothing of each other"),
    (
        "outbox-client",
        &["outbox-pg", "sqlx", "outbox-server", "outbox-http", "outbox-workers"],
        "the client depends on core only",
    ),
];

/// What a library sheds without its default features, so that a crate taking part of it
/// compiles only that part. Each line is (crate, what its graph may then not hold, why).
const WITHOUT_DEFAULT_FEATURES: &[(&str, &[&str], &str)] = &[(
    "outbox-workers",
    &["async-nats", "redis", "reqwest", "rdkafka", "rabbitmq-stream-client"],
    "without its sink features, outbox-workers (subscribers, jsonl, retention) compiles no sink's client",
)];

/// The library crates, whose documentation builds without a warning (broken or private
/// intra-doc links, bad code blocks).
const LIBRARIES: &[&str] =
    &["outbox-core", "outbox-proto", "outbox-pg", "outbox-http", "outbox-workers", "outbox-client"];

pub(crate) fn run() -> anyhow::Result<()> {
    let mut phases = Phases::default();
    let result = run_phases(&mut phases);
    phases.print();
    result
}

fn run_phases(phases: &mut Phases) -> anyhow::Result<()> {
    phases.time("format", || step("cargo fmt --check", &["fmt", "--all", "--", "--check"]))?;
    phases.time("tidy", tidy::run)?;
    phases.time("the console's JavaScript (node --test)", || node::run(&Workspace::load()?.root))?;
    phases.time("build", || crate::test::build_all(&[]))?;
    let debug = outbox_services::target_dir()?.join("debug");
    // The torture run waits on its faults more than it computes: it runs beside the checks
    // that compile (never beside the tests, whose deadlines it would crowd), from the
    // binaries the build just made.
    let torture = Torture::start(&debug)?;
    if let Err(error) = phases.time("clippy, docs, layers, generated files, plans (torture beside)", checks) {
        torture.stop();
        return Err(error);
    }
    phases.time("torture, the rest of it", || torture.finish())?;
    phases.time("tests", || crate::test::Services::bring_up()?.run_tests(&[]))?;
    phases.time("tidy of the binaries", || tidy::undocumented_subcommands(&debug))
}

/// What checks the code without running it: clippy (the workspace, and outbox-workers
/// without its default features, whose unit tests run too), the docs, the layers, the
/// generated files and the read plans.
fn checks() -> anyhow::Result<()> {
    step("cargo clippy", &["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"])?;
    // Inside the workspace every crate gets outbox-workers' default features; its build
    // without them (subscribers, jsonl) is linted and unit-tested on its own.
    let lean = ["-p", "outbox-workers", "--no-default-features", "--lib"];
    step(
        "cargo clippy of outbox-workers without its default features",
        &[&["clippy"], &lean[..], &["--", "-D", "warnings"]].concat(),
    )?;
    step("cargo test of outbox-workers without its default features", &[&["test"], &lean[..]].concat())?;
    docs()?;
    check_layers()?;
    eprintln!("xtask: the dependency graph keeps its layers, and SQL runs only in outbox-pg and the tools");
    deny()?;
    crate::codegen::run(true)?;
    crate::schema::run(true)?;
    crate::explain::run(1_000_000)
}

/// The torture run's `ci` profile in a process of its own, its output kept in a file and
/// printed when it ends.
struct Torture {
    child: std::process::Child,
    log: PathBuf,
}

impl Torture {
    fn start(debug: &std::path::Path) -> anyhow::Result<Torture> {
        let log = debug.join("torture-ci.log");
        let file = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        eprintln!("xtask: outbox-torture --profile ci, beside the checks (its output: {})", log.display());
        let child = Command::new(debug.join("outbox-torture"))
            .args(["--profile", "ci", "--binary"])
            .arg(debug.join("outbox"))
            .stdin(std::process::Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()
            .context("starting outbox-torture")?;
        Ok(Torture { child, log })
    }

    /// Ends the run early (a check failed).
    fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits for the run and prints what it printed.
    fn finish(mut self) -> anyhow::Result<()> {
        let status = self.child.wait().context("waiting for outbox-torture")?;
        eprint!("{}", std::fs::read_to_string(&self.log).unwrap_or_default());
        if !status.success() {
            bail!("the torture run failed ({status})");
        }
        Ok(())
    }
}

/// How long each phase of the run took, printed at its end (also when one fails).
#[derive(Default)]
struct Phases {
    took: Vec<(&'static str, Duration, bool)>,
}

impl Phases {
    fn time(&mut self, name: &'static str, phase: impl FnOnce() -> anyhow::Result<()>) -> anyhow::Result<()> {
        let started = Instant::now();
        let result = phase();
        self.took.push((name, started.elapsed(), result.is_ok()));
        result
    }

    fn print(&self) {
        let total: Duration = self.took.iter().map(|(_, took, _)| *took).sum();
        eprintln!("xtask: ci phases");
        for (name, took, ok) in &self.took {
            let failed = if *ok { "" } else { "  (failed)" };
            eprintln!("xtask:   {name:<46} {:>7.1} s{failed}", took.as_secs_f64());
        }
        eprintln!("xtask:   {:<46} {:>7.1} s", "total", total.as_secs_f64());
    }
}

/// `cargo doc --no-deps` of the library crates, every rustdoc warning an error.
fn docs() -> anyhow::Result<()> {
    eprintln!("xtask: cargo doc of the library crates, warnings denied");
    let mut args = vec!["doc", "--no-deps"];
    for library in LIBRARIES {
        args.extend(["--package", library]);
    }
    let status =
        Command::new(cargo()).args(&args).env("RUSTDOCFLAGS", "-D warnings").status().context("running cargo doc")?;
    if !status.success() {
        bail!("cargo doc of the library crates failed ({status})");
    }
    Ok(())
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
const SQLX_WRAPPERS: &[&str] =
    &["outbox-pg", "xtask", "outbox-e2e", "outbox-services", "outbox-bench", "outbox-torture"];

/// Fails when a crate's normal dependency graph contains a crate its layer forbids, when a
/// crate other than the wrappers depends on `sqlx` directly, or when code outside `outbox-pg`
/// and the tools runs a statement ([`statements`]). The crates checked are the workspace's
/// members as `cargo metadata` lists them.
pub(crate) fn check_layers() -> anyhow::Result<()> {
    let workspace = Workspace::load()?;
    let mut broken = Vec::new();
    for member in workspace.members.iter().filter(|m| !SQLX_WRAPPERS.contains(&m.package.name.as_str())) {
        if member.dependencies.contains("sqlx") {
            broken.push(format!("{} depends on sqlx directly: use outbox_pg::sqlx", member.package.name));
        }
    }
    for (krate, forbidden, why) in LAYERS {
        if !workspace.members.iter().any(|m| m.package.name == *krate) {
            broken.push(format!("{krate} has a layer but is not a workspace member"));
            continue;
        }
        broken.extend(forbidden_in(krate, &dependencies(krate, &[])?, forbidden, why));
    }
    for (krate, forbidden, why) in WITHOUT_DEFAULT_FEATURES {
        let graph = dependencies(krate, &["--no-default-features"])?;
        for name in forbidden.iter().filter(|name| graph.contains(**name)) {
            broken.push(format!("{krate} --no-default-features depends on {name}: {why}"));
        }
    }
    let packages: Vec<_> = workspace.members.into_iter().map(|member| member.package).collect();
    broken.extend(statements::outside_pg(&workspace.root, &packages)?);
    if !broken.is_empty() {
        bail!("the workspace breaks its layers:\n  {}", broken.join("\n  "));
    }
    Ok(())
}

/// One line per crate of `forbidden` that `krate`'s `graph` holds.
fn forbidden_in(krate: &str, graph: &BTreeSet<String>, forbidden: &[&str], why: &str) -> Vec<String> {
    forbidden
        .iter()
        .filter(|name| graph.contains(**name))
        .map(|name| format!("{krate} depends on {name}: {why}"))
        .collect()
}

/// The workspace as `cargo metadata --no-deps` describes it.
struct Workspace {
    root: PathBuf,
    members: Vec<Member>,
}

/// A workspace member and the packages it names in `Cargo.toml` (every kind of dependency).
struct Member {
    package: Package,
    dependencies: BTreeSet<String>,
    /// Whether it has a library target.
    is_library: bool,
    /// Its binary targets' names.
    binaries: Vec<String>,
}

impl Workspace {
    fn load() -> anyhow::Result<Workspace> {
        let output = Command::new(cargo())
            .args(["metadata", "--no-deps", "--format-version", "1"])
            .output()
            .context("running cargo metadata")?;
        if !output.status.success() {
            bail!("cargo metadata failed: {}", String::from_utf8_lossy(&output.stderr));
        }
        Workspace::parse(&serde_json::from_slice(&output.stdout).context("reading cargo metadata")?)
    }

    fn parse(metadata: &serde_json::Value) -> anyhow::Result<Workspace> {
        let text = |value: &serde_json::Value, key: &str| {
            value[key].as_str().map(str::to_owned).with_context(|| format!("cargo metadata without {key}"))
        };
        let root = PathBuf::from(text(metadata, "workspace_root")?);
        let mut members = Vec::new();
        for package in metadata["packages"].as_array().context("cargo metadata without packages")? {
            let manifest = PathBuf::from(text(package, "manifest_path")?);
            let dir = manifest.parent().context("a manifest without a directory")?.to_path_buf();
            let dependencies = package["dependencies"].as_array().map_or(&[][..], Vec::as_slice);
            let targets = package["targets"].as_array().map_or(&[][..], Vec::as_slice);
            let of_kind = |kind: &'static str| {
                targets
                    .iter()
                    .filter(move |t| t["kind"].as_array().is_some_and(|kinds| kinds.iter().any(|k| k == kind)))
                    .filter_map(|t| t["name"].as_str().map(str::to_owned))
            };
            members.push(Member {
                package: Package { name: text(package, "name")?, dir },
                dependencies: dependencies.iter().filter_map(|d| d["name"].as_str().map(str::to_owned)).collect(),
                is_library: of_kind("lib").next().is_some(),
                binaries: of_kind("bin").collect(),
            });
        }
        Ok(Workspace { root, members })
    }
}

/// `krate`'s normal dependencies, transitively (`cargo tree -e normal`, with `extra` flags).
fn dependencies(krate: &str, extra: &[&str]) -> anyhow::Result<BTreeSet<String>> {
    let output = Command::new(cargo())
        .args(["tree", "--package", krate, "--prefix", "none", "--format", "{p}", "--edges", "normal"])
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_members_and_their_dependencies_come_from_cargo_metadata() {
        let metadata = json!({
            "workspace_root": "/w",
            "packages": [
                {"name": "outbox-lower", "manifest_path": "/w/crates/outbox-lower/Cargo.toml",
                 "dependencies": [{"name": "outbox-core", "kind": null}, {"name": "sqlx", "kind": "dev"}],
                 "targets": [{"name": "outbox_lower", "kind": ["lib"]}, {"name": "it", "kind": ["test"]}]},
                {"name": "xtask", "manifest_path": "/w/xtask/Cargo.toml", "dependencies": [],
                 "targets": [{"name": "xtask", "kind": ["bin"]}]},
            ],
        });
        let workspace = Workspace::parse(&metadata).unwrap();
        assert_eq!(workspace.root, PathBuf::from("/w"));
        let members: Vec<_> = workspace
            .members
            .iter()
            .map(|m| (m.package.name.as_str(), m.package.dir.clone(), m.dependencies.iter().cloned().collect()))
            .collect();
        assert_eq!(
            members,
            [
                (
                    "outbox-lower",
                    PathBuf::from("/w/crates/outbox-lower"),
                    vec!["outbox-core".to_owned(), "sqlx".into()]
                ),
                ("xtask", PathBuf::from("/w/xtask"), vec![]),
            ]
        );
        let kinds: Vec<_> = workspace.members.iter().map(|m| (m.is_library, m.binaries.clone())).collect();
        assert_eq!(kinds, [(true, vec![]), (false, vec!["xtask".to_owned()])]);
    }

    #[test]
    fn a_broker_client_in_the_graph_of_xtask_breaks_its_layer() {
        let (krate, forbidden, why) = LAYERS.iter().find(|(krate, ..)| *krate == "xtask").unwrap();
        let graph: BTreeSet<String> = ["outbox-pg", "sqlx", "rdkafka", "rdkafka-sys"].map(String::from).into();
        assert_eq!(
            forbidden_in(krate, &graph, forbidden, why),
            [format!("xtask depends on rdkafka: {why}"), format!("xtask depends on rdkafka-sys: {why}")]
        );
        let clean: BTreeSet<String> = ["outbox-pg", "sqlx", "clap"].map(String::from).into();
        assert!(forbidden_in(krate, &clean, forbidden, why).is_empty());
    }

    /// The layer check's source scan over this workspace, as `cargo xtask ci` runs it.
    #[test]
    fn this_workspace_runs_sql_only_in_outbox_pg_and_the_tools() {
        let workspace = Workspace::load().unwrap();
        assert!(workspace.members.iter().any(|m| m.package.name == "outbox-workers"), "the members are listed");
        let packages: Vec<_> = workspace.members.into_iter().map(|member| member.package).collect();
        let broken = statements::outside_pg(&workspace.root, &packages).unwrap();
        assert!(broken.is_empty(), "SQL outside outbox-pg:\n  {}", broken.join("\n  "));
    }
}
