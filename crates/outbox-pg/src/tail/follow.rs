//! [`Follower`]: one consumer's way through the outbox — its own reads while it is behind,
//! the shared tail once it has caught up, and back to its own reads when it falls behind.
//!
//! ```text
//!            read reached the visible end: join          position >= joined_at
//! Reading ───────────────────────────────────> Bridging ───────────────────────> Live
//!    ^                                             │                              │
//!    └──────────── detached (inbox overflowed, or the tail's read failed) ────────┘
//! ```
//!
//! - **Reading**: reads of its own (tenant in the query, patterns as the filter) after its
//!   position, which is each read's [`complete_through`](crate::ReadPage::complete_through).
//! - **Bridging**: joined, but the tail was ahead ([`Member::joined_at`] after its position);
//!   it reads on its own until its position reaches that point, while the tail fills its
//!   inbox with everything after it.
//! - **Live**: it only drains its inbox, skipping rows at or before its position (those its
//!   own reads already gave), and its position follows the tail's, so a stream whose
//!   filter matches nothing still advances.
//!
//! Without a tail ([`Follower::new`] alone) it reads on its own every `poll`, one query per
//! follower per poll: the per-stream polling the tail replaces, kept as a baseline.
//!
//! The first read is its own, because a position given by a client is not known to be
//! complete: only a read's `complete_through`, [`crate::internal::read::head`] or a tail's position
//! is ([`Follower::complete_at_start`] skips that read for those).

use std::sync::Arc;
use std::time::Duration;

use outbox_core::Position;
use sqlx::PgPool;
use tokio::time::{Instant, sleep_until};

use super::{Filter, Member, SharedEvent, Tail};
use crate::Result;
use crate::read::{ReadRequest, read_page};

/// One consumer's position in the outbox, fed by its own reads or by a shared [`Tail`].
pub struct Follower {
    pool: PgPool,
    request: ReadRequest,
    tail: Option<(Tail, usize)>,
    poll: Duration,
    position: Position,
    /// `(xmin, 0)` of the last own read: complete for every tenant, where a tail without a
    /// position starts.
    bound: Position,
    /// Rows after the position were already visible at the last own read.
    more: bool,
    next_read: Instant,
    mode: Mode,
}

enum Mode {
    /// Reading on its own.
    Reading,
    /// On the tail, reading on its own up to where it joined.
    Bridging(Member),
    /// On the tail.
    Live(Member),
}

impl Follower {
    /// Follows `request`'s tenant and patterns (its `after` is ignored) strictly after `after`,
    /// reading on its own every 100 ms until [`Follower::on_tail`] gives it a tail. Reads take
    /// `request.limit` events; a subject filter is read on its own only, never from the tail.
    pub fn new(pool: PgPool, request: ReadRequest, after: Position) -> Follower {
        Follower {
            pool,
            request,
            tail: None,
            poll: Duration::from_millis(100),
            position: after,
            bound: Position::START,
            more: true,
            next_read: Instant::now(),
            mode: Mode::Reading,
        }
    }

    /// Joins `tail` once caught up, with an inbox of at most `capacity` rows.
    pub fn on_tail(mut self, tail: Tail, capacity: usize) -> Follower {
        if self.request.subject.is_none() {
            self.tail = Some((tail, capacity));
        }
        self
    }

    /// Declares the start complete for every tenant (no row can ever appear at or before
    /// it), so the follower may join the tail without a first read of its own: true of
    /// [`crate::internal::read::head`], of a tail's [`Tail::position`], and of the later of the two.
    pub fn complete_at_start(mut self) -> Follower {
        self.bound = self.position;
        self.more = false;
        self.settle();
        self
    }

    /// How long to wait between own reads that reached the visible end: the poll without a
    /// tail (default 100 ms), and the pause of a bridge that did not reach the tail at once.
    pub fn poll_every(mut self, poll: Duration) -> Follower {
        self.poll = poll;
        self
    }

    /// How far this follower has everything it will ever be given (once the caller has
    /// handled what [`Follower::read`] and [`Follower::take`] returned).
    pub fn position(&self) -> Position {
        self.position
    }

    /// Whether it is fed by the tail right now.
    pub fn is_live(&self) -> bool {
        matches!(&self.mode, Mode::Live(member) if !member.is_detached())
    }

    /// Whether [`Follower::read`] should run now: it is behind, was detached, or its poll
    /// (or its bridge's next step) is due.
    pub fn read_due(&self) -> bool {
        match &self.mode {
            Mode::Reading | Mode::Bridging(_) => self.more || Instant::now() >= self.next_read,
            Mode::Live(member) => member.is_detached(),
        }
    }

    /// One read of its own after its position; joins the tail (or goes live on it) when the
    /// read reaches the visible end. Returns the events read, in order.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a read dropped in flight loses nothing, but run it to completion
    /// outside `select!` so that a slow read is not restarted over and over.
    pub async fn read(&mut self) -> Result<Vec<Arc<SharedEvent>>> {
        self.request.after = Some(self.position);
        let page = read_page(&self.pool, &self.request).await;
        self.next_read = Instant::now() + self.poll;
        let page = page?;
        self.position = page.complete_through.max(self.position);
        self.bound = Position::new(page.snapshot_xmin, 0);
        self.more = page.more;
        self.settle();
        Ok(page.events.into_iter().map(SharedEvent::new).collect())
    }

    /// What the tail handed over since the last call (nothing unless live), in order and
    /// after the position; moves the position to the tail's. Never waits.
    pub fn take(&mut self) -> Vec<Arc<SharedEvent>> {
        let Mode::Live(member) = &self.mode else { return Vec::new() };
        let drained = member.drain();
        let position = self.position;
        let events: Vec<Arc<SharedEvent>> = drained.events.into_iter().filter(|e| e.sequence > position).collect();
        if let Some(last) = events.last() {
            self.position = last.sequence;
        }
        match drained.through {
            Some(through) => self.position = self.position.max(through),
            None => {
                // Detached: read on our own from the last row we were given, at once.
                self.mode = Mode::Reading;
                self.more = true;
            }
        }
        events
    }

    /// Resolves when [`Follower::take`] or [`Follower::read`] may have something new.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits (for the tail's notification or the poll timer).
    pub async fn ready(&self) {
        match &self.mode {
            Mode::Live(member) => member.ready().await,
            Mode::Reading | Mode::Bridging(_) if !self.more => sleep_until(self.next_read).await,
            _ => {}
        }
    }

    /// The mode after one of its own reads.
    fn settle(&mut self) {
        self.mode = match std::mem::replace(&mut self.mode, Mode::Reading) {
            Mode::Bridging(member) | Mode::Live(member) if member.is_detached() => Mode::Reading,
            Mode::Bridging(member) if self.position >= member.joined_at() => Mode::Live(member),
            other => other,
        };
        if let (Mode::Reading, false, Some((tail, capacity))) = (&self.mode, self.more, &self.tail) {
            let filter = Filter { tenant_id: self.request.tenant_id.clone(), patterns: self.request.patterns.clone() };
            let member = tail.join(filter, self.bound.min(self.position), *capacity);
            self.mode = if self.position >= member.joined_at() {
                Mode::Live(member)
            } else {
                // The tail is ahead: one more read of our own reaches it (its snapshot is newer).
                self.next_read = Instant::now();
                Mode::Bridging(member)
            };
        }
    }
}

impl std::fmt::Debug for Follower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mode = match &self.mode {
            Mode::Reading => format!("reading (more: {})", self.more),
            Mode::Bridging(member) => format!("bridging to {}", member.joined_at()),
            Mode::Live(_) => "live".to_owned(),
        };
        f.debug_struct("Follower").field("position", &self.position).field("mode", &mode).finish()
    }
}
