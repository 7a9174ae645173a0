//! Finding and running the `outbox` binary.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The `outbox` binary: `OUTBOX_BIN` when set (`cargo xtask test` builds the binary once,
/// before the tests, and names it there), otherwise built fresh once per test run.
pub(crate) fn outbox_binary() -> PathBuf {
    static BINARY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BINARY
        .get_or_init(|| match std::env::var_os("OUTBOX_BIN") {
            Some(path) => {
                let binary = PathBuf::from(path);
                assert!(binary.is_file(), "OUTBOX_BIN names {}, which is not a file", binary.display());
                binary
            }
            None => build_outbox(),
        })
        .clone()
}

/// Builds the binary into a target directory of its own (`<target>/e2e`): `cargo test`
/// unifies features across the workspace's dev-dependencies, `cargo build -p outbox-server`
/// does not, so sharing one directory would make each rebuild what the other just built.
fn build_outbox() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // <target>/<profile>/deps/e2e-<hash>
    let target = exe.ancestors().nth(3).expect("a target directory").join("e2e");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // The workspace this test was built from, wherever the test runs.
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("Cargo.toml");
    let status = Command::new(cargo)
        .args(["build", "--quiet", "--package", "outbox-server", "--bin", "outbox", "--manifest-path"])
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&target)
        .status()
        .expect("running cargo build for the outbox binary");
    assert!(status.success(), "building the outbox binary failed");
    let binary = target.join("debug").join("outbox");
    assert!(binary.exists(), "{} is missing after cargo build", binary.display());
    binary
}

/// Runs `outbox args…` with `env` to completion.
pub(crate) fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(outbox_binary());
    clean_env(command.args(args));
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("running outbox")
}

/// Runs `outbox args…` with `env`, writing `input` to its standard input; kills it and
/// panics when it has not exited within `within`.
pub(crate) fn run_with_input(args: &[&str], env: &[(&str, &str)], input: &str, within: Duration) -> Output {
    use std::io::Write;
    let mut command = Command::new(outbox_binary());
    clean_env(command.args(args));
    command.envs(env.iter().copied()).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().expect("starting outbox");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_owned();
    let writer = std::thread::spawn(move || drop(stdin.write_all(input.as_bytes())));
    let (done, exited) = mpsc::channel();
    let pid = child.id();
    let waiter = std::thread::spawn(move || {
        let output = child.wait_with_output();
        let _ = done.send(());
        output
    });
    if exited.recv_timeout(within).is_err() {
        let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
        let output = waiter.join().unwrap().expect("waiting for outbox");
        let (out, err) = text(&output);
        panic!("outbox {args:?} did not exit within {within:?}; printed:\n{out}{err}");
    }
    let _ = writer.join();
    waiter.join().unwrap().expect("waiting for outbox")
}

/// Removes the variables the binary reads, so only what a test passes applies.
fn clean_env(command: &mut Command) -> &mut Command {
    let names = [
        "DATABASE_URL",
        "OUTBOX_CONFIG",
        "OUTBOX_LISTEN",
        "OUTBOX_ROLES",
        "OUTBOX_JWT_SECRET",
        "OUTBOX_URL",
        "OUTBOX_TOKEN",
    ];
    for name in names {
        command.env_remove(name);
    }
    command.env("OUTBOX_LOG", "warn")
}

/// What [`Process::spawn_with_stderr`] puts before a line of standard error.
pub(crate) const STDERR: &str = "stderr: ";

/// Standard output and error as text, for assertions and failure messages.
pub(crate) fn text(output: &Output) -> (String, String) {
    (String::from_utf8_lossy(&output.stdout).into_owned(), String::from_utf8_lossy(&output.stderr).into_owned())
}

/// A running `outbox` process whose standard output is read line by line.
pub(crate) struct Process {
    pub child: Child,
    lines: mpsc::Receiver<String>,
}

impl Process {
    /// Starts `outbox args…` with `env` (DATABASE_URL removed unless given).
    pub(crate) fn spawn(args: &[&str], env: &[(&str, &str)]) -> Process {
        let mut command = Command::new(outbox_binary());
        clean_env(command.args(args));
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().expect("starting outbox");
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || stdout.lines().map_while(Result::ok).for_each(|line| drop(sender.send(line))));
        Process { child, lines }
    }

    /// [`Process::spawn`] with standard error read too: its lines come among the standard
    /// output's, prefixed with [`STDERR`] (the two pipes' lines keep their own order only).
    pub(crate) fn spawn_with_stderr(args: &[&str], env: &[(&str, &str)]) -> Process {
        let mut command = Command::new(outbox_binary());
        clean_env(command.args(args)).envs(env.iter().copied());
        let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("starting outbox");
        let (sender, lines) = mpsc::channel();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let out = sender.clone();
        std::thread::spawn(move || stdout.lines().map_while(Result::ok).for_each(|line| drop(out.send(line))));
        let stderr = BufReader::new(child.stderr.take().unwrap());
        std::thread::spawn(move || {
            stderr.lines().map_while(Result::ok).for_each(|line| drop(sender.send(format!("{STDERR}{line}"))));
        });
        Process { child, lines }
    }

    /// Every line up to and including the first that `last` accepts, waiting at most `within`.
    pub(crate) fn lines_until(&mut self, mut last: impl FnMut(&str) -> bool, within: Duration) -> Vec<String> {
        let deadline = Instant::now() + within;
        let mut read = Vec::new();
        loop {
            match self.lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) => {
                    let done = last(&line);
                    read.push(line);
                    if done {
                        return read;
                    }
                }
                Err(_) => {
                    let _ = self.child.kill();
                    panic!("outbox did not print the awaited line within {within:?}; it printed:\n{}", read.join("\n"));
                }
            }
        }
    }

    /// The lines printed since the last read, without waiting.
    pub(crate) fn printed_since(&mut self) -> Vec<String> {
        self.lines.try_iter().collect()
    }

    /// The rest of the first line starting with `prefix`, waiting at most `within`.
    pub(crate) fn line_after(&mut self, prefix: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some(rest) = line.strip_prefix(prefix) {
                        return rest.to_owned();
                    }
                }
                Err(_) => {
                    let _ = self.child.kill();
                    let status = self.child.wait();
                    panic!("outbox printed no line starting with {prefix:?} within {within:?} ({status:?})");
                }
            }
        }
    }

    /// Sends SIGTERM (or another signal by name) and waits at most `within` for the exit.
    pub(crate) fn signal_and_wait(&mut self, signal: &str, within: Duration) -> ExitStatus {
        let sent = Command::new("kill").args([&format!("-{signal}"), &self.child.id().to_string()]).status();
        assert!(sent.expect("running kill").success(), "kill -{signal} failed");
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("waiting for outbox") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("outbox did not exit within {within:?} of SIG{signal}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// How many migrations the `outbox` binary applies: the core ones and the server's own
/// (`server/0001_revocations`).
pub(crate) fn server_migration_count() -> i64 {
    i64::try_from(outbox_pg::migrate::core_migrations().len()).unwrap_or(i64::MAX) + 1
}

/// A secret every test server of this suite accepts.
pub(crate) const SECRET: &str = "e2e-secret-0123456789abcdef0123456789";

/// Starts `outbox serve --listen 127.0.0.1:0 extra…` on `database_url` with [`SECRET`];
/// returns it and the address it printed.
pub(crate) fn serve(database_url: &str, extra: &[&str]) -> (Process, SocketAddr) {
    let mut args = vec!["serve", "--listen", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let mut process = Process::spawn(&args, &[("DATABASE_URL", database_url), ("OUTBOX_JWT_SECRET", SECRET)]);
    let rest = process.line_after("outbox serve: listening on http://", Duration::from_secs(60));
    let addr = rest.split_whitespace().next().unwrap().parse().expect("a printed address");
    (process, addr)
}

/// `outbox token issue …` with [`SECRET`]; the printed token.
pub(crate) fn issue_token(args: &[&str]) -> String {
    let mut all = vec!["token", "issue"];
    all.extend_from_slice(args);
    let output = run(&all, &[("OUTBOX_JWT_SECRET", SECRET)]);
    let (out, err) = text(&output);
    assert!(output.status.success(), "token issue failed: {out}{err}");
    out.trim().to_owned()
}
