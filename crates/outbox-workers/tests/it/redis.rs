//! The redis sink against the real Redis server: entry ids are positions, a redelivery after a
//! kill mid-batch is recognised instead of duplicated, MAXLEN trims.

use std::collections::BTreeMap;
use std::time::Duration;

use outbox_core::{Event, NewEvent};
use outbox_pg::internal::clock;
use outbox_workers::config::{SinkConfig, SinkKind, build_sink};
use outbox_workers::{Dispatcher, SinkSpec};
use redis::AsyncCommands;
use redis::streams::StreamRangeReply;
use serde_json::json;

use crate::support::{
    cursor_of, db, fast_config, kill_during_third_batch, publish_and_read, redis_url, unique, wait_for,
};

fn redis_sink(id: &str, url: &str, prefix: &str) -> SinkConfig {
    let mut config = SinkConfig::new(id, SinkKind::Redis);
    config.url = Some(url.into());
    config.key = Some(format!("{prefix}:{{tenantId}}"));
    config
}

fn tenants(n: usize) -> Vec<NewEvent> {
    (0..n).map(|i| NewEvent::new("node.joined", ["acme", "globex"][i % 3 % 2], "node/n1", json!({ "n": i }))).collect()
}

async fn connection(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url).unwrap().get_multiplexed_async_connection().await.unwrap()
}

/// Every entry of `key`: (entry id, the `id` field, the event decoded from the `event` field).
async fn entries(connection: &mut redis::aio::MultiplexedConnection, key: &str) -> Vec<(String, String, Event)> {
    let reply: StreamRangeReply = connection.xrange_all(key).await.unwrap();
    reply
        .ids
        .into_iter()
        .map(|entry| {
            let id: String = entry.get("id").unwrap();
            let body: Vec<u8> = entry.get("event").unwrap();
            (entry.id, id, serde_json::from_slice(&body).unwrap())
        })
        .collect()
}

#[tokio::test]
async fn after_a_kill_mid_batch_and_a_restart_each_stream_holds_every_event_once_with_its_position_as_id() {
    let url = redis_url();
    let db = db().await;
    let events = publish_and_read(&db.pool, &tenants(300)).await;
    let prefix = unique("t");
    let config = redis_sink("feed", &url, &prefix);

    kill_during_third_batch(&db, &config).await;
    assert_eq!(cursor_of(&db.pool, "feed").await, Some(events[99].sequence));

    clock::advance(&db.pool, fast_config().lease_ttl + Duration::from_secs(1)).await.unwrap();
    let dispatcher =
        Dispatcher::start(db.pool.clone(), fast_config(), vec![SinkSpec::new(build_sink(&config).unwrap()).batch(50)])
            .unwrap();
    let last = events.last().unwrap().sequence;
    wait_for("the restarted dispatcher", || async { cursor_of(&db.pool, "feed").await == Some(last) }).await;
    dispatcher.shutdown().await;

    let mut connection = connection(&url).await;
    let mut by_tenant: BTreeMap<&str, Vec<&Event>> = BTreeMap::new();
    for event in &events {
        by_tenant.entry(&event.tenant_id).or_default().push(event);
    }
    for (tenant, expected) in by_tenant {
        let key = format!("{prefix}:{tenant}");
        let stored = entries(&mut connection, &key).await;
        assert_eq!(stored.len(), expected.len(), "{key}: every event once");
        for ((entry_id, id, event), expected) in stored.iter().zip(expected) {
            assert_eq!(entry_id, &format!("{}-{}", expected.sequence.txid, expected.sequence.seq));
            assert_eq!((id, event), (&expected.id, expected));
        }
        let _: () = connection.del(&key).await.unwrap();
    }
}

#[tokio::test]
async fn a_redelivered_batch_is_recognised_not_duplicated() {
    let url = redis_url();
    let db = db().await;
    let events = publish_and_read(&db.pool, &tenants(12)).await;
    let prefix = unique("t");
    let sink = build_sink(&redis_sink("again", &url, &prefix)).unwrap();
    sink.deliver(&events[..8]).await.unwrap();
    sink.deliver(&events).await.unwrap();
    sink.deliver(&events[2..5]).await.unwrap();
    let mut connection = connection(&url).await;
    let mut total = 0;
    for tenant in ["acme", "globex"] {
        let key = format!("{prefix}:{tenant}");
        total += entries(&mut connection, &key).await.len();
        let _: () = connection.del(&key).await.unwrap();
    }
    assert_eq!(total, 12);
}

#[tokio::test]
async fn another_error_names_the_failing_entry() {
    let url = redis_url();
    let db = db().await;
    let events = publish_and_read(&db.pool, &tenants(3)).await;
    assert_eq!(
        events.iter().map(|e| e.tenant_id.as_str()).collect::<Vec<_>>(),
        ["acme", "globex", "acme"],
        "the fixture's tenants"
    );
    let prefix = unique("t");
    let mut connection = connection(&url).await;
    // globex's key holds a string, so XADD to it fails with WRONGTYPE; the failure names that
    // entry, and stays retryable because no later globex entry was written.
    let _: () = connection.set(format!("{prefix}:globex"), "not a stream").await.unwrap();
    let sink = build_sink(&redis_sink("wrongtype", &url, &prefix)).unwrap();
    let error = sink.deliver(&events).await.unwrap_err();
    assert_eq!(error.failed_at(), Some(1), "{error}");
    assert!(error.is_retryable() && error.message().contains("WRONGTYPE"), "{error}");
    assert_eq!(entries(&mut connection, &format!("{prefix}:acme")).await.len(), 2);
    let _: () = connection.del(&[format!("{prefix}:acme"), format!("{prefix}:globex")]).await.unwrap();
}

#[tokio::test]
async fn maxlen_trims_the_stream_approximately() {
    let url = redis_url();
    let db = db().await;
    let events: Vec<Event> = publish_and_read(&db.pool, &tenants(600)).await;
    let acme: Vec<&Event> = events.iter().filter(|e| e.tenant_id == "acme").collect();
    let prefix = unique("t");
    let mut config = redis_sink("trimmed", &url, &prefix);
    config.maxlen = Some(10);
    config.tenant = Some("acme".into());
    let dispatcher =
        Dispatcher::start(db.pool.clone(), fast_config(), vec![SinkSpec::new(build_sink(&config).unwrap())]).unwrap();
    let last = events.last().unwrap().sequence;
    wait_for("the sink", || async { cursor_of(&db.pool, "trimmed").await == Some(last) }).await;
    dispatcher.shutdown().await;
    let mut connection = connection(&url).await;
    let key = format!("{prefix}:acme");
    let stored = entries(&mut connection, &key).await;
    assert!(stored.len() < acme.len() / 2, "MAXLEN ~ 10 kept {} of {}", stored.len(), acme.len());
    assert_eq!(stored.last().unwrap().1, acme.last().unwrap().id);
    let _: () = connection.del(&key).await.unwrap();
}

#[tokio::test]
async fn an_unreachable_server_is_a_retryable_failure() {
    let db = db().await;
    let events = publish_and_read(&db.pool, &tenants(1)).await;
    let mut config = SinkConfig::new("nowhere", SinkKind::Redis);
    config.url = Some("redis://127.0.0.1:1".into());
    config.timeout_ms = Some(500);
    let sink = build_sink(&config).unwrap();
    let error = sink.prepare().await.unwrap_err();
    assert!(error.is_retryable() && error.message().contains("connecting to Redis"), "{error}");
    let error = sink.deliver(&events).await.unwrap_err();
    assert!(error.is_retryable(), "{error}");
}
