//! PostgreSQL for the tests, benchmarks and tools: `DATABASE_URL` or 127.0.0.1:5432 when it
//! answers, else a throwaway cluster of `outbox_pg::embedded` from the machine's binaries
//! (installing Debian's `postgresql` first when they are missing); how a benchmark reaches it
//! ([`Transport`]: TCP, as users do, or the Unix socket beside); scratch databases.

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{Context, bail};
use outbox_pg::embedded::{EmbeddedOptions, EmbeddedPostgres, find_bindir};

use crate::install::install_debian_package;

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

    /// [`Postgres::url`] through the Unix socket of [`Postgres::socket_dir`] when there is one.
    pub fn socket_url(&self) -> Option<String> {
        let dir = self.socket_dir()?;
        let url = self.url();
        let separator = if url.contains('?') { '&' } else { '?' };
        Some(format!("{url}{separator}host={}", dir.display()))
    }
}

/// How a benchmark reaches PostgreSQL. Users reach it over TCP, so benchmarks measure there by
/// default; the Unix socket is the reference beside it (and what `--socket` measures alone).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Transport {
    /// TCP to the server's address (127.0.0.1 for a local one).
    Tcp,
    /// The server's Unix socket.
    Socket,
}

impl Transport {
    pub fn label(self) -> &'static str {
        match self {
            Transport::Tcp => "TCP",
            Transport::Socket => "socket",
        }
    }
}

/// The transports one benchmark run measures: `primary` carries the targets; `beside`, when
/// there is one, is measured in the same run and printed next to it.
#[derive(Clone, Copy, Debug)]
pub struct Transports {
    pub primary: Transport,
    pub beside: Option<Transport>,
}

impl Transports {
    /// TCP with the socket beside it, or the socket alone (`--socket`).
    pub fn new(socket_only: bool) -> Transports {
        if socket_only {
            Transports { primary: Transport::Socket, beside: None }
        } else {
            Transports { primary: Transport::Tcp, beside: Some(Transport::Socket) }
        }
    }

    /// The transports in measuring order, the primary first; a socket beside TCP is left out
    /// (and said so) when the server has none.
    pub fn available(self, postgres: &Postgres) -> anyhow::Result<Vec<Transport>> {
        let mut list = vec![self.primary];
        if self.primary == Transport::Socket && postgres.socket_dir().is_none() {
            bail!("--socket: the PostgreSQL at {} has no Unix socket on this machine", postgres.url());
        }
        match self.beside {
            Some(Transport::Socket) if postgres.socket_dir().is_none() => {
                eprintln!("services: this PostgreSQL has no Unix socket here; measuring over TCP alone")
            }
            Some(beside) => list.push(beside),
            None => {}
        }
        Ok(list)
    }
}

impl Postgres {
    /// The server's URL over `transport`.
    pub fn url_over(&self, transport: Transport) -> anyhow::Result<String> {
        match transport {
            Transport::Tcp => {
                let url = self.url();
                let options: sqlx::postgres::PgConnectOptions = url.parse()?;
                if options.get_host().starts_with('/') || options.get_socket().is_some() {
                    bail!("DATABASE_URL names a Unix socket; benchmarks connect over TCP (or pass --socket)");
                }
                Ok(url)
            }
            Transport::Socket => self.socket_url().context("this PostgreSQL has no Unix socket on this machine"),
        }
    }
}

/// PostgreSQL for the tests: `DATABASE_URL` or 127.0.0.1:5432 when it answers, else a
/// throwaway cluster from the machine's binaries, installing them first when possible.
pub fn postgres() -> anyhow::Result<Postgres> {
    if let Ok(url) = std::env::var("DATABASE_URL") {
        if postgres_answers(&url) {
            eprintln!("services: using PostgreSQL at DATABASE_URL ({})", crate::redact(&url));
            return Ok(Postgres::Running(url));
        }
        eprintln!("services: DATABASE_URL does not answer; looking for another PostgreSQL");
    }
    let usual = "postgres://postgres@127.0.0.1:5432/postgres".to_owned();
    if port_open(5432) && postgres_answers(&usual) {
        eprintln!("services: using the PostgreSQL answering on 127.0.0.1:5432");
        return Ok(Postgres::Running(usual));
    }
    if find_bindir().is_err() {
        install_debian_package("postgresql", "initdb and pg_ctl")?;
    }
    eprintln!("services: no PostgreSQL answers; starting a throwaway cluster from the machine's binaries");
    let embedded = EmbeddedPostgres::start(EmbeddedOptions::throwaway().stop_with_process())
        .context("starting the embedded PostgreSQL")?;
    eprintln!("services: embedded PostgreSQL on port {}", embedded.port());
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

/// A database of its own on `server_url`'s server, migrated, dropped when the guard drops.
pub struct ScratchDatabase {
    pub pool: sqlx::PgPool,
    admin_url: String,
    name: String,
}

impl ScratchDatabase {
    /// A pool of `max` connections on this database, on the server `server_url` names (the
    /// same server reached another way: over TCP, or through its socket).
    pub async fn pool_on(&self, server_url: &str, max: u32) -> anyhow::Result<sqlx::PgPool> {
        let options: sqlx::postgres::PgConnectOptions = server_url.parse()?;
        Ok(outbox_pg::pool::options().max_connections(max).connect_with(options.database(&self.name)).await?)
    }

    pub async fn create(server_url: &str, prefix: &str) -> anyhow::Result<ScratchDatabase> {
        let db = ScratchDatabase::create_unmigrated(server_url, prefix).await?;
        outbox_pg::Migrator::new().run(&db.pool).await?;
        Ok(db)
    }

    /// A database of its own with nothing in it: the caller migrates it.
    pub async fn create_unmigrated(server_url: &str, prefix: &str) -> anyhow::Result<ScratchDatabase> {
        use sqlx::Connection;
        let name = format!("{prefix}_{}", std::process::id());
        let mut admin = sqlx::PgConnection::connect(server_url).await?;
        let drop_sql = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
        sqlx::raw_sql(sqlx::AssertSqlSafe(drop_sql)).execute(&mut admin).await?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\""))).execute(&mut admin).await?;
        let mut options: sqlx::postgres::PgConnectOptions = server_url.parse()?;
        options = options.database(&name);
        let pool = sqlx::postgres::PgPoolOptions::new().max_connections(4).connect_with(options).await?;
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
