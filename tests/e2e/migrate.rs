//! `outbox migrate` against a real database.

use outbox_pg::testkit::TestDb;

use crate::support::{run, text};

#[tokio::test]
async fn migrate_applies_then_reports_current_and_dry_run_lists_nothing() {
    let db = TestDb::empty().await;
    let dry = run(&["migrate", "--dry-run"], &[("DATABASE_URL", &db.url)]);
    let (out, err) = text(&dry);
    assert!(dry.status.success(), "{out}{err}");
    assert!(
        out.contains("would apply core/0001_clock") && out.contains("would apply server/0001_revocations"),
        "{out}"
    );

    let first = run(&["migrate"], &[("DATABASE_URL", &db.url)]);
    let (out, err) = text(&first);
    assert!(first.status.success(), "{out}{err}");
    assert!(out.contains("applied core/0002_base"), "{out}");
    assert!(out.contains("13 applied, 0 already current"), "{out}");
    let names: Vec<String> =
        sqlx::query_scalar("SELECT name FROM compute_migrations ORDER BY name").fetch_all(&db.pool).await.unwrap();
    assert_eq!(
        names,
        [
            "core/0001_clock",
            "core/0002_base",
            "core/0009_runtime",
            "core/0010_sink_health",
            "core/0011_clock_cached",
            "core/0012_webhooks",
            "core/0014_sql_publishing",
            "core/0015_position_key",
            "core/0016_payload_time",
            "core/0017_cursor_ordinals",
            "core/0018_subject_functions_inlined",
            "core/0019_publish_many_checks",
            "server/0001_revocations"
        ]
    );

    let second = run(&["migrate"], &[("DATABASE_URL", &db.url)]);
    assert!(text(&second).0.contains("0 applied, 13 already current"));
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
