//! The `outbox` binary: configuration, roles, authentication, wiring and the command line.
//!
//! - [`config`]: the TOML file, the environment and the flags (SPEC §8.1).
//! - [`auth`]: [`auth::TokenAuthorizer`], JWTs and hashed API keys (SPEC §5.2); [`token`] mints JWTs.
//! - [`revocation`]: revocations recorded in the database and applied by every process (SPEC §5.5).
//! - [`app`]: the router every process serves, over the [`state`] its routes share; [`server`]:
//!   the listener and graceful shutdown.
//! - [`sinks`]: the configured sinks, run by the `sinks` role and shown by `GET /sinks` (`outbox_http::SinkRoutes`).
//! - [`ops`]: the retention role and the doctor's configuration; [`metrics`]: `GET /metrics`.
//! - [`commands`]: one module per command; [`demo`]: the sample events of `outbox dev --demo`.
//!
//! **Architecture invariant:** the server only wires. Every capability lives in a library
//! crate (`outbox-pg`, `outbox-http`, `outbox-workers`); this crate reads configuration,
//! authenticates callers, starts what the roles ask for, and maps errors to exit codes. It
//! reaches the database only through `outbox_pg::sqlx`, and is the only crate that uses `anyhow`.

pub mod app;
pub mod auth;
pub mod cli;
pub mod commands;
pub mod config;
pub mod demo;
pub mod metrics;
pub mod ops;
pub mod revocation;
pub mod server;
pub mod sinks;
pub mod state;
pub mod terminal;
pub mod token;
