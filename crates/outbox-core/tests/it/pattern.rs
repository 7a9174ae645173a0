//! Properties of [`Pattern`]: matching agrees with a regex, intersection is
//! sound and complete against brute force, and the SQL form means the same.

use std::sync::LazyLock;

use outbox_core::validate::is_valid_type;
use outbox_core::{Pattern, pattern::parse_list};
use proptest::prelude::*;
use regex::Regex;

/// Patterns over a tiny alphabet, so that matches and intersections are frequent.
fn small_pattern() -> impl Strategy<Value = Pattern> {
    "[ab0.*-]{1,5}".prop_map(|text| Pattern::parse(&text).expect("the strategy only draws pattern characters"))
}

/// Strings over the same alphabet, without stars.
fn small_text() -> impl Strategy<Value = String> {
    "[ab0.-]{0,10}"
}

/// Valid types over the same alphabet.
fn small_type() -> impl Strategy<Value = String> {
    "[ab][ab0-]{0,2}(\\.[ab][ab0-]{0,2}){1,2}"
}

/// Patterns that match `ty` by construction: some characters become `*`, some get a `*` before them.
fn pattern_matching(ty: String) -> impl Strategy<Value = Pattern> {
    proptest::collection::vec(0..4u8, ty.len()).prop_map(move |choices| {
        let mut text = String::new();
        for (c, choice) in ty.chars().zip(choices) {
            match choice {
                0 | 1 => text.push(c),
                2 => text.push('*'),
                _ => text.extend(['*', c]),
            }
        }
        Pattern::parse(&text).unwrap()
    })
}

/// A valid type and two patterns, each usually built to match it and sometimes drawn at random.
fn type_and_two_patterns() -> impl Strategy<Value = (String, Pattern, Pattern)> {
    small_type().prop_flat_map(|ty| {
        let either = |ty: &String| prop_oneof![3 => pattern_matching(ty.clone()), 1 => small_pattern()];
        (Just(ty.clone()), either(&ty), either(&ty))
    })
}

/// The obvious meaning of a pattern: `*` is `.*`, everything else is itself.
fn reference_regex(pattern: &Pattern) -> Regex {
    let body: String = pattern
        .as_str()
        .chars()
        .map(|c| if c == '*' { ".*".to_owned() } else { regex::escape(&c.to_string()) })
        .collect();
    Regex::new(&format!("(?s)^{body}$")).unwrap()
}

/// The meaning of a SQL `LIKE` pattern with `ESCAPE '\'`: `%` is any run, `_` any one character.
fn like_regex(like: &str) -> Regex {
    let mut body = String::new();
    let mut chars = like.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => body.push_str(&regex::escape(&chars.next().expect("no dangling escape").to_string())),
            '%' => body.push_str(".*"),
            '_' => body.push('.'),
            _ => body.push_str(&regex::escape(&c.to_string())),
        }
    }
    Regex::new(&format!("(?s)^{body}$")).unwrap()
}

/// Every valid type of at most 6 characters over `a`, `b`, `0`, `.`, `-`, shortest first.
static SMALL_TYPES: LazyLock<Vec<String>> = LazyLock::new(|| {
    let mut all = vec![String::new()];
    let mut frontier = vec![String::new()];
    for _ in 0..6 {
        frontier = frontier.iter().flat_map(|prefix| "ab0.-".chars().map(move |c| format!("{prefix}{c}"))).collect();
        all.extend(frontier.iter().cloned());
    }
    all.retain(|text| is_valid_type(text));
    all
});

fn first_common_small_type(a: &Pattern, b: &Pattern) -> Option<&'static String> {
    SMALL_TYPES.iter().find(|text| a.matches(text) && b.matches(text))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn matching_agrees_with_the_regex(pattern in small_pattern(), text in small_text()) {
        prop_assert_eq!(pattern.matches(&text), reference_regex(&pattern).is_match(&text), "{} ~ {:?}", pattern, text);
    }

    #[test]
    fn matching_agrees_with_the_regex_on_its_own_expansions(pattern in small_pattern(), fill in "[ab.]{0,3}") {
        // Replace every star by the same filler: such a text always matches, which exercises the positive side.
        let text = pattern.as_str().replace('*', &fill);
        prop_assert!(pattern.matches(&text), "{} ~ {:?}", pattern, text);
        prop_assert!(reference_regex(&pattern).is_match(&text));
    }

    #[test]
    fn parse_accepts_exactly_the_pattern_alphabet(text in "[a-zA-Z0-9.*_%\\\\ -]{0,130}") {
        static RULE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^[a-z0-9.*-]{1,128}$").unwrap());
        prop_assert_eq!(Pattern::parse(&text).is_ok(), RULE.is_match(&text), "{:?}", text);
    }

    #[test]
    fn a_type_matching_both_proves_they_intersect((ty, a, b) in type_and_two_patterns()) {
        if !(a.matches(&ty) && b.matches(&ty)) {
            return Ok(());
        }
        prop_assert!(a.intersects(&b), "{} ∩ {} holds {:?}", a, b, ty);
        let witness = a.witness(&b).unwrap();
        prop_assert!(witness.len() <= ty.len(), "{} ∩ {}: {:?} is not shortest, {:?} is shorter", a, b, witness, ty);
    }

    #[test]
    fn a_witness_is_a_valid_type_matching_both(a in small_pattern(), b in small_pattern()) {
        if let Some(witness) = a.witness(&b) {
            prop_assert!(is_valid_type(&witness), "{} ∩ {}: {:?} is not a valid type", a, b, witness);
            prop_assert!(a.matches(&witness) && b.matches(&witness), "{} ∩ {}: {:?} does not match both", a, b, witness);
            prop_assert!(a.intersects(&b));
        }
    }

    #[test]
    fn no_witness_means_brute_force_finds_none(a in small_pattern(), b in small_pattern()) {
        match (a.witness(&b), first_common_small_type(&a, &b)) {
            (None, Some(found)) => prop_assert!(false, "{} ∩ {}: no witness, but {:?} matches both", a, b, found),
            (Some(witness), Some(found)) => prop_assert!(witness.len() <= found.len(), "{} ∩ {}: {:?} is longer than {:?}", a, b, witness, found),
            _ => {}
        }
    }

    #[test]
    fn intersection_is_symmetric(a in small_pattern(), b in small_pattern()) {
        prop_assert_eq!(a.witness(&b).map(|w| w.len()), b.witness(&a).map(|w| w.len()), "{} ∩ {}", a, b);
    }

    #[test]
    fn a_pattern_meets_itself_iff_it_meets_the_all_pattern(a in small_pattern()) {
        // Both say the same thing: some valid type matches `a`.
        prop_assert_eq!(a.intersects(&a), a.intersects(&Pattern::all()), "{}", a);
    }

    #[test]
    fn sql_like_escapes_and_turns_stars_into_percent(pattern in "[a-z0-9.*-]{1,24}".prop_map(|t| Pattern::parse(&t).unwrap())) {
        let like = pattern.to_sql_like();
        let bytes = like.as_bytes();
        for (i, &b) in bytes.iter().enumerate() {
            if b == b'_' {
                prop_assert!(i > 0 && bytes[i - 1] == b'\\', "unescaped '_' in {:?}", like);
            }
        }
        prop_assert!(!like.contains('*'), "{:?}", like);
        prop_assert_eq!(like.matches('%').count(), pattern.as_str().matches('*').count());
        prop_assert_eq!(like.replace('%', "*"), pattern.as_str());
    }

    #[test]
    fn sql_like_means_what_the_pattern_means(pattern in small_pattern(), text in "[ab0._%\\\\-]{0,10}") {
        let like = like_regex(&pattern.to_sql_like());
        prop_assert_eq!(like.is_match(&text), pattern.matches(&text), "{} ~ {:?} as LIKE {:?}", pattern, text, pattern.to_sql_like());
    }

    #[test]
    fn lists_round_trip(patterns in proptest::collection::vec(small_pattern(), 1..=20)) {
        let text = patterns.iter().map(Pattern::as_str).collect::<Vec<_>>().join(",");
        prop_assert_eq!(parse_list(&text).unwrap(), patterns);
    }
}
