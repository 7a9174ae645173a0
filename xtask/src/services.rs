//! The services the tests need, brought up the way a fresh machine allows:
//! reuse one that answers on its usual port, else start a throwaway one from
//! the machine's binaries, else (as root on Debian) install the package with
//! apt-get and say so, else fail naming the package to install.

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, bail};
use outbox_pg::embedded::{EmbeddedOptions, EmbeddedPostgres, find_bindir};

/// What keeps a service available while the tests run.
pub enum Postgres {
    /// A server that was already answering.
    Running(String),
    /// A throwaway cluster, stopped when dropped.
    Embedded(EmbeddedPostgres),
}

impl Postgres {
    pub fn url(&self) -> String {
        match self {
            Postgres::Running(url) => url.clone(),
            Postgres::Embedded(embedded) => embedded.url(),
        }
    }

    /// The server's Unix socket directory when it is on this machine and has one.
    ///
    /// sqlx 0.9.0 leaves Nagle's algorithm on for TCP, so a message larger than one segment
    /// waits ~40 ms for the server's delayed ACK; measurements go through the socket instead.
    pub fn socket_dir(&self) -> Option<std::path::PathBuf> {
        let (dir, port) = match self {
            Postgres::Running(url) => {
                let options: sqlx::postgres::PgConnectOptions = url.parse().ok()?;
                let local = matches!(options.get_host(), "127.0.0.1" | "localhost" | "::1");
                (local.then(|| std::path::PathBuf::from("/var/run/postgresql"))?, options.get_port())
            }
            Postgres::Embedded(embedded) => (embedded.data_dir().to_path_buf(), embedded.port()),
        };
        dir.join(format!(".s.PGSQL.{port}")).exists().then_some(dir)
    }
}

/// `cargo xtask test`: PostgreSQL up, then `cargo test --workspace` with `DATABASE_URL` set.
pub fn run_tests(args: &[String]) -> anyhow::Result<()> {
    let postgres = postgres()?;
    let status = Command::new(cargo())
        .args(["test", "--workspace"])
        .args(args)
        .env("DATABASE_URL", postgres.url())
        .status()
        .context("running cargo test")?;
    drop(postgres);
    if !status.success() {
        bail!("cargo test failed ({status})");
    }
    Ok(())
}

pub fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// PostgreSQL for the tests: `DATABASE_URL` or 127.0.0.1:5432 when it answers, else a
/// throwaway cluster from the machine's binaries, installing them first when possible.
pub fn postgres() -> anyhow::Result<Postgres> {
    if let Ok(url) = std::env::var("DATABASE_URL") {
        if postgres_answers(&url) {
            eprintln!("xtask: using PostgreSQL at DATABASE_URL ({})", crate::migrate::redact(&url));
            return Ok(Postgres::Running(url));
        }
        eprintln!("xtask: DATABASE_URL does not answer; looking for another PostgreSQL");
    }
    let usual = "postgres://postgres@127.0.0.1:5432/postgres".to_owned();
    if port_open(5432) && postgres_answers(&usual) {
        eprintln!("xtask: using the PostgreSQL answering on 127.0.0.1:5432");
        return Ok(Postgres::Running(usual));
    }
    if find_bindir().is_err() {
        install_debian_package("postgresql", "initdb and pg_ctl")?;
    }
    eprintln!("xtask: no PostgreSQL answers; starting a throwaway cluster from the machine's binaries");
    let embedded = EmbeddedPostgres::start(EmbeddedOptions::throwaway().stop_with_process())
        .context("starting the embedded PostgreSQL")?;
    eprintln!("xtask: embedded PostgreSQL on port {}", embedded.port());
    Ok(Postgres::Embedded(embedded))
}

fn port_open(port: u16) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok()
}

fn postgres_answers(url: &str) -> bool {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return false };
    runtime.block_on(async {
        use sqlx::Connection;
        let connect = sqlx::PgConnection::connect(url);
        matches!(tokio::time::timeout(Duration::from_secs(5), connect).await, Ok(Ok(_)))
    })
}

/// Installs a Debian package when running as root on Debian; otherwise fails naming it.
pub fn install_debian_package(package: &str, needed_for: &str) -> anyhow::Result<()> {
    let debian = Path::new("/etc/debian_version").exists() && Path::new("/usr/bin/apt-get").exists();
    let root = std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0).unwrap_or(false);
    if !(debian && root) {
        bail!(
            "{needed_for} not found: install the `{package}` package (e.g. `apt-get install {package}`) and run again"
        );
    }
    eprintln!("xtask: {needed_for} not found; installing the Debian package `{package}` with apt-get");
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

/// A database of its own on `server_url`'s server, migrated, dropped when the guard drops.
pub struct ScratchDatabase {
    pub pool: sqlx::PgPool,
    admin_url: String,
    name: String,
}

impl ScratchDatabase {
    /// A scratch database reached through `socket_dir` when given, else over TCP.
    pub async fn create_via(
        server_url: &str,
        socket_dir: Option<&Path>,
        prefix: &str,
    ) -> anyhow::Result<ScratchDatabase> {
        let db = ScratchDatabase::create(server_url, prefix).await?;
        let Some(dir) = socket_dir else { return Ok(db) };
        db.pool.close().await;
        let options: sqlx::postgres::PgConnectOptions = server_url.parse()?;
        let options = options.socket(dir).database(&db.name);
        let pool = sqlx::postgres::PgPoolOptions::new().max_connections(4).connect_with(options).await?;
        Ok(ScratchDatabase { pool, ..db })
    }

    pub async fn create(server_url: &str, prefix: &str) -> anyhow::Result<ScratchDatabase> {
        use sqlx::Connection;
        let name = format!("{prefix}_{}", std::process::id());
        let mut admin = sqlx::PgConnection::connect(server_url).await?;
        let drop_sql = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
        sqlx::raw_sql(sqlx::AssertSqlSafe(drop_sql)).execute(&mut admin).await?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\""))).execute(&mut admin).await?;
        let mut options: sqlx::postgres::PgConnectOptions = server_url.parse()?;
        options = options.database(&name);
        let pool = sqlx::postgres::PgPoolOptions::new().max_connections(4).connect_with(options).await?;
        outbox_pg::Migrator::new().run(&pool).await?;
        Ok(ScratchDatabase { pool, admin_url: server_url.to_owned(), name })
    }

    pub async fn drop_now(self) -> anyhow::Result<()> {
        use sqlx::Connection;
        self.pool.close().await;
        let mut admin = sqlx::PgConnection::connect(&self.admin_url).await?;
        let sql = format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name);
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut admin).await?;
        Ok(())
    }
}
