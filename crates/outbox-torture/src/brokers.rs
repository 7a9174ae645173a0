//! The read-back of what the servers' broker sinks stored in the run's own brokers
//! (`outbox_services::Broker`, which the faults stop and start again).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use outbox_core::Position;
use serde::Deserialize;

use super::checker::Received;

/// The JetStream stream the `nats` sink publishes into.
pub(crate) const NATS_STREAM: &str = "TORTURE";

#[derive(Deserialize)]
struct Stored {
    id: String,
    sequence: Position,
}

/// Every message of the JetStream stream, in its order, as (event id, position), with the
/// number of messages whose `Nats-Msg-Id` is not their event's id.
///
/// Read through an ordered pull consumer, which fetches in batches: one `get_raw_message` per
/// sequence costs a round trip each, minutes for a long run's million messages.
pub(crate) async fn nats_read_back(url: &str) -> anyhow::Result<(Vec<Received>, usize)> {
    use async_nats::jetstream::consumer::{DeliverPolicy, pull};
    use futures_util::StreamExt;

    let client = async_nats::connect(url).await?;
    let context = async_nats::jetstream::new(client);
    let Ok(mut stream) = context.get_stream(NATS_STREAM).await else { return Ok((Vec::new(), 0)) };
    let state = stream.info().await?.state.clone();
    let mut received = Vec::with_capacity(usize::try_from(state.messages).unwrap_or(0));
    let mut wrong_ids = 0;
    if state.messages == 0 {
        return Ok((received, wrong_ids));
    }
    let consumer = stream
        .create_consumer(pull::OrderedConfig { deliver_policy: DeliverPolicy::All, ..Default::default() })
        .await
        .map_err(|error| anyhow::anyhow!("creating an ordered consumer: {error}"))?;
    let mut messages = consumer.messages().await.map_err(|error| anyhow::anyhow!("reading the stream: {error}"))?;
    while let Some(message) = tokio::time::timeout(Duration::from_secs(30), messages.next())
        .await
        .context("the JetStream read-back stalled for 30 s")?
    {
        let message = message.map_err(|error| anyhow::anyhow!("reading the stream: {error}"))?;
        let sequence =
            message.info().map_err(|error| anyhow::anyhow!("a message's metadata: {error}"))?.stream_sequence;
        let stored: Stored = serde_json::from_slice(&message.payload)?;
        let header = message.headers.as_ref().and_then(|headers| headers.get("Nats-Msg-Id"));
        if header.map(|id| id.as_str()) != Some(stored.id.as_str()) {
            wrong_ids += 1;
        }
        received.push(Received { id: stored.id, position: stored.sequence });
        if sequence >= state.last_sequence {
            break;
        }
    }
    Ok((received, wrong_ids))
}

/// How many entries one XRANGE of [`redis_read_back`] asks for.
const REDIS_PAGE: usize = 10_000;

/// Every entry of the Redis streams `torture:<tenant>`, merged in id order, as (event id,
/// the entry's id read as a position), with the number whose id is not their event's position.
pub(crate) async fn redis_read_back(url: &str, tenants: &[&str]) -> anyhow::Result<(Vec<Received>, usize)> {
    use redis::AsyncCommands;
    let client = redis::Client::open(url)?;
    let mut connection = client.get_multiplexed_async_connection().await?;
    let mut received = Vec::new();
    let mut wrong_ids = 0;
    for tenant in tenants {
        let key = format!("torture:{tenant}");
        // Page by page: one XRANGE of a long run's million entries outlasts the client's
        // response timeout.
        let mut start = "-".to_owned();
        let mut entries = Vec::new();
        loop {
            let reply: redis::streams::StreamRangeReply =
                connection.xrange_count(&key, &start, "+", REDIS_PAGE).await?;
            let Some(last) = reply.ids.last() else { break };
            start = format!("({}", last.id);
            let full = reply.ids.len() == REDIS_PAGE;
            entries.extend(reply.ids);
            if !full {
                break;
            }
        }
        for entry in entries {
            let event: String = entry.get("event").context("an entry without its event")?;
            let stored: Stored = serde_json::from_str(&event)?;
            let position = Position::parse(&entry.id.replace('-', ".")).context("an entry id")?;
            if position != stored.sequence || entry.get::<String>("id").as_deref() != Some(stored.id.as_str()) {
                wrong_ids += 1;
            }
            received.push(Received { id: stored.id, position });
        }
    }
    received.sort_by_key(|received| received.position);
    Ok((received, wrong_ids))
}

/// Every message of the RabbitMQ stream `stream`, in its order, as (event id, position). The
/// broker drops a message whose publishing id it already stored for the producer, so a wrong
/// number shows here as a lost event (numbered too low) or a duplicate (numbered anew).
pub(crate) async fn rabbitmq_read_back(url: &str, stream: &str) -> anyhow::Result<Vec<Received>> {
    use futures_util::StreamExt;
    use rabbitmq_stream_client::types::OffsetSpecification;

    let environment = outbox_workers::sinks::RabbitmqEndpoint::parse(url)
        .map_err(|error| anyhow::anyhow!("the RabbitMQ URL: {error}"))?
        .environment()
        .await
        .map_err(|error| anyhow::anyhow!("connecting to RabbitMQ: {error}"))?;
    let Ok(mut consumer) = environment.consumer().offset(OffsetSpecification::First).build(stream).await else {
        return Ok(Vec::new());
    };
    let mut received = Vec::new();
    // The stream's end: no message for a while after the last (the sinks have drained).
    while let Ok(Some(delivery)) = tokio::time::timeout(Duration::from_secs(3), consumer.next()).await {
        let delivery = delivery.map_err(|error| anyhow::anyhow!("reading the stream: {error}"))?;
        let message = delivery.message();
        let body = message.data().context("a message without a body")?;
        let stored: Stored = serde_json::from_slice(body)?;
        received.push(Received { id: stored.id, position: stored.sequence });
    }
    let _ = consumer.handle().close().await;
    Ok(received)
}

/// A Kafka record as read back: its partition, key (the event's subject) and event.
pub(crate) struct Keyed {
    pub(crate) partition: i32,
    pub(crate) key: String,
    pub(crate) received: Received,
}

/// A consumer of the Kafka topic the sink writes, reading from its start while the run goes
/// on: librdkafka's mock broker keeps at most 5 MiB (or 100,000 batches) per partition and
/// drops the oldest beyond, so a long run's topic cannot be read back at the end.
pub(crate) struct KafkaFollower {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<anyhow::Result<KafkaRecord>>,
}

/// What a [`KafkaFollower`] read: every record, in partition order then offset order, and
/// the offsets it never saw (pruned by the broker before it read them: those events cannot
/// be checked, and the run fails).
pub(crate) struct KafkaRecord {
    pub(crate) records: Vec<Keyed>,
    pub(crate) skipped: i64,
}

impl KafkaFollower {
    /// Starts following `topic` at `bootstrap` (waiting for the sink to create it).
    pub(crate) fn start(bootstrap: &str, topic: &str) -> KafkaFollower {
        let stop = Arc::new(AtomicBool::new(false));
        let (bootstrap, topic, stopping) = (bootstrap.to_owned(), topic.to_owned(), stop.clone());
        let thread = std::thread::spawn(move || follow(&bootstrap, &topic, &stopping));
        KafkaFollower { stop, thread }
    }

    /// Reads on until every partition's high watermark (the sinks have drained), then stops.
    pub(crate) fn finish(self) -> anyhow::Result<KafkaRecord> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().map_err(|_| anyhow::anyhow!("the Kafka follower panicked"))?
    }
}

fn follow(bootstrap: &str, topic: &str, stop: &AtomicBool) -> anyhow::Result<KafkaRecord> {
    use rdkafka::Message;
    use rdkafka::config::ClientConfig;
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::{Offset, TopicPartitionList};

    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", format!("torture-follower-{}", std::process::id()))
        .set("enable.auto.commit", "false")
        .create()?;
    // The topic exists once the sink first produced to it.
    let partitions = loop {
        let metadata = consumer.fetch_metadata(Some(topic), Duration::from_secs(5));
        let count = metadata
            .ok()
            .and_then(|m| m.topics().first().filter(|t| t.error().is_none()).map(|t| t.partitions().len()));
        match count {
            Some(count) if count > 0 => break i32::try_from(count)?,
            _ if stop.load(Ordering::SeqCst) => return Ok(KafkaRecord { records: Vec::new(), skipped: 0 }),
            _ => std::thread::sleep(Duration::from_millis(200)),
        }
    };
    let mut assignment = TopicPartitionList::new();
    for partition in 0..partitions {
        assignment.add_partition_offset(topic, partition, Offset::Beginning)?;
    }
    consumer.assign(&assignment)?;
    let mut next = vec![0i64; usize::try_from(partitions)?];
    let mut record = KafkaRecord { records: Vec::new(), skipped: 0 };
    let mut ends: Option<(Vec<i64>, std::time::Instant)> = None;
    loop {
        if let Some((high, since)) = &ends {
            if next.iter().zip(high).all(|(next, high)| next >= high) {
                break;
            }
            if since.elapsed() > Duration::from_secs(120) {
                anyhow::bail!("the Kafka follower stalled: offsets {next:?}, the ends {high:?}");
            }
        } else if stop.load(Ordering::SeqCst) {
            let high = (0..partitions)
                .map(|p| consumer.fetch_watermarks(topic, p, Duration::from_secs(10)).map(|(_, high)| high))
                .collect::<Result<Vec<_>, _>>()?;
            ends = Some((high, std::time::Instant::now()));
        }
        // Errors (a broker down) are librdkafka's to recover from; it reconnects by itself.
        let Some(Ok(message)) = consumer.poll(Duration::from_millis(200)) else { continue };
        let slot = usize::try_from(message.partition())?;
        record.skipped += message.offset() - next[slot];
        next[slot] = message.offset() + 1;
        let stored: Stored = serde_json::from_slice(message.payload().unwrap_or_default())?;
        record.records.push(Keyed {
            partition: message.partition(),
            key: String::from_utf8_lossy(message.key().unwrap_or_default()).into_owned(),
            received: Received { id: stored.id, position: stored.sequence },
        });
    }
    record.records.sort_by_key(|keyed| keyed.partition);
    Ok(record)
}
