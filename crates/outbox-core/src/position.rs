//! The outbox position: `(txid, seq)`, the cursor of every reader (SPEC §3.6).
//!
//! Positions order by transaction id, then by sequence, as unsigned numbers.
//! Two text forms exist: dotted `<txid>.<seq>` (SSE ids and an event's
//! `sequence`) and colon `<txid>:<seq>` (the `cursor` of a history page).
//! Every input accepts both; each output writes its own.

use std::fmt;
use std::str::FromStr;

/// A place in the outbox: after the row written by transaction `txid` with sequence `seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Position {
    /// The writing transaction's id (`xid8`).
    pub txid: u64,
    /// The row's `seq` (`bigserial`).
    pub seq: u64,
}

/// Why a text is not a position.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid position {input:?}: {reason}")]
pub struct PositionError {
    input: String,
    reason: &'static str,
}

impl Position {
    /// The position before every row.
    pub const START: Position = Position { txid: 0, seq: 0 };

    /// A position from its two parts.
    pub const fn new(txid: u64, seq: u64) -> Position {
        Position { txid, seq }
    }

    /// The dotted form, `<txid>.<seq>`, used by SSE ids and an event's `sequence`.
    pub fn dotted(self) -> String {
        self.to_string()
    }

    /// The colon form, `<txid>:<seq>`, used by a history page's `cursor`.
    pub fn colon(self) -> String {
        format!("{}:{}", self.txid, self.seq)
    }

    /// Parses either text form. Each group is 1 to 20 ASCII digits and must fit in 64 bits.
    pub fn parse(input: &str) -> Result<Position, PositionError> {
        let fail = |reason| PositionError { input: input.to_owned(), reason };
        let (txid, seq) = input.split_once(['.', ':']).ok_or_else(|| fail("expected <txid>.<seq> or <txid>:<seq>"))?;
        let separator = &input[txid.len()..=txid.len()];
        if seq.contains(separator) || seq.contains(['.', ':']) {
            return Err(fail("expected exactly two groups"));
        }
        Ok(Position { txid: parse_group(txid).map_err(fail)?, seq: parse_group(seq).map_err(fail)? })
    }
}

fn parse_group(group: &str) -> Result<u64, &'static str> {
    if group.is_empty() || group.len() > 20 {
        return Err("each group must have 1 to 20 digits");
    }
    if !group.bytes().all(|b| b.is_ascii_digit()) {
        return Err("each group must be digits only");
    }
    group.parse::<u64>().map_err(|_| "a group does not fit in 64 bits")
}

impl fmt::Display for Position {
    /// Writes the dotted form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.txid, self.seq)
    }
}

impl FromStr for Position {
    type Err = PositionError;

    fn from_str(s: &str) -> Result<Position, PositionError> {
        Position::parse(s)
    }
}

impl serde::Serialize for Position {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Position {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Position, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Position::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(input: &str, expect: Option<(u64, u64)>) {
        let got = Position::parse(input).ok().map(|p| (p.txid, p.seq));
        assert_eq!(got, expect, "{input:?}");
    }

    #[test]
    fn parses_both_forms_and_refuses_the_rest() {
        check("88213.51120", Some((88213, 51120)));
        check("88213:51120", Some((88213, 51120)));
        check("0.0", Some((0, 0)));
        check("18446744073709551615.18446744073709551615", Some((u64::MAX, u64::MAX)));
        check("00000000000000000001:1", Some((1, 1)));
        check("18446744073709551616.1", None); // one past u64::MAX
        check("1.99999999999999999999", None); // 20 digits, too large
        check("000000000000000000001.1", None); // 21 digits
        check("1", None);
        check("1.", None);
        check(".1", None);
        check("1.2.3", None);
        check("1:2:3", None);
        check("1.2:3", None);
        check("+1.2", None);
        check("-1.2", None);
        check(" 1.2", None);
        check("1.2 ", None);
        check("a.b", None);
        check("١.٢", None); // non-ASCII digits
        check("", None);
    }

    #[test]
    fn orders_by_txid_then_seq_as_numbers() {
        let p = |t, s| Position::new(t, s);
        assert!(p(9, 100) < p(10, 1));
        assert!(p(10, 2) < p(10, 10));
        assert!(Position::START < p(0, 1));
    }

    #[test]
    fn each_output_uses_its_own_form() {
        let p = Position::new(88213, 51120);
        assert_eq!(p.to_string(), "88213.51120");
        assert_eq!(p.colon(), "88213:51120");
        assert_eq!(serde_json::to_string(&p).unwrap(), "\"88213.51120\"");
        assert_eq!(serde_json::from_str::<Position>("\"88213:51120\"").unwrap(), p);
    }
}
