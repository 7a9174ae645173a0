//! outbox-http against a real PostgreSQL (a fresh database per test) and a real
//! hyper server on loopback, through a real HTTP client.
//!
//! The `fuzz_` modules need no database: they run `fuzz/corpus/query` and
//! `fuzz/corpus/json_body` and their mutations through the routes' parsers
//! (`outbox_http::__fuzz`; `fuzz/README.md`).

mod catalog;
mod fanout;
mod fuzz_json_body;
mod fuzz_query;
mod history;
mod isolation;
#[path = "../../../../fuzz/mutate.rs"]
mod mutate;
mod publishing;
mod refusals;
mod resume;
mod revocation;
mod sinks;
mod support;
mod watch;
mod webhooks;
mod whoami;
