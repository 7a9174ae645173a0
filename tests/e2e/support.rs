//! Finding and running the `outbox` binary.

use std::path::PathBuf;
use std::process::{Command, Output};

/// The `outbox` binary, built fresh once per test run.
///
/// It is built into a target directory of its own (`<target>/e2e`): `cargo test` unifies
/// features across the workspace's dev-dependencies, `cargo build -p outbox-server` does not,
/// so sharing one directory would make each rebuild what the other just built.
pub fn outbox_binary() -> PathBuf {
    static BINARY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BINARY.get_or_init(build_outbox).clone()
}

fn build_outbox() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // <target>/<profile>/deps/e2e-<hash>
    let target = exe.ancestors().nth(3).expect("a target directory").join("e2e");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--quiet", "--package", "outbox-server", "--bin", "outbox", "--target-dir"])
        .arg(&target)
        .status()
        .expect("running cargo build for the outbox binary");
    assert!(status.success(), "building the outbox binary failed");
    let binary = target.join("debug").join("outbox");
    assert!(binary.exists(), "{} is missing after cargo build", binary.display());
    binary
}

/// Runs `outbox args…` with `env` to completion.
pub fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(outbox_binary());
    command.args(args).env_remove("DATABASE_URL").env("OUTBOX_LOG", "warn");
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("running outbox")
}

/// Standard output and error as text, for assertions and failure messages.
pub fn text(output: &Output) -> (String, String) {
    (String::from_utf8_lossy(&output.stdout).into_owned(), String::from_utf8_lossy(&output.stderr).into_owned())
}
