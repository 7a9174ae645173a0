//! An event's `data`: its own fields, kept as compact JSON text.
//!
//! The outbox never looks inside `data`: every reader passes it on (list pages, the
//! live stream, sinks) in the text it was stored as. Keeping it as text instead of a
//! parsed [`Value`] spares each read a parse and each write a re-serialization; a
//! consumer that wants the fields parses them once, into its own type
//! ([`Data::parse`]) or a [`Value`] ([`Data::value`]).
//!
//! The text is always compact (no whitespace outside strings), however it arrived:
//! PostgreSQL writes `jsonb` as `{"a": 1, "b": 2}`, and an event's JSON must fit on one
//! line of a Server-Sent-Events frame or a JSON-lines file.

use std::borrow::Cow;
use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

/// An event's own fields, as compact JSON text (valid by construction).
#[derive(Clone)]
pub struct Data(Box<RawValue>);

impl Data {
    /// `text`, checked to be JSON and made compact.
    pub fn from_json(text: &str) -> serde_json::Result<Data> {
        RawValue::from_string(compact_json(text).into_owned()).map(Data)
    }

    /// JSON already checked (a [`RawValue`] borrowed from a larger document, say), made
    /// compact; copied as it is when it is compact already.
    pub fn from_raw(raw: &RawValue) -> Data {
        match compact_json(raw.get()) {
            Cow::Borrowed(_) => Data(raw.to_owned()),
            // Removing whitespace outside strings keeps JSON valid, so this check passes; were
            // it ever to fail, the text as it came is still the same JSON.
            Cow::Owned(text) => Data(RawValue::from_string(text).unwrap_or_else(|_| raw.to_owned())),
        }
    }

    /// The compact JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// The fields as a [`Value`] (parsed on each call).
    pub fn value(&self) -> Value {
        // The text is valid JSON by construction, so this parse does not fail.
        serde_json::from_str(self.get()).unwrap_or(Value::Null)
    }

    /// The fields as `T`.
    pub fn parse<T: DeserializeOwned>(&self) -> serde_json::Result<T> {
        serde_json::from_str(self.get())
    }
}

impl From<&Value> for Data {
    fn from(value: &Value) -> Data {
        // A `Value` always serializes (its map keys are strings), compactly.
        serde_json::value::to_raw_value(value).map_or_else(|_| Data::default(), Data)
    }
}

impl From<Value> for Data {
    fn from(value: Value) -> Data {
        Data::from(&value)
    }
}

impl Default for Data {
    /// `null`.
    fn default() -> Data {
        Data(RawValue::NULL.to_owned())
    }
}

/// Equal when the texts are, or else when they hold the same JSON (`{"a":1,"b":2}` equals
/// `{"b":2,"a":1}`).
impl PartialEq for Data {
    fn eq(&self, other: &Data) -> bool {
        self.get() == other.get() || self.value() == other.value()
    }
}

impl PartialEq<Value> for Data {
    fn eq(&self, other: &Value) -> bool {
        self.value() == *other
    }
}

impl PartialEq<Data> for Value {
    fn eq(&self, other: &Data) -> bool {
        other == self
    }
}

impl fmt::Debug for Data {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.get())
    }
}

impl fmt::Display for Data {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.get())
    }
}

/// Written as the JSON itself, not as a string holding it.
impl Serialize for Data {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Data {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Data, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        match compact_json(raw.get()) {
            Cow::Borrowed(_) => Ok(Data(raw)),
            Cow::Owned(text) => RawValue::from_string(text).map(Data).map_err(serde::de::Error::custom),
        }
    }
}

/// `text` without whitespace outside strings (borrowed when it has none). Inside a JSON
/// string, whitespace is kept and an escaped quote does not end the string; the text between
/// removed bytes is copied in runs. Removing whitespace outside strings keeps valid JSON
/// valid and equal.
pub fn compact_json(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    let mut kept_from = 0;
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'"' => at = string_end(bytes, at + 1),
            // Each cut is at an ASCII byte, so both sides are whole characters.
            b' ' | b'\n' | b'\r' | b'\t' => {
                out.get_or_insert_with(|| String::with_capacity(bytes.len())).push_str(&text[kept_from..at]);
                at += 1;
                kept_from = at;
            }
            _ => at += 1,
        }
    }
    let Some(mut out) = out else { return Cow::Borrowed(text) };
    out.push_str(text.get(kept_from..).unwrap_or_default());
    Cow::Owned(out)
}

/// Where the JSON string whose text starts at `at` ends: just after its closing quote (the
/// end of `bytes` when it has none). Eight bytes at a time while none of them is a quote or
/// a backslash, then byte by byte.
fn string_end(bytes: &[u8], mut at: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    const QUOTES: u64 = ONES * b'"' as u64;
    const BACKSLASHES: u64 = ONES * b'\\' as u64;
    // Nonzero when a byte of `word` is zero, and only then.
    let has_zero_byte = |word: u64| word.wrapping_sub(ONES) & !word & HIGHS;
    while let Some(chunk) = bytes.get(at..at + 8) {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        let word = u64::from_le_bytes(word);
        if has_zero_byte(word ^ QUOTES) | has_zero_byte(word ^ BACKSLASHES) != 0 {
            break;
        }
        at += 8;
    }
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'"' => return at + 1,
            // An escape: the character after the backslash is part of the string.
            b'\\' => at += 2,
            _ => at += 1,
        }
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn postgres_jsonb_text_becomes_compact_and_strings_keep_their_spaces() {
        let data: Data = serde_json::from_str(r#"{"a": 1, "b": [1, 2], "s": "x y\" z, \\", "n": null}"#).unwrap();
        assert_eq!(data.get(), r#"{"a":1,"b":[1,2],"s":"x y\" z, \\","n":null}"#);
        let pretty = "{\n  \"a\": {\n    \"b\": \"c d\"\n  }\n}";
        assert_eq!(Data::from_json(pretty).unwrap().get(), r#"{"a":{"b":"c d"}}"#);
    }

    #[test]
    fn the_default_is_null() {
        assert_eq!(Data::default().get(), "null");
        assert_eq!(Data::default(), Value::Null);
    }

    #[test]
    fn compact_text_is_kept_as_it_is() {
        assert!(matches!(compact_json(r#"{"a":"b c","d":[1,2]}"#), Cow::Borrowed(_)));
        assert_eq!(compact_json(" 1 "), "1");
    }

    #[test]
    fn serializes_as_json_not_as_a_string() {
        let data = Data::from(json!({"state": "active", "n": 3}));
        let text = serde_json::to_string(&json!({"data": data.value()})).unwrap();
        assert_eq!(serde_json::to_string(&Wrapper { data: data.clone() }).unwrap(), text);
        assert_eq!(data.parse::<Value>().unwrap(), json!({"n": 3, "state": "active"}));
    }

    #[derive(Serialize)]
    struct Wrapper {
        data: Data,
    }

    #[test]
    fn equal_json_is_equal_whatever_its_key_order() {
        let stored: Data = serde_json::from_str(r#"{"b": 2, "a": 1}"#).unwrap();
        assert_eq!(stored, Data::from(json!({"a": 1, "b": 2})));
        assert_eq!(stored, json!({"b": 2, "a": 1}));
        assert_ne!(stored, Data::from(json!({"a": 1})));
    }

    #[test]
    fn text_that_is_not_json_is_refused() {
        assert!(Data::from_json("{\"a\": ").is_err());
        assert!(Data::from_json("\"ends in a backslash \\").is_err());
        assert!(Data::from_json("[\"unterminated ").is_err());
        assert!(serde_json::from_str::<Data>("{\"a\" 1}").is_err());
    }
}
