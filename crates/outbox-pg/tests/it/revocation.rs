//! Revocations: recorded, and read again with a minute of lookback.

use outbox_pg::internal::revocation::{self, Revocation};
use outbox_pg::testkit::TestDb;
use outbox_pg::{Migration, Migrator};

/// A fresh database with the table of migration `server/0001_revocations`.
async fn database() -> TestDb {
    let db = TestDb::new().await;
    let sql = include_str!("../../../../migrations/server/0001_revocations.sql");
    Migrator::new().register(vec![Migration::new("server/0001_revocations", sql)]).run(&db.pool).await.unwrap();
    db
}

fn selectors(rows: &[Revocation]) -> Vec<(i64, &str, &str, &str)> {
    rows.iter().map(|r| (r.id, r.kind.as_str(), r.value.as_str(), r.reason.as_str())).collect()
}

#[tokio::test]
async fn revocations_are_read_above_an_id_and_over_the_last_minute() {
    let db = database().await;
    let first = revocation::record(&db.pool, "session", "ses_1", "signed out").await.unwrap();
    let second = revocation::record(&db.pool, "tenant_any_agent", "acme", "").await.unwrap();
    assert!(second > first);

    let all = revocation::recent(&db.pool, 0).await.unwrap();
    assert_eq!(selectors(&all), [(first, "session", "ses_1", "signed out"), (second, "tenant_any_agent", "acme", "")]);
    assert_eq!(revocation::recent(&db.pool, second).await.unwrap(), all, "the last minute is read again");

    outbox_pg::internal::clock::advance(&db.pool, std::time::Duration::from_secs(61)).await.unwrap();
    assert_eq!(selectors(&revocation::recent(&db.pool, first).await.unwrap()), [selectors(&all)[1]]);
    assert!(revocation::recent(&db.pool, second).await.unwrap().is_empty());
}

#[tokio::test]
async fn an_unknown_kind_is_refused() {
    let db = database().await;
    assert!(revocation::record(&db.pool, "planet", "mars", "").await.is_err());
}
