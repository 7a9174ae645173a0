//! The examples of publishing from other languages (`examples/sql`): psql, Python
//! (psycopg) and Node.js (pg), each run as a user would against a migrated database, each
//! changing a row and publishing in one transaction. `cargo xtask test` installs psycopg and
//! the Node.js packages when they are missing; a missing one fails here, naming it.

use std::path::{Path, PathBuf};
use std::process::Command;

use outbox_pg::testkit::TestDb;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/sql")
}

/// The database's URL over TCP, as the example programs take it.
fn url(db: &TestDb) -> String {
    let options = db.pool.connect_options();
    format!(
        "postgresql://{}@{}:{}/{}",
        options.get_username(),
        options.get_host(),
        options.get_port(),
        options.get_database().unwrap_or_default()
    )
}

/// Runs `program args…`, failing with what it printed, or naming what is missing.
fn run(program: &str, args: &[&str], missing: &str) -> String {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|error| panic!("cannot run {program} ({error}): {missing}"));
    let (out, err) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{program} {args:?} failed ({}): {out}{err}\n{missing}", output.status);
    out.into_owned() + &err
}

/// The subject's events as (type, data) in read order, and the reservation's state.
async fn published(db: &TestDb, id: &str) -> (Vec<(String, String)>, String) {
    let subject = format!("reservation/{id}");
    let events: Vec<(String, String)> = sqlx::query_as(
        "SELECT topic, (payload->'data')::text FROM outbox WHERE payload->>'subject' = $1 ORDER BY txid, seq",
    )
    .bind(&subject)
    .fetch_all(&db.pool)
    .await
    .unwrap();
    let state: String =
        sqlx::query_scalar("SELECT state FROM reservations WHERE id = $1").bind(id).fetch_one(&db.pool).await.unwrap();
    (events, state)
}

fn expected() -> Vec<(String, String)> {
    [
        ("reservation.active", r#"{"state": "active"}"#),
        ("reservation.closed", r#"{"state": "closed"}"#),
        ("reservation.archived", "{}"),
    ]
    .map(|(t, d)| (t.to_owned(), d.to_owned()))
    .to_vec()
}

#[tokio::test]
async fn the_psql_example_changes_a_row_and_publishes_in_one_transaction() {
    let db = TestDb::new().await;
    let script = examples().join("publish.sql");
    let printed = run(
        "psql",
        &[&url(&db), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", script.to_str().unwrap()],
        "install PostgreSQL's client (Debian: postgresql-client)",
    );
    assert_eq!(printed.matches("evt_").count(), 3, "{printed}");
    assert_eq!(published(&db, "rsv_psql").await, (expected(), "closed".to_owned()));
}

#[tokio::test]
async fn the_python_example_changes_a_row_and_publishes_in_one_transaction() {
    let db = TestDb::new().await;
    let script = examples().join("publish.py");
    let printed = run(
        "python3",
        &[script.to_str().unwrap(), &url(&db)],
        "install psycopg: pip install -r examples/sql/requirements.txt (cargo xtask test does)",
    );
    assert_eq!(printed.matches("evt_").count(), 3, "{printed}");
    assert!(printed.contains("refused: type: event 0: type must match"), "the refusal names the field: {printed}");
    assert_eq!(published(&db, "rsv_python").await, (expected(), "closed".to_owned()));
}

#[tokio::test]
async fn the_node_example_changes_a_row_and_publishes_in_one_transaction() {
    let db = TestDb::new().await;
    let script = examples().join("publish.mjs");
    let printed = run(
        "node",
        &[script.to_str().unwrap(), &url(&db)],
        "install Node.js and the example's packages: npm ci --prefix examples/sql (cargo xtask test does)",
    );
    assert_eq!(printed.matches("evt_").count(), 3, "{printed}");
    assert!(printed.contains("refused: 22023 type: event 0"), "the refusal names the field: {printed}");
    assert_eq!(published(&db, "rsv_node").await, (expected(), "closed".to_owned()));
}
