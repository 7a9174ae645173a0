//! Property tests of `compact_json` and `Data`: any JSON, written with whitespace anywhere
//! it may stand, comes back as serde_json's compact text of the same value, strings untouched.

use outbox_core::{Data, compact_json};
use proptest::prelude::*;
use serde_json::Value;
use serde_json::value::RawValue;

/// JSON values whose strings are full of what a compactor could trip on: quotes, backslashes,
/// whitespace and multi-byte characters, at every offset of an eight-byte word.
fn values() -> impl Strategy<Value = Value> {
    let text = "[ a\"\\\\\t\n\r{}:,é€😀]{0,40}";
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        text.prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 40, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(text, inner, 0..6).prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn pretty_and_spaced_json_become_the_compact_text(value in values()) {
        let compact = serde_json::to_string(&value).unwrap();
        let pretty = serde_json::to_string_pretty(&value).unwrap();
        prop_assert_eq!(compact_json(&pretty), compact.as_str());
        // Compact text is given back as it is, not copied.
        prop_assert!(matches!(compact_json(&compact), std::borrow::Cow::Borrowed(_)));
        let raw: &RawValue = serde_json::from_str(&pretty).unwrap();
        let data = Data::from_raw(raw);
        prop_assert_eq!(data.get(), compact.as_str());
        prop_assert_eq!(data, value);
    }
}

#[test]
fn strings_keep_escaped_quotes_and_backslashes_at_every_offset() {
    for lead in 0..17 {
        let inner = format!("{}\\\" x \\\\ y", "a".repeat(lead));
        let text = format!("{{ \"k\" : \"{inner}\" , \"n\" : [ 1 , 2 ] }}");
        assert_eq!(compact_json(&text), format!("{{\"k\":\"{inner}\",\"n\":[1,2]}}"), "lead {lead}");
    }
}

#[test]
fn an_unterminated_string_ends_the_text() {
    assert_eq!(compact_json("[ \"abc def ghi jkl"), "[\"abc def ghi jkl");
    assert_eq!(compact_json("[ \"abcdefghijkl \\"), "[\"abcdefghijkl \\");
}
