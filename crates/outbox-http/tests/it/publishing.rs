//! `POST /events`: one event or a batch, in one transaction.

use bytes::Bytes;
use http::Method;
use serde_json::{Value, json};

use crate::support::{TestServer, numbers};

const WRITER: Option<&str> = Some("acme:write+read");

fn new_event(tenant: &str, n: usize) -> Value {
    json!({"type": "node.joined", "tenantId": tenant, "subject": "node/n1", "data": {"n": n}})
}

async fn stored(server: &TestServer) -> i64 {
    outbox_pg::sqlx::query_scalar("SELECT count(*) FROM outbox").fetch_one(server.pool()).await.unwrap()
}

#[tokio::test]
async fn publishes_one_event_and_a_batch_with_ids_in_order() {
    let server = TestServer::start().await;
    let one = server.post("/events", WRITER, &new_event("acme", 0)).await;
    assert_eq!(one.status, 201, "{}", String::from_utf8_lossy(&one.body));
    let ids = one.json()["ids"].as_array().unwrap().clone();
    assert_eq!(ids.len(), 1);
    assert!(ids[0].as_str().unwrap().starts_with("evt_"));

    let batch = json!({"events": (1..=3).map(|n| new_event("acme", n)).collect::<Vec<_>>()});
    let reply = server.post("/events", WRITER, &batch).await;
    assert_eq!(reply.status, 201);
    let batch_ids = reply.json()["ids"].as_array().unwrap().clone();
    assert_eq!(batch_ids.len(), 3);

    server.settle().await;
    let page = server.get("/events", WRITER).await;
    assert_eq!(numbers(&page.events()), [0, 1, 2, 3]);
    let read_ids: Vec<Value> = page.events().iter().map(|e| json!(e.id)).collect();
    assert_eq!(read_ids, [ids, batch_ids].concat(), "ids in input order");
}

#[tokio::test]
async fn one_bad_event_refuses_the_whole_batch_naming_index_field_and_rule() {
    let server = TestServer::start().await;
    let mut bad = new_event("acme", 2);
    bad["type"] = json!("Not A Type");
    let batch = json!({"events": [new_event("acme", 0), new_event("acme", 1), bad]});
    let reply = server.post("/events", WRITER, &batch).await;
    reply.assert_refused(400, "INVALID_INPUT");
    let message = reply.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(message.contains("event 2") && message.contains("type") && message.contains("must match"), "{message}");

    let missing = json!({"events": [new_event("acme", 0), {"type": "node.joined", "tenantId": "acme"}]});
    let reply = server.post("/events", WRITER, &missing).await;
    reply.assert_refused(400, "INVALID_INPUT");
    assert!(reply.json()["error"]["message"].as_str().unwrap().starts_with("event 1:"));

    let not_an_object = json!({"type": "node.joined", "tenantId": "acme", "subject": "node/n1", "data": [1]});
    server.post("/events", WRITER, &not_an_object).await.assert_refused(400, "INVALID_INPUT");
    assert_eq!(stored(&server).await, 0, "nothing was written");
}

#[tokio::test]
async fn a_writer_publishes_only_for_its_own_tenant_an_admin_for_any() {
    let server = TestServer::start().await;
    let batch = json!({"events": [new_event("acme", 0), new_event("globex", 1)]});
    let reply = server.post("/events", WRITER, &batch).await;
    reply.assert_refused(403, "ACCESS_DENIED");
    assert!(reply.json()["error"]["message"].as_str().unwrap().starts_with("event 1:"));
    assert_eq!(stored(&server).await, 0);

    let reply = server.post("/events", Some("ops:admin"), &batch).await;
    assert_eq!(reply.status, 201);
    assert_eq!(stored(&server).await, 2);
}

#[tokio::test]
async fn bodies_over_the_limit_are_413() {
    let server = TestServer::with(|service| service.with_body_limit(1_024)).await;
    let big = json!({"events": (0..40).map(|n| new_event("acme", n)).collect::<Vec<_>>()});
    server.post("/events", WRITER, &big).await.assert_refused(413, "PAYLOAD_TOO_LARGE");
    assert_eq!(server.post("/events", WRITER, &new_event("acme", 0)).await.status, 201);
}

#[tokio::test]
async fn the_default_limit_is_16_mib() {
    let server = TestServer::start().await;
    let padding = "x".repeat(16 * 1024 * 1024 + 1);
    let headers = vec![("authorization", "Bearer acme:write".to_owned())];
    let reply = server.send(Method::POST, "/events", &headers, Bytes::from(padding)).await;
    reply.assert_refused(413, "PAYLOAD_TOO_LARGE");
}

#[tokio::test]
async fn an_empty_batch_writes_nothing() {
    let server = TestServer::start().await;
    let reply = server.post("/events", WRITER, &json!({"events": []})).await;
    assert_eq!(reply.status, 201);
    assert_eq!(reply.json(), json!({"ids": []}));
    assert_eq!(stored(&server).await, 0);
}
