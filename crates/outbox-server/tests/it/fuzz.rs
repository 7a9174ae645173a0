//! Random query strings, headers and bodies thrown at every route of the bundled server.
//! Whatever arrives, the answer is never a 5xx: a bad input is a refusal that names it
//! (SPEC §5.1), and nothing a client sends reaches PostgreSQL in a form it refuses.

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestCaseError, TestRunner};

use crate::support::{TestServer, config, database, seal_key, token};

/// Every route of the bundled server, and paths beside them (those that take most
/// parameters more often).
const PATHS: &[&str] = &[
    "/",
    "/console/console.js",
    "/console/watch-events.js",
    "/events",
    "/events",
    "/events",
    "/watch",
    "/watch",
    "/event-types",
    "/sinks",
    "/sinks/audit",
    "/sinks/audit/dead-letters",
    "/sinks/audit/dead-letters/dl_1",
    "/sinks/audit/dead-letters/dl_1/replay",
    "/sinks/missing/dead-letters",
    "/webhooks",
    "/webhooks",
    "/webhooks/wh_01jbz0000000000000000000",
    "/webhooks/wh_01jbz0000000000000000000/rotate-secret",
    "/webhooks/wh_01jbz0000000000000000000/attempts",
    "/admin/streams/close",
    "/healthz",
    "/readyz",
    "/metrics",
];

const METHODS: &[&str] = &["GET", "POST", "PUT", "DELETE", "HEAD", "PATCH", "OPTIONS"];

/// The parameters `path` takes (most requests use them, so that they get past the check
/// of names and reach the handler).
fn parameters(path: &str) -> &'static [&'static str] {
    match path {
        "/events" => &["tenantId", "types", "type", "subject", "cursor", "limit"],
        "/watch" => &["tenantId", "types", "cursor"],
        p if p.ends_with("/dead-letters") => &["cursor", "limit", "replayed"],
        p if p.starts_with("/webhooks") => &["tenantId", "cursor", "limit"],
        _ => &["limit"],
    }
}

/// One random request.
#[derive(Debug, Clone)]
struct Attempt {
    method: &'static str,
    path: &'static str,
    query: Vec<(&'static str, String)>,
    token: Option<usize>,
    last_event_id: Option<String>,
    content_type: Option<&'static str>,
    body: Vec<u8>,
}

/// Text that is sometimes close to valid and sometimes anything at all, NUL and
/// non-UTF-8 percent escapes included.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        // Close to valid, with one hostile byte inside: NUL, a slash, bytes that are not
        // UTF-8, a line break, a space.
        5 => ("[a-z]{1,6}/?", prop::sample::select(HOSTILE), "[a-z0-9]{0,6}")
            .prop_map(|(head, escape, tail)| format!("{head}{escape}{tail}")),
        1 => Just(String::new()),
        1 => "[a-z]{1,8}(\\.[a-z*]{1,8}){0,3}",
        1 => "[a-z]{1,6}/[A-Za-z0-9._:@-]{0,12}",
        1 => "[0-9]{1,21}[.:][0-9]{1,21}",
        1 => "-?[0-9]{1,25}",
        1 => any::<String>(),
        1 => prop::collection::vec(any::<u8>(), 0..24)
            .prop_map(|bytes| bytes.iter().map(|b| format!("%{b:02X}")).collect()),
    ]
}

/// Percent escapes of what a naive handler passes on to PostgreSQL or a parser.
const HOSTILE: &[&str] = &["%00", "%00", "%2F", "%FF", "%C3%28", "%0A", "%20", "%25", "%2C"];

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(Vec::new()),
        prop::collection::vec(any::<u8>(), 0..256),
        Just(br#"{"type":"node.joined","tenantId":"acme","subject":"node/n1","data":{}}"#.to_vec()),
        Just(b"[{\"type\":\"node.joined\",\"tenantId\":\"acme\",\"subject\":\"node/n\\u00001\",\"data\":{}}]".to_vec()),
        Just(br#"{"type":"node.joined","tenantId":"ac\u0000me","subject":"node/n1","data":{"k":"\u0000"}}"#.to_vec()),
        Just(br#"{"selector":{"tenantId":"acme\u0000"},"reason":"x"}"#.to_vec()),
        Just(br#"{"url":"https://93.184.215.14/hook","types":["node.*"],"metadata":{"k\u0000":"v"}}"#.to_vec()),
        Just(
            br#"{"url":"https://93.184.215.14/h\u0000ook","description":"a\u0000b","headers":{"X-K":"v\u0000"}}"#
                .to_vec()
        ),
        Just(br#"{"url":"https://localhost/","types":["no\u0000de.*"]}"#.to_vec()),
        Just(br#"{"enabled":true,"resume":"now","secret":"whsec_\u0000"}"#.to_vec()),
        "\\PC{0,64}".prop_map(String::into_bytes),
    ]
}

fn attempt() -> impl Strategy<Value = Attempt> {
    let method = prop_oneof![6 => Just("GET"), 3 => Just("POST"), 1 => prop::sample::select(METHODS)];
    (method, prop::sample::select(PATHS)).prop_flat_map(|(method, path)| {
        let name = prop_oneof![9 => prop::sample::select(parameters(path)), 1 => Just("bogus")];
        (
            Just(method),
            Just(path),
            prop::collection::vec((name, value()), 0..3),
            prop_oneof![8 => (0..2_usize).prop_map(Some), 2 => prop::option::of(0..TOKENS)],
            prop::option::of(value()),
            prop::option::of(prop::sample::select(&["application/json", "application/x-protobuf", "text/plain"][..])),
            body(),
        )
            .prop_map(|(method, path, query, token, last_event_id, content_type, body)| Attempt {
                method,
                path,
                query,
                token,
                last_event_id,
                content_type,
                body,
            })
    })
}

/// Each route's parameters one at a time, each holding each [`HOSTILE`] escape, sent by an
/// administrator (who may name any tenant).
fn one_hostile_parameter() -> Vec<Attempt> {
    let mut attempts = Vec::new();
    for &path in PATHS {
        for &name in parameters(path) {
            for &hostile in HOSTILE {
                for value in [format!("node/n{hostile}1"), hostile.to_owned()] {
                    attempts.push(Attempt {
                        method: "GET",
                        path,
                        query: vec![(name, value)],
                        token: Some(1),
                        last_event_id: None,
                        content_type: None,
                        body: Vec::new(),
                    });
                }
            }
        }
    }
    attempts
}

const TOKENS: usize = 4;

fn tokens() -> [String; TOKENS] {
    [
        token("acme", "events:read events:write webhooks:write", None),
        token("ops", "admin", None),
        token("acme", "", None),
        "not-a-token".to_owned(),
    ]
}

/// Sends `attempt` and returns the status, without reading a body (a stream never ends).
async fn send(addr: SocketAddr, attempt: &Attempt, tokens: &[String]) -> u16 {
    let query: String =
        attempt.query.iter().map(|(name, value)| format!("{name}={value}")).collect::<Vec<_>>().join("&");
    let uri = if query.is_empty() { attempt.path.to_owned() } else { format!("{}?{query}", attempt.path) };
    // Random text may not make a URI or a header at all: the client could not send it.
    let Ok(uri) = format!("http://{addr}{uri}").parse::<http::Uri>() else { return 0 };
    let mut builder = http::Request::builder().method(attempt.method).uri(uri).header("host", addr.to_string());
    if let Some(token) = attempt.token {
        builder = builder.header("authorization", format!("Bearer {}", tokens[token]));
    }
    if let Some(id) = attempt.last_event_id.as_deref().and_then(|id| http::HeaderValue::from_str(id).ok()) {
        builder = builder.header("last-event-id", id);
    }
    if let Some(content_type) = attempt.content_type {
        builder = builder.header("content-type", content_type);
    }
    let request = builder.body(Full::new(Bytes::from(attempt.body.clone()))).expect("a request");
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connecting");
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.expect("handshake");
    tokio::spawn(connection);
    sender.send_request(request).await.expect("a response").status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_input_makes_any_route_answer_5xx() {
    let db = database().await;
    let mut config = config();
    let sink = serde_json::json!({"id": "audit", "kind": "jsonl", "path": std::env::temp_dir().join(format!("outbox-fuzz-{}.jsonl", std::process::id()))});
    config.sinks.push(serde_json::from_value(sink).expect("a jsonl sink"));
    config.webhooks.seal_key = Some(std::sync::Arc::new(seal_key()));
    config.validate().expect("the configuration");
    let server = TestServer::start(&db, config).await;
    let (addr, tokens) = (server.addr, tokens());
    // Every parameter of every route, alone, with each hostile byte in a value otherwise
    // well formed; then random requests for what that leaves out.
    for attempt in one_hostile_parameter() {
        let status = send(addr, &attempt, &tokens).await;
        assert!(status < 500, "{attempt:?} answered {status}");
    }
    let runtime = tokio::runtime::Handle::current();
    let cases = std::env::var("OUTBOX_FUZZ_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(2_000);
    let outcome = tokio::task::spawn_blocking(move || {
        let mut runner = TestRunner::new(ProptestConfig { cases, ..ProptestConfig::default() });
        let outcome = runner.run(&attempt(), |attempt| {
            let status = runtime.block_on(send(addr, &attempt, &tokens));
            if status >= 500 {
                return Err(TestCaseError::fail(format!("answered {status}")));
            }
            Ok(())
        });
        outcome.map_err(|failure| failure.to_string())
    })
    .await
    .expect("the property test ran");
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
}
