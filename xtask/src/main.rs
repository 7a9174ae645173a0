//! Project automation, run as `cargo xtask <command>`.
//!
//! - `migrate [--dry-run]`: apply the migrations to `DATABASE_URL`.
//! - `test [-- <cargo test args>]`: bring up the services the tests need, then run every test.
//! - `services [kafka|rabbitmq|nats|redis|postgres…]`: bring up those services and print their addresses.
//! - `ci`: what `.ci/run` runs: format, lints, the dependency-graph rules, the plan check, the
//!   tests, then the torture run's `ci` profile.
//! - `bench publish | http | sinks | fanout`: measurements side by side, as ratios (`fanout`:
//!   live streams on the shared tail against per-stream polling).
//! - `bench console`: the console in headless Chromium at 1,000 events/s, its longest long task.
//! - `bench retention`: publish and read latency without and during a retention pass.
//! - `explain`: the plans of the outbox reads on a large table; fails on a full sort.
//! - `codegen [--check]`: regenerate the protobuf Rust code from `proto/` (with protox, no protoc).
//! - `torture [--profile ci|long] [--seed N] [--minutes M]`: writers, readers and sinks against
//!   two real servers under faults, the recorded history checked against the table.

mod bench;
mod bench_console;
mod bench_fanout;
mod bench_http;
mod bench_ingest;
mod bench_publish;
mod bench_retention;
mod bench_sinks;
mod bench_webhooks;
mod ci;
mod codegen;
mod explain;
mod migrate;
mod outbox_process;
mod services;
mod sql_examples;
mod torture;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "Outbox project automation")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Apply the migrations to DATABASE_URL.
    Migrate {
        /// List what would run, change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Bring up PostgreSQL (reuse, start, or install), then run every test.
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
    /// Format check, clippy, dependency-graph rules, plan check, every test, then torture (ci).
    Ci,
    /// Benchmarks that print ratios measured side by side.
    Bench {
        /// Reach PostgreSQL through its Unix socket only; by default benchmarks connect over
        /// TCP to 127.0.0.1, as users do, and print the socket's figures beside.
        #[arg(long, global = true)]
        socket: bool,
        #[command(subcommand)]
        which: bench::Which,
    },
    /// Regenerate the checked-in protobuf code from proto/ (--check: fail if it is stale).
    Codegen {
        /// Compare instead of writing; fail when the checked-in code differs.
        #[arg(long)]
        check: bool,
    },
    /// Writers, readers and sinks against two real servers under seeded faults; the history checked.
    Torture {
        /// `ci` (a few minutes) or `long` (half an hour).
        #[arg(long, value_enum, default_value = "ci")]
        profile: torture::Profile,
        /// The seed of the faults and the writers (random when absent; printed).
        #[arg(long)]
        seed: Option<u64>,
        /// How long faults are injected, in minutes (default: the profile's).
        #[arg(long)]
        minutes: Option<f64>,
    },
    /// Print the plans of the tenant and global reads on a large table; fail on a full sort or scan.
    Explain {
        /// Rows in the table.
        #[arg(long, default_value_t = 1_000_000)]
        rows: u64,
    },
}

/// The `outbox` binary's allocator, so that `bench fanout`'s server process measures what the
/// server's would.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Migrate { dry_run } => migrate::run(dry_run),
        Command::Test { args } => services::run_tests(&args),
        Command::Services { names } => services::run_services(&names),
        Command::Ci => ci::run(),
        Command::Bench { socket, which } => bench::run(which, services::Transports::new(socket)),
        Command::Explain { rows } => explain::run(rows),
        Command::Codegen { check } => codegen::run(check),
        Command::Torture { profile, seed, minutes } => {
            torture::run(torture::Options { profile, seed, minutes, binary: None })
        }
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("xtask: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// A multi-threaded runtime for the async parts.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?)
}
