//! Fuzzing `Pattern::parse`, `parse_list` and `matches` (SPEC §3.5) with
//! `fuzz/corpus/pattern`: nothing panics; a pattern is accepted exactly when it is 1 to 128
//! characters of `[a-z0-9.*-]`, and its text parses back to the same pattern; a refusal names
//! its rule; a list joined again parses to the same list; and `matches` agrees with a
//! matcher written from the SPEC's sentence (`*` is any run of characters, dots included;
//! everything else is itself), on valid types, on the pattern's own expansions and on
//! random text. `witness(p, *)` finds a type whenever one of those valid types matches.

use outbox_core::pattern::{MAX_PATTERN_LEN, MAX_PATTERNS, parse_list};
use outbox_core::validate::is_valid_type;
use outbox_core::{Pattern, PatternError};
use proptest::prelude::*;

use crate::mutate;

const TARGET: &str = "pattern";

/// Tokens patterns are made of, for the mutations.
const DICTIONARY: &[&str] = &["*", "**", ".", "-", ",", "node", "gpu", "a", "0", ".*", "*.", " ", "A", "_", "%"];

/// Type names every corpus pattern is matched against.
const TYPES: &[&str] = &[
    "node.gpu.missing",
    "node.connected",
    "reservation.active",
    "a.b",
    "a.a",
    "a-.b0",
    "x.y.z.w",
    "node",
    "node.",
    ".node",
    "",
    "Node.joined",
    "node..gpu",
    "node.gpu.é",
];

/// SPEC §3.5 as written: `*` matches any run of characters, dots included, and every other
/// character matches itself. Dynamic programming over characters, not the glob walk.
fn reference_matches(pattern: &str, text: &str) -> bool {
    let text: Vec<char> = text.chars().collect();
    // matched[j]: the pattern read so far matches the first j characters of `text`.
    let mut matched = vec![false; text.len() + 1];
    matched[0] = true;
    for p in pattern.chars() {
        let mut next = vec![false; text.len() + 1];
        for j in 0..=text.len() {
            next[j] = match p {
                '*' => matched[j] || (j > 0 && next[j - 1]),
                _ => j > 0 && matched[j - 1] && text[j - 1] == p,
            };
        }
        matched = next;
    }
    matched[text.len()]
}

fn is_pattern_text(text: &str) -> bool {
    (1..=MAX_PATTERN_LEN).contains(&text.chars().count())
        && text.chars().all(|c| matches!(c, 'a'..='z' | '0'..='9' | '.' | '-' | '*'))
}

/// `text` as a pattern: accepted exactly by the rule, unchanged, and parsing back to itself.
fn check_parse(text: &str) -> Result<Option<Pattern>, String> {
    match Pattern::parse(text) {
        Ok(pattern) if !is_pattern_text(text) => Err(format!("{text:?} is not a pattern but parsed to {pattern:?}")),
        Ok(pattern) if pattern.as_str() != text => Err(format!("{text:?} parsed to {:?}", pattern.as_str())),
        Ok(pattern) if Pattern::parse(pattern.as_str()).as_ref() != Ok(&pattern) => {
            Err(format!("{text:?}: its text does not parse back to it"))
        }
        Ok(pattern) => Ok(Some(pattern)),
        Err(error) if is_pattern_text(text) => Err(format!("{text:?} is a pattern but was refused: {error}")),
        Err(error) => check_refusal(text, &error).map(|()| None),
    }
}

fn check_refusal(text: &str, error: &PatternError) -> Result<(), String> {
    if error.rule().is_empty() || !text.contains(error.input()) || !error.to_string().contains(error.rule()) {
        return Err(format!("{text:?}: the refusal {error:?} does not name its rule and input"));
    }
    Ok(())
}

/// `text` as a comma-separated list: when accepted, joined again it parses to the same list.
fn check_list(text: &str) -> Result<(), String> {
    match parse_list(text) {
        Ok(patterns) if !(1..=MAX_PATTERNS).contains(&patterns.len()) => {
            Err(format!("{text:?}: a list of {} patterns", patterns.len()))
        }
        Ok(patterns) => {
            let joined = patterns.iter().map(Pattern::as_str).collect::<Vec<_>>().join(",");
            match parse_list(&joined) {
                Ok(again) if again == patterns => Ok(()),
                again => Err(format!("{text:?} gave {patterns:?}; joined, {joined:?} gave {again:?}")),
            }
        }
        Err(error) => check_refusal(text, &error),
    }
}

/// `matches` agrees with the reference on `texts`; the all-pattern's witness exists when a
/// valid type among them matches, and is a valid type that matches.
fn check_matching<'a>(pattern: &Pattern, texts: impl IntoIterator<Item = &'a str>) -> Result<(), String> {
    let mut some_type_matches = false;
    for text in texts {
        let (got, want) = (pattern.matches(text), reference_matches(pattern.as_str(), text));
        if got != want {
            return Err(format!("{pattern} ~ {text:?}: matches says {got}, the SPEC's rule {want}"));
        }
        some_type_matches |= want && is_valid_type(text);
    }
    match pattern.witness(&Pattern::all()) {
        Some(witness) if !(is_valid_type(&witness) && pattern.matches(&witness)) => {
            Err(format!("{pattern}: witness {witness:?} is not a valid type it matches"))
        }
        None if some_type_matches => Err(format!("{pattern}: no witness, but a valid type matches it")),
        _ => Ok(()),
    }
}

fn check(bytes: &[u8]) -> Result<(), String> {
    let text = mutate::text(bytes);
    check_list(&text)?;
    let Some(pattern) = check_parse(&text)? else { return Ok(()) };
    let expansions = ["", "a", "a.b", "0-", "."].map(|fill| pattern.as_str().replace('*', fill));
    check_matching(&pattern, TYPES.iter().copied().chain(expansions.iter().map(String::as_str)))
}

#[test]
fn fuzz_pattern_corpus() {
    mutate::check_corpus(TARGET, check);
}

proptest! {
    #![proptest_config(mutate::config(mutate::DEFAULT_CASES))]

    #[test]
    fn fuzz_pattern_mutations(bytes in mutate::input(&mutate::corpus(TARGET), DICTIONARY)) {
        check(&bytes).map_err(TestCaseError::fail)?;
    }

    /// Small alphabets, so that matches are frequent: types, the pattern's own expansions
    /// with random fillers, and random text.
    #[test]
    fn fuzz_pattern_matches_the_spec(
        text in "[ab0.*-]{1,12}",
        types in prop::collection::vec("[ab][ab0-]{0,3}(\\.[ab][ab0-]{0,3}){1,3}", 0..8),
        fills in prop::collection::vec("[ab0.-]{0,4}", 1..4),
        noise in prop::collection::vec("[ab0.*\\-é]{0,12}", 0..4),
    ) {
        let pattern = check_parse(&text).map_err(TestCaseError::fail)?;
        let pattern = pattern.expect("the alphabet only holds pattern characters");
        let expansions: Vec<String> = fills.iter().map(|fill| text.replace('*', fill)).collect();
        let texts = types.iter().chain(&expansions).chain(&noise).map(String::as_str);
        check_matching(&pattern, texts).map_err(TestCaseError::fail)?;
    }
}
