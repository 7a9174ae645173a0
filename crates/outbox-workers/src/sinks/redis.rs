//! The `redis` sink: `XADD` with the entry id `<txid>-<seq>` (SPEC §7.5).
//!
//! Each event becomes an entry of the stream its key template names
//! (`outbox:{tenantId}` by default) with the id `<txid>-<seq>`, its position, and
//! the fields `id` (the event id) and `event` (the encoded event); `maxlen` adds
//! `MAXLEN ~ <n>`. Redis refuses an id that is not greater than the stream's last
//! one ("equal or smaller than the target stream top item"): for this sink that
//! means the entry was already written before a crash or a retry, so it counts as
//! delivered. A redelivery is recognised, never duplicated.
//!
//! A batch is one pipeline of `XADD`s, one round trip. An entry that fails for another
//! reason reports its index ([`SinkError::at`]) and is tried again, unless a later entry
//! of the same stream went through in the same pipeline: then its id can never be added
//! any more (Redis would answer "equal or smaller" and the retry would look delivered),
//! so the failure is a refusal, which makes the event a dead letter once the entries
//! after it are confirmed, never a silent loss.

use std::time::Duration;

use futures_util::future::BoxFuture;
use outbox_core::Event;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::OnceCell;

use crate::config::{DEFAULT_KEY, SinkConfig};
use crate::encoding::Encoder;
use crate::template::Template;
use crate::{Error, Result, Sink, SinkError};

/// Appends events to Redis streams.
pub struct RedisSink {
    id: String,
    client: redis::Client,
    key: Template,
    maxlen: Option<u64>,
    encoder: Encoder,
    timeout: Duration,
    connection: OnceCell<ConnectionManager>,
}

impl RedisSink {
    /// The sink a `kind = "redis"` table describes.
    pub fn from_config(config: &SinkConfig) -> Result<RedisSink> {
        let url = config.url.as_deref().unwrap_or_default();
        let client = redis::Client::open(url)
            .map_err(|e| Error::config(config.key_name("url"), format!("{url:?} is not a Redis URL: {e}")))?;
        if config.maxlen == Some(0) {
            return Err(Error::config(config.key_name("maxlen"), "must be at least 1"));
        }
        Ok(RedisSink {
            id: config.id.clone(),
            client,
            key: config.template("key", config.key.as_deref(), DEFAULT_KEY)?,
            maxlen: config.maxlen,
            encoder: config.encoder(),
            timeout: config.timeout(),
            connection: OnceCell::new(),
        })
    }

    /// The entry id of `event`: its position, `<txid>-<seq>`.
    pub fn entry_id(event: &Event) -> String {
        format!("{}-{}", event.sequence.txid, event.sequence.seq)
    }

    async fn connection(&self) -> std::result::Result<ConnectionManager, SinkError> {
        let connect = || async {
            let config = ConnectionManagerConfig::new()
                .set_connection_timeout(Some(self.timeout))
                .set_response_timeout(Some(self.timeout))
                .set_number_of_retries(1);
            ConnectionManager::new_with_config(self.client.clone(), config)
                .await
                .map_err(|e| SinkError::retryable(format!("connecting to Redis: {e}")))
        };
        self.connection.get_or_try_init(connect).await.cloned()
    }

    async fn append(&self, batch: &[Event]) -> std::result::Result<(), SinkError> {
        let mut connection = self.connection().await?;
        let keys: Vec<String> = batch.iter().map(|event| self.key.render(event)).collect();
        let mut pipe = redis::pipe();
        for (event, key) in batch.iter().zip(&keys) {
            let xadd = pipe.cmd("XADD").arg(key);
            if let Some(maxlen) = self.maxlen {
                xadd.arg("MAXLEN").arg("~").arg(maxlen);
            }
            xadd.arg(RedisSink::entry_id(event)).arg("id").arg(&event.id).arg("event").arg(self.encoder.encode(event));
        }
        let replies: Vec<redis::RedisResult<redis::Value>> = pipe
            .ignore_errors()
            .query_async(&mut connection)
            .await
            .map_err(|e| SinkError::retryable(format!("XADD: {e}")))?;
        let errors: Vec<Option<String>> = replies
            .iter()
            .map(|reply| reply.as_ref().err().filter(|e| !already_there(e)).map(ToString::to_string))
            .collect();
        let Some((index, masked)) = first_failure(&errors, &keys) else { return Ok(()) };
        let message = format!("XADD {}: {}", batch[index].id, errors[index].as_deref().unwrap_or_default());
        Err(if masked {
            SinkError::refused(format!(
                "{message} (a later entry of {} was written: this id can no longer be added)",
                keys[index]
            ))
        } else {
            SinkError::retryable(message)
        }
        .at(index))
    }
}

/// The first entry that failed (`errors[i]` is `Some`), and whether a later entry of the same
/// stream was written after it, which would make a retry of it look delivered.
fn first_failure(errors: &[Option<String>], keys: &[String]) -> Option<(usize, bool)> {
    let index = errors.iter().position(Option::is_some)?;
    let masked = errors.iter().zip(keys).skip(index + 1).any(|(error, key)| error.is_none() && *key == keys[index]);
    Some((index, masked))
}

/// Redis's answer to an id that is not greater than the stream's last one: already delivered.
fn already_there(error: &redis::RedisError) -> bool {
    error.to_string().contains("equal or smaller than the target stream top item")
}

impl Sink for RedisSink {
    fn id(&self) -> &str {
        &self.id
    }

    fn deliver<'a>(&'a self, batch: &'a [Event]) -> BoxFuture<'a, std::result::Result<(), SinkError>> {
        Box::pin(self.append(batch))
    }

    /// Connects; a delivery that starts meanwhile waits for this connection.
    fn prepare(&self) -> BoxFuture<'_, std::result::Result<(), SinkError>> {
        Box::pin(async move { self.connection().await.map(drop) })
    }

    /// Lanes would write a stream's entries out of position order, and Redis takes an entry
    /// whose id is not above the stream's last for one already written: a loss.
    fn one_lane(&self) -> Option<&'static str> {
        Some("a redis sink's entry ids are positions, which must grow in every stream")
    }
}

#[cfg(test)]
mod tests {
    use super::first_failure;

    #[test]
    fn a_failed_entry_followed_by_a_written_one_of_the_same_stream_is_masked() {
        let keys: Vec<String> = ["a", "b", "a", "b"].map(String::from).to_vec();
        let error = Some("OOM".to_owned());
        assert_eq!(first_failure(&[None, None, None, None], &keys), None);
        assert_eq!(first_failure(&[None, error.clone(), None, error.clone()], &keys), Some((1, false)));
        assert_eq!(first_failure(&[error.clone(), None, None, None], &keys), Some((0, true)));
        assert_eq!(first_failure(&[error.clone(), None, error.clone(), None], &keys), Some((0, false)));
    }
}
