//! The migration runner against a real database: concurrency, drift, failure, unknown rows.

use std::path::Path;

use outbox_pg::Error;
use outbox_pg::migrate::{Migration, Migrator, core_migrations};
use outbox_pg::testkit::TestDb;

async fn ledger(db: &TestDb) -> Vec<String> {
    sqlx::query_scalar("SELECT name FROM compute_migrations ORDER BY name").fetch_all(&db.pool).await.unwrap()
}

/// The names of `migrations`, in their order.
fn names(migrations: &[Migration]) -> Vec<String> {
    migrations.iter().map(|m| m.name.to_string()).collect()
}

/// `core/<stem>` for each `.sql` file in `migrations/core/`, in file-name order.
fn core_files_on_disk() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations/core");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|error| panic!("reading {}: {error}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "sql"))
        .map(|path| format!("core/{}", path.file_stem().unwrap().to_str().unwrap()))
        .collect();
    files.sort();
    files
}

/// The runner's list is the one place migrations are named: it must hold every file of
/// `migrations/core/`, each once, in the order of their numbers.
#[test]
fn the_runner_embeds_every_core_migration_file_in_order() {
    let embedded = names(&core_migrations());
    let files = core_files_on_disk();
    assert_eq!(embedded.len(), files.len(), "one embedded migration per file: {embedded:?} against {files:?}");
    assert_eq!(embedded, files);
    assert_eq!(names(Migrator::new().migrations()), embedded, "Migrator::new() runs core's migrations");
}

fn app_migrations() -> Vec<Migration> {
    vec![
        Migration::new("app/0001_init", "CREATE TABLE app_things (id bigint PRIMARY KEY)"),
        Migration::new("app/0002_more", "ALTER TABLE app_things ADD COLUMN name text"),
    ]
}

#[tokio::test]
async fn concurrent_migrators_apply_each_migration_once() {
    let db = TestDb::empty().await;
    let migrator = Migrator::new().register(app_migrations());
    let runs = futures_join(&db, &migrator, 6).await;
    let mut applied: Vec<String> = runs.iter().flat_map(|r| r.applied.clone()).collect();
    applied.sort();
    let mut expected = names(migrator.migrations());
    expected.sort();
    assert_eq!(applied, expected, "every migration applied by exactly one of the runs");
    assert_eq!(ledger(&db).await, expected);
    // A later run applies nothing and skips everything.
    let again = migrator.run(&db.pool).await.unwrap();
    assert!(again.applied.is_empty());
    assert_eq!(again.skipped, expected.len());
}

async fn futures_join(db: &TestDb, migrator: &Migrator, n: usize) -> Vec<outbox_pg::migrate::Report> {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let (pool, migrator) = (db.pool.clone(), migrator.clone());
            tokio::spawn(async move { migrator.run(&pool).await })
        })
        .collect();
    let mut reports = Vec::new();
    for task in tasks {
        reports.push(task.await.unwrap().expect("migrate"));
    }
    reports
}

#[tokio::test]
async fn an_edited_applied_migration_is_refused_by_name_and_nothing_runs() {
    let db = TestDb::empty().await;
    Migrator::new().register(app_migrations()[..1].to_vec()).run(&db.pool).await.unwrap();
    let mut edited = app_migrations();
    edited[0].sql = "CREATE TABLE app_things (id text PRIMARY KEY)".into();
    let error = Migrator::new().register(edited.clone()).run(&db.pool).await.unwrap_err();
    assert!(matches!(&error, Error::MigrationDrift { name } if name == "app/0001_init"), "{error}");
    assert!(error.to_string().contains("app/0001_init"));
    assert_eq!(error.code(), outbox_core::ErrorCode::MigrationDrift);
    assert!(!ledger(&db).await.contains(&"app/0002_more".to_string()), "nothing ran after the drift");
    let dry = Migrator::new().register(edited).pending(&db.pool).await.unwrap_err();
    assert!(matches!(dry, Error::MigrationDrift { .. }));
}

#[tokio::test]
async fn a_failed_migration_leaves_nothing_behind() {
    let db = TestDb::empty().await;
    let bad = Migration::new("app/0001_bad", "CREATE TABLE app_half (id int); SELECT 1/0;");
    let error = Migrator::new().register([bad]).run(&db.pool).await.unwrap_err();
    assert!(matches!(&error, Error::MigrationFailed { name, .. } if name == "app/0001_bad"), "{error}");
    let table: Option<String> =
        sqlx::query_scalar("SELECT to_regclass('app_half')::text").fetch_one(&db.pool).await.unwrap();
    assert_eq!(table, None, "the failed migration's table was rolled back");
    let names = ledger(&db).await;
    assert!(!names.contains(&"app/0001_bad".to_string()));
    assert_eq!(names.len(), core_migrations().len(), "the core migrations before it stayed applied");
}

#[tokio::test]
async fn dry_run_lists_pending_and_status_reports_unknown_rows() {
    let db = TestDb::empty().await;
    let migrator = Migrator::new().register(app_migrations());
    let pending = migrator.pending(&db.pool).await.unwrap();
    // Everything, core's migrations first (every file of migrations/core/), then the app's.
    let expected = [core_files_on_disk(), names(&app_migrations())].concat();
    assert_eq!(pending, expected);
    assert!(!ledger_exists(&db).await, "a dry run creates nothing");
    migrator.run(&db.pool).await.unwrap();
    let mut recorded = expected.clone();
    recorded.sort();
    assert_eq!(ledger(&db).await, recorded, "the ledger records every migration the dry run listed");
    let status = Migrator::new().status(&db.pool).await.unwrap();
    assert_eq!(status.unknown, ["app/0001_init", "app/0002_more"]);
    assert!(status.pending.is_empty() && status.drifted.is_empty());
}

async fn ledger_exists(db: &TestDb) -> bool {
    sqlx::query_scalar("SELECT to_regclass('compute_migrations') IS NOT NULL").fetch_one(&db.pool).await.unwrap()
}

#[tokio::test]
async fn invalid_names_are_refused_before_anything_runs() {
    let db = TestDb::empty().await;
    let error = Migrator::new().register([Migration::new("App/0001_x", "SELECT 1")]).run(&db.pool).await.unwrap_err();
    assert_eq!(error.code(), outbox_core::ErrorCode::InvalidConfig);
    assert!(error.to_string().contains("App/0001_x"), "{error}");
    assert!(!ledger_exists(&db).await);
}

#[tokio::test]
async fn the_schema_has_every_table_of_the_spec() {
    let db = TestDb::new().await;
    for table in ["outbox", "outbox_cursors", "outbox_leases", "outbox_dead_letters", "compute_clock"] {
        let found: Option<String> =
            sqlx::query_scalar("SELECT to_regclass($1)::text").bind(table).fetch_one(&db.pool).await.unwrap();
        assert_eq!(found.as_deref(), Some(table));
    }
    let index: Option<String> =
        sqlx::query_scalar("SELECT to_regclass('outbox_tenant_cursor')::text").fetch_one(&db.pool).await.unwrap();
    assert!(index.is_some());
}

/// The write path's migrations on a table that already holds events written the old way
/// (the payload with its own copy of the time, a primary key on seq): every event reads back
/// the same, new events follow them, and the table ends with one key on (txid, seq).
#[tokio::test]
async fn the_write_path_migrations_keep_the_events_already_written() {
    let db = TestDb::empty().await;
    Migrator::through("core/0014_sql_publishing").unwrap().run(&db.pool).await.unwrap();
    let old: Vec<outbox_core::NewEvent> = (0..300)
        .map(|n| {
            outbox_core::NewEvent::new(
                "node.joined",
                ["acme", "globex"][n % 2],
                format!("node/n{n}"),
                serde_json::json!({"n": n}),
            )
        })
        .collect();
    for chunk in old.chunks(100) {
        sqlx::query("SELECT count(*) FROM outbox_publish_many($1)")
            .bind(serde_json::to_value(chunk).unwrap())
            .execute(&db.pool)
            .await
            .unwrap();
    }
    // Every read waits until the xmin rule lets it see `want` events: other tests'
    // transactions on the same server may hold the horizon back for a moment.
    let read_all = |tenant: Option<&'static str>, want: usize| {
        let pool = db.pool.clone();
        async move {
            let request = match tenant {
                Some(tenant) => outbox_pg::ReadRequest::tenant(tenant),
                None => outbox_pg::ReadRequest::all(),
            };
            crate::support::read_until(&pool, request, want).await
        }
    };
    let before = read_all(None, 300).await;
    let acme_before = read_all(Some("acme"), 150).await;
    assert_eq!(before.len(), 300);
    assert_eq!(acme_before.len(), 150);

    let report = Migrator::new().run(&db.pool).await.unwrap();
    assert!(report.applied.contains(&"core/0015_position_key".to_string()), "{report:?}");
    assert_eq!(read_all(None, 300).await, before, "every old event reads back the same, time included");
    assert_eq!(read_all(Some("acme"), 150).await, acme_before);

    outbox_pg::publish(&db.pool, &outbox_core::NewEvent::new("node.left", "acme", "node/n0", serde_json::json!({})))
        .await
        .unwrap();
    let after = read_all(None, 301).await;
    assert_eq!(after.len(), 301);
    assert!(after[300].sequence > before[299].sequence);
    let indexes: Vec<String> = sqlx::query_scalar(
        "SELECT indexname || ': ' || indexdef FROM pg_indexes WHERE tablename = 'outbox' ORDER BY indexname",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(indexes.len(), 2, "{indexes:?}");
    assert!(indexes[0].starts_with("outbox_tenant_cursor: "), "{indexes:?}");
    assert!(indexes[1].ends_with("USING btree (txid, seq)") && indexes[1].contains("UNIQUE"), "{indexes:?}");
    let primary: String = sqlx::query_scalar(
        "SELECT conname::text FROM pg_constraint WHERE conrelid = 'outbox'::regclass AND contype = 'p'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(primary, "outbox_txid_seq");
}
