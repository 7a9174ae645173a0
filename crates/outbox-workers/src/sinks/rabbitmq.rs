//! The `rabbitmq` sink: a RabbitMQ stream over the stream protocol, where nothing is
//! duplicated (SPEC §7.5).
//!
//! The sink publishes through a named producer, `outbox-<sink id>`, and gives every event
//! the publishing id the dispatcher numbered it with ([`Sink::deliver_numbered`]): its place
//! among the sink's events, saved beside the cursor in the same fenced statement. A batch
//! delivered again after a crash or a failed save carries the same ids, and the broker
//! drops (and confirms) every id at or below the last one it stored for that producer: the
//! stream holds each event once, in order.
//!
//! Each message is the encoded event as its body, with the application properties
//! `outbox-id`, `outbox-type`, `outbox-tenant`, `outbox-subject` and `outbox-sequence`
//! (the position) and the encoding's content type. Publish frames are kept within the
//! broker's frame size ([`FRAME_MAX`], RabbitMQ's default `stream.frame_max`): a batch goes
//! out in groups that fit, each group confirmed before the next is sent, and an event that
//! cannot fit in a frame on its own is refused for good (the dispatcher dead-letters it once
//! the event after it goes through) without being sent.
//!
//! # Failures
//!
//! A connection or publish failure, or a confirm that does not come within `timeout_ms`,
//! drops the connection and is retried; the next delivery connects afresh and the broker's
//! deduplication covers what the old connection got through. A message the broker refused
//! (a publish error) while a later one of the same group was stored can never be stored any
//! more (its id is now below the producer's last): that refusal is final, so the event
//! becomes a dead letter once its neighbour is confirmed instead of being dropped silently.
//!
//! A dead letter's replay has no number: it is published by an unnamed producer, without
//! deduplication (at least once, like every replay).
//!
//! The stream is created when absent; an existing one is used as it is.

use std::time::Duration;

use futures_util::future::BoxFuture;
use outbox_core::Event;
use rabbitmq_stream_client::error::{ClientError, ProducerPublishError, StreamCreateError};
use rabbitmq_stream_client::types::{Message, ResponseCode};
use rabbitmq_stream_client::{ConfirmationStatus, Dedup, Environment, NoDedup, Producer};
use rabbitmq_stream_protocol::codec::Encoder as _;
use tokio::sync::Mutex;

use crate::config::SinkConfig;
use crate::encoding::Encoder;
use crate::{Error, Result, Sink, SinkError};

/// The largest publish frame the sink sends: RabbitMQ's default `stream.frame_max` (1 MiB).
pub const FRAME_MAX: usize = 1024 * 1024;
/// A publish frame's own bytes (size, key, version, publisher id, message count), with room.
const FRAME_OVERHEAD: usize = 64;
/// Each message's bytes in a publish frame besides the message: publishing id and length.
const MESSAGE_OVERHEAD: usize = 12;
/// The stream protocol's port when the URL names none.
const DEFAULT_PORT: u16 = 5552;

/// Where the broker is and who the sink is there, from a `rabbitmq-stream://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The host name or address.
    pub host: String,
    /// The stream protocol's port (default 5552).
    pub port: u16,
    /// The user (default `guest`).
    pub username: String,
    /// The password (default `guest`).
    pub password: String,
    /// The virtual host (default `/`).
    pub vhost: String,
}

impl Endpoint {
    /// Parses `rabbitmq-stream://[user[:password]@]host[:port][/vhost]`; the vhost is
    /// percent-encoded (`%2f` is `/`, the default).
    pub fn parse(text: &str) -> std::result::Result<Endpoint, String> {
        let url = url::Url::parse(text).map_err(|e| format!("{text:?} is not a URL: {e}"))?;
        if url.scheme() != "rabbitmq-stream" {
            return Err(format!("{text:?} must start with rabbitmq-stream:// (the stream protocol, port 5552)"));
        }
        let host = url.host_str().filter(|host| !host.is_empty()).ok_or(format!("{text:?} names no host"))?;
        let decode = |part: &str| percent_encoding::percent_decode_str(part).decode_utf8_lossy().into_owned();
        let vhost = decode(url.path().trim_start_matches('/'));
        Ok(Endpoint {
            host: host.trim_start_matches('[').trim_end_matches(']').to_owned(),
            port: url.port().unwrap_or(DEFAULT_PORT),
            username: if url.username().is_empty() { "guest".into() } else { decode(url.username()) },
            password: url.password().map_or_else(|| "guest".into(), decode),
            vhost: if vhost.is_empty() { "/".into() } else { vhost },
        })
    }

    /// Connects to the broker (one connection for metadata; producers open their own).
    pub async fn environment(&self) -> std::result::Result<Environment, ClientError> {
        Environment::builder()
            .host(&self.host)
            .port(self.port)
            .username(&self.username)
            .password(&self.password)
            .virtual_host(&self.vhost)
            .build()
            .await
    }
}

/// The connection and the named producer, kept between deliveries.
struct Connected {
    environment: Environment,
    producer: Producer<Dedup>,
}

/// Publishes events to a RabbitMQ stream with a deduplicating named producer.
pub struct RabbitmqSink {
    id: String,
    endpoint: Endpoint,
    stream: String,
    encoder: Encoder,
    timeout: Duration,
    /// Held for a whole delivery, so that publishing ids leave in order.
    connected: Mutex<Option<Connected>>,
}

impl RabbitmqSink {
    /// The sink a `kind = "rabbitmq"` table describes.
    pub fn from_config(config: &SinkConfig) -> Result<RabbitmqSink> {
        let url = config.url.as_deref().unwrap_or_default();
        let endpoint = Endpoint::parse(url).map_err(|reason| Error::config(config.key_name("url"), reason))?;
        let stream = config.stream.clone().unwrap_or_else(|| "outbox".into());
        if stream.is_empty() || stream.len() > 255 {
            return Err(Error::config(config.key_name("stream"), "must be 1 to 255 characters"));
        }
        Ok(RabbitmqSink {
            id: config.id.clone(),
            endpoint,
            stream,
            encoder: config.encoder(),
            timeout: config.timeout(),
            connected: Mutex::new(None),
        })
    }

    /// The producer name the broker deduplicates on: `outbox-<sink id>`.
    pub fn producer_name(&self) -> String {
        format!("outbox-{}", self.id)
    }

    /// The stream it publishes to.
    pub fn stream(&self) -> &str {
        &self.stream
    }

    async fn connect(&self) -> std::result::Result<Connected, SinkError> {
        let work =
            async {
                let environment = self.endpoint.environment().await.map_err(|e| connecting(&self.endpoint, e))?;
                create_stream(&environment, &self.stream).await?;
                let producer =
                    environment.producer().name(&self.producer_name()).build(&self.stream).await.map_err(|e| {
                        SinkError::retryable(format!("declaring producer {}: {e}", self.producer_name()))
                    })?;
                Ok(Connected { environment, producer })
            };
        tokio::time::timeout(self.timeout, work).await.unwrap_or_else(|_| {
            Err(SinkError::retryable(format!("connecting to RabbitMQ timed out after {:?}", self.timeout)))
        })
    }

    /// Publishes `batch` numbered from `first`, group by group; see the module documentation.
    async fn publish_numbered(&self, batch: &[Event], first: u64) -> std::result::Result<(), SinkError> {
        let mut connected = self.connected.lock().await;
        if connected.is_none() {
            *connected = Some(self.connect().await?);
        }
        let live = connected.as_mut().expect("connected above");
        let messages: Vec<Message> =
            batch.iter().zip(first..).map(|(event, id)| self.message(event, Some(id))).collect();
        let outcome = publish_groups(&messages, self.timeout, &mut Sender::Named(&mut live.producer)).await;
        if outcome.is_err() {
            // Start over on a fresh connection: what this one got through, the broker deduplicates.
            if let Some(old) = connected.take() {
                drop(old.environment);
                let _ = tokio::time::timeout(Duration::from_secs(1), old.producer.close()).await;
            }
        }
        outcome
    }

    /// Publishes `batch` without ids (a dead letter's replay) through an unnamed producer.
    async fn publish_plain(&self, batch: &[Event]) -> std::result::Result<(), SinkError> {
        let _serialized = self.connected.lock().await;
        let work = async {
            let environment = self.endpoint.environment().await.map_err(|e| connecting(&self.endpoint, e))?;
            create_stream(&environment, &self.stream).await?;
            let producer: Producer<NoDedup> = environment
                .producer()
                .build(&self.stream)
                .await
                .map_err(|e| SinkError::retryable(format!("declaring a producer: {e}")))?;
            Ok::<_, SinkError>(producer)
        };
        let producer = tokio::time::timeout(self.timeout, work)
            .await
            .unwrap_or_else(|_| Err(SinkError::retryable("connecting to RabbitMQ timed out")))?;
        let messages: Vec<Message> = batch.iter().map(|event| self.message(event, None)).collect();
        let outcome = publish_groups(&messages, self.timeout, &mut Sender::Plain(&producer)).await;
        let _ = tokio::time::timeout(Duration::from_secs(1), producer.close()).await;
        outcome
    }

    fn message(&self, event: &Event, publishing_id: Option<u64>) -> Message {
        let sequence = event.sequence.to_string();
        let builder = Message::builder()
            .body(self.encoder.encode(event))
            .properties()
            .content_type(self.encoder.content_type())
            .message_builder()
            .application_properties()
            .insert("outbox-id", event.id.as_str())
            .insert("outbox-type", event.event_type.as_str())
            .insert("outbox-tenant", event.tenant_id.as_str())
            .insert("outbox-subject", event.subject.as_str())
            .insert("outbox-sequence", sequence.as_str())
            .message_builder();
        match publishing_id {
            Some(id) => builder.publishing_id(id).build(),
            None => builder.build(),
        }
    }
}

fn connecting(endpoint: &Endpoint, error: ClientError) -> SinkError {
    SinkError::retryable(format!("connecting to RabbitMQ at {}:{}: {error}", endpoint.host, endpoint.port))
}

/// Creates `stream` unless it exists.
async fn create_stream(environment: &Environment, stream: &str) -> std::result::Result<(), SinkError> {
    match environment.stream_creator().create(stream).await {
        Ok(()) => Ok(()),
        Err(StreamCreateError::Create { status: ResponseCode::StreamAlreadyExists, .. }) => Ok(()),
        Err(e) => Err(SinkError::retryable(format!("creating stream {stream}: {e}"))),
    }
}

/// A message's bytes in a publish frame.
fn framed_size(message: &Message) -> usize {
    message.encoded_size() as usize + MESSAGE_OVERHEAD
}

/// A producer a group of messages goes through: the named one (its publishing ids are the
/// messages' own) or an unnamed one (a replay).
enum Sender<'a> {
    Named(&'a mut Producer<Dedup>),
    Plain(&'a Producer<NoDedup>),
}

impl Sender<'_> {
    async fn send(
        &mut self,
        group: Vec<Message>,
    ) -> std::result::Result<Vec<ConfirmationStatus>, ProducerPublishError> {
        match self {
            Sender::Named(producer) => producer.batch_send_with_confirm(group).await,
            Sender::Plain(producer) => producer.batch_send_with_confirm(group).await,
        }
    }
}

/// Sends `messages` in groups that each fit a frame, waiting for every confirm of a group
/// before the next; the first failure reports its index.
async fn publish_groups(
    messages: &[Message],
    timeout: Duration,
    sender: &mut Sender<'_>,
) -> std::result::Result<(), SinkError> {
    let budget = FRAME_MAX - FRAME_OVERHEAD;
    let mut start = 0;
    while start < messages.len() {
        let mut end = start;
        let mut size = 0;
        while end < messages.len() && size + framed_size(&messages[end]) <= budget {
            size += framed_size(&messages[end]);
            end += 1;
        }
        if end == start {
            let too_large = framed_size(&messages[start]);
            return Err(SinkError::refused(format!(
                "the message is {too_large} bytes, more than a stream frame holds ({FRAME_MAX} bytes)"
            ))
            .at(start));
        }
        let group = messages[start..end].to_vec();
        let confirmations = match tokio::time::timeout(timeout, sender.send(group)).await {
            Ok(Ok(confirmations)) => confirmations,
            Ok(Err(e)) => return Err(SinkError::retryable(format!("publishing to RabbitMQ: {e}")).at(start)),
            Err(_) => {
                let message = format!("RabbitMQ did not confirm within {timeout:?}");
                return Err(SinkError::retryable(message).at(start));
            }
        };
        judge_group(&messages[start..end], &confirmations).map_err(|(index, error)| error.at(start + index))?;
        start = end;
    }
    Ok(())
}

/// Every message of a group must be confirmed; see the module documentation for a refusal
/// followed by a stored message.
fn judge_group(group: &[Message], confirmations: &[ConfirmationStatus]) -> std::result::Result<(), (usize, SinkError)> {
    let id_of = |index: usize| group[index].publishing_id().copied();
    let status_of = |index: usize| {
        let id = id_of(index);
        confirmations.iter().find(|c| id.is_some_and(|id| c.publishing_id() == id))
    };
    for index in 0..group.len() {
        match status_of(index) {
            Some(status) if status.confirmed() => continue,
            Some(status) => {
                let later_stored =
                    (index + 1..group.len()).any(|later| status_of(later).is_some_and(|s| s.confirmed()));
                let message = format!("RabbitMQ refused the message: {:?}", status.status());
                let error = if later_stored { SinkError::refused(message) } else { SinkError::retryable(message) };
                return Err((index, error));
            }
            None if id_of(index).is_none() => {
                // Unnumbered (a replay): only the count can be checked.
                if confirmations.iter().all(|c| c.confirmed()) && confirmations.len() == group.len() {
                    return Ok(());
                }
                return Err((0, SinkError::retryable("RabbitMQ did not confirm every message")));
            }
            None => return Err((index, SinkError::retryable("RabbitMQ sent no confirm for the message"))),
        }
    }
    Ok(())
}

impl Sink for RabbitmqSink {
    fn id(&self) -> &str {
        &self.id
    }

    fn deliver<'a>(&'a self, batch: &'a [Event]) -> BoxFuture<'a, std::result::Result<(), SinkError>> {
        Box::pin(self.publish_plain(batch))
    }

    fn deliver_numbered<'a>(
        &'a self,
        batch: &'a [Event],
        first: u64,
    ) -> BoxFuture<'a, std::result::Result<(), SinkError>> {
        Box::pin(self.publish_numbered(batch, first))
    }

    fn one_lane(&self) -> Option<&'static str> {
        Some("a rabbitmq sink's publishing ids number all of its events in one sequence")
    }

    /// Connects, creates the stream when absent and declares the named producer; a delivery
    /// that starts meanwhile waits for this.
    fn prepare(&self) -> BoxFuture<'_, std::result::Result<(), SinkError>> {
        Box::pin(async move {
            let mut connected = self.connected.lock().await;
            if connected.is_none() {
                *connected = Some(self.connect().await?);
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(url: &str, expect: std::result::Result<(&str, u16, &str, &str, &str), &str>) {
        let parsed = Endpoint::parse(url);
        match (parsed, expect) {
            (Ok(endpoint), Ok((host, port, user, password, vhost))) => assert_eq!(
                (
                    endpoint.host.as_str(),
                    endpoint.port,
                    endpoint.username.as_str(),
                    endpoint.password.as_str(),
                    endpoint.vhost.as_str()
                ),
                (host, port, user, password, vhost)
            ),
            (Err(reason), Err(part)) => assert!(reason.contains(part), "{reason}"),
            (got, _) => panic!("{url}: {got:?}"),
        }
    }

    #[test]
    fn endpoints_parse_from_stream_urls() {
        check("rabbitmq-stream://guest:guest@127.0.0.1:5552/%2f", Ok(("127.0.0.1", 5552, "guest", "guest", "/")));
        check("rabbitmq-stream://localhost", Ok(("localhost", 5552, "guest", "guest", "/")));
        check("rabbitmq-stream://app:p%40ss@mq:6000/prod", Ok(("mq", 6000, "app", "p@ss", "prod")));
        check("amqp://localhost:5672/", Err("must start with rabbitmq-stream://"));
        check("not a url", Err("is not a URL"));
    }
}
