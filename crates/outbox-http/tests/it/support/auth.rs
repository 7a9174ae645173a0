//! The tests' `Authorizer`: bearer tokens name their grant.
//!
//! A token is `<tenant>:<scopes>[:<session>[:<agent>]]`, scopes joined with `+`
//! (`acme:events:read` would be ambiguous, so scopes use short names: `read`,
//! `write`, `hooks` (`webhooks:write`), `admin`, `none`). `Bearer acme:read` reads tenant acme;
//! `Bearer acme:read:s1:a1` does so in session `s1` as agent `a1`; the
//! identity is always `user-<tenant>`. Anything else is unauthenticated.
//! `reauthorize` answers what the test set: `false` for revoked sessions, an
//! error while an outage is on.

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use http::HeaderMap;
use http::header::AUTHORIZATION;
use outbox_http::{AuthError, Authorizer, BoxFuture, Grant, scope};

/// Grants from tokens, and a switchboard for `reauthorize`.
#[derive(Default)]
pub(crate) struct TestAuthorizer {
    revoked_sessions: Mutex<HashSet<String>>,
    outage: AtomicBool,
    reauthorized: AtomicUsize,
}

impl TestAuthorizer {
    /// From now on, `reauthorize` answers `false` for grants of `session`.
    pub(crate) fn revoke_session(&self, session: &str) {
        self.revoked_sessions.lock().unwrap().insert(session.to_owned());
    }

    /// While on, `reauthorize` fails as if the authority were unreachable.
    pub(crate) fn set_outage(&self, on: bool) {
        self.outage.store(on, Ordering::SeqCst);
    }

    /// How many times `reauthorize` was called.
    pub(crate) fn reauthorized(&self) -> usize {
        self.reauthorized.load(Ordering::SeqCst)
    }
}

/// The grant a token stands for, if it is well formed.
pub(crate) fn grant_for(token: &str) -> Option<Grant> {
    let mut parts = token.split(':');
    let tenant = parts.next().filter(|t| !t.is_empty())?;
    let scopes = parts.next()?.split('+').map(scope_name).collect::<Option<Vec<_>>>()?;
    let mut grant = Grant::new(tenant, scopes.into_iter().flatten());
    grant.identity_id = Some(format!("user-{tenant}"));
    grant.session_id = parts.next().map(str::to_owned);
    grant.agent_id = parts.next().map(str::to_owned);
    parts.next().is_none().then_some(grant)
}

fn scope_name(short: &str) -> Option<Option<&'static str>> {
    match short {
        "read" => Some(Some(scope::EVENTS_READ)),
        "write" => Some(Some(scope::EVENTS_WRITE)),
        "admin" => Some(Some(scope::ADMIN)),
        "hooks" => Some(Some(scope::WEBHOOKS_WRITE)),
        "none" => Some(None),
        _ => None,
    }
}

impl Authorizer for TestAuthorizer {
    fn authorize<'a>(&'a self, headers: &'a HeaderMap) -> BoxFuture<'a, Result<Grant, AuthError>> {
        let token = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
        let grant = token.and_then(grant_for);
        Box::pin(
            async move { grant.ok_or_else(|| AuthError::Unauthenticated("a valid bearer token is required".into())) },
        )
    }

    fn reauthorize<'a>(&'a self, grant: &'a Grant) -> BoxFuture<'a, Result<bool, AuthError>> {
        self.reauthorized.fetch_add(1, Ordering::SeqCst);
        let answer = if self.outage.load(Ordering::SeqCst) {
            Err(AuthError::Unavailable("the authority is down".into()))
        } else {
            let revoked = self.revoked_sessions.lock().unwrap();
            Ok(!grant.session_id.as_ref().is_some_and(|session| revoked.contains(session)))
        };
        Box::pin(async move { answer })
    }
}
