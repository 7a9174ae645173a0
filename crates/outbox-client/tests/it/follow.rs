//! `Client::follow`: history pages, then live, across a switch while events are published.

use std::time::Duration;

use outbox_client::FollowQuery;

use crate::support::{Proxy, Publisher, TestServer, client, database, node_event, publish, token, until_visible};

const WITHIN: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread")]
async fn backfill_then_follow_has_no_gap_and_no_duplicate_while_events_are_published() {
    let db = database().await;
    let mut history = Vec::new();
    for n in 0..60 {
        history.push(publish(&db.pool, &node_event("acme", n)).await);
    }
    let server = TestServer::start(&db.pool).await;
    let proxy = Proxy::start(server.addr).await;
    let direct = client(&format!("http://{}", server.addr), &token("acme", "events:read", None));
    until_visible(&direct, history.len()).await;
    // Publishing runs through the whole replay, the switch and the first live events.
    let publisher = Publisher::start(db.pool.clone(), Duration::from_millis(5));
    let reader = client(&proxy.url(), &token("acme", "events:read", None));
    let query = FollowQuery { page_size: 7, max_backoff: Duration::from_millis(200), ..FollowQuery::default() };
    let mut events = reader.follow(query);

    let mut received = Vec::new();
    while proxy.requests("GET /watch") == 0 || received.len() < history.len() + 40 {
        let event = tokio::time::timeout(WITHIN, events.next()).await.expect("an event in time");
        received.push(event.expect("not the end").expect("not an error").id);
    }
    let published = publisher.stop().await;
    while received.len() < history.len() + published.len() {
        let event = tokio::time::timeout(WITHIN, events.next()).await.expect("the rest, live");
        received.push(event.unwrap().unwrap().id);
    }

    let expected: Vec<String> = history.into_iter().chain(published).collect();
    assert_eq!(received, expected, "the history, then everything published during and after the switch");
    assert!(proxy.requests("GET /events") >= 9, "the history came in pages of 7");
    assert_eq!(proxy.requests("GET /watch"), 1, "one switch to live");
    let marker = publish(&db.pool, &node_event("acme", 9999)).await;
    let next = tokio::time::timeout(WITHIN, events.next()).await.expect("the marker");
    assert_eq!(next.unwrap().unwrap().id, marker, "nothing came between the last published event and the marker");
}

#[tokio::test(flavor = "multi_thread")]
async fn follow_from_an_empty_history_starts_live_from_the_beginning() {
    let db = database().await;
    let server = TestServer::start(&db.pool).await;
    let reader = client(&format!("http://{}", server.addr), &token("acme", "events:read", None));
    let mut events = reader.follow(FollowQuery { types: vec!["node.*".into()], ..FollowQuery::default() });
    let first = events.next();
    let id = publish(&db.pool, &node_event("acme", 1)).await;
    let event = tokio::time::timeout(WITHIN, first).await.expect("the live event").unwrap().unwrap();
    assert_eq!(event.id, id);
}
