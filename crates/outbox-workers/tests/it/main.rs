//! Integration tests of outbox-workers against a real PostgreSQL (a fresh database per test).

mod bisection;
mod dispatcher;
mod isolation;
mod lease_race;
mod support;
