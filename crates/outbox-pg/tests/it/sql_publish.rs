//! Publishing through SQL (`outbox_publish`, `outbox_publish_many`): the same rows, ids and
//! times as the Rust API, the same rules with the same messages, nothing written when any
//! event is refused.

use std::cell::Cell;

use outbox_core::validate::{Limits, validate_batch};
use outbox_core::{Event, NewEvent};
use outbox_pg::testkit::TestDb;
use outbox_pg::{ReadRequest, publish_many};
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestRunner};
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::read_until;

/// What the database said of a refused publish: SQLSTATE, message, the field in COLUMN
/// and the detail's index.
#[derive(Debug, PartialEq)]
struct Refusal {
    code: String,
    message: String,
    column: Option<String>,
    index: Option<u64>,
}

async fn publish_sql(pool: &PgPool, events: &Value) -> Result<Vec<String>, Refusal> {
    let mut tx = pool.begin().await.unwrap();
    let result =
        sqlx::query_scalar::<_, String>("SELECT * FROM outbox_publish_many($1)").bind(events).fetch_all(&mut *tx).await;
    match result {
        Ok(ids) => {
            tx.commit().await.unwrap();
            Ok(ids)
        }
        Err(error) => Err(refusal(&error)),
    }
}

fn refusal(error: &sqlx::Error) -> Refusal {
    let db = error.as_database_error().unwrap_or_else(|| panic!("a database refusal, got {error}"));
    let pg = db.downcast_ref::<sqlx::postgres::PgDatabaseError>();
    let detail: Value = pg.detail().map(|d| serde_json::from_str(d).unwrap()).unwrap_or(Value::Null);
    Refusal {
        code: db.code().unwrap_or_default().into_owned(),
        message: db.message().to_owned(),
        column: pg.column().map(str::to_owned),
        index: detail["index"].as_u64(),
    }
}

fn wire(event: &NewEvent) -> Value {
    json!({ "type": event.event_type, "tenantId": event.tenant_id, "subject": event.subject, "data": event.data })
}

async fn count(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM outbox").fetch_one(pool).await.unwrap()
}

#[tokio::test]
async fn sql_and_rust_publishing_write_the_same_event_shape() {
    let db = TestDb::new().await;
    let from_rust = NewEvent::new("order.created", "acme", "order/o1", json!({"total": 12, "lines": [{"sku": "a"}]}));
    let rust_ids = publish_many(&db.pool, std::slice::from_ref(&from_rust)).await.unwrap();
    let one: String = sqlx::query_scalar("SELECT outbox_publish('order.paid', 'acme', 'order/o1', $1)")
        .bind(json!({"paid": true}))
        .fetch_one(&db.pool)
        .await
        .unwrap();
    let batch = json!([
        {"type": "order.shipped", "tenantId": "acme", "subject": "order/o1", "data": {"n": 1}},
        {"type": "order.shipped", "tenantId": "globex", "subject": "order/o2", "data": {"n": 2}},
    ]);
    let many = publish_sql(&db.pool, &batch).await.unwrap();
    assert_eq!(many.len(), 2);
    assert!(many[0] < many[1], "ids increase within a call: {many:?}");
    for id in rust_ids.iter().chain([&one]).chain(&many) {
        assert_eq!(id.len(), 30, "{id}");
        assert!(id.starts_with("evt_"), "{id}");
        assert!(id[4..].chars().all(|c| "0123456789abcdefghjkmnpqrstvwxyz".contains(c)), "{id}");
    }

    let events: Vec<Event> = read_until(&db.pool, ReadRequest::default(), 4).await;
    let ids: Vec<&str> = events.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, [rust_ids[0].as_str(), one.as_str(), many[0].as_str(), many[1].as_str()], "in publishing order");
    assert_eq!(events[1].event_type, "order.paid");
    assert_eq!(events[1].data.get(), r#"{"paid":true}"#);
    assert_eq!(events[3].tenant_id, "globex");
    assert_eq!(events[3].sequence.txid, events[2].sequence.txid, "one transaction");
    assert_eq!(events[3].sequence.seq, events[2].sequence.seq + 1, "seq in array order");
    // Whichever way the event was written, its time is its row's created_at cut to
    // milliseconds (one reading of the clock per statement), and the payload holds no copy.
    let stored: Vec<(Option<String>, time::OffsetDateTime)> =
        sqlx::query_as("SELECT payload->>'time', created_at FROM outbox ORDER BY seq")
            .fetch_all(&db.pool)
            .await
            .unwrap();
    assert!(stored.iter().all(|(copy, _)| copy.is_none()), "no time in any payload: {stored:?}");
    for (event, (_, created)) in events.iter().zip(&stored) {
        assert_eq!(event.time, outbox_core::millis::truncate(*created), "{}", event.id);
    }
    assert_eq!(stored[2].1, stored[3].1, "one clock reading per batch");
}

/// A batch's ids, written with their shared parts once, are each what `outbox_event_id`
/// makes of the same draw: across a carry from the low random half into the high one too,
/// and at the top of the 80 random bits, where the high half wraps.
#[tokio::test]
async fn a_batch_of_ids_is_the_ids_one_by_one_across_a_carry() {
    let db = TestDb::new().await;
    let top = (1_i64 << 40) - 1;
    let draws = [(1_764_000_000_000_i64, 12_345_i64, 67_890_i64), (1_764_000_000_001, 99, top - 3), (1, top, top - 1)];
    for (ms, high, low) in draws {
        let (batch, one_by_one): (Vec<String>, Vec<String>) = sqlx::query_as(
            "SELECT outbox_event_ids($1, $2, $3, 8),
                    ARRAY(SELECT outbox_event_id($1, $2, $3, k) FROM generate_series(0, 7) k)",
        )
        .bind(ms)
        .bind(high)
        .bind(low)
        .fetch_one(&db.pool)
        .await
        .unwrap();
        assert_eq!(batch, one_by_one, "draw ({ms}, {high}, {low})");
        assert!(batch.windows(2).all(|pair| pair[0] < pair[1]) || high == top, "{batch:?}");
    }
}

#[tokio::test]
async fn a_rolled_back_sql_publish_leaves_nothing() {
    let db = TestDb::new().await;
    let mut tx = db.pool.begin().await.unwrap();
    sqlx::query("SELECT outbox_publish('order.created', 'acme', 'order/o1', '{}')").execute(&mut *tx).await.unwrap();
    sqlx::query("SELECT * FROM outbox_publish_many($1)")
        .bind(json!([{"type": "order.paid", "tenantId": "acme", "subject": "order/o1", "data": {}}]))
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(count(&db.pool).await, 0);
}

#[tokio::test]
async fn a_batch_with_one_bad_event_writes_nothing_and_names_its_index() {
    let db = TestDb::new().await;
    let mut events: Vec<Value> = (0..5)
        .map(|n| json!({"type": "order.created", "tenantId": "acme", "subject": format!("order/o{n}"), "data": {}}))
        .collect();
    events[3]["subject"] = json!("order");
    let refused = publish_sql(&db.pool, &Value::Array(events)).await.unwrap_err();
    assert_eq!(refused.code, "22023");
    assert_eq!(refused.column.as_deref(), Some("subject"));
    assert_eq!(refused.index, Some(3));
    assert!(refused.message.starts_with("event 3: subject must be <kind>/<id>"), "{}", refused.message);
    assert_eq!(count(&db.pool).await, 0);

    let not_an_array = publish_sql(&db.pool, &json!({"type": "order.created"})).await.unwrap_err();
    assert_eq!(not_an_array.message, "events must be a JSON array of events (got an object)");
    let empty = publish_sql(&db.pool, &json!([])).await.unwrap();
    assert!(empty.is_empty());
    let too_many: Vec<Value> =
        (0..10_001).map(|_| json!({"type": "a.b", "tenantId": "t", "subject": "k/i", "data": {}})).collect();
    let refused = publish_sql(&db.pool, &Value::Array(too_many)).await.unwrap_err();
    assert_eq!(refused.message, "events must hold at most 10000 events (got 10001)");
    assert_eq!(count(&db.pool).await, 0);
}

#[tokio::test]
async fn the_limits_are_the_rust_defaults_unless_the_session_sets_them() {
    let db = TestDb::new().await;
    let big = json!([{"type": "a.b", "tenantId": "t", "subject": "k/i", "data": {"s": "x".repeat(70_000)}}]);
    let refused = publish_sql(&db.pool, &big).await.unwrap_err();
    assert_eq!(refused.message, "event 0: data must serialize to at most 65536 bytes (got 70008)");
    let mut conn = db.pool.acquire().await.unwrap();
    sqlx::query("SET outbox.max_data_bytes = '100000'").execute(&mut *conn).await.unwrap();
    let ids: Vec<String> =
        sqlx::query_scalar("SELECT * FROM outbox_publish_many($1)").bind(&big).fetch_all(&mut *conn).await.unwrap();
    assert_eq!(ids.len(), 1);
    sqlx::query("RESET outbox.max_data_bytes").execute(&mut *conn).await.unwrap();
}

/// The refusal `validate_batch` gives `events` under `limits`, in the SQL functions' terms.
fn rust_verdict(events: &[NewEvent], limits: &Limits) -> Option<(Option<u64>, String, String)> {
    validate_batch(events, limits).err().map(|e| (e.index.map(|i| i as u64), e.field.to_owned(), e.to_string()))
}

async fn sql_verdict(pool: &PgPool, events: &[Value], limits: &Limits) -> Option<(Option<u64>, String, String)> {
    let mut tx = pool.begin().await.unwrap();
    for (name, value) in [("max_data_bytes", limits.max_data_bytes), ("max_data_depth", limits.max_data_depth)] {
        sqlx::query("SELECT set_config('outbox.' || $1, $2, true)")
            .bind(name)
            .bind(value.to_string())
            .execute(&mut *tx)
            .await
            .unwrap();
    }
    let result =
        sqlx::query("SELECT * FROM outbox_publish_many($1)").bind(Value::from(events.to_vec())).execute(&mut *tx).await;
    tx.rollback().await.unwrap();
    result.err().map(|error| {
        let refused = refusal(&error);
        assert_eq!(refused.code, "22023", "{refused:?}");
        (refused.index, refused.column.unwrap_or_default(), refused.message)
    })
}

/// Text drawn from the characters each rule allows, and some it refuses.
fn text(allowed: &'static str, max: usize) -> impl Strategy<Value = String> {
    let pool: Vec<char> = allowed.chars().chain("A/ .\"\\\n\té日\u{1}\u{7f}".chars()).collect();
    let allowed: Vec<char> = allowed.chars().collect();
    prop_oneof![
        12 => proptest::collection::vec(proptest::sample::select(allowed.clone()), 1..max),
        1 => proptest::collection::vec(proptest::sample::select(allowed), 0..1),
        2 => proptest::collection::vec(proptest::sample::select(pool), 0..max),
    ]
    .prop_map(|chars| chars.into_iter().collect())
}

fn event_type() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => ("[a-z]{1,4}", text("abcz09-", 8))
            .prop_map(|(a, b)| format!("{}.{}", a, b)),
        1 => text("abcxyz09-.", 20),
        1 => ("[a-z]{61,63}", "[a-z]{62,64}").prop_map(|(a, b)| format!("{a}.{b}")),
    ]
}

fn subject() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => ("[a-z][a-z0-9-]{0,3}", text("AZaz09._:@-", 6)).prop_map(|(kind, id)| format!("{kind}/{id}")),
        1 => text("abc/09_@", 12),
        2 => ("[a-z]{63,65}", "[A-Za-z0-9]{255,257}").prop_map(|(kind, id)| format!("{kind}/{id}")),
    ]
}

fn json_value(depth: u32) -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        Just(json!(1.5)),
        text("abc xyz\"\\", 12).prop_map(Value::from),
    ];
    leaf.prop_recursive(depth, 64, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map("[a-z\"]{0,3}", inner, 0..4)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

fn data() -> impl Strategy<Value = Value> {
    prop_oneof![
        6 => proptest::collection::btree_map("[a-z]{1,4}", json_value(6), 0..5)
            .prop_map(|map| Value::Object(map.into_iter().collect())),
        1 => json_value(2),
    ]
}

fn new_event() -> impl Strategy<Value = NewEvent> {
    (event_type(), text("AZaz09._:-", 8), subject(), data())
        .prop_map(|(event_type, tenant, subject, data)| NewEvent::new(event_type, tenant, subject, data))
}

/// An event every rule accepts, with data small and shallow enough for the smallest limits.
fn valid_event() -> impl Strategy<Value = NewEvent> {
    let data = proptest::collection::btree_map("[a-z]{1,2}", 0u16..1000, 0..3)
        .prop_map(|map| Value::Object(map.into_iter().map(|(k, v)| (k, Value::from(v))).collect()));
    ("[a-z]{1,4}\\.[a-z][a-z0-9-]{0,7}", "[A-Za-z0-9]{1,8}", "[a-z]{1,4}/[A-Za-z0-9._:@-]{1,6}", data)
        .prop_map(|(event_type, tenant, subject, data)| NewEvent::new(event_type, tenant, subject, data))
}

/// Batches of any events, and a share of batches that should pass every rule, so that
/// agreement on acceptance is exercised as much as agreement on refusal.
fn batch() -> impl Strategy<Value = Vec<NewEvent>> {
    prop_oneof![
        3 => proptest::collection::vec(new_event(), 1..3),
        1 => proptest::collection::vec(valid_event(), 1..3),
    ]
}

/// The SQL functions and `outbox_core::validate` accept and refuse the same batches, naming
/// the same event, field and rule in the same words, on generated events (valid, and
/// invalid on every rule) under generated limits.
#[tokio::test(flavor = "multi_thread")]
async fn sql_and_rust_refuse_the_same_events_in_the_same_words() {
    let db = TestDb::new().await;
    let cases = std::env::var("OUTBOX_RULES_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(400);
    let config = ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() };
    let mut runner = TestRunner::new(config);
    let strategy = (batch(), 40usize..600, 2usize..8);
    let handle = tokio::runtime::Handle::current();
    let (accepted, refused) = (Cell::new(0), Cell::new(0));
    let outcome = tokio::task::block_in_place(|| {
        runner.run(&strategy, |(events, max_data_bytes, max_data_depth)| {
            let limits = Limits { max_data_bytes, max_data_depth, ..Limits::default() };
            let wired: Vec<Value> = events.iter().map(wire).collect();
            let sql = handle.block_on(sql_verdict(&db.pool, &wired, &limits));
            let rust = rust_verdict(&events, &limits);
            let counter = if rust.is_some() { &refused } else { &accepted };
            counter.set(counter.get() + 1);
            prop_assert_eq!(sql, rust, "events {}", Value::from(wired.clone()));
            Ok(())
        })
    });
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
    let (accepted, refused) = (accepted.get(), refused.get());
    println!("{accepted} accepted, {refused} refused");
    assert!(
        accepted > cases / 10 && refused > cases / 10,
        "both kinds generated: {accepted} accepted, {refused} refused"
    );
}
