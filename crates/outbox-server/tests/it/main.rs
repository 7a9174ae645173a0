//! The server's router on 127.0.0.1:0 against a real PostgreSQL (a fresh database per test).
//! `fuzz_config` needs no database: it runs `fuzz/corpus/config` and its mutations through
//! the configuration's parser (`fuzz/README.md`).

mod auth;
mod fuzz;
mod fuzz_config;
#[path = "../../../../fuzz/mutate.rs"]
mod mutate;
mod ops;
mod revocation;
mod routes;
mod subscribers;
mod support;
