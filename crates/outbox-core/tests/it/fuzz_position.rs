//! Fuzzing `Position::parse` (SPEC §3.6) with `fuzz/corpus/position`: it never panics, it
//! accepts exactly two groups of 1 to 20 ASCII digits that fit in 64 bits (a regex and
//! `u128` arithmetic say so independently), what it accepts comes back unchanged through
//! both text forms and serde, and a refusal says why.

use std::sync::LazyLock;

use outbox_core::Position;
use proptest::prelude::*;
use regex::Regex;

use crate::mutate;

const TARGET: &str = "position";

/// Tokens a position's text is made of, for the mutations.
const DICTIONARY: &[&str] = &[".", ":", "0", "1", "9", "00000000000000000000", "18446744073709551615", "٣", "+", "-"];

/// The rule of SPEC §3.6, written without the parser's code: two groups, one separator.
fn reference(text: &str) -> Option<Position> {
    static RULE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^([0-9]{1,20})[.:]([0-9]{1,20})$").unwrap());
    let groups = RULE.captures(text)?;
    let group = |i: usize| u64::try_from(groups[i].parse::<u128>().ok()?).ok();
    Some(Position::new(group(1)?, group(2)?))
}

fn check(bytes: &[u8]) -> Result<(), String> {
    let text = mutate::text(bytes);
    let parsed = Position::parse(&text);
    let from_json = serde_json::from_value::<Position>(serde_json::Value::String(text.clone()));
    if parsed.as_ref().ok() != reference(&text).as_ref() {
        return Err(format!("{text:?}: parsed {parsed:?}, the rule says {:?}", reference(&text)));
    }
    if parsed.as_ref().ok() != from_json.as_ref().ok() {
        return Err(format!("{text:?}: parse gave {parsed:?}, serde {from_json:?}"));
    }
    match parsed {
        Ok(position) => round_trips(&text, position),
        Err(error) => {
            let message = error.to_string();
            let reason = message.rsplit_once(": ").map_or("", |(_, reason)| reason);
            if !message.starts_with("invalid position") || reason.is_empty() {
                return Err(format!("{text:?}: the refusal {message:?} gives no reason"));
            }
            Ok(())
        }
    }
}

fn round_trips(text: &str, position: Position) -> Result<(), String> {
    for form in [position.to_string(), position.dotted(), position.colon()] {
        if Position::parse(&form) != Ok(position) {
            return Err(format!("{text:?} parsed to {position:?}, whose form {form:?} does not parse back"));
        }
    }
    let json = serde_json::to_string(&position).map_err(|e| e.to_string())?;
    match serde_json::from_str::<Position>(&json) {
        Ok(back) if back == position => Ok(()),
        other => Err(format!("{text:?}: {json} came back as {other:?}")),
    }
}

#[test]
fn fuzz_position_corpus() {
    mutate::check_corpus(TARGET, check);
}

proptest! {
    #![proptest_config(mutate::config(mutate::DEFAULT_CASES * 5))]

    #[test]
    fn fuzz_position_mutations(bytes in mutate::input(&mutate::corpus(TARGET), DICTIONARY)) {
        check(&bytes).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn fuzz_position_digit_soup(text in "[0-9.:]{0,46}") {
        check(text.as_bytes()).map_err(TestCaseError::fail)?;
    }
}
