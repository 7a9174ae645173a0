//! One consumer's reads, shared by the lanes of it that one process runs (SPEC §7.7).
//!
//! A consumer of N lanes is N ordered loops, each with its own cursor. Each reading the
//! outbox for itself would read every row N times (a lane's events are spread over the
//! whole outbox), so the lanes of one process take their pages from one [`Feed`]: a window
//! of the consumer's matching events, in `(txid, seq)` order, complete between two
//! positions. A lane whose cursor lies in the window is served its own events from it,
//! with no query. A lane at the window's end extends it with one read of up to
//! [`MAX_LIMIT`] events for every lane (the lanes that asked meanwhile wait for that read
//! and are served from it). A lane behind the window (one that backed off, or a poison
//! event's lane, while the others went on) reads its own lane alone, with the lane in the
//! statement, until it is back in the window; a lane ahead of it starts the window afresh.
//!
//! The window forgets the events every lane of this process has passed, and keeps at most
//! [`WINDOW`] events: a lane left behind by more reads on its own rather than holding the
//! others back or the memory up.

use std::collections::{BTreeMap, VecDeque};

use outbox_core::{Event, Position};
use outbox_pg::internal::read::read_to_head;
use outbox_pg::sqlx::PgPool;
use outbox_pg::{Lane, MAX_LIMIT, ReadPage, ReadRequest};
use tokio::sync::Mutex;

/// The most events the window keeps.
pub(crate) const WINDOW: usize = 8 * MAX_LIMIT;

/// The reads of one consumer's lanes in this process.
pub(crate) struct Feed {
    pool: PgPool,
    /// The consumer's filter (tenant and types), every lane.
    request: ReadRequest,
    window: Mutex<Window>,
}

/// Every matching event after `start` up to `end`, in order.
#[derive(Default)]
struct Window {
    /// `None` until the first read.
    span: Option<Span>,
    events: VecDeque<Event>,
    /// Where each lane of this process last asked to read after.
    asked: BTreeMap<u32, Position>,
}

#[derive(Clone, Copy)]
struct Span {
    /// Exclusive.
    start: Position,
    /// Inclusive: the last read's `next_after`.
    end: Position,
    /// The last read's: whether rows after `end` were already visible.
    more: bool,
    complete_through: Position,
    snapshot_xmin: u64,
}

impl Feed {
    /// The feed of a consumer reading with `request`'s tenant and types.
    pub(crate) fn new(pool: PgPool, request: ReadRequest) -> Feed {
        let request = ReadRequest { lane: None, after: None, descending: false, ..request }.limit(MAX_LIMIT);
        Feed { pool, request, window: Mutex::new(Window::default()) }
    }

    /// Up to `limit` events of `lane` after `after` (`None`: from the oldest row), as one
    /// read of that lane alone would answer them.
    pub(crate) async fn page(
        &self,
        lane: Lane,
        after: Option<Position>,
        limit: usize,
    ) -> Result<ReadPage, outbox_pg::Error> {
        let from = after.unwrap_or(Position::START);
        let mut window = self.window.lock().await;
        window.asked.insert(lane.index, from);
        let span = match window.span {
            Some(span) if span.start <= from && from < span.end => span,
            Some(span) if from == span.end => window.extend(&self.pool, span, &self.request).await?,
            Some(span) if from < span.start || window.used_by_others(span, lane.index) => {
                drop(window);
                let request = self.request.clone().lane(lane).after(after).limit(limit);
                return read_to_head(&self.pool, &request).await;
            }
            _ => window.restart(&self.pool, &self.request, from).await?,
        };
        let page = window.serve(span, lane, from, limit);
        window.forget();
        Ok(page)
    }

    /// Lane `lane` no longer runs here: the window does not keep events for it.
    pub(crate) async fn leave(&self, lane: u32) {
        self.window.lock().await.asked.remove(&lane);
    }
}

impl Window {
    /// Whether a lane other than `lane` reads in the window: a lane ahead of it then reads
    /// alone (until the window reaches it) rather than starting it afresh.
    fn used_by_others(&self, span: Span, lane: u32) -> bool {
        self.asked.iter().any(|(&other, &at)| other != lane && span.start <= at && at <= span.end)
    }

    /// Reads on from the window's end, appending what it finds.
    async fn extend(&mut self, pool: &PgPool, span: Span, request: &ReadRequest) -> Result<Span, outbox_pg::Error> {
        let page = read_to_head(pool, &request.clone().after(span.end)).await?;
        let end = page.next_after.max(span.end);
        let span = read_span(span.start, end, &page);
        self.events.extend(page.events);
        self.span = Some(span);
        while self.events.len() > WINDOW {
            let forgotten = self.events.pop_front().expect("more than the window");
            self.span = Some(Span { start: position_of(&forgotten), ..span });
        }
        Ok(self.span.expect("just set"))
    }

    /// Forgets the window and reads after `from`.
    async fn restart(
        &mut self,
        pool: &PgPool,
        request: &ReadRequest,
        from: Position,
    ) -> Result<Span, outbox_pg::Error> {
        let after = (from > Position::START).then_some(from);
        let page = read_to_head(pool, &request.clone().after(after)).await?;
        let end = page.next_after.max(from);
        let span = read_span(from, end, &page);
        self.events = page.events.into();
        self.span = Some(span);
        Ok(span)
    }

    /// `lane`'s events in the window after `from`, at most `limit`.
    fn serve(&self, span: Span, lane: Lane, from: Position, limit: usize) -> ReadPage {
        let first = self.events.partition_point(|event| position_of(event) <= from);
        let events: Vec<Event> =
            self.events.range(first..).filter(|event| lane.holds(&event.subject)).take(limit).cloned().collect();
        if events.len() == limit {
            let last = position_of(events.last().expect("limit is at least one"));
            return ReadPage {
                events,
                next_after: last,
                more: true,
                complete_through: last,
                snapshot_xmin: span.snapshot_xmin,
            };
        }
        ReadPage {
            events,
            next_after: span.end,
            more: span.more,
            complete_through: span.complete_through,
            snapshot_xmin: span.snapshot_xmin,
        }
    }

    /// Drops the events every lane that runs here has passed.
    fn forget(&mut self) {
        let (Some(span), Some(&slowest)) = (self.span, self.asked.values().min()) else { return };
        let keep_after = slowest.min(span.end);
        while self.events.front().is_some_and(|event| position_of(event) <= keep_after) {
            self.events.pop_front();
        }
        if keep_after > span.start {
            self.span = Some(Span { start: keep_after, ..span });
        }
    }
}

/// The span a read after `start` that reached `end` covers.
fn read_span(start: Position, end: Position, page: &ReadPage) -> Span {
    Span {
        start,
        end,
        more: page.more,
        complete_through: page.complete_through.max(end),
        snapshot_xmin: page.snapshot_xmin,
    }
}

fn position_of(event: &Event) -> Position {
    event.sequence
}
