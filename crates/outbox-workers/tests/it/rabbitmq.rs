//! The rabbitmq sink against the real RabbitMQ (its stream plugin): publishing ids are the
//! dispatcher's numbers, so a batch sent again after a kill mid-batch is dropped by the
//! broker and the stream holds every event once, in order; a message too large for a frame
//! is refused with its index; the three encodings.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use outbox_core::{Event, NewEvent};
use outbox_pg::internal::clock;
use outbox_workers::config::{SinkConfig, SinkKind, build_sink};
use outbox_workers::encoding::{Encoding, ProtoEvent};
use outbox_workers::sinks::RabbitmqEndpoint;
use outbox_workers::{Dispatcher, SinkSpec};
use rabbitmq_stream_client::types::{Message, OffsetSpecification, SimpleValue};
use serde_json::json;

use crate::support::{
    Interrupting, cursor_of, db, fast_config, kill_during_third_batch, publish_and_read, rabbitmq_stream_url, unique,
    wait_for,
};

fn rabbitmq(id: &str, url: &str, stream: &str) -> SinkConfig {
    let mut config = SinkConfig::new(id, SinkKind::Rabbitmq);
    config.url = Some(url.into());
    config.stream = Some(stream.into());
    config
}

fn mixed(n: usize) -> Vec<NewEvent> {
    (0..n)
        .map(|i| {
            let kind = ["reservation.active", "node.joined"][i % 2];
            NewEvent::new(kind, ["acme", "globex"][i % 3 % 2], format!("node/n{}", i % 7), json!({ "n": i }))
        })
        .collect()
}

/// Every message of `stream` from its first offset: waits until `count` arrived, then half a
/// second more for any beyond them.
pub(crate) async fn read_stream(url: &str, stream: &str, count: usize) -> Vec<Message> {
    let environment = RabbitmqEndpoint::parse(url).unwrap().environment().await.expect("connecting to RabbitMQ");
    let mut consumer = environment.consumer().offset(OffsetSpecification::First).build(stream).await.unwrap();
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let wait = if seen.len() >= count { Duration::from_millis(500) } else { deadline - Instant::now() };
        match tokio::time::timeout(wait, consumer.next()).await {
            Ok(Some(delivery)) => seen.push(delivery.unwrap().message().clone()),
            Ok(None) => break,
            Err(_) if seen.len() >= count => break,
            Err(_) => panic!("only {} of {count} messages in stream {stream} after 30 s", seen.len()),
        }
    }
    let _ = consumer.handle().close().await;
    seen
}

/// An application property of `message` as text.
pub(crate) fn property(message: &Message, key: &str) -> String {
    match message.application_properties().and_then(|properties| properties.get(key)) {
        Some(SimpleValue::String(text)) => text.clone(),
        other => panic!("{key}: {other:?}"),
    }
}

async fn delete_stream(url: &str, stream: &str) {
    let environment = RabbitmqEndpoint::parse(url).unwrap().environment().await.unwrap();
    let _ = environment.delete_stream(stream).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn after_a_kill_mid_batch_and_a_restart_the_stream_holds_every_event_once_in_order() {
    let url = rabbitmq_stream_url();
    let db = db().await;
    let events = publish_and_read(&db.pool, &mixed(300)).await;
    let stream = unique("outbox-t-");
    let config = rabbitmq("stream", &url, &stream);

    // Two batches of 50, half of the third, then the dispatcher is killed: 125 in the stream,
    // the cursor after the second batch.
    kill_during_third_batch(&db, &config).await;
    assert_eq!(cursor_of(&db.pool, "stream").await, Some(events[99].sequence));
    assert_eq!(read_stream(&url, &stream, 125).await.len(), 125, "the half batch reached the stream");

    clock::advance(&db.pool, fast_config().lease_ttl + Duration::from_secs(1)).await.unwrap();
    let spec = SinkSpec::new(Interrupting::new(build_sink(&config).unwrap(), usize::MAX)).batch(50);
    let dispatcher = Dispatcher::start(db.pool.clone(), fast_config(), vec![spec]).unwrap();
    let last = events.last().unwrap().sequence;
    wait_for("the restarted dispatcher", || async { cursor_of(&db.pool, "stream").await == Some(last) }).await;
    dispatcher.shutdown().await;

    let seen = read_stream(&url, &stream, 300).await;
    assert_eq!(seen.len(), 300, "the 25 events sent again were dropped by the broker");
    for (message, expected) in seen.iter().zip(&events) {
        let event: Event = serde_json::from_slice(message.data().unwrap()).unwrap();
        assert_eq!(&event, expected, "each event once, in order");
        assert_eq!(property(message, "outbox-id"), expected.id);
        assert_eq!(property(message, "outbox-type"), expected.event_type);
        assert_eq!(property(message, "outbox-tenant"), expected.tenant_id);
        assert_eq!(property(message, "outbox-sequence"), expected.sequence.to_string());
    }
    delete_stream(&url, &stream).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_batch_sent_again_with_the_same_numbers_is_dropped_and_a_replay_is_not() {
    let url = rabbitmq_stream_url();
    let db = db().await;
    let events = publish_and_read(&db.pool, &mixed(10)).await;
    let stream = unique("outbox-t-");
    let sink = build_sink(&rabbitmq("twice", &url, &stream)).unwrap();
    sink.deliver_numbered(&events, 1).await.unwrap();
    sink.deliver_numbered(&events[3..], 4).await.unwrap();
    assert_eq!(read_stream(&url, &stream, 10).await.len(), 10, "ids at or below the last stored are dropped");
    // A second sink of the same id (a restarted process) is the same producer.
    let again = build_sink(&rabbitmq("twice", &url, &stream)).unwrap();
    again.deliver_numbered(&events[5..], 6).await.unwrap();
    assert_eq!(read_stream(&url, &stream, 10).await.len(), 10);
    // A dead letter's replay has no number and is stored.
    again.deliver(&events[..1]).await.unwrap();
    assert_eq!(read_stream(&url, &stream, 11).await.len(), 11);
    delete_stream(&url, &stream).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_message_too_large_for_a_frame_is_refused_with_its_index_and_its_neighbours_go_through() {
    let url = rabbitmq_stream_url();
    let db = db().await;
    let big = "x".repeat(60 * 1024);
    let mut large: Vec<NewEvent> =
        (0..20).map(|i| NewEvent::new("node.joined", "acme", "node/big", json!({ "i": i, "pad": big }))).collect();
    large.push(NewEvent::new("node.joined", "acme", "node/small", json!({ "small": true })));
    let events = publish_and_read(&db.pool, &large).await;
    let stream = unique("outbox-t-");
    let sink = build_sink(&rabbitmq("large", &url, &stream)).unwrap();
    // 20 events of 60 KiB go out in two frames of at most 1 MiB.
    sink.deliver_numbered(&events, 1).await.unwrap();
    assert_eq!(read_stream(&url, &stream, 21).await.len(), 21);

    let mut merged = events[0].clone();
    merged.data = json!({ "pad": "y".repeat(1024 * 1024) }).into();
    merged.id = "evt_huge".into();
    let batch = [events[20].clone(), merged, events[20].clone()];
    let error = sink.deliver_numbered(&batch, 22).await.unwrap_err();
    assert!(!error.is_retryable(), "{error}");
    assert_eq!(error.failed_at(), Some(1), "{error}");
    assert!(error.message().contains("more than a stream frame holds"), "{error}");
    assert_eq!(read_stream(&url, &stream, 22).await.len(), 22, "the one before it went through");
    delete_stream(&url, &stream).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cloudevents_and_protobuf_bodies_carry_their_content_type() {
    let url = rabbitmq_stream_url();
    let db = db().await;
    let events = publish_and_read(&db.pool, &mixed(3)).await;
    for encoding in [Encoding::CloudEvents, Encoding::Protobuf] {
        let stream = unique("outbox-t-");
        let mut config = rabbitmq("encoded", &url, &stream);
        config.encoding = encoding;
        build_sink(&config).unwrap().deliver_numbered(&events, 1).await.unwrap();
        let seen = read_stream(&url, &stream, 3).await;
        for (message, event) in seen.iter().zip(&events) {
            let content_type = message.properties().and_then(|p| p.content_type.clone()).map(|s| s.to_string());
            assert_eq!(content_type.as_deref(), Some(encoding.content_type()));
            let body = message.data().unwrap();
            match encoding {
                Encoding::Protobuf => {
                    let decoded: ProtoEvent = prost::Message::decode(body).unwrap();
                    assert_eq!(
                        (decoded.id.as_str(), decoded.r#type.as_str()),
                        (event.id.as_str(), event.event_type.as_str())
                    );
                }
                _ => {
                    let cloud: serde_json::Value = serde_json::from_slice(body).unwrap();
                    assert_eq!(
                        (cloud["id"].as_str(), cloud["specversion"].as_str()),
                        (Some(event.id.as_str()), Some("1.0"))
                    );
                }
            }
        }
        delete_stream(&url, &stream).await;
    }
}

#[tokio::test]
async fn an_unreachable_broker_is_a_retryable_failure() {
    let mut config = rabbitmq("nowhere", "rabbitmq-stream://guest:guest@127.0.0.1:1/%2f", "outbox");
    config.timeout_ms = Some(500);
    let sink = build_sink(&config).unwrap();
    let db = db().await;
    let events = publish_and_read(&db.pool, &mixed(1)).await;
    let error = sink.deliver_numbered(&events, 1).await.unwrap_err();
    assert!(error.is_retryable(), "{error}");
    assert!(error.message().contains("RabbitMQ"), "{error}");
}
