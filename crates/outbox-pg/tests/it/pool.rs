//! The pool options: a connection that broke is replaced, at the cost of at most one failed
//! statement when it was used a moment ago (and so not pinged).

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
async fn a_connection_that_broke_right_after_use_costs_at_most_one_failed_statement() {
    let db = TestDb::new().await;
    let pool = options().max_connections(1).connect(&db.url).await.expect("pool");
    let first = backend_pid(&pool).await.expect("first statement");
    terminate(&db, first).await;
    // Used a moment ago, so not pinged: the next statement may meet the broken connection
    // and fail; the pool drops it then, and the statement after runs on a fresh one.
    let (second, failures) = match backend_pid(&pool).await {
        Ok(pid) => (pid, 0),
        Err(_) => (backend_pid(&pool).await.expect("a fresh connection after one failure"), 1),
    };
    assert_ne!(second, first, "the broken connection was used again ({failures} failures before)");
}
