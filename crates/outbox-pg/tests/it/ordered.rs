//! Ordered transactions (SPEC §3.7): with plain publishing, an older transaction that wrote
//! elsewhere first and commits its event of subject X after a younger one is read before
//! it; writers that lock their subjects first come out in commit order.

use std::collections::BTreeMap;
use std::time::Duration;

use outbox_core::{ErrorCode, NewEvent};
use outbox_pg::testkit::TestDb;
use outbox_pg::{Error, ReadRequest, lock_subjects, ordered, publish, subject_key};
use rand::Rng;
use serde_json::json;
use sqlx::{PgPool, Postgres, Transaction};

use crate::support::read_until;

async fn setup(pool: &PgPool) {
    sqlx::raw_sql(
        "CREATE TABLE elsewhere (n bigint NOT NULL);
         CREATE TABLE subject_counters (subject text PRIMARY KEY, n bigint NOT NULL DEFAULT 0);",
    )
    .execute(pool)
    .await
    .unwrap();
}

/// The change an event describes: the subject's counter, one more, in commit order (the
/// row lock makes each writer wait for the previous one's commit).
async fn bump(tx: &mut Transaction<'static, Postgres>, subject: &str) -> i64 {
    sqlx::query_scalar(
        "INSERT INTO subject_counters (subject, n) VALUES ($1, 1)
         ON CONFLICT (subject) DO UPDATE SET n = subject_counters.n + 1 RETURNING n",
    )
    .bind(subject)
    .fetch_one(&mut **tx)
    .await
    .unwrap()
}

async fn write_elsewhere(tx: &mut Transaction<'static, Postgres>) {
    sqlx::query("INSERT INTO elsewhere VALUES (1)").execute(&mut **tx).await.unwrap();
}

async fn publish_bumped(tx: &mut Transaction<'static, Postgres>, subject: &str) -> i64 {
    let n = bump(tx, subject).await;
    publish(&mut **tx, &NewEvent::new("order.changed", "acme", subject, json!({ "n": n }))).await.unwrap();
    n
}

/// Each subject's counters in read order.
async fn read_order(pool: &PgPool, want: usize) -> BTreeMap<String, Vec<i64>> {
    let events = read_until(pool, ReadRequest::default(), want).await;
    assert_eq!(events.len(), want);
    let mut order: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for event in events {
        let n = event.data.value()["n"].as_i64().unwrap();
        order.entry(event.subject).or_default().push(n);
    }
    order
}

/// Waits until a backend of `pool`'s database waits for a lock, so the test knows where the
/// other writer stands.
async fn until_a_backend_waits(pool: &PgPool) {
    crate::support::wait_until("a writer waiting for a lock", || async {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(pool)
        .await
        .unwrap();
        waiting > 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn plain_publishing_reads_an_older_transaction_first_even_when_it_committed_last() {
    let db = TestDb::new().await;
    setup(&db.pool).await;
    // The older writer takes its transaction id first, by writing elsewhere.
    let mut older = db.pool.begin().await.unwrap();
    write_elsewhere(&mut older).await;
    // The younger one publishes n = 1 and commits.
    let mut younger = db.pool.begin().await.unwrap();
    assert_eq!(publish_bumped(&mut younger, "order/o1").await, 1);
    younger.commit().await.unwrap();
    // Then the older one publishes n = 2 and commits.
    assert_eq!(publish_bumped(&mut older, "order/o1").await, 2);
    older.commit().await.unwrap();
    assert_eq!(read_order(&db.pool, 2).await["order/o1"], [2, 1], "read in the opposite order of the commits");
}

#[tokio::test(flavor = "multi_thread")]
async fn ordered_writers_of_a_subject_are_read_in_commit_order() {
    let db = TestDb::new().await;
    setup(&db.pool).await;
    // The same two writers, each beginning with the subject's lock.
    let mut older = ordered(&db.pool, &["order/o1"]).await.unwrap();
    write_elsewhere(&mut older).await;
    let pool = db.pool.clone();
    let younger = tokio::spawn(async move {
        let mut younger = ordered(&pool, &["order/o1"]).await.unwrap();
        let n = publish_bumped(&mut younger, "order/o1").await;
        younger.commit().await.unwrap();
        n
    });
    until_a_backend_waits(&db.pool).await;
    assert_eq!(publish_bumped(&mut older, "order/o1").await, 1);
    older.commit().await.unwrap();
    assert_eq!(younger.await.unwrap(), 2);
    assert_eq!(read_order(&db.pool, 2).await["order/o1"], [1, 2]);
}

/// Sixteen writers over three subjects, half through `ordered`, half through the SQL
/// function, some locking two subjects at once.
#[tokio::test(flavor = "multi_thread")]
async fn many_ordered_writers_over_few_subjects_come_out_in_commit_order() {
    let db = TestDb::new().await;
    setup(&db.pool).await;
    let subjects = ["order/a", "order/b", "order/c"];
    let mut writers = Vec::new();
    for writer in 0..16 {
        let pool = db.pool.clone();
        writers.push(tokio::spawn(async move {
            let mut committed = 0;
            for round in 0..12 {
                let (subject, other, early, pause, roll_back) = {
                    let mut rng = rand::rng();
                    let subject = subjects[rng.random_range(0..subjects.len())];
                    let other = subjects[rng.random_range(0..subjects.len())];
                    (subject, other, rng.random_bool(0.5), rng.random_range(0..8), rng.random_bool(0.2))
                };
                // Some lock two subjects, given in either order; the locks are taken sorted.
                let locked: Vec<&str> = if round % 3 == 0 { vec![other, subject] } else { vec![subject] };
                // Half lock through the SQL function: both take the same locks in the same
                // order, so they serialize with each other and never deadlock.
                let mut tx = if writer % 2 == 0 {
                    ordered(&pool, &locked).await.unwrap()
                } else {
                    let mut tx = pool.begin().await.unwrap();
                    lock_subjects(&mut *tx, &locked).await.unwrap();
                    tx
                };
                if early {
                    write_elsewhere(&mut tx).await;
                    tokio::time::sleep(Duration::from_millis(pause)).await;
                }
                publish_bumped(&mut tx, subject).await;
                tokio::time::sleep(Duration::from_millis(pause)).await;
                if roll_back {
                    tx.rollback().await.unwrap();
                } else {
                    tx.commit().await.unwrap();
                    committed += 1;
                }
            }
            committed
        }));
    }
    let mut committed = 0;
    for writer in writers {
        committed += writer.await.unwrap();
    }
    let order = read_order(&db.pool, committed).await;
    for (subject, ns) in &order {
        let expected: Vec<i64> = (1..=ns.len() as i64).collect();
        assert_eq!(ns, &expected, "{subject}'s events in commit order, none missing");
    }
}

#[tokio::test]
async fn locking_after_writing_is_refused_and_a_bad_subject_named() {
    let db = TestDb::new().await;
    setup(&db.pool).await;
    let mut tx = db.pool.begin().await.unwrap();
    write_elsewhere(&mut tx).await;
    let refused = lock_subjects(&mut *tx, &["order/o1"]).await.unwrap_err();
    assert!(matches!(refused, Error::InvalidRequest(_)), "{refused:?}");
    assert_eq!(refused.code(), ErrorCode::InvalidInput);
    assert!(refused.to_string().contains("must lock its subjects before it writes anything"), "{refused}");
    tx.rollback().await.unwrap();

    let refused = ordered(&db.pool, &["order/o1", "no-slash"]).await.unwrap_err();
    assert_eq!(refused.code(), ErrorCode::InvalidInput);
    assert!(refused.to_string().contains("subjects[1] must be <kind>/<id>"), "{refused}");
}

#[tokio::test]
async fn the_lock_key_is_the_stated_hash_on_both_sides() {
    let db = TestDb::new().await;
    for subject in ["order/o1", "reservation/rsv_01", "k/é"] {
        let sql: i64 =
            sqlx::query_scalar("SELECT outbox_subject_key($1)").bind(subject).fetch_one(&db.pool).await.unwrap();
        assert_eq!(sql, subject_key(subject), "{subject}");
    }
    // The locks are the advisory locks of those keys: another session sees them held.
    let tx = ordered(&db.pool, &["order/o2", "order/o1", "order/o2"]).await.unwrap();
    for subject in ["order/o1", "order/o2"] {
        let held: bool = sqlx::query_scalar("SELECT NOT pg_try_advisory_xact_lock($1)")
            .bind(subject_key(subject))
            .fetch_one(&db.pool)
            .await
            .unwrap();
        assert!(held, "{subject}");
    }
    drop(tx);
}

/// A pool of one connection, with the options `outbox_pg::pool` gives, so the next
/// statement on the pool runs where the ordered transaction began, with `options` set on it.
async fn one_connection(db: &TestDb, options: &[(&str, &str)]) -> PgPool {
    let connect: sqlx::postgres::PgConnectOptions = db.url.parse().unwrap();
    outbox_pg::pool::options().max_connections(1).connect_with(connect.options(options.iter().copied())).await.unwrap()
}

/// Whether a write on `pool` outside any transaction is committed: another session sees it.
async fn an_autocommit_write_lands(pool: &PgPool, other: &PgPool, n: i64) -> bool {
    sqlx::query("INSERT INTO elsewhere VALUES ($1)").bind(n).execute(pool).await.unwrap();
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM elsewhere WHERE n = $1)").bind(n).fetch_one(other).await.unwrap()
}

/// The locks and `BEGIN` share one query string; a lock that fails there (here a
/// `lock_timeout`) fails only the implicit transaction, and the pooled connection is idle
/// again, not inside a failed transaction.
#[tokio::test(flavor = "multi_thread")]
async fn a_lock_that_times_out_leaves_the_connection_idle() {
    let db = TestDb::new().await;
    setup(&db.pool).await;
    let pool = one_connection(&db, &[("lock_timeout", "100ms")]).await;
    let holder = ordered(&db.pool, &["order/o1"]).await.unwrap();

    let refused = ordered(&pool, &["order/o1"]).await.unwrap_err();
    let Error::Database(error) = &refused else { panic!("{refused:?}") };
    assert_eq!(error.as_database_error().and_then(|e| e.code()).as_deref(), Some("55P03"), "{error}");

    assert!(an_autocommit_write_lands(&pool, &db.pool, 1).await, "the connection is not left in a transaction");
    let mut tx = pool.begin().await.unwrap();
    write_elsewhere(&mut tx).await;
    tx.commit().await.unwrap();
    drop(holder);
    let tx = ordered(&pool, &["order/o1"]).await.unwrap();
    tx.commit().await.unwrap();
}

/// A caller that gives up while the lock is awaited (here a timeout) does not leave its
/// pooled connection inside the transaction that began once the lock came: the next write
/// on that connection outside a transaction is committed.
#[tokio::test(flavor = "multi_thread")]
async fn giving_up_while_the_lock_is_awaited_leaves_no_transaction_open() {
    let db = TestDb::new().await;
    setup(&db.pool).await;
    let pool = one_connection(&db, &[]).await;
    let holder = ordered(&db.pool, &["order/o1"]).await.unwrap();

    let gave_up = tokio::time::timeout(Duration::from_millis(200), ordered(&pool, &["order/o1"])).await;
    assert!(gave_up.is_err(), "the lock is held, so the caller times out");
    holder.commit().await.unwrap();

    assert!(an_autocommit_write_lands(&pool, &db.pool, 1).await, "the connection is not left in a transaction");
    let open: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(open, 0);
    let tx = ordered(&db.pool, &["order/o1"]).await.unwrap();
    tx.commit().await.unwrap();
}
