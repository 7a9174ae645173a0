//! `POST /admin/streams/close`: refusals, closing here, and closing in another process.

use std::time::Duration;

use outbox_e2e::client::{EventStream, Frame, get, post, request, watch};
use serde_json::json;

use crate::auth::{hs256, now};
use crate::support::{SECRET, TestServer, config, database, token};

fn access_denied(frame: &Frame) -> bool {
    frame.event.as_deref() == Some("error") && frame.data.as_deref().is_some_and(|d| d.contains("ACCESS_DENIED"))
}

async fn open(server: &TestServer, token: &str) -> EventStream {
    let stream = watch(server.addr, "/watch", Some(token)).await.unwrap_or_else(|reply| panic!("{reply:?}"));
    // Wait until the stream is registered: its opening `retry:` is written after that.
    let mut stream = stream;
    stream.until(Duration::from_secs(5), |frame| frame.retry.is_some()).await;
    stream
}

#[tokio::test]
async fn closing_needs_an_admin_and_exactly_one_selector() {
    let db = database().await;
    let server = TestServer::start(&db, config()).await;
    let admin = token("acme", "admin", None);
    let reader = token("acme", "events:read events:write", None);
    let close = |token: Option<&str>, body: serde_json::Value| {
        let token = token.map(str::to_owned);
        let addr = server.addr;
        async move { post(addr, "/admin/streams/close", token.as_deref(), &body).await }
    };
    assert_eq!(close(None, json!({"sessionId": "s"})).await.status, 401);
    assert_eq!(close(Some(&reader), json!({"sessionId": "s"})).await.error_code(), "ACCESS_DENIED");
    for body in [
        json!({"tenantId": "acme"}),
        json!({"tenantId": "acme", "anyAgent": false}),
        json!({}),
        json!({"sessionId": "s", "agentId": "a"}),
        json!({"sessionId": "s", "sessionid": "typo"}),
        json!({"sessionId": 7}),
        json!({"sessionId": "s", "reason": "r".repeat(1025)}),
    ] {
        let reply = close(Some(&admin), body.clone()).await;
        assert_eq!((reply.status, reply.error_code().as_str()), (400, "INVALID_INPUT"), "{body}: {}", reply.body);
    }
    let reply = request("POST", server.addr, "/admin/streams/close", Some(&admin), "not json").await;
    assert_eq!(reply.status, 400);
    let reply = close(Some(&admin), json!({"tenantId": "acme", "anyAgent": true})).await;
    assert_eq!((reply.status, reply.json()), (200, json!({"closed": 0})));
    let rows: i64 =
        outbox_pg::sqlx::query_scalar("SELECT count(*) FROM outbox_revocations").fetch_one(&db.pool).await.unwrap();
    assert_eq!(rows, 1, "refusals record nothing");
}

#[tokio::test]
async fn closing_a_session_ends_its_stream_here_and_refuses_its_token() {
    let db = database().await;
    let server = TestServer::start(&db, config()).await;
    let admin = token("acme", "admin", None);
    let user = token("acme", "events:read", Some("ses_here"));
    let other = token("acme", "events:read", Some("ses_other"));
    let mut stream = open(&server, &user).await;
    let mut untouched = open(&server, &other).await;

    let reply = post(
        server.addr,
        "/admin/streams/close",
        Some(&admin),
        &json!({"sessionId": "ses_here", "reason": "signed out"}),
    )
    .await;
    assert_eq!((reply.status, reply.json()), (200, json!({"closed": 1})));
    let frame = stream.until(Duration::from_secs(5), access_denied).await;
    assert_eq!(frame.json(), json!({"code": "ACCESS_DENIED", "message": "signed out"}));
    assert!(stream.ends_within(Duration::from_secs(5)).await, "the revoked stream ends");
    assert!(untouched.next(Duration::from_millis(300)).await.is_none_or(|f| !access_denied(&f)));

    let reply = get(server.addr, "/events", Some(&user)).await;
    assert_eq!(reply.status, 401);
    assert!(reply.body.contains("token revoked"), "{}", reply.body);
    assert_eq!(get(server.addr, "/events", Some(&other)).await.status, 200);
    let recorded: (String, String, String) =
        outbox_pg::sqlx::query_as("SELECT kind, value, reason FROM outbox_revocations")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(recorded, ("session".into(), "ses_here".into(), "signed out".into()));
}

#[tokio::test]
async fn a_session_closed_on_one_server_ends_its_stream_on_another_within_5_seconds() {
    let db = database().await;
    let a = TestServer::start(&db, config()).await;
    let b = TestServer::start(&db, config()).await;
    let admin = token("acme", "admin", None);
    let user = token("acme", "events:read", Some("ses_far"));
    let mut stream = open(&b, &user).await;

    let reply =
        post(a.addr, "/admin/streams/close", Some(&admin), &json!({"sessionId": "ses_far", "reason": "stolen"})).await;
    assert_eq!(reply.json(), json!({"closed": 0}), "the stream is not on this server");
    let started = std::time::Instant::now();
    let frame = stream.until(Duration::from_secs(5), access_denied).await;
    assert_eq!(frame.json()["message"], "stolen");
    assert!(started.elapsed() < Duration::from_secs(5));
    let reply = get(b.addr, "/events", Some(&user)).await;
    assert_eq!((reply.status, reply.body.contains("token revoked")), (401, true), "{}", reply.body);
}

#[tokio::test]
async fn an_agent_closed_on_one_server_ends_its_streams_everywhere_without_refusing_later_tokens() {
    let db = database().await;
    let a = TestServer::start(&db, config()).await;
    let b = TestServer::start(&db, config()).await;
    let admin = token("acme", "admin", None);
    let agent =
        hs256(SECRET, &json!({"tenant_id": "acme", "scope": "events:read", "agent_id": "agt_1", "exp": now() + 600}));
    let person = token("acme", "events:read", None);
    let mut agent_stream = open(&b, &agent).await;
    let mut person_stream = open(&b, &person).await;

    let reply =
        post(a.addr, "/admin/streams/close", Some(&admin), &json!({"tenantId": "acme", "anyAgent": true})).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let frame = agent_stream.until(Duration::from_secs(5), access_denied).await;
    assert_eq!(frame.json()["message"], "closed by an administrator");
    assert!(person_stream.next(Duration::from_millis(1500)).await.is_none_or(|f| !access_denied(&f)));
    assert_eq!(get(b.addr, "/events", Some(&agent)).await.status, 200, "closing streams is not revoking the agent");
}

#[tokio::test]
async fn shutdown_ends_open_streams_and_returns() {
    let db = database().await;
    let server = TestServer::start(&db, config()).await;
    let mut stream = open(&server, &token("acme", "events:read", None)).await;
    let took = server.stop().await;
    assert!(took < Duration::from_secs(5), "graceful shutdown with an open stream took {took:?}");
    assert!(stream.ends_within(Duration::from_secs(2)).await);
}
