//! The readers: a `GET /events` pager and raw SSE clients of `GET /watch`, each recording
//! every event it receives with its session.
//!
//! They reach whichever server is up ([`Ports`]), and go to another one when theirs dies,
//! stands still (nothing for [`IDLE`], not even a heartbeat) or ends the stream. The SSE
//! clients also drop their stream at random and reconnect with `Last-Event-ID` set to the
//! last event they received: every session must continue at exactly its successor.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use outbox_core::Position;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Deserialize;

use super::checker::{Consumer, Delivery, Received, Session};
use super::services::{Ports, TENANT, TOKEN};

/// How long a consumer waits for a byte before it takes the server for stuck.
const IDLE: Duration = Duration::from_secs(5);

/// What a consumer shares with the run: its record, and when it last received something.
pub(crate) struct Recorder {
    record: Mutex<Consumer>,
    last_event: Mutex<Instant>,
}

impl Recorder {
    pub(crate) fn new(name: &str, types: &[&str], delivery: Delivery) -> Arc<Recorder> {
        Arc::new(Recorder {
            record: Mutex::new(Consumer {
                name: name.to_owned(),
                tenant: Some(TENANT.to_owned()),
                types: types.iter().map(|t| (*t).to_owned()).collect(),
                delivery,
                durable: true,
                sessions: Vec::new(),
            }),
            last_event: Mutex::new(Instant::now()),
        })
    }

    fn open(&self, after: Option<Position>) {
        self.record.lock().sessions.push(Session { after, received: Vec::new() });
    }

    fn receive(&self, received: Received) {
        let mut record = self.record.lock();
        if let Some(session) = record.sessions.last_mut() {
            session.received.push(received);
        }
        *self.last_event.lock() = Instant::now();
    }

    /// How long since it last received an event.
    pub(crate) fn quiet_for(&self) -> Duration {
        self.last_event.lock().elapsed()
    }

    pub(crate) fn name(&self) -> String {
        self.record.lock().name.clone()
    }

    /// How many events it received.
    pub(crate) fn received(&self) -> usize {
        self.record.lock().sessions.iter().map(|s| s.received.len()).sum()
    }

    pub(crate) fn take(&self) -> Consumer {
        self.record.lock().clone()
    }
}

/// A client of the servers, no proxy, bounded waits.
pub(crate) fn client() -> anyhow::Result<reqwest::Client> {
    outbox_workers::sinks::install_crypto_provider();
    Ok(reqwest::Client::builder().no_proxy().connect_timeout(Duration::from_secs(2)).build()?)
}

/// A port of a server that is up, chosen at random; waits for one.
pub(crate) async fn pick(ports: &Ports, rng: &mut StdRng) -> u16 {
    loop {
        let up: Vec<u16> = ports.lock().iter().flatten().copied().collect();
        if !up.is_empty() {
            return up[rng.random_range(0..up.len())];
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[derive(Deserialize)]
struct Page {
    items: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    id: String,
    sequence: Position,
}

/// Pages through the tenant's history with `GET /events` from the start, then keeps
/// tailing, until `stop`: one session, each page asked after the last item received.
pub(crate) async fn pager(recorder: Arc<Recorder>, ports: Ports, seed: u64, stop: Arc<AtomicBool>) {
    let client = match client() {
        Ok(client) => client,
        Err(error) => return eprintln!("torture: pager: {error:#}"),
    };
    let mut rng = StdRng::seed_from_u64(seed);
    let mut after = Position::START;
    recorder.open(Some(after));
    while !stop.load(Ordering::Relaxed) {
        let port = pick(&ports, &mut rng).await;
        let url = format!("http://127.0.0.1:{port}/events?limit=200&cursor={after}");
        let answer = client.get(&url).bearer_auth(TOKEN).timeout(IDLE).send().await;
        let page: Option<Page> = match answer {
            Ok(answer) if answer.status().is_success() => answer.json().await.ok(),
            _ => None,
        };
        let Some(page) = page else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let full = page.items.len() == 200;
        for item in page.items {
            after = item.sequence;
            recorder.receive(Received { id: item.id, position: item.sequence });
        }
        if !full {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// An SSE client of `GET /watch?types=…`: reconnects with `Last-Event-ID` after every end of
/// its stream, and drops it itself at random (every few seconds), until `stop`.
pub(crate) async fn sse(recorder: Arc<Recorder>, types: String, ports: Ports, seed: u64, stop: Arc<AtomicBool>) {
    let client = match client() {
        Ok(client) => client,
        Err(error) => return eprintln!("torture: sse: {error:#}"),
    };
    let mut rng = StdRng::seed_from_u64(seed);
    let mut last = Position::START;
    while !stop.load(Ordering::Relaxed) {
        let port = pick(&ports, &mut rng).await;
        let lifetime = Duration::from_millis(rng.random_range(500..8000));
        recorder.open(Some(last));
        let url = format!("http://127.0.0.1:{port}/watch?types={types}");
        let stream = client.get(&url).bearer_auth(TOKEN).header("last-event-id", last.to_string()).send();
        let ended = tokio::time::timeout(lifetime, async {
            let answer = match tokio::time::timeout(IDLE, stream).await {
                Ok(Ok(answer)) if answer.status().is_success() => answer,
                _ => return,
            };
            read_stream(answer, &recorder, &mut last, &stop).await;
        })
        .await;
        if ended.is_ok() {
            // The server ended it or failed: a short pause, as its `retry:` asks.
            tokio::time::sleep(Duration::from_millis(rng.random_range(10..300))).await;
        }
    }
}

/// Reads one SSE stream until it ends, fails, stays silent for [`IDLE`] or `stop`.
async fn read_stream(answer: reqwest::Response, recorder: &Recorder, last: &mut Position, stop: &AtomicBool) {
    let mut body = answer.bytes_stream();
    let mut pending = Vec::<u8>::new();
    let mut frame = Frame::default();
    while !stop.load(Ordering::Relaxed) {
        let chunk = match tokio::time::timeout(IDLE, body.next()).await {
            Ok(Some(Ok(chunk))) => chunk,
            _ => return,
        };
        pending.extend_from_slice(&chunk);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line[..line.len() - 1]).trim_end_matches('\r').to_owned();
            match frame.line(&line) {
                FrameEnd::Event { id, position } => {
                    *last = position;
                    recorder.receive(Received { id, position });
                }
                FrameEnd::Error => return,
                FrameEnd::None => {}
            }
        }
    }
}

/// One SSE block being read.
#[derive(Default)]
struct Frame {
    id: Option<String>,
    event: Option<String>,
    data: String,
}

enum FrameEnd {
    None,
    Event { id: String, position: Position },
    Error,
}

impl Frame {
    fn line(&mut self, line: &str) -> FrameEnd {
        if !line.is_empty() {
            if let Some((field, value)) = line.split_once(':') {
                let value = value.strip_prefix(' ').unwrap_or(value);
                match field {
                    "id" => self.id = Some(value.to_owned()),
                    "event" => self.event = Some(value.to_owned()),
                    "data" => self.data.push_str(value),
                    _ => {}
                }
            }
            return FrameEnd::None;
        }
        let frame = std::mem::take(self);
        if frame.event.as_deref() == Some("error") {
            return FrameEnd::Error;
        }
        let (Some(sse_id), false) = (frame.id, frame.data.is_empty()) else { return FrameEnd::None };
        let Ok(item) = serde_json::from_str::<Item>(&frame.data) else { return FrameEnd::Error };
        match Position::parse(&sse_id) {
            Ok(position) if position == item.sequence => FrameEnd::Event { id: item.id, position },
            _ => FrameEnd::Error,
        }
    }
}
