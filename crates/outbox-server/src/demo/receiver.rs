//! The demo's webhook receiver: a small HTTP endpoint on loopback, inside the `outbox dev`
//! process, that the demo's subscription posts to.
//!
//! It answers as a careful receiver would: a POST whose `webhook-signature` holds no
//! `v1,` entry that the subscription's secret verifies is refused with 401; anything but a
//! POST with 405. To give the console a dead letter to show, it also refuses the first
//! event of type [`REFUSED_TYPE`] it sees, with 400, on every attempt; the subscription
//! retries it `max_attempts` times, backing off, then dead-letters it and moves on. Every
//! other event is accepted with 204. What it does is logged at debug level only.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use outbox_workers::sinks::WebhookSecret;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// The event type whose first event the receiver refuses.
pub const REFUSED_TYPE: &str = "reservation.placed";

/// The largest body the receiver reads.
const BODY_LIMIT: usize = 1024 * 1024;

/// What the receiver knows: the secret, once the subscription exists, and the event it refuses.
#[derive(Default)]
struct State {
    secret: Option<WebhookSecret>,
    refused: Option<String>,
}

/// A running receiver; it stops when dropped.
pub struct Receiver {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    task: JoinHandle<()>,
}

impl Receiver {
    /// Listens on a free loopback port.
    pub async fn start() -> std::io::Result<Receiver> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State::default()));
        let task = tokio::spawn(accept(listener, state.clone()));
        Ok(Receiver { addr, state, task })
    }

    /// The URL the subscription posts to.
    pub fn url(&self) -> String {
        format!("http://{}/hooks/outbox", self.addr)
    }

    /// Verifies deliveries with `secret` from now on (until then they are answered 503,
    /// which the subscription retries).
    pub fn verify_with(&self, secret: WebhookSecret) {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).secret = Some(secret);
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept(listener: TcpListener, state: Arc<Mutex<State>>) {
    loop {
        let Ok((stream, _peer)) = listener.accept().await else { continue };
        let state = state.clone();
        let service = hyper::service::service_fn(move |request| answer(state.clone(), request));
        tokio::spawn(async move {
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            if let Err(error) = builder.serve_connection(TokioIo::new(stream), service).await {
                tracing::debug!(%error, "demo receiver: a connection failed");
            }
        });
    }
}

async fn answer(state: Arc<Mutex<State>>, request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    if request.method() != Method::POST {
        return Ok(reply(StatusCode::METHOD_NOT_ALLOWED, "POST only"));
    }
    let (parts, body) = request.into_parts();
    let body = match Limited::new(body, BODY_LIMIT).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => return Ok(reply(StatusCode::PAYLOAD_TOO_LARGE, "the body is too large")),
    };
    let (status, why) = judge(&mut state.lock().unwrap_or_else(PoisonError::into_inner), &parts.headers, &body);
    tracing::debug!(status = status.as_u16(), why, "demo receiver: answered a delivery");
    Ok(reply(status, why))
}

/// The answer to one delivery.
fn judge(state: &mut State, headers: &HeaderMap, body: &[u8]) -> (StatusCode, &'static str) {
    let Some(secret) = &state.secret else {
        return (StatusCode::SERVICE_UNAVAILABLE, "the demo subscription is not set up yet");
    };
    if !verifies(secret, headers, body) {
        return (StatusCode::UNAUTHORIZED, "no signature verifies");
    }
    let event: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let id = event["id"].as_str().unwrap_or_default();
    if event["type"] != REFUSED_TYPE {
        return (StatusCode::NO_CONTENT, "");
    }
    match &state.refused {
        Some(refused) if refused != id => (StatusCode::NO_CONTENT, ""),
        _ => {
            state.refused = Some(id.to_owned());
            (StatusCode::BAD_REQUEST, "the demo receiver refuses the first reservation.placed, to show a dead letter")
        }
    }
}

/// Whether one of the `v1,` entries of `webhook-signature` is `secret`'s signature of
/// `<webhook-id>.<webhook-timestamp>.<body>` (Standard Webhooks).
fn verifies(secret: &WebhookSecret, headers: &HeaderMap, body: &[u8]) -> bool {
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    let (Some(id), Some(timestamp), Some(signatures)) =
        (header("webhook-id"), header("webhook-timestamp"), header("webhook-signature"))
    else {
        return false;
    };
    let Ok(timestamp) = timestamp.parse::<i64>() else { return false };
    let expected = secret.sign(id, timestamp, body);
    signatures.split(' ').any(|given| same(given.as_bytes(), expected.as_bytes()))
}

/// Compares in time that does not depend on where the two differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0, |differ, (x, y)| differ | (x ^ y)) == 0
}

fn reply(status: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
    *response.status_mut() = status;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signed(secret: &WebhookSecret, body: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("webhook-id", "evt_1".parse().unwrap());
        headers.insert("webhook-timestamp", "1700000000".parse().unwrap());
        let signature = format!("v1,c29tZXRoaW5nIGVsc2U= {}", secret.sign("evt_1", 1_700_000_000, body.as_bytes()));
        headers.insert("webhook-signature", signature.parse().unwrap());
        headers
    }

    #[test]
    fn verifies_the_signature_and_refuses_the_first_event_of_the_refused_type_every_time() {
        let secret = WebhookSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let mut state = State::default();
        let placed = |id: &str| format!(r#"{{"id":"{id}","type":"reservation.placed"}}"#);
        let other = r#"{"id":"evt_9","type":"node.status"}"#;
        assert_eq!(judge(&mut state, &signed(&secret, other), other.as_bytes()).0, StatusCode::SERVICE_UNAVAILABLE);

        state.secret = Some(secret.clone());
        assert_eq!(judge(&mut state, &signed(&secret, other), other.as_bytes()).0, StatusCode::NO_CONTENT);
        let wrong = WebhookSecret::parse("whsec_c29tZSBvdGhlciBzZWNyZXQ=").unwrap();
        assert_eq!(judge(&mut state, &signed(&wrong, other), other.as_bytes()).0, StatusCode::UNAUTHORIZED);
        assert_eq!(judge(&mut state, &HeaderMap::new(), other.as_bytes()).0, StatusCode::UNAUTHORIZED);

        for _attempt in 0..3 {
            let first = placed("evt_1");
            assert_eq!(judge(&mut state, &signed(&secret, &first), first.as_bytes()).0, StatusCode::BAD_REQUEST);
        }
        let second = placed("evt_2");
        assert_eq!(judge(&mut state, &signed(&secret, &second), second.as_bytes()).0, StatusCode::NO_CONTENT);
    }
}
