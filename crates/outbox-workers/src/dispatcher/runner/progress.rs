//! Saving progress: fenced cursor saves, in order, one of them beside the next delivery.
//!
//! Every save is fenced by the lease (holder and epoch), so a runner that lost its lease
//! writes nothing. Progress may be lost in a crash (the events are then delivered again, at
//! least once), so a save's commit does not wait for the WAL flush
//! ([`Durability::Relaxed`]); its order and the fence are unchanged.
//!
//! Every save also carries the cursor's ordinal: how many of the sink's events lie at or
//! before the position (delivered or dead-lettered), so that the loop numbers the events after
//! it the same way on every delivery ([`crate::Sink::deliver_numbered`]).

use outbox_core::Position;
use outbox_pg::internal::cursor::{self, Durability, Mark, Saved};
use outbox_pg::internal::dead_letter::NewDeadLetter;
use outbox_pg::internal::lease::Lease;
use outbox_pg::sqlx::PgPool;
use tokio::task::JoinHandle;

use super::{Failure, Interruption, Runner, Step};

/// How far the sink got, as the loop knows it while it holds the lease.
pub(super) struct Progress {
    /// The durable cursor, once loaded (`None` also when it was never saved).
    cursor: Option<Position>,
    loaded: bool,
    /// Where the next read starts: the cursor, or past it over rows the filter skipped.
    after: Option<Position>,
    /// How many of the sink's events lie at or before `after`.
    ordinal: i64,
    /// A cursor save running beside the next delivery, and the position and ordinal it saves.
    saving: Option<(Position, i64, SaveTask)>,
}

/// A cursor save running in a task of its own.
type SaveTask = JoinHandle<Result<Saved, Failure>>;

impl Progress {
    /// Nothing known yet: the cursor is loaded by the first step.
    pub(super) fn new() -> Progress {
        Progress { cursor: None, loaded: false, after: None, ordinal: 0, saving: None }
    }

    /// Where the next read starts.
    pub(super) fn after(&self) -> Option<Position> {
        self.after
    }

    /// How many of the sink's events lie at or before [`Progress::after`]: the first event of
    /// a page read after it is number `ordinal() + 1`.
    pub(super) fn ordinal(&self) -> i64 {
        self.ordinal
    }

    /// The next read starts after `position` or further on, never back; `position` holds no
    /// event of the sink's after [`Progress::after`] (the filter skipped its rows).
    pub(super) fn pass(&mut self, position: Position) {
        self.reach(position, self.ordinal);
    }

    /// The next read starts after `position` (whose ordinal is `ordinal`) or further on, never back.
    fn reach(&mut self, position: Position, ordinal: i64) {
        if self.after < Some(position) {
            self.after = Some(position);
            self.ordinal = ordinal;
        }
    }
}

impl Runner {
    /// Loads the durable cursor, once per lease.
    pub(super) async fn load_cursor(&self, progress: &mut Progress) -> Result<(), Failure> {
        if progress.loaded {
            return Ok(());
        }
        cursor::prepare_lanes(&self.pool, &self.cursor_stream, &self.consumer_cursor, self.lane.of)
            .await
            .map_err(Failure::database)?;
        let mark =
            cursor::load_mark(&self.pool, &self.cursor_stream, &self.cursor_name).await.map_err(Failure::database)?;
        let position = mark.map(|mark| mark.position);
        progress.cursor = position;
        progress.after = position;
        progress.ordinal = mark.map_or(0, |mark: Mark| mark.ordinal);
        progress.loaded = true;
        self.update(|state| state.position = position);
        Ok(())
    }

    /// Moves the cursor to `to`, whose ordinal is `ordinal` (and writes `letter`), in one fenced
    /// transaction, after any save still running. Nothing is written when the cursor is
    /// already there and there is no letter.
    pub(super) async fn record(
        &self,
        lease: &Lease,
        progress: &mut Progress,
        (to, ordinal): (Position, i64),
        letter: Option<NewDeadLetter<'_>>,
    ) -> Result<(), Step> {
        self.saved(progress).await?;
        let already = progress.cursor.map_or(to == Position::START, |cursor| cursor >= to);
        if already && letter.is_none() {
            return Ok(());
        }
        let saved =
            save(&self.pool, lease, &self.cursor_stream, &self.cursor_name, (to, ordinal), letter.as_ref()).await;
        self.settle_save(progress, (to, ordinal), saved, letter.is_some())
    }

    /// Like [`Runner::record`] without a letter, but the save runs beside what the loop
    /// does next (the next page's delivery); the save after it, or the loop's next wait,
    /// collects its outcome first. Saves stay in order and fenced, so a lost lease still
    /// writes nothing; what the next delivery sends meanwhile is delivered at least once,
    /// as after any crash. A save whose fence finds the lease lost raises the loop's `lost`
    /// flag at once, which drops that delivery.
    pub(super) async fn record_behind(
        &self,
        lease: &Lease,
        progress: &mut Progress,
        (to, ordinal): (Position, i64),
    ) -> Result<(), Step> {
        self.saved(progress).await?;
        if progress.cursor.is_some_and(|cursor| cursor >= to) {
            return Ok(());
        }
        let (pool, lease, stream, name) =
            (self.pool.clone(), lease.clone(), self.cursor_stream.clone(), self.cursor_name.clone());
        let raise_lost = self.raise_lost.clone();
        let saving = tokio::spawn(async move {
            let saved = save(&pool, &lease, &stream, &name, (to, ordinal), None).await;
            // The delivery running beside is dropped at once: nothing more goes out under a
            // lease the fence found lost.
            if let Ok(Saved::LeaseLost) = saved {
                raise_lost.send_replace(true);
            }
            saved
        });
        progress.reach(to, ordinal);
        progress.saving = Some((to, ordinal, saving));
        Ok(())
    }

    /// Waits for the save running beside the loop, if any, and takes in its outcome.
    pub(super) async fn saved(&self, progress: &mut Progress) -> Result<(), Step> {
        let Some((to, ordinal, saving)) = progress.saving.take() else { return Ok(()) };
        let saved =
            saving.await.unwrap_or_else(|error| Err(Failure::new(format!("saving the cursor failed: {error}"))));
        self.settle_save(progress, (to, ordinal), saved, false)
    }

    fn settle_save(
        &self,
        progress: &mut Progress,
        (to, ordinal): (Position, i64),
        saved: Result<Saved, Failure>,
        lettered: bool,
    ) -> Result<(), Step> {
        let now_at = match saved.map_err(Step::Failed)? {
            Saved::LeaseLost => {
                self.update(|state| state.fenced_out += 1);
                return Err(Step::Interrupted(Interruption::LeaseLost));
            }
            Saved::Replaced => {
                // The lanes were laid out for another count: this loop ends, and its owner
                // starts the layout the configuration now asks for.
                tracing::warn!(sink = self.sink.id(), cursor = %self.cursor_name, "the lane's cursor was replaced");
                return Err(Step::Interrupted(Interruption::Reconfigured));
            }
            Saved::Moved => {
                progress.reach(to, ordinal);
                to
            }
            Saved::AlreadyPast(stored) => {
                tracing::warn!(sink = self.sink.id(), %stored, %to, "the stored cursor was already past this batch");
                // Its ordinal is the stored one: the next step loads both again.
                progress.loaded = false;
                progress.pass(stored);
                stored.max(to)
            }
        };
        progress.cursor = Some(now_at);
        self.update(|state| {
            state.position = Some(now_at);
            state.dead_lettered += u64::from(lettered);
        });
        Ok(())
    }
}

/// Moves the cursor `name` to `to` with its ordinal (and writes `letter`) in one fenced
/// statement or transaction, with a relaxed commit (see the module documentation).
async fn save(
    pool: &PgPool,
    lease: &Lease,
    stream: &str,
    name: &str,
    (to, ordinal): (Position, i64),
    letter: Option<&NewDeadLetter<'_>>,
) -> Result<Saved, Failure> {
    let relaxed = Durability::Relaxed;
    let saved = match letter {
        None => cursor::save_numbered(pool, lease, stream, name, to, Some(ordinal), relaxed).await,
        Some(letter) => {
            cursor::save_with_letter_numbered(pool, lease, stream, name, (to, Some(ordinal)), letter, relaxed).await
        }
    };
    saved.map_err(Failure::database)
}
