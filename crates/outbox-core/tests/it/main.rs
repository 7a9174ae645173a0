//! The integration tests of `outbox-core`, one binary (see STYLE.md, "Tests").
//!
//! Everything here is pure, so the suite is property tests against simple,
//! obviously-correct references: regexes for matching and brute force for
//! intersection. Case counts are kept moderate so the binary runs in seconds.
//!
//! The `fuzz_` modules run the corpora of `fuzz/corpus/` and their mutations through the
//! parsers of outside input this crate owns (`fuzz/README.md`).

mod data;
mod fuzz_pattern;
mod fuzz_position;
#[path = "../../../../fuzz/mutate.rs"]
mod mutate;
mod pattern;
mod position;
