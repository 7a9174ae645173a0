//! Outbox workers: the `Sink` trait and its dispatcher (lease singleton, durable
//! cursor, backoff, bisection, dead letters), the built-in sinks, the retention
//! job and in-process subscribers (SPEC §6, §7, §9).
//!
//! **Architecture invariant:** this crate reads the outbox and records progress
//! through `outbox-pg` and knows nothing of HTTP serving (`outbox-http`, hyper
//! servers); it delivers to the outside world only through sinks.
//!
//! The workers arrive with the sinks issue; today the crate only fixes its place
//! in the dependency graph.

pub use outbox_core as core;
