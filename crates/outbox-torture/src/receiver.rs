//! The webhook receiver of the torture run: an HTTP server on loopback that the servers'
//! `webhook` sink and the tenant's webhook subscription POST to (each to a path of its
//! own), recording every event it accepted in the order it arrived.
//!
//! While [`Receiver::fail_for`] lasts it answers 500 and records nothing (the sink retries
//! with its backoff). Whichever server holds the sink's lease posts; a server that lost the
//! lease while stopped may still post the batch it had in hand, so the record is checked as
//! an interleaving of deliveries ([`Delivery::Interleaved`](super::checker::Delivery)).

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use outbox_core::Position;
use parking_lot::Mutex;
use serde::Deserialize;

use super::checker::Received;
use super::consumers::Recorder;

/// The path the `webhook` sink posts to.
const SINK_PATH: &str = "/hook";
/// The path the webhook subscription posts to.
const SUBSCRIPTION_PATH: &str = "/subscription";

/// A running receiver.
#[derive(Clone)]
pub(crate) struct Receiver {
    /// Where the `webhook` sink posts.
    pub(crate) url: String,
    /// Where the webhook subscription posts.
    pub(crate) subscription_url: String,
    failing: Arc<AtomicBool>,
    record: Arc<Mutex<Vec<Received>>>,
    subscription: Arc<Recorder>,
}

#[derive(Deserialize)]
struct Body {
    id: String,
    sequence: Position,
}

impl Receiver {
    /// Listens on `127.0.0.1:0`; what arrives at [`Receiver::subscription_url`] is recorded
    /// in `subscription`.
    pub(crate) async fn start(subscription: Arc<Recorder>) -> anyhow::Result<Receiver> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let receiver = Receiver {
            url: format!("http://{address}{SINK_PATH}"),
            subscription_url: format!("http://{address}{SUBSCRIPTION_PATH}"),
            failing: Arc::default(),
            record: Arc::default(),
            subscription,
        };
        let serving = receiver.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let receiver = serving.clone();
                let service = hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                    let receiver = receiver.clone();
                    async move { Ok::<_, Infallible>(receiver.answer(request).await) }
                });
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service),
                );
            }
        });
        Ok(receiver)
    }

    async fn answer(&self, request: hyper::Request<hyper::body::Incoming>) -> hyper::Response<Full<Bytes>> {
        let path = request.uri().path().to_owned();
        let body = request.into_body().collect().await.map(|body| body.to_bytes()).unwrap_or_default();
        let status = if self.failing.load(Ordering::SeqCst) {
            500
        } else {
            match (serde_json::from_slice::<Body>(&body), path.as_str()) {
                (Ok(body), SINK_PATH) => {
                    self.record.lock().push(Received { id: body.id, position: body.sequence });
                    200
                }
                (Ok(body), SUBSCRIPTION_PATH) => {
                    self.subscription.receive(Received { id: body.id, position: body.sequence });
                    200
                }
                (Ok(_), _) => 404,
                (Err(_), _) => 400,
            }
        };
        let mut response = hyper::Response::new(Full::new(Bytes::new()));
        *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::BAD_REQUEST);
        response
    }

    /// Answers 500 to every request for `duration`.
    pub(crate) async fn fail_for(&self, duration: Duration) {
        self.failing.store(true, Ordering::SeqCst);
        tokio::time::sleep(duration).await;
        self.failing.store(false, Ordering::SeqCst);
    }

    /// Every event accepted so far, in the order they arrived.
    pub(crate) fn record(&self) -> Vec<Received> {
        self.record.lock().clone()
    }
}
