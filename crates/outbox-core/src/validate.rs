//! The rules an event must satisfy before it is written (SPEC §3.2).
//!
//! Every rule is checked here, in pure code, so that a batch with one bad event
//! is refused before anything reaches the database. An error names the event's
//! index in its batch, the field and the rule it broke.

use std::fmt;

use serde_json::Value;

use crate::NewEvent;

/// The longest event type, in characters.
pub const MAX_TYPE_LEN: usize = 128;
/// The longest tenant id, in characters.
pub const MAX_TENANT_LEN: usize = 128;
/// The longest subject kind, in characters.
pub const MAX_SUBJECT_KIND_LEN: usize = 64;
/// The longest subject id, in characters.
pub const MAX_SUBJECT_ID_LEN: usize = 256;

/// The size limits of publishing; the defaults are the SPEC's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest serialized `data`, in bytes (default 64 KiB).
    pub max_data_bytes: usize,
    /// Deepest nesting of `data`; the object itself is depth 1 (default 32).
    pub max_data_depth: usize,
    /// Most events in one `publish_many` (default 10,000).
    pub max_batch: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { max_data_bytes: 64 * 1024, max_data_depth: 32, max_batch: 10_000 }
    }
}

/// A broken rule: which event, which field, which rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ValidationError {
    /// The event's index in its batch; `None` when the batch itself is refused.
    pub index: Option<usize>,
    /// The field, as it is named on the wire (`type`, `tenantId`, `subject`, `data`, `events`).
    pub field: &'static str,
    /// The rule that was broken, in words.
    pub rule: String,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.index {
            Some(index) => write!(f, "event {index}: {} {}", self.field, self.rule),
            None => write!(f, "{} {}", self.field, self.rule),
        }
    }
}

/// Checks a whole batch: its size, then every event in order. The first violation wins.
pub fn validate_batch(events: &[NewEvent], limits: &Limits) -> Result<(), ValidationError> {
    if events.len() > limits.max_batch {
        return Err(ValidationError {
            index: None,
            field: "events",
            rule: format!("must hold at most {} events (got {})", limits.max_batch, events.len()),
        });
    }
    events.iter().enumerate().try_for_each(|(index, event)| validate_event(index, event, limits))
}

/// Checks one event; `index` is its place in its batch, for the error.
pub fn validate_event(index: usize, event: &NewEvent, limits: &Limits) -> Result<(), ValidationError> {
    let fail = |field, rule: String| ValidationError { index: Some(index), field, rule };
    if !is_valid_type(&event.event_type) {
        return Err(fail("type", format!("must match {TYPE_RULE} (got {:?})", truncated(&event.event_type))));
    }
    check_tenant_id(&event.tenant_id).map_err(|rule| fail("tenantId", rule))?;
    check_subject(&event.subject).map_err(|rule| fail("subject", rule))?;
    check_data(&event.data, limits).map_err(|rule| fail("data", rule))
}

/// A tenant id, or the rule it breaks (`must match …`, naming what it got), for a caller
/// that names the field: an event's `tenantId`, a query parameter.
pub fn check_tenant_id(text: &str) -> Result<(), String> {
    if is_valid_tenant_id(text) {
        return Ok(());
    }
    Err(format!("must match {TENANT_RULE} (got {:?})", truncated(text)))
}

/// A subject, or the rule it breaks, as [`check_tenant_id`].
pub fn check_subject(text: &str) -> Result<(), String> {
    if is_valid_subject(text) {
        return Ok(());
    }
    Err(format!(
        "must be <kind>/<id> with kind {SUBJECT_KIND_RULE} and id {SUBJECT_ID_RULE} (got {:?})",
        truncated(text)
    ))
}

const TYPE_RULE: &str = "^[a-z][a-z0-9-]*(\\.[a-z][a-z0-9-]*)+$ with at most 128 characters";
const TENANT_RULE: &str = "^[A-Za-z0-9._:-]{1,128}$";
const SUBJECT_KIND_RULE: &str = "^[a-z][a-z0-9-]{0,63}$";
const SUBJECT_ID_RULE: &str = "^[A-Za-z0-9._:@-]{1,256}$";

/// Whether `text` is a valid event type: dotted segments, each a lowercase letter
/// followed by lowercase letters, digits and `-`; at least two segments; at most 128 characters.
pub fn is_valid_type(text: &str) -> bool {
    text.len() <= MAX_TYPE_LEN && text.split('.').count() >= 2 && text.split('.').all(is_type_segment)
}

fn is_type_segment(segment: &str) -> bool {
    let mut bytes = segment.bytes();
    matches!(bytes.next(), Some(b'a'..=b'z')) && bytes.all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-'))
}

/// Whether `text` is a valid tenant id.
pub fn is_valid_tenant_id(text: &str) -> bool {
    (1..=MAX_TENANT_LEN).contains(&text.len())
        && text.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

/// Whether `text` is a valid subject, `<kind>/<id>`.
pub fn is_valid_subject(text: &str) -> bool {
    let Some((kind, id)) = text.split_once('/') else { return false };
    let mut kind_bytes = kind.bytes();
    let kind_ok = kind.len() <= MAX_SUBJECT_KIND_LEN
        && matches!(kind_bytes.next(), Some(b'a'..=b'z'))
        && kind_bytes.all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-'));
    let id_ok = (1..=MAX_SUBJECT_ID_LEN).contains(&id.len())
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'@' | b'-'));
    kind_ok && id_ok
}

fn check_data(data: &Value, limits: &Limits) -> Result<(), String> {
    if !data.is_object() {
        return Err(format!("must be a JSON object (got {})", json_kind(data)));
    }
    if contains_nul(data) {
        return Err("must not contain the NUL character (\\u0000), which PostgreSQL's jsonb refuses".into());
    }
    let depth = depth(data);
    if depth > limits.max_data_depth {
        return Err(format!("must nest at most {} levels deep (got {depth})", limits.max_data_depth));
    }
    let size = serialized_len(data);
    if size > limits.max_data_bytes {
        return Err(format!("must serialize to at most {} bytes (got {size})", limits.max_data_bytes));
    }
    Ok(())
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The nesting depth of a value: a scalar is 0, an empty object or array 1.
fn depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(fields) => 1 + fields.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// Whether any string or key holds U+0000.
pub(crate) fn contains_nul(value: &Value) -> bool {
    match value {
        Value::String(text) => text.contains('\0'),
        Value::Array(items) => items.iter().any(contains_nul),
        Value::Object(fields) => fields.iter().any(|(key, value)| key.contains('\0') || contains_nul(value)),
        _ => false,
    }
}

/// The length of the compact JSON text of `value`, counted without building it.
fn serialized_len(value: &Value) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    serde_json::to_writer(&mut counter, value).expect("a JSON value always serializes");
    counter.0
}

/// Keeps error messages short when the offending value is huge.
fn truncated(text: &str) -> &str {
    match text.char_indices().nth(64) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn valid() -> NewEvent {
        NewEvent::new("reservation.active", "acme", "reservation/rsv_01", json!({"state": "active"}))
    }

    /// Checks that `edit` applied to a valid event is refused on `field` with a message containing
    /// `fragment`, or accepted when `field` is `None`.
    #[track_caller]
    fn check(edit: impl FnOnce(&mut NewEvent), expect: Option<(&str, &str)>) {
        let mut event = valid();
        edit(&mut event);
        let got = validate_batch(&[valid(), event], &Limits::default());
        match expect {
            None => assert_eq!(got, Ok(())),
            Some((field, fragment)) => {
                let error = got.expect_err("expected a refusal");
                assert_eq!((error.index, error.field), (Some(1), field), "{error}");
                let message = error.to_string();
                assert!(message.starts_with(&format!("event 1: {field} ")), "{message}");
                assert!(message.contains(fragment), "{message:?} lacks {fragment:?}");
            }
        }
    }

    #[test]
    fn type_rule() {
        check(|e| e.event_type = "node.gpu.missing".into(), None);
        check(|e| e.event_type = "a.b".into(), None);
        check(|e| e.event_type = "node-x.a1-".into(), None);
        check(|e| e.event_type = format!("a.{}", "b".repeat(126)), None);
        check(|e| e.event_type = format!("a.{}", "b".repeat(127)), Some(("type", "at most 128")));
        check(|e| e.event_type = "node".into(), Some(("type", "must match")));
        check(|e| e.event_type = "Node.joined".into(), Some(("type", "must match")));
        check(|e| e.event_type = "node..joined".into(), Some(("type", "must match")));
        check(|e| e.event_type = "node.joined.".into(), Some(("type", "must match")));
        check(|e| e.event_type = "node.1joined".into(), Some(("type", "must match")));
        check(|e| e.event_type = "node.jo_ined".into(), Some(("type", "must match")));
        check(|e| e.event_type = "node.*".into(), Some(("type", "must match")));
        check(|e| e.event_type = String::new(), Some(("type", "must match")));
    }

    #[test]
    fn tenant_rule() {
        check(|e| e.tenant_id = "ten_01k5y2a9c3d4.e-f:G".into(), None);
        check(|e| e.tenant_id = "x".repeat(128), None);
        check(|e| e.tenant_id = "x".repeat(129), Some(("tenantId", "^[A-Za-z0-9._:-]{1,128}$")));
        check(|e| e.tenant_id = String::new(), Some(("tenantId", "must match")));
        check(|e| e.tenant_id = "a b".into(), Some(("tenantId", "must match")));
        check(|e| e.tenant_id = "a/b".into(), Some(("tenantId", "must match")));
        check(|e| e.tenant_id = "é".into(), Some(("tenantId", "must match")));
    }

    #[test]
    fn subject_rule() {
        check(|e| e.subject = "node/n1".into(), None);
        check(|e| e.subject = "a-9/Ab.c_d:e@f-g".into(), None);
        check(|e| e.subject = format!("{}/{}", "k".repeat(64), "i".repeat(256)), None);
        check(|e| e.subject = format!("{}/x", "k".repeat(65)), Some(("subject", "<kind>/<id>")));
        check(|e| e.subject = format!("k/{}", "i".repeat(257)), Some(("subject", "<kind>/<id>")));
        check(|e| e.subject = "node".into(), Some(("subject", "<kind>/<id>")));
        check(|e| e.subject = "node/".into(), Some(("subject", "<kind>/<id>")));
        check(|e| e.subject = "/n1".into(), Some(("subject", "<kind>/<id>")));
        check(|e| e.subject = "Node/n1".into(), Some(("subject", "<kind>/<id>")));
        check(|e| e.subject = "1node/n1".into(), Some(("subject", "<kind>/<id>")));
        check(|e| e.subject = "node/n1/x".into(), Some(("subject", "<kind>/<id>")));
        check(|e| e.subject = "node/n 1".into(), Some(("subject", "<kind>/<id>")));
    }

    #[test]
    fn data_rule() {
        check(|e| e.data = json!({}), None);
        check(|e| e.data = json!([]), Some(("data", "must be a JSON object (got an array)")));
        check(|e| e.data = json!(null), Some(("data", "(got null)")));
        check(|e| e.data = json!("x"), Some(("data", "(got a string)")));
        check(|e| e.data = json!({"a": ["x\u{0}y"]}), Some(("data", "must not contain the NUL character")));
        check(|e| e.data = json!({"a\u{0}": 1}), Some(("data", "must not contain the NUL character")));
        check(|e| e.data = nested(32), None);
        check(|e| e.data = nested(33), Some(("data", "at most 32 levels deep (got 33)")));
        // {"s":"…"} is 8 bytes of framing around the string.
        check(|e| e.data = json!({ "s": "x".repeat(64 * 1024 - 8) }), None);
        check(
            |e| e.data = json!({ "s": "x".repeat(64 * 1024 - 7) }),
            Some(("data", "at most 65536 bytes (got 65537)")),
        );
    }

    /// An object nested `levels` deep: {"a":{"a":…{}}}.
    fn nested(levels: usize) -> Value {
        (1..levels).fold(json!({}), |inner, _| json!({ "a": inner }))
    }

    #[test]
    fn batch_rules() {
        let limits = Limits::default();
        assert_eq!(validate_batch(&[], &limits), Ok(()));
        let too_many = vec![valid(); 10_001];
        let error = validate_batch(&too_many, &limits).unwrap_err();
        assert_eq!((error.index, error.field), (None, "events"));
        assert_eq!(error.to_string(), "events must hold at most 10000 events (got 10001)");
        assert_eq!(validate_batch(&vec![valid(); 10_000], &limits), Ok(()));
    }

    #[test]
    fn the_first_violation_wins_and_limits_are_configurable() {
        let mut bad = valid();
        bad.subject = "nope".into();
        bad.tenant_id = "no pe".into();
        let error = validate_batch(&[valid(), valid(), bad], &Limits::default()).unwrap_err();
        assert_eq!((error.index, error.field), (Some(2), "tenantId"));
        let small = Limits { max_data_bytes: 10, max_data_depth: 1, max_batch: 1 };
        assert!(validate_batch(&[valid()], &small).unwrap_err().to_string().contains("at most 10 bytes"));
    }
}
