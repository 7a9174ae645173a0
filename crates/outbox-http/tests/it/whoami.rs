//! `GET /whoami`: the caller's grant, for any valid token, over real HTTP.

use bytes::Bytes;
use http::Method;
use serde_json::json;

use crate::support::TestServer;

#[tokio::test]
async fn any_valid_token_learns_its_grant() {
    let server = TestServer::start().await;
    let tenant = server.get("/whoami", Some("acme:read+hooks")).await;
    assert_eq!(tenant.status, 200);
    let expected = json!({"tenantId": "acme", "scopes": ["events:read", "webhooks:write"], "admin": false, "identityId": "user-acme"});
    assert_eq!(tenant.json(), expected, "the scopes sorted, no expiresAt for a credential without expiry");

    let admin = server.get("/whoami", Some("ops:admin")).await;
    assert_eq!(admin.json()["admin"], true);
    let none = server.get("/whoami", Some("acme:none")).await;
    assert_eq!(none.json()["scopes"], json!([]), "no scope is needed");

    server.get("/whoami", None).await.assert_refused(401, "UNAUTHENTICATED");
    server.get("/whoami", Some("not a token")).await.assert_refused(401, "UNAUTHENTICATED");
    server.get("/whoami?tenantId=globex", Some("acme:read")).await.assert_refused(400, "INVALID_INPUT");
    let post = server.send(Method::POST, "/whoami", &[], Bytes::new()).await;
    post.assert_refused(405, "METHOD_NOT_ALLOWED");
    assert_eq!(post.headers.get("allow").unwrap(), "GET");
}
