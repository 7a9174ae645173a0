//! The `subscribers` role: in-process subscriptions fed by the same tail as `/watch`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use outbox_core::{NewEvent, Pattern};
use outbox_server::config::Roles;
use outbox_server::server::Server;
use serde_json::json;

use crate::support::{config, database};

#[tokio::test]
async fn the_subscribers_role_feeds_subscriptions_from_the_streams_tail() {
    let db = database().await;
    let server = Server::start(&config(), db.pool.clone()).await.expect("starting the server");
    let subscribers = server.subscribers().expect("role all includes subscribers");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let handler = {
        let seen = seen.clone();
        move |event: outbox_core::Event| {
            seen.lock().unwrap().push(event.event_type);
            std::future::ready(Ok::<(), String>(()))
        }
    };
    let _subscription = subscribers.subscribe(Pattern::parse("node.*").unwrap(), handler).await.unwrap();
    let events = [("reservation.active", "acme"), ("node.joined", "acme"), ("node.left", "globex")];
    for (event_type, tenant) in events {
        let event = NewEvent::new(event_type, tenant, "node/n1", json!({}));
        outbox_pg::publish(&db.pool, &event).await.expect("publish");
    }
    let saw_both = || std::future::ready(seen.lock().unwrap().len() >= 2);
    outbox_e2e::wait::until("the subscription to see the events", Duration::from_secs(20), saw_both).await;
    assert_eq!(*seen.lock().unwrap(), ["node.joined", "node.left"]);
    let tail = server.app().state().service.tail().expect("the streams' shared tail");
    assert_eq!(tail.members(), 1, "the subscription is a member of the tail /watch uses");
}

#[tokio::test]
async fn without_the_role_there_are_no_subscribers() {
    let db = database().await;
    let config = outbox_server::config::Config { roles: Roles::parse("http,sinks", "test").unwrap(), ..config() };
    let server = Server::start(&config, db.pool.clone()).await.expect("starting the server");
    assert!(server.subscribers().is_none());
}
