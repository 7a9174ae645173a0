//! Integration tests of outbox-workers against a real PostgreSQL (a fresh database per test),
//! the real NATS and Redis servers (`NATS_URL`, `REDIS_URL`; a test fails when its server is
//! absent), and a real HTTP receiver on loopback.

mod bisection;
mod config;
mod dispatcher;
mod doctor;
mod isolation;
mod jsonl;
mod lease_race;
mod nats;
mod redis;
mod retention;
mod subscribers;
mod subscriptions;
mod support;
mod webhook;
