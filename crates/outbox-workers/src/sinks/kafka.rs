//! The `kafka` sink: an idempotent producer, every delivery report awaited (SPEC §7.5).
//!
//! Each event goes to the topic its template gives (`outbox.{tenantId}` by default) with the
//! key = its subject, so the default partitioner (`murmur2_random`, the Java client's) keeps
//! one subject in one partition, in order; and the headers `outbox-id`, `outbox-type`,
//! `outbox-tenant` and `outbox-sequence` (the position). The producer is idempotent
//! (`enable.idempotence=true`, `acks=all`): librdkafka's own retries never duplicate or
//! reorder within a partition. A batch is handed to librdkafka whole, then every delivery
//! report is awaited; the batch counts when every one succeeded. The first failure reports
//! its index ([`SinkError::at`]): the events before it are recorded, the rest sent again.
//!
//! Delivery is at least once: events after a failed one may already be in their partitions
//! when the dispatcher sends them again, and a process killed between the reports and its
//! cursor save sends its last batch again. Consumers deduplicate on `outbox-id`.
//!
//! # Failures
//!
//! A message librdkafka or the broker refuses for good (larger than `message.max.bytes`, an
//! invalid or unknown topic, a policy violation) is a refusal: the dispatcher dead-letters it
//! once the event after it goes through. Everything else (brokers unreachable, a delivery
//! that timed out after `timeout_ms`, a full queue) is retried. A fatal producer error
//! drops the producer; the next delivery creates a new one.
//!
//! # Properties
//!
//! `[sinks.properties]` adds librdkafka properties. Each is checked when the configuration
//! is loaded, by librdkafka itself, and refused naming it; `bootstrap.servers` (that is
//! `brokers`), `enable.idempotence`, `acks` and `transactional.id` are the sink's own.
//!
//! The producer is created (and connects) on the first delivery or in [`Sink::prepare`],
//! never when the sink is built.

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::future::BoxFuture;
use outbox_core::Event;
use parking_lot::Mutex;
use rdkafka::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};

use crate::config::{DEFAULT_TOPIC, PropertyValue, SinkConfig};
use crate::encoding::Encoder;
use crate::template::Template;
use crate::{Error, Result, Sink, SinkError};

/// The properties the sink sets itself and refuses from `[sinks.properties]`.
pub const OWN_PROPERTIES: &[&str] = &["bootstrap.servers", "enable.idempotence", "acks", "transactional.id"];

/// Publishes events to Kafka topics with an idempotent producer.
pub struct KafkaSink {
    id: String,
    topic: Template,
    encoder: Encoder,
    timeout: Duration,
    config: ClientConfig,
    producer: Mutex<Option<FutureProducer>>,
}

impl KafkaSink {
    /// The sink a `kind = "kafka"` table describes; its properties are checked here.
    pub fn from_config(config: &SinkConfig) -> Result<KafkaSink> {
        let topic = config.template("topic", config.topic.as_deref(), DEFAULT_TOPIC)?;
        let brokers = config.brokers.as_deref().unwrap_or_default();
        if brokers.trim().is_empty() {
            return Err(Error::config(config.key_name("brokers"), "must name at least one host:port"));
        }
        let timeout = config.timeout();
        let client = client_config(config, brokers, &config.properties, timeout)?;
        Ok(KafkaSink {
            id: config.id.clone(),
            topic,
            encoder: config.encoder(),
            timeout,
            config: client,
            producer: Mutex::new(None),
        })
    }

    /// The producer, created on first use (or again after a fatal error).
    fn producer(&self) -> std::result::Result<FutureProducer, SinkError> {
        let mut slot = self.producer.lock();
        if let Some(producer) = slot.as_ref() {
            if producer.client().fatal_error().is_none() {
                return Ok(producer.clone());
            }
            tracing::warn!(sink = %self.id, "the Kafka producer hit a fatal error; creating a new one");
        }
        let producer: FutureProducer =
            self.config.create().map_err(|e| SinkError::retryable(format!("creating the Kafka producer: {e}")))?;
        *slot = Some(producer.clone());
        Ok(producer)
    }

    async fn produce(&self, batch: &[Event]) -> std::result::Result<(), SinkError> {
        let producer = self.producer()?;
        let mut reports = Vec::with_capacity(batch.len());
        let mut refused = None;
        for (index, event) in batch.iter().enumerate() {
            let (topic, payload, sequence) =
                (self.topic.render(event), self.encoder.encode(event), event.sequence.to_string());
            let headers = OwnedHeaders::new_with_capacity(4)
                .insert(Header { key: "outbox-id", value: Some(event.id.as_str()) })
                .insert(Header { key: "outbox-type", value: Some(event.event_type.as_str()) })
                .insert(Header { key: "outbox-tenant", value: Some(event.tenant_id.as_str()) })
                .insert(Header { key: "outbox-sequence", value: Some(sequence.as_str()) });
            let record = FutureRecord::to(&topic).key(event.subject.as_str()).payload(&payload).headers(headers);
            match producer.send_result(record) {
                Ok(report) => reports.push(report),
                Err((error, _)) => {
                    refused = Some(judge(&format!("producing {}", event.id), &error).at(index));
                    break;
                }
            }
        }
        // librdkafka gives up on a message after `message.timeout.ms` (the sink's timeout) and
        // reports it; the wait here is a guard beyond that.
        let guard = self.timeout + Duration::from_secs(5);
        for (index, report) in reports.into_iter().enumerate() {
            let event = &batch[index].id;
            match tokio::time::timeout(guard, report).await {
                Ok(Ok(Ok(_delivery))) => {}
                Ok(Ok(Err((error, _)))) => return Err(judge(&format!("delivering {event}"), &error).at(index)),
                Ok(Err(_canceled)) => {
                    return Err(SinkError::retryable(format!("the Kafka producer dropped {event}")).at(index));
                }
                Err(_) => {
                    return Err(
                        SinkError::retryable(format!("no delivery report for {event} within {guard:?}")).at(index)
                    );
                }
            }
        }
        refused.map_or(Ok(()), Err)
    }
}

/// The librdkafka configuration of a sink: its own settings, then the checked properties.
fn client_config(
    config: &SinkConfig,
    brokers: &str,
    properties: &BTreeMap<String, PropertyValue>,
    timeout: Duration,
) -> Result<ClientConfig> {
    let mut client = ClientConfig::new();
    client
        .set("bootstrap.servers", brokers)
        .set("client.id", format!("outbox-{}", config.id))
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("partitioner", "murmur2_random")
        .set("message.timeout.ms", timeout.as_millis().max(1).to_string());
    for (name, value) in properties {
        let key = config.key_name(&format!("properties.{name:?}"));
        if OWN_PROPERTIES.contains(&name.as_str()) {
            return Err(Error::config(key, "is set by the sink itself (brokers, an idempotent producer)"));
        }
        let mut alone = ClientConfig::new();
        alone.set(name, value.to_string());
        if let Err(error) = alone.create_native_config() {
            return Err(Error::config(key, refusal(&error)));
        }
        client.set(name, value.to_string());
    }
    // Properties that are fine alone may still conflict with the sink's own.
    client.create_native_config().map_err(|error| Error::config(config.key_name("properties"), refusal(&error)))?;
    Ok(client)
}

fn refusal(error: &KafkaError) -> String {
    match error {
        KafkaError::ClientConfig(_, description, _, _) => format!("librdkafka refuses it: {description}"),
        other => format!("librdkafka refuses it: {other}"),
    }
}

/// A failure of one message: a refusal when another attempt cannot pass, else retryable.
fn judge(what: &str, error: &KafkaError) -> SinkError {
    let message = format!("{what}: {error}");
    match error.rdkafka_error_code() {
        Some(
            RDKafkaErrorCode::MessageSizeTooLarge
            | RDKafkaErrorCode::InvalidMessageSize
            | RDKafkaErrorCode::MessageBatchTooLarge
            | RDKafkaErrorCode::InvalidMessage
            | RDKafkaErrorCode::InvalidRecord
            | RDKafkaErrorCode::InvalidTopic
            | RDKafkaErrorCode::UnknownTopic
            | RDKafkaErrorCode::UnknownPartition
            | RDKafkaErrorCode::PolicyViolation,
        ) => SinkError::refused(message),
        _ => SinkError::retryable(message),
    }
}

impl Sink for KafkaSink {
    fn id(&self) -> &str {
        &self.id
    }

    fn deliver<'a>(&'a self, batch: &'a [Event]) -> BoxFuture<'a, std::result::Result<(), SinkError>> {
        Box::pin(self.produce(batch))
    }

    /// Creates the producer, which starts connecting to the brokers.
    fn prepare(&self) -> BoxFuture<'_, std::result::Result<(), SinkError>> {
        Box::pin(std::future::ready(self.producer().map(drop)))
    }
}
