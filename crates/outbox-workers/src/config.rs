//! `[[sinks]]` as the server's TOML writes it (SPEC §7.5), and building sinks from it.
//!
//! One flat table per sink: the common keys (`id`, `kind`, `types`, `tenant`,
//! `batch`, `encoding`, `max_attempts`, `lanes`, `source`) and the keys of its kind. A key of another
//! kind, an unknown key, or a missing required key is refused with a message that
//! names the key (`sinks[billing].url`).
//!
//! Which kind takes which key is written once, in [`SinkKind::keys`] (an exhaustive
//! match, so a new kind cannot be added without its keys); the presence check, the
//! "belongs to kind …" and "is required" messages and the tests are all read from it.
//! Whether a key is set is read in [`SinkConfig::kind_keys_given`], which names every
//! field of [`SinkConfig`], so a new field does not compile until it is classified.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use outbox_core::Pattern;
use outbox_core::validate::is_valid_tenant_id;
use serde::{Deserialize, Serialize};

use crate::encoding::{DEFAULT_SOURCE, Encoder, Encoding};
use crate::sink::check_id;
use crate::sinks::JsonlSink;
#[cfg(feature = "kafka")]
use crate::sinks::KafkaSink;
#[cfg(feature = "nats")]
use crate::sinks::NatsSink;
#[cfg(feature = "rabbitmq")]
use crate::sinks::RabbitmqSink;
#[cfg(feature = "redis")]
use crate::sinks::RedisSink;
#[cfg(feature = "webhook")]
use crate::sinks::WebhookSink;
#[cfg(any(feature = "nats", feature = "redis", feature = "kafka"))]
use crate::template::Template;
use crate::{Error, Result, Sink, SinkFilter, SinkSpec};

/// The kinds of built-in sinks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SinkKind {
    /// HTTP POST per event, signed per Standard Webhooks.
    Webhook,
    /// NATS JetStream publish.
    Nats,
    /// Redis Streams `XADD`.
    Redis,
    /// One JSON line per event appended to a file.
    Jsonl,
    /// Kafka produce with an idempotent producer.
    Kafka,
    /// A RabbitMQ stream (the stream protocol) with a deduplicating named producer.
    Rabbitmq,
}

/// One key a kind takes beyond the common ones: one row of [`SinkKind::keys`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindKey {
    /// The key as the table writes it (`url`).
    pub name: &'static str,
    /// Whether a sink of the kind must have it.
    pub required: bool,
    /// What it means for this kind, as the messages say it.
    pub meaning: &'static str,
    /// A value that builds, as JSON (the tests and the documentation's examples use it).
    pub example: &'static str,
}

const fn required(name: &'static str, meaning: &'static str, example: &'static str) -> KindKey {
    KindKey { name, required: true, meaning, example }
}

const fn optional(name: &'static str, meaning: &'static str, example: &'static str) -> KindKey {
    KindKey { name, required: false, meaning, example }
}

/// `timeout_ms` as the request-answering kinds take it.
const REQUEST_TIMEOUT: KindKey = optional("timeout_ms", "how long one request may take (default 10,000 ms)", "10000");

// The table of kinds and keys, a row a kind; `SinkKind::keys` maps every kind to its row.

const WEBHOOK_KEYS: &[KindKey] = &[
    required("url", "the target, an http or https URL", r#""https://example.com/hook""#),
    required("secret", "the Standard Webhooks secret, whsec_<base64>", r#""whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw""#),
    REQUEST_TIMEOUT,
];

const NATS_KEYS: &[KindKey] = &[
    required("url", "the NATS server", r#""nats://127.0.0.1:4222""#),
    REQUEST_TIMEOUT,
    optional("subject", "the subject template (default outbox.{tenantId}.{type})", r#""outbox.{tenantId}.{type}""#),
    optional("stream", "a JetStream stream to create when absent", r#""OUTBOX""#),
    optional("duplicate_window_secs", "the duplicate window of the stream it creates (default 120)", "120"),
];

const REDIS_KEYS: &[KindKey] = &[
    required("url", "the Redis server", r#""redis://127.0.0.1:6379""#),
    REQUEST_TIMEOUT,
    optional("key", "the stream key template (default outbox:{tenantId})", r#""outbox:{tenantId}""#),
    optional("maxlen", "XADD … MAXLEN ~ maxlen", "100000"),
];

const JSONL_KEYS: &[KindKey] = &[required("path", "the file to append to", r#""/tmp/outbox-sink.jsonl""#)];

const KAFKA_KEYS: &[KindKey] = &[
    required("brokers", "the bootstrap brokers, host:port[,host:port…]", r#""127.0.0.1:9092""#),
    optional("timeout_ms", "how long a message may wait for its delivery report (default 10,000 ms)", "10000"),
    optional("topic", "the topic template (default outbox.{tenantId})", r#""outbox.{tenantId}""#),
    optional("properties", "extra librdkafka properties", r#"{"compression.type": "zstd"}"#),
];

const RABBITMQ_KEYS: &[KindKey] = &[
    required(
        "url",
        "the server, rabbitmq-stream://user:password@host:5552/%2f",
        r#""rabbitmq-stream://guest:guest@127.0.0.1:5552/%2f""#,
    ),
    REQUEST_TIMEOUT,
    optional("stream", "the stream to publish to, created when absent (default outbox)", r#""outbox""#),
];

impl SinkKind {
    /// Every kind, in the order the documentation lists them.
    pub const ALL: [SinkKind; 6] =
        [SinkKind::Webhook, SinkKind::Nats, SinkKind::Redis, SinkKind::Jsonl, SinkKind::Kafka, SinkKind::Rabbitmq];

    /// The keys this kind takes beyond the common ones: the one table of kinds and keys.
    pub fn keys(self) -> &'static [KindKey] {
        match self {
            SinkKind::Webhook => WEBHOOK_KEYS,
            SinkKind::Nats => NATS_KEYS,
            SinkKind::Redis => REDIS_KEYS,
            SinkKind::Jsonl => JSONL_KEYS,
            SinkKind::Kafka => KAFKA_KEYS,
            SinkKind::Rabbitmq => RABBITMQ_KEYS,
        }
    }

    /// The kinds that take the key `name`.
    pub fn taking(name: &str) -> Vec<SinkKind> {
        SinkKind::ALL.into_iter().filter(|kind| kind.keys().iter().any(|key| key.name == name)).collect()
    }

    /// The kind as `[[sinks]] kind` writes it, which is also the name of its crate feature.
    pub fn name(self) -> &'static str {
        match self {
            SinkKind::Webhook => "webhook",
            SinkKind::Nats => "nats",
            SinkKind::Redis => "redis",
            SinkKind::Jsonl => "jsonl",
            SinkKind::Kafka => "kafka",
            SinkKind::Rabbitmq => "rabbitmq",
        }
    }

    /// Whether this build holds the sink (its feature is on; `jsonl` always is).
    pub fn is_built(self) -> bool {
        match self {
            SinkKind::Webhook => cfg!(feature = "webhook"),
            SinkKind::Nats => cfg!(feature = "nats"),
            SinkKind::Redis => cfg!(feature = "redis"),
            SinkKind::Jsonl => true,
            SinkKind::Kafka => cfg!(feature = "kafka"),
            SinkKind::Rabbitmq => cfg!(feature = "rabbitmq"),
        }
    }
}

/// One `[[sinks]]` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SinkConfig {
    /// `^[a-z0-9][a-z0-9_-]{0,63}$`, unique: names the sink's lease, cursor and dead letters.
    pub id: String,
    /// What it delivers to.
    pub kind: SinkKind,
    /// Type patterns (SPEC §3.5); default `["*"]`.
    #[serde(default = "every_type")]
    pub types: Vec<Pattern>,
    /// Only this tenant's events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Events per delivery call, 1 to 1,000; default 100.
    #[serde(default = "default_batch")]
    pub batch: usize,
    /// `json` (default), `cloudevents` or `protobuf` (not for `jsonl`).
    #[serde(default)]
    pub encoding: Encoding,
    /// Failures of one event before it can be dead-lettered; default 5.
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
    /// Ordered lanes, 1 to 256; default 1 (SPEC §7.7).
    #[serde(default = "default_lanes")]
    pub lanes: u32,
    /// The CloudEvents `source` (encoding `cloudevents`); default `/outbox`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// webhook: the target (`http` or `https`); nats, redis, rabbitmq: the server
    /// (rabbitmq: `rabbitmq-stream://user:password@host:5552/%2f`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// webhook: the Standard Webhooks secret, `whsec_<base64>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// webhook, nats, redis, rabbitmq: how long one request may take; kafka: how long a
    /// message may wait for its delivery report (`message.timeout.ms`); default 10,000 ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// nats: the subject template; default `outbox.{tenantId}.{type}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// nats: a JetStream stream to create when absent, capturing the subject's fixed prefix;
    /// rabbitmq: the stream to publish to, created when absent (default `outbox`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<String>,
    /// nats: the duplicate window of a stream this sink creates; default 120 s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicate_window_secs: Option<u64>,
    /// redis: the stream key template; default `outbox:{tenantId}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// redis: `XADD … MAXLEN ~ <maxlen>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maxlen: Option<u64>,
    /// jsonl: the file to append to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// kafka: the bootstrap brokers, `host:port[,host:port…]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brokers: Option<String>,
    /// kafka: the topic template; default `outbox.{tenantId}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// kafka: extra librdkafka properties, checked by librdkafka when the sink is built.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub properties: BTreeMap<String, PropertyValue>,
}

/// A `[sinks.properties]` value: librdkafka takes text, TOML may write a number or a boolean.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PropertyValue {
    /// `"zstd"`.
    Text(String),
    /// `5`.
    Integer(i64),
    /// `true`.
    Boolean(bool),
}

impl std::fmt::Display for PropertyValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PropertyValue::Text(text) => f.write_str(text),
            PropertyValue::Integer(n) => write!(f, "{n}"),
            PropertyValue::Boolean(b) => write!(f, "{b}"),
        }
    }
}

fn every_type() -> Vec<Pattern> {
    vec![Pattern::all()]
}

fn default_batch() -> usize {
    100
}

fn default_lanes() -> u32 {
    1
}

fn default_max_attempts() -> u32 {
    5
}

/// The default timeout of one webhook, NATS or Redis request.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The default NATS subject template.
pub const DEFAULT_SUBJECT: &str = "outbox.{tenantId}.{type}";
/// The default Redis key template.
pub const DEFAULT_KEY: &str = "outbox:{tenantId}";
/// The default Kafka topic template.
pub const DEFAULT_TOPIC: &str = "outbox.{tenantId}";
/// The default duplicate window of a JetStream stream the nats sink creates.
pub const DEFAULT_DUPLICATE_WINDOW: Duration = Duration::from_secs(120);

impl SinkConfig {
    /// A sink of `kind` named `id` with every optional key at its default.
    pub fn new(id: impl Into<String>, kind: SinkKind) -> SinkConfig {
        SinkConfig {
            id: id.into(),
            kind,
            types: every_type(),
            tenant: None,
            batch: default_batch(),
            encoding: Encoding::Json,
            max_attempts: default_max_attempts(),
            lanes: default_lanes(),
            source: None,
            url: None,
            secret: None,
            timeout_ms: None,
            subject: None,
            stream: None,
            duplicate_window_secs: None,
            key: None,
            maxlen: None,
            path: None,
            brokers: None,
            topic: None,
            properties: BTreeMap::new(),
        }
    }

    /// The key `field` of this sink as error messages name it: `sinks[<id>].<field>`.
    pub fn key_name(&self, field: &str) -> String {
        format!("sinks[{}].{field}", self.id)
    }

    /// Checks every rule that needs no I/O; [`build_sink`] checks them too.
    pub fn validate(&self) -> Result<()> {
        check_id(&self.id)?;
        self.check_kind_keys()?;
        if self.types.is_empty() {
            return Err(Error::config(self.key_name("types"), "must name at least one pattern"));
        }
        if let Some(tenant) = self.tenant.as_deref().filter(|tenant| !is_valid_tenant_id(tenant)) {
            return Err(Error::config(
                self.key_name("tenant"),
                format!("{tenant:?} must match ^[A-Za-z0-9._:-]{{1,128}}$"),
            ));
        }
        if !(1..=outbox_pg::MAX_LIMIT).contains(&self.batch) {
            return Err(Error::config(self.key_name("batch"), "must be 1 to 1000"));
        }
        if self.max_attempts == 0 {
            return Err(Error::config(self.key_name("max_attempts"), "must be at least 1"));
        }
        if !(1..=outbox_pg::MAX_LANES).contains(&self.lanes) {
            return Err(Error::config(self.key_name("lanes"), "must be 1 to 256"));
        }
        if self.source.is_some() && self.encoding != Encoding::CloudEvents {
            return Err(Error::config(self.key_name("source"), "belongs to encoding \"cloudevents\""));
        }
        if self.kind == SinkKind::Jsonl && !self.encoding.is_text() {
            return Err(Error::config(self.key_name("encoding"), "jsonl writes text: use json or cloudevents"));
        }
        Ok(())
    }

    fn check_kind_keys(&self) -> Result<()> {
        if !self.kind.is_built() {
            return Err(self.not_built());
        }
        let keys = self.kind.keys();
        for (name, given) in self.kind_keys_given() {
            if given && !keys.iter().any(|key| key.name == name) {
                let kinds: Vec<&str> = SinkKind::taking(name).into_iter().map(SinkKind::name).collect();
                return Err(Error::config(self.key_name(name), format!("belongs to kind {}", kinds.join(" or "))));
            }
        }
        let given = self.kind_keys_given();
        for key in keys.iter().filter(|key| key.required) {
            if !given.iter().any(|(name, set)| *name == key.name && *set) {
                let reason = format!("is required for kind {:?}: {}", self.kind.name(), key.meaning);
                return Err(Error::config(self.key_name(key.name), reason));
            }
        }
        Ok(())
    }

    /// Each key that belongs to some kinds only, and whether this table sets it. The
    /// destructuring names every field, so a field added to [`SinkConfig`] does not
    /// compile until it is listed here (or marked common with `_`).
    pub fn kind_keys_given(&self) -> [(&'static str, bool); 12] {
        let SinkConfig {
            id: _,
            kind: _,
            types: _,
            tenant: _,
            batch: _,
            encoding: _,
            max_attempts: _,
            lanes: _,
            source: _,
            url,
            secret,
            timeout_ms,
            subject,
            stream,
            duplicate_window_secs,
            key,
            maxlen,
            path,
            brokers,
            topic,
            properties,
        } = self;
        [
            ("url", url.is_some()),
            ("secret", secret.is_some()),
            ("timeout_ms", timeout_ms.is_some()),
            ("subject", subject.is_some()),
            ("stream", stream.is_some()),
            ("duplicate_window_secs", duplicate_window_secs.is_some()),
            ("key", key.is_some()),
            ("maxlen", maxlen.is_some()),
            ("path", path.is_some()),
            ("brokers", brokers.is_some()),
            ("topic", topic.is_some()),
            ("properties", !properties.is_empty()),
        ]
    }

    /// The refusal of a kind whose feature this build leaves out.
    fn not_built(&self) -> Error {
        let kind = self.kind.name();
        let reason = format!("{kind:?} is not in this build: outbox-workers was compiled without its feature {kind:?}");
        Error::config(self.key_name("kind"), reason)
    }

    /// The request timeout (`timeout_ms`, default 10 s).
    pub fn timeout(&self) -> Duration {
        self.timeout_ms.map_or(DEFAULT_TIMEOUT, Duration::from_millis)
    }

    /// The encoder this sink writes with.
    pub fn encoder(&self) -> Encoder {
        Encoder::new(self.encoding, self.source.as_deref().unwrap_or(DEFAULT_SOURCE))
    }

    /// Which events the sink receives.
    pub fn filter(&self) -> SinkFilter {
        SinkFilter { tenant: self.tenant.clone(), types: self.types.clone() }
    }

    /// Parses the template in `field` (`subject`, `key` or `topic`), or `default` when it is absent.
    #[cfg(any(feature = "nats", feature = "redis", feature = "kafka"))]
    pub(crate) fn template(&self, field: &str, given: Option<&str>, default: &str) -> Result<Template> {
        Template::parse(given.unwrap_or(default)).map_err(|reason| Error::config(self.key_name(field), reason))
    }
}

/// Builds the sink a `[[sinks]]` table describes. Nothing connects yet: broker sinks
/// connect once their loop holds the lease ([`Sink::prepare`], or
/// the first delivery), so a server starts while a broker is down.
pub fn build_sink(config: &SinkConfig) -> Result<Box<dyn Sink>> {
    config.validate()?;
    Ok(match config.kind {
        #[cfg(feature = "webhook")]
        SinkKind::Webhook => Box::new(WebhookSink::from_config(config)?),
        #[cfg(feature = "nats")]
        SinkKind::Nats => Box::new(NatsSink::from_config(config)?),
        #[cfg(feature = "redis")]
        SinkKind::Redis => Box::new(RedisSink::from_config(config)?),
        SinkKind::Jsonl => Box::new(JsonlSink::from_config(config)?),
        #[cfg(feature = "kafka")]
        SinkKind::Kafka => Box::new(KafkaSink::from_config(config)?),
        #[cfg(feature = "rabbitmq")]
        SinkKind::Rabbitmq => Box::new(RabbitmqSink::from_config(config)?),
        #[allow(unreachable_patterns, reason = "reached only when a sink's feature is off")]
        _ => return Err(config.not_built()),
    })
}

/// Builds the sink and how the dispatcher feeds it (filter, batch, attempts).
pub fn build_spec(config: &SinkConfig) -> Result<SinkSpec> {
    let sink = build_sink(config)?;
    let spec = SinkSpec::shared(sink.into()).batch(config.batch).max_attempts(config.max_attempts).lanes(config.lanes);
    let spec = SinkSpec { filter: config.filter(), ..spec };
    spec.check()?;
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table of `kind` named `s1` with `keys` set to their examples.
    fn table(kind: SinkKind, keys: &[KindKey]) -> SinkConfig {
        let mut table = serde_json::json!({"id": "s1", "kind": kind.name()});
        for key in keys {
            table[key.name] = serde_json::from_str(key.example).expect("an example is JSON");
        }
        serde_json::from_value(table).expect("every key of the table is a field of SinkConfig")
    }

    /// The smallest table of `kind`: its required keys, from the one table.
    fn minimal(kind: SinkKind) -> SinkConfig {
        let required: Vec<KindKey> = kind.keys().iter().copied().filter(|key| key.required).collect();
        table(kind, &required)
    }

    #[track_caller]
    fn refused(config: &SinkConfig, fragment: &str) {
        let message = config.validate().err().map(|error| error.to_string()).unwrap_or_default();
        assert!(message.contains(fragment), "{config:?}: {message:?} lacks {fragment:?}");
    }

    #[test]
    fn every_key_of_every_kind_is_checked_from_the_one_table() {
        let given: Vec<&str> = minimal(SinkKind::Jsonl).kind_keys_given().iter().map(|(name, _)| *name).collect();
        for kind in SinkKind::ALL.into_iter().filter(|kind| kind.is_built()) {
            let keys = kind.keys();
            assert!(minimal(kind).validate().is_ok(), "{kind:?}: {:?}", minimal(kind).validate());
            assert!(table(kind, keys).validate().is_ok(), "{kind:?} with every key it takes");
            for key in keys {
                assert!(given.contains(&key.name), "{kind:?}.{} is never read by kind_keys_given", key.name);
                if key.required {
                    let without: Vec<KindKey> = keys.iter().copied().filter(|k| k.required && k != key).collect();
                    refused(&table(kind, &without), &format!("sinks[s1].{}: is required for kind", key.name));
                }
            }
            let others = SinkKind::ALL.into_iter().flat_map(SinkKind::keys);
            for other in others.filter(|other| !keys.iter().any(|key| key.name == other.name)) {
                let mut with: Vec<KindKey> = keys.iter().copied().filter(|k| k.required).collect();
                with.push(*other);
                refused(&table(kind, &with), &format!("sinks[s1].{}: belongs to kind", other.name));
            }
        }
        for name in given {
            assert!(!SinkKind::taking(name).is_empty(), "{name} is read but no kind takes it");
        }
    }

    /// Run with the default features (every sink) and, in `cargo xtask ci`, without them.
    #[test]
    fn a_kind_builds_when_its_feature_is_on_and_is_refused_naming_it_when_off() {
        assert!(SinkKind::Jsonl.is_built());
        for kind in SinkKind::ALL {
            let built = build_sink(&minimal(kind));
            if kind.is_built() {
                assert!(built.is_ok(), "{kind:?}: {:?}", built.err());
                continue;
            }
            let message = built.err().expect("a refusal").to_string();
            let name = kind.name();
            assert!(message.contains("sinks[s1].kind"), "{message}");
            assert!(message.contains(&format!("without its feature {name:?}")), "{message}");
        }
    }
}
