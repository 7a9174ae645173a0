//! The built-in sinks (SPEC §7.5): `webhook`, `nats`, `redis`, `jsonl`, `kafka`, `rabbitmq`.
//!
//! `webhook`, `nats`, `redis`, `kafka` and `rabbitmq` are each behind the crate feature of that
//! name (all on by default); `jsonl` is always built. A `[[sinks]]` table of a kind left out of the build is
//! refused by [`crate::config::build_spec`], naming the feature.

mod jsonl;
#[cfg(feature = "kafka")]
mod kafka;
#[cfg(feature = "nats")]
mod nats;
#[cfg(feature = "rabbitmq")]
mod rabbitmq;
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "webhook")]
mod webhook;

pub use jsonl::JsonlSink;
#[cfg(feature = "kafka")]
pub use kafka::{KafkaSink, OWN_PROPERTIES};
#[cfg(feature = "nats")]
pub use nats::NatsSink;
#[cfg(feature = "rabbitmq")]
pub use rabbitmq::{Endpoint as RabbitmqEndpoint, FRAME_MAX as RABBITMQ_FRAME_MAX, RabbitmqSink};
#[cfg(feature = "redis")]
pub use redis::RedisSink;
#[cfg(feature = "webhook")]
pub(crate) use webhook::{Answer, SignedPost, client_builder};
#[cfg(feature = "webhook")]
pub use webhook::{WebhookSecret, WebhookSink, install_crypto_provider, parse_retry_after};
