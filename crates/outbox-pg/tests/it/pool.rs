//! The pool options: no ping for a connection used a moment ago, and a broken connection is
//! never handed out twice.

use std::time::Duration;

use outbox_pg::pool::{options, options_pinging_after};
use outbox_pg::testkit::TestDb;
use sqlx::PgPool;

async fn backend_pid(pool: &PgPool) -> Result<i32, sqlx::Error> {
    sqlx::query_scalar("SELECT pg_backend_pid()").fetch_one(pool).await
}

/// Ends the server process behind `pid`, waiting until it is gone.
async fn terminate(db: &TestDb, pid: i32) {
    let ended: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1, 10000)")
        .bind(pid)
        .fetch_one(&db.pool)
        .await
        .expect("pg_terminate_backend");
    assert!(ended, "backend {pid} did not end");
}

#[tokio::test]
async fn a_connection_pinged_on_checkout_is_replaced_when_it_broke_while_idle() {
    let db = TestDb::new().await;
    let pool = options_pinging_after(Duration::ZERO).max_connections(1).connect(&db.url).await.expect("pool");
    let first = backend_pid(&pool).await.expect("first statement");
    terminate(&db, first).await;
    let second = backend_pid(&pool).await.expect("the ping found the broken connection and the pool opened another");
    assert_ne!(second, first);
}

#[tokio::test]
async fn a_connection_used_a_moment_ago_is_not_pinged_and_once_broken_is_never_handed_out_again() {
    let db = TestDb::new().await;
    let pool = options().max_connections(1).connect(&db.url).await.expect("pool");
    let first = backend_pid(&pool).await.expect("first statement");
    terminate(&db, first).await;
    // No ping: the statement itself meets the broken connection.
    backend_pid(&pool).await.expect_err("an unpinged broken connection fails its statement");
    // The pool dropped it: the next statement runs on a fresh connection.
    let second = backend_pid(&pool).await.expect("a fresh connection after the failure");
    assert_ne!(second, first);
}
