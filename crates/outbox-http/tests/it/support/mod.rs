//! What the tests share: a real hyper server on loopback serving an
//! `OutboxService` over a fresh database, a real HTTP client, an SSE reader,
//! and helpers to publish and to wait for conditions with deadlines.

pub(crate) mod auth;
pub(crate) mod sse;

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use outbox_core::{Event, NewEvent};
use outbox_http::{OutboxService, WatchOptions};
use outbox_pg::sqlx::PgPool;
use outbox_pg::testkit::TestDb;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub(crate) use auth::TestAuthorizer;
pub(crate) use sse::SseItem;

/// How long a test waits for something that should happen at once.
pub(crate) const PATIENCE: Duration = Duration::from_secs(20);

/// A server on 127.0.0.1:0 serving `OutboxService` over its own fresh database.
pub(crate) struct TestServer {
    pub db: TestDb,
    pub service: OutboxService,
    pub auth: Arc<TestAuthorizer>,
    pub addr: SocketAddr,
    client: Client<HttpConnector, Full<Bytes>>,
    accept: JoinHandle<()>,
}

impl TestServer {
    /// A server with the default stream options.
    pub(crate) async fn start() -> TestServer {
        TestServer::with(|service| service).await
    }

    /// A server with these stream options.
    pub(crate) async fn with_options(options: WatchOptions) -> TestServer {
        TestServer::with(|service| service.with_options(options)).await
    }

    /// A server whose service `configure` adjusted.
    pub(crate) async fn with(configure: impl FnOnce(OutboxService) -> OutboxService) -> TestServer {
        let db = TestDb::new().await;
        let auth = Arc::new(TestAuthorizer::default());
        let service = configure(OutboxService::new(db.pool.clone(), auth.clone()));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binding 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let accept = tokio::spawn(serve(listener, service.clone()));
        let client = Client::builder(TokioExecutor::new()).build_http();
        TestServer { db, service, auth, addr, client, accept }
    }

    /// The pool of the server's database.
    pub(crate) fn pool(&self) -> &PgPool {
        &self.db.pool
    }

    /// `GET path` with `Authorization: Bearer <token>` when a token is given.
    pub(crate) async fn get(&self, path: &str, token: Option<&str>) -> Reply {
        self.send(Method::GET, path, &bearer(token), Bytes::new()).await
    }

    /// `POST path` with a JSON body.
    pub(crate) async fn post(&self, path: &str, token: Option<&str>, body: &Value) -> Reply {
        let mut headers = bearer(token);
        headers.push(("content-type", "application/json".into()));
        self.send(Method::POST, path, &headers, Bytes::from(body.to_string())).await
    }

    /// Any request; the whole answer.
    pub(crate) async fn send(&self, method: Method, path: &str, headers: &[(&str, String)], body: Bytes) -> Reply {
        let response = self.request(method, path, headers, body).await;
        let (parts, body) = response.into_parts();
        let body = within("the response body", body.collect()).await.expect("reading the response body").to_bytes();
        Reply { status: parts.status, headers: parts.headers, body }
    }

    async fn request(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, String)],
        body: Bytes,
    ) -> http::Response<Incoming> {
        let mut request = Request::builder().method(method).uri(format!("http://{}{path}", self.addr));
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let request = request.body(Full::new(body)).expect("a valid request");
        tokio::time::timeout(PATIENCE, self.client.request(request))
            .await
            .expect("the server answers in time")
            .expect("the request reaches the server")
    }

    /// Opens `GET /watch<query>` with `headers` (e.g. `Last-Event-ID`) and a bearer token.
    pub(crate) async fn watch(&self, query: &str, token: &str, headers: &[(&str, String)]) -> SseStream {
        let mut all = bearer(Some(token));
        all.extend(headers.iter().cloned());
        all.push(("accept", "text/event-stream".into()));
        let response = self.request(Method::GET, &format!("/watch{query}"), &all, Bytes::new()).await;
        assert_eq!(response.status(), StatusCode::OK, "opening /watch{query}");
        let (parts, body) = response.into_parts();
        SseStream { headers: parts.headers, body, parser: sse::SseParser::default(), ready: VecDeque::new() }
    }

    /// Publishes `events` in one transaction of the test's own, then waits until they are
    /// visible to the xmin read (every older transaction on the server, other tests' too,
    /// must have finished first).
    pub(crate) async fn publish(&self, events: &[NewEvent]) {
        publish(self.pool(), events).await;
        self.settle().await;
    }

    /// Waits until the newest row of the outbox is visible to the xmin read.
    pub(crate) async fn settle(&self) {
        outbox_pg::testkit::settle(self.pool(), PATIENCE).await;
    }

    /// Waits until `condition` holds, polling every few milliseconds; panics after `PATIENCE`.
    pub(crate) async fn wait_until(&self, what: &str, mut condition: impl FnMut() -> bool) {
        let deadline = Instant::now() + PATIENCE;
        while !condition() {
            assert!(Instant::now() < deadline, "gave up waiting until {what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.service.shutdown();
        self.accept.abort();
    }
}

async fn serve(listener: TcpListener, service: OutboxService) {
    while let Ok((stream, _)) = listener.accept().await {
        let service = service.clone();
        tokio::spawn(async move {
            let handler = hyper::service::service_fn(move |request: Request<Incoming>| {
                let service = service.clone();
                async move { Ok::<_, Infallible>(service.handle(request).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), handler).await;
        });
    }
}

fn bearer(token: Option<&str>) -> Vec<(&'static str, String)> {
    token.map(|token| ("authorization", format!("Bearer {token}"))).into_iter().collect()
}

/// A whole answer.
#[derive(Debug)]
pub(crate) struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    /// The body as JSON; panics naming the body when it is not.
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: not JSON: {}", String::from_utf8_lossy(&self.body)))
    }

    /// The `code` of a JSON refusal.
    pub(crate) fn error_code(&self) -> String {
        let json = self.json();
        json["error"]["code"].as_str().unwrap_or_else(|| panic!("not a refusal: {json}")).to_owned()
    }

    /// Asserts a JSON refusal with `status` and `code`.
    #[track_caller]
    pub(crate) fn assert_refused(&self, status: u16, code: &str) {
        assert_eq!(
            (self.status.as_u16(), self.error_code().as_str()),
            (status, code),
            "{}",
            String::from_utf8_lossy(&self.body)
        );
        assert_eq!(self.headers["content-type"], "application/json");
    }

    /// The `items` of a history page as events.
    pub(crate) fn events(&self) -> Vec<Event> {
        serde_json::from_value(self.json()["items"].clone()).expect("items are events")
    }
}

/// An open `/watch` response, read item by item.
pub(crate) struct SseStream {
    pub headers: HeaderMap,
    body: Incoming,
    parser: sse::SseParser,
    ready: VecDeque<SseItem>,
}

impl SseStream {
    /// The next item, or `None` when the server ended the stream; panics after `PATIENCE`.
    pub(crate) async fn next(&mut self) -> Option<SseItem> {
        within("the stream to say something", self.next_item()).await
    }

    /// The next item if one comes within `limit` (`Err` otherwise), `None` at the end.
    /// Cancel safe: an item half read stays for the next call.
    pub(crate) async fn next_within(
        &mut self,
        limit: Duration,
    ) -> Result<Option<SseItem>, tokio::time::error::Elapsed> {
        tokio::time::timeout(limit, self.next_item()).await
    }

    async fn next_item(&mut self) -> Option<SseItem> {
        loop {
            if let Some(item) = self.ready.pop_front() {
                return Some(item);
            }
            let frame = self.body.frame().await?.expect("reading the stream");
            if let Ok(data) = frame.into_data() {
                self.ready.extend(self.parser.feed(&data));
            }
        }
    }

    /// The next event, skipping comments; `None` at the end of the stream. Panics when no
    /// event comes within `PATIENCE`, even while keep-alives do.
    pub(crate) async fn next_event(&mut self) -> Option<(Option<String>, String, Value)> {
        within("the next event", self.next_raw_event()).await
    }

    async fn next_raw_event(&mut self) -> Option<(Option<String>, String, Value)> {
        loop {
            match self.next_item().await? {
                SseItem::Event { id, event, data } => {
                    let data = serde_json::from_str(&data).unwrap_or_else(|e| panic!("{e}: {data}"));
                    return Some((id, event, data));
                }
                SseItem::Comment(_) | SseItem::Retry(_) => {}
            }
        }
    }

    /// The next `count` events as `Event`s; panics on an error event or the end.
    pub(crate) async fn events(&mut self, count: usize) -> Vec<Event> {
        let mut events = Vec::with_capacity(count);
        while events.len() < count {
            let (id, kind, data) = self.next_event().await.expect("the stream ended early");
            assert_ne!(kind, "error", "an error event: {data}");
            let event: Event = serde_json::from_value(data).expect("an event");
            assert_eq!(id.as_deref(), Some(event.sequence.dotted().as_str()), "the SSE id is the position");
            assert_eq!(kind, event.event_type, "the SSE event name is the type");
            events.push(event);
        }
        events
    }

    /// Reads to the end of the stream, which must come within `PATIENCE`; returns the events
    /// and the data of the last `event: error`.
    pub(crate) async fn rest(&mut self) -> (Vec<Value>, Option<Value>) {
        within("the end of the stream", async {
            let mut events = Vec::new();
            let mut error = None;
            while let Some((_, kind, data)) = self.next_raw_event().await {
                if kind == "error" {
                    error = Some(data);
                } else {
                    assert!(error.is_none(), "an event after the error event: {data}");
                    events.push(data);
                }
            }
            (events, error)
        })
        .await
    }
}

/// Awaits `future` for at most `PATIENCE`; panics naming `what` it waited for.
pub(crate) async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, future).await.unwrap_or_else(|_| panic!("gave up waiting for {what}"))
}

/// Publishes `events` in one transaction.
pub(crate) async fn publish(pool: &PgPool, events: &[NewEvent]) {
    let mut tx = pool.begin().await.expect("begin");
    outbox_pg::publish_many(&mut *tx, events).await.expect("publish");
    tx.commit().await.expect("commit");
}

/// An event of `event_type` in `tenant` numbered `n`.
pub(crate) fn event(event_type: &str, tenant: &str, n: usize) -> NewEvent {
    NewEvent::new(event_type, tenant, format!("node/n{}", n % 7), json!({ "n": n }))
}

/// `count` events of `event_type` in `tenant`, numbered from `from`.
pub(crate) fn events(event_type: &str, tenant: &str, from: usize, count: usize) -> Vec<NewEvent> {
    (from..from + count).map(|n| event(event_type, tenant, n)).collect()
}

/// The `n` of each event's data, in order.
pub(crate) fn numbers(events: &[Event]) -> Vec<u64> {
    events.iter().map(|e| e.data.value()["n"].as_u64().expect("numbered")).collect()
}
