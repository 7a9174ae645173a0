//! Integration tests of outbox-pg against a real PostgreSQL, a fresh database per test.

mod clock;
mod concurrency;
mod cursor;
mod dead_letter;
mod head;
mod lanes;
mod lease;
mod migrate;
mod ordered;
mod pool;
mod publish;
mod read;
mod revocation;
mod sql_publish;
mod support;
mod tail;
mod webhook;
