//! The engine's parts that the sibling crates build on: `outbox-http` (the shared head),
//! `outbox-workers` (leases, cursors, dead letters, retention, the doctor's inspection, the
//! sinks' health), webhook subscriptions' rows and their sealing (`outbox-http` and
//! `outbox-workers`), `outbox-server` (revocation) and the project's tools (the statements
//! whose plans `cargo xtask ci` checks, the database clock tests move).
//!
//! An application needs none of it: it publishes, migrates, builds its pool and reads
//! through the items at the crate's root. What is here changes with the crates that use it.

pub mod clock;
pub mod cursor;
pub mod dead_letter;
pub mod head;
pub mod inspect;
pub mod lease;
pub mod retention;
pub mod revocation;
pub mod seal;
pub mod sink_health;
pub mod webhook;

/// The read's parts beyond [`crate::read_page`]: the page read with the head in one
/// snapshot, the head alone, the complete-through rule, and the statements themselves
/// (for plan checks).
pub mod read {
    pub use crate::read::{
        DEFAULT_SCAN_LIMIT, HEAD_STATEMENT, MAX_SCAN, complete_through, head, read_to_head, statement,
    };
}
