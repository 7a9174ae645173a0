//! End-to-end tests: the real `outbox` binary against a real PostgreSQL.

mod brokers;
mod config;
mod console;
mod dev;
mod doctor;
mod events;
mod migrate;
mod serve;
mod sinks;
mod sql_examples;
mod support;
mod token;
mod webhooks;
mod whoami;
