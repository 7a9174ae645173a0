//! `GET /whoami` of the real server: the grant of any valid token, its expiry from the
//! token's `exp`; an expired or forged token is refused.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use outbox_e2e::client::get;
use outbox_pg::testkit::TestDb;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::support::{SECRET, issue_token, serve};

/// An HS256 JWT of `claims` signed with `secret` (HMAC-SHA256, RFC 2104, written out).
fn sign(claims: &serde_json::Value, secret: &[u8]) -> String {
    let header = URL_SAFE_NO_PAD.encode(r#"{"alg":"HS256","typ":"JWT"}"#);
    let input = format!("{header}.{}", URL_SAFE_NO_PAD.encode(claims.to_string()));
    let mut key = [0u8; 64];
    key[..secret.len()].copy_from_slice(secret);
    let pad = |byte: u8| key.iter().map(|k| k ^ byte).collect::<Vec<u8>>();
    let inner = Sha256::new().chain_update(pad(0x36)).chain_update(input.as_bytes()).finalize();
    let mac = Sha256::new().chain_update(pad(0x5c)).chain_update(inner).finalize();
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(mac))
}

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

#[tokio::test(flavor = "multi_thread")]
async fn whoami_answers_the_grant_of_any_valid_token() {
    let db = TestDb::new().await;
    let (_server, addr) = serve(&db.url, &[]);

    let tenant = issue_token(&["--tenant", "acme", "--scopes", "webhooks:write events:read", "--sub", "usr_1"]);
    let reply = get(addr, "/whoami", Some(&tenant)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let grant = reply.json();
    assert_eq!(
        (&grant["tenantId"], &grant["scopes"], &grant["admin"], &grant["identityId"]),
        (&json!("acme"), &json!(["events:read", "webhooks:write"]), &json!(false), &json!("usr_1"))
    );
    let expires = time::OffsetDateTime::parse(
        grant["expiresAt"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    assert!((expires.unix_timestamp() - now() - 3600).abs() < 60, "the token's exp: {grant}");

    let admin = issue_token(&["--tenant", "ops", "--scopes", "admin"]);
    let grant = get(addr, "/whoami", Some(&admin)).await.json();
    assert_eq!((&grant["tenantId"], &grant["admin"]), (&json!("ops"), &json!(true)));

    let claims = |exp: i64| json!({ "tenant_id": "acme", "scope": "events:read", "exp": exp });
    let fresh = sign(&claims(now() + 600), SECRET.as_bytes());
    assert_eq!(get(addr, "/whoami", Some(&fresh)).await.status, 200, "the signature as the server checks it");
    let expired = sign(&claims(now() - 3600), SECRET.as_bytes());
    let forged = sign(&claims(now() + 600), b"another-secret");
    for token in [Some(expired.as_str()), Some(forged.as_str()), Some("not-a-token"), None] {
        let reply = get(addr, "/whoami", token).await;
        assert_eq!((reply.status, reply.error_code().as_str()), (401, "UNAUTHENTICATED"), "{token:?}: {}", reply.body);
    }
}
