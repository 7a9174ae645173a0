//! The `nats` sink: JetStream publish, waiting for every ack (SPEC §7.5).
//!
//! Each event goes to the subject its template gives (`outbox.{tenantId}.{type}`
//! by default) with `Nats-Msg-Id` = the event id, so JetStream drops a redelivery
//! that arrives within the stream's duplicate window (2 minutes unless the stream
//! says otherwise). A batch is published one event at a time, each after the
//! previous one's ack, so nothing after a failed publish is ever stored; the first
//! failure reports its index ([`SinkError::at`]).
//!
//! The sink connects in [`Sink::prepare`] or on its first delivery, whichever comes first
//! (never when it is built), and the client reconnects by itself. With `stream` set,
//! connecting also creates the stream when it is absent, capturing the template's fixed
//! prefix (`outbox.>`); an existing stream is used as it is.

use std::time::Duration;

use async_nats::jetstream::{self, message::PublishMessage, stream};
use futures_util::future::BoxFuture;
use outbox_core::Event;
use tokio::sync::OnceCell;

use crate::config::{DEFAULT_DUPLICATE_WINDOW, DEFAULT_SUBJECT, SinkConfig};
use crate::encoding::Encoder;
use crate::template::Template;
use crate::{Error, Result, Sink, SinkError};

/// A stream the sink creates when it is absent.
#[derive(Debug, Clone, PartialEq, Eq)]
struct StreamSetup {
    name: String,
    subjects: Vec<String>,
    duplicate_window: Duration,
}

/// Publishes events to NATS JetStream.
pub struct NatsSink {
    id: String,
    url: String,
    subject: Template,
    stream: Option<StreamSetup>,
    encoder: Encoder,
    timeout: Duration,
    context: OnceCell<jetstream::Context>,
}

impl NatsSink {
    /// The sink a `kind = "nats"` table describes.
    pub fn from_config(config: &SinkConfig) -> Result<NatsSink> {
        let subject = config.template("subject", config.subject.as_deref(), DEFAULT_SUBJECT)?;
        let stream = match &config.stream {
            None => None,
            Some(name) => Some(stream_setup(config, name, &subject)?),
        };
        Ok(NatsSink {
            id: config.id.clone(),
            url: config.url.clone().unwrap_or_default(),
            subject,
            stream,
            encoder: config.encoder(),
            timeout: config.timeout(),
            context: OnceCell::new(),
        })
    }

    /// The subjects a stream created by this sink captures, e.g. `["outbox.>"]`.
    pub fn stream_subjects(&self) -> Option<&[String]> {
        self.stream.as_ref().map(|setup| setup.subjects.as_slice())
    }

    async fn context(&self) -> std::result::Result<&jetstream::Context, SinkError> {
        self.context.get_or_try_init(|| self.connect()).await
    }

    async fn connect(&self) -> std::result::Result<jetstream::Context, SinkError> {
        let client = async_nats::ConnectOptions::new()
            .connection_timeout(self.timeout)
            .request_timeout(Some(self.timeout))
            .connect(self.url.as_str())
            .await
            .map_err(|e| SinkError::retryable(format!("connecting to NATS: {e}")))?;
        let mut context = jetstream::new(client);
        context.set_timeout(self.timeout);
        if let Some(setup) = &self.stream {
            let config = stream::Config {
                name: setup.name.clone(),
                subjects: setup.subjects.clone(),
                duplicate_window: setup.duplicate_window,
                ..stream::Config::default()
            };
            context
                .get_or_create_stream(config)
                .await
                .map_err(|e| SinkError::retryable(format!("creating JetStream stream {}: {e}", setup.name)))?;
        }
        Ok(context)
    }

    /// Publishes the events of `batch` one at a time, each after the previous one's ack.
    ///
    /// Never two in flight: were a later publish sent before an earlier one was acked, a
    /// failure of the earlier (a server restarting, a limit) could leave the later one
    /// stored, and the retry would then store the earlier one after it, out of order.
    async fn publish(&self, batch: &[Event]) -> std::result::Result<(), SinkError> {
        let context = self.context().await?;
        for (index, event) in batch.iter().enumerate() {
            let message = PublishMessage::build()
                .payload(self.encoder.encode(event).into())
                .message_id(&event.id)
                .header("Content-Type", self.encoder.content_type());
            let ack = context
                .send_publish(self.subject.render(event), message)
                .await
                .map_err(|e| SinkError::retryable(format!("publishing {}: {e}", event.id)).at(index))?;
            ack.await.map_err(|e| SinkError::retryable(format!("JetStream ack for {}: {e}", event.id)).at(index))?;
        }
        Ok(())
    }
}

fn stream_setup(config: &SinkConfig, name: &str, subject: &Template) -> Result<StreamSetup> {
    let valid_name = !name.is_empty() && !name.contains(['.', ' ', '\t', '*', '>', '/', '\\']);
    if !valid_name {
        return Err(Error::config(config.key_name("stream"), format!("{name:?} is not a JetStream stream name")));
    }
    let subjects = match subject.fixed_prefix() {
        Some(fixed) if subject.is_fixed() => vec![fixed],
        Some(prefix) => vec![format!("{prefix}.>")],
        None => {
            return Err(Error::config(
                config.key_name("subject"),
                "must start with a fixed token (e.g. outbox.{tenantId}.{type}) for the stream to capture",
            ));
        }
    };
    let duplicate_window = config.duplicate_window_secs.map_or(DEFAULT_DUPLICATE_WINDOW, Duration::from_secs);
    Ok(StreamSetup { name: name.to_owned(), subjects, duplicate_window })
}

impl Sink for NatsSink {
    fn id(&self) -> &str {
        &self.id
    }

    fn deliver<'a>(&'a self, batch: &'a [Event]) -> BoxFuture<'a, std::result::Result<(), SinkError>> {
        Box::pin(self.publish(batch))
    }

    /// Connects (and creates the stream when configured to); a delivery that starts
    /// meanwhile waits for this connection.
    fn prepare(&self) -> BoxFuture<'_, std::result::Result<(), SinkError>> {
        Box::pin(async move { self.context().await.map(drop) })
    }
}
