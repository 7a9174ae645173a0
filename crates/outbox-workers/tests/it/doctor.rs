//! The doctor's findings against a real database: a transaction kept open, a dead letter,
//! a drifted and an unknown migration, a retention backlog, an expired lease.

use std::time::Duration;

use outbox_pg::Migrator;
use outbox_pg::internal::{clock, lease};
use outbox_pg::sqlx;
use outbox_workers::SinkFilter;
use outbox_workers::doctor::{DoctorConfig, Finding, Severity, Thresholds, self_check};
use outbox_workers::retention::Holders;

use crate::retention::set_cursor;
use crate::support::{db, numbered, publish_and_read};

fn config(sinks: &[&str]) -> DoctorConfig {
    DoctorConfig {
        migrator: Migrator::new(),
        sinks: sinks.iter().map(|id| (id.to_string(), SinkFilter::default(), 1)).collect(),
        min_age: Duration::from_secs(3600),
        holders: Holders::Every,
        thresholds: Thresholds::default(),
    }
}

fn of<'a>(findings: &'a [Finding], check: &str) -> Vec<&'a Finding> {
    findings.iter().filter(|f| f.check == check).collect()
}

/// A transaction holding a transaction id, kept open: the finding names its pid and age and
/// says streams are held back. (It is rolled back at once: it holds every reader of the
/// cluster back, other tests included.)
#[tokio::test]
async fn an_open_transaction_is_named_with_its_pid_and_age() {
    let db = db().await;
    let mut tx = db.pool.begin().await.unwrap();
    sqlx::query("SELECT pg_current_xact_id()").execute(&mut *tx).await.unwrap();
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()").fetch_one(&mut *tx).await.unwrap();
    let mut doctor = config(&[]);
    doctor.thresholds.long_transaction = Duration::ZERO;
    let findings = self_check(&db.pool, &doctor).await;
    tx.rollback().await.unwrap();

    let long = of(&findings, "transactions.long");
    let mine = long.iter().find(|f| f.message.contains(&format!("pid {pid} "))).expect("a finding names the pid");
    assert!(mine.message.contains("streams are held back"), "{}", mine.message);
    assert!(
        mine.message.contains(" open for ") && mine.message.contains("s, query started"),
        "its age: {}",
        mine.message
    );
    assert!(mine.fix.contains(&format!("pg_terminate_backend({pid})")), "{}", mine.fix);
    assert_eq!(mine.severity, Severity::Warning);
}

#[tokio::test]
async fn a_dead_letter_is_an_error_with_its_count() {
    let db = db().await;
    let events = publish_and_read(&db.pool, &numbered(2)).await;
    for event in &events {
        sqlx::query(
            "INSERT INTO outbox_dead_letters (sink, txid, seq, event, error, attempts, first_failed_at, last_failed_at)
             VALUES ('billing', $1::text::xid8, $2, $3, 'HTTP 400', 5, compute_now(), compute_now())",
        )
        .bind(event.sequence.txid.to_string())
        .bind(i64::try_from(event.sequence.seq).unwrap())
        .bind(serde_json::to_value(event).unwrap())
        .execute(&db.pool)
        .await
        .unwrap();
    }
    let findings = self_check(&db.pool, &config(&["billing"])).await;
    let letters = of(&findings, "sinks.dead-letters");
    assert_eq!(letters.len(), 1, "{findings:#?}");
    assert_eq!((letters[0].severity, letters[0].count), (Severity::Error, Some(2)));
    assert!(letters[0].message.contains("billing") && letters[0].fix.contains("outbox dead-letters"));
    assert_eq!(findings[0].severity, Severity::Error, "most severe first");
}

#[tokio::test]
async fn drifted_and_unknown_migrations() {
    let db = db().await;
    assert!(of(&self_check(&db.pool, &config(&[])).await, "migrations.drifted").is_empty());
    sqlx::query("UPDATE compute_migrations SET checksum = '\\x00' WHERE name = 'core/0002_base'")
        .execute(&db.pool)
        .await
        .unwrap();
    sqlx::query("INSERT INTO compute_migrations VALUES ('billing/0001_init', '\\x00', now())")
        .execute(&db.pool)
        .await
        .unwrap();
    let findings = self_check(&db.pool, &config(&[])).await;
    let drifted = of(&findings, "migrations.drifted");
    assert_eq!(drifted.len(), 1);
    assert_eq!(drifted[0].severity, Severity::Error);
    assert!(drifted[0].message.contains("core/0002_base"));
    let unknown = of(&findings, "migrations.unknown");
    assert_eq!((unknown[0].severity, unknown[0].count), (Severity::Warning, Some(1)));
    assert!(unknown[0].message.contains("billing/0001_init"));
}

#[tokio::test]
async fn a_retention_backlog_names_the_cursor_and_an_expired_lease_its_holder() {
    let db = db().await;
    let findings = self_check(&db.pool, &config(&[])).await;
    assert_eq!(of(&findings, "retention.idle").len(), 1, "no cursor: retention prunes nothing");

    let events = publish_and_read(&db.pool, &numbered(10)).await;
    set_cursor(&db.pool, "sink:slow", events[3].sequence).await;
    set_cursor(&db.pool, "sink:fast", events[9].sequence).await;
    lease::acquire(&db.pool, "singleton:outbox-dispatch:slow", "host:1:gone", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    clock::advance(&db.pool, Duration::from_secs(7200)).await.unwrap();

    let findings = self_check(&db.pool, &config(&[])).await;
    let backlog = of(&findings, "retention.backlog");
    assert_eq!(backlog.len(), 1, "{findings:#?}");
    assert!(backlog[0].message.contains("sink:slow"), "{}", backlog[0].message);
    assert_eq!(backlog[0].count, Some(6));
    let expired = of(&findings, "leases.expired");
    assert_eq!(expired.len(), 1);
    assert!(expired[0].message.contains("host:1:gone") && expired[0].message.contains("slow"));
}

#[tokio::test]
async fn a_sink_that_lags_or_does_not_run_is_reported() {
    let db = db().await;
    publish_and_read(&db.pool, &numbered(30)).await;
    let mut doctor = config(&["idle"]);
    doctor.thresholds.sink_lag = 20;
    let findings = self_check(&db.pool, &doctor).await;
    let lagging = of(&findings, "sinks.lagging");
    assert_eq!(lagging.len(), 1, "{findings:#?}");
    assert_eq!(lagging[0].count, Some(30));
    assert_eq!(of(&findings, "sinks.not-running").len(), 1);
}

/// A healthy database has no error finding.
#[tokio::test]
async fn a_healthy_database_has_no_error() {
    let db = db().await;
    let findings = self_check(&db.pool, &config(&[])).await;
    assert!(findings.iter().all(|f| f.severity != Severity::Error), "{findings:#?}");
}
