//! `outbox migrate` against a real database.

use std::path::Path;

use outbox_pg::Migrator;
use outbox_pg::testkit::TestDb;

use crate::support::{run, text};

/// `<owner>/<stem>` for each `.sql` file in an owner's directory under `migrations/`, sorted.
/// `migrations/CURRENT.sql`, the generated schema beside those directories, is no migration.
fn migration_files_on_disk() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations");
    let read = |dir: &Path| std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    let mut files = Vec::new();
    for owner in read(&root).map(|entry| entry.unwrap().path()).filter(|path| path.is_dir()) {
        let owner_name = owner.file_name().unwrap().to_str().unwrap().to_owned();
        for file in read(&owner).map(|entry| entry.unwrap().path()) {
            if file.extension().is_some_and(|ext| ext == "sql") {
                files.push(format!("{owner_name}/{}", file.file_stem().unwrap().to_str().unwrap()));
            }
        }
    }
    files.sort();
    files
}

/// The lines of `out` that start with `prefix`, without it.
fn listed(out: &str, prefix: &str) -> Vec<String> {
    out.lines().filter_map(|line| line.strip_prefix(prefix)).map(str::to_owned).collect()
}

#[tokio::test]
async fn migrate_applies_then_reports_current_and_dry_run_lists_nothing() {
    let db = TestDb::empty().await;
    let dry = run(&["migrate", "--dry-run"], &[("DATABASE_URL", &db.url)]);
    let (out, err) = text(&dry);
    assert!(dry.status.success(), "{out}{err}");
    // The binary's runner: core's migrations (outbox-pg's runner) first, in their order, then
    // the server's; together, one for each file under migrations/.
    let would = listed(&out, "would apply ");
    let core: Vec<String> = Migrator::new().migrations().iter().map(|m| m.name.to_string()).collect();
    assert!(would.starts_with(&core), "core's migrations first, in order: {would:?}");
    assert!(would[core.len()..].iter().all(|name| name.starts_with("server/")), "then the server's: {would:?}");
    let mut every = would.clone();
    every.sort();
    assert_eq!(every, migration_files_on_disk(), "one migration for each file under migrations/");

    let first = run(&["migrate"], &[("DATABASE_URL", &db.url)]);
    let (out, err) = text(&first);
    assert!(first.status.success(), "{out}{err}");
    assert_eq!(listed(&out, "applied "), would, "it applies what the dry run listed, in that order");
    assert!(out.contains(&format!("{} applied, 0 already current", would.len())), "{out}");
    let names: Vec<String> =
        sqlx::query_scalar("SELECT name FROM compute_migrations ORDER BY name").fetch_all(&db.pool).await.unwrap();
    assert_eq!(names, every, "the ledger records each of them");

    let second = run(&["migrate"], &[("DATABASE_URL", &db.url)]);
    let (out, _) = text(&second);
    assert!(out.contains(&format!("0 applied, {} already current", would.len())), "{out}");
    let dry = run(&["migrate", "--dry-run"], &[("DATABASE_URL", &db.url)]);
    assert!(text(&dry).0.contains("nothing to apply"));
}

#[tokio::test]
async fn migrate_without_a_database_url_says_so_and_fails() {
    let output = run(&["migrate"], &[]);
    let (_, err) = text(&output);
    assert!(!output.status.success());
    assert!(err.contains("DATABASE_URL is not set"), "{err}");
}

#[tokio::test]
async fn a_drifted_migration_stops_migrate_naming_it() {
    let db = TestDb::new().await;
    sqlx::query("UPDATE compute_migrations SET checksum = '\\x00' WHERE name = 'core/0002_base'")
        .execute(&db.pool)
        .await
        .unwrap();
    let output = run(&["migrate"], &[("DATABASE_URL", &db.url)]);
    let (out, err) = text(&output);
    assert!(!output.status.success(), "{out}");
    assert!(err.contains("core/0002_base") && err.contains("changed after it was applied"), "{err}");
}
