//! The example host over real HTTP on loopback against a real PostgreSQL.

use std::time::{Duration, Instant};

use outbox_example_reservations::{App, migrator, serve};
use outbox_pg::testkit::TestDb;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One HTTP/1.1 request with `Connection: close`; returns the status and the body as JSON.
async fn request(port: u16, method: &str, path: &str, token: &str) -> (u16, Value) {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let text = String::from_utf8(response).unwrap();
    let status = text[9..12].parse().unwrap();
    let body = text.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    let body =
        if text.to_ascii_lowercase().contains("transfer-encoding: chunked") { dechunk(body) } else { body.to_owned() };
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        out.push_str(&rest[..size]);
        body = &rest[size + 2..];
    }
    out
}

async fn start() -> (TestDb, u16) {
    let db = TestDb::with_migrator(&migrator()).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(serve(App::new(db.pool.clone()), listener));
    (db, port)
}

/// Pages `/events` for `token` until `want` items arrived or 20 s passed (visibility follows the xmin rule).
async fn events(port: u16, token: &str, want: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut poll = tokio::time::interval(Duration::from_millis(20));
    loop {
        let (status, page) = request(port, "GET", "/events?limit=100", token).await;
        assert_eq!(status, 200, "{page}");
        let items = page["items"].as_array().cloned().unwrap_or_default();
        if items.len() >= want || Instant::now() > deadline {
            return items;
        }
        poll.tick().await;
    }
}

#[tokio::test]
async fn the_change_and_its_event_commit_together() {
    let (db, port) = start().await;
    let (status, body) = request(port, "POST", "/reservations/rsv_1/activate", "acme-token").await;
    assert_eq!((status, body["version"].as_i64()), (200, Some(1)), "{body}");
    let (status, body) = request(port, "POST", "/reservations/rsv_1/activate", "acme-token").await;
    assert_eq!((status, body["version"].as_i64()), (200, Some(2)), "{body}");

    let items = events(port, "acme-token", 2).await;
    let versions: Vec<i64> = items.iter().map(|e| e["data"]["version"].as_i64().unwrap()).collect();
    assert_eq!(versions, [1, 2]);
    assert_eq!(items[0]["type"], "reservation.active");
    assert_eq!(items[0]["subject"], "reservation/rsv_1");

    // An id the event's subject refuses fails the publish, so the change rolls back with it.
    let (status, body) = request(port, "POST", "/reservations/bad%20id/activate", "acme-token").await;
    assert_eq!(status, 400, "{body}");
    let rows: i64 =
        outbox_pg::sqlx::query_scalar("SELECT count(*) FROM example_reservations").fetch_one(&db.pool).await.unwrap();
    assert_eq!(rows, 1, "the refused event took its change with it");

    // Another tenant's token sees none of it; no token is refused.
    assert!(events(port, "globex-token", 0).await.is_empty());
    let (status, body) = request(port, "GET", "/events", "").await;
    assert_eq!(status, 401, "{body}");
}
