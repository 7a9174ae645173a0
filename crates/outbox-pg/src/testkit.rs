//! A fresh, migrated database per test (feature `testkit`).
//!
//! The server is found once per process: `DATABASE_URL` when it is set and
//! answers, otherwise a throwaway cluster from [`crate::embedded`], which stops
//! when the process exits. On that server a template database is migrated once
//! (named after the migrations' checksums, created under an advisory lock so
//! that parallel test processes share it); each test then gets its own clone,
//! which costs milliseconds, and drops it when the [`TestDb`] is dropped.
//!
//! ```no_run
//! # async fn demo() {
//! let db = outbox_pg::testkit::TestDb::new().await;
//! sqlx::query("SELECT 1").execute(&db.pool).await.unwrap();
//! # }
//! ```

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sha2::{Digest, Sha256};
use sqlx::postgres::PgConnectOptions;
use sqlx::{AssertSqlSafe, ConnectOptions, Connection, PgConnection, PgPool};

use outbox_core::{Event, Position};

use crate::Result;
use crate::embedded::{EmbeddedOptions, EmbeddedPostgres};
use crate::internal::cursor::OUTBOX_STREAM;
use crate::migrate::Migrator;
use crate::read::{MAX_LIMIT, ReadRequest, head, read_page};
use crate::xid8::Xid8;
use crate::xid8::{position, seq_column};

/// Where the test server is: a URL to its `postgres` database.
struct Server {
    admin_url: String,
    _embedded: Option<EmbeddedPostgres>,
}

static SERVER: OnceLock<Server> = OnceLock::new();
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A database of its own for one test, migrated with `core`'s migrations.
pub struct TestDb {
    /// A pool on the test's database.
    pub pool: PgPool,
    /// The test's database URL, for code that connects by itself (a server under test).
    pub url: String,
    name: String,
}

impl TestDb {
    /// A fresh database migrated with `core`'s migrations.
    ///
    /// Panics with the reason when no PostgreSQL can be reached or started:
    /// a test that needs the database fails rather than passing silently.
    pub async fn new() -> TestDb {
        TestDb::with_migrator(&Migrator::new()).await
    }

    /// A fresh database migrated with `migrator` (for crates that add owners).
    pub async fn with_migrator(migrator: &Migrator) -> TestDb {
        let server = server();
        let template = ensure_template(&server.admin_url, migrator).await;
        let name = format!("outbox_test_{}_{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed));
        let mut admin = connect(&server.admin_url).await;
        create_from_template(&mut admin, &name, &template).await;
        TestDb::open(&server.admin_url, name).await
    }

    /// A fresh database with no migrations applied (to test the migrator itself).
    pub async fn empty() -> TestDb {
        let server = server();
        let name = format!("outbox_test_{}_{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed));
        let mut admin = connect(&server.admin_url).await;
        create_from_template(&mut admin, &name, "template0").await;
        TestDb::open(&server.admin_url, name).await
    }

    async fn open(admin_url: &str, name: String) -> TestDb {
        let url = database_url(admin_url, &name);
        let pool = crate::pool::options()
            .max_connections(10)
            .acquire_timeout(Duration::from_secs(30))
            .connect(&url)
            .await
            .unwrap_or_else(|e| panic!("connecting to test database {name}: {e}"));
        TestDb { pool, url, name }
    }

    /// Panics naming every event type in this database's outbox that `catalog` does not
    /// hold: the check that everything a test published is catalogued (SPEC §3.2).
    pub async fn assert_all_catalogued(&self, catalog: &outbox_core::Catalog) {
        let types: Vec<String> = sqlx::query_scalar("SELECT DISTINCT topic FROM outbox ORDER BY topic")
            .fetch_all(&self.pool)
            .await
            .unwrap_or_else(|e| panic!("reading the published types: {e}"));
        let missing: Vec<&String> = types.iter().filter(|t| !catalog.check_type(t)).collect();
        assert!(missing.is_empty(), "published types missing from the event catalog: {missing:?}");
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A URL for the same server's `postgres` database (to create or drop databases).
    pub fn admin_url() -> String {
        server().admin_url.clone()
    }
}

/// Puts the outbox's durable cursor `name` at `at` without a lease (moving it either way),
/// as a consumer's saves would have left it: for tests and benchmarks that need cursors in place.
pub async fn set_cursor(pool: &PgPool, name: &str, at: Position) -> Result<()> {
    sqlx::query(
        "INSERT INTO outbox_cursors (stream, name, txid, seq) VALUES ($1, $2, $3, $4)
         ON CONFLICT (stream, name) DO UPDATE SET txid = EXCLUDED.txid, seq = EXCLUDED.seq",
    )
    .bind(OUTBOX_STREAM)
    .bind(name)
    .bind(Xid8(at.txid))
    .bind(seq_column(at))
    .execute(pool)
    .await?;
    Ok(())
}

/// The position of the row `offset` rows into the outbox in `(txid, seq)` order, visible to
/// the xmin read or not; `None` past the end.
pub async fn position_at(pool: &PgPool, offset: u64) -> Result<Option<Position>> {
    let row: Option<(Xid8, i64)> = sqlx::query_as("SELECT txid, seq FROM outbox ORDER BY txid, seq OFFSET $1 LIMIT 1")
        .bind(i64::try_from(offset).unwrap_or(i64::MAX))
        .fetch_optional(pool)
        .await?;
    Ok(row.map(|(txid, seq)| position(txid, seq)))
}

/// The newest committed row's position, visible to the xmin read or not.
pub async fn newest_row(pool: &PgPool) -> Result<Option<Position>> {
    let row: Option<(Xid8, i64)> = sqlx::query_as("SELECT txid, seq FROM outbox ORDER BY txid DESC, seq DESC LIMIT 1")
        .fetch_optional(pool)
        .await?;
    Ok(row.map(|(txid, seq)| position(txid, seq)))
}

/// Waits until every row committed so far is visible to the xmin read (another database's
/// open transaction holds the cluster's xmin back for a while), then returns the head.
/// Panics after `patience`.
pub async fn settle(pool: &PgPool, patience: Duration) -> Position {
    let deadline = tokio::time::Instant::now() + patience;
    loop {
        let newest = newest_row(pool).await.unwrap_or_else(|e| panic!("reading the newest row: {e}"));
        let head = head(pool).await.unwrap_or_else(|e| panic!("reading the head: {e}"));
        if newest.is_none_or(|newest| head >= newest) {
            return head;
        }
        assert!(tokio::time::Instant::now() < deadline, "the outbox never became visible up to {newest:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Every event `request` selects after its `after`, read page by page (1,000 at a time) with
/// the xmin rule, up to the visible end.
pub async fn read_to_end(pool: &PgPool, request: &ReadRequest) -> Result<Vec<Event>> {
    let mut request = request.clone().limit(MAX_LIMIT);
    let mut all = Vec::new();
    loop {
        let page = read_page(pool, &request).await?;
        all.extend(page.events);
        request.after = Some(page.next_after);
        if !page.more {
            return Ok(all);
        }
    }
}

impl Drop for TestDb {
    /// Drops the database, closing whatever connections remain.
    fn drop(&mut self) {
        let admin_url = server().admin_url.clone();
        let name = self.name.clone();
        // Drop runs inside the test's runtime, where blocking on async is forbidden: use a thread.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
            runtime.block_on(async {
                let mut admin = PgConnection::connect(&admin_url).await.ok()?;
                let sql = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
                sqlx::raw_sql(AssertSqlSafe(sql)).execute(&mut admin).await.ok()
            })
        });
        let _ = dropped.join();
    }
}

fn server() -> &'static Server {
    SERVER.get_or_init(|| {
        if let Some(url) = std::env::var("DATABASE_URL").ok().filter(|url| answers(url)) {
            drop_leftovers(&url);
            return Server { admin_url: url, _embedded: None };
        }
        let embedded = EmbeddedPostgres::start(EmbeddedOptions::throwaway().stop_with_process()).unwrap_or_else(|e| {
            panic!("no PostgreSQL for the tests: DATABASE_URL is unset or does not answer, and the embedded launcher failed: {e}")
        });
        Server { admin_url: embedded.url(), _embedded: Some(embedded) }
    })
}

/// Drops the databases of earlier test processes on this machine that died before dropping
/// their own (`outbox_test_<pid>_<n>` whose pid is gone). A plain `DROP DATABASE` refuses a
/// database that still has sessions, so one in use by a live run elsewhere is left alone.
fn drop_leftovers(url: &str) {
    let url = url.to_owned();
    let _ = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
        runtime.block_on(async {
            let mut admin = PgConnection::connect(&url).await.ok()?;
            let names: Vec<String> =
                sqlx::query_scalar("SELECT datname FROM pg_database WHERE datname ~ '^outbox_test_[0-9]+_[0-9]+$'")
                    .fetch_all(&mut admin)
                    .await
                    .ok()?;
            for name in names.iter().filter(|name| owner_is_gone(name)) {
                let sql = format!("DROP DATABASE IF EXISTS \"{name}\"");
                let _ = sqlx::raw_sql(AssertSqlSafe(sql)).execute(&mut admin).await;
            }
            Some(())
        })
    })
    .join();
}

/// Whether the process that named a test database `outbox_test_<pid>_<n>` no longer runs here.
fn owner_is_gone(name: &str) -> bool {
    let pid = name.trim_start_matches("outbox_test_").split('_').next().unwrap_or_default();
    pid != std::process::id().to_string() && !std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Whether `url` accepts a connection within a few seconds.
fn answers(url: &str) -> bool {
    let url = url.to_owned();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
        runtime.block_on(async {
            let connect = PgConnection::connect(&url);
            tokio::time::timeout(Duration::from_secs(5), connect).await.ok()?.ok()
        })
    })
    .join()
    .ok()
    .flatten()
    .is_some()
}

async fn connect(url: &str) -> PgConnection {
    let options: PgConnectOptions = url.parse().unwrap_or_else(|e| panic!("bad test database URL {url}: {e}"));
    options.disable_statement_logging().connect().await.unwrap_or_else(|e| panic!("connecting to {url}: {e}"))
}

/// Replaces the database name in a `postgres://…/<db>` URL.
/// `admin_url` with its database replaced by `database`, its query (a socket `host=`, options)
/// kept.
pub fn database_url(admin_url: &str, database: &str) -> String {
    let (base, query) = admin_url.split_once('?').map_or((admin_url, None), |(b, q)| (b, Some(q)));
    let authority_end = base.find("://").map_or(0, |i| i + 3);
    let base = match base[authority_end..].find('/') {
        Some(slash) => &base[..authority_end + slash],
        None => base,
    };
    match query {
        Some(query) => format!("{base}/{database}?{query}"),
        None => format!("{base}/{database}"),
    }
}

/// Migrates the template for this migrator once per server; returns its name.
async fn ensure_template(admin_url: &str, migrator: &Migrator) -> String {
    let mut hash = Sha256::new();
    for migration in migrator.migrations() {
        hash.update(migration.name.as_bytes());
        hash.update(migration.checksum());
    }
    let name = format!("outbox_template_{}", &hex::encode(hash.finalize())[..16]);
    let mut admin = connect(admin_url).await;
    // Parallel test processes: one creates, the others wait and reuse.
    let lock = sqlx::query("SELECT pg_advisory_lock(hashtext($1))").bind(&name).execute(&mut admin).await;
    lock.unwrap_or_else(|e| panic!("locking the test template: {e}"));
    let ready: Option<bool> = sqlx::query_scalar("SELECT datistemplate FROM pg_database WHERE datname = $1")
        .bind(&name)
        .fetch_optional(&mut admin)
        .await
        .unwrap_or_else(|e| panic!("looking up the test template: {e}"));
    if ready != Some(true) {
        build_template(&mut admin, admin_url, &name, migrator, ready.is_some()).await;
    }
    let _ = sqlx::query("SELECT pg_advisory_unlock(hashtext($1))").bind(&name).execute(&mut admin).await;
    name
}

async fn build_template(admin: &mut PgConnection, admin_url: &str, name: &str, migrator: &Migrator, stale: bool) {
    let run = |sql: String| sqlx::raw_sql(AssertSqlSafe(sql));
    if stale {
        // A half-built template from an interrupted run.
        run(format!("DROP DATABASE \"{name}\" WITH (FORCE)"))
            .execute(&mut *admin)
            .await
            .expect("dropping a stale template");
    }
    run(format!("CREATE DATABASE \"{name}\"")).execute(&mut *admin).await.expect("creating the test template");
    let pool = PgPool::connect(&database_url(admin_url, name)).await.expect("connecting to the test template");
    migrator.run(&pool).await.unwrap_or_else(|e| panic!("migrating the test template: {e}"));
    pool.close().await;
    run(format!("ALTER DATABASE \"{name}\" IS_TEMPLATE true"))
        .execute(&mut *admin)
        .await
        .expect("marking the template");
}

async fn create_from_template(admin: &mut PgConnection, name: &str, template: &str) {
    let sql = format!("CREATE DATABASE \"{name}\" TEMPLATE \"{template}\"");
    // CREATE DATABASE refuses while another session is connected to the template, which a
    // parallel process building or cloning it can briefly be: retry for a while.
    let mut attempt = 0;
    loop {
        match sqlx::raw_sql(AssertSqlSafe(sql.clone())).execute(&mut *admin).await {
            Ok(_) => return,
            Err(e) if attempt < 100 && e.to_string().contains("is being accessed by other users") => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("creating test database {name}: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::database_url;

    #[test]
    fn replaces_the_database_in_a_url() {
        assert_eq!(database_url("postgres://u@h:1/postgres", "x"), "postgres://u@h:1/x");
        assert_eq!(database_url("postgres://u@h:1", "x"), "postgres://u@h:1/x");
        assert_eq!(database_url("postgres://u@h/db?sslmode=disable", "x"), "postgres://u@h/x?sslmode=disable");
    }
}
