//! The real `outbox serve` as a child process of a benchmark or the torture run: the binary
//! users run, measured from outside.
//!
//! [`build`] builds `outbox` (`cargo build --release -p outbox-server`) and finds it in the
//! target directory; [`OutboxProcess::start`] runs `outbox serve` on it with a configuration
//! file of its own (a port on 127.0.0.1 the process picks, the roles asked for, one API key
//! for tenant `bench`, `[watch] poll_ms`), the `DATABASE_URL` the caller gives, and the soft
//! limit on open files raised to the hard one; it returns once the process answers `/readyz`.
//! Dropping it stops the process: SIGTERM, then SIGKILL if it has not exited in
//! [`STOP_GRACE`].

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// The tenant of the benchmarks' events and of their API key.
pub const TENANT: &str = "bench";

/// The bearer token the benchmarks send: an API key of tenant `bench`
/// ([`TENANT`]) with `events:read events:write`.
pub const TOKEN: &str = "bench";

/// SHA-256 of [`TOKEN`] (`printf %s bench | sha256sum`): the configuration holds only the digest.
const TOKEN_SHA256: &str = "1b32c28cb38c05480eccc1bd60ff97029b57a05c96718b96dad7e9d84894f549";

/// How long the process gets to start (connect, migrate, bind) and answer `/readyz`.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How long the process gets to exit after SIGTERM: the server's own grace (10 s) and a margin.
const STOP_GRACE: Duration = Duration::from_secs(15);

/// Completes `command` (the `outbox` binary, or a shell that executes it) into `outbox serve`
/// on a free loopback port with the configuration file `config`: only that file configures
/// it (the environment's `OUTBOX_*` overrides are removed), it logs warnings and worse, and
/// its first line on stdout, piped, says where it listens ([`listening_port`]).
pub fn serve_args<'c>(command: &'c mut Command, config: &Path) -> &'c mut Command {
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(config)
        .env("OUTBOX_LOG", "warn")
        .env_remove("DATABASE_URL")
        .env_remove("OUTBOX_CONFIG")
        .env_remove("OUTBOX_LISTEN")
        .env_remove("OUTBOX_ROLES")
        .env_remove("OUTBOX_JWT_SECRET")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
}

/// The port in `outbox serve`'s first line (`outbox serve: listening on http://127.0.0.1:<port> …`).
pub fn listening_port(line: &str) -> Option<u16> {
    line.trim()
        .strip_prefix("outbox serve: listening on http://127.0.0.1:")
        .and_then(|rest| rest.split(' ').next())
        .and_then(|port| port.parse().ok())
}

/// Builds the `outbox` binary in release and returns its path.
pub fn build() -> anyhow::Result<PathBuf> {
    eprintln!("services: building the outbox binary (cargo build --release -p outbox-server)");
    let status = Command::new(crate::cargo())
        .args(["build", "--quiet", "--release", "--package", "outbox-server", "--bin", "outbox"])
        .status()
        .context("running cargo build")?;
    if !status.success() {
        bail!("building the outbox binary failed ({status})");
    }
    let binary = crate::target_dir()?.join("release").join("outbox");
    if !binary.is_file() {
        bail!("cargo built the outbox binary, but it is not at {}", binary.display());
    }
    Ok(binary)
}

/// The URL of `database` on the server `server_url` names (its path replaced, its query kept):
/// the same database reached the way `server_url` reaches the server, over TCP or a socket.
pub fn database_url(server_url: &str, database: &str) -> String {
    let authority = server_url.find("://").map_or(0, |i| i + 3);
    let path = server_url[authority..].find(['/', '?']).map_or(server_url.len(), |i| authority + i);
    let query = server_url[path..].split_once('?').map(|(_, query)| format!("?{query}")).unwrap_or_default();
    format!("{}/{database}{query}", &server_url[..path])
}

/// The name of the database `pool` is connected to.
pub async fn database_name(pool: &sqlx::PgPool) -> anyhow::Result<String> {
    Ok(sqlx::query_scalar("SELECT current_database()").fetch_one(pool).await?)
}

/// How to run one `outbox serve`.
pub struct ServeOptions<'a> {
    /// The database, as the process's `DATABASE_URL`.
    pub database_url: &'a str,
    /// `roles`, e.g. `["http"]`.
    pub roles: &'a [&'a str],
    /// `[watch] poll_ms`.
    pub poll_ms: u64,
}

/// A running `outbox serve`.
pub struct OutboxProcess {
    child: Child,
    port: u16,
    config: PathBuf,
    /// Kept open so that the process's last line (`outbox serve: stopped`) has a reader.
    stdout: BufReader<ChildStdout>,
}

impl OutboxProcess {
    /// Starts `binary serve` with `options` and waits until it answers `/readyz` with 200.
    pub fn start(binary: &Path, options: &ServeOptions<'_>) -> anyhow::Result<OutboxProcess> {
        let config = write_config(options)?;
        let mut command = Command::new("sh");
        command
            .arg("-c")
            // Raise the soft limit on open files to the hard one, for thousands of connections.
            .arg("ulimit -n \"$(ulimit -H -n)\" 2>/dev/null; exec \"$0\" \"$@\"")
            .arg(binary);
        let mut child = serve_args(&mut command, &config)
            .env("DATABASE_URL", options.database_url)
            .spawn()
            .with_context(|| format!("starting {} serve", binary.display()))?;
        let stdout = BufReader::new(child.stdout.take().context("the server's stdout")?);
        let mut process = OutboxProcess { child, port: 0, config, stdout };
        process.port = process.read_port()?;
        process.wait_ready()?;
        Ok(process)
    }

    /// The port of `outbox serve: listening on http://127.0.0.1:<port> (roles …)`.
    fn read_port(&mut self) -> anyhow::Result<u16> {
        let mut line = String::new();
        self.stdout.read_line(&mut line).context("reading the server's first line")?;
        match listening_port(&line) {
            Some(port) => Ok(port),
            None => {
                let status = self.child.wait()?;
                bail!("outbox serve said {line:?}, not where it listens ({status})")
            }
        }
    }

    fn wait_ready(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!("outbox serve exited before it was ready ({status})");
            }
            if self.get("/readyz").is_ok_and(|answer| answer.starts_with("HTTP/1.1 200")) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("outbox serve did not answer /readyz within {START_TIMEOUT:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// One `GET path` over a connection of its own; the whole answer, head and body.
    pub fn get(&self, path: &str) -> anyhow::Result<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port))?;
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        let request = format!(
            "GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {TOKEN}\r\nconnection: close\r\n\r\n"
        );
        stream.write_all(request.as_bytes())?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer)?;
        Ok(answer)
    }

    /// The port it listens on, on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The process's resident memory (`VmRSS` of `/proc/<pid>/status`), in KiB.
    pub fn rss_kib(&self) -> anyhow::Result<u64> {
        rss_kib(self.pid())
    }

    /// SIGTERM, then SIGKILL when it has not exited within [`STOP_GRACE`].
    pub fn stop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = Command::new("kill").args(["-TERM", &self.pid().to_string()]).status();
            let deadline = Instant::now() + STOP_GRACE;
            while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.config);
    }
}

impl Drop for OutboxProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `VmRSS` of process `pid`, in KiB.
pub fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).context("no VmRSS")?;
    Ok(line.split_whitespace().nth(1).context("VmRSS")?.parse()?)
}

/// The process's configuration file, in the temporary directory (removed by `stop`).
fn write_config(options: &ServeOptions<'_>) -> anyhow::Result<PathBuf> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static STARTED: AtomicUsize = AtomicUsize::new(0);
    let n = STARTED.fetch_add(1, Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("outbox-serve-{}-{n}.toml", std::process::id()));
    let roles: Vec<String> = options.roles.iter().map(|role| format!("{role:?}")).collect();
    let text = format!(
        "roles = [{roles}]\n\n\
         [[auth.api_keys]]\nid = \"bench\"\nsha256 = \"{TOKEN_SHA256}\"\ntenant = \"{tenant}\"\n\
         scopes = [\"events:read\", \"events:write\"]\n\n\
         [watch]\npoll_ms = {poll_ms}\n",
        roles = roles.join(", "),
        tenant = TENANT,
        poll_ms = options.poll_ms,
    );
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}
