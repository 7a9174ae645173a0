//! One live stream: the loop that turns the outbox into SSE frames.
//!
//! The stream is pulled, not pushed: the response body asks for its next frame
//! ([`WatchStream::next_frame`]) when the connection can take it, so a slow client slows
//! only its own stream. What it sends comes from its [`Follower`]: reads of its own while
//! it is behind (its tenant inside the query, its patterns as the filter), then the
//! process's shared tail, whose bounded inbox it drains; a stream too slow for the tail
//! leaves it and reads on its own again until it catches up (`outbox_pg::tail`). With
//! `shared_tail = false` it reads on its own every `poll_ms`, as before the tail existed.
//!
//! Before every frame, and again between reading the outbox and sending what
//! was read, the stream checks its revocation signal and the service's
//! shutdown signal. A revoked stream therefore sends nothing it read after the
//! revocation: its last frame is `event: error` with `ACCESS_DENIED`.
//!
//! The stream keeps two positions: the follower's, how far it has everything it read or
//! was handed (it moves past rows the filter skipped), and `delivered`, how far the
//! client has been given everything; keep-alive comments carry `delivered`.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use outbox_core::{ErrorCode, Position};
use outbox_pg::ReadRequest;
use outbox_pg::sqlx::PgPool;
use outbox_pg::tail::{Follower, SharedEvent, Tail};
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until, timeout};

use super::{WatchOptions, sse};
use crate::registry::Registration;
use crate::{Authorizer, Grant};

/// Everything a stream needs from the service that opened it.
pub(crate) struct StreamContext {
    pub(crate) pool: PgPool,
    pub(crate) authorizer: Arc<dyn Authorizer>,
    pub(crate) options: WatchOptions,
    pub(crate) shutdown: watch::Receiver<bool>,
    /// Where the events sent are counted.
    pub(crate) stats: Arc<crate::HttpStats>,
    /// The process's shared tail; `None` reads on its own every `poll_ms`.
    pub(crate) tail: Option<Tail>,
}

/// One open stream's state.
pub(crate) struct WatchStream {
    context: StreamContext,
    grant: Arc<Grant>,
    registration: Registration,
    /// The tenant whose events the stream sends (counted in the service's statistics).
    tenant: String,
    follower: Follower,
    pending: VecDeque<Arc<SharedEvent>>,
    /// The follower's position once `pending` is sent.
    scanned: Position,
    delivered: Position,
    opened: bool,
    done: bool,
    outage_since: Option<Instant>,
    clock: Clock,
}

/// When each periodic duty is next due.
struct Clock {
    deadline: Instant,
    next_heartbeat: Instant,
    next_reauthorize: Instant,
}

impl WatchStream {
    /// A stream over `request` (tenant and patterns set) that starts strictly after `start`;
    /// `complete` when `start` is the head (or the tail's position), which lets the stream
    /// join the tail without a read of its own.
    pub(crate) fn new(
        context: StreamContext,
        grant: Arc<Grant>,
        registration: Registration,
        mut request: ReadRequest,
        start: Position,
        complete: bool,
    ) -> WatchStream {
        let now = Instant::now();
        let options = context.options;
        request.limit = options.read_limit();
        let tenant = request.tenant_id.clone().unwrap_or_default();
        let mut follower = Follower::new(context.pool.clone(), request, start).poll_every(options.poll());
        if let Some(tail) = &context.tail {
            follower = follower.on_tail(tail.clone(), options.buffer);
        }
        if complete {
            follower = follower.complete_at_start();
        }
        let clock = Clock {
            deadline: now + options.max_duration(),
            next_heartbeat: now + options.heartbeat(),
            next_reauthorize: now + options.reauthorize(),
        };
        WatchStream {
            context,
            grant,
            registration,
            tenant,
            follower,
            pending: VecDeque::new(),
            scanned: start,
            delivered: start,
            opened: false,
            done: false,
            outage_since: None,
            clock,
        }
    }

    /// The next frame to send, or `None` when the stream has ended.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a read in flight is lost when the future is dropped. The body polls
    /// it to completion or drops the whole stream.
    pub(crate) async fn next_frame(&mut self) -> Option<Bytes> {
        loop {
            if self.done {
                return None;
            }
            if let Some(frame) = self.due_frame() {
                return frame;
            }
            // The rare, large futures (a database read, the authorizer's answer) are boxed
            // while they run, so that an idle stream's future is only as large as its wait.
            if Instant::now() >= self.clock.next_reauthorize {
                if let Some(last) = Box::pin(self.reauthorize()).await {
                    return self.end(Some(last));
                }
                continue;
            }
            if !self.pending.is_empty() {
                return Some(self.send_pending());
            }
            if self.follower.read_due() {
                if let Some(last) = Box::pin(self.read()).await {
                    return self.end(Some(last));
                }
                continue;
            }
            if self.take() {
                continue;
            }
            self.wait().await;
        }
    }

    /// A frame that must go out (or the end) before anything else: the opening `retry:` with a
    /// keep-alive at the start position, the
    /// end of a revoked, shut down or expired stream, or a due keep-alive.
    fn due_frame(&mut self) -> Option<Option<Bytes>> {
        if !self.opened {
            // The position at once, so that a client that reconnects before the first event
            // or keep-alive resumes from here rather than from a later head.
            self.opened = true;
            let mut opening = sse::retry(self.context.options.retry_ms).to_vec();
            opening.extend_from_slice(&sse::keep_alive(self.delivered));
            return Some(Some(Bytes::from(opening)));
        }
        if let Some(reason) = self.registration.revocation() {
            return Some(self.end(Some(sse::refusal(ErrorCode::AccessDenied, &reason))));
        }
        let shut_down = *self.context.shutdown.borrow_and_update() || self.context.shutdown.has_changed().is_err();
        let now = Instant::now();
        if shut_down || now >= self.clock.deadline {
            return Some(self.end(None));
        }
        if now >= self.clock.next_heartbeat {
            self.clock.next_heartbeat = now + self.context.options.heartbeat();
            // Catch up with the tail first, so that the keep-alive carries its position.
            self.take();
            return Some(Some(sse::keep_alive(self.delivered)));
        }
        None
    }

    /// Ends the stream after `last` (if any).
    fn end(&mut self, last: Option<Bytes>) -> Option<Bytes> {
        self.done = true;
        self.pending.clear();
        last
    }

    /// One frame holding every event read and not yet sent, which the client now has: a
    /// frame per batch rather than per event keeps the body's per-frame work off the hot path.
    /// The revocation check in [`Self::due_frame`] runs right before it, so nothing read
    /// after a revocation goes out. Each event's block is encoded once for every stream
    /// that sends it.
    fn send_pending(&mut self) -> Bytes {
        let mut frame = Vec::with_capacity(self.pending.len() * 512);
        self.context.stats.sent(&self.tenant, self.pending.len() as u64);
        while let Some(event) = self.pending.pop_front() {
            match event.encoded(|event| sse::event(event).map(Vec::from).ok()) {
                Some(block) => frame.extend_from_slice(block),
                None => {
                    tracing::error!(position = %event.sequence, "serializing an event for /watch failed");
                    frame.extend_from_slice(&sse::failure("the stream failed"));
                    self.end(None);
                    return Bytes::from(frame);
                }
            }
            self.delivered = if self.pending.is_empty() { self.scanned } else { event.sequence };
        }
        Bytes::from(frame)
    }

    /// Takes what the tail handed this stream; `true` when there are events to send.
    fn take(&mut self) -> bool {
        let events = self.follower.take();
        self.scanned = self.follower.position();
        if self.pending.is_empty() && events.is_empty() {
            self.delivered = self.scanned;
        }
        self.pending.extend(events);
        !self.pending.is_empty()
    }

    /// Reads the next batch on the stream's own. A failure is logged and answered with the
    /// `event: error` frame that ends the stream; the client resumes from its last id.
    async fn read(&mut self) -> Option<Bytes> {
        match self.follower.read().await {
            Ok(events) => {
                self.scanned = self.follower.position();
                if self.pending.is_empty() && events.is_empty() {
                    self.delivered = self.scanned;
                }
                self.pending.extend(events);
                None
            }
            Err(error) => {
                tracing::warn!(error = %error, tenant = %self.grant.tenant_id, "reading the outbox for /watch failed");
                Some(sse::failure("reading the outbox failed; reconnect to resume"))
            }
        }
    }

    /// Asks the authorizer whether the grant still holds. `false` ends the stream with
    /// `ACCESS_DENIED`; an error (or no answer within `reauthorize_ms`) starts or continues an
    /// outage, and once that outage has lasted `iam_outage_ms` the stream ends with `UNAVAILABLE`.
    async fn reauthorize(&mut self) -> Option<Bytes> {
        let options = self.context.options;
        let answer = timeout(options.reauthorize(), self.context.authorizer.reauthorize(&self.grant)).await;
        let now = Instant::now();
        self.clock.next_reauthorize = now + options.reauthorize();
        match answer {
            Ok(Ok(true)) => {
                self.outage_since = None;
                None
            }
            Ok(Ok(false)) => Some(sse::refusal(ErrorCode::AccessDenied, "access to this stream was revoked")),
            Ok(Err(error)) => self.outage(now, &error.to_string()),
            Err(_) => self.outage(now, "no answer in time"),
        }
    }

    fn outage(&mut self, now: Instant, error: &str) -> Option<Bytes> {
        let since = *self.outage_since.get_or_insert(now);
        tracing::warn!(error, tenant = %self.grant.tenant_id, "reauthorizing a /watch stream failed");
        if now.duration_since(since) < self.context.options.iam_outage() {
            return None;
        }
        let message = "the authority that checks this stream's access has been unreachable too long; reconnect";
        Some(sse::refusal(ErrorCode::Unavailable, message))
    }

    /// Sleeps until the follower has something, the next duty is due, the stream is revoked,
    /// or the service shuts down.
    async fn wait(&mut self) {
        let clock = &self.clock;
        let wake = clock.deadline.min(clock.next_heartbeat).min(clock.next_reauthorize);
        tokio::select! {
            () = self.follower.ready() => {}
            () = sleep_until(wake) => {}
            () = self.registration.changed() => {}
            _ = self.context.shutdown.changed() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AuthError, BoxFuture, Selector, WatchRegistry};
    use outbox_core::NewEvent;
    use outbox_pg::testkit::TestDb;

    struct AllowAll;

    impl Authorizer for AllowAll {
        fn authorize<'a>(&'a self, _: &'a http::HeaderMap) -> BoxFuture<'a, Result<Grant, AuthError>> {
            Box::pin(async { Ok(Grant::new("acme", ["events:read"])) })
        }
        fn reauthorize<'a>(&'a self, _: &'a Grant) -> BoxFuture<'a, Result<bool, AuthError>> {
            Box::pin(async { Ok(true) })
        }
    }

    fn text(frame: Option<Bytes>) -> String {
        String::from_utf8(frame.expect("a frame").to_vec()).unwrap()
    }

    /// Events already read but not yet sent when the revocation arrives are dropped: the
    /// next frame is the refusal, and then the stream ends.
    #[tokio::test]
    async fn a_revocation_drops_what_was_read_but_not_sent() {
        let db = TestDb::new().await;
        let events: Vec<NewEvent> =
            (0..3).map(|n| NewEvent::new("node.joined", "acme", "node/n1", serde_json::json!({ "n": n }))).collect();
        let mut tx = db.pool.begin().await.unwrap();
        outbox_pg::publish_many(&mut *tx, &events).await.unwrap();
        tx.commit().await.unwrap();

        let registry = WatchRegistry::new();
        let (_shutdown, shutdown) = watch::channel(false);
        let grant = Arc::new(Grant { session_id: Some("s1".into()), ..Grant::new("acme", ["events:read"]) });
        let context = StreamContext {
            pool: db.pool.clone(),
            authorizer: Arc::new(AllowAll),
            options: WatchOptions::default(),
            shutdown,
            stats: Arc::default(),
            tail: None,
        };
        let registration = registry.register(grant.clone());
        let mut stream =
            WatchStream::new(context, grant, registration, ReadRequest::tenant("acme"), Position::START, false);
        assert_eq!(text(stream.next_frame().await), "retry: 2000\n\n: keep-alive 0.0\n\n");
        // Under the xmin rule the rows may wait for other tests' transactions: read until one arrives.
        let first = tokio::time::timeout(std::time::Duration::from_secs(20), stream.next_frame()).await.unwrap();
        let first = text(first);
        assert!(first.contains("\"n\":0") && first.contains("\"n\":2"), "one frame carries the batch: {first}");

        // Read a second batch into the stream without sending it, then revoke.
        outbox_pg::publish_many(&db.pool, &events).await.unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut poll = tokio::time::interval(std::time::Duration::from_millis(20));
        while stream.pending.is_empty() {
            assert!(std::time::Instant::now() < deadline, "the second batch never became visible");
            assert!(stream.read().await.is_none());
            poll.tick().await;
        }
        assert_eq!(registry.close_where(&Selector::Session("s1".into()), "signed out"), 1);
        let last = text(stream.next_frame().await);
        assert_eq!(last, "event: error\ndata: {\"code\":\"ACCESS_DENIED\",\"message\":\"signed out\"}\n\n");
        assert_eq!(stream.next_frame().await, None);
    }
}
