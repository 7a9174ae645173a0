//! Authentication through the real router: JWTs and API keys on an outbox route.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use outbox_e2e::client::get;

use crate::support::{API_KEY, SECRET, TestServer, config, database, token};

pub(crate) fn hs256(secret: &str, claims: &serde_json::Value) -> String {
    let key = jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()).unwrap();
    let header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    jsonwebtoken::encode(&header, claims, &key).unwrap()
}

pub(crate) fn now() -> i64 {
    jsonwebtoken::get_current_timestamp() as i64
}

#[tokio::test]
async fn jwts_and_api_keys_are_accepted_and_bad_tokens_refused() {
    let db = database().await;
    let server = TestServer::start(&db, config()).await;
    let status = |reply: outbox_e2e::client::Reply| (reply.status, reply.body);

    let good = token("acme", "events:read", None);
    assert_eq!(status(get(server.addr, "/events", Some(&good)).await).0, 200);
    assert_eq!(status(get(server.addr, "/events", Some(API_KEY)).await).0, 200);

    let expired = hs256(SECRET, &serde_json::json!({"tenant_id": "acme", "scope": "events:read", "exp": now() - 3600}));
    let wrong = hs256(&"w".repeat(40), &serde_json::json!({"tenant_id": "acme", "exp": now() + 600}));
    let unsigned = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT"}"#),
        URL_SAFE_NO_PAD.encode(format!(r#"{{"tenant_id":"acme","scope":"admin","exp":{}}}"#, now() + 600))
    );
    for (name, token) in [
        ("expired", Some(expired.as_str())),
        ("wrong signature", Some(&wrong)),
        ("alg none", Some(&unsigned)),
        ("none", None),
        ("api key typo", Some("obx_it-api-keY")),
    ] {
        let reply = get(server.addr, "/events", token).await;
        assert_eq!((reply.status, reply.error_code().as_str()), (401, "UNAUTHENTICATED"), "{name}: {}", reply.body);
    }
    let reply = get(server.addr, "/events", Some(&expired)).await;
    assert!(reply.body.contains("token expired"), "{}", reply.body);
}
