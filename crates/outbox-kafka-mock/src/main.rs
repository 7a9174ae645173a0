//! `outbox-kafka-mock`: librdkafka's mock cluster, a Kafka-protocol broker that keeps its
//! topics in memory, listening on loopback, for the tests and benchmarks of the `kafka` sink
//! where no real broker can be installed.
//!
//! It prints `KAFKA_BOOTSTRAP=host:port[,…]` on its standard output once the brokers listen,
//! writes the same address to the file given by `--state-file` (if any), and then runs until it
//! is killed. It is meant to run in a process of its own (`cargo xtask services kafka` starts
//! it detached), so that a relay the tests kill does not take the broker's data with it.
//!
//! Usage: `outbox-kafka-mock [--brokers N] [--state-file PATH]`.
//!
//! Topics are created on first use with librdkafka's mock default of 4 partitions, replicated
//! on up to 3 of the `--brokers` (default 1). The mock keeps what it is sent in memory; it has
//! no retention.
//!
//! **Invariant:** a test tool: no library of the workspace depends on it.

use std::io::Write;
use std::path::PathBuf;

use rdkafka::mocking::MockCluster;

struct Options {
    brokers: i32,
    state_file: Option<PathBuf>,
}

fn options() -> Result<Options, String> {
    let mut options = Options { brokers: 1, state_file: None };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--brokers" => options.brokers = value()?.parse().map_err(|e| format!("--brokers: {e}"))?,
            "--state-file" => options.state_file = Some(PathBuf::from(value()?)),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if options.brokers < 1 {
        return Err("--brokers must be at least 1".into());
    }
    Ok(options)
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("outbox-kafka-mock: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let options = options()?;
    let cluster = MockCluster::new(options.brokers).map_err(|e| format!("starting the mock cluster: {e}"))?;
    let bootstrap = cluster.bootstrap_servers();
    if let Some(path) = &options.state_file {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        }
        std::fs::write(path, format!("{bootstrap}\n")).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "KAFKA_BOOTSTRAP={bootstrap}").and_then(|()| out.flush()).map_err(|e| e.to_string())?;
    drop(out);
    loop {
        std::thread::park();
    }
}
