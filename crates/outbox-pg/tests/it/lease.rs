//! Leases: acquire when free or expired, renew while held, release, epochs, and the fence.

use std::time::Duration;

use outbox_pg::internal::clock;
use outbox_pg::internal::lease::{self, Lease, acquire, begin_fenced, dispatch_name, release, renew};
use outbox_pg::testkit::TestDb;

const TTL: Duration = Duration::from_secs(30);

async fn take(db: &TestDb, name: &str, holder: &str) -> Option<Lease> {
    acquire(&db.pool, name, holder, TTL).await.expect("acquire")
}

#[tokio::test]
async fn a_lease_has_one_holder_until_it_expires_by_the_database_clock() {
    let db = TestDb::new().await;
    let name = dispatch_name("billing");
    assert_eq!(name, "singleton:outbox-dispatch:billing");

    let a = take(&db, &name, "a").await.expect("a free lease is acquired");
    assert_eq!((a.holder.as_str(), a.epoch), ("a", 1));
    assert!(take(&db, &name, "b").await.is_none(), "b took a held lease");
    assert!(take(&db, &name, "a").await.is_none(), "the holder itself does not re-acquire a held lease");

    clock::advance(&db.pool, TTL + Duration::from_secs(1)).await.unwrap();
    let b = take(&db, &name, "b").await.expect("an expired lease is acquired");
    assert_eq!((b.holder.as_str(), b.epoch), ("b", 2), "every new holder gets the next epoch");
    assert!(renew(&db.pool, &a, TTL).await.unwrap().is_none(), "a renewed a lease b holds");
}

#[tokio::test]
async fn renewing_pushes_expiry_forward_and_an_expired_lease_is_lost_even_if_nobody_took_it() {
    let db = TestDb::new().await;
    let name = dispatch_name("feed");
    let a = take(&db, &name, "a").await.unwrap();

    clock::advance(&db.pool, Duration::from_secs(20)).await.unwrap();
    let renewed = renew(&db.pool, &a, TTL).await.unwrap().expect("a held lease renews");
    assert!(renewed.expires_at > a.expires_at);
    assert_eq!(renewed.epoch, a.epoch);

    clock::advance(&db.pool, Duration::from_secs(20)).await.unwrap();
    assert!(take(&db, &name, "b").await.is_none(), "the renewal did not hold");

    clock::advance(&db.pool, Duration::from_secs(11)).await.unwrap();
    assert!(renew(&db.pool, &renewed, TTL).await.unwrap().is_none(), "an expired lease renewed");
    assert!(begin_fenced(&db.pool, &renewed).await.unwrap().is_none(), "an expired lease passed the fence");
    let again = take(&db, &name, "a").await.expect("the old holder acquires again");
    assert_eq!(again.epoch, 2, "and gets a new epoch");
}

#[tokio::test]
async fn release_frees_the_lease_at_once_and_keeps_the_epoch_growing() {
    let db = TestDb::new().await;
    let name = dispatch_name("archive");
    let a = take(&db, &name, "a").await.unwrap();

    assert!(release(&db.pool, &a).await.unwrap());
    assert!(!release(&db.pool, &a).await.unwrap(), "a second release finds nothing to release");
    let info = lease::get(&db.pool, &name).await.unwrap().expect("the row stays");
    assert_eq!((info.holder, info.held, info.epoch), (None, false, 1));

    let b = take(&db, &name, "b").await.expect("a released lease is free at once");
    assert_eq!(b.epoch, 2);
    let info = lease::get(&db.pool, &name).await.unwrap().unwrap();
    assert_eq!((info.holder.as_deref(), info.held), (Some("b"), true));
}

#[tokio::test]
async fn a_fenced_transaction_makes_a_rival_acquire_wait_for_its_commit() {
    let db = TestDb::new().await;
    let name = dispatch_name("billing");
    let a = acquire(&db.pool, &name, "a", Duration::from_secs(1)).await.unwrap().unwrap();
    let fenced = begin_fenced(&db.pool, &a).await.unwrap().expect("the holder passes the fence");
    clock::advance(&db.pool, Duration::from_secs(2)).await.unwrap();

    // The lease has expired, but a's fenced transaction still locks the row: b waits.
    let pool = db.pool.clone();
    let mut rival = tokio::spawn(async move { acquire(&pool, &name, "b", TTL).await.unwrap() });
    let early = tokio::time::timeout(Duration::from_millis(300), &mut rival).await;
    assert!(early.is_err(), "b acquired while a's fenced transaction was open: {early:?}");
    fenced.commit().await.unwrap();
    let b = rival.await.unwrap().expect("b acquires once a's transaction ended");
    assert_eq!(b.epoch, 2);
}

#[tokio::test]
async fn a_holder_needs_a_name() {
    let db = TestDb::new().await;
    assert!(acquire(&db.pool, "singleton:x", "", TTL).await.is_err());
}

/// Taking a lease does not wait for the WAL flush, and says so only for its own transaction.
#[tokio::test]
async fn acquiring_commits_without_waiting_for_the_flush_and_leaves_the_setting_to_its_transaction() {
    let db = TestDb::new().await;
    let setting = "SELECT current_setting('synchronous_commit')";
    let default: String = sqlx::query_scalar(setting).fetch_one(&db.pool).await.unwrap();
    let mut tx = db.pool.begin().await.unwrap();
    sqlx::query("SET LOCAL synchronous_commit = on").execute(&mut *tx).await.unwrap();
    acquire(&mut *tx, &dispatch_name("flush"), "a", TTL).await.unwrap().expect("a free lease");
    let during: String = sqlx::query_scalar(setting).fetch_one(&mut *tx).await.unwrap();
    assert_eq!(during, "off", "the acquisition's commit would wait for the flush");
    tx.commit().await.unwrap();
    let after: String = sqlx::query_scalar(setting).fetch_one(&db.pool).await.unwrap();
    assert_eq!(after, default, "the setting outlived the acquisition's transaction");
}
