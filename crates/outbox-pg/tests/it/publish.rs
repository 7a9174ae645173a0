//! Publishing into the caller's transaction.

use std::time::Duration;

use outbox_core::{Catalog, ErrorCode, Limits, NewEvent};
use outbox_pg::internal::clock;
use outbox_pg::testkit::TestDb;
use outbox_pg::{Error, Publisher, publish, publish_many};
use outbox_pg::{ReadRequest, read_page};
use serde_json::json;

use crate::support::{event, numbered, read_until};

async fn count(db: &TestDb) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM outbox").fetch_one(&db.pool).await.unwrap()
}

/// Counts INSERT statements on the outbox (not rows) with a statement-level trigger.
async fn count_insert_statements(db: &TestDb) {
    sqlx::raw_sql(
        "CREATE TABLE insert_statements (n int NOT NULL);
         INSERT INTO insert_statements VALUES (0);
         CREATE FUNCTION count_insert_statement() RETURNS trigger LANGUAGE plpgsql AS
           $$ BEGIN UPDATE insert_statements SET n = n + 1; RETURN NULL; END $$;
         CREATE TRIGGER count_insert_statement AFTER INSERT ON outbox
           FOR EACH STATEMENT EXECUTE FUNCTION count_insert_statement();",
    )
    .execute(&db.pool)
    .await
    .unwrap();
}

#[tokio::test]
async fn a_batch_is_one_statement_with_seq_in_input_order() {
    let db = TestDb::new().await;
    count_insert_statements(&db).await;
    let batch: Vec<NewEvent> = (0..500).map(numbered).collect();
    let mut tx = db.pool.begin().await.unwrap();
    let ids = publish_many(&mut *tx, &batch).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(ids.len(), 500);
    let rows: Vec<(i64, String, serde_json::Value)> =
        sqlx::query_as("SELECT seq, payload->>'id', payload->'data'->'n' FROM outbox ORDER BY seq")
            .fetch_all(&db.pool)
            .await
            .unwrap();
    let ns: Vec<u64> = rows.iter().map(|r| r.2.as_u64().unwrap()).collect();
    assert_eq!(ns, (0..500).collect::<Vec<u64>>(), "seq follows input order");
    let stored_ids: Vec<&str> = rows.iter().map(|r| r.1.as_str()).collect();
    assert_eq!(stored_ids, ids, "ids are returned in input order");
    let statements: i32 = sqlx::query_scalar("SELECT n FROM insert_statements").fetch_one(&db.pool).await.unwrap();
    assert_eq!(statements, 1, "500 events in one INSERT statement");
    publish(&db.pool, &numbered(500)).await.unwrap();
    let statements: i32 = sqlx::query_scalar("SELECT n FROM insert_statements").fetch_one(&db.pool).await.unwrap();
    assert_eq!(statements, 2, "the trigger counts statements");
}

#[tokio::test]
async fn ids_are_evt_and_a_lowercase_ulid_and_unique() {
    let db = TestDb::new().await;
    let batch: Vec<NewEvent> = (0..100).map(numbered).collect();
    let mut ids = publish_many(&db.pool, &batch).await.unwrap();
    ids.push(publish(&db.pool, &numbered(100)).await.unwrap());
    for id in &ids {
        let ulid = id.strip_prefix("evt_").expect("evt_ prefix");
        assert_eq!(ulid.len(), 26, "{id}");
        assert!(ulid.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_lowercase()), "{id}");
    }
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len());
    assert!(ids[..100].windows(2).all(|w| w[0] < w[1]), "ids increase within a batch");
}

#[tokio::test]
async fn time_comes_from_the_database_clock_with_milliseconds() {
    let db = TestDb::new().await;
    clock::advance(&db.pool, Duration::from_secs(86_400 * 365)).await.unwrap();
    let expected = clock::now(&db.pool).await.unwrap();
    publish(&db.pool, &numbered(1)).await.unwrap();
    let events = read_until(&db.pool, ReadRequest::all(), 1).await;
    let time = events[0].time;
    assert!((time - expected).abs() < time::Duration::minutes(1), "{time} vs clock {expected}");
    // The time is the row's created_at, cut to milliseconds; the payload does not repeat it.
    let (stored, created): (Option<String>, time::OffsetDateTime) =
        sqlx::query_as("SELECT payload->>'time', created_at FROM outbox").fetch_one(&db.pool).await.unwrap();
    assert_eq!(stored, None, "the payload holds no copy of the time");
    assert_eq!(time.nanosecond() % 1_000_000, 0, "{time} is whole milliseconds");
    assert_eq!(outbox_core::millis::format(time).len(), "2026-09-24T10:15:02.114Z".len());
    assert!((created - time).abs() < time::Duration::milliseconds(1), "created_at {created} agrees with time {time}");
}

#[tokio::test]
async fn one_bad_event_fails_the_batch_and_writes_nothing() {
    let db = TestDb::new().await;
    let mut batch: Vec<NewEvent> = (0..10).map(numbered).collect();
    batch[7].tenant_id = "not a tenant".into();
    let mut tx = db.pool.begin().await.unwrap();
    let error = publish_many(&mut *tx, &batch).await.unwrap_err();
    tx.commit().await.unwrap();
    assert_eq!(error.code(), ErrorCode::InvalidInput);
    let Error::Invalid(invalid) = &error else { panic!("{error:?}") };
    assert_eq!((invalid.index, invalid.field), (Some(7), "tenantId"));
    assert!(error.to_string().contains("event 7: tenantId must match"), "{error}");
    assert_eq!(count(&db).await, 0);
}

#[tokio::test]
async fn batch_size_rules() {
    let db = TestDb::new().await;
    assert!(publish_many(&db.pool, &[]).await.unwrap().is_empty(), "an empty batch writes nothing");
    let too_many: Vec<NewEvent> = (0..10_001).map(numbered).collect();
    let error = publish_many(&db.pool, &too_many).await.unwrap_err();
    assert!(error.to_string().contains("at most 10000 events"), "{error}");
    let exactly: Vec<NewEvent> = (0..10_000).map(numbered).collect();
    publish_many(&db.pool, &exactly).await.unwrap();
    assert_eq!(count(&db).await, 10_000);
}

#[tokio::test]
async fn limits_are_configurable_and_strict_mode_refuses_uncatalogued_types() {
    let db = TestDb::new().await;
    let small = Publisher::new().with_limits(Limits { max_data_bytes: 16, ..Limits::default() });
    let error = small.publish(&db.pool, &event("node.joined", "acme", json!({"long": "0123456789"}))).await;
    assert!(error.unwrap_err().to_string().contains("at most 16 bytes"));
    let strict = Publisher::new().strict(Catalog::control_plane());
    strict.publish(&db.pool, &event("reservation.active", "acme", json!({}))).await.unwrap();
    let error =
        strict.publish_many(&db.pool, &[numbered(0), event("billing.invoiced", "acme", json!({}))]).await.unwrap_err();
    assert!(error.to_string().contains("event 1: type must belong to the event catalog"), "{error}");
    publish(&db.pool, &event("billing.invoiced", "acme", json!({}))).await.unwrap();
    assert_eq!(count(&db).await, 2, "non-strict publishing accepts module families");
}

#[tokio::test]
async fn a_rolled_back_transaction_publishes_nothing() {
    let db = TestDb::new().await;
    let mut tx = db.pool.begin().await.unwrap();
    publish_many(&mut *tx, &[numbered(1), numbered(2)]).await.unwrap();
    tx.rollback().await.unwrap();
    publish(&db.pool, &numbered(3)).await.unwrap();
    let events = read_until(&db.pool, ReadRequest::all(), 1).await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].data, json!({"n": 3}));
    let page = read_page(&db.pool, &ReadRequest::all().after(events[0].sequence)).await.unwrap();
    assert!(page.events.is_empty() && !page.more);
}

#[tokio::test]
async fn the_catalogue_helper_passes_catalogued_types() {
    let db = TestDb::new().await;
    publish_many(
        &db.pool,
        &[event("reservation.active", "acme", json!({})), event("node.gpu.missing", "acme", json!({}))],
    )
    .await
    .unwrap();
    db.assert_all_catalogued(&Catalog::control_plane()).await;
}

#[tokio::test]
#[should_panic(expected = "published types missing from the event catalog: [\"billing.invoiced\"]")]
async fn the_catalogue_helper_names_uncatalogued_types() {
    let db = TestDb::new().await;
    publish_many(&db.pool, &[event("node.joined", "acme", json!({})), event("billing.invoiced", "acme", json!({}))])
        .await
        .unwrap();
    db.assert_all_catalogued(&Catalog::control_plane()).await;
}

#[tokio::test]
async fn a_nul_character_in_data_is_invalid_input_naming_the_event() {
    let db = TestDb::new().await;
    let error = publish_many(&db.pool, &[numbered(0), event("node.joined", "acme", json!({"s": "a\u{0}b"}))])
        .await
        .unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidInput);
    assert!(error.to_string().contains("event 1: data must not contain the NUL character"), "{error}");
    assert_eq!(count(&db).await, 0);
}
