//! The axum example over real HTTP on loopback against a real PostgreSQL: migrate, publish
//! in the application's own transaction, read back and watch with `outbox-client`, and
//! count an in-process subscriber.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use outbox_client::{Client, ListQuery, WatchQuery};
use outbox_core::Pattern;
use outbox_pg::testkit::TestDb;
use serde_json::{Value, json};

const WITHIN: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread")]
async fn orders_are_published_in_their_transaction_and_reach_every_reader() {
    let db = TestDb::with_migrator(&outbox_example_axum::migrator()).await;
    let (router, subscribers) = outbox_example_axum::app(db.pool.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(outbox_example_axum::serve(router, listener));

    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let _subscription = subscribers
        .subscribe(Pattern::parse("order.*").unwrap(), move |event| {
            let sink = sink.clone();
            async move {
                sink.lock().unwrap().push(event.subject.clone());
                Ok::<(), std::convert::Infallible>(())
            }
        })
        .await
        .unwrap();

    let client = Client::new(&base).unwrap().with_path_prefix("/outbox").unwrap().with_token("acme-token").unwrap();
    // From now: every order placed after `watch` returns arrives, the first ones included.
    let mut live = client.watch(WatchQuery::default()).await.unwrap();

    let http = outbox_client::http_client_builder().build().unwrap();
    let order = |id: &str, quantity: i32| {
        http.post(format!("{base}/orders"))
            .bearer_auth("acme-token")
            .json(&json!({ "id": id, "item": "tea", "quantity": quantity }))
            .send()
    };
    for id in ["o1", "o2", "o3"] {
        let response = order(id, 2).await.unwrap();
        assert_eq!(response.status(), 201, "{id}: {}", response.text().await.unwrap());
    }
    // The order's CHECK fails: its transaction rolls back with its event.
    let refused = order("o4", 0).await.unwrap();
    assert!(refused.status().is_server_error() || refused.status().is_client_error(), "{}", refused.status());
    let again = order("o1", 1).await.unwrap();
    assert!(!again.status().is_success(), "a duplicate order id is refused: {}", again.status());

    let mut watched = Vec::new();
    while watched.len() < 3 {
        let event = tokio::time::timeout(WITHIN, live.next()).await.expect("an event in time").unwrap().unwrap();
        assert_eq!(event.event_type, "order.placed");
        assert_eq!(event.tenant_id, "acme");
        watched.push(event.subject);
    }
    assert_eq!(watched, ["order/o1", "order/o2", "order/o3"]);

    let page = client.list(&ListQuery::default()).await.unwrap();
    let listed: Vec<&str> = page.items.iter().map(|event| event.subject.as_str()).collect();
    assert_eq!(listed, ["order/o1", "order/o2", "order/o3"], "no event of a rolled-back order");
    assert_eq!(page.items[0].data.value(), json!({ "item": "tea", "quantity": 2 }));

    let deadline = tokio::time::Instant::now() + WITHIN;
    while seen.lock().unwrap().len() < 3 {
        assert!(tokio::time::Instant::now() < deadline, "the subscriber saw {:?}", seen.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(*seen.lock().unwrap(), ["order/o1", "order/o2", "order/o3"]);

    let rows: i64 =
        outbox_pg::sqlx::query_scalar("SELECT count(*) FROM shop_orders").fetch_one(&db.pool).await.unwrap();
    assert_eq!(rows, 3, "the shop's own table, migrated by the same runner");

    let types: Value = http
        .get(format!("{base}/outbox/event-types"))
        .bearer_auth("acme-token")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let types: Vec<&str> =
        types["items"].as_array().unwrap().iter().map(|item| item["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["order.*", "webhook.ping", "webhook.disabled"], "the shop's catalog, then Outbox's own");

    let anonymous = Client::new(&base).unwrap().with_path_prefix("/outbox").unwrap();
    let refused = anonymous.list(&ListQuery::default()).await.unwrap_err();
    assert!(matches!(refused, outbox_client::Error::Unauthenticated { .. }), "{refused:?}");
}
