//! The webhook sink against a real HTTP receiver on loopback, checked by an independent
//! Standard Webhooks verifier written here from the specification.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{HeaderMap, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use outbox_core::Event;
use outbox_pg::internal::dead_letter::{self, ListRequest};
use outbox_workers::config::{SinkConfig, SinkKind, build_spec};
use outbox_workers::encoding::{Encoding, ProtoEvent};
use outbox_workers::{BackoffPolicy, Dispatcher, DispatcherConfig};
use parking_lot::Mutex;
use prost::Message;
use tokio::net::TcpListener;

use crate::support::{cursor_of, db, fast_config, numbered, publish_and_read, wait_for};

// ---- The verifier: outbox_e2e::standard_webhooks, written from the specification ------------

pub(crate) use outbox_e2e::standard_webhooks::verify;

#[test]
fn the_verifier_accepts_the_specifications_test_vector_and_nothing_else() {
    let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let mut headers = HeaderMap::new();
    headers.insert("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek".parse().unwrap());
    headers.insert("webhook-timestamp", "1614265330".parse().unwrap());
    headers.insert("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=".parse().unwrap());
    let body = br#"{"test": 2432232314}"#;
    assert_eq!(verify(secret, &headers, body, 1614265330), Ok(()));
    assert!(verify(secret, &headers, br#"{"test": 2432232315}"#, 1614265330).is_err());
    assert!(verify(secret, &headers, body, 1614265330 + 301).is_err());
    assert!(verify("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSx", &headers, body, 1614265330).is_err());
}

// ---- A receiver on loopback ------------------------------------------------------------------

#[derive(Debug, Clone)]
pub(crate) struct Received {
    pub(crate) headers: HeaderMap,
    pub(crate) body: Vec<u8>,
    at: Instant,
}

impl Received {
    pub(crate) fn id(&self) -> &str {
        self.headers.get("webhook-id").and_then(|v| v.to_str().ok()).unwrap_or_default()
    }
}

/// What the receiver answers: a status, maybe `Retry-After`, maybe after a delay.
#[derive(Clone, Copy)]
pub(crate) struct Reply {
    status: u16,
    retry_after: Option<&'static str>,
    delay: Duration,
}

pub(crate) fn status(status: u16) -> Reply {
    Reply { status, retry_after: None, delay: Duration::ZERO }
}

/// `status`, answered after `delay`.
pub(crate) fn delayed(status: u16, delay: Duration) -> Reply {
    Reply { status, retry_after: None, delay }
}

/// Decides a reply from the request and how many times this webhook-id was seen before.
type Respond = dyn Fn(&Received, usize) -> Reply + Send + Sync;

pub(crate) struct Receiver {
    pub(crate) url: String,
    requests: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    pub(crate) async fn start(respond: impl Fn(&Received, usize) -> Reply + Send + Sync + 'static) -> Receiver {
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await.unwrap();
        let url = format!("http://{}/hooks/outbox", listener.local_addr().unwrap());
        let requests: Arc<Mutex<Vec<Received>>> = Arc::default();
        let respond: Arc<Respond> = Arc::new(respond);
        let (log, answer) = (requests.clone(), respond.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (log, answer) = (log.clone(), answer.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |request: Request<Incoming>| {
                        let (log, answer) = (log.clone(), answer.clone());
                        async move { Ok::<_, hyper::Error>(handle(request, &log, answer.as_ref()).await) }
                    });
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                });
            }
        });
        Receiver { url, requests }
    }

    pub(crate) fn requests(&self) -> Vec<Received> {
        self.requests.lock().clone()
    }
}

async fn handle(request: Request<Incoming>, log: &Mutex<Vec<Received>>, respond: &Respond) -> Response<Full<Bytes>> {
    let headers = request.headers().clone();
    let body = request.into_body().collect().await.map(|b| b.to_bytes().to_vec()).unwrap_or_default();
    let received = Received { headers, body, at: Instant::now() };
    let seen = log.lock().iter().filter(|r| r.id() == received.id()).count();
    let reply = respond(&received, seen);
    log.lock().push(received);
    tokio::time::sleep(reply.delay).await;
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = StatusCode::from_u16(reply.status).unwrap();
    if let Some(after) = reply.retry_after {
        response.headers_mut().insert("retry-after", after.parse().unwrap());
    }
    response
}

pub(crate) fn secret() -> String {
    let key: [u8; 24] = rand::random();
    format!("whsec_{}", BASE64.encode(key))
}

fn webhook(id: &str, url: &str, secret: &str) -> SinkConfig {
    let mut config = SinkConfig::new(id, SinkKind::Webhook);
    config.url = Some(url.into());
    config.secret = Some(secret.into());
    config
}

// ---- The tests -------------------------------------------------------------------------------

#[tokio::test]
async fn every_delivery_is_signed_per_standard_webhooks_and_arrives_in_order() {
    let db = db().await;
    let events = publish_and_read(&db.pool, &numbered(25)).await;
    let receiver = Receiver::start(|_, _| status(204)).await;
    let secret = secret();
    let spec = build_spec(&webhook("billing", &receiver.url, &secret)).unwrap();
    let dispatcher = Dispatcher::start(db.pool.clone(), fast_config(), vec![spec]).unwrap();
    let last = events.last().unwrap().sequence;
    wait_for("the webhooks", || async { cursor_of(&db.pool, "billing").await == Some(last) }).await;
    dispatcher.shutdown().await;

    let requests = receiver.requests();
    assert_eq!(requests.len(), 25, "one POST per event, none repeated");
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    for (request, event) in requests.iter().zip(&events) {
        verify(&secret, &request.headers, &request.body, now).unwrap_or_else(|e| panic!("{}: {e}", event.id));
        assert_eq!(request.id(), event.id, "webhook-id is the event id, in order");
        assert_eq!(request.headers["content-type"], "application/json");
        assert_eq!(serde_json::from_slice::<Event>(&request.body).unwrap(), *event);
        let mut tampered = request.body.clone();
        tampered.push(b' ');
        assert!(verify(&secret, &request.headers, &tampered, now).is_err());
    }
}

#[tokio::test]
async fn status_codes_decide_retry_refusal_and_retry_after() {
    let db = db().await;
    let events = publish_and_read(&db.pool, &numbered(4)).await;
    let ids: Vec<String> = events.iter().map(|e| e.id.clone()).collect();
    let plan = ids.clone();
    let receiver = Receiver::start(move |request, seen| {
        let index = plan.iter().position(|id| id == request.id()).unwrap();
        match (index, seen) {
            (0, 0) => status(503),
            (1, _) => status(400),
            (2, 0) => Reply { status: 429, retry_after: Some("1"), delay: Duration::ZERO },
            (3, 0) => status(408),
            _ => status(200),
        }
    })
    .await;
    // Retry-After is honoured up to the backoff's maximum: keep it above the receiver's 1 s.
    let backoff = BackoffPolicy { initial: Duration::from_millis(10), max: Duration::from_secs(2) };
    let config = DispatcherConfig { backoff, ..fast_config() };
    let spec = build_spec(&webhook("rules", &receiver.url, &secret())).unwrap();
    let dispatcher = Dispatcher::start(db.pool.clone(), config, vec![spec]).unwrap();
    let last = events.last().unwrap().sequence;
    wait_for("the batch", || async { cursor_of(&db.pool, "rules").await == Some(last) }).await;
    dispatcher.shutdown().await;

    let requests = receiver.requests();
    let tries = |i: usize| requests.iter().filter(|r| r.id() == ids[i]).collect::<Vec<_>>();
    assert_eq!(tries(0).len(), 2, "503 is retried");
    assert_eq!(tries(3).len(), 2, "408 is retried");
    let e2 = tries(2);
    assert_eq!(e2.len(), 2, "429 is retried");
    let waited = e2[1].at - e2[0].at;
    assert!(waited >= Duration::from_millis(950), "Retry-After: 1 was not honoured ({waited:?})");
    let letters = dead_letter::list(&db.pool, &ListRequest::pending("rules")).await.unwrap();
    assert_eq!(letters.len(), 1, "only the 400 is a dead letter");
    assert_eq!((letters[0].event.id.as_str(), letters[0].error.as_str()), (ids[1].as_str(), "HTTP 400 Bad Request"));
    let order: Vec<&str> = requests.iter().map(Received::id).collect();
    let first_seen: Vec<&str> = order.iter().fold(Vec::new(), |mut seen, id| {
        if !seen.contains(id) {
            seen.push(*id);
        }
        seen
    });
    assert_eq!(first_seen, ids.iter().map(String::as_str).collect::<Vec<_>>(), "first attempts follow the order");
}

#[tokio::test]
async fn a_receiver_slower_than_the_timeout_is_retried() {
    let db = db().await;
    let events = publish_and_read(&db.pool, &numbered(1)).await;
    let receiver = Receiver::start(|_, seen| Reply {
        status: 200,
        retry_after: None,
        delay: if seen == 0 { Duration::from_secs(3) } else { Duration::ZERO },
    })
    .await;
    let mut config = webhook("slow", &receiver.url, &secret());
    config.timeout_ms = Some(200);
    let dispatcher = Dispatcher::start(db.pool.clone(), fast_config(), vec![build_spec(&config).unwrap()]).unwrap();
    wait_for("the retry", || async { cursor_of(&db.pool, "slow").await == Some(events[0].sequence) }).await;
    let state = dispatcher.local_state("slow").unwrap();
    assert!(state.last_error.as_deref().unwrap_or_default().contains("timed out"), "{:?}", state.last_error);
    assert_eq!(receiver.requests().len(), 2);
    dispatcher.shutdown().await;
}

#[tokio::test]
async fn cloudevents_and_protobuf_bodies_are_signed_too() {
    let db = db().await;
    let events = publish_and_read(&db.pool, &numbered(3)).await;
    let receiver = Receiver::start(|_, _| status(200)).await;
    let secret = secret();
    let mut cloud = webhook("cloud", &format!("{}?sink=cloud", receiver.url), &secret);
    cloud.encoding = Encoding::CloudEvents;
    cloud.source = Some("https://outbox.example.com".into());
    let mut proto = webhook("proto", &format!("{}?sink=proto", receiver.url), &secret);
    proto.encoding = Encoding::Protobuf;
    let specs = vec![build_spec(&cloud).unwrap(), build_spec(&proto).unwrap()];
    let dispatcher = Dispatcher::start(db.pool.clone(), fast_config(), specs).unwrap();
    let last = events.last().unwrap().sequence;
    for id in ["cloud", "proto"] {
        wait_for("both sinks", || async { cursor_of(&db.pool, id).await == Some(last) }).await;
    }
    dispatcher.shutdown().await;

    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let mut by_type: HashMap<String, Vec<Received>> = HashMap::new();
    for request in receiver.requests() {
        verify(&secret, &request.headers, &request.body, now).unwrap();
        let content_type = request.headers["content-type"].to_str().unwrap().to_owned();
        by_type.entry(content_type).or_default().push(request);
    }
    let cloud = &by_type["application/cloudevents+json"];
    let proto = &by_type["application/x-protobuf"];
    assert_eq!((cloud.len(), proto.len()), (3, 3));
    for ((c, p), event) in cloud.iter().zip(proto).zip(&events) {
        let value: serde_json::Value = serde_json::from_slice(&c.body).unwrap();
        assert_eq!(
            (value["specversion"].as_str(), value["id"].as_str(), value["source"].as_str()),
            (Some("1.0"), Some(event.id.as_str()), Some("https://outbox.example.com"))
        );
        assert_eq!(
            (&value["data"], value["sequence"].as_str()),
            (&event.data.value(), Some(event.sequence.dotted().as_str()))
        );
        let decoded = ProtoEvent::decode(p.body.as_slice()).unwrap();
        assert_eq!((decoded.id.as_str(), decoded.sequence), (event.id.as_str(), event.sequence.dotted()));
        assert_eq!(serde_json::from_str::<serde_json::Value>(&decoded.data_json).unwrap(), event.data);
    }
}
