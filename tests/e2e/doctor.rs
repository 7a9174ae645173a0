//! `outbox doctor` with the real binary: findings as JSON lines, the environment's
//! threshold, and exit code 1 on an error finding.

use outbox_pg::testkit::TestDb;

use crate::support::{run, text};

fn findings(stdout: &str) -> Vec<serde_json::Value> {
    stdout.lines().map(|line| serde_json::from_str(line).expect("one JSON finding per line")).collect()
}

#[tokio::test]
async fn doctor_exits_1_on_a_drifted_migration_and_0_when_healthy() {
    let db = TestDb::empty().await;
    assert!(run(&["migrate"], &[("DATABASE_URL", &db.url)]).status.success());
    let healthy = run(&["doctor", "--format", "json"], &[("DATABASE_URL", &db.url)]);
    let (out, err) = text(&healthy);
    assert!(healthy.status.success(), "{out}{err}");
    assert!(findings(&out).iter().all(|f| f["severity"] != "error"), "{out}");
    assert!(out.contains("\"check\":\"retention.idle\""), "{out}");

    sqlx::query("UPDATE compute_migrations SET checksum = '\\x00' WHERE name = 'core/0002_base'")
        .execute(&db.pool)
        .await
        .unwrap();
    let drifted = run(&["doctor", "--format", "json"], &[("DATABASE_URL", &db.url)]);
    let (out, err) = text(&drifted);
    assert_eq!(drifted.status.code(), Some(1), "{out}{err}");
    let found = findings(&out);
    let finding = found.iter().find(|f| f["check"] == "migrations.drifted").expect("a drift finding");
    assert_eq!(finding["severity"], "error");
    assert!(finding["message"].as_str().unwrap().contains("core/0002_base"), "{finding}");
    assert!(finding["fix"].as_str().is_some_and(|fix| !fix.is_empty()));
    assert!(err.contains("1 error finding"), "{err}");

    let table = run(&["doctor"], &[("DATABASE_URL", &db.url)]);
    let (out, _) = text(&table);
    assert_eq!(table.status.code(), Some(1));
    assert!(out.starts_with("SEVERITY") && out.contains("migrations.drifted"), "{out}");
}

/// A transaction holding an id, kept open while the doctor runs with
/// `OUTBOX_DOCTOR_LONG_TX_SECONDS=0`: the finding names its pid. (Rolled back at once: it
/// holds every reader of the cluster back.)
#[tokio::test]
async fn doctor_names_an_open_transaction_with_the_environments_threshold() {
    let db = TestDb::empty().await;
    assert!(run(&["migrate"], &[("DATABASE_URL", &db.url)]).status.success());
    let mut tx = db.pool.begin().await.unwrap();
    sqlx::query("SELECT pg_current_xact_id()").execute(&mut *tx).await.unwrap();
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()").fetch_one(&mut *tx).await.unwrap();
    let output =
        run(&["doctor", "--format", "json"], &[("DATABASE_URL", &db.url), ("OUTBOX_DOCTOR_LONG_TX_SECONDS", "0")]);
    tx.rollback().await.unwrap();
    let (out, err) = text(&output);
    assert!(output.status.success(), "a long transaction is a warning: {out}{err}");
    let found = findings(&out);
    let mine = found
        .iter()
        .find(|f| f["check"] == "transactions.long" && f["message"].as_str().unwrap().contains(&format!("pid {pid} ")))
        .unwrap_or_else(|| panic!("no finding names pid {pid}: {out}"));
    assert!(mine["message"].as_str().unwrap().contains("streams are held back"), "{mine}");
}
