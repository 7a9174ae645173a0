//! The live stream: `GET /watch` read as Server-Sent Events, reconnected until it is
//! dropped or refused (SPEC §5.4).
//!
//! The stream keeps one position: the last event it yielded, or a later one when a
//! `: keep-alive <position>` comment says the server has looked further (a type filter
//! skipped rows). Every connection after the first sends it as `Last-Event-ID`, and the
//! server never skips or repeats an event after the position it is given, so the events
//! come once each and in `(txid, seq)` order across any number of reconnects. An event
//! at or before the position (which a correct server never sends) is dropped.
//!
//! - The server ends the stream (its `max_duration_ms`, a shutdown): reconnect after the
//!   `retry:` delay it announced (2 s until it said one).
//! - A failure (no connection, a `5xx`, a cut connection, `event: error` without a code or
//!   with `UNAVAILABLE`, nothing heard for [`WatchQuery::idle_timeout`]): reconnect after
//!   the retry delay doubled per failure in a row, at most [`WatchQuery::max_backoff`].
//!   An event or a keep-alive ends the run of failures.
//! - `401`, `403`, or `event: error` with `ACCESS_DENIED` (a revocation): the stream yields
//!   [`Error::Unauthenticated`] or [`Error::AccessDenied`] and ends, without retrying.
//!   So does any other refusal (`400` for a bad type list, `404` for a wrong prefix) and an
//!   answer that breaks the protocol.
//!
//! Dropping the stream drops its connection and any pending delay; nothing runs after it.

use std::collections::VecDeque;
use std::time::Duration;

use outbox_core::{ErrorCode, Event, Position};
use reqwest::Method;
use reqwest::header::{ACCEPT, CACHE_CONTROL, CONTENT_TYPE};
use serde::Deserialize;

use crate::sse::{Frame, Parser};
use crate::{Client, Error, Events, Result};

/// The reconnection delay until the server announces its own (SPEC §5.4's default).
pub const DEFAULT_RETRY: Duration = Duration::from_millis(2000);

/// The shortest delay after a failure, whatever `retry:` said, so a failing server is not
/// hammered.
const MIN_FAILURE_DELAY: Duration = Duration::from_millis(100);

/// What to watch and how to reconnect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchQuery {
    /// Type patterns (`reservation.*`, `node.joined`); empty means every type.
    pub types: Vec<String>,
    /// Another tenant than the token's (needs the `admin` scope).
    pub tenant_id: Option<String>,
    /// Start strictly after this position (an event's `sequence` or a page's `cursor`);
    /// `None` starts at the head when [`Client::watch`] opens the stream ("from now").
    pub last_event_id: Option<Position>,
    /// The longest delay between reconnection attempts after failures (default 30 s).
    pub max_backoff: Duration,
    /// Reconnect when nothing (not even a keep-alive) arrived for this long (default 60 s,
    /// four times the server's default heartbeat).
    pub idle_timeout: Duration,
}

impl Default for WatchQuery {
    fn default() -> WatchQuery {
        WatchQuery {
            types: Vec::new(),
            tenant_id: None,
            last_event_id: None,
            max_backoff: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

impl WatchQuery {
    fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = Vec::new();
        if !self.types.is_empty() {
            pairs.push(("types", self.types.join(",")));
        }
        if let Some(tenant) = &self.tenant_id {
            pairs.push(("tenantId", tenant.clone()));
        }
        pairs
    }
}

/// The delay before the next attempt: the server's `retry:` after a clean end, doubled per
/// failure in a row up to a ceiling.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    retry: Duration,
    failures: u32,
    max: Duration,
}

impl Backoff {
    pub(crate) fn new(max: Duration) -> Backoff {
        Backoff { retry: DEFAULT_RETRY, failures: 0, max }
    }

    /// Records a failure; answers how long to wait before trying again.
    pub(crate) fn failed(&mut self) -> Duration {
        self.failures = self.failures.saturating_add(1);
        let doublings = (self.failures - 1).min(20);
        self.retry.max(MIN_FAILURE_DELAY).saturating_mul(1 << doublings).min(self.max)
    }

    /// The delay after the server ended a stream on purpose.
    pub(crate) fn after_end(&self) -> Duration {
        self.retry
    }

    /// Progress was made: the next failure starts from the retry delay again.
    pub(crate) fn reset(&mut self) {
        self.failures = 0;
    }

    fn set_retry(&mut self, retry: Duration) {
        self.retry = retry;
    }
}

/// One open response and what has been parsed from it.
struct Connection {
    response: reqwest::Response,
    parser: Parser,
}

/// The state of one watch stream; [`Watcher::next`] drives it.
pub(crate) struct Watcher {
    client: Client,
    query: WatchQuery,
    position: Option<Position>,
    backoff: Backoff,
    delay: Duration,
    connection: Option<Connection>,
    frames: VecDeque<Frame>,
    finished: bool,
}

/// What one frame means for the caller.
enum Step {
    Continue,
    Yield(Event),
    End(Error),
}

/// `data:` of `event: error`.
#[derive(Deserialize)]
struct ErrorData {
    code: Option<String>,
    #[serde(default)]
    message: String,
}

impl Watcher {
    pub(crate) fn new(client: Client, query: WatchQuery) -> Watcher {
        Watcher {
            client,
            position: query.last_event_id,
            backoff: Backoff::new(query.max_backoff),
            query,
            delay: Duration::ZERO,
            connection: None,
            frames: VecDeque::new(),
            finished: false,
        }
    }

    /// A watcher whose first connection is open and whose position is known: the one given,
    /// or the start the server announced in its opening keep-alive (the head when it
    /// opened). Transient failures on the way are retried; a refusal is the error.
    pub(crate) async fn start(client: Client, query: WatchQuery) -> Result<Watcher> {
        let mut watcher = Watcher::new(client, query);
        watcher.connect().await?;
        while watcher.position.is_none() {
            if watcher.connection.is_none() {
                watcher.connect().await?;
            }
            watcher.read().await?;
            // The opening frames (`retry:`, the keep-alive at the start) come before any
            // event; an event first (a server that announces no start) ends the wait, and
            // that event sets the position.
            while let Some(Frame::Retry(_) | Frame::Comment(_)) = watcher.frames.front() {
                let frame = watcher.frames.pop_front().expect("a front frame");
                watcher.on_frame(frame);
            }
            if !watcher.frames.is_empty() {
                break;
            }
        }
        Ok(watcher)
    }

    /// The stream over this watcher.
    pub(crate) fn into_events(self) -> Events {
        Events::new(futures_util::stream::unfold(self, |mut watcher| async move {
            let item = watcher.next().await?;
            Some((item, watcher))
        }))
    }

    /// The next event, the error that ends the stream, or `None` after that.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a dropped call loses no event. Frames are parsed into the watcher before
    /// any of them is handed out, and the position moves only when an event is returned.
    pub(crate) async fn next(&mut self) -> Option<Result<Event>> {
        while !self.finished {
            if let Some(frame) = self.frames.pop_front() {
                match self.on_frame(frame) {
                    Step::Continue => continue,
                    Step::Yield(event) => return Some(Ok(event)),
                    Step::End(error) => return Some(Err(self.finish(error))),
                }
            }
            let step = if self.connection.is_none() { self.connect().await } else { self.read().await };
            if let Err(error) = step {
                return Some(Err(self.finish(error)));
            }
        }
        None
    }

    fn finish(&mut self, error: Error) -> Error {
        self.finished = true;
        self.connection = None;
        self.frames.clear();
        error
    }

    /// Opens a response, waiting out the delay first and retrying transient failures.
    async fn connect(&mut self) -> Result<()> {
        loop {
            if !self.delay.is_zero() {
                tokio::time::sleep(self.delay).await;
            }
            let opened = tokio::time::timeout(self.query.idle_timeout, self.open()).await;
            let error = match opened {
                Ok(Ok(connection)) => {
                    self.connection = Some(connection);
                    self.delay = Duration::ZERO;
                    return Ok(());
                }
                Ok(Err(error)) if error.is_transient() => error,
                Ok(Err(error)) => return Err(error),
                Err(_) => Error::Timeout("no answer to GET /watch within the idle timeout".into()),
            };
            self.failed(&error);
        }
    }

    async fn open(&self) -> Result<Connection> {
        let url = self.client.url("/watch", &self.query.pairs());
        let mut request =
            self.client.request(Method::GET, url).header(ACCEPT, "text/event-stream").header(CACHE_CONTROL, "no-cache");
        if let Some(position) = self.position {
            request = request.header("Last-Event-ID", position.dotted());
        }
        let response = self.client.send(request).await?;
        let content_type = response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
        if !content_type.starts_with("text/event-stream") {
            return Err(Error::Protocol(format!("GET /watch answered {content_type:?}, not text/event-stream")));
        }
        Ok(Connection { response, parser: Parser::default() })
    }

    /// Reads the next chunk into frames. A lost connection schedules a reconnect; only a
    /// protocol violation fails.
    async fn read(&mut self) -> Result<()> {
        let Some(connection) = self.connection.as_mut() else { return Ok(()) };
        let chunk = match tokio::time::timeout(self.query.idle_timeout, connection.response.chunk()).await {
            Ok(Ok(Some(chunk))) => chunk,
            Ok(Ok(None)) => {
                self.connection = None;
                self.delay = self.backoff.after_end();
                tracing::debug!(delay = ?self.delay, "outbox watch: the server ended the stream; reconnecting");
                return Ok(());
            }
            Ok(Err(error)) => {
                self.connection = None;
                self.failed(&Error::Connection(error));
                return Ok(());
            }
            Err(_) => {
                self.connection = None;
                self.failed(&Error::Timeout(format!("nothing heard for {:?}", self.query.idle_timeout)));
                return Ok(());
            }
        };
        let mut frames = Vec::new();
        let parsed = connection.parser.push(&chunk, &mut frames);
        self.frames.extend(frames);
        parsed.map_err(|_| Error::Protocol(format!("an event stream line longer than {} bytes", crate::sse::MAX_LINE)))
    }

    fn failed(&mut self, error: &Error) {
        self.delay = self.backoff.failed();
        tracing::warn!(error = %crate::error::chain(error), delay = ?self.delay, "outbox watch: reconnecting");
    }

    fn on_frame(&mut self, frame: Frame) -> Step {
        match frame {
            Frame::Retry(ms) => self.backoff.set_retry(Duration::from_millis(ms)),
            Frame::Comment(text) => {
                let position = text.strip_prefix("keep-alive ").and_then(|p| Position::parse(p.trim()).ok());
                if let Some(position) = position {
                    self.backoff.reset();
                    self.advance(position);
                }
            }
            Frame::Event { event, data, .. } if event == "error" => return self.on_error(&data),
            Frame::Event { data, .. } => return self.on_event(&data),
        }
        Step::Continue
    }

    fn on_event(&mut self, data: &str) -> Step {
        let event: Event = match serde_json::from_str(data) {
            Ok(event) => event,
            Err(error) => return Step::End(Error::Protocol(format!("an event that is not an event: {error}"))),
        };
        self.backoff.reset();
        if self.position.is_some_and(|position| event.sequence <= position) {
            return Step::Continue;
        }
        self.position = Some(event.sequence);
        Step::Yield(event)
    }

    /// `event: error`: the server closes the stream after it. A refusal ends the watch; any
    /// other error reconnects.
    fn on_error(&mut self, data: &str) -> Step {
        let error: ErrorData = serde_json::from_str(data)
            .unwrap_or_else(|_| ErrorData { code: None, message: format!("the stream failed: {data}") });
        let code = error.code.as_deref().and_then(|c| serde_json::from_value(c.into()).ok());
        match code {
            Some(ErrorCode::AccessDenied) => Step::End(Error::AccessDenied { message: error.message }),
            Some(ErrorCode::Unauthenticated) => Step::End(Error::Unauthenticated { message: error.message }),
            _ => {
                self.connection = None;
                self.frames.clear();
                let code = code.map(|c| c.as_str()).unwrap_or("no code");
                self.failed(&Error::Protocol(format!("the server ended the stream ({code}): {}", error.message)));
                Step::Continue
            }
        }
    }

    fn advance(&mut self, position: Position) {
        if self.position.is_none_or(|current| position > current) {
            self.position = Some(position);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_double_the_retry_delay_up_to_the_ceiling() {
        let mut backoff = Backoff::new(Duration::from_secs(30));
        let delays: Vec<u64> = (0..7).map(|_| backoff.failed().as_millis() as u64).collect();
        assert_eq!(delays, [2000, 4000, 8000, 16000, 30000, 30000, 30000]);
        backoff.reset();
        assert_eq!(backoff.failed(), Duration::from_secs(2));
        backoff.set_retry(Duration::from_millis(10));
        assert_eq!(backoff.after_end(), Duration::from_millis(10));
        backoff.reset();
        assert_eq!(backoff.failed(), MIN_FAILURE_DELAY, "a tiny retry: is floored after failures");
        for _ in 0..100 {
            backoff.failed();
        }
        assert_eq!(backoff.failed(), Duration::from_secs(30), "no overflow after many failures");
    }

    fn watcher(last: Option<Position>) -> Watcher {
        let query = WatchQuery { last_event_id: last, ..WatchQuery::default() };
        Watcher::new(Client::new("http://127.0.0.1:9").unwrap(), query)
    }

    fn event_data(txid: u64, seq: u64) -> String {
        format!(
            r#"{{"id":"evt_{txid}_{seq}","type":"a.b","tenantId":"acme","subject":"a/1","time":"2026-09-24T10:15:02.114Z","sequence":"{txid}.{seq}","data":{{}}}}"#
        )
    }

    #[test]
    fn events_move_the_position_and_repeats_are_dropped() {
        let mut watcher = watcher(Some(Position::new(5, 5)));
        assert!(matches!(watcher.on_event(&event_data(5, 5)), Step::Continue));
        assert!(matches!(watcher.on_event(&event_data(6, 1)), Step::Yield(_)));
        assert!(matches!(watcher.on_event(&event_data(6, 1)), Step::Continue));
        assert_eq!(watcher.position, Some(Position::new(6, 1)));
        assert!(matches!(watcher.on_event("{}"), Step::End(Error::Protocol(_))));
    }

    #[test]
    fn keep_alives_advance_and_never_go_back() {
        let mut watcher = watcher(None);
        watcher.on_frame(Frame::Comment("keep-alive 9.3".into()));
        assert_eq!(watcher.position, Some(Position::new(9, 3)));
        watcher.on_frame(Frame::Comment("keep-alive 2.1".into()));
        watcher.on_frame(Frame::Comment("something else".into()));
        assert_eq!(watcher.position, Some(Position::new(9, 3)));
        watcher.on_frame(Frame::Retry(25));
        assert_eq!(watcher.backoff.after_end(), Duration::from_millis(25));
    }

    #[test]
    fn error_frames_end_or_reconnect_by_code() {
        let mut watcher = watcher(None);
        let denied = watcher.on_error(r#"{"code":"ACCESS_DENIED","message":"signed out"}"#);
        assert!(matches!(denied, Step::End(Error::AccessDenied { message }) if message == "signed out"));
        let unauthenticated = watcher.on_error(r#"{"code":"UNAUTHENTICATED","message":"expired"}"#);
        assert!(matches!(unauthenticated, Step::End(Error::Unauthenticated { .. })));
        for data in [r#"{"message":"reading failed"}"#, r#"{"code":"UNAVAILABLE","message":"x"}"#, "garbage"] {
            assert!(matches!(watcher.on_error(data), Step::Continue), "{data}");
        }
        assert_eq!(watcher.backoff.failures, 3);
    }
}
