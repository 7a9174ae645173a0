//! The integration tests of `outbox-core`, one binary (see STYLE.md, "Tests").
//!
//! Everything here is pure, so the suite is property tests against simple,
//! obviously-correct references: regexes for matching and brute force for
//! intersection. Case counts are kept moderate so the binary runs in seconds.

mod data;
mod pattern;
mod position;
