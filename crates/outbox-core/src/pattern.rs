//! Event type patterns: `*`, an exact type, or a glob such as `node.gpu.*` (SPEC §3.5).
//!
//! A `*` matches any run of characters, dots included; every other character
//! matches itself, case-sensitively. Matching is the greedy two-pointer glob
//! walk, so it never backtracks exponentially.
//!
//! Two patterns *intersect* when some **valid** event type (SPEC §3.2) matches
//! both. That is decided exactly, not by heuristics: a breadth-first search over
//! the product of the two patterns' automata and a small automaton of the type
//! grammar finds the shortest such type, or proves there is none. The catalog
//! uses it to refuse subscriptions that nothing can match.

use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;

use crate::validate::MAX_TYPE_LEN;

/// The longest pattern, in characters.
pub const MAX_PATTERN_LEN: usize = 128;
/// The most patterns in one comma-separated list ([`parse_list`]).
pub const MAX_PATTERNS: usize = 20;

/// A pattern over event types: 1 to 128 characters of `[a-z0-9.*-]`.
///
/// It serializes as its plain text; deserializing checks the same rules as [`Pattern::parse`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pattern(String);

/// Why a text is not a pattern (or not a list of patterns): the input and the rule it broke.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid pattern {input:?}: {rule}")]
pub struct PatternError {
    input: String,
    rule: String,
}

impl PatternError {
    fn new(input: &str, rule: impl Into<String>) -> PatternError {
        PatternError { input: truncated(input).to_owned(), rule: rule.into() }
    }

    /// The refused text (cut short when it is very long).
    pub fn input(&self) -> &str {
        &self.input
    }

    /// The rule the text broke, in words.
    pub fn rule(&self) -> &str {
        &self.rule
    }
}

impl Pattern {
    /// Parses a pattern: 1 to 128 characters, each a lowercase letter, a digit, `.`, `-` or `*`.
    pub fn parse(text: &str) -> Result<Pattern, PatternError> {
        if text.is_empty() {
            return Err(PatternError::new(text, "must not be empty"));
        }
        let len = text.chars().count();
        if len > MAX_PATTERN_LEN {
            return Err(PatternError::new(text, format!("must have at most {MAX_PATTERN_LEN} characters (got {len})")));
        }
        match text.chars().find(|&c| !is_pattern_char(c)) {
            Some(c) => {
                Err(PatternError::new(text, format!("may only contain a-z, 0-9, '.', '-' and '*' (found {c:?})")))
            }
            None => Ok(Pattern(text.to_owned())),
        }
    }

    /// The pattern that matches every type, `*`.
    pub fn all() -> Pattern {
        Pattern("*".to_owned())
    }

    /// The pattern's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the pattern matches every string: it is made of `*` only (`*`, `**`, …).
    pub fn is_all(&self) -> bool {
        self.0.bytes().all(|b| b == b'*')
    }

    /// Whether `event_type` matches: `*` stands for any run of characters, dots
    /// included, and everything else must be equal, case-sensitively.
    ///
    /// It does not check that `event_type` is a valid type.
    pub fn matches(&self, event_type: &str) -> bool {
        glob_matches(self.0.as_bytes(), event_type.as_bytes())
    }

    /// Whether some valid event type matches both patterns.
    pub fn intersects(&self, other: &Pattern) -> bool {
        self.witness(other).is_some()
    }

    /// The shortest valid event type that matches both patterns, or `None` when
    /// no valid type (at most 128 characters) does.
    ///
    /// Among the shortest, the first in the order `a`–`z`, `0`–`9`, `-`, `.` is
    /// returned, so the answer is deterministic: `node.gpu.*` and `node.*` give
    /// `node.gpu.a`.
    pub fn witness(&self, other: &Pattern) -> Option<String> {
        Intersection::new(self, other).shortest()
    }

    /// The pattern as a SQL `LIKE` pattern, to be used with `ESCAPE '\'`: `\`,
    /// `%` and `_` are escaped with a backslash and `*` becomes `%`.
    pub fn to_sql_like(&self) -> String {
        like_escape(&self.0)
    }
}

/// Parses 1 to 20 comma-separated patterns, e.g. `reservation.*,node.connected`.
///
/// Whitespace around an item is ignored. An empty list, an empty item or more
/// than 20 items is refused, naming the rule; so is any item that is not a
/// [`Pattern`]. The patterns keep their order and duplicates are kept.
pub fn parse_list(text: &str) -> Result<Vec<Pattern>, PatternError> {
    if text.trim().is_empty() {
        return Err(PatternError::new(text, "must name at least one pattern"));
    }
    let items: Vec<&str> = text.split(',').map(str::trim).collect();
    if items.len() > MAX_PATTERNS {
        return Err(PatternError::new(
            text,
            format!("must name at most {MAX_PATTERNS} patterns (got {})", items.len()),
        ));
    }
    if items.iter().any(|item| item.is_empty()) {
        return Err(PatternError::new(text, "must not have an empty item between commas"));
    }
    items.into_iter().map(Pattern::parse).collect()
}

fn is_pattern_char(c: char) -> bool {
    matches!(c, 'a'..='z' | '0'..='9' | '.' | '-' | '*')
}

/// The greedy two-pointer glob walk: on a mismatch, let the last `*` swallow
/// one more character and retry from there. At most O(pattern × text) steps.
fn glob_matches(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where to resume after the last `*`: (pattern index after it, text index it has swallowed up to).
    let mut resume: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                resume = Some((p + 1, t));
                p += 1;
            }
            Some(&c) if c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match resume {
                Some((after_star, swallowed)) => {
                    resume = Some((after_star, swallowed + 1));
                    p = after_star;
                    t = swallowed + 1;
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

fn like_escape(text: &str) -> String {
    let mut like = String::with_capacity(text.len() + 2);
    for c in text.chars() {
        match c {
            '\\' | '%' | '_' => {
                like.push('\\');
                like.push(c);
            }
            '*' => like.push('%'),
            _ => like.push(c),
        }
    }
    like
}

/// Keeps error messages short when the offending text is huge.
fn truncated(text: &str) -> &str {
    match text.char_indices().nth(MAX_PATTERN_LEN + 2) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

/// The characters a valid type is made of, in the order the search tries them.
const TYPE_ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789-.";

/// The type grammar `^[a-z][a-z0-9-]*(\.[a-z][a-z0-9-]*)+$` as a DFA; the length limit is the search's depth limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TypeState {
    /// Nothing read yet: a letter must come.
    Start,
    /// Inside the first segment: no dot seen yet.
    FirstSegment,
    /// Right after a dot: a letter must come.
    AfterDot,
    /// Inside a later segment: the type so far is valid.
    LaterSegment,
}

impl TypeState {
    const COUNT: usize = 4;

    fn step(self, c: u8) -> Option<TypeState> {
        let inner = matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'-');
        match self {
            TypeState::Start | TypeState::AfterDot if !c.is_ascii_lowercase() => None,
            TypeState::Start => Some(TypeState::FirstSegment),
            TypeState::AfterDot => Some(TypeState::LaterSegment),
            TypeState::FirstSegment | TypeState::LaterSegment if c == b'.' => Some(TypeState::AfterDot),
            state if inner => Some(state),
            _ => None,
        }
    }

    fn accepts(self) -> bool {
        self == TypeState::LaterSegment
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// A pattern as a nondeterministic automaton: its states are positions in the
/// text (with runs of `*` collapsed to one, which matches the same strings), and
/// a `*` either loops on any character or is skipped without reading one.
struct Glob(Vec<u8>);

impl Glob {
    fn new(pattern: &Pattern) -> Glob {
        let mut bytes = pattern.as_str().as_bytes().to_vec();
        bytes.dedup_by(|a, b| *a == b'*' && *b == b'*');
        Glob(bytes)
    }

    /// The number of positions, the end included.
    fn positions(&self) -> usize {
        self.0.len() + 1
    }

    /// `at` and, when `at` is a `*`, the position after it (reached without reading).
    fn closure(&self, at: usize) -> impl Iterator<Item = usize> {
        let skip = (self.0.get(at) == Some(&b'*')).then_some(at + 1);
        std::iter::once(at).chain(skip)
    }

    /// The positions reached from `at` by reading `c`.
    fn step(&self, at: usize, c: u8) -> impl Iterator<Item = usize> {
        self.closure(at).filter_map(move |k| match self.0.get(k) {
            Some(b'*') => Some(k),
            Some(&literal) if literal == c => Some(k + 1),
            _ => None,
        })
    }

    fn accepts(&self, at: usize) -> bool {
        self.closure(at).any(|k| k == self.0.len())
    }
}

/// One state of the product automaton: a position in each pattern and the type DFA's state.
#[derive(Debug, Clone, Copy)]
struct State {
    a: usize,
    b: usize,
    ty: TypeState,
}

/// How the search first reached a state: from which state, reading which character.
#[derive(Debug, Clone, Copy)]
struct Visit {
    parent: usize,
    c: u8,
    depth: usize,
}

/// The breadth-first search for the shortest valid type matching two patterns.
struct Intersection {
    a: Glob,
    b: Glob,
    /// Indexed by [`Intersection::index`]; `None` until the state is reached.
    visits: Vec<Option<Visit>>,
}

impl Intersection {
    fn new(a: &Pattern, b: &Pattern) -> Intersection {
        let (a, b) = (Glob::new(a), Glob::new(b));
        let visits = vec![None; a.positions() * b.positions() * TypeState::COUNT];
        Intersection { a, b, visits }
    }

    fn index(&self, state: State) -> usize {
        (state.a * self.b.positions() + state.b) * TypeState::COUNT + state.ty.index()
    }

    /// Breadth-first, so the first accepting state popped ends a shortest
    /// string; nothing longer than a type may be is ever expanded.
    fn shortest(mut self) -> Option<String> {
        let start = State { a: 0, b: 0, ty: TypeState::Start };
        let start_index = self.index(start);
        self.visits[start_index] = Some(Visit { parent: start_index, c: 0, depth: 0 });
        let mut queue = VecDeque::from([start]);
        while let Some(state) = queue.pop_front() {
            let index = self.index(state);
            if self.accepts(state) {
                return Some(self.spell(index));
            }
            let depth = self.visits[index].map_or(0, |visit| visit.depth);
            if depth < MAX_TYPE_LEN {
                self.expand(state, index, depth, &mut queue);
            }
        }
        None
    }

    fn accepts(&self, state: State) -> bool {
        state.ty.accepts() && self.a.accepts(state.a) && self.b.accepts(state.b)
    }

    fn expand(&mut self, state: State, parent: usize, depth: usize, queue: &mut VecDeque<State>) {
        for &c in TYPE_ALPHABET {
            let Some(ty) = state.ty.step(c) else { continue };
            let next_a: Vec<usize> = self.a.step(state.a, c).collect();
            let next_b: Vec<usize> = self.b.step(state.b, c).collect();
            for (&a, &b) in next_a.iter().flat_map(|a| next_b.iter().map(move |b| (a, b))) {
                let next = State { a, b, ty };
                let index = self.index(next);
                if self.visits[index].is_none() {
                    self.visits[index] = Some(Visit { parent, c, depth: depth + 1 });
                    queue.push_back(next);
                }
            }
        }
    }

    /// The string that first reached the state at `index`, read back through the parents.
    fn spell(&self, mut index: usize) -> String {
        let mut reversed = Vec::new();
        while let Some(visit) = self.visits[index].filter(|visit| visit.depth > 0) {
            reversed.push(visit.c);
            index = visit.parent;
        }
        reversed.iter().rev().map(|&c| char::from(c)).collect()
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for Pattern {
    type Err = PatternError;

    fn from_str(s: &str) -> Result<Pattern, PatternError> {
        Pattern::parse(s)
    }
}

impl serde::Serialize for Pattern {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for Pattern {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Pattern, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Pattern::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(text: &str) -> Pattern {
        Pattern::parse(text).unwrap()
    }

    #[track_caller]
    fn check_parse(input: &str, expect: Result<(), &str>) {
        let got = Pattern::parse(input).map(|p| assert_eq!(p.as_str(), input)).map_err(|e| e.to_string());
        match (got, expect) {
            (Ok(()), Ok(())) => {}
            (Err(message), Err(needle)) => assert!(message.contains(needle), "{input:?}: {message}"),
            (got, expect) => panic!("{input:?}: got {got:?}, expected {expect:?}"),
        }
    }

    #[test]
    fn parses_the_pattern_alphabet_and_refuses_the_rest() {
        check_parse("*", Ok(()));
        check_parse("reservation.*", Ok(()));
        check_parse("*.deleted", Ok(()));
        check_parse("node.gpu.*", Ok(()));
        check_parse("node.pxe-mac.discovered", Ok(()));
        check_parse("a", Ok(())); // a pattern, even though no valid type matches it
        check_parse("a..b", Ok(()));
        check_parse(&"a".repeat(128), Ok(()));
        check_parse(&"a".repeat(129), Err("at most 128 characters (got 129)"));
        check_parse("", Err("must not be empty"));
        check_parse("Node.*", Err("found 'N'"));
        check_parse("node_x.*", Err("found '_'"));
        check_parse("node.%", Err("found '%'"));
        check_parse("node. *", Err("found ' '"));
        check_parse("node.é", Err("found 'é'"));
    }

    #[test]
    fn errors_name_the_pattern_and_the_rule() {
        let error = Pattern::parse("Node.*").unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid pattern \"Node.*\": may only contain a-z, 0-9, '.', '-' and '*' (found 'N')"
        );
        assert_eq!(error.input(), "Node.*");
        let huge = Pattern::parse(&"a".repeat(10_000)).unwrap_err();
        assert!(huge.input().len() < 200, "the message stays short");
    }

    #[track_caller]
    fn check_match(pattern_text: &str, event_type: &str, expect: bool) {
        assert_eq!(pattern(pattern_text).matches(event_type), expect, "{pattern_text:?} ~ {event_type:?}");
    }

    #[test]
    fn star_matches_any_run_and_the_rest_is_literal() {
        check_match("*", "", true);
        check_match("*", "node.gpu.added", true);
        check_match("reservation.*", "reservation.active", true);
        check_match("reservation.*", "reservation.", true);
        check_match("reservation.*", "reservation", false);
        check_match("reservation.*", "reservations.active", false);
        check_match("node.*", "node.gpu.added", true); // dots included
        check_match("*.deleted", "site.deleted", true);
        check_match("*.deleted", "node.gpu.deleted", true);
        check_match("*.deleted", "site.deleted.not", false);
        check_match("node.connected", "node.connected", true);
        check_match("node.connected", "node.connectedx", false);
        check_match("node.connected", "Node.connected", false); // case-sensitive
        check_match("n*e.*d", "node.gpu.added", true);
        check_match("a*a*a", "aa", false);
        check_match("a*a*a", "aaa", true);
        check_match("**", "", true);
        check_match("a**b", "ab", true);
        check_match("node.*", "node.é", true);
    }

    #[test]
    fn matching_does_not_backtrack_exponentially() {
        let nasty = pattern(&format!("{}c", "a*".repeat(60)));
        let text = format!("{}b", "a".repeat(10_000));
        assert!(!nasty.matches(&text));
    }

    #[test]
    fn is_all_means_only_stars() {
        assert!(Pattern::all().is_all());
        assert!(pattern("**").is_all());
        assert!(!pattern("*.*").is_all());
        assert!(!pattern("node.*").is_all());
    }

    #[track_caller]
    fn check_witness(a: &str, b: &str, expect: Option<&str>) {
        let (a, b) = (pattern(a), pattern(b));
        assert_eq!(a.witness(&b).as_deref(), expect, "{a} ∩ {b}");
        assert_eq!(b.witness(&a).map(|w| w.len()), expect.map(str::len), "{b} ∩ {a}, swapped");
        assert_eq!(a.intersects(&b), expect.is_some(), "{a} ∩ {b}");
    }

    #[test]
    fn intersects_over_valid_types_only() {
        check_witness("node.gpu.*", "node.*", Some("node.gpu.a"));
        check_witness("*.deleted", "node.*", Some("node.deleted"));
        check_witness("reservation.*", "node.*", None);
        check_witness("a..b", "*", None); // no valid type has an empty segment
        check_witness("*", "*", Some("a.a"));
        check_witness("**", "*", Some("a.a"));
        check_witness("node.connected", "node.connected", Some("node.connected"));
        check_witness("node.connected", "node.disconnected", None);
        check_witness("node", "*", None); // one segment is not a type
        check_witness("node.*", "node*", Some("node.a"));
        check_witness("*-", "*", Some("a.a-"));
        check_witness("*1*", "*", Some("a1.a"));
        check_witness("*.1*", "*", None); // a segment starts with a letter
        check_witness("*.1", "*", None); // a segment starts with a letter
        check_witness("*.", "*", None);
        check_witness(".*", "*", None);
        check_witness("*a*", "*b*", Some("a.b"));
        check_witness("a*", "*b", Some("a.b"));
        check_witness("a.*.c", "*.b.*", Some("a.b.c"));
    }

    #[test]
    fn a_witness_is_at_most_128_characters() {
        let long = format!("{}*", "a".repeat(126));
        assert_eq!(pattern(&long).witness(&Pattern::all()).map(|w| w.len()), Some(128));
        let too_long = format!("{}*", "a".repeat(127));
        assert_eq!(pattern(&too_long).witness(&Pattern::all()), None); // "a…a.a" would be 129
    }

    #[test]
    fn the_longest_patterns_intersect_quickly() {
        let stars = pattern(&"*a".repeat(64));
        let dots = pattern(&"a*.".repeat(42));
        assert!(!stars.intersects(&dots)); // the dots pattern ends in '.'
        assert!(stars.intersects(&pattern(&"a*".repeat(64))));
    }

    #[test]
    fn sql_like_escapes_and_turns_stars_into_percent() {
        assert_eq!(pattern("reservation.*").to_sql_like(), "reservation.%");
        assert_eq!(pattern("*.deleted").to_sql_like(), "%.deleted");
        assert_eq!(pattern("node.pxe-mac.discovered").to_sql_like(), "node.pxe-mac.discovered");
        assert_eq!(like_escape(r"a_b%c\d*"), r"a\_b\%c\\d%");
    }

    #[track_caller]
    fn check_list(input: &str, expect: Result<&[&str], &str>) {
        let got = parse_list(input);
        match (got, expect) {
            (Ok(patterns), Ok(texts)) => assert_eq!(patterns.iter().map(Pattern::as_str).collect::<Vec<_>>(), texts),
            (Err(error), Err(needle)) => assert!(error.to_string().contains(needle), "{input:?}: {error}"),
            (got, expect) => panic!("{input:?}: got {got:?}, expected {expect:?}"),
        }
    }

    #[test]
    fn lists_hold_one_to_twenty_patterns() {
        check_list("reservation.*,node.connected", Ok(&["reservation.*", "node.connected"]));
        check_list("*", Ok(&["*"]));
        check_list(" node.* , site.* ", Ok(&["node.*", "site.*"]));
        check_list(&vec!["a.*"; 20].join(","), Ok(&["a.*"; 20]));
        check_list(&vec!["a.*"; 21].join(","), Err("at most 20 patterns (got 21)"));
        check_list("", Err("at least one pattern"));
        check_list("  ", Err("at least one pattern"));
        check_list("node.*,", Err("empty item"));
        check_list("node.*,,site.*", Err("empty item"));
        check_list("node.*,Site.*", Err("invalid pattern \"Site.*\""));
    }

    #[test]
    fn serde_is_the_plain_text_and_deserializing_validates() {
        let p = pattern("node.gpu.*");
        assert_eq!(serde_json::to_string(&p).unwrap(), "\"node.gpu.*\"");
        assert_eq!(serde_json::from_str::<Pattern>("\"node.gpu.*\"").unwrap(), p);
        let error = serde_json::from_str::<Pattern>("\"Node\"").unwrap_err();
        assert!(error.to_string().contains("invalid pattern \"Node\""), "{error}");
        assert_eq!("node.*".parse::<Pattern>().unwrap().to_string(), "node.*");
    }
}
