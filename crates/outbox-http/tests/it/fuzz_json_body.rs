//! Fuzzing the body of `POST /events` (SPEC §5.7, §3.2) with `fuzz/corpus/json_body`: the
//! route's parse, then the validation `publish_many` runs before it writes anything.
//!
//! Whatever the bytes, nothing panics and a refusal is a 400 whose JSON envelope
//! (SPEC §5.1) says where the body is wrong: the body as a whole, `events`, or the event (by
//! index when there is a batch) and, from validation, its field. A body that passes both
//! holds every number as the standard library reads its spelling, and its events, sent again
//! as a client serializes them, parse to the same events and pass again.

use std::collections::BTreeMap;

use futures_util::FutureExt;
use http_body_util::BodyExt;
use outbox_core::validate::validate_batch;
use outbox_core::{ErrorCode, Limits, NewEvent};
use outbox_http::__fuzz::parse_events;
use outbox_http::ApiError;
use proptest::prelude::*;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::mutate;

const TARGET: &str = "json_body";

/// Pieces of event bodies, for the mutations.
const DICTIONARY: &[&str] = &[
    r#"{"events":["#,
    r#""type":"node.joined""#,
    r#""tenantId":"acme""#,
    r#""subject":"node/n1""#,
    r#""data":{}"#,
    r#""data":{"a":[1,2.5,null,true]}"#,
    r#""type":1"#,
    r#""tenantId":null"#,
    r#""data":[]"#,
    r#"\u0000"#,
    r#"\ud800"#,
    r#"\""#,
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "null",
    "true",
    "-0",
    "1e999",
    "1.7976931348623157e308",
    "\"",
];

/// The route's parse, then the validation the publisher runs, refused as the route refuses.
fn accept(body: &[u8]) -> Result<Vec<NewEvent>, ApiError> {
    let events = parse_events(body)?;
    validate_batch(&events, &Limits::default())
        .map_err(|error| ApiError::from_pg("fuzzing POST /events", outbox_pg::Error::from(error)))?;
    Ok(events)
}

/// The refusal as the client receives it: `{"error":{"code","message"}}` with a 4xx status
/// and a message that is not empty. Returns the message.
pub(crate) fn check_envelope(error: &ApiError) -> Result<String, String> {
    let response = error.clone().into_response();
    let status = response.status();
    let body = response.into_body().collect().now_or_never().expect("a full body is ready at once");
    let body: Value = serde_json::from_slice(&body.expect("a full body never fails").to_bytes())
        .map_err(|e| format!("{error}: the refusal's body is not JSON: {e}"))?;
    let message = body["error"]["message"].as_str().unwrap_or_default();
    if !status.is_client_error() || body["error"]["code"] != error.code().to_string() || message.is_empty() {
        return Err(format!("{error}: answered {status} {body}"));
    }
    Ok(message.to_owned())
}

/// Where a refusal may say the body is wrong, given how many events a batch holds: the body
/// as a whole, `events`, or an event and its field (a refusal by the rules of SPEC §3.2, a
/// field missing, unknown or of the wrong JSON type).
fn names_where(message: &str, batch: Option<usize>) -> bool {
    const WHOLE: [&str; 4] = ["the body is not JSON", "the body must be one event object", "unknown field", "events "];
    const FIELDS: [&str; 4] = ["type ", "tenantId ", "subject ", "data "];
    let (message, validation) = match message.strip_prefix("invalid event: ") {
        Some(rule) => (rule, true),
        None => (message, false),
    };
    if WHOLE.iter().any(|start| message.starts_with(start)) {
        return true;
    }
    let rest = match batch {
        None => message.strip_prefix("event: ").or_else(|| message.strip_prefix("event 0: ")),
        Some(len) => (0..len).find_map(|index| message.strip_prefix(&format!("event {index}: "))),
    };
    // A parse error names the field too (a missing, unknown or mistyped one), unless the
    // event itself is not an object.
    const PARSE: [&str; 2] = ["missing field", "unknown field"];
    rest.is_some_and(|rest| {
        FIELDS.iter().any(|field| rest.starts_with(field))
            || !validation && (PARSE.iter().any(|start| rest.starts_with(start)) || is_not_an_object(rest))
    })
}

/// serde's refusal of an event that is not a JSON object at all.
fn is_not_an_object(rest: &str) -> bool {
    rest.starts_with("invalid type: ") && !rest.contains("expected a string")
}

fn check(body: &[u8]) -> Result<(), String> {
    let text = mutate::text(body);
    match accept(body) {
        Ok(events) => {
            exact_numbers(&text)?;
            sent_again(&events)
        }
        Err(error) => {
            let message = check_envelope(&error)?;
            if error.code() != ErrorCode::InvalidInput {
                return Err(format!("{text:?}: refused with {}, not INVALID_INPUT", error.code()));
            }
            let batch = serde_json::from_slice::<Value>(body).ok().and_then(|v| v["events"].as_array().map(Vec::len));
            if !names_where(&message, batch) {
                return Err(format!("{text:?}: the refusal {message:?} does not say where"));
            }
            Ok(())
        }
    }
}

/// Every number the body spells is read as the standard library reads it: a float read a
/// step off would be stored changed.
fn exact_numbers(body: &str) -> Result<(), String> {
    let mut numbers = Vec::new();
    spelled_numbers(body, &mut numbers);
    for spelled in numbers {
        let read: Value = serde_json::from_str(&spelled).map_err(|e| format!("{spelled}: {e}"))?;
        let exact = spelled.parse::<f64>().map_err(|e| format!("{spelled}: {e}"))?;
        if read.is_f64() && read.as_f64().map(f64::to_bits) != Some(exact.to_bits()) {
            return Err(format!("{spelled} was read as {read}, not {exact:e}"));
        }
    }
    Ok(())
}

/// The numbers in the JSON text `raw`, as spelled, found through serde_json's raw values.
fn spelled_numbers(raw: &str, numbers: &mut Vec<String>) {
    let raw = raw.trim_matches([' ', '\t', '\n', '\r']);
    let inner: Vec<Box<RawValue>> = match raw.as_bytes().first() {
        Some(b'{') => serde_json::from_str::<BTreeMap<String, Box<RawValue>>>(raw)
            .map(|map| map.into_values().collect())
            .unwrap_or_default(),
        Some(b'[') => serde_json::from_str(raw).unwrap_or_default(),
        Some(b'-' | b'0'..=b'9') => return numbers.push(raw.to_owned()),
        _ => return,
    };
    inner.iter().for_each(|value| spelled_numbers(value.get(), numbers));
}

/// Accepted events, serialized as a client sends them, are accepted again and the same:
/// every number in `data` included (a float parsed one step off would be stored changed).
fn sent_again(events: &[NewEvent]) -> Result<(), String> {
    let body = serde_json::to_vec(&serde_json::json!({ "events": events })).map_err(|e| e.to_string())?;
    match accept(&body) {
        Ok(again) if again == events => Ok(()),
        again => Err(format!("{events:?} sent again came back as {again:?}")),
    }
}

/// A string field: usually by its rule (`valid`), sometimes close to it (`near`), sometimes
/// any JSON value at all.
fn field(valid: &'static str, near: &'static str) -> impl Strategy<Value = Value> {
    prop_oneof![6 => valid.prop_map(Value::String), 2 => near.prop_map(Value::String), 1 => json()]
}

/// Any JSON value, a few levels deep, with text that PostgreSQL or a length count trips on.
fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "(\\PC|\u{0}){0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("(\\PC|\u{0}){0,4}", inner, 0..4)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// One event object: each field usually present, `data` usually an object, now and then
/// a field the event does not have.
fn event() -> impl Strategy<Value = Value> {
    let data = prop_oneof![4 => json().prop_map(|value| serde_json::json!({ "value": value })), 1 => json()];
    let fields = (
        prop::option::weighted(
            0.95,
            field("[a-z][a-z0-9-]{0,6}(\\.[a-z][a-z0-9-]{0,6}){1,3}", "[a-zA-Z0-9._*-]{0,10}"),
        ),
        prop::option::weighted(0.95, field("[A-Za-z0-9._:-]{1,12}", "[ -~]{0,10}")),
        prop::option::weighted(0.95, field("[a-z][a-z0-9-]{0,6}/[A-Za-z0-9._:@-]{1,10}", "[ -~]{0,10}")),
        prop::option::weighted(0.95, data),
        prop::option::weighted(0.05, "[a-zA-Z]{1,8}"),
    );
    fields.prop_map(|(event_type, tenant, subject, data, extra)| {
        let mut event = serde_json::Map::new();
        let named = [("type", event_type), ("tenantId", tenant), ("subject", subject), ("data", data)];
        event.extend(named.into_iter().filter_map(|(name, value)| Some((name.to_owned(), value?))));
        if let Some(extra) = extra {
            event.insert(extra, Value::Null);
        }
        Value::Object(event)
    })
}

/// Bodies built event by event: one event, or a batch.
fn generated_body() -> impl Strategy<Value = Vec<u8>> {
    let body = prop_oneof![
        event(),
        prop::collection::vec(event(), 0..4).prop_map(|events| serde_json::json!({ "events": events })),
    ];
    body.prop_map(|body| serde_json::to_vec(&body).expect("a JSON value serializes"))
}

#[test]
fn fuzz_json_body_corpus() {
    mutate::check_corpus(TARGET, check);
}

proptest! {
    #![proptest_config(mutate::config(mutate::DEFAULT_CASES))]

    #[test]
    fn fuzz_json_body_mutations(bytes in mutate::input(&mutate::corpus(TARGET), DICTIONARY)) {
        check(&bytes).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn fuzz_json_body_generated(bytes in generated_body()) {
        check(&bytes).map_err(TestCaseError::fail)?;
    }
}
