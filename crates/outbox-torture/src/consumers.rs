//! The readers: a `GET /events` pager, raw SSE clients of `GET /watch`, the Rust client's
//! `watch` and in-process subscribers, each recording every event it receives with its
//! session.
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

use super::checker::{Consumer, Delivery, Received, Row, Session};
use super::services::{Ports, TENANT, TOKEN};

/// How long a consumer waits for a byte before it takes the server for stuck.
const IDLE: Duration = Duration::from_secs(5);

/// What a consumer shares with the run: its record, and when it last received something.
pub(crate) struct Recorder {
    record: Mutex<Consumer>,
    last_event: Mutex<Instant>,
    /// Whether it starts at the head of the moment it was made (a subscription), so that
    /// the checker [anchors](Consumer::anchor) it at its first event.
    from_now: bool,
}

impl Recorder {
    /// A consumer of [`TENANT`]'s events.
    pub(crate) fn new(name: &str, types: &[&str], delivery: Delivery) -> Arc<Recorder> {
        Recorder::of(name, Some(TENANT), types, delivery)
    }

    /// A consumer of `tenant`'s events (`None`: every tenant's) that starts at the head of
    /// the moment it is made.
    pub(crate) fn from_now(name: &str, tenant: Option<&str>, types: &[&str], delivery: Delivery) -> Arc<Recorder> {
        let recorder = Recorder::of(name, tenant, types, delivery);
        Arc::new(Recorder {
            record: Mutex::new(recorder.take()),
            last_event: Mutex::new(Instant::now()),
            from_now: true,
        })
    }

    /// A consumer of `tenant`'s events (`None`: every tenant's).
    pub(crate) fn of(name: &str, tenant: Option<&str>, types: &[&str], delivery: Delivery) -> Arc<Recorder> {
        Arc::new(Recorder {
            from_now: false,
            record: Mutex::new(Consumer {
                name: name.to_owned(),
                tenant: tenant.map(str::to_owned),
                since: None,
                types: types.iter().map(|t| (*t).to_owned()).collect(),
                delivery,
                durable: true,
                sessions: Vec::new(),
            }),
            last_event: Mutex::new(Instant::now()),
        })
    }

    pub(crate) fn open(&self, after: Option<Position>) {
        self.record.lock().sessions.push(Session { after, received: Vec::new() });
    }

    pub(crate) fn receive(&self, received: Received) {
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

    /// Its record, ready for the checker: a redelivering one (a webhook subscription, which
    /// repeats from its saved cursor after a fault) cut into sessions where a position does
    /// not increase, and anchored at its first event when it started "from now".
    pub(crate) fn take_for_check(&self, truth: &[Row]) -> Consumer {
        let mut consumer = self.take();
        if consumer.delivery != Delivery::Exact {
            consumer.split_redeliveries();
        }
        if self.from_now {
            consumer.anchor(truth);
        }
        consumer
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

/// A page the pager read: asked after `after`, answered with `ids`.
#[derive(Debug, Clone)]
pub(crate) struct PageSeen {
    pub(crate) after: Position,
    pub(crate) ids: Vec<String>,
}

/// How many events the pager asks for per page.
const PAGE: usize = 200;

/// Pages through the tenant's history with `GET /events` from the start, then keeps
/// tailing, until `stop`: one session, each page asked after the last item received.
/// Every tenth page is kept in `pages`, to be read again once the faults are over.
pub(crate) async fn pager(
    recorder: Arc<Recorder>,
    pages: Arc<Mutex<Vec<PageSeen>>>,
    ports: Ports,
    seed: u64,
    stop: Arc<AtomicBool>,
) {
    let client = match client() {
        Ok(client) => client,
        Err(error) => return eprintln!("torture: pager: {error:#}"),
    };
    let mut rng = StdRng::seed_from_u64(seed);
    let mut after = Position::START;
    let mut read = 0u64;
    recorder.open(Some(after));
    while !stop.load(Ordering::Relaxed) {
        let port = pick(&ports, &mut rng).await;
        let url = format!("http://127.0.0.1:{port}/events?limit={PAGE}&cursor={after}");
        let answer = client.get(&url).bearer_auth(TOKEN).timeout(IDLE).send().await;
        let page: Option<Page> = match answer {
            Ok(answer) if answer.status().is_success() => answer.json().await.ok(),
            _ => None,
        };
        let Some(page) = page else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let full = page.items.len() == PAGE;
        read += 1;
        if read.is_multiple_of(10) && !page.items.is_empty() {
            let ids = page.items.iter().map(|item| item.id.clone()).collect();
            pages.lock().push(PageSeen { after, ids });
        }
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

/// Reads every kept page again, after the faults, from a server that is up: a page read
/// then must be what the same request answers now (a prefix of it when it was not full,
/// since the tenant's later events may follow). Returns the pages that differ.
pub(crate) async fn reread_pages(pages: &[PageSeen], ports: &Ports) -> anyhow::Result<Vec<String>> {
    let client = client()?;
    let mut rng = StdRng::seed_from_u64(0);
    let mut differ = Vec::new();
    for page in pages {
        let port = pick(ports, &mut rng).await;
        let url = format!("http://127.0.0.1:{port}/events?limit={PAGE}&cursor={}", page.after);
        let again: Page = client.get(&url).bearer_auth(TOKEN).send().await?.error_for_status()?.json().await?;
        let ids: Vec<String> = again.items.into_iter().map(|item| item.id).collect();
        let same = if page.ids.len() == PAGE { ids == page.ids } else { ids.starts_with(&page.ids) };
        if !same {
            differ.push(format!(
                "history: the page after {} read {} events then, {} now (first then {}, now {})",
                page.after,
                page.ids.len(),
                ids.len(),
                page.ids.first().map_or("none", String::as_str),
                ids.first().map_or("none", String::as_str)
            ));
        }
    }
    Ok(differ)
}

/// A loopback TCP relay to a server that is up, chosen per connection: one base URL for a
/// client that knows only one (the Rust client), whichever server answers behind it.
pub(crate) async fn balancer(ports: Ports, seed: u64) -> anyhow::Result<std::net::SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    tokio::spawn(async move {
        let mut rng = StdRng::seed_from_u64(seed);
        while let Ok((mut inbound, _)) = listener.accept().await {
            let port = pick(&ports, &mut rng).await;
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    Ok(address)
}

/// The Rust client's `watch` through the [`balancer`] at `base`: one session per stream,
/// which the client reconnects by itself (with `Last-Event-ID`) across every fault; the
/// stream is dropped at random (every few seconds to half a minute) and opened again after
/// the last event, until `stop`.
pub(crate) async fn rust_client(
    recorder: Arc<Recorder>,
    base: String,
    types: Vec<String>,
    seed: u64,
    stop: Arc<AtomicBool>,
) {
    let client = match outbox_client::Client::new(&base).and_then(|client| client.with_token(TOKEN)) {
        Ok(client) => client,
        Err(error) => return eprintln!("torture: rust client: {error}"),
    };
    let mut rng = StdRng::seed_from_u64(seed);
    let mut last = Position::START;
    while !stop.load(Ordering::Relaxed) {
        let lifetime = Duration::from_millis(rng.random_range(2_000..30_000));
        recorder.open(Some(last));
        let query = outbox_client::WatchQuery {
            types: types.clone(),
            last_event_id: Some(last),
            max_backoff: Duration::from_secs(2),
            idle_timeout: IDLE,
            ..outbox_client::WatchQuery::default()
        };
        let last = &mut last;
        let _ = tokio::time::timeout(lifetime, async {
            let mut events = match client.watch(query).await {
                Ok(events) => events,
                Err(error) => {
                    eprintln!("torture: rust client: {error}");
                    return tokio::time::sleep(Duration::from_millis(200)).await;
                }
            };
            while !stop.load(Ordering::Relaxed) {
                match events.next().await {
                    Some(Ok(event)) => {
                        *last = event.sequence;
                        recorder.receive(Received { id: event.id, position: event.sequence });
                    }
                    // The client gives up only on a refusal: a failure worth reading.
                    Some(Err(error)) => {
                        eprintln!("torture: rust client: the stream ended: {error}");
                        return tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    None => return,
                }
            }
        })
        .await;
    }
}

/// In-process subscribers (`outbox_workers::Subscribers`) of this process, over `url` (the
/// proxy), one per recorder and its pattern, every tenant's events. Each records one
/// session: a subscription starts at the head, so the checker anchors it at the first
/// event it received. Dropping what this returns unsubscribes.
pub(crate) async fn subscribers(
    url: &str,
    recorders: &[(Arc<Recorder>, &str)],
) -> anyhow::Result<Vec<outbox_workers::Subscription>> {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(4)
        .acquire_timeout(Duration::from_secs(5))
        .connect_lazy_with(url.parse::<sqlx::postgres::PgConnectOptions>()?.application_name("torture-subscribers"));
    let tail = outbox_pg::tail::Tail::new(pool.clone(), outbox_pg::tail::TailOptions::default());
    let subscribers = outbox_workers::Subscribers::new(pool, tail);
    let mut subscriptions = Vec::new();
    for (recorder, pattern) in recorders {
        recorder.open(None);
        let recorder = recorder.clone();
        let handler = move |event: outbox_core::Event| {
            recorder.receive(Received { id: event.id, position: event.sequence });
            std::future::ready(Ok::<(), std::convert::Infallible>(()))
        };
        subscriptions.push(subscribers.subscribe(outbox_core::Pattern::parse(pattern)?, handler).await?);
    }
    Ok(subscriptions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::{Writes, check};

    #[test]
    fn a_redelivering_subscription_that_steps_back_to_its_cursor_is_checked_per_session() {
        let truth: Vec<Row> = (1..=8)
            .map(|n| Row {
                id: format!("e{n}"),
                position: Position { txid: 100 + n, seq: n },
                tenant: TENANT.to_owned(),
                event_type: "node.joined".to_owned(),
            })
            .collect();
        let writes = Writes { committed: truth.iter().map(|row| row.id.clone()).collect(), ..Writes::default() };
        let recorder = Recorder::from_now("subscription", Some(TENANT), &[], Delivery::Interleaved);
        recorder.open(None);
        // From now (e3 on), then a step back to the saved cursor after a fault.
        for n in [3, 4, 5, 6, 4, 5, 6, 7, 8] {
            recorder.receive(Received { id: format!("e{n}"), position: truth[n as usize - 1].position });
        }
        let report = check(&truth, &writes, &[recorder.take_for_check(&truth)]);
        assert!(report.passed(), "{}", report.summary(20));
        assert_eq!(report.tallies[0].duplicated, 3);

        let skipping = Recorder::from_now("subscription", Some(TENANT), &[], Delivery::Interleaved);
        skipping.open(None);
        for n in [3, 4, 5, 6, 7, 5, 8] {
            skipping.receive(Received { id: format!("e{n}"), position: truth[n as usize - 1].position });
        }
        let report = check(&truth, &writes, &[skipping.take_for_check(&truth)]);
        assert!(report.passed(), "a step back over what was delivered: {}", report.summary(20));
        let losing = Recorder::from_now("subscription", Some(TENANT), &[], Delivery::Interleaved);
        losing.open(None);
        for n in [3, 4, 6, 4, 6, 7, 8] {
            losing.receive(Received { id: format!("e{n}"), position: truth[n as usize - 1].position });
        }
        let report = check(&truth, &writes, &[losing.take_for_check(&truth)]);
        assert_eq!(report.tallies[0].lost, 1, "e5 never came: {}", report.summary(20));
    }
}
