//! Every refusal is the JSON error of SPEC §5.1 with its code and status.

use bytes::Bytes;
use http::Method;

use crate::support::{Reply, SseItem, TestServer};

const READER: Option<&str> = Some("acme:read");

async fn watch(server: &TestServer, query: &str, headers: &[(&str, String)]) -> Reply {
    let mut all = vec![("authorization", "Bearer acme:read".to_owned())];
    all.extend(headers.iter().cloned());
    server.send(Method::GET, &format!("/watch{query}"), &all, Bytes::new()).await
}

/// Asserts that `/watch<query>` with `Last-Event-ID: <last_event_id>` is refused with `status` and `code`.
async fn check(server: &TestServer, query: &str, last_event_id: Option<&str>, status: u16, code: &str) {
    let headers: Vec<(&str, String)> = last_event_id.map(|id| ("last-event-id", id.to_owned())).into_iter().collect();
    let reply = watch(server, query, &headers).await;
    assert_eq!((reply.status.as_u16(), reply.error_code()), (status, code.to_owned()), "{query} {last_event_id:?}");
    assert_eq!(reply.headers["content-type"], "application/json");
    assert!(!reply.json()["error"]["message"].as_str().unwrap().is_empty(), "{query}: a message");
}

#[tokio::test]
async fn watch_refuses_before_the_stream_starts() {
    let server = TestServer::start().await;
    let s = &server;
    check(s, "?cursor=12", None, 400, "INVALID_INPUT").await;
    check(s, "?cursor=1.2.3", None, 400, "INVALID_INPUT").await;
    check(s, "?cursor=18446744073709551616.1", None, 400, "INVALID_INPUT").await;
    check(s, "", Some("abc"), 400, "INVALID_INPUT").await;
    check(s, "?cursor=1.2", Some("1.x"), 400, "INVALID_INPUT").await;
    check(s, &format!("?types={}", vec!["node.*"; 21].join(",")), None, 400, "INVALID_INPUT").await;
    check(s, &format!("?types={}", "a".repeat(129)), None, 400, "INVALID_INPUT").await;
    check(s, "?types=", None, 400, "INVALID_INPUT").await;
    check(s, "?types=node.*,,pool.*", None, 400, "INVALID_INPUT").await;
    check(s, "?types=Node.*", None, 400, "INVALID_INPUT").await;
    check(s, "?tenant=acme", None, 400, "INVALID_INPUT").await;
    check(s, "?tenantId=globex", None, 403, "ACCESS_DENIED").await;
}

#[tokio::test]
async fn twenty_patterns_and_a_128_character_one_are_accepted() {
    let server = TestServer::start().await;
    let nineteen = vec!["node.*"; 19].join(",");
    let longest = "a".repeat(128);
    let mut stream = server.watch(&format!("?types={nineteen},{longest}"), "acme:read", &[]).await;
    assert_eq!(stream.next().await, Some(SseItem::Retry(2000)));
}

#[tokio::test]
async fn other_methods_are_405_with_allow() {
    let server = TestServer::start().await;
    let token = vec![("authorization", "Bearer acme:read".to_owned())];
    let cases = [
        (Method::POST, "/watch", "GET"),
        (Method::PUT, "/watch", "GET"),
        (Method::DELETE, "/watch", "GET"),
        (Method::HEAD, "/watch", "GET"),
        (Method::PUT, "/events", "GET, POST"),
        (Method::DELETE, "/events", "GET, POST"),
        (Method::POST, "/event-types", "GET"),
    ];
    for (method, path, allow) in cases {
        let reply = server.send(method.clone(), path, &token, Bytes::new()).await;
        assert_eq!(reply.status, 405, "{method} {path}");
        assert_eq!(reply.headers["allow"], allow, "{method} {path}");
        if method != Method::HEAD {
            reply.assert_refused(405, "METHOD_NOT_ALLOWED");
        }
    }
}

#[tokio::test]
async fn unknown_paths_are_404() {
    let server = TestServer::start().await;
    for path in ["/", "/events/", "/watch/x", "/admin/streams/close"] {
        server.get(path, READER).await.assert_refused(404, "NOT_FOUND");
    }
    assert!(outbox_http::OutboxService::serves("/watch"));
    assert!(!outbox_http::OutboxService::serves("/healthz"));
}

#[tokio::test]
async fn a_missing_or_bad_token_is_401_on_every_route() {
    let server = TestServer::start().await;
    for token in [None, Some("nobody"), Some("acme:superuser"), Some("")] {
        for path in ["/events", "/watch", "/event-types"] {
            server.get(path, token).await.assert_refused(401, "UNAUTHENTICATED");
        }
        let body = serde_json::json!({"type": "node.joined", "tenantId": "acme", "subject": "node/n1", "data": {}});
        server.post("/events", token, &body).await.assert_refused(401, "UNAUTHENTICATED");
    }
}

#[tokio::test]
async fn a_grant_without_the_scope_is_403() {
    let server = TestServer::start().await;
    for path in ["/events", "/watch", "/event-types"] {
        server.get(path, Some("acme:none")).await.assert_refused(403, "ACCESS_DENIED");
    }
    let body = serde_json::json!({"type": "node.joined", "tenantId": "acme", "subject": "node/n1", "data": {}});
    server.post("/events", READER, &body).await.assert_refused(403, "ACCESS_DENIED");
}

#[tokio::test]
async fn history_refuses_bad_parameters() {
    let server = TestServer::start().await;
    let many = vec!["node.*"; 21].join(",");
    let cases = [
        "?limit=0".to_owned(),
        "?limit=1001".to_owned(),
        "?limit=ten".to_owned(),
        "?subject=node/n1&limit=201".to_owned(),
        "?cursor=abc".to_owned(),
        "?cursor=1:2:3".to_owned(),
        format!("?types={many}"),
        "?types=".to_owned(),
        "?type=.".to_owned(),
        "?types=node.*&type=node.".to_owned(),
        "?limit=5&limit=6".to_owned(),
        "?since=1.2".to_owned(),
    ];
    for query in cases {
        let reply = server.get(&format!("/events{query}"), READER).await;
        reply.assert_refused(400, "INVALID_INPUT");
    }
    assert_eq!(server.get("/events?subject=node/n1&limit=200", READER).await.status, 200);
    assert_eq!(server.get("/events?limit=1000", READER).await.status, 200);
}

/// `subject` and `tenantId` follow their rules (SPEC §3.2) on every route that takes them,
/// refused with 400 naming the parameter before the database sees them (PostgreSQL refuses
/// text holding NUL).
#[tokio::test]
async fn subject_and_tenant_parameters_follow_their_rules() {
    let server = TestServer::start().await;
    let admin = Some("ops:admin");
    for (path, token, parameter) in [
        ("/events?subject=node%2Fn%001", READER, "subject"),
        ("/events?subject=", READER, "subject"),
        ("/events?subject=node", READER, "subject"),
        ("/events?subject=Node%2Fn1", READER, "subject"),
        ("/events?tenantId=ac%00me", admin, "tenantId"),
        ("/events?tenantId=a%20b", admin, "tenantId"),
        ("/watch?tenantId=ac%00me", admin, "tenantId"),
        ("/watch?tenantId=", admin, "tenantId"),
    ] {
        let reply = server.get(path, token).await;
        reply.assert_refused(400, "INVALID_INPUT");
        let message = reply.json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(message.starts_with(&format!("{parameter} must")), "{path}: {message}");
    }
    assert_eq!(server.get("/events?subject=node%2Fn1", READER).await.status, 200);
}
