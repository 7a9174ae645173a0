//! Health, readiness, unknown routes and roles.

use outbox_e2e::client::{get, post, request};
use outbox_server::config::Roles;

use crate::support::{TestServer, config, database, token};

#[tokio::test]
async fn healthz_answers_ok_and_only_to_get() {
    let db = database().await;
    let server = TestServer::start(&db, config()).await;
    let reply = get(server.addr, "/healthz", None).await;
    assert_eq!((reply.status, reply.json()), (200, serde_json::json!({"status": "ok"})));
    let reply = post(server.addr, "/healthz", None, &serde_json::json!({})).await;
    assert_eq!((reply.status, reply.error_code().as_str()), (405, "METHOD_NOT_ALLOWED"));
    assert_eq!(reply.headers["allow"], "GET");
}

#[tokio::test]
async fn readyz_is_ready_on_a_current_database_and_unavailable_otherwise() {
    let db = database().await;
    let server = TestServer::start(&db, config()).await;
    let reply = get(server.addr, "/readyz", None).await;
    assert_eq!((reply.status, reply.json()["status"].as_str()), (200, Some("ready")));

    outbox_pg::sqlx::query("UPDATE compute_migrations SET checksum = '\\x00' WHERE name = 'core/0002_base'")
        .execute(&db.pool)
        .await
        .unwrap();
    let reply = get(server.addr, "/readyz", None).await;
    assert_eq!((reply.status, reply.error_code().as_str()), (503, "UNAVAILABLE"), "{}", reply.body);
    assert!(reply.body.contains("core/0002_base"), "{}", reply.body);

    outbox_pg::sqlx::query(
        "DELETE FROM compute_migrations WHERE name IN ('core/0002_base', 'server/0001_revocations')",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let reply = get(server.addr, "/readyz", None).await;
    assert_eq!(reply.status, 503);
    assert!(reply.body.contains("migrations pending: core/0002_base, server/0001_revocations"), "{}", reply.body);
}

#[tokio::test]
async fn readyz_is_unavailable_when_the_database_is_gone() {
    let db = database().await;
    let server = TestServer::start(&db, config()).await;
    db.pool.close().await;
    let reply = get(server.addr, "/readyz", None).await;
    assert_eq!((reply.status, reply.error_code().as_str()), (503, "UNAVAILABLE"), "{}", reply.body);
    assert_eq!(get(server.addr, "/healthz", None).await.status, 200, "liveness does not need the database");
}

#[tokio::test]
async fn unknown_paths_are_json_404() {
    let db = database().await;
    let server = TestServer::start(&db, config()).await;
    for path in ["/nope", "/events/x", "/admin/streams", "/console/nope.js"] {
        let reply = get(server.addr, path, None).await;
        assert_eq!((reply.status, reply.error_code().as_str()), (404, "NOT_FOUND"), "{path}: {}", reply.body);
    }
    let reply = request("GET", server.addr, "/admin/streams/close", None, "").await;
    assert_eq!((reply.status, reply.headers["allow"].to_str().unwrap()), (405, "POST"));
}

#[tokio::test]
async fn the_console_is_served_at_the_root_with_a_strict_policy() {
    let db = database().await;
    let server = TestServer::start(&db, config()).await;
    let page = get(server.addr, "/", None).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert_eq!(page.headers["content-type"], "text/html; charset=utf-8");
    assert_eq!(page.headers["content-security-policy"], outbox_http::console::CONTENT_SECURITY_POLICY);
    assert_eq!(page.headers["x-content-type-options"], "nosniff");
    assert_eq!(page.headers["referrer-policy"], "no-referrer");
    assert_eq!(page.headers["x-frame-options"], "DENY");
    for path in ["/console/console.js", "/console/watch-events.js", "/console/console.css", "/console/icon.svg"] {
        assert_eq!(get(server.addr, path, None).await.status, 200, "{path}");
    }
    let reply = request("POST", server.addr, "/", None, "").await;
    assert_eq!((reply.status, reply.headers["allow"].to_str().unwrap()), (405, "GET, HEAD"));
}

#[tokio::test]
async fn a_process_without_the_http_role_serves_only_health() {
    let db = database().await;
    let mut config = config();
    config.roles = Roles::parse("sinks,retention", "test").unwrap();
    let server = TestServer::start(&db, config).await;
    let admin = token("acme", "admin", None);
    assert_eq!(get(server.addr, "/healthz", None).await.status, 200);
    assert_eq!(get(server.addr, "/readyz", None).await.status, 200);
    assert_eq!(get(server.addr, "/events", Some(&admin)).await.status, 404);
    assert_eq!(get(server.addr, "/", None).await.status, 404, "the console comes with the http role");
    assert_eq!(post(server.addr, "/admin/streams/close", Some(&admin), &serde_json::json!({})).await.status, 404);
}

/// HTTP/2 with prior knowledge is served beside HTTP/1 on the same port.
#[tokio::test]
async fn http2_with_prior_knowledge_is_served() {
    use http_body_util::{BodyExt, Empty};
    let db = database().await;
    let server = TestServer::start(&db, config()).await;
    let stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .expect("an HTTP/2 handshake");
    tokio::spawn(connection);
    let request =
        http::Request::get(format!("http://{}/healthz", server.addr)).body(Empty::<bytes::Bytes>::new()).unwrap();
    let response = sender.send_request(request).await.expect("an HTTP/2 response");
    assert_eq!((response.status().as_u16(), response.version()), (200, http::Version::HTTP_2));
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&body).unwrap(), serde_json::json!({"status": "ok"}));
}

#[tokio::test]
async fn the_server_mounts_the_webhook_routes_behind_its_seal_key() {
    let db = database().await;
    let writer = token("acme", "webhooks:write", None);
    let body = serde_json::json!({"url": "http://127.0.0.1:9/hook", "types": ["node.*"]});

    let without = TestServer::start(&db, config()).await;
    let reply = post(without.addr, "/webhooks", Some(&writer), &body).await;
    assert_eq!((reply.status, reply.error_code().as_str()), (503, "UNAVAILABLE"), "{}", reply.body);
    assert!(reply.body.contains("OUTBOX_WEBHOOK_SEAL_KEY"), "{}", reply.body);
    drop(without);

    let mut sealed = config();
    sealed.webhooks.seal_key = Some(std::sync::Arc::new(crate::support::seal_key()));
    let server = TestServer::start(&db, sealed.clone()).await;
    let loopback = serde_json::json!({"url": "https://127.0.0.1:9/hook"});
    let reply = post(server.addr, "/webhooks", Some(&writer), &loopback).await;
    assert_eq!(reply.status, 400, "a loopback target without allow_private_targets: {}", reply.body);
    assert!(reply.body.contains("loopback"), "{}", reply.body);
    drop(server);

    sealed.allow_private_targets = true;
    let server = TestServer::start(&db, sealed).await;
    let reply = post(server.addr, "/webhooks", Some(&writer), &body).await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    let id = reply.json()["id"].as_str().unwrap().to_owned();
    let reply = get(server.addr, &format!("/webhooks/{id}"), Some(&writer)).await;
    assert_eq!((reply.status, reply.json()["types"].clone()), (200, serde_json::json!(["node.*"])));
    let reader = token("acme", "events:read", None);
    assert_eq!(get(server.addr, "/webhooks", Some(&reader)).await.status, 403, "events:read is not enough");
}
