//! The client against the real server wiring (`outbox_server::server::Server`) over a fresh
//! database, through a loopback TCP proxy that counts requests and cuts connections.

mod follow;
mod list;
mod support;
mod watch;
mod webhooks;
