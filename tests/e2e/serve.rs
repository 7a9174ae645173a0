//! `outbox serve`: real processes on one database.

use std::time::Duration;

use outbox_e2e::client::{EventStream, Frame, get, post, watch};
use outbox_pg::testkit::TestDb;
use serde_json::json;

use crate::support::{issue_token, run, serve, server_migration_count, text};

fn access_denied(frame: &Frame) -> bool {
    frame.event.as_deref() == Some("error") && frame.data.as_deref().is_some_and(|d| d.contains("ACCESS_DENIED"))
}

async fn open(addr: std::net::SocketAddr, token: &str) -> EventStream {
    let mut stream = watch(addr, "/watch", Some(token)).await.unwrap_or_else(|reply| panic!("{reply:?}"));
    stream.until(Duration::from_secs(10), |frame| frame.retry.is_some()).await;
    stream
}

fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_migrates_answers_health_and_authenticates_callers() {
    let db = TestDb::empty().await;
    let config = std::env::temp_dir().join(format!("outbox-e2e-serve-{}.toml", std::process::id()));
    let api_key = "obx_e2e-key";
    let toml = format!(
        "[[auth.api_keys]]\nid = \"ci\"\nsha256 = \"{}\"\ntenant = \"acme\"\nscopes = [\"events:read\"]\n",
        sha256_hex(api_key)
    );
    std::fs::write(&config, toml).unwrap();
    let (_server, addr) = serve(&db.url, &["--config", config.to_str().unwrap()]);

    assert_eq!(get(addr, "/healthz", None).await.json(), json!({"status": "ok"}));
    let ready = get(addr, "/readyz", None).await;
    assert_eq!(ready.status, 200, "{}", ready.body);
    let migrations: i64 =
        sqlx::query_scalar("SELECT count(*) FROM compute_migrations").fetch_one(&db.pool).await.unwrap();
    assert_eq!(migrations, server_migration_count(), "core and server migrations applied");

    let token = issue_token(&["--tenant", "acme", "--scopes", "events:read"]);
    assert_eq!(get(addr, "/events", Some(&token)).await.status, 200, "token issue's token verifies");
    assert_eq!(get(addr, "/events", Some(api_key)).await.status, 200, "the API key is accepted");
    let output =
        run(&["token", "issue", "--tenant", "acme", "--scopes", "admin"], &[("OUTBOX_JWT_SECRET", &"x".repeat(40))]);
    let forged = text(&output).0.trim().to_owned();
    for (name, token) in [("no token", None), ("another secret", Some(forged.as_str())), ("garbage", Some("a.b.c"))] {
        let reply = get(addr, "/events", token).await;
        assert_eq!((reply.status, reply.error_code().as_str()), (401, "UNAUTHENTICATED"), "{name}: {}", reply.body);
    }
    let _ = std::fs::remove_file(config);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_closed_on_one_process_ends_its_stream_on_another_within_5_seconds() {
    let db = TestDb::empty().await;
    let (_a, a) = serve(&db.url, &[]);
    let (_b, b) = serve(&db.url, &[]);
    let admin = issue_token(&["--tenant", "acme", "--scopes", "admin"]);
    let user = issue_token(&["--tenant", "acme", "--scopes", "events:read", "--sid", "ses_e2e", "--sub", "usr_e2e"]);
    let mut stream = open(b, &user).await;

    let refused = post(a, "/admin/streams/close", Some(&admin), &json!({"tenantId": "acme", "reason": "x"})).await;
    assert_eq!((refused.status, refused.error_code().as_str()), (400, "INVALID_INPUT"), "a tenant alone is refused");

    let started = std::time::Instant::now();
    let reply =
        post(a, "/admin/streams/close", Some(&admin), &json!({"sessionId": "ses_e2e", "reason": "signed out"})).await;
    assert_eq!((reply.status, reply.json()), (200, json!({"closed": 0})), "the stream is served by the other process");
    let frame = stream.until(Duration::from_secs(5), access_denied).await;
    assert!(started.elapsed() < Duration::from_secs(5), "closed after {:?}", started.elapsed());
    assert_eq!(frame.json(), json!({"code": "ACCESS_DENIED", "message": "signed out"}));
    assert!(stream.ends_within(Duration::from_secs(5)).await, "the stream ends after the error");

    for addr in [a, b] {
        let reply = get(addr, "/events", Some(&user)).await;
        assert_eq!(reply.status, 401, "{}", reply.body);
        assert!(reply.body.contains("token revoked"), "{}", reply.body);
    }
    let other = issue_token(&["--tenant", "acme", "--scopes", "events:read", "--sid", "ses_other"]);
    assert_eq!(get(b, "/events", Some(&other)).await.status, 200, "other sessions are untouched");
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_and_sigint_with_an_open_stream_exit_0() {
    let db = TestDb::empty().await;
    for signal in ["TERM", "INT"] {
        let (mut server, addr) = serve(&db.url, &[]);
        let token = issue_token(&["--tenant", "acme", "--scopes", "events:read"]);
        let mut stream = open(addr, &token).await;
        let status = server.signal_and_wait(signal, Duration::from_secs(15));
        assert!(status.success(), "SIG{signal} with an open stream exits 0 ({status})");
        assert!(stream.ends_within(Duration::from_secs(2)).await, "the stream was ended");
        assert!(tokio::net::TcpStream::connect(addr).await.is_err(), "nothing listens any more");
    }
}
