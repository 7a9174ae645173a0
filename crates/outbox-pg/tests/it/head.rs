//! The shared head: many callers at once share a few reads, and each still gets a head at
//! least as new as a read of its own made when it asked, while writers commit meanwhile.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use outbox_core::NewEvent;
use outbox_pg::internal::head::SharedHead;
use outbox_pg::internal::read::head;
use outbox_pg::testkit::{TestDb, newest_row, settle};
use serde_json::json;

#[derive(PartialEq)]
enum SyncCommit {
    On,
    /// Commits that do not wait for the WAL flush, so that writers commit often.
    Off,
}

async fn publish_one(pool: &sqlx::PgPool, n: usize, sync: SyncCommit) {
    let event = NewEvent::new("node.joined", "acme", "node/n1", json!({ "n": n }));
    let mut tx = pool.begin().await.expect("begin");
    if sync == SyncCommit::Off {
        sqlx::query("SET LOCAL synchronous_commit = off").execute(&mut *tx).await.expect("set");
    }
    outbox_pg::publish(&mut *tx, &event).await.expect("publish");
    tx.commit().await.expect("commit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn callers_share_reads_and_never_get_a_head_older_than_their_call() {
    let db = TestDb::new().await;
    let heads = SharedHead::new(db.pool.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..6)
        .map(|w| {
            let (pool, stop) = (db.pool.clone(), stop.clone());
            tokio::spawn(async move {
                let mut n = w * 1_000_000;
                while !stop.load(Ordering::SeqCst) {
                    publish_one(&pool, n, SyncCommit::Off).await;
                    n += 1;
                }
            })
        })
        .collect();
    let callers = 1_000;
    let mut asking = tokio::task::JoinSet::new();
    for _ in 0..callers {
        let (pool, heads) = (db.pool.clone(), heads.clone());
        asking.spawn(async move {
            // What a read of the caller's own would have seen, just before it asked.
            let before = head(&pool).await.expect("own head");
            let shared = heads.head().await.expect("shared head");
            (before, shared)
        });
    }
    let mut answered = 0;
    while let Some(answer) = asking.join_next().await {
        let (before, shared) = answer.expect("caller");
        assert!(shared >= before, "a shared head {shared} older than the head {before} seen before asking");
        answered += 1;
    }
    stop.store(true, Ordering::SeqCst);
    for writer in writers {
        writer.await.expect("writer");
    }
    assert_eq!(answered, callers);
    let reads = heads.reads();
    assert!(reads >= 1 && reads < callers / 2, "{callers} callers took {reads} reads: they were not shared");
}

#[tokio::test]
async fn a_commit_visible_before_the_call_is_in_the_head() {
    let db = TestDb::new().await;
    let heads = SharedHead::new(db.pool.clone());
    for n in 0..20 {
        publish_one(&db.pool, n, SyncCommit::On).await;
        // Visible to the xmin read first: another test's open transaction can hold it back.
        settle(&db.pool, Duration::from_secs(30)).await;
        let committed = newest_row(&db.pool).await.expect("the newest row").expect("a row");
        let shared = heads.head().await.expect("shared head");
        assert!(shared >= committed, "after commit {n}: the head {shared} is before the commit at {committed}");
    }
    assert_eq!(heads.reads(), 20, "one read per caller when none overlap");
}

#[tokio::test]
async fn a_caller_that_gives_up_leaves_the_others_served() {
    let db = TestDb::new().await;
    let heads = SharedHead::new(db.pool.clone());
    publish_one(&db.pool, 1, SyncCommit::On).await;
    // Dropped while its read is in flight: the read still completes in its own task.
    let gave_up = tokio::time::timeout(Duration::ZERO, heads.head()).await;
    assert!(gave_up.is_err(), "a zero timeout ends the call before any read answers");
    let newest = settle(&db.pool, Duration::from_secs(30)).await;
    let shared = tokio::time::timeout(Duration::from_secs(10), heads.head()).await;
    assert_eq!(shared.expect("no answer: the shared head is stuck").expect("shared head"), newest);
}

#[tokio::test]
async fn a_failed_read_is_each_callers_own_error() {
    let db = TestDb::new().await;
    let heads = SharedHead::new(db.pool.clone());
    db.pool.close().await;
    let answer = tokio::time::timeout(Duration::from_secs(10), heads.head()).await;
    assert!(answer.expect("no answer: the shared head is stuck").is_err(), "a closed pool cannot read the head");
}
