//! The built-in sinks (SPEC §7.5): `webhook`, `nats`, `redis`, `jsonl`.

mod jsonl;
mod nats;
mod redis;
mod webhook;

pub use jsonl::JsonlSink;
pub use nats::NatsSink;
pub use redis::RedisSink;
pub use webhook::{WebhookSecret, WebhookSink, install_crypto_provider, parse_retry_after};
