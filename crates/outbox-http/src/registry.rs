//! Open watch streams, so that a revocation closes them at once (SPEC §5.5).
//!
//! Every stream registers its [`Grant`] while it is open and unregisters when
//! it ends (its registration is dropped with the response body). A revocation
//! names the streams to close with a [`Selector`]; [`WatchRegistry::close_where`]
//! removes each matching entry and hands it the reason through the signal the entry
//! shares with its stream (a reason set once, and a wake-up). The stream checks it before every
//! frame it sends and between reading the outbox and sending what it read, so
//! nothing read after the revocation reaches the client: the stream's last
//! frame is `event: error` with `{"code":"ACCESS_DENIED","message":<reason>}`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use dashmap::DashMap;
use tokio::sync::Notify;

use crate::Grant;

/// Which open streams a revocation closes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// Streams opened by this agent.
    Agent(String),
    /// Streams opened under this delegation.
    Delegation(String),
    /// Streams opened with a credential of this session.
    Session(String),
    /// Streams opened by this identity.
    Identity(String),
    /// Streams of this tenant opened by any agent (grants with an `agent_id`).
    TenantAnyAgent(String),
}

impl Selector {
    /// From the JSON body fields of `POST /admin/streams/close`: exactly one of `agentId`,
    /// `delegationId`, `sessionId`, `identityId`, or `tenantId` together with `anyAgent=true`.
    /// A tenant alone (without `anyAgent=true`), none, several, or an empty value is refused
    /// with a message for an `INVALID_INPUT` answer.
    pub fn from_fields(
        agent_id: Option<String>,
        delegation_id: Option<String>,
        session_id: Option<String>,
        identity_id: Option<String>,
        tenant_id: Option<String>,
        any_agent: bool,
    ) -> Result<Selector, String> {
        let tenant = match (tenant_id, any_agent) {
            (Some(tenant), true) => Some(Selector::TenantAnyAgent(tenant)),
            (Some(_), false) => return Err("tenantId alone would close too much: add \"anyAgent\": true".into()),
            (None, true) => return Err("anyAgent needs a tenantId".into()),
            (None, false) => None,
        };
        let given: Vec<Selector> = [
            agent_id.map(Selector::Agent),
            delegation_id.map(Selector::Delegation),
            session_id.map(Selector::Session),
            identity_id.map(Selector::Identity),
            tenant,
        ]
        .into_iter()
        .flatten()
        .collect();
        match <[Selector; 1]>::try_from(given) {
            Ok([selector]) if !selector.value().is_empty() => Ok(selector),
            Ok(_) => Err("the selector's value must not be empty".into()),
            Err(given) if given.is_empty() => Err(NAME_ONE.into()),
            Err(_) => Err(format!("give only one selector: {NAME_ONE}")),
        }
    }

    /// Whether a stream opened with `grant` is selected. `TenantAnyAgent` selects the
    /// tenant's grants that have an `agent_id`.
    pub fn matches(&self, grant: &Grant) -> bool {
        let is = |field: &Option<String>, value: &String| field.as_ref() == Some(value);
        match self {
            Selector::Agent(agent) => is(&grant.agent_id, agent),
            Selector::Delegation(delegation) => is(&grant.delegation_id, delegation),
            Selector::Session(session) => is(&grant.session_id, session),
            Selector::Identity(identity) => is(&grant.identity_id, identity),
            Selector::TenantAnyAgent(tenant) => grant.tenant_id == *tenant && grant.agent_id.is_some(),
        }
    }

    fn value(&self) -> &str {
        match self {
            Selector::Agent(value)
            | Selector::Delegation(value)
            | Selector::Session(value)
            | Selector::Identity(value)
            | Selector::TenantAnyAgent(value) => value,
        }
    }
}

const NAME_ONE: &str = "name one of agentId, delegationId, sessionId, identityId, or tenantId with anyAgent";

/// Open watch streams, so that a revocation can close them at once. Clones share the streams.
#[derive(Clone, Default)]
pub struct WatchRegistry {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    streams: DashMap<u64, Entry>,
    next_id: AtomicU64,
}

/// One open stream: the grant it was opened with and the signal that tells it why it must end.
struct Entry {
    grant: Arc<Grant>,
    revoked: Arc<Revoked>,
}

/// Why a stream must end, set once, and the wake-up of the stream that waits for it. Kept
/// small on purpose: every open stream holds one (a `tokio::sync::watch` channel is a few
/// hundred bytes).
#[derive(Default)]
struct Revoked {
    reason: OnceLock<String>,
    wake: Notify,
}

impl WatchRegistry {
    /// An empty registry.
    pub fn new() -> WatchRegistry {
        WatchRegistry::default()
    }

    /// Closes every open stream whose grant `selector` matches; each ends with `event: error`
    /// and `{"code":"ACCESS_DENIED","message":<reason>}`. Returns how many were closed.
    pub fn close_where(&self, selector: &Selector, reason: &str) -> usize {
        let selected: Vec<u64> = self
            .inner
            .streams
            .iter()
            .filter(|entry| selector.matches(&entry.grant))
            .map(|entry| *entry.key())
            .collect();
        // Removing while iterating would deadlock on a shard lock: collect first, then remove.
        let mut closed = 0;
        for (_, entry) in selected.into_iter().filter_map(|id| self.inner.streams.remove(&id)) {
            let _ = entry.revoked.reason.set(reason.to_owned());
            // A permit when the stream is not waiting yet: its next wait ends at once.
            entry.revoked.wake.notify_one();
            closed += 1;
        }
        closed
    }

    /// How many streams are open.
    pub fn len(&self) -> usize {
        self.inner.streams.len()
    }

    /// Whether no stream is open.
    pub fn is_empty(&self) -> bool {
        self.inner.streams.is_empty()
    }

    /// Registers a stream opened with `grant`; it stays registered until the result is dropped.
    pub(crate) fn register(&self, grant: Arc<Grant>) -> Registration {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let revoked = Arc::new(Revoked::default());
        self.inner.streams.insert(id, Entry { grant, revoked: revoked.clone() });
        Registration { id, registry: self.clone(), revoked }
    }
}

impl std::fmt::Debug for WatchRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchRegistry").field("open", &self.len()).finish()
    }
}

/// A stream's place in the registry; dropping it unregisters the stream.
pub(crate) struct Registration {
    id: u64,
    registry: WatchRegistry,
    revoked: Arc<Revoked>,
}

impl Registration {
    /// Why the stream was revoked, once it was.
    pub(crate) fn revocation(&self) -> Option<String> {
        self.revoked.reason.get().cloned()
    }

    /// Resolves when the stream is revoked (at once when it was revoked since the last call).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a revocation is never lost, [`Registration::revocation`] reads it.
    pub(crate) async fn changed(&self) {
        self.revoked.wake.notified().await;
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.registry.inner.streams.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(
        agent: Option<&str>,
        session: Option<&str>,
        tenant: Option<&str>,
        any_agent: bool,
    ) -> Result<Selector, String> {
        let own = |v: Option<&str>| v.map(str::to_owned);
        Selector::from_fields(own(agent), None, own(session), None, own(tenant), any_agent)
    }

    #[test]
    fn a_selector_names_exactly_one_thing_and_never_a_tenant_alone() {
        assert_eq!(fields(Some("a1"), None, None, false), Ok(Selector::Agent("a1".into())));
        assert_eq!(fields(None, Some("s1"), None, false), Ok(Selector::Session("s1".into())));
        assert_eq!(fields(None, None, Some("acme"), true), Ok(Selector::TenantAnyAgent("acme".into())));
        assert!(fields(None, None, Some("acme"), false).unwrap_err().contains("anyAgent"));
        assert!(fields(None, None, None, true).is_err());
        assert!(fields(None, None, None, false).is_err());
        assert!(fields(Some("a1"), Some("s1"), None, false).is_err());
        assert!(fields(Some(""), None, None, false).is_err());
    }

    #[test]
    fn selectors_match_their_field() {
        let grant = Grant {
            tenant_id: "acme".into(),
            agent_id: Some("a1".into()),
            session_id: Some("s1".into()),
            ..Grant::default()
        };
        assert!(Selector::Agent("a1".into()).matches(&grant));
        assert!(!Selector::Agent("a2".into()).matches(&grant));
        assert!(Selector::Session("s1".into()).matches(&grant));
        assert!(!Selector::Identity("s1".into()).matches(&grant));
        assert!(Selector::TenantAnyAgent("acme".into()).matches(&grant));
        let person = Grant { agent_id: None, ..grant };
        assert!(!Selector::TenantAnyAgent("acme".into()).matches(&person));
    }

    #[test]
    fn close_where_signals_and_removes_only_the_matching_streams() {
        let registry = WatchRegistry::new();
        let grant =
            |session: &str| Arc::new(Grant { session_id: Some(session.into()), ..Grant::new("acme", ["events:read"]) });
        let first = registry.register(grant("s1"));
        let second = registry.register(grant("s2"));
        assert_eq!(registry.len(), 2);
        assert_eq!(registry.close_where(&Selector::Session("s1".into()), "signed out"), 1);
        assert_eq!(first.revocation().as_deref(), Some("signed out"));
        assert_eq!(second.revocation(), None);
        assert_eq!(registry.len(), 1);
        assert_eq!(registry.close_where(&Selector::Session("s1".into()), "again"), 0);
        drop(second);
        assert!(registry.is_empty());
    }
}
