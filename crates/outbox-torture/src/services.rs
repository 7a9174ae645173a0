//! What the torture run starts: a PostgreSQL cluster and a fresh database, the fault proxy in front of it, and the
//! `outbox serve` processes (the real binary), which it can kill, stop, continue and restart.
//!
//! Each server has every role, reaches the database only through the proxy, and is
//! configured with an API key of tenant [`TENANT`], a short heartbeat and stream duration
//! (so that streams end on their own too), and the run's sinks. Its standard error goes to
//! `server-<n>.log` in the run's directory.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use outbox_pg::embedded::{EmbeddedOptions, EmbeddedPostgres, find_bindir};
use parking_lot::Mutex;
use sha2::Digest;

use outbox_services::serve::{listening_port, serve_args};

/// The tenant whose events the consumers read; writers also write another one's.
pub(crate) const TENANT: &str = "torture";
/// The other tenant, whose events no consumer of [`TENANT`] may see.
pub(crate) const OTHER_TENANT: &str = "elsewhere";
/// The API key the consumers send.
pub(crate) const TOKEN: &str = "torture-key-0123456789";

/// The key that seals the webhook subscriptions' secrets (base64 of 32 bytes).
const SEAL_KEY: &str = "dG9ydHVyZS1ydW4tc2VhbC1rZXktMzItYnl0ZXMhISE=";

/// How long a server gets to answer `/readyz`.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The run's own PostgreSQL cluster, from the machine's binaries, deleted when the run ends
/// (or its process dies). It runs without `fsync` (the machine does not crash during a run),
/// and [`Database::create`] makes its database's commits synchronous, so that an immediate
/// restart keeps every acknowledged commit.
pub(crate) fn cluster() -> anyhow::Result<EmbeddedPostgres> {
    if find_bindir().is_err() {
        outbox_services::install_debian_package("postgresql", "initdb and pg_ctl")?;
    }
    let cluster = EmbeddedPostgres::start(EmbeddedOptions::throwaway().stop_with_process())
        .context("starting the torture run's PostgreSQL cluster")?;
    println!("torture: PostgreSQL cluster of its own on port {} ({})", cluster.port(), cluster.data_dir().display());
    Ok(cluster)
}

/// A database of its own on the run's cluster.
pub(crate) struct Database {
    /// Its URL, straight to the server (the checker's and the faults' own connection).
    pub(crate) direct_url: String,
    pub(crate) name: String,
    admin_url: String,
}

impl Database {
    /// Creates `outbox_torture_<seed>` (dropping a leftover of that name) and migrates it
    /// with `outbox migrate`.
    pub(crate) async fn create(admin_url: &str, seed: u64, binary: &Path) -> anyhow::Result<Database> {
        // Digits only after a fixed prefix: safe to write into the statement.
        let name = format!("outbox_torture_{seed}");
        let admin = sqlx::PgPool::connect(admin_url).await.context("connecting to PostgreSQL")?;
        sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")))
            .execute(&admin)
            .await?;
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&admin).await?;
        // The cluster's default is asynchronous commit; an acknowledged commit must survive
        // the immediate restarts of the faults.
        sqlx::query(sqlx::AssertSqlSafe(format!("ALTER DATABASE {name} SET synchronous_commit = on")))
            .execute(&admin)
            .await?;
        admin.close().await;
        let direct_url = outbox_services::serve::database_url(admin_url, &name);
        let output = Command::new(binary)
            .arg("migrate")
            .env("DATABASE_URL", &direct_url)
            .env_remove("OUTBOX_CONFIG")
            .output()
            .context("running outbox migrate")?;
        if !output.status.success() {
            bail!("outbox migrate failed: {}", String::from_utf8_lossy(&output.stderr));
        }
        Ok(Database { direct_url, name, admin_url: admin_url.to_owned() })
    }

    /// Drops the database (after a run that passed).
    pub(crate) async fn drop_database(self) -> anyhow::Result<()> {
        let admin = sqlx::PgPool::connect(&self.admin_url).await?;
        sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name)))
            .execute(&admin)
            .await?;
        Ok(())
    }
}

/// `url` with its host and port replaced by `127.0.0.1:<port>`.
pub(crate) fn through(url: &str, port: u16) -> String {
    let authority = url.find("://").map_or(0, |i| i + 3);
    let end = url[authority..].find(['/', '?']).map_or(url.len(), |i| authority + i);
    let host_start = url[authority..end].rfind('@').map_or(authority, |i| authority + i + 1);
    format!("{}127.0.0.1:{port}{}", &url[..host_start], &url[end..])
}

/// How every server is configured.
#[derive(Clone)]
pub(crate) struct ServerSetup {
    pub(crate) binary: PathBuf,
    pub(crate) dir: PathBuf,
    /// The database through the proxy.
    pub(crate) database_url: String,
    /// `[[sinks]]` tables, with `{server}` standing for the server's number.
    pub(crate) sinks: String,
}

/// One `outbox serve`, which the faults kill, stop and restart.
pub(crate) struct Server {
    pub(crate) number: usize,
    setup: ServerSetup,
    child: Option<Child>,
    port: Option<u16>,
    stopped: bool,
}

/// The servers' ports, as the consumers see them: `None` while a server is down.
pub(crate) type Ports = Arc<Mutex<Vec<Option<u16>>>>;

impl Server {
    /// Starts server `number` and waits until it is ready.
    pub(crate) fn start(number: usize, setup: &ServerSetup) -> anyhow::Result<Server> {
        let mut server = Server { number, setup: setup.clone(), child: None, port: None, stopped: false };
        server.spawn()?;
        Ok(server)
    }

    fn spawn(&mut self) -> anyhow::Result<()> {
        let config = self.setup.dir.join(format!("server-{}.toml", self.number));
        std::fs::write(&config, self.config_text()).context("writing a server configuration")?;
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.setup.dir.join(format!("server-{}.log", self.number)))?;
        let mut child = serve_args(&mut Command::new(&self.setup.binary), &config)
            .stderr(log)
            .spawn()
            .context("starting outbox serve")?;
        let mut stdout = BufReader::new(child.stdout.take().context("the server's stdout")?);
        let mut line = String::new();
        stdout.read_line(&mut line).context("reading the server's first line")?;
        // Keep reading its output, so that it never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sink = String::new();
            while stdout.read_line(&mut sink).is_ok_and(|n| n > 0) {
                sink.clear();
            }
        });
        let Some(port) = listening_port(&line) else {
            let _ = child.kill();
            bail!("server {} said {line:?}, not where it listens", self.number);
        };
        self.child = Some(child);
        self.port = Some(port);
        self.stopped = false;
        self.wait_ready()
    }

    fn config_text(&self) -> String {
        let digest: String = sha2::Sha256::digest(TOKEN.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
        format!(
            "database_url = \"{url}\"\nroles = [\"all\"]\nallow_private_targets = true\n\n\
             [[auth.api_keys]]\nid = \"torture\"\nsha256 = \"{digest}\"\ntenant = \"{TENANT}\"\n\
             scopes = [\"events:read\", \"events:write\", \"webhooks:write\"]\n\n\
             [watch]\npoll_ms = 50\nheartbeat_ms = 1000\nmax_duration_ms = 20000\n\n\
             [webhooks]\nseal_key = \"{SEAL_KEY}\"\n\n{sinks}",
            url = self.setup.database_url,
            sinks = self.setup.sinks.replace("{server}", &self.number.to_string()),
        )
    }

    fn wait_ready(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        let port = self.port.context("no port")?;
        loop {
            if let Some(child) = self.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                bail!("server {} exited before it was ready ({status})", self.number);
            }
            if ready(port) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("server {} did not answer /readyz within {START_TIMEOUT:?}", self.number);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Its port while it runs.
    pub(crate) fn port(&self) -> Option<u16> {
        self.port
    }

    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// SIGKILL: no shutdown, its leases stay until they expire.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.port = None;
        self.stopped = false;
    }

    /// Starts it again after a kill (on a new port).
    pub(crate) fn restart(&mut self) -> anyhow::Result<()> {
        self.kill();
        self.spawn()
    }

    /// SIGSTOP: it stands still, its connections open, its leases expiring.
    pub(crate) fn pause(&mut self) {
        if let Some(child) = &self.child {
            signal(child.id(), "STOP");
            self.stopped = true;
        }
    }

    /// SIGCONT after [`Server::pause`].
    pub(crate) fn resume(&mut self) {
        if let Some(child) = &self.child {
            signal(child.id(), "CONT");
            self.stopped = false;
        }
    }

    /// SIGTERM and wait (the end of the run).
    pub(crate) fn stop(&mut self) {
        self.resume();
        if let Some(mut child) = self.child.take() {
            signal(child.id(), "TERM");
            let deadline = Instant::now() + Duration::from_secs(20);
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        self.port = None;
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            signal(child.id(), "CONT");
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn signal(pid: u32, name: &str) {
    let _ = Command::new("kill").args([&format!("-{name}"), &pid.to_string()]).status();
}

/// Whether `GET /readyz` on `port` answers 200 within a second.
fn ready(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    let request = "GET /readyz HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n";
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut answer = [0u8; 12];
    stream.read_exact(&mut answer).is_ok() && answer.starts_with(b"HTTP/1.1 200")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_url_goes_through_the_proxy() {
        assert_eq!(
            super::through("postgres://postgres@127.0.0.1:5432/db?sslmode=disable", 7000),
            "postgres://postgres@127.0.0.1:7000/db?sslmode=disable"
        );
        assert_eq!(super::through("postgres://localhost/db", 7000), "postgres://127.0.0.1:7000/db");
    }
}
