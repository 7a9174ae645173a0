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
//! A batch is one `EVALSHA` of a small script that runs the `XADD`s in order and
//! stops at the first other error, reporting its index ([`SinkError::at`]). A plain
//! pipeline would go on past a failed entry, and a later entry of the same stream
//! would then make the failed one look "already delivered" on retry; the script
//! keeps the batch in one round trip without that hole.

use std::sync::LazyLock;
use std::time::Duration;

use futures_util::future::BoxFuture;
use outbox_core::Event;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::OnceCell;

use crate::config::{DEFAULT_KEY, SinkConfig};
use crate::encoding::Encoder;
use crate::template::Template;
use crate::{Error, Result, Sink, SinkError};

/// KEYS: one stream per entry. ARGV: maxlen (0 for none), then per entry its id, event id and
/// encoded event. Returns `{-1, ""}` when every entry was written or already there, else
/// `{index, error}` of the first entry that failed otherwise (nothing after it was tried).
const XADD_IN_ORDER: &str = r"
local maxlen = tonumber(ARGV[1])
for i = 1, #KEYS do
  local at = 2 + (i - 1) * 3
  local reply
  if maxlen > 0 then
    reply = redis.pcall('XADD', KEYS[i], 'MAXLEN', '~', maxlen, ARGV[at], 'id', ARGV[at + 1], 'event', ARGV[at + 2])
  else
    reply = redis.pcall('XADD', KEYS[i], ARGV[at], 'id', ARGV[at + 1], 'event', ARGV[at + 2])
  end
  if type(reply) == 'table' and reply.err and not string.find(reply.err, 'equal or smaller', 1, true) then
    return {i - 1, reply.err}
  end
end
return {-1, ''}
";

static SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(XADD_IN_ORDER));

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
        let mut invocation = SCRIPT.prepare_invoke();
        invocation.arg(self.maxlen.unwrap_or(0));
        for event in batch {
            invocation.key(self.key.render(event));
            invocation.arg(RedisSink::entry_id(event)).arg(&event.id).arg(self.encoder.encode(event));
        }
        let (failed, error): (i64, String) =
            invocation.invoke_async(&mut connection).await.map_err(|e| SinkError::retryable(format!("XADD: {e}")))?;
        match usize::try_from(failed) {
            Ok(index) => {
                let event = batch.get(index).map_or("?", |event| event.id.as_str());
                Err(SinkError::retryable(format!("XADD {event}: {error}")).at(index))
            }
            Err(_) => Ok(()),
        }
    }
}

impl Sink for RedisSink {
    fn id(&self) -> &str {
        &self.id
    }

    fn deliver<'a>(&'a self, batch: &'a [Event]) -> BoxFuture<'a, std::result::Result<(), SinkError>> {
        Box::pin(self.append(batch))
    }
}
