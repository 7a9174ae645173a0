//! `outbox-kafka-mock`: librdkafka's mock cluster, a Kafka-protocol broker that keeps its
//! topics in memory, listening on loopback, for the tests and benchmarks of the `kafka` sink
//! where no real broker can be installed.
//!
//! It prints `KAFKA_BOOTSTRAP=host:port[,…]` on its standard output once the brokers listen,
//! writes the same address to the file given by `--state-file` (if any), and then runs until it
//! is killed. It is meant to run in a process of its own (`cargo xtask services kafka` starts
//! it detached), so that a relay the tests kill does not take the broker's data with it.
//!
//! Usage: `outbox-kafka-mock [--brokers N] [--state-file PATH] [--control-stdin]`.
//!
//! With `--control-stdin` it reads commands from its standard input, one a line: `down` takes
//! every broker down (its connections close, new ones are refused), `up` brings them back;
//! the topics are kept. The torture run stops its Kafka broker this way, since the mock cannot
//! be restarted without losing what it stored. At the end of the input it keeps running.
//!
//! Topics are created on first use with librdkafka's mock default of 4 partitions, replicated
//! on up to 3 of the `--brokers` (default 1). The mock keeps what it is sent in memory, at most
//! 5 MiB or 100,000 batches per partition (librdkafka's fixed limits): beyond that it drops a
//! partition's oldest batches, so a long run's topic is read while it is written (the torture
//! run follows it from the start).
//!
//! **Invariant:** a test tool: no library of the workspace depends on it.

use std::io::Write;
use std::path::PathBuf;

use rdkafka::mocking::MockCluster;

struct Options {
    brokers: i32,
    state_file: Option<PathBuf>,
    control_stdin: bool,
}

fn options() -> Result<Options, String> {
    let mut options = Options { brokers: 1, state_file: None, control_stdin: false };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--brokers" => options.brokers = value()?.parse().map_err(|e| format!("--brokers: {e}"))?,
            "--state-file" => options.state_file = Some(PathBuf::from(value()?)),
            "--control-stdin" => options.control_stdin = true,
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
    if options.control_stdin {
        control(&cluster, options.brokers)?;
    }
    loop {
        std::thread::park();
    }
}

/// Takes the brokers down and up as the lines of standard input say, until it ends.
fn control(cluster: &MockCluster<'_, rdkafka::producer::DefaultProducerContext>, brokers: i32) -> Result<(), String> {
    for line in std::io::stdin().lines() {
        let line = line.map_err(|e| format!("reading the standard input: {e}"))?;
        for broker in 1..=brokers {
            let done = match line.trim() {
                "down" => cluster.broker_down(broker),
                "up" => cluster.broker_up(broker),
                other => return Err(format!("unknown command {other:?}: down or up")),
            };
            done.map_err(|e| format!("{} broker {broker}: {e}", line.trim()))?;
        }
        eprintln!("outbox-kafka-mock: brokers {}", line.trim());
    }
    Ok(())
}
