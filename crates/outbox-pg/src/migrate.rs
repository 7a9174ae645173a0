//! The migration runner (SPEC §2.1) and the SQL of owner `core` (SPEC §2.2).
//!
//! A [`Migration`] is a name, `<owner>/<nnnn>_<slug>`, and SQL. [`Migrator`]
//! holds `core`'s migrations first, then each owner a library user registers,
//! and applies what the database lacks:
//!
//! - every name is checked before anything runs (form, owner order, strictly
//!   increasing numbers within an owner), else [`Error::InvalidMigration`];
//! - concurrent migrators serialize on a PostgreSQL session advisory lock
//!   ([`LOCK_KEY`]) held on one connection for the whole run, and skip what
//!   another already applied;
//! - each migration runs in its own transaction together with its row in the
//!   append-only ledger `compute_migrations(name, checksum, applied_at)`, so a
//!   failed migration leaves nothing behind and an applied one never runs again;
//! - an applied migration whose SHA-256 differs from the code's stops the run
//!   before anything is applied ([`Error::MigrationDrift`]);
//! - a ledger row the code does not know is reported by [`Migrator::status`]
//!   (a doctor warning), never an error.
//!
//! # Cancel safety
//!
//! The advisory lock belongs to the connection. The runner marks that
//! connection to be closed when it is dropped, so a cancelled run releases the
//! lock with the connection instead of returning it locked to the pool.

use std::borrow::Cow;
use std::collections::HashMap;

use sha2::{Digest, Sha256};
use sqlx::pool::PoolConnection;
use sqlx::{AssertSqlSafe, PgConnection, PgPool, Postgres};

use crate::{Error, Result};

/// The advisory lock key every Outbox migrator takes (`hashtext('compute_migrations')` is not
/// stable across versions, so the key is a fixed number: "outbox" in ASCII).
pub const LOCK_KEY: i64 = 0x6f75_7462_6f78;

/// One migration: a name `<owner>/<nnnn>_<slug>` and its SQL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migration {
    /// `<owner>/<nnnn>_<slug>`, e.g. `core/0002_base`.
    pub name: Cow<'static, str>,
    /// The SQL; it may hold several statements.
    pub sql: Cow<'static, str>,
}

impl Migration {
    /// A migration from its name and SQL.
    pub fn new(name: impl Into<Cow<'static, str>>, sql: impl Into<Cow<'static, str>>) -> Migration {
        Migration { name: name.into(), sql: sql.into() }
    }

    /// The owner: the part of the name before the slash.
    pub fn owner(&self) -> &str {
        self.name.split_once('/').map_or(&*self.name, |(owner, _)| owner)
    }

    /// The SHA-256 of the SQL, as recorded in the ledger.
    pub fn checksum(&self) -> Vec<u8> {
        Sha256::digest(self.sql.as_bytes()).to_vec()
    }

    fn number(&self) -> u32 {
        self.name.split_once('/').and_then(|(_, rest)| rest.get(..4)).and_then(|n| n.parse().ok()).unwrap_or(0)
    }
}

/// The migrations of owner `core`, embedded in the binary, in order.
pub fn core_migrations() -> Vec<Migration> {
    vec![
        Migration::new("core/0001_clock", include_str!("../../../migrations/core/0001_clock.sql")),
        Migration::new("core/0002_base", include_str!("../../../migrations/core/0002_base.sql")),
        Migration::new("core/0009_runtime", include_str!("../../../migrations/core/0009_runtime.sql")),
        Migration::new("core/0010_sink_health", include_str!("../../../migrations/core/0010_sink_health.sql")),
        Migration::new("core/0011_clock_cached", include_str!("../../../migrations/core/0011_clock_cached.sql")),
        Migration::new("core/0012_webhooks", include_str!("../../../migrations/core/0012_webhooks.sql")),
        Migration::new("core/0014_sql_publishing", include_str!("../../../migrations/core/0014_sql_publishing.sql")),
        Migration::new("core/0015_position_key", include_str!("../../../migrations/core/0015_position_key.sql")),
        Migration::new("core/0016_payload_time", include_str!("../../../migrations/core/0016_payload_time.sql")),
        Migration::new("core/0017_cursor_ordinals", include_str!("../../../migrations/core/0017_cursor_ordinals.sql")),
        Migration::new(
            "core/0018_subject_functions_inlined",
            include_str!("../../../migrations/core/0018_subject_functions_inlined.sql"),
        ),
        Migration::new(
            "core/0019_publish_many_checks",
            include_str!("../../../migrations/core/0019_publish_many_checks.sql"),
        ),
        Migration::new("core/0020_subject_lane", include_str!("../../../migrations/core/0020_subject_lane.sql")),
        Migration::new("core/0021_webhook_lanes", include_str!("../../../migrations/core/0021_webhook_lanes.sql")),
    ]
}

/// Where the database stands against the code's migrations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// Applied, with the code's checksum.
    pub applied: Vec<String>,
    /// Not applied yet, in the order they would run.
    pub pending: Vec<String>,
    /// Applied, but the code's SQL differs.
    pub drifted: Vec<String>,
    /// In the ledger, unknown to the code.
    pub unknown: Vec<String>,
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The migrations this run applied, in order.
    pub applied: Vec<String>,
    /// How many were already applied (by an earlier or a concurrent run).
    pub skipped: usize,
}

/// The ordered set of migrations to apply: `core` first, then registered owners.
#[derive(Debug, Clone)]
pub struct Migrator {
    migrations: Vec<Migration>,
    /// How many leading migrations are Outbox's own (owner `core`); the rest were registered.
    builtin: usize,
}

impl Default for Migrator {
    fn default() -> Migrator {
        Migrator::new()
    }
}

impl Migrator {
    /// A migrator holding `core`'s migrations.
    pub fn new() -> Migrator {
        let migrations = core_migrations();
        Migrator { builtin: migrations.len(), migrations }
    }

    /// A migrator holding `core`'s migrations up to and including `name`: the schema as it
    /// stood at that migration, for measuring what a later one changed. `None` when `core`
    /// has no migration of that name.
    pub fn through(name: &str) -> Option<Migrator> {
        let mut migrations = core_migrations();
        let last = migrations.iter().position(|m| m.name == name)?;
        migrations.truncate(last + 1);
        Some(Migrator { builtin: migrations.len(), migrations })
    }

    /// Appends an owner's migrations; they run after everything registered before.
    /// Owner `core` is reserved for Outbox's own migrations: registering it is refused by
    /// [`Migrator::check`] (and so by every run).
    pub fn register(mut self, migrations: impl IntoIterator<Item = Migration>) -> Migrator {
        self.migrations.extend(migrations);
        self
    }

    /// Every migration, in the order it runs.
    pub fn migrations(&self) -> &[Migration] {
        &self.migrations
    }

    /// Checks every name and the order of owners, without touching a database.
    pub fn check(&self) -> Result<()> {
        let mut finished_owners: Vec<&str> = Vec::new();
        let mut previous: Option<&Migration> = None;
        for (index, migration) in self.migrations.iter().enumerate() {
            check_name(&migration.name).map_err(|reason| invalid(migration, reason))?;
            let owner = migration.owner();
            if index >= self.builtin && owner == "core" {
                return Err(invalid(migration, "owner core is reserved for Outbox's own migrations".into()));
            }
            if previous.is_none() && owner != "core" {
                return Err(invalid(migration, "the first owner must be core".into()));
            }
            match previous {
                Some(prev) if prev.owner() == owner && migration.number() <= prev.number() => {
                    let reason = format!("numbers must strictly increase within owner {owner} (after {})", prev.name);
                    return Err(invalid(migration, reason));
                }
                Some(prev) if prev.owner() != owner => finished_owners.push(prev.owner()),
                _ => {}
            }
            if finished_owners.contains(&owner) {
                let reason = format!("owner {owner} is out of place: its migrations must be registered together");
                return Err(invalid(migration, reason));
            }
            previous = Some(migration);
        }
        Ok(())
    }

    /// Compares the database's ledger with the code, without applying or locking anything.
    pub async fn status(&self, pool: &PgPool) -> Result<Status> {
        self.check()?;
        let mut conn = pool.acquire().await?;
        let ledger = read_ledger(&mut conn).await?;
        Ok(self.compare(&ledger))
    }

    /// The migrations a run would apply now (`--dry-run`). Refuses on drift, as a run would.
    pub async fn pending(&self, pool: &PgPool) -> Result<Vec<String>> {
        let status = self.status(pool).await?;
        match status.drifted.into_iter().next() {
            Some(name) => Err(Error::MigrationDrift { name }),
            None => Ok(status.pending),
        }
    }

    /// Applies every pending migration, each in its own transaction, under the advisory lock.
    pub async fn run(&self, pool: &PgPool) -> Result<Report> {
        self.check()?;
        let mut conn = pool.acquire().await?;
        conn.close_on_drop();
        sqlx::query("SELECT pg_advisory_lock($1)").bind(LOCK_KEY).execute(&mut *conn).await?;
        let report = self.run_locked(&mut conn).await;
        let unlocked = sqlx::query("SELECT pg_advisory_unlock($1)").bind(LOCK_KEY).execute(&mut *conn).await;
        let report = report?;
        unlocked?;
        Ok(report)
    }

    async fn run_locked(&self, conn: &mut PoolConnection<Postgres>) -> Result<Report> {
        sqlx::raw_sql(
            "CREATE TABLE IF NOT EXISTS compute_migrations (
                name text PRIMARY KEY,
                checksum bytea NOT NULL,
                applied_at timestamptz NOT NULL
            )",
        )
        .execute(&mut **conn)
        .await?;
        let ledger = read_ledger(conn).await?;
        let status = self.compare(&ledger);
        if let Some(name) = status.drifted.into_iter().next() {
            return Err(Error::MigrationDrift { name });
        }
        let mut report = Report { applied: Vec::new(), skipped: status.applied.len() };
        for migration in self.migrations.iter().filter(|m| !ledger.contains_key(&*m.name)) {
            apply(conn, migration).await?;
            tracing::info!(migration = %migration.name, "applied migration");
            report.applied.push(migration.name.to_string());
        }
        Ok(report)
    }

    fn compare(&self, ledger: &HashMap<String, Vec<u8>>) -> Status {
        let mut status = Status::default();
        for migration in &self.migrations {
            let name = migration.name.to_string();
            match ledger.get(&name) {
                None => status.pending.push(name),
                Some(checksum) if *checksum == migration.checksum() => status.applied.push(name),
                Some(_) => status.drifted.push(name),
            }
        }
        let known = |name: &String| self.migrations.iter().any(|m| *m.name == **name);
        status.unknown = ledger.keys().filter(|name| !known(name)).cloned().collect();
        status.unknown.sort();
        status
    }
}

async fn apply(conn: &mut PgConnection, migration: &Migration) -> Result<()> {
    let failed = |source| Error::MigrationFailed { name: migration.name.to_string(), source };
    let mut tx = sqlx::Connection::begin(conn).await?;
    sqlx::raw_sql(AssertSqlSafe(&*migration.sql)).execute(&mut *tx).await.map_err(failed)?;
    sqlx::query("INSERT INTO compute_migrations (name, checksum, applied_at) VALUES ($1, $2, compute_now())")
        .bind(&*migration.name)
        .bind(migration.checksum())
        .execute(&mut *tx)
        .await
        .map_err(failed)?;
    tx.commit().await.map_err(failed)
}

/// The ledger as `name -> checksum`; empty when the ledger table does not exist yet.
async fn read_ledger(conn: &mut PgConnection) -> Result<HashMap<String, Vec<u8>>> {
    let exists: bool =
        sqlx::query_scalar("SELECT to_regclass('compute_migrations') IS NOT NULL").fetch_one(&mut *conn).await?;
    if !exists {
        return Ok(HashMap::new());
    }
    let rows: Vec<(String, Vec<u8>)> =
        sqlx::query_as("SELECT name, checksum FROM compute_migrations").fetch_all(&mut *conn).await?;
    Ok(rows.into_iter().collect())
}

fn invalid(migration: &Migration, reason: String) -> Error {
    Error::InvalidMigration { name: migration.name.to_string(), reason }
}

/// Checks `^([a-z][a-z0-9-]{0,63})/(\d{4})_[a-z0-9][a-z0-9_-]{0,95}$`.
fn check_name(name: &str) -> std::result::Result<(), String> {
    const RULE: &str = "names must match <owner>/<nnnn>_<slug>: owner ^[a-z][a-z0-9-]{0,63}$, four digits, slug ^[a-z0-9][a-z0-9_-]{0,95}$";
    let ok = (|| {
        let (owner, rest) = name.split_once('/')?;
        let mut owner_bytes = owner.bytes();
        let owner_ok = owner.len() <= 64
            && matches!(owner_bytes.next(), Some(b'a'..=b'z'))
            && owner_bytes.all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-'));
        let (number, slug) = (rest.get(..4)?, rest.get(4..)?.strip_prefix('_')?);
        let number_ok = number.bytes().all(|b| b.is_ascii_digit());
        let mut slug_bytes = slug.bytes();
        let slug_ok = slug.len() <= 96
            && matches!(slug_bytes.next(), Some(b'a'..=b'z' | b'0'..=b'9'))
            && slug_bytes.all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-'));
        Some(owner_ok && number_ok && slug_ok)
    })();
    if ok == Some(true) { Ok(()) } else { Err(RULE.to_owned()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(names: &[&str], expect: std::result::Result<(), &str>) {
        let migrations: Vec<Migration> = names.iter().map(|n| Migration::new(n.to_string(), "")).collect();
        let builtin = migrations.iter().take_while(|m| m.owner() == "core").count();
        let migrator = Migrator { migrations, builtin };
        let got = migrator.check().map_err(|e| e.to_string());
        match expect {
            Ok(()) => assert!(got.is_ok(), "{names:?}: {got:?}"),
            Err(fragment) => {
                let message = got.expect_err("expected a refusal");
                assert!(message.contains(fragment), "{names:?}: {message:?} lacks {fragment:?}");
            }
        }
    }

    #[test]
    fn names_and_order() {
        check(&["core/0001_clock", "core/0002_base", "billing/0001_init"], Ok(()));
        check(&["core/0001_a", "a-b9/0001_x-y_z", "zz/9999_0"], Ok(()));
        check(&["core/0001_clock", "Core/0002_base"], Err("\"Core/0002_base\""));
        check(&["core/001_clock"], Err("must match"));
        check(&["core/0001-clock"], Err("must match"));
        check(&["core/0001_"], Err("must match"));
        check(&["core/0001_Clock"], Err("must match"));
        check(&["core/00a1_clock"], Err("must match"));
        check(&["core0001_clock"], Err("must match"));
        check(&["core/0001_clock/x"], Err("must match"));
        check(&[&format!("{}/0001_x", "a".repeat(65))], Err("must match"));
        check(&[&format!("core/0001_{}", "a".repeat(97))], Err("must match"));
        check(&["billing/0001_init", "core/0001_clock"], Err("the first owner must be core"));
        check(&["core/0002_base", "core/0001_clock"], Err("strictly increase"));
        check(&["core/0001_a", "core/0001_b"], Err("strictly increase"));
        check(&["core/0001_a", "billing/0001_b", "core/0002_c"], Err("\"core/0002_c\": owner core is reserved"));
        check(&["core/0001_a", "x/0001_b", "y/0001_c", "x/0002_d"], Err("owner x is out of place"));
    }

    #[test]
    fn registering_owner_core_is_refused() {
        let error = Migrator::new().register([Migration::new("core/0010_mine", "")]).check().unwrap_err();
        assert!(error.to_string().contains("owner core is reserved"), "{error}");
    }

    #[test]
    fn embedded_core_migrations_are_valid() {
        Migrator::new().check().unwrap();
        // Every file of migrations/core is embedded, under its own name.
        let directory = concat!(env!("CARGO_MANIFEST_DIR"), "/../../migrations/core");
        let mut files: Vec<String> = std::fs::read_dir(directory)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter_map(|name| name.strip_suffix(".sql").map(|stem| format!("core/{stem}")))
            .collect();
        files.sort();
        let embedded: Vec<String> = core_migrations().iter().map(|migration| migration.name.to_string()).collect();
        assert_eq!(embedded, files);
    }
}
