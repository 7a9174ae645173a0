//! The fuzz targets' shared half: a target's corpus (`fuzz/corpus/<target>/`, one input per
//! file) and the proptest strategy that mutates its entries.
//!
//! Each test that fuzzes a parser includes this file as a module of its own
//! (`#[path = "…/fuzz/mutate.rs"] mod mutate;`), so it is written against proptest alone and
//! knows nothing of any parser. `fuzz/README.md` says how to run longer and add a seed.
//!
//! Inputs are bytes: most are a corpus entry with a few edits (bit flips, insertions of
//! bytes and tokens that break parsers, removals, truncations, repeats, splices with
//! another entry), the rest token soup from the target's dictionary or random bytes and
//! text. Proptest shrinks a failing input by undoing edits, so a failure prints a small one.

#![allow(dead_code)] // each including test uses what it needs

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::Arc;

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::Config;

/// The cases each property runs when `OUTBOX_FUZZ_CASES` is not set: a few seconds in debug.
pub(crate) const DEFAULT_CASES: u32 = 2_000;

/// Tokens that break parsers of any kind: separators, escapes, line ends, numbers at the
/// edges of their types, text that is not ASCII or not UTF-8.
const HOSTILE: &[&[u8]] = &[
    b"\0",
    b"\r",
    b"\n",
    b"\r\n",
    b"\t",
    b" ",
    b"%",
    b"%00",
    b"%0",
    b"%zz",
    b"%FF",
    b"%C3%28",
    b"+",
    b"&",
    b"=",
    b",",
    b".",
    b":",
    b"*",
    b"/",
    b"\\",
    b"\"",
    b"'",
    b"#",
    b"[",
    b"]",
    b"{",
    b"}",
    b"0",
    b"-1",
    b"18446744073709551615",
    b"18446744073709551616",
    b"340282366920938463463374607431768211456",
    b"1e400",
    b"\xEF\xBB\xBF",
    b"\xC3\xA9",
    b"\xD9\xA1",
    b"\xF4\x8F\xBF\xBF",
    b"\xFF",
    b"\xC0\x80",
    b"\xE2\x82",
];

/// One corpus entry: its file name and its bytes.
#[derive(Debug, Clone)]
pub(crate) struct Seed {
    pub(crate) name: String,
    pub(crate) bytes: Vec<u8>,
}

/// The entries of `fuzz/corpus/<target>/`, by file name. An empty or missing corpus is a
/// mistake, not a pass.
pub(crate) fn corpus(target: &str) -> Vec<Seed> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target);
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("reading the corpus {}: {e}", dir.display()));
    let mut seeds: Vec<Seed> = entries
        .map(|entry| entry.expect("a corpus entry").path())
        .filter(|path| path.is_file())
        .map(|path| Seed {
            name: path.file_name().expect("a file name").to_string_lossy().into_owned(),
            bytes: std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display())),
        })
        .collect();
    assert!(!seeds.is_empty(), "the corpus {} is empty", dir.display());
    seeds.sort_by(|a, b| a.name.cmp(&b.name));
    seeds
}

/// Runs `check` on every entry of `target`'s corpus and fails naming each entry that broke
/// the property or panicked.
pub(crate) fn check_corpus(target: &str, check: impl Fn(&[u8]) -> Result<(), String>) {
    let failures: Vec<String> = corpus(target)
        .iter()
        .filter_map(|seed| match catch_unwind(AssertUnwindSafe(|| check(&seed.bytes))) {
            Ok(Ok(())) => None,
            Ok(Err(message)) => Some(format!("{}: {message}", seed.name)),
            Err(_) => Some(format!("{}: panicked", seed.name)),
        })
        .collect();
    assert!(failures.is_empty(), "fuzz/corpus/{target}:\n{}", failures.join("\n"));
}

/// `OUTBOX_FUZZ_CASES`, or `default`.
pub(crate) fn cases(default: u32) -> u32 {
    std::env::var("OUTBOX_FUZZ_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(default)
}

/// A proptest configuration of [`cases`]`(default)` cases that records no regression file:
/// a failing input belongs in the corpus instead.
pub(crate) fn config(default: u32) -> Config {
    Config { cases: cases(default), failure_persistence: None, ..Config::default() }
}

/// Bytes as text the way a `&str` parser would be handed them: invalid UTF-8 replaced.
pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// One edit of an input.
#[derive(Debug, Clone)]
enum Edit {
    /// Flip one bit of one byte.
    FlipBit(Index, u8),
    /// Insert a token (hostile, or from the target's dictionary).
    Insert(Index, Vec<u8>),
    /// Replace a byte with a token.
    Replace(Index, Vec<u8>),
    /// Remove up to this many bytes.
    Remove(Index, usize),
    /// Cut the input short.
    Truncate(Index),
    /// Repeat a stretch of up to this many bytes, this many times.
    Repeat(Index, usize, usize),
    /// Keep a prefix of the input and continue with a suffix of another corpus entry.
    Splice(Index, Index, Index),
}

/// A token: one of the hostile ones, or one of `dictionary`.
fn token(dictionary: &'static [&'static str]) -> BoxedStrategy<Vec<u8>> {
    let hostile = prop::sample::select(HOSTILE).prop_map(<[u8]>::to_vec);
    if dictionary.is_empty() {
        return hostile.boxed();
    }
    let words = prop::sample::select(dictionary).prop_map(|word| word.as_bytes().to_vec());
    prop_oneof![hostile, words].boxed()
}

fn edit(dictionary: &'static [&'static str]) -> impl Strategy<Value = Edit> {
    prop_oneof![
        3 => (any::<Index>(), 0..8u8).prop_map(|(at, bit)| Edit::FlipBit(at, bit)),
        4 => (any::<Index>(), token(dictionary)).prop_map(|(at, token)| Edit::Insert(at, token)),
        2 => (any::<Index>(), token(dictionary)).prop_map(|(at, token)| Edit::Replace(at, token)),
        2 => (any::<Index>(), 1..16usize).prop_map(|(at, len)| Edit::Remove(at, len)),
        1 => any::<Index>().prop_map(Edit::Truncate),
        1 => (any::<Index>(), 1..32usize, 1..64usize).prop_map(|(at, len, times)| Edit::Repeat(at, len, times)),
        1 => (any::<Index>(), any::<Index>(), any::<Index>())
            .prop_map(|(at, other, from)| Edit::Splice(at, other, from)),
    ]
}

/// A place in `bytes`, from 0 to its length.
fn place(at: &Index, bytes: &[u8]) -> usize {
    at.index(bytes.len() + 1)
}

fn apply(bytes: &mut Vec<u8>, edit: &Edit, seeds: &[Vec<u8>]) {
    match edit {
        Edit::FlipBit(at, bit) if !bytes.is_empty() => {
            let at = at.index(bytes.len());
            bytes[at] ^= 1 << bit;
        }
        Edit::FlipBit(..) => {}
        Edit::Insert(at, token) => {
            let at = place(at, bytes);
            bytes.splice(at..at, token.iter().copied());
        }
        Edit::Replace(at, token) => {
            let at = place(at, bytes);
            let end = (at + 1).min(bytes.len());
            bytes.splice(at..end, token.iter().copied());
        }
        Edit::Remove(at, len) => {
            let at = place(at, bytes);
            let end = (at + len).min(bytes.len());
            bytes.drain(at..end);
        }
        Edit::Truncate(at) => {
            let at = place(at, bytes);
            bytes.truncate(at);
        }
        Edit::Repeat(at, len, times) => {
            let at = place(at, bytes);
            let stretch = bytes[at..(at + len).min(bytes.len())].to_vec();
            let copies = stretch.repeat(*times);
            bytes.splice(at..at, copies);
        }
        Edit::Splice(at, other, from) => {
            let other = &seeds[other.index(seeds.len())];
            let at = place(at, bytes);
            bytes.truncate(at);
            bytes.extend_from_slice(&other[place(from, other)..]);
        }
    }
}

/// Inputs for a target: mostly mutated corpus entries, then token soup from `dictionary`
/// and the hostile tokens, then random bytes and random text.
pub(crate) fn input(seeds: &[Seed], dictionary: &'static [&'static str]) -> impl Strategy<Value = Vec<u8>> + use<> {
    let seeds: Arc<Vec<Vec<u8>>> = Arc::new(seeds.iter().map(|seed| seed.bytes.clone()).collect());
    assert!(!seeds.is_empty(), "a target needs at least one seed");
    // One edit most often, so that many inputs stay close to their seed and get past the parser's
    // first checks; up to five otherwise.
    let edits = prop_oneof![
        2 => prop::collection::vec(edit(dictionary), 1..2),
        1 => prop::collection::vec(edit(dictionary), 2..6),
    ];
    let mutated = (any::<Index>(), edits).prop_map(move |(seed, edits)| {
        let mut bytes = seeds[seed.index(seeds.len())].clone();
        for edit in &edits {
            apply(&mut bytes, edit, &seeds);
        }
        bytes
    });
    let soup = prop::collection::vec(token(dictionary), 0..12).prop_map(|tokens| tokens.concat());
    prop_oneof![
        12 => mutated,
        3 => soup,
        1 => prop::collection::vec(any::<u8>(), 0..64),
        1 => any::<String>().prop_map(String::into_bytes),
    ]
}
