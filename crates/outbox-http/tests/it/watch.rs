//! `GET /watch`: the stream's format, start, filter, heartbeats and endings (SPEC §5.4).

use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use outbox_core::Position;
use outbox_http::WatchOptions;
use tokio::time::Instant;

use crate::support::{SseItem, TestServer, event, events, numbers, within};

#[tokio::test]
async fn opens_with_every_header_and_retry_then_sends_event_blocks() {
    let server = TestServer::start().await;
    let mut stream = server.watch("?cursor=0:0", "acme:read", &[]).await;
    assert_eq!(stream.headers["content-type"], "text/event-stream");
    assert_eq!(stream.headers["cache-control"], "no-cache, no-transform");
    assert_eq!(stream.headers["x-accel-buffering"], "no");
    assert_eq!(stream.next().await, Some(SseItem::Retry(2000)));
    assert_eq!(stream.next().await, Some(SseItem::Comment(format!("keep-alive {}", Position::START))));

    server.publish(&events("reservation.active", "acme", 0, 3)).await;
    let Some(SseItem::Event { id, event: kind, data }) = stream.next().await else { panic!("an event block") };
    assert_eq!(kind, "reservation.active");
    let json: serde_json::Value = serde_json::from_str(&data).unwrap();
    assert_eq!(Some(json["sequence"].as_str().unwrap()), id.as_deref());
    let fields = ["id", "type", "tenantId", "subject", "time", "sequence", "data"];
    let at: Vec<usize> = fields.iter().map(|f| data.find(&format!("\"{f}\":")).expect("every field")).collect();
    assert!(at.windows(2).all(|pair| pair[0] < pair[1]), "the fields in the event shape's order: {data}");
    assert_eq!(numbers(&stream.events(2).await), [1, 2]);
}

#[tokio::test]
async fn without_a_position_the_stream_starts_at_the_head() {
    let server = TestServer::start().await;
    server.publish(&events("node.joined", "acme", 0, 5)).await;
    let mut stream = server.watch("", "acme:read", &[]).await;
    server.publish(&events("node.joined", "acme", 5, 2)).await;
    assert_eq!(numbers(&stream.events(2).await), [5, 6]);
}

#[tokio::test]
async fn last_event_id_wins_over_the_cursor_and_both_forms_work() {
    let server = TestServer::start().await;
    server.publish(&events("node.joined", "acme", 0, 10)).await;
    let history = server.get("/events", Some("acme:read")).await.events();
    let sixth = history[6].sequence;
    for last_event_id in [sixth.dotted(), sixth.colon()] {
        let headers = [("last-event-id", last_event_id)];
        let mut stream = server.watch(&format!("?cursor={}", history[1].sequence), "acme:read", &headers).await;
        assert_eq!(numbers(&stream.events(3).await), [7, 8, 9]);
    }
    let mut from_cursor = server.watch(&format!("?cursor={}", history[1].sequence.colon()), "acme:read", &[]).await;
    assert_eq!(numbers(&from_cursor.events(8).await), [2, 3, 4, 5, 6, 7, 8, 9]);
}

#[tokio::test]
async fn keep_alives_carry_the_position_which_advances_past_filtered_rows() {
    let options = WatchOptions { heartbeat_ms: 30, ..WatchOptions::default() };
    let server = TestServer::with_options(options).await;
    let mut stream = server.watch("?types=reservation.*&cursor=0.0", "acme:read", &[]).await;
    assert_eq!(stream.next().await, Some(SseItem::Retry(2000)));
    server.publish(&events("node.joined", "acme", 0, 5)).await;
    let newest = server.get("/events", Some("acme:read")).await.events().last().unwrap().sequence;
    // Keep-alives come every 30 ms; their position reaches the skipped rows' end.
    within("a keep-alive at the newest position", async {
        loop {
            match stream.next().await.expect("the stream stays open") {
                SseItem::Comment(comment) => {
                    let position = comment.strip_prefix("keep-alive ").expect("a keep-alive comment");
                    if Position::parse(position).unwrap() >= newest {
                        break;
                    }
                }
                other => panic!("only keep-alives expected, got {other:?}"),
            }
        }
    })
    .await;
    server.publish(&[event("reservation.active", "acme", 5)]).await;
    assert_eq!(numbers(&stream.events(1).await), [5]);
}

#[tokio::test]
async fn small_batches_deliver_everything_in_order() {
    let options = WatchOptions { batch: 2, ..WatchOptions::default() };
    let server = TestServer::with_options(options).await;
    server.publish(&events("node.joined", "acme", 0, 9)).await;
    let mut stream = server.watch("?cursor=0.0", "acme:read", &[]).await;
    assert_eq!(numbers(&stream.events(9).await), (0..9).collect::<Vec<_>>());
}

#[tokio::test]
async fn the_server_closes_the_stream_after_max_duration() {
    let options = WatchOptions { max_duration_ms: 300, ..WatchOptions::default() };
    let server = TestServer::with_options(options).await;
    server.publish(&events("node.joined", "acme", 0, 2)).await;
    let opened = Instant::now();
    let mut stream = server.watch("?cursor=0.0", "acme:read", &[]).await;
    let (events, error) = stream.rest().await;
    assert_eq!(events.len(), 2);
    assert_eq!(error, None, "a deliberate close is not an error");
    assert!(opened.elapsed() < Duration::from_secs(10), "closed after {:?}", opened.elapsed());
    server.wait_until("the stream is unregistered", || server.service.registry().is_empty()).await;
}

#[tokio::test]
async fn a_read_failure_sends_an_error_event_without_internals_and_closes() {
    let server = TestServer::start().await;
    let mut stream = server.watch("?cursor=0.0", "acme:read", &[]).await;
    server.publish(&events("node.joined", "acme", 0, 1)).await;
    assert_eq!(numbers(&stream.events(1).await), [0]);
    outbox_pg::sqlx::query("ALTER TABLE outbox RENAME TO outbox_moved").execute(server.pool()).await.unwrap();
    let (events, error) = stream.rest().await;
    assert!(events.is_empty());
    let error = error.expect("an error event");
    let message = error["message"].as_str().unwrap();
    assert!(error.get("code").is_none(), "{error}");
    assert!(!message.contains("outbox_moved") && !message.contains("relation"), "{message}");
}

#[tokio::test]
async fn shutdown_ends_open_streams_and_refuses_new_ones() {
    let server = TestServer::start().await;
    let mut stream = server.watch("?cursor=0.0", "acme:read", &[]).await;
    assert_eq!(stream.next().await, Some(SseItem::Retry(2000)));
    server.service.shutdown();
    assert_eq!(stream.rest().await, (vec![], None));
    server.get("/watch", Some("acme:read")).await.assert_refused(503, "UNAVAILABLE");
    // History still answers: shutdown ends streams only.
    assert_eq!(server.get("/events", Some("acme:read")).await.status, 200);
}

#[tokio::test]
async fn a_closed_connection_unregisters_its_stream() {
    let server = TestServer::start().await;
    let stream = server.watch("", "acme:read", &[]).await;
    let other = server.watch("", "acme:read", &[]).await;
    assert_eq!(server.service.registry().len(), 2);
    drop(stream);
    server.wait_until("the closed stream is unregistered", || server.service.registry().len() == 1).await;
    drop(other);
    server.wait_until("every stream is unregistered", || server.service.registry().is_empty()).await;
}

#[tokio::test]
async fn the_service_is_a_tower_service() {
    let server = TestServer::start().await;
    let mut service = server.service.clone();
    let request =
        Request::get("/event-types").header("authorization", "Bearer acme:read").body(Full::new(Bytes::new())).unwrap();
    let response = tower_service::Service::call(&mut service, request).await.unwrap();
    assert_eq!(response.status(), 200);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert!(body.starts_with(br#"{"items":["#));
}

#[tokio::test]
async fn a_stream_says_where_it_starts_at_once() {
    let server = TestServer::start().await;
    server.publish(&events("node.joined", "acme", 0, 3)).await;
    let newest = server.get("/events", Some("acme:read")).await.events().last().unwrap().sequence;
    for (query, at_least) in [("", newest), ("?cursor=0.0", Position::START)] {
        let mut stream = server.watch(query, "acme:read", &[]).await;
        assert_eq!(stream.next().await, Some(SseItem::Retry(2000)));
        match stream.next().await {
            Some(SseItem::Comment(comment)) => {
                let position = Position::parse(comment.strip_prefix("keep-alive ").unwrap()).unwrap();
                assert!(position >= at_least, "{query:?}: starts at {position}, before {at_least}");
                if query.is_empty() {
                    assert!(position >= newest, "from now starts at the head");
                } else {
                    assert_eq!(position, Position::START, "from a cursor starts at the cursor");
                }
            }
            other => panic!("{query:?}: a keep-alive right after retry expected, got {other:?}"),
        }
    }
}
