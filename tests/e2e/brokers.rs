//! `outbox serve` running the `rabbitmq` and `kafka` sinks, killed with SIGKILL in the middle
//! of a batch and restarted: the RabbitMQ stream (the stream protocol) holds the tenant's
//! events once each, in order, its broker having dropped what the restarted process sent
//! again; the Kafka topics hold every event with its id header, per subject in order within a
//! partition, the duplicates all after the saved cursor. A poison event over the brokers'
//! size limit is dead-lettered by both while its neighbours go through.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use outbox_core::Limits;
use outbox_core::{Event, NewEvent, Position};
use outbox_e2e::services::{kafka_bootstrap, rabbitmq_stream_url};
use outbox_e2e::wait::until as wait_for;
use outbox_pg::internal::dead_letter::{self, ListRequest};
use outbox_pg::testkit::TestDb;
use outbox_pg::{ReadRequest, read_page};
use rabbitmq_stream_client::Environment;
use rabbitmq_stream_client::types::{Message, OffsetSpecification, SimpleValue};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message as _};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use serde_json::json;

use crate::sinks::{
    ConfigFile, cursor_of, kill_between_delivery_and_record, publish, restart_until_recorded, serve, unique,
};

/// `n` events of tenants acme and globex over ten subjects.
fn events(n: usize) -> Vec<NewEvent> {
    (0..n)
        .map(|i| {
            let kind = ["reservation.active", "node.joined"][i % 2];
            NewEvent::new(kind, ["acme", "globex"][i % 3 % 2], format!("node/n{}", i % 10), json!({ "n": i }))
        })
        .collect()
}

// ---- RabbitMQ ----

async fn environment(url: &str) -> Environment {
    let parsed = url::Url::parse(url).expect("a rabbitmq-stream:// URL");
    Environment::builder()
        .host(parsed.host_str().unwrap_or("127.0.0.1"))
        .port(parsed.port().unwrap_or(5552))
        .build()
        .await
        .expect("connecting to RabbitMQ's stream port")
}

/// Reads `stream` from its first offset in the background, as soon as it exists.
struct StreamReader {
    seen: Arc<parking_lot::Mutex<Vec<Message>>>,
    task: tokio::task::JoinHandle<()>,
}

impl StreamReader {
    fn start(url: &str, stream: &str) -> StreamReader {
        let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let (url, stream, keep) = (url.to_owned(), stream.to_owned(), seen.clone());
        let task = tokio::spawn(async move {
            let environment = environment(&url).await;
            let mut consumer = loop {
                match environment.consumer().offset(OffsetSpecification::First).build(&stream).await {
                    Ok(consumer) => break consumer,
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            };
            while let Some(Ok(delivery)) = consumer.next().await {
                keep.lock().push(delivery.message().clone());
            }
        });
        StreamReader { seen, task }
    }

    fn len(&self) -> usize {
        self.seen.lock().len()
    }

    /// Everything read once `count` arrived and nothing more came for a second.
    async fn settled(&self, count: usize) -> Vec<Message> {
        wait_for("the stream to hold every event", Duration::from_secs(60), || async { self.len() >= count }).await;
        let mut length = self.len();
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if self.len() == length {
                return self.seen.lock().clone();
            }
            length = self.len();
        }
    }
}

impl Drop for StreamReader {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn property(message: &Message, key: &str) -> String {
    match message.application_properties().and_then(|properties| properties.get(key)) {
        Some(SimpleValue::String(text)) => text.clone(),
        other => panic!("{key}: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rabbitmq_stream_holds_the_tenants_events_once_in_order_across_a_sigkill_mid_batch_and_restart() {
    let url = rabbitmq_stream_url();
    let db = TestDb::new().await;
    let all = publish(&db, &events(1500)).await;
    let acme: Vec<Event> = all.iter().filter(|e| e.tenant_id == "acme").cloned().collect();
    let stream = unique("e2e-outbox-");
    let config = ConfigFile::new(&format!(
        "[[sinks]]\nid = \"stream\"\nkind = \"rabbitmq\"\nurl = \"{url}\"\nstream = \"{stream}\"\ntenant = \"acme\"\nbatch = 250\n"
    ));
    let reader = StreamReader::start(&url, &stream);
    // Killed once the first batch is in the stream, with the second one on its way.
    kill_between_delivery_and_record(&db, &config, "stream", 250, || async { reader.len() }).await;
    let before_restart = reader.len();
    assert!(before_restart >= 250, "the first batch was in the stream before the kill");
    restart_until_recorded(&db, &config, "stream", all.last().unwrap().sequence).await;

    let seen = reader.settled(acme.len()).await;
    assert_eq!(seen.len(), acme.len(), "the {before_restart} events sent again were dropped by the broker");
    for (message, expected) in seen.iter().zip(&acme) {
        let event: Event = serde_json::from_slice(message.data().unwrap()).unwrap();
        assert_eq!(&event, expected, "the tenant's events once each, in order");
        assert_eq!(property(message, "outbox-id"), expected.id);
    }
    let _ = environment(&url).await.delete_stream(&stream).await;
}

// ---- Kafka ----

fn consumer(bootstrap: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", unique("outbox-e2e-"))
        .set("enable.auto.commit", "false")
        .create()
        .expect("a Kafka consumer")
}

/// How many records the topics hold (the sum of their partitions' high watermarks).
fn records_in(bootstrap: &str, topics: &[String]) -> usize {
    let consumer = consumer(bootstrap);
    let mut total = 0;
    for topic in topics {
        let Ok(metadata) = consumer.fetch_metadata(Some(topic), Duration::from_secs(5)) else { continue };
        for partition in metadata.topics().iter().flat_map(|t| t.partitions()) {
            if let Ok((_, high)) = consumer.fetch_watermarks(topic, partition.id(), Duration::from_secs(5)) {
                total += usize::try_from(high).unwrap_or(0);
            }
        }
    }
    total
}

/// Every record of `topic`: (partition, key, `outbox-id`, value), by partition then offset.
fn read_topic(bootstrap: &str, topic: &str, count: usize) -> Vec<(i32, String, String, Vec<u8>)> {
    let consumer = consumer(bootstrap);
    let metadata = consumer.fetch_metadata(Some(topic), Duration::from_secs(10)).expect("topic metadata");
    let mut assignment = TopicPartitionList::new();
    for partition in metadata.topics()[0].partitions() {
        assignment.add_partition_offset(topic, partition.id(), Offset::Beginning).unwrap();
    }
    consumer.assign(&assignment).unwrap();
    let (mut records, deadline) = (Vec::new(), Instant::now() + Duration::from_secs(60));
    let mut quiet_since: Option<Instant> = None;
    loop {
        match consumer.poll(Duration::from_millis(100)) {
            Some(message) => {
                let message = message.expect("a record");
                let id = message
                    .headers()
                    .and_then(|headers| headers.iter().find(|h| h.key == "outbox-id").and_then(|h| h.value))
                    .map(|v| String::from_utf8_lossy(v).into_owned())
                    .expect("an outbox-id header");
                let key = String::from_utf8_lossy(message.key().unwrap_or_default()).into_owned();
                records.push((
                    (message.partition(), message.offset()),
                    key,
                    id,
                    message.payload().unwrap_or_default().to_vec(),
                ));
                quiet_since = None;
            }
            None if records.len() >= count => {
                if quiet_since.get_or_insert_with(Instant::now).elapsed() > Duration::from_secs(1) {
                    break;
                }
            }
            None => assert!(Instant::now() < deadline, "only {} of {count} records in {topic}", records.len()),
        }
    }
    records.sort_by_key(|(at, ..)| *at);
    records.into_iter().map(|((partition, _), key, id, value)| (partition, key, id, value)).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn kafka_topics_hold_every_event_with_its_id_in_subject_order_across_a_sigkill_mid_batch_and_restart() {
    let bootstrap = kafka_bootstrap();
    let db = TestDb::new().await;
    let all = publish(&db, &events(1500)).await;
    let prefix = unique("e2e");
    let config = ConfigFile::new(&format!(
        "[[sinks]]\nid = \"log\"\nkind = \"kafka\"\nbrokers = \"{bootstrap}\"\ntopic = \"{prefix}.{{tenantId}}\"\nbatch = 250\n\
         [sinks.properties]\n\"compression.type\" = \"zstd\"\n"
    ));
    let topics = [format!("{prefix}.acme"), format!("{prefix}.globex")];
    let count = || {
        let (bootstrap, topics) = (bootstrap.clone(), topics.clone());
        async move { tokio::task::spawn_blocking(move || records_in(&bootstrap, &topics)).await.unwrap() }
    };
    kill_between_delivery_and_record(&db, &config, "log", 250, count).await;
    // The kill came before any save: the cursor the restarted process starts from.
    let saved = cursor_of(&db, "log").await.unwrap_or(Position::START);
    restart_until_recorded(&db, &config, "log", all.last().unwrap().sequence).await;

    let mut duplicates = 0;
    for (tenant, topic) in ["acme", "globex"].into_iter().zip(&topics) {
        let mine: Vec<&Event> = all.iter().filter(|e| e.tenant_id == tenant).collect();
        let by_id: HashMap<&str, &Event> = mine.iter().map(|e| (e.id.as_str(), *e)).collect();
        let (bootstrap, topic_name, want) = (bootstrap.clone(), topic.clone(), mine.len());
        let records = tokio::task::spawn_blocking(move || read_topic(&bootstrap, &topic_name, want)).await.unwrap();
        let (mut seen, mut last) = (HashSet::new(), HashMap::new());
        for (partition, key, id, value) in &records {
            let event = by_id[id.as_str()];
            let decoded: Event = serde_json::from_slice(value).unwrap();
            assert_eq!((&decoded, key), (event, &event.subject), "the value is the event, the key its subject");
            if !seen.insert(id.clone()) {
                duplicates += 1;
                assert!(event.sequence > saved, "a duplicate lies after the saved cursor");
                continue;
            }
            if let Some(previous) = last.insert((*partition, key.clone()), event.sequence) {
                assert!(previous < event.sequence, "{key} out of order in partition {partition}");
            }
        }
        assert_eq!(seen.len(), by_id.len(), "every event of {tenant} is in {topic}");
    }
    assert!(duplicates >= 250, "what was delivered before the kill came again ({duplicates} duplicates)");
}

// ---- A poison event, both sinks ----

#[tokio::test(flavor = "multi_thread")]
async fn an_event_over_the_brokers_size_limit_is_dead_lettered_by_both_and_its_neighbours_go_through() {
    let (url, bootstrap) = (rabbitmq_stream_url(), kafka_bootstrap());
    let db = TestDb::new().await;
    let mut batch = events(5);
    for event in &mut batch {
        event.tenant_id = "acme".into();
    }
    batch[2].data = json!({ "pad": "x".repeat(1_100_000) });
    let publisher = outbox_pg::Publisher::new().with_limits(Limits { max_data_bytes: 2 << 20, ..Limits::default() });
    let mut tx = db.pool.begin().await.unwrap();
    publisher.publish_many(&mut *tx, &batch).await.unwrap();
    tx.commit().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let published = loop {
        let page = read_page(&db.pool, &ReadRequest::all()).await.unwrap().events;
        if page.len() == 5 {
            break page;
        }
        assert!(Instant::now() < deadline, "the events did not become visible");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let (stream, prefix) = (unique("e2e-outbox-"), unique("e2e"));
    let config = ConfigFile::new(&format!(
        "[[sinks]]\nid = \"stream\"\nkind = \"rabbitmq\"\nurl = \"{url}\"\nstream = \"{stream}\"\nmax_attempts = 2\n\n\
         [[sinks]]\nid = \"log\"\nkind = \"kafka\"\nbrokers = \"{bootstrap}\"\ntopic = \"{prefix}.{{tenantId}}\"\nmax_attempts = 2\n"
    ));
    let (mut server, _) = serve(&db, "sinks", &config);
    let last = published.last().unwrap().sequence;
    for sink in ["stream", "log"] {
        wait_for("the poison to be passed", Duration::from_secs(60), || async {
            cursor_of(&db, sink).await == Some(last)
        })
        .await;
        let letters = dead_letter::list(&db.pool, &ListRequest::pending(sink)).await.unwrap();
        assert_eq!(letters.len(), 1, "{sink}: one dead letter");
        assert_eq!(letters[0].event.id, published[2].id, "{sink}: the large event");
    }
    let status = server.signal_and_wait("TERM", Duration::from_secs(30));
    assert!(status.success(), "{status}");

    let others: Vec<&Event> = published.iter().filter(|e| e.id != published[2].id).collect();
    let reader = StreamReader::start(&url, &stream);
    let seen = reader.settled(4).await;
    let ids: Vec<String> = seen.iter().map(|m| property(m, "outbox-id")).collect();
    assert_eq!(ids, others.iter().map(|e| e.id.clone()).collect::<Vec<_>>(), "the neighbours, in order, once");
    let topic = format!("{prefix}.acme");
    let records = tokio::task::spawn_blocking(move || read_topic(&bootstrap, &topic, 4)).await.unwrap();
    let mut ids: Vec<String> = records.into_iter().map(|(_, _, id, _)| id).collect();
    ids.sort();
    let mut expected: Vec<String> = others.iter().map(|e| e.id.clone()).collect();
    expected.sort();
    assert_eq!(ids, expected, "the neighbours, once each");
    let _ = environment(&url).await.delete_stream(&stream).await;
}
