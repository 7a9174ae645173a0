//! Outbox over HTTP: handlers any hyper-based host can mount.
//!
//! History (`GET /events`), the live Server-Sent-Events stream (`GET /watch`),
//! the catalog (`GET /event-types`) and publishing (`POST /events`), with the
//! `Authorizer` trait and the `WatchRegistry` for revocation (SPEC §5).
//!
//! **Architecture invariant:** this crate reads the outbox through `outbox-pg`
//! and knows nothing of `outbox-workers` (sinks, retention, subscribers) or of
//! the bundled server's configuration and authentication.
//!
//! The handlers arrive with the HTTP issue; today the crate only fixes its place
//! in the dependency graph.

#![warn(missing_docs)]

pub use outbox_core as core;
