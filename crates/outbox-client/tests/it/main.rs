//! The client against the real server wiring (`outbox_server::server::Server`) over a fresh
//! database, through a loopback TCP proxy that counts requests and cuts connections.
//!
//! `fuzz_sse` needs no server: it runs `fuzz/corpus/sse` and its mutations through the
//! client's SSE parser (`outbox_client::__fuzz`; `fuzz/README.md`).

mod follow;
mod fuzz_sse;
mod list;
#[path = "../../../../fuzz/mutate.rs"]
mod mutate;
mod support;
mod watch;
mod webhooks;
