//! `Client::watch` against the real server: reconnects, refusals, dropping.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use outbox_client::{Error, WatchQuery};
use outbox_core::{Event, Position};
use serde_json::json;

use crate::support::{
    Proxy, Publisher, TestServer, client, database, eventually, node_event, publish, token, until_visible,
};

const WITHIN: Duration = Duration::from_secs(30);

fn from_start() -> WatchQuery {
    WatchQuery {
        last_event_id: Some(Position::START),
        max_backoff: Duration::from_millis(200),
        ..WatchQuery::default()
    }
}

/// Collects what a stream yields in the background; the first error ends it.
fn collect(mut events: outbox_client::Events) -> (Arc<Mutex<Vec<Event>>>, tokio::task::JoinHandle<Option<Error>>) {
    let received = Arc::new(Mutex::new(Vec::new()));
    let sink = received.clone();
    let task = tokio::spawn(async move {
        while let Some(item) = events.next().await {
            match item {
                Ok(event) => sink.lock().unwrap().push(event),
                Err(error) => return Some(error),
            }
        }
        None
    });
    (received, task)
}

fn ids(events: &[Event]) -> Vec<String> {
    events.iter().map(|event| event.id.clone()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn twenty_forced_disconnects_lose_and_repeat_nothing() {
    let db = database().await;
    let mut server = TestServer::start(&db.pool).await;
    let proxy = Proxy::start(server.addr).await;
    let watcher = client(&proxy.url(), &token("acme", "events:read", None));
    let (received, task) = collect(watcher.watch(from_start()).await.unwrap());
    let publisher = Publisher::start(db.pool.clone(), Duration::from_millis(5));

    for round in 0..20 {
        let seen = received.lock().unwrap().len();
        eventually(WITHIN, "events arriving between disconnects", || received.lock().unwrap().len() >= seen + 3).await;
        if round % 2 == 0 {
            assert!(proxy.cut() >= 1, "round {round}: the stream's connection was open and is cut");
        } else {
            server.stop().await;
            server = TestServer::start(&db.pool).await;
            proxy.set_upstream(server.addr);
        }
    }
    let published = publisher.stop().await;
    eventually(WITHIN, "every published event after the last disconnect", || {
        received.lock().unwrap().len() >= published.len()
    })
    .await;

    let received = received.lock().unwrap().clone();
    assert_eq!(ids(&received), published, "every acme event once, in order, no other tenant's");
    assert!(received.windows(2).all(|pair| pair[0].sequence < pair[1].sequence));
    let watches = proxy.requests("GET /watch");
    assert!(watches > 20, "each disconnect was followed by a reconnect: {watches} requests for 20 disconnects");
    assert!(!task.is_finished(), "the stream is still following");
    task.abort();
}

#[tokio::test(flavor = "multi_thread")]
async fn unauthenticated_and_access_denied_refuse_the_watch_after_one_request() {
    let db = database().await;
    let server = TestServer::start(&db.pool).await;
    let cases = [
        ("a bad token", "not-a-token".to_owned(), None, "unauthenticated"),
        ("no events:read", token("acme", "events:write", None), None, "access denied"),
        ("another tenant", token("acme", "events:read", None), Some("globex"), "access denied"),
    ];
    for (name, token, tenant, expect) in cases {
        let proxy = Proxy::start(server.addr).await;
        let query = WatchQuery { tenant_id: tenant.map(Into::into), ..from_start() };
        let error = client(&proxy.url(), &token).watch(query).await.expect_err("a refusal");
        assert!(error.to_string().starts_with(expect), "{name}: {error}");
        let typed = matches!(
            (&error, expect),
            (Error::Unauthenticated { .. }, "unauthenticated") | (Error::AccessDenied { .. }, "access denied")
        );
        assert!(typed, "{name}: {error:?}");
        assert_eq!(proxy.requests("GET /watch"), 1, "{name}: no retry");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_revoked_stream_ends_with_access_denied_without_a_retry() {
    let db = database().await;
    let server = TestServer::start(&db.pool).await;
    let proxy = Proxy::start(server.addr).await;
    let reader = client(&proxy.url(), &token("acme", "events:read", Some("ses_revoked")));
    let mut events = reader.watch(from_start()).await.unwrap();
    let id = publish(&db.pool, &node_event("acme", 1)).await;
    assert_eq!(events.next().await.unwrap().unwrap().id, id);

    let admin = token("acme", "admin", None);
    let body = json!({"sessionId": "ses_revoked", "reason": "signed out"});
    let reply = outbox_e2e::client::post(server.addr, "/admin/streams/close", Some(&admin), &body).await;
    assert_eq!(reply.status, 200, "{}", reply.body);

    let error = events.next().await.expect("an item").expect_err("the revocation");
    assert!(matches!(&error, Error::AccessDenied { message } if message == "signed out"), "{error:?}");
    assert!(events.next().await.is_none());
    assert_eq!(proxy.requests("GET /watch"), 1, "a revoked stream is not retried");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_filtered_stream_sees_only_what_it_asked_for_and_stops_when_dropped() {
    let db = database().await;
    let server = TestServer::start(&db.pool).await;
    let proxy = Proxy::start(server.addr).await;
    let reader = client(&proxy.url(), &token("acme", "events:read", None));
    let direct = client(&format!("http://{}", server.addr), &token("acme", "events:read", None));
    publish(&db.pool, &node_event("acme", 0)).await;
    let before = until_visible(&direct, 1).await[0].sequence;

    let query =
        WatchQuery { types: vec!["pool.*".into(), "node.left".into()], last_event_id: Some(before), ..from_start() };
    let mut events = reader.watch(query).await.unwrap();
    let skipped = publish(&db.pool, &node_event("acme", 1)).await;
    let wanted = outbox_core::NewEvent::new("node.left", "acme", "node/n1", json!({}));
    let wanted = publish(&db.pool, &wanted).await;
    let event = tokio::time::timeout(WITHIN, events.next()).await.expect("the wanted event").unwrap().unwrap();
    assert_eq!(event.id, wanted, "{skipped} (node.joined) is filtered out");
    assert_eq!(proxy.open_connections(), 1);

    drop(events);
    eventually(WITHIN, "the dropped stream's connection closed", || proxy.open_connections() == 0).await;
    assert_eq!(proxy.requests("GET /watch"), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_watch_from_now_delivers_every_event_committed_after_it_returns() {
    let db = database().await;
    let server = TestServer::start(&db.pool).await;
    let reader = client(&format!("http://{}", server.addr), &token("acme", "events:read", None));
    let earlier = publish(&db.pool, &node_event("acme", 0)).await;
    until_visible(&reader, 1).await;

    let query = WatchQuery { max_backoff: Duration::from_millis(200), ..WatchQuery::default() };
    let mut events = reader.watch(query).await.unwrap();
    // Published before the stream is first polled: the stream opened when `watch` returned.
    let mut published = Vec::new();
    for n in 1..=5 {
        published.push(publish(&db.pool, &node_event("acme", n)).await);
    }
    let mut received = Vec::new();
    while received.len() < published.len() {
        let event = tokio::time::timeout(WITHIN, events.next()).await.expect("the next event").unwrap().unwrap();
        received.push(event.id);
    }
    assert_eq!(received, published, "{earlier}, committed before the watch, is not among them");
}
