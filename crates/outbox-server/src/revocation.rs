//! Revocation across server processes (SPEC §5.5).
//!
//! `POST /admin/streams/close` closes matching streams in the process that received it and
//! records the revocation in `outbox_revocations` (migration `server/0001_revocations`).
//! Every process runs a [`Poller`] that reads new rows every second, closes the matching
//! streams it serves, and keeps [`Revocations`], the set of revoked sessions and
//! identities that the authorizer refuses.
//!
//! # Which rows are new
//!
//! `id` is drawn at insert, not at commit, so a row with a lower id can commit after a
//! higher one was seen. Each poll therefore reads every row above the highest id seen
//! *and* every row of the last minute, and acts on the ids it has not seen yet. A
//! revocation transaction would have to stay open for a minute to be missed; the
//! handler's is a single autocommitted insert.
//!
//! # Staleness
//!
//! When the table cannot be read for [`STALE_AFTER`], [`Revocations::check`] answers
//! `Unavailable`: the server cannot tell whether a token was revoked, and an open stream
//! counts that toward its `iam_outage_ms`.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use outbox_pg::sqlx::PgPool;

use outbox_http::{AuthError, Grant, Selector, WatchRegistry};

/// How often every process reads the table.
pub const POLL_EVERY: Duration = Duration::from_secs(1);

/// How long the set may go without a successful read before checks answer `Unavailable`.
pub const STALE_AFTER: Duration = Duration::from_secs(10);

/// The server's migrations: owner `server`, after `core`'s.
pub fn migrations() -> Vec<outbox_pg::Migration> {
    vec![outbox_pg::Migration::new(
        "server/0001_revocations",
        include_str!("../../../migrations/server/0001_revocations.sql"),
    )]
}

/// The migrator every command of the server uses: `core`, then `server`.
pub fn migrator() -> outbox_pg::Migrator {
    outbox_pg::Migrator::new().register(migrations())
}

/// A selector as the table stores it: `(kind, value)`.
pub fn kind_and_value(selector: &Selector) -> (&'static str, &str) {
    match selector {
        Selector::Session(v) => ("session", v),
        Selector::Identity(v) => ("identity", v),
        Selector::Agent(v) => ("agent", v),
        Selector::Delegation(v) => ("delegation", v),
        Selector::TenantAnyAgent(v) => ("tenant_any_agent", v),
    }
}

fn selector_of(kind: &str, value: String) -> Option<Selector> {
    Some(match kind {
        "session" => Selector::Session(value),
        "identity" => Selector::Identity(value),
        "agent" => Selector::Agent(value),
        "delegation" => Selector::Delegation(value),
        "tenant_any_agent" => Selector::TenantAnyAgent(value),
        _ => return None,
    })
}

/// Records a revocation for every process to act on.
pub async fn record(pool: &PgPool, selector: &Selector, reason: &str) -> Result<(), outbox_pg::Error> {
    let (kind, value) = kind_and_value(selector);
    outbox_pg::internal::revocation::record(pool, kind, value, reason).await?;
    Ok(())
}

/// The revoked sessions and identities, shared by the authorizer and the poller.
#[derive(Clone, Default)]
pub struct Revocations {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    revoked: RwLock<HashSet<(&'static str, String)>>,
    refreshed: Mutex<Option<Instant>>,
}

impl Revocations {
    /// An empty set that has never been read (every check is `Unavailable` until a refresh).
    pub fn new() -> Revocations {
        Revocations::default()
    }

    /// Whether the grant's session or identity was revoked.
    pub fn is_revoked(&self, grant: &Grant) -> bool {
        let revoked = self.inner.revoked.read().unwrap_or_else(|e| e.into_inner());
        let hit = |kind: &'static str, value: &Option<String>| {
            value.as_ref().is_some_and(|v| revoked.contains(&(kind, v.clone())))
        };
        hit("session", &grant.session_id) || hit("identity", &grant.identity_id)
    }

    /// `Ok` when the grant stands; `Unauthenticated("token revoked")` when its session or
    /// identity was revoked; `Unavailable` when the set has not been read for [`STALE_AFTER`].
    pub fn check(&self, grant: &Grant) -> Result<(), AuthError> {
        if self.is_revoked(grant) {
            return Err(AuthError::Unauthenticated("token revoked".into()));
        }
        if !self.is_fresh() {
            return Err(AuthError::Unavailable("the revocation list cannot be read".into()));
        }
        Ok(())
    }

    /// Whether the last successful read is recent enough to trust.
    pub fn is_fresh(&self) -> bool {
        let refreshed = *self.inner.refreshed.lock().unwrap_or_else(|e| e.into_inner());
        refreshed.is_some_and(|at| at.elapsed() < STALE_AFTER)
    }

    pub(crate) fn insert(&self, selector: &Selector) {
        let entry = match selector {
            Selector::Session(v) => ("session", v.clone()),
            Selector::Identity(v) => ("identity", v.clone()),
            _ => return,
        };
        self.inner.revoked.write().unwrap_or_else(|e| e.into_inner()).insert(entry);
    }

    fn mark_refreshed(&self) {
        *self.inner.refreshed.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
    }

    /// Marks the set fresh without reading anything (tests, and hosts with no database).
    pub fn assume_fresh(&self) {
        self.mark_refreshed();
    }
}

/// Reads new revocations and applies them to this process.
pub struct Poller {
    pool: PgPool,
    revocations: Revocations,
    registry: WatchRegistry,
    max_id: i64,
    /// Ids returned by the last poll (the lookback window): not acted on twice.
    seen: BTreeSet<i64>,
}

impl Poller {
    /// Loads every recorded revocation into `revocations` without closing anything (the
    /// streams they were meant for are not open in a process that just started).
    pub async fn start(
        pool: PgPool,
        revocations: Revocations,
        registry: WatchRegistry,
    ) -> Result<Poller, outbox_pg::Error> {
        let mut poller = Poller { pool, revocations, registry, max_id: 0, seen: BTreeSet::new() };
        poller.poll(false).await?;
        Ok(poller)
    }

    /// Polls every [`POLL_EVERY`] until the task is dropped; a failed read is logged and retried.
    pub async fn run(mut self) {
        let mut tick = tokio::time::interval(POLL_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if let Err(error) = self.poll(true).await {
                tracing::warn!(%error, "reading outbox_revocations failed");
            }
        }
    }

    /// One read: applies the rows not seen yet; closes their streams when `close`.
    pub async fn poll(&mut self, close: bool) -> Result<usize, outbox_pg::Error> {
        let rows = outbox_pg::internal::revocation::recent(&self.pool, self.max_id).await?;
        let mut closed = 0;
        for row in rows.iter().filter(|row| !self.seen.contains(&row.id)) {
            let Some(selector) = selector_of(&row.kind, row.value.clone()) else { continue };
            self.revocations.insert(&selector);
            if close {
                closed += self.registry.close_where(&selector, &row.reason);
            }
        }
        self.seen = rows.iter().map(|row| row.id).collect();
        self.max_id = self.max_id.max(self.seen.last().copied().unwrap_or(0));
        self.revocations.mark_refreshed();
        Ok(closed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(session: Option<&str>, identity: Option<&str>) -> Grant {
        Grant {
            tenant_id: "acme".into(),
            session_id: session.map(Into::into),
            identity_id: identity.map(Into::into),
            ..Grant::default()
        }
    }

    #[test]
    fn a_set_never_read_is_unavailable() {
        let revocations = Revocations::new();
        assert!(matches!(revocations.check(&grant(None, None)), Err(AuthError::Unavailable(_))));
        revocations.assume_fresh();
        assert!(revocations.check(&grant(None, None)).is_ok());
    }

    #[test]
    fn sessions_and_identities_are_refused_other_kinds_are_not_remembered() {
        let revocations = Revocations::new();
        revocations.assume_fresh();
        revocations.insert(&Selector::Session("s1".into()));
        revocations.insert(&Selector::Identity("u1".into()));
        revocations.insert(&Selector::Agent("a1".into()));
        assert!(
            matches!(revocations.check(&grant(Some("s1"), None)), Err(AuthError::Unauthenticated(m)) if m == "token revoked")
        );
        assert!(revocations.is_revoked(&grant(Some("s2"), Some("u1"))));
        assert!(!revocations.is_revoked(&grant(Some("u1"), Some("s1"))), "kinds do not mix");
        let agent = Grant { agent_id: Some("a1".into()), ..grant(None, None) };
        assert!(!revocations.is_revoked(&agent));
    }

    #[test]
    fn kinds_round_trip() {
        for selector in [
            Selector::Session("x".into()),
            Selector::Identity("x".into()),
            Selector::Agent("x".into()),
            Selector::Delegation("x".into()),
            Selector::TenantAnyAgent("x".into()),
        ] {
            let (kind, value) = kind_and_value(&selector);
            assert_eq!(selector_of(kind, value.to_owned()), Some(selector.clone()));
        }
    }
}
