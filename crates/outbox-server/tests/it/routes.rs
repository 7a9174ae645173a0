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
    for path in ["/", "/nope", "/events/x", "/admin/streams"] {
        let reply = get(server.addr, path, None).await;
        assert_eq!((reply.status, reply.error_code().as_str()), (404, "NOT_FOUND"), "{path}: {}", reply.body);
    }
    let reply = request("GET", server.addr, "/admin/streams/close", None, "").await;
    assert_eq!((reply.status, reply.headers["allow"].to_str().unwrap()), (405, "POST"));
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
    assert_eq!(post(server.addr, "/admin/streams/close", Some(&admin), &serde_json::json!({})).await.status, 404);
}
