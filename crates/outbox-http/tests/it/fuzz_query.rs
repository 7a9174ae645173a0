//! Fuzzing the query strings of `GET /events` and `GET /watch` (SPEC §5.3, §5.4) with
//! `fuzz/corpus/query`: each route's whole decision before it reads a row
//! ([`read_request`], [`stream_request`]), for a reader of its own tenant and for an
//! administrator, with and without `Last-Event-ID`.
//!
//! Nothing panics. A refusal is a 4xx JSON envelope naming the parameter (or the header);
//! only a reader naming another tenant is `ACCESS_DENIED`. An accepted query means one read:
//! its decoded values encoded again, and the read written back as a query, ask for the same
//! read.

use http::{HeaderMap, HeaderValue};
use outbox_core::{ErrorCode, Pattern, Position};
use outbox_http::__fuzz::{read_request, stream_request};
use outbox_http::{ApiError, Grant, scope};
use outbox_pg::ReadRequest;
use proptest::prelude::*;

use crate::fuzz_json_body::check_envelope;
use crate::mutate;

const TARGET: &str = "query";

/// Pieces of query strings, for the mutations.
const DICTIONARY: &[&str] = &[
    "&",
    "=",
    "tenantId=",
    "types=",
    "type=",
    "subject=",
    "cursor=",
    "limit=",
    "bogus=",
    "acme",
    "globex",
    "node.*",
    "node.",
    "node/n1",
    "1.2",
    "1:2",
    "100",
    "%2C",
    "%2A",
    "%26",
    "%3D",
    "%2F",
    "%20",
    "%00",
    "%FF",
    "+",
    ";",
];

/// What the routes take: the parameters of `/events`, then of `/watch`.
const LIST: &[&str] = &["tenantId", "types", "type", "subject", "cursor", "limit"];
const WATCH: &[&str] = &["types", "tenantId", "cursor"];

fn grants() -> [Grant; 2] {
    [Grant::new("acme", [scope::EVENTS_READ]), Grant::new("ops", [scope::ADMIN])]
}

/// A refusal is a 4xx envelope naming one of `names`; `ACCESS_DENIED` only for a reader that
/// named another tenant.
fn check_refusal(query: &str, grant: &Grant, error: &ApiError, names: &[&str]) -> Result<(), String> {
    let message = check_envelope(error)?;
    let other_tenant = || pairs(query).iter().any(|(name, value)| name == "tenantId" && *value != grant.tenant_id);
    let fits = match error.code() {
        ErrorCode::InvalidInput => names.iter().any(|name| message.contains(name)),
        ErrorCode::AccessDenied => !grant.is_admin() && other_tenant(),
        _ => false,
    };
    if !fits {
        return Err(format!("{query:?} for {:?}: {error} does not name its parameter", grant.tenant_id));
    }
    Ok(())
}

fn pairs(query: &str) -> Vec<(String, String)> {
    form_urlencoded::parse(query.as_bytes()).into_owned().collect()
}

/// The decoded pairs of `query`, encoded again.
fn encoded_again(query: &str) -> String {
    form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs(query)).finish()
}

/// `request` written back as a query of `/events`.
fn list_query(request: &ReadRequest, colon: bool) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    if let Some(tenant) = &request.tenant_id {
        query.append_pair("tenantId", tenant);
    }
    if !request.patterns.is_empty() {
        query.append_pair("types", &joined(&request.patterns));
    }
    if let Some(subject) = &request.subject {
        query.append_pair("subject", subject);
    }
    if let Some(after) = request.after {
        query.append_pair("cursor", &if colon { after.colon() } else { after.dotted() });
    }
    query.append_pair("limit", &request.limit.to_string()).finish()
}

/// A stream's read and start written back as a query of `/watch`.
fn watch_query(request: &ReadRequest, start: Option<Position>) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    if let Some(tenant) = &request.tenant_id {
        query.append_pair("tenantId", tenant);
    }
    query.append_pair("types", &joined(&request.patterns));
    if let Some(start) = start {
        query.append_pair("cursor", &start.to_string());
    }
    query.finish()
}

fn joined(patterns: &[Pattern]) -> String {
    patterns.iter().map(Pattern::as_str).collect::<Vec<_>>().join(",")
}

fn check_list(query: &str, grant: &Grant) -> Result<(), String> {
    let request = match read_request(grant, Some(query)) {
        Ok(request) => request,
        Err(error) => return check_refusal(query, grant, &error, &[LIST, &["query parameter"]].concat()),
    };
    for again in [encoded_again(query), list_query(&request, false), list_query(&request, true)] {
        let back = read_request(grant, Some(&again));
        if back.as_ref() != Ok(&request) {
            return Err(format!("{query:?} asked for {request:?}; {again:?} asks for {back:?}"));
        }
    }
    Ok(())
}

fn check_watch(query: &str, grant: &Grant, last_event_id: Option<&HeaderValue>) -> Result<(), String> {
    let mut headers = HeaderMap::new();
    if let Some(value) = last_event_id {
        headers.insert("last-event-id", value.clone());
    }
    let (request, start) = match stream_request(grant, Some(query), &headers) {
        Ok(decided) => decided,
        Err(error) => {
            return check_refusal(query, grant, &error, &[WATCH, &["query parameter", "Last-Event-ID"]].concat());
        }
    };
    let sent = last_event_id.and_then(|value| value.to_str().ok()).map(str::trim).filter(|id| !id.is_empty());
    if let Some(id) = sent
        && start != Position::parse(id).ok()
    {
        return Err(format!("{query:?} with Last-Event-ID {id:?} starts at {start:?}"));
    }
    let decided = (request, start);
    let again = [(encoded_again(query), headers), (watch_query(&decided.0, start), HeaderMap::new())];
    for (again, headers) in again {
        let back = stream_request(grant, Some(&again), &headers);
        if back.as_ref() != Ok(&decided) {
            return Err(format!("{query:?} asked for {decided:?}; {again:?} asks for {back:?}"));
        }
    }
    Ok(())
}

/// Both routes, both callers; `/watch` also with `last_event_id`.
fn check(bytes: &[u8], last_event_id: Option<&HeaderValue>) -> Result<(), String> {
    let query = mutate::text(bytes);
    for grant in &grants() {
        check_list(&query, grant)?;
        check_watch(&query, grant, None)?;
        if last_event_id.is_some() {
            check_watch(&query, grant, last_event_id)?;
        }
    }
    Ok(())
}

/// `Last-Event-ID` values: positions, near-positions, blanks and noise.
fn last_event_id() -> impl Strategy<Value = Option<HeaderValue>> {
    let text = prop_oneof![
        "[0-9]{1,21}[.:][0-9]{1,21}",
        " {0,2}[0-9]{1,3}\\.[0-9]{1,3} {0,2}",
        Just(String::new()),
        "[ -~]{0,12}",
    ];
    prop::option::of(text).prop_map(|text| text.and_then(|text| HeaderValue::from_str(&text).ok()))
}

/// Queries built pair by pair: mostly the routes' own parameters, each holding a value
/// that is valid or close to it, encoded properly or pasted raw.
fn generated_query() -> impl Strategy<Value = Vec<u8>> {
    let name = prop_oneof![9 => prop::sample::select(LIST), 1 => Just("bogus")];
    let value = prop_oneof![
        "[a-z]{1,6}(\\.[a-z*]{1,6}){0,2}(,[a-z]{1,6}\\.[a-z*]{1,6}){0,3}\\.?",
        "[a-z]{1,6}/[A-Za-z0-9._:@-]{1,8}",
        "[0-9]{1,21}[.:][0-9]{1,21}",
        "[+-]?[0-9]{1,5}",
        "(acme|ops|globex|[A-Za-z0-9._:-]{1,8})",
        "\\PC{0,8}",
    ];
    let pairs = prop::collection::vec((name, value), 0..5);
    (pairs, any::<bool>()).prop_map(|(pairs, raw)| {
        let query = if raw {
            pairs.iter().map(|(name, value)| format!("{name}={value}")).collect::<Vec<_>>().join("&")
        } else {
            form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish()
        };
        query.into_bytes()
    })
}

#[test]
fn fuzz_query_corpus() {
    mutate::check_corpus(TARGET, |bytes| check(bytes, Some(&HeaderValue::from_static("7.8"))));
}

proptest! {
    #![proptest_config(mutate::config(mutate::DEFAULT_CASES))]

    #[test]
    fn fuzz_query_mutations(bytes in mutate::input(&mutate::corpus(TARGET), DICTIONARY), id in last_event_id()) {
        check(&bytes, id.as_ref()).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn fuzz_query_generated(bytes in generated_query(), id in last_event_id()) {
        check(&bytes, id.as_ref()).map_err(TestCaseError::fail)?;
    }
}
