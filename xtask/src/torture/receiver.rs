//! The webhook receiver of the torture run: an HTTP server on loopback that the servers'
//! `webhook` sink POSTs to, recording every event it accepted in the order it arrived.
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

/// A running receiver.
#[derive(Clone)]
pub(crate) struct Receiver {
    pub(crate) url: String,
    failing: Arc<AtomicBool>,
    record: Arc<Mutex<Vec<Received>>>,
}

#[derive(Deserialize)]
struct Body {
    id: String,
    sequence: Position,
}

impl Receiver {
    /// Listens on `127.0.0.1:0`.
    pub(crate) async fn start() -> anyhow::Result<Receiver> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let receiver = Receiver {
            url: format!("http://{}/hook", listener.local_addr()?),
            failing: Arc::default(),
            record: Arc::default(),
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
        let body = request.into_body().collect().await.map(|body| body.to_bytes()).unwrap_or_default();
        let status = if self.failing.load(Ordering::SeqCst) {
            500
        } else {
            match serde_json::from_slice::<Body>(&body) {
                Ok(body) => {
                    self.record.lock().push(Received { id: body.id, position: body.sequence });
                    200
                }
                Err(_) => 400,
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
