//! What the examples of publishing from other languages (`examples/sql`, run by the
//! end-to-end tests) need: `psql`, Python's psycopg and Node.js with the `pg` package.
//! Each is installed from its package registry when missing (Debian's packages as root,
//! PyPI with pip, npm's registry with `npm ci` from the committed lock file), or the run
//! fails naming what to install.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

use outbox_services::install_debian_package;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/sql")
}

/// Whether `program args…` runs and succeeds.
fn succeeds(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// Makes sure psql, psycopg and the Node.js packages are there.
pub(crate) fn prepare() -> anyhow::Result<()> {
    if !succeeds("psql", &["--version"]) {
        install_debian_package("postgresql-client", "psql (the psql example)")?;
    }
    if !succeeds("python3", &["-c", "import psycopg"]) {
        if !succeeds("python3", &["--version"]) {
            install_debian_package("python3", "python3 (the Python example)")?;
        }
        eprintln!("xtask: psycopg not found; installing examples/sql/requirements.txt with pip");
        let requirements = examples().join("requirements.txt");
        let installed = Command::new("python3")
            .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r"])
            .arg(&requirements)
            .status()
            .context("running pip")?;
        if !installed.success() {
            bail!("installing psycopg failed: run `pip install -r {}` and run again", requirements.display());
        }
    }
    if !succeeds("node", &["--version"]) {
        install_debian_package("nodejs", "Node.js (the Node.js example)")?;
    }
    if !examples().join("node_modules/pg/package.json").exists() {
        if !succeeds("npm", &["--version"]) {
            install_debian_package("npm", "npm (the Node.js example's packages)")?;
        }
        eprintln!("xtask: installing the Node.js example's packages with npm ci");
        let installed = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--prefix"])
            .arg(examples())
            .status()
            .context("running npm ci")?;
        if !installed.success() {
            bail!("npm ci in examples/sql failed: run it by hand and run again");
        }
    }
    Ok(())
}
