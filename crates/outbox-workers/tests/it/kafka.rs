//! The kafka sink against a Kafka-protocol broker (`KAFKA_BOOTSTRAP`: a real one, or the mock
//! cluster `cargo xtask services kafka` runs): every event in its topic with its key and
//! headers, per-subject order within partitions, at least once across a kill mid-batch (the
//! duplicates all after the saved cursor); a message over the size limit is refused with its
//! index; the three encodings.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use outbox_core::{Event, NewEvent, Position};
use outbox_pg::internal::clock;
use outbox_workers::config::{PropertyValue, SinkConfig, SinkKind, build_sink};
use outbox_workers::encoding::{Encoding, ProtoEvent};
use outbox_workers::{Dispatcher, SinkSpec};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use serde_json::json;

use crate::support::{
    Interrupting, cursor_of, db, fast_config, kafka_bootstrap, kill_during_third_batch, publish_and_read, unique,
    wait_for,
};

fn kafka(id: &str, bootstrap: &str, prefix: &str) -> SinkConfig {
    let mut config = SinkConfig::new(id, SinkKind::Kafka);
    config.brokers = Some(bootstrap.into());
    config.topic = Some(format!("{prefix}.{{tenantId}}"));
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

/// One record read back: its partition and offset, key, headers and value.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    pub partition: i32,
    pub offset: i64,
    pub key: String,
    pub headers: HashMap<String, String>,
    pub value: Vec<u8>,
}

/// Every record of `topic` from the beginning of each partition: waits until `count` arrived,
/// then half a second more for any beyond them. Sorted by partition, then offset.
pub(crate) fn read_topic(bootstrap: &str, topic: &str, count: usize) -> Vec<Record> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", unique("outbox-test-"))
        .set("enable.auto.commit", "false")
        .create()
        .expect("a Kafka consumer");
    let metadata = consumer.fetch_metadata(Some(topic), Duration::from_secs(10)).expect("topic metadata");
    let mut assignment = TopicPartitionList::new();
    for partition in metadata.topics()[0].partitions() {
        assignment.add_partition_offset(topic, partition.id(), Offset::Beginning).unwrap();
    }
    consumer.assign(&assignment).unwrap();
    let mut records = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut quiet_since = None;
    loop {
        match consumer.poll(Duration::from_millis(100)) {
            Some(message) => {
                let message = message.expect("a record");
                let headers = message.headers().map_or_else(HashMap::new, |headers| {
                    headers
                        .iter()
                        .map(|h| (h.key.to_owned(), String::from_utf8_lossy(h.value.unwrap_or_default()).into_owned()))
                        .collect()
                });
                records.push(Record {
                    partition: message.partition(),
                    offset: message.offset(),
                    key: String::from_utf8_lossy(message.key().unwrap_or_default()).into_owned(),
                    headers,
                    value: message.payload().unwrap_or_default().to_vec(),
                });
                quiet_since = None;
            }
            None if records.len() >= count => {
                let since = *quiet_since.get_or_insert_with(Instant::now);
                if since.elapsed() > Duration::from_millis(500) {
                    break;
                }
            }
            None => {
                assert!(Instant::now() < deadline, "only {} of {count} records in {topic} after 30 s", records.len())
            }
        }
    }
    records.sort_by_key(|r| (r.partition, r.offset));
    records
}

/// Checks at-least-once delivery of `events` in `records`: every event is there with its
/// headers and key, each subject's first copies are in position order within one partition,
/// and every copy beyond the first is of an event after `saved` (sent again after the kill).
/// Returns the number of duplicates.
pub(crate) fn check_at_least_once(records: &[Record], events: &[Event], saved: Option<Position>) -> usize {
    let by_id: HashMap<&str, &Event> = events.iter().map(|e| (e.id.as_str(), e)).collect();
    let mut seen = HashSet::new();
    let mut duplicates = 0;
    let mut last_of_subject: HashMap<(i32, &str), Position> = HashMap::new();
    let mut partition_of_subject: HashMap<&str, i32> = HashMap::new();
    for record in records {
        let id = record.headers["outbox-id"].as_str();
        let event = by_id.get(id).unwrap_or_else(|| panic!("record {id} is no event of the test"));
        assert_eq!(record.key, event.subject, "the key is the subject");
        assert_eq!(record.headers["outbox-type"], event.event_type);
        assert_eq!(record.headers["outbox-tenant"], event.tenant_id);
        assert_eq!(record.headers["outbox-sequence"], event.sequence.to_string());
        let partition = *partition_of_subject.entry(event.subject.as_str()).or_insert(record.partition);
        assert_eq!(partition, record.partition, "subject {} is in one partition", event.subject);
        if !seen.insert(id) {
            duplicates += 1;
            assert!(saved.is_none_or(|saved| event.sequence > saved), "duplicate {id} lies after the saved cursor");
            continue;
        }
        let key = (record.partition, event.subject.as_str());
        if let Some(previous) = last_of_subject.insert(key, event.sequence) {
            assert!(
                previous < event.sequence,
                "subject {} out of order in partition {}",
                event.subject,
                record.partition
            );
        }
    }
    assert_eq!(seen.len(), events.len(), "every event is in the topic");
    duplicates
}

#[tokio::test(flavor = "multi_thread")]
async fn after_a_kill_mid_batch_every_event_is_in_its_topic_in_subject_order_and_duplicates_follow_the_cursor() {
    let bootstrap = kafka_bootstrap();
    let db = db().await;
    let events = publish_and_read(&db.pool, &mixed(300)).await;
    let prefix = unique("t");
    let config = kafka("log", &bootstrap, &prefix);

    kill_during_third_batch(&db, &config).await;
    let saved = cursor_of(&db.pool, "log").await;
    assert_eq!(saved, Some(events[99].sequence));

    clock::advance(&db.pool, fast_config().lease_ttl + Duration::from_secs(1)).await.unwrap();
    let spec = SinkSpec::new(Interrupting::new(build_sink(&config).unwrap(), usize::MAX)).batch(50);
    let dispatcher = Dispatcher::start(db.pool.clone(), fast_config(), vec![spec]).unwrap();
    let last = events.last().unwrap().sequence;
    wait_for("the restarted dispatcher", || async { cursor_of(&db.pool, "log").await == Some(last) }).await;
    dispatcher.shutdown().await;

    let mut duplicates = 0;
    for tenant in ["acme", "globex"] {
        let mine: Vec<Event> = events.iter().filter(|e| e.tenant_id == tenant).cloned().collect();
        let records = tokio::task::block_in_place(|| read_topic(&bootstrap, &format!("{prefix}.{tenant}"), mine.len()));
        for record in &records {
            let event: Event = serde_json::from_slice(&record.value).unwrap();
            assert_eq!(event.id, record.headers["outbox-id"]);
        }
        duplicates += check_at_least_once(&records, &mine, saved);
    }
    assert_eq!(duplicates, 25, "the half batch sent before the kill, sent again");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_message_over_the_size_limit_is_refused_with_its_index() {
    let bootstrap = kafka_bootstrap();
    let db = db().await;
    let events = publish_and_read(&db.pool, &mixed(2)).await;
    let prefix = unique("t");
    let mut config = kafka("limit", &bootstrap, &prefix);
    config.properties.insert("message.max.bytes".into(), PropertyValue::Integer(10_000));
    let sink = build_sink(&config).unwrap();
    let mut large = events[0].clone();
    large.data = json!({ "pad": "x".repeat(20_000) }).into();
    let error = sink.deliver(&[events[0].clone(), large, events[1].clone()]).await.unwrap_err();
    assert!(!error.is_retryable(), "{error}");
    assert_eq!(error.failed_at(), Some(1), "{error}");
    sink.deliver(&events[1..]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn cloudevents_and_protobuf_values() {
    let bootstrap = kafka_bootstrap();
    let db = db().await;
    let events: Vec<Event> =
        publish_and_read(&db.pool, &mixed(3)).await.into_iter().filter(|e| e.tenant_id == "acme").collect();
    for encoding in [Encoding::CloudEvents, Encoding::Protobuf] {
        let prefix = unique("t");
        let mut config = kafka("encoded", &bootstrap, &prefix);
        config.encoding = encoding;
        build_sink(&config).unwrap().deliver(&events).await.unwrap();
        let records = tokio::task::block_in_place(|| read_topic(&bootstrap, &format!("{prefix}.acme"), events.len()));
        assert_eq!(check_at_least_once(&records, &events, None), 0);
        for record in &records {
            let id = &record.headers["outbox-id"];
            match encoding {
                Encoding::Protobuf => {
                    let decoded: ProtoEvent = prost::Message::decode(record.value.as_slice()).unwrap();
                    assert_eq!(&decoded.id, id);
                }
                _ => {
                    let cloud: serde_json::Value = serde_json::from_slice(&record.value).unwrap();
                    assert_eq!((cloud["id"].as_str(), cloud["specversion"].as_str()), (Some(id.as_str()), Some("1.0")));
                }
            }
        }
    }
}

#[tokio::test]
async fn an_unreachable_broker_is_a_retryable_failure() {
    let mut config = kafka("nowhere", "127.0.0.1:1", "t");
    config.timeout_ms = Some(500);
    let sink = build_sink(&config).unwrap();
    let db = db().await;
    let events = publish_and_read(&db.pool, &mixed(1)).await;
    let error = sink.deliver(&events).await.unwrap_err();
    assert!(error.is_retryable(), "{error}");
}
