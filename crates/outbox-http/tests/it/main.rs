//! outbox-http against a real PostgreSQL (a fresh database per test) and a real
//! hyper server on loopback, through a real HTTP client.

mod catalog;
mod fanout;
mod history;
mod isolation;
mod publishing;
mod refusals;
mod resume;
mod revocation;
mod sinks;
mod support;
mod watch;
mod webhooks;
