//! Replaying a dead letter: deliver it again, and mark it replayed on success (SPEC §7.4).

use outbox_pg::internal::dead_letter;
use outbox_pg::sqlx::PgPool;

use crate::{Error, Result, Sink};

/// Delivers dead letter `id` of `sink` again, alone, and marks it replayed when the sink takes it.
///
/// A replay goes around the dispatcher: it needs no lease and moves no cursor, so the event
/// arrives out of order, after the events that followed it. A letter already replayed is
/// delivered again (its `replayed_at` keeps the first replay's time). A refusal leaves the
/// letter as it was and comes back as [`Error::Delivery`].
pub async fn replay(pool: &PgPool, sink: &dyn Sink, id: i64) -> Result<()> {
    replay_kept_as(pool, sink, sink.id(), id).await
}

/// [`replay`] of a dead letter kept under `records` rather than the sink's id (a webhook
/// subscription's, `webhook:<id>`).
pub(crate) async fn replay_kept_as(pool: &PgPool, sink: &dyn Sink, records: &str, id: i64) -> Result<()> {
    let letter = dead_letter::get(pool, records, id)
        .await?
        .ok_or_else(|| Error::NoDeadLetter { sink: records.to_owned(), id })?;
    sink.deliver(std::slice::from_ref(&letter.event))
        .await
        .map_err(|error| Error::Delivery { sink: records.to_owned(), error })?;
    dead_letter::mark_replayed(pool, records, id).await?;
    Ok(())
}

/// Deletes dead letter `id` of `sink`.
pub async fn discard(pool: &PgPool, sink_id: &str, id: i64) -> Result<()> {
    if !dead_letter::discard(pool, sink_id, id).await? {
        return Err(Error::NoDeadLetter { sink: sink_id.to_owned(), id });
    }
    Ok(())
}
