//! Project automation, run as `cargo xtask <command>` (matklad's xtask pattern).
//!
//! - `migrate [--dry-run]`: apply the migrations to `DATABASE_URL`.
//! - `test [-- <cargo test args>]`: bring up the services the tests need, then run every test.
//! - `services [kafka|rabbitmq|nats|redis|postgres…]`: bring up those services and print their addresses.
//! - `ci`: what `.ci/run` runs: format, lints, the tidy and dependency-graph rules, the
//!   generated files, the plan check, the tests, then the torture run's `ci` profile; each
//!   phase's time at the end.
//! - `explain`: the plans of the outbox reads on a large table; fails on a full sort.
//! - `codegen [--check]`: regenerate the protobuf Rust code from `proto/` (with protox, no protoc).
//! - `schema [--check]`: regenerate `migrations/CURRENT.sql`, the schema after every migration.
//! - `bench …` and `torture …`: build and run `outbox-bench` (release) and `outbox-torture`,
//!   the crates of their own that hold the benchmarks and the torture run; the arguments pass
//!   through.
//!
//! **Invariant:** xtask builds no broker client and no HTTP stack: it depends on `outbox-pg`
//! and `outbox-services`, and `cargo xtask ci` fails when its graph holds a broker's client.

mod ci;
mod codegen;
mod explain;
mod migrate;
mod schema;
mod sql_examples;
mod test;

use std::process::Command;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use outbox_services::cargo;

#[derive(Parser)]
#[command(name = "cargo xtask", about = "Outbox project automation")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Apply the migrations to DATABASE_URL.
    Migrate {
        /// List what would run, change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Bring up PostgreSQL and the brokers (reuse, start, or install), then run every test.
    Test {
        /// Extra arguments for `cargo test`, after `--`.
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// Bring up the named services (all when none is named) and print NAME=address lines.
    Services {
        /// Any of postgres, nats, redis, rabbitmq, kafka.
        names: Vec<String>,
    },
    /// Format, clippy, tidy, layers, generated files, plan check, every test, then torture (ci).
    Ci,
    /// Print the plans of the tenant and global reads on a large table; fail on a full sort or scan.
    Explain {
        /// Rows in the table.
        #[arg(long, default_value_t = 1_000_000)]
        rows: u64,
    },
    /// Regenerate the checked-in protobuf code from proto/ (--check: fail if it is stale).
    Codegen {
        /// Compare instead of writing; fail when the checked-in code differs.
        #[arg(long)]
        check: bool,
    },
    /// Regenerate migrations/CURRENT.sql from a migrated database (--check: fail with the diff).
    Schema {
        /// Compare instead of writing; fail when the checked-in file differs.
        #[arg(long)]
        check: bool,
    },
    /// Benchmarks that print ratios measured side by side: `outbox-bench`, built in release
    /// (`cargo xtask bench --help` lists them).
    #[command(disable_help_flag = true)]
    Bench {
        /// Passed to outbox-bench.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Writers, readers and sinks against real servers under seeded faults: `outbox-torture`
    /// (`cargo xtask torture --help` lists its options).
    #[command(disable_help_flag = true)]
    Torture {
        /// Passed to outbox-torture.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Cmd::Migrate { dry_run } => migrate::run(dry_run),
        Cmd::Test { args } => test::run_tests(&args),
        Cmd::Services { names } => test::run_services(&names),
        Cmd::Ci => ci::run(),
        Cmd::Explain { rows } => explain::run(rows),
        Cmd::Codegen { check } => codegen::run(check),
        Cmd::Schema { check } => schema::run(check),
        Cmd::Bench { args } => run_release("outbox-bench", &args),
        Cmd::Torture { args } => torture(&args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("xtask: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// `outbox-torture <args>`, built (debug) in one build with the `outbox` binary and the Kafka
/// mock it runs, given that `outbox` unless the arguments name one.
fn torture(args: &[String]) -> anyhow::Result<()> {
    let built = Command::new(cargo())
        .args(["build", "--quiet", "-p", "outbox-torture", "-p", "outbox-server", "-p", "outbox-kafka-mock"])
        .status()
        .context("running cargo build")?;
    if !built.success() {
        bail!("building outbox-torture failed ({built})");
    }
    let debug = outbox_services::target_dir()?.join("debug");
    let mut command = Command::new(debug.join("outbox-torture"));
    if !args.iter().any(|arg| arg == "--binary" || arg.starts_with("--binary=")) {
        command.arg("--binary").arg(debug.join("outbox"));
    }
    let status = command.args(args).status().context("running outbox-torture")?;
    if !status.success() {
        bail!("outbox-torture failed ({status})");
    }
    Ok(())
}

/// `cargo run --release -p <package> -- <args>`: a tool crate of the workspace, built and run.
fn run_release(package: &str, args: &[String]) -> anyhow::Result<()> {
    let status = Command::new(cargo())
        .args(["run", "--quiet", "--release", "--package", package, "--"])
        .args(args)
        .status()
        .with_context(|| format!("running {package}"))?;
    if !status.success() {
        bail!("{package} failed ({status})");
    }
    Ok(())
}
