//! The shared tail: one reader per process for every live stream and subscriber (SPEC §5.6).
//!
//! A [`Tail`] reads the outbox once for all its members: every `poll` it runs one xmin read
//! ([`crate::read_page`]) across all tenants after its position, in `(txid, seq)` order, and
//! hands each row to the members that want it through an index by tenant, then type
//! ([`Filter`]). Members are what [`Tail::join`] returns: a bounded inbox that the tail
//! fills and the member drains. Idle members cost no queries; a tail without members runs
//! none at all.
//!
//! # Positions: "complete through"
//!
//! The tail's position is not merely the last row it read but how far it has handed out
//! *everything*: after a read that reached the visible end, `(xmin, 0)` of that read's
//! snapshot (see [`crate::internal::read::complete_through`]). No row can ever appear at or before
//! it. A member that joins is given every row after the tail's position at that moment
//! ([`Member::joined_at`]); the [`Follower`] that owns it reads on its own until its own
//! complete-through position reaches that point, then skips what it already has. So a
//! join leaves no gap and repeats nothing, whichever side is ahead.
//!
//! # Slow members
//!
//! An inbox holds at most its capacity. When a row would overflow it, the tail *detaches*
//! the member instead of waiting for it or dropping the row: the member keeps what it was
//! given, stops receiving, and its follower reads on its own from there until it catches up
//! and joins again. No member ever holds the tail or another member back.
//!
//! # Failures
//!
//! When the tail's read fails, it detaches every member (each then reads on its own, and
//! reports the failure if that fails too) and forgets its position; the next member to
//! join positions it again.

mod follow;
mod index;

use std::collections::VecDeque;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, RwLock, Weak};
use std::time::Duration;

use outbox_core::{Event, Position};
use sqlx::PgPool;
use tokio::sync::Notify;

use crate::read::{MAX_LIMIT, ReadRequest, read_page};

pub use follow::Follower;
pub use index::Filter;

use index::Index;

/// How a tail reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TailOptions {
    /// After a read that reached the visible end, the next starts this long after its start
    /// (SPEC's `poll_ms`), however long the read and its hand-out took.
    pub poll: Duration,
    /// The most rows one read takes (1 to [`MAX_LIMIT`]); a full read is followed by the next at once.
    pub batch: usize,
}

impl Default for TailOptions {
    fn default() -> TailOptions {
        TailOptions { poll: Duration::from_millis(100), batch: MAX_LIMIT }
    }
}

/// One row as the tail hands it out: shared by every member that wants it.
///
/// It also holds one encoding slot, filled at most once for all members
/// ([`SharedEvent::encoded`]), so that ten thousand streams serialize a row once, not ten
/// thousand times. A process should have one kind of consumer use it (the HTTP layer keeps
/// its stream frame there).
#[derive(Debug)]
pub struct SharedEvent {
    event: Event,
    encoded: OnceLock<Option<Box<[u8]>>>,
}

impl SharedEvent {
    /// Wraps an event read on one's own, so that it flows like the tail's.
    pub fn new(event: Event) -> Arc<SharedEvent> {
        Arc::new(SharedEvent { event, encoded: OnceLock::new() })
    }

    /// The event's encoding: `encode`'s answer the first time, the same bytes after.
    /// `None` when `encode` failed.
    pub fn encoded(&self, encode: impl FnOnce(&Event) -> Option<Vec<u8>>) -> Option<&[u8]> {
        self.encoded.get_or_init(|| encode(&self.event).map(Vec::into_boxed_slice)).as_deref()
    }

    /// The event.
    pub fn event(&self) -> &Event {
        &self.event
    }
}

impl Deref for SharedEvent {
    type Target = Event;

    fn deref(&self) -> &Event {
        &self.event
    }
}

/// A process's shared tail reader. Clones share it; the reader task starts with the first
/// member and stops when the last handle (tail or member) is dropped.
#[derive(Clone)]
pub struct Tail {
    shared: Arc<Shared>,
}

struct Shared {
    pool: PgPool,
    options: TailOptions,
    state: Mutex<State>,
    /// The position members read without the state lock; written under it, after the rows
    /// up to it were pushed, so a member that reads it and then drains has everything before it.
    published: RwLock<Option<Position>>,
    wake: Arc<Notify>,
    started: AtomicBool,
    next_id: AtomicU64,
    reads: AtomicU64,
    /// The time those reads took, in microseconds.
    read_micros: AtomicU64,
    detached: AtomicU64,
    failed_reads: AtomicU64,
}

struct State {
    index: Index,
    /// How far every member has been given everything; `None` until a member positions it.
    position: Option<Position>,
    /// Bumped whenever `position` is set anew, so a read begun before is not handed out.
    generation: u64,
}

impl Tail {
    /// A tail over `pool`. Nothing runs until the first member joins.
    pub fn new(pool: PgPool, options: TailOptions) -> Tail {
        let state = State { index: Index::default(), position: None, generation: 0 };
        Tail {
            shared: Arc::new(Shared {
                pool,
                options: TailOptions { batch: options.batch.clamp(1, MAX_LIMIT), ..options },
                state: Mutex::new(state),
                published: RwLock::new(None),
                wake: Arc::new(Notify::new()),
                started: AtomicBool::new(false),
                next_id: AtomicU64::new(0),
                reads: AtomicU64::new(0),
                read_micros: AtomicU64::new(0),
                detached: AtomicU64::new(0),
                failed_reads: AtomicU64::new(0),
            }),
        }
    }

    /// How the tail reads.
    pub fn options(&self) -> TailOptions {
        self.shared.options
    }

    /// Joins the tail with `filter`, holding at most `capacity` undrained rows.
    ///
    /// A tail without a position starts at `start`, which must be complete for *every*
    /// tenant, not only the caller's: `(snapshot_xmin, 0)` of the caller's last read
    /// ([`ReadPage::snapshot_xmin`](crate::ReadPage::snapshot_xmin)), or [`crate::internal::read::head`].
    /// The member receives every matching row after [`Member::joined_at`]; rows up to it
    /// the caller reads on its own (as [`Follower`] does).
    ///
    /// Starts the reader task on first use, so it must be called within a tokio runtime.
    pub fn join(&self, filter: Filter, start: Position, capacity: usize) -> Member {
        self.start_reader();
        let shared = &self.shared;
        let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
        let inbox = Arc::new(Inbox::new(capacity.max(1)));
        let mut state = shared.lock_state();
        let joined_at = match state.position {
            Some(position) => position,
            None => {
                state.position = Some(start);
                state.generation += 1;
                shared.publish(Some(start));
                shared.wake.notify_one();
                start
            }
        };
        state.index.insert(id, filter, inbox.clone());
        drop(state);
        Member { shared: shared.clone(), id, inbox, joined_at }
    }

    /// How many members the tail is feeding.
    pub fn members(&self) -> usize {
        self.shared.lock_state().index.len()
    }

    /// How many reads the tail has run (for tests and benchmarks).
    pub fn reads(&self) -> u64 {
        self.shared.reads.load(Ordering::Relaxed)
    }

    /// How long the tail's reads took, all together (the poll duration of `GET /metrics`).
    pub fn read_time(&self) -> Duration {
        Duration::from_micros(self.shared.read_micros.load(Ordering::Relaxed))
    }

    /// How many members the tail let go of because their inbox overflowed (for tests and
    /// benchmarks).
    pub fn detached(&self) -> u64 {
        self.shared.detached.load(Ordering::Relaxed)
    }

    /// How many of the tail's reads failed; each let every member go to reads of its own
    /// (for tests and benchmarks).
    pub fn failed_reads(&self) -> u64 {
        self.shared.failed_reads.load(Ordering::Relaxed)
    }

    /// How far the tail has handed out everything, or `None` while it has no position.
    pub fn position(&self) -> Option<Position> {
        self.shared.published()
    }

    fn start_reader(&self) {
        if self.shared.started.swap(true, Ordering::AcqRel) {
            return;
        }
        let reader = Reader { shared: Arc::downgrade(&self.shared), wake: self.shared.wake.clone() };
        tokio::spawn(reader.run());
    }
}

impl std::fmt::Debug for Tail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tail").field("position", &self.position()).field("members", &self.members()).finish()
    }
}

impl Shared {
    fn lock_state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn published(&self) -> Option<Position> {
        *self.published.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn publish(&self, position: Option<Position>) {
        *self.published.write().unwrap_or_else(PoisonError::into_inner) = position;
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // The reader holds only a weak reference: wake it so that it sees it is gone.
        self.wake.notify_one();
    }
}

/// A member's bounded inbox, filled by the tail and drained by the member.
pub(crate) struct Inbox {
    queue: Mutex<Queue>,
    ready: Notify,
}

struct Queue {
    events: VecDeque<Arc<SharedEvent>>,
    capacity: usize,
    detached: bool,
}

impl Inbox {
    pub(crate) fn new(capacity: usize) -> Inbox {
        Inbox { queue: Mutex::new(Queue { events: VecDeque::new(), capacity, detached: false }), ready: Notify::new() }
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds a row; `false` when the inbox is full (it is detached then) or was detached.
    fn push(&self, event: &Arc<SharedEvent>) -> bool {
        let mut queue = self.lock();
        if queue.detached {
            return false;
        }
        let pushed = queue.events.len() < queue.capacity;
        if pushed {
            queue.events.push_back(event.clone());
        } else {
            queue.detached = true;
        }
        drop(queue);
        self.ready.notify_one();
        pushed
    }

    fn detach(&self) {
        self.lock().detached = true;
        self.ready.notify_one();
    }

    /// Everything received so far, and whether the tail has let go of this member.
    fn drain(&self) -> (VecDeque<Arc<SharedEvent>>, bool) {
        let mut queue = self.lock();
        let events = std::mem::take(&mut queue.events);
        (events, queue.detached)
    }

    fn is_detached(&self) -> bool {
        self.lock().detached
    }
}

/// A place on the tail. Dropping it leaves the tail.
pub struct Member {
    shared: Arc<Shared>,
    id: u64,
    inbox: Arc<Inbox>,
    joined_at: Position,
}

/// What a member drained: the rows given to it, in order, and — unless the tail let go of it
/// — how far it now has everything.
#[derive(Debug)]
pub struct Drained {
    /// The rows the tail handed this member since the last drain, in `(txid, seq)` order.
    pub events: VecDeque<Arc<SharedEvent>>,
    /// How far the member has everything once it has these rows; `None` when it was
    /// detached (too slow, or the tail's read failed): it must read on its own from its
    /// last row.
    pub through: Option<Position>,
}

impl Member {
    /// The tail's position when this member joined: it receives every matching row after it.
    pub fn joined_at(&self) -> Position {
        self.joined_at
    }

    /// Takes what the tail has handed this member. Never waits.
    pub fn drain(&self) -> Drained {
        // Read the position first: every row up to it was pushed before it was published.
        let through = self.shared.published();
        let (events, detached) = self.inbox.drain();
        Drained { events, through: if detached { None } else { through.map(|p| p.max(self.joined_at)) } }
    }

    /// Whether the tail has let go of this member.
    pub fn is_detached(&self) -> bool {
        self.inbox.is_detached()
    }

    /// Resolves when the tail has handed this member something (or let go of it) since the
    /// last time this resolved.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a notification not consumed stays for the next call, and [`Member::drain`]
    /// takes everything regardless.
    pub async fn ready(&self) {
        self.inbox.ready.notified().await;
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.shared.lock_state().index.remove(self.id);
    }
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Member").field("id", &self.id).field("joined_at", &self.joined_at).finish()
    }
}

/// The reader task. It holds the tail weakly, so it ends once every handle is gone.
struct Reader {
    shared: Weak<Shared>,
    wake: Arc<Notify>,
}

/// What the reader does next.
enum Step {
    /// Read again at once: the last read was full.
    Continue,
    /// Wait until then before the next read: `poll` after the start of the last one, so that
    /// the tail reads at a steady pace however long a read and its hand-out took.
    SleepUntil(tokio::time::Instant),
    /// No position (no members): wait until a member joins.
    Park,
    /// Every handle is gone.
    Stop,
}

impl Reader {
    async fn run(self) {
        loop {
            match self.step().await {
                Step::Continue => {}
                Step::SleepUntil(at) => tokio::time::sleep_until(at).await,
                Step::Park => self.wake.notified().await,
                Step::Stop => return,
            }
        }
    }

    async fn step(&self) -> Step {
        let Some(shared) = self.shared.upgrade() else { return Step::Stop };
        let (after, generation) = {
            let mut state = shared.lock_state();
            if state.index.is_empty() && state.position.is_some() {
                // Nobody to feed: forget the position rather than read for no one.
                state.position = None;
                state.generation += 1;
                shared.publish(None);
            }
            match state.position {
                Some(position) => (position, state.generation),
                None => return Step::Park,
            }
        };
        let request = ReadRequest::all().after(after).limit(shared.options.batch);
        let started = tokio::time::Instant::now();
        let next_read = started + shared.options.poll;
        let result = read_page(&shared.pool, &request).await;
        let took = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        shared.read_micros.fetch_add(took, Ordering::Relaxed);
        shared.reads.fetch_add(1, Ordering::Relaxed);
        let mut state = shared.lock_state();
        if state.generation != generation {
            return Step::Continue;
        }
        match result {
            Ok(page) => {
                let events: Vec<Arc<SharedEvent>> = page.events.into_iter().map(SharedEvent::new).collect();
                let detached = hand_out(&mut state.index, &events);
                shared.detached.fetch_add(detached, Ordering::Relaxed);
                state.position = Some(page.complete_through.max(after));
                shared.publish(state.position);
                if page.more { Step::Continue } else { Step::SleepUntil(next_read) }
            }
            Err(error) => {
                tracing::warn!(%error, "the shared tail's read failed; its members read on their own");
                shared.failed_reads.fetch_add(1, Ordering::Relaxed);
                state.index.drain().iter().for_each(|inbox| inbox.detach());
                state.position = None;
                state.generation += 1;
                shared.publish(None);
                Step::SleepUntil(next_read)
            }
        }
    }
}

/// Pushes each row to the members that want it; detaches (and removes) the members whose
/// inbox overflowed, and returns how many.
fn hand_out(index: &mut Index, events: &[Arc<SharedEvent>]) -> u64 {
    let mut overflowed = Vec::new();
    for event in events {
        index.for_each_match(event, |id, inbox| {
            if !inbox.push(event) {
                overflowed.push(id);
            }
        });
    }
    overflowed.sort_unstable();
    overflowed.dedup();
    overflowed.iter().for_each(|id| index.remove(*id));
    overflowed.len() as u64
}
