//! Integration tests of outbox-workers against a real PostgreSQL (a fresh database per test),
//! the real NATS, Redis and RabbitMQ (stream) servers and a Kafka-protocol broker (`NATS_URL`,
//! `REDIS_URL`, `RABBITMQ_STREAM_URL`, `KAFKA_BOOTSTRAP`; a test fails when its server is absent),
//! and a real HTTP receiver on loopback.

mod bisection;
mod config;
mod dispatcher;
mod doctor;
mod isolation;
mod jsonl;
mod kafka;
mod lanes;
mod lease_race;
mod nats;
mod numbering;
mod rabbitmq;
mod redis;
mod retention;
mod subscribers;
mod subscriptions;
mod support;
mod webhook;
