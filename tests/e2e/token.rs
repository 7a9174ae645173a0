//! `outbox token issue`.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::support::{SECRET, issue_token, run, text};

fn claims(token: &str) -> serde_json::Value {
    let payload = token.split('.').nth(1).expect("three parts");
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap()
}

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

#[test]
fn token_issue_prints_a_jwt_with_the_claims() {
    let token = issue_token(&[
        "--tenant",
        "acme",
        "--scopes",
        "events:read  admin",
        "--ttl",
        "2h",
        "--sub",
        "usr_1",
        "--sid",
        "ses_1",
    ]);
    let claims = claims(&token);
    assert_eq!(claims["tenant_id"], "acme");
    assert_eq!(claims["scope"], "events:read admin");
    assert_eq!((claims["sub"].as_str(), claims["sid"].as_str()), (Some("usr_1"), Some("ses_1")));
    let exp = claims["exp"].as_i64().unwrap();
    assert!((exp - now() - 7200).abs() < 30, "exp {exp} is two hours away");
    let header: serde_json::Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(token.split('.').next().unwrap()).unwrap()).unwrap();
    assert_eq!(header["alg"], "HS256");
    // That the server accepts it is checked in serve.rs.
    let default_ttl = claims_of_default();
    assert!((default_ttl - now() - 3600).abs() < 30, "the default lifetime is 1h");
}

fn claims_of_default() -> i64 {
    claims(&issue_token(&["--tenant", "acme", "--scopes", "events:read"]))["exp"].as_i64().unwrap()
}

#[test]
fn token_issue_without_a_secret_names_the_key() {
    let output = run(&["token", "issue", "--tenant", "acme", "--scopes", "admin"], &[]);
    let (_, err) = text(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.contains("auth.jwt_secret") && err.contains("OUTBOX_JWT_SECRET"), "{err}");
}

#[test]
fn token_issue_refuses_bad_input() {
    for (args, fragment) in [
        (["--tenant", "a b", "--scopes", "admin", "--ttl", "1h"], "--tenant"),
        (["--tenant", "acme", "--scopes", "everything", "--ttl", "1h"], "everything"),
        (["--tenant", "acme", "--scopes", "admin", "--ttl", "1y"], "--ttl"),
    ] {
        let mut all = vec!["token", "issue"];
        all.extend_from_slice(&args);
        let output = run(&all, &[("OUTBOX_JWT_SECRET", SECRET)]);
        let (_, err) = text(&output);
        assert!(!output.status.success() && err.contains(fragment), "{args:?}: {err}");
    }
}
