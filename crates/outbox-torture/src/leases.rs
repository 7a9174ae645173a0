//! The lease watch: every quarter second during the run, the leases and cursors as the
//! database holds them, straight (not through the proxy), checked as they change.
//!
//! - A lease's epoch never falls, and it changes hands only with a new epoch: a holder
//!   that lost its lease can never pass the fence of its successor. (A release keeps the
//!   epoch and leaves the holder empty; the next `acquire` raises it.)
//! - A cursor never moves back: no holder saved a position older than one already saved.
//!
//! The watch cannot see a save refused by the fence (that happens inside PostgreSQL); the
//! checker sees its effect, a sink's deliveries against the table.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use outbox_core::Position;

/// What the watch saw.
#[derive(Debug, Default)]
pub(crate) struct Watched {
    pub(crate) observations: u64,
    /// Changes of holder between two observations.
    pub(crate) hand_overs: u64,
    /// Cursor moves between two observations.
    pub(crate) moves: u64,
    pub(crate) violations: Vec<String>,
    leases: HashMap<String, (String, i64)>,
    cursors: HashMap<String, Position>,
}

impl Watched {
    /// Takes one observation of every lease (name, holder, epoch) and cursor (name, position).
    pub(crate) fn observe(&mut self, leases: &[(String, String, i64)], cursors: &[(String, Position)]) {
        self.observations += 1;
        for (name, holder, epoch) in leases {
            if let Some((was_holder, was_epoch)) = self.leases.get(name) {
                if epoch < was_epoch {
                    self.violations.push(format!("lease {name}: epoch {was_epoch} fell to {epoch}"));
                }
                if holder != was_holder {
                    self.hand_overs += 1;
                    if epoch == was_epoch && !holder.is_empty() {
                        self.violations.push(format!(
                            "lease {name}: passed from {was_holder:?} to {holder:?} with the same epoch {epoch}"
                        ));
                    }
                }
            }
            self.leases.insert(name.clone(), (holder.clone(), *epoch));
        }
        for (name, position) in cursors {
            if let Some(was) = self.cursors.get(name) {
                if position < was {
                    self.violations.push(format!("cursor {name}: moved back from {was} to {position}"));
                }
                if position != was {
                    self.moves += 1;
                }
            }
            self.cursors.insert(name.clone(), *position);
        }
    }

    /// `leases: n observations, n hand-overs, n cursor moves; epochs only rose, cursors only moved forward`.
    pub(crate) fn line(&self) -> String {
        let verdict = if self.violations.is_empty() {
            "epochs only rose, cursors only moved forward".to_owned()
        } else {
            format!("{} VIOLATIONS", self.violations.len())
        };
        format!(
            "leases: {} observations, {} hand-overs, {} cursor moves; {verdict}",
            self.observations, self.hand_overs, self.moves
        )
    }
}

/// Watches until `stop`; a failed read (PostgreSQL restarting) is skipped.
pub(crate) async fn watch(admin: sqlx::PgPool, stop: Arc<AtomicBool>) -> Watched {
    let mut watched = Watched::default();
    while !stop.load(Ordering::Relaxed) {
        if let Ok((leases, cursors)) = read(&admin).await {
            watched.observe(&leases, &cursors);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    watched
}

type Observation = (Vec<(String, String, i64)>, Vec<(String, Position)>);

async fn read(admin: &sqlx::PgPool) -> anyhow::Result<Observation> {
    let leases = sqlx::query_as("SELECT name, holder, epoch FROM outbox_leases").fetch_all(admin).await?;
    let rows: Vec<(String, String, String, i64)> =
        sqlx::query_as("SELECT stream, name, txid::text, seq FROM outbox_cursors").fetch_all(admin).await?;
    let cursors = rows
        .into_iter()
        .map(|(stream, name, txid, seq)| {
            Ok((format!("{stream}/{name}"), Position { txid: txid.parse()?, seq: u64::try_from(seq)? }))
        })
        .collect::<anyhow::Result<_>>()?;
    Ok((leases, cursors))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: &str, epoch: i64) -> Vec<(String, String, i64)> {
        vec![("sink:a".to_owned(), holder.to_owned(), epoch)]
    }

    fn cursor(txid: u64, seq: u64) -> Vec<(String, Position)> {
        vec![("outbox/sink:a".to_owned(), Position { txid, seq })]
    }

    #[test]
    fn a_hand_over_with_a_new_epoch_and_a_release_pass() {
        let mut watched = Watched::default();
        watched.observe(&lease("a", 1), &cursor(10, 1));
        watched.observe(&lease("", 1), &cursor(10, 5));
        watched.observe(&lease("b", 2), &cursor(10, 5));
        watched.observe(&lease("a", 3), &cursor(12, 1));
        assert!(watched.violations.is_empty(), "{:?}", watched.violations);
        assert_eq!((watched.observations, watched.hand_overs, watched.moves), (4, 3, 2));
    }

    #[test]
    fn a_falling_epoch_a_hand_over_without_one_and_a_cursor_moving_back_are_caught() {
        let mut watched = Watched::default();
        watched.observe(&lease("a", 2), &cursor(10, 5));
        watched.observe(&lease("b", 2), &cursor(10, 4));
        watched.observe(&lease("b", 1), &cursor(10, 4));
        let text = watched.violations.join("\n");
        assert!(text.contains("passed from \"a\" to \"b\" with the same epoch 2"), "{text}");
        assert!(text.contains("cursor outbox/sink:a: moved back from 10.5 to 10.4"), "{text}");
        assert!(text.contains("epoch 2 fell to 1"), "{text}");
        assert!(watched.line().contains("3 VIOLATIONS"));
    }
}
