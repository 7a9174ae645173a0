//! The Outbox vocabulary: the types every other crate shares.
//!
//! [`NewEvent`] and [`Event`] (SPEC §3.3), the publishing rules of
//! [`validate`] (SPEC §3.2), the reader's [`Position`] (SPEC §3.6), type
//! [`Pattern`]s and their intersection (SPEC §3.5), the event [`Catalog`]
//! (SPEC §3.4), the [`ErrorCode`]s of every refusal (SPEC §5.1), and which addresses an
//! outbound request may reach ([`target`]) and what a webhook subscription may hold
//! ([`webhook`], SPEC §7.6).
//!
//! **Architecture invariant:** this crate is pure. It knows nothing of tokio,
//! sqlx, hyper or any I/O, reads no clock and draws no random numbers; it is
//! the vocabulary that the database, HTTP, worker and client crates share, and
//! depends on none of them.
//!
//! ```
//! use outbox_core::{Pattern, Position};
//!
//! let position: Position = "88213:51120".parse().unwrap();
//! assert_eq!(position.to_string(), "88213.51120");
//! let family = Pattern::parse("reservation.*").unwrap();
//! assert!(family.matches("reservation.active"));
//! ```

#![warn(missing_docs)]

pub mod catalog;
mod data;
mod error;
mod event;
pub mod pattern;
mod position;
pub mod target;
pub mod validate;
pub mod webhook;

pub use catalog::{Catalog, CatalogEntry};
pub use data::{Data, compact_json};
pub use error::ErrorCode;
pub use event::{Event, NewEvent, millis};
pub use pattern::{Pattern, PatternError};
pub use position::{Position, PositionError};
pub use validate::{Limits, ValidationError};
