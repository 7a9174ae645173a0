//! The database clock: `compute_now()` follows every move of the offset, in every session,
//! even one that has called it before, and stays fixed within a transaction like `now()`.

use std::time::{Duration, Instant};

use outbox_pg::internal::clock;
use outbox_pg::sqlx::{self, Connection, PgConnection};
use outbox_pg::testkit::TestDb;
use time::OffsetDateTime;

const DAY: Duration = Duration::from_secs(86_400);

async fn compute_now(connection: &mut PgConnection) -> OffsetDateTime {
    clock::now(&mut *connection).await.expect("compute_now()")
}

#[tokio::test]
async fn a_session_that_read_the_clock_before_sees_it_move() {
    let db = TestDb::new().await;
    let mut reader = PgConnection::connect(&db.url).await.unwrap();
    // Read it several times first, so the session has whatever it keeps of the function.
    let mut before = compute_now(&mut reader).await;
    for _ in 0..5 {
        before = compute_now(&mut reader).await;
    }

    clock::advance(&db.pool, DAY).await.unwrap();
    let after = compute_now(&mut reader).await;
    assert!(after - before >= DAY, "the clock moved by {} after a day's advance", after - before);
    assert!(after - before < DAY + Duration::from_secs(60), "the clock moved by {}", after - before);

    clock::advance(&db.pool, DAY).await.unwrap();
    let later = compute_now(&mut reader).await;
    assert!(later - after >= DAY, "a second advance moved the clock by {}", later - after);
}

#[tokio::test]
async fn within_a_transaction_the_clock_stands_still_and_every_row_gets_the_same_time() {
    let db = TestDb::new().await;
    let mut connection = PgConnection::connect(&db.url).await.unwrap();
    let mut tx = connection.begin().await.unwrap();
    let first = compute_now(&mut tx).await;
    // Wait, with a deadline, until the wall clock has moved a millisecond past the transaction's start.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sqlx::query_scalar::<_, bool>("SELECT clock_timestamp() > now() + interval '1 millisecond'")
        .fetch_one(&mut *tx)
        .await
        .unwrap()
    {
        assert!(Instant::now() < deadline, "the wall clock did not move within the transaction");
    }
    assert_eq!(compute_now(&mut tx).await, first, "compute_now() moved within one transaction");
    let distinct: i64 = sqlx::query_scalar(
        "SELECT count(DISTINCT t) FROM (SELECT compute_now() AS t FROM generate_series(1, 1000)) rows",
    )
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    assert_eq!(distinct, 1, "one statement's rows got different times");
    tx.commit().await.unwrap();

    let next = compute_now(&mut connection).await;
    assert!(next > first, "a new transaction did not read a later time ({next} after {first})");
}
