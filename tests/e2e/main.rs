//! End-to-end tests: the real `outbox` binary against a real PostgreSQL.

mod dev;
mod migrate;
mod support;
