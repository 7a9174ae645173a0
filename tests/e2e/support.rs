//! Finding and running the `outbox` binary.

use std::path::PathBuf;
use std::process::{Command, Output};

/// The `outbox` binary in the target directory of this test binary (`cargo xtask test` builds it first).
pub fn outbox_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/e2e-<hash> -> target/<profile>/outbox
    let path = exe.parent().and_then(|deps| deps.parent()).map(|dir| dir.join("outbox")).expect("a target directory");
    assert!(
        path.exists(),
        "{} is missing: run `cargo build -p outbox-server` first, or run the tests with `cargo xtask test`",
        path.display()
    );
    path
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
