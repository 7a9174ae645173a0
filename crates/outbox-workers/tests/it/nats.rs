//! The nats sink against the real NATS server with JetStream: every event once, in order,
//! through a dispatcher killed in the middle of a batch and restarted, and nothing stored after
//! a publish that failed.

use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream};
use futures_util::StreamExt;
use outbox_core::{Event, NewEvent, Position};
use outbox_pg::internal::clock;
use outbox_workers::config::{SinkConfig, SinkKind, build_sink};
use outbox_workers::{Dispatcher, SinkSpec};
use serde_json::json;

use crate::support::{
    Interrupting, cursor_of, db, fast_config, kill_during_third_batch, nats_url, publish_and_read, unique, wait_for,
};

fn nats(id: &str, url: &str, prefix: &str, stream: &str) -> SinkConfig {
    let mut config = SinkConfig::new(id, SinkKind::Nats);
    config.url = Some(url.into());
    config.subject = Some(format!("{prefix}.{{tenantId}}.{{type}}"));
    config.stream = Some(stream.into());
    config
}

fn mixed(n: usize) -> Vec<NewEvent> {
    (0..n)
        .map(|i| {
            let kind = ["reservation.active", "node.joined"][i % 2];
            NewEvent::new(kind, ["acme", "globex"][i % 3 % 2], "node/n1", json!({ "n": i }))
        })
        .collect()
}

/// Every message of `stream`, read with a pull consumer, as (subject, Nats-Msg-Id, event).
async fn consume(context: &jetstream::Context, stream: &str, count: usize) -> Vec<(String, String, Event)> {
    let stream = context.get_stream(stream).await.unwrap();
    let consumer = stream
        .create_consumer(consumer::pull::Config { ack_policy: consumer::AckPolicy::None, ..Default::default() })
        .await
        .unwrap();
    let mut batch = consumer.batch().max_messages(count).expires(Duration::from_secs(10)).messages().await.unwrap();
    let mut seen = Vec::new();
    while let Some(message) = batch.next().await {
        let message = message.unwrap();
        let id = message.headers.as_ref().and_then(|h| h.get("Nats-Msg-Id")).map(|v| v.to_string()).unwrap_or_default();
        let event: Event = serde_json::from_slice(&message.payload).unwrap();
        seen.push((message.subject.to_string(), id, event));
    }
    seen
}

#[tokio::test]
async fn a_jetstream_consumer_gets_every_event_once_in_order_across_a_kill_mid_batch() {
    let url = nats_url();
    let db = db().await;
    let events = publish_and_read(&db.pool, &mixed(300)).await;
    let (prefix, stream) = (unique("t"), unique("OUTBOX_T").to_uppercase());
    let config = nats("bus", &url, &prefix, &stream);

    // The first dispatcher publishes two batches of 50, then half of the third, and is killed.
    kill_during_third_batch(&db, &config).await;
    assert_eq!(cursor_of(&db.pool, "bus").await, Some(events[99].sequence), "the killed batch moved the cursor");

    // A new dispatcher takes over once the dead one's lease has expired, and redelivers from the cursor.
    clock::advance(&db.pool, fast_config().lease_ttl + Duration::from_secs(1)).await.unwrap();
    let spec = SinkSpec::new(Interrupting::new(build_sink(&config).unwrap(), usize::MAX)).batch(50);
    let dispatcher = Dispatcher::start(db.pool.clone(), fast_config(), vec![spec]).unwrap();
    let last = events.last().unwrap().sequence;
    wait_for("the restarted dispatcher", || async { cursor_of(&db.pool, "bus").await == Some(last) }).await;
    dispatcher.shutdown().await;

    let context = jetstream::new(async_nats::connect(&url).await.unwrap());
    let mut info = context.get_stream(&stream).await.unwrap();
    let info = info.info().await.unwrap().clone();
    assert_eq!(info.config.subjects, [format!("{prefix}.>")], "the stream captures the template's fixed prefix");
    assert_eq!(info.state.messages, 300, "the redelivered half batch was dropped as duplicates");
    let seen = consume(&context, &stream, 300).await;
    let positions: Vec<Position> = seen.iter().map(|(_, _, e)| e.sequence).collect();
    assert_eq!(positions, events.iter().map(|e| e.sequence).collect::<Vec<_>>(), "each event once, in order");
    for ((subject, message_id, event), expected) in seen.iter().zip(&events) {
        assert_eq!(event, expected);
        assert_eq!(message_id, &expected.id, "Nats-Msg-Id is the event id");
        assert_eq!(subject, &format!("{prefix}.{}.{}", expected.tenant_id, expected.event_type));
    }
    context.delete_stream(&stream).await.unwrap();
}

#[tokio::test]
async fn a_second_delivery_of_the_same_events_is_acknowledged_as_a_duplicate() {
    let url = nats_url();
    let db = db().await;
    let events = publish_and_read(&db.pool, &mixed(10)).await;
    let (prefix, stream) = (unique("t"), unique("OUTBOX_T").to_uppercase());
    let sink = build_sink(&nats("twice", &url, &prefix, &stream)).unwrap();
    sink.deliver(&events).await.unwrap();
    sink.deliver(&events[3..]).await.unwrap();
    let context = jetstream::new(async_nats::connect(&url).await.unwrap());
    let mut handle = context.get_stream(&stream).await.unwrap();
    assert_eq!(handle.info().await.unwrap().state.messages, 10);
    context.delete_stream(&stream).await.unwrap();
}

#[tokio::test]
async fn an_unreachable_server_is_a_retryable_failure() {
    let mut config = SinkConfig::new("nowhere", SinkKind::Nats);
    config.url = Some("nats://127.0.0.1:1".into());
    config.timeout_ms = Some(500);
    let sink = build_sink(&config).unwrap();
    let db = db().await;
    let events = publish_and_read(&db.pool, &mixed(1)).await;
    let error = sink.deliver(&events).await.unwrap_err();
    assert!(error.is_retryable(), "{error}");
    assert!(error.message().contains("connecting to NATS"), "{error}");
}

#[tokio::test]
async fn nothing_after_a_failed_publish_is_stored() {
    let url = nats_url();
    let db = db().await;
    let mut new = mixed(10);
    new[3] = NewEvent::new("node.joined", "acme", "node/n1", json!({ "padding": "x".repeat(2048) }));
    let events = publish_and_read(&db.pool, &new).await;
    let (prefix, name) = (unique("t"), unique("OUTBOX_T").to_uppercase());
    let context = jetstream::new(async_nats::connect(&url).await.unwrap());
    // The stream refuses a message over 1 KiB: the fourth event's publish fails mid-batch,
    // and every other event alone would be stored.
    let limited = stream::Config {
        name: name.clone(),
        subjects: vec![format!("{prefix}.>")],
        max_message_size: 1024,
        ..stream::Config::default()
    };
    context.create_stream(limited).await.unwrap();
    let mut config = nats("limited", &url, &prefix, &name);
    config.stream = None;
    let sink = build_sink(&config).unwrap();

    let error = sink.deliver(&events).await.unwrap_err();
    assert!(error.is_retryable(), "{error}");
    assert_eq!(error.failed_at(), Some(3), "the failure names the fourth event: {error}");
    let mut handle = context.get_stream(&name).await.unwrap();
    assert_eq!(handle.info().await.unwrap().state.messages, 3, "nothing after the failed publish was stored");
    let seen = consume(&context, &name, 3).await;
    let positions: Vec<Position> = seen.iter().map(|(_, _, e)| e.sequence).collect();
    assert_eq!(positions, events[..3].iter().map(|e| e.sequence).collect::<Vec<_>>());
    context.delete_stream(&name).await.unwrap();
}
