//! The console's JavaScript tests under `node --test`: the stream reader against the SSE
//! fuzz corpus, the refreshing and the words the page shows
//! (`crates/outbox-http/tests/console/*.test.mjs`, no npm dependency). Node.js 20 or newer
//! is required: without it the phase fails naming it, never skipping the tests.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

/// Where the tests live, relative to the workspace root.
const TESTS: &str = "crates/outbox-http/tests/console";

/// The oldest Node.js whose test runner the tests use (`node:test` with mock timers).
const OLDEST_MAJOR: u32 = 20;

/// What to do when Node.js is missing or too old.
const INSTALL: &str = "install Node.js 20 or newer (Debian: `apt-get install nodejs`)";

/// Runs every `*.test.mjs` of [`TESTS`] with `node --test`.
pub(super) fn run(root: &Path) -> anyhow::Result<()> {
    check_version()?;
    let files = test_files(&root.join(TESTS))?;
    eprintln!("xtask: node --test, {} files of {TESTS}", files.len());
    let status = Command::new("node").arg("--test").args(&files).status().context("running node --test")?;
    if !status.success() {
        bail!("the console's JavaScript tests failed (node --test {TESTS}: {status})");
    }
    Ok(())
}

fn check_version() -> anyhow::Result<()> {
    let output = match Command::new("node").arg("--version").output() {
        Ok(output) if output.status.success() => output,
        Ok(output) => bail!("node --version failed ({}): {INSTALL}", output.status),
        Err(error) => bail!("node was not found ({error}): the console's JavaScript tests need it; {INSTALL}"),
    };
    let version = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    match major(&version) {
        Some(major) if major >= OLDEST_MAJOR => Ok(()),
        _ => bail!("node {version} is too old for the console's JavaScript tests: {INSTALL}"),
    }
}

/// The major version of `v20.20.2`.
fn major(version: &str) -> Option<u32> {
    version.strip_prefix('v')?.split('.').next()?.parse().ok()
}

fn test_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry?.path();
        if path.to_str().is_some_and(|name| name.ends_with(".test.mjs")) {
            files.push(path);
        }
    }
    if files.is_empty() {
        bail!("no *.test.mjs in {}", dir.display());
    }
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_major_version_is_read_from_nodes_answer() {
        assert_eq!(major("v20.20.2"), Some(20));
        assert_eq!(major("v8.1.0"), Some(8));
        assert_eq!(major("20.1"), None);
    }
}
