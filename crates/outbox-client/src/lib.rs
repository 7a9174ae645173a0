//! The Outbox client: a history pager and a reconnecting watch stream.
//!
//! **Architecture invariant:** this crate depends on `outbox-core` only: a team
//! that consumes events over HTTP never links the database or server crates.
//!
//! The client arrives with the client issue; today the crate only fixes its
//! place in the dependency graph.

#![warn(missing_docs)]

pub use outbox_core as core;
