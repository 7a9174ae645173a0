//! `Client::list`, `Client::pager` and publishing against the real server.

use outbox_client::{Error, ListQuery};
use outbox_core::{ErrorCode, NewEvent};
use serde_json::json;

use crate::support::{TestServer, client, database, token, until_visible};

#[tokio::test(flavor = "multi_thread")]
async fn publish_many_then_page_through_every_event() {
    let db = database().await;
    let server = TestServer::start(&db.pool).await;
    let url = format!("http://{}", server.addr);
    let writer = client(&url, &token("acme", "events:read events:write", None));
    let events: Vec<NewEvent> = (0..25)
        .map(|n| {
            let kind = if n % 5 == 0 { "pool.created" } else { "node.joined" };
            NewEvent::new(kind, "acme", format!("node/n{n}"), json!({ "n": n }))
        })
        .collect();
    let ids = writer.publish_many(&events).await.unwrap();
    let single = writer.publish(&NewEvent::new("node.left", "acme", "node/n0", json!({}))).await.unwrap();
    until_visible(&writer, 26).await;

    let first = writer.list(&ListQuery { limit: Some(10), ..ListQuery::default() }).await.unwrap();
    assert_eq!(first.items.len(), 10);
    assert!(first.cursor.is_some(), "more follow");

    let mut pager = writer.pager(ListQuery { limit: Some(10), ..ListQuery::default() });
    let mut all = Vec::new();
    while let Some(event) = pager.next().await {
        all.push(event.unwrap().id);
    }
    let expected: Vec<String> = ids.iter().cloned().chain([single]).collect();
    assert_eq!(all, expected, "every page, in order");

    let mut pools = writer.pager(ListQuery { types: vec!["pool.*".into()], limit: Some(2), ..ListQuery::default() });
    let mut pool_ids = Vec::new();
    while let Some(event) = pools.next().await {
        pool_ids.push(event.unwrap().id);
    }
    assert_eq!(pool_ids, ids.iter().step_by(5).cloned().collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread")]
async fn refusals_come_back_typed() {
    let db = database().await;
    let server = TestServer::start(&db.pool).await;
    let url = format!("http://{}", server.addr);
    let reader = client(&url, &token("acme", "events:read", None));

    let denied = reader.publish(&NewEvent::new("node.left", "acme", "node/n0", json!({}))).await.unwrap_err();
    assert!(matches!(denied, Error::AccessDenied { .. }), "{denied:?}");
    let bad = reader.list(&ListQuery { limit: Some(5000), ..ListQuery::default() }).await.unwrap_err();
    assert_eq!((bad.code(), bad.is_transient()), (Some(ErrorCode::InvalidInput), false), "{bad}");
    let prefixed = reader.clone().with_path_prefix("/outbox").unwrap();
    let missing = prefixed.list(&ListQuery::default()).await.unwrap_err();
    assert_eq!(missing.code(), Some(ErrorCode::NotFound), "{missing}");
    let anonymous = outbox_client::Client::new(&url).unwrap();
    let error = anonymous.list(&ListQuery::default()).await.unwrap_err();
    assert!(matches!(error, Error::Unauthenticated { .. }), "{error:?}");

    server.stop().await;
    let gone = reader.list(&ListQuery::default()).await.unwrap_err();
    assert!(matches!(gone, Error::Connection(_)) && gone.is_transient(), "{gone:?}");
}
