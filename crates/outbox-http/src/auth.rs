//! Who the caller is and what it may read (SPEC §5.2).
//!
//! The host implements [`Authorizer`]: it turns a request's headers into a
//! [`Grant`] or a refusal, and re-checks an open stream's grant from time to
//! time. This crate then decides per route: the scope the route needs, and the
//! tenant the caller may name. A caller reads its own tenant; `?tenantId=`
//! naming another is allowed only with the `admin` scope. A host's own administrator
//! routes check their callers with [`authorize_admin`].

use std::collections::BTreeSet;

use http::HeaderMap;
use outbox_core::ErrorCode;

use crate::{ApiError, BoxFuture, scope};

/// What an authenticated caller is: its tenant, who it is, and what it may do.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Grant {
    /// The caller's own tenant: the one it reads and publishes to.
    pub tenant_id: String,
    /// The person or service account behind the request, if known.
    pub identity_id: Option<String>,
    /// The agent acting for the identity, if any.
    pub agent_id: Option<String>,
    /// The delegation the agent acts under, if any.
    pub delegation_id: Option<String>,
    /// The session the credential belongs to, if any.
    pub session_id: Option<String>,
    /// The scopes, e.g. `events:read` ([`scope`]).
    pub scopes: BTreeSet<String>,
    /// When the credential stops being valid, if it expires (a token's `exp`).
    pub expires_at: Option<time::OffsetDateTime>,
}

impl Grant {
    /// A grant for `tenant_id` with `scopes` and no identity, agent, delegation or session.
    pub fn new<S: Into<String>>(tenant_id: impl Into<String>, scopes: impl IntoIterator<Item = S>) -> Grant {
        Grant { tenant_id: tenant_id.into(), scopes: scopes.into_iter().map(Into::into).collect(), ..Grant::default() }
    }

    /// Whether the grant holds `scope`; `admin` holds every scope.
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.contains(scope) || self.scopes.contains(scope::ADMIN)
    }

    /// Whether the grant is an administrator's.
    pub fn is_admin(&self) -> bool {
        self.scopes.contains(scope::ADMIN)
    }
}

/// Why a caller is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// The caller did not prove who it is (401).
    #[error("{0}")]
    Unauthenticated(String),
    /// The caller is known but may not do this (403).
    #[error("{0}")]
    AccessDenied(String),
    /// The authority that decides could not be reached (503).
    #[error("{0}")]
    Unavailable(String),
}

impl AuthError {
    /// The code a client sees.
    pub fn code(&self) -> ErrorCode {
        match self {
            AuthError::Unauthenticated(_) => ErrorCode::Unauthenticated,
            AuthError::AccessDenied(_) => ErrorCode::AccessDenied,
            AuthError::Unavailable(_) => ErrorCode::Unavailable,
        }
    }
}

impl From<AuthError> for ApiError {
    fn from(error: AuthError) -> ApiError {
        ApiError::new(error.code(), error.to_string())
    }
}

/// Decides each request; the host's whole security boundary for these routes.
pub trait Authorizer: Send + Sync + 'static {
    /// Authenticates the caller from the request headers.
    fn authorize<'a>(&'a self, headers: &'a HeaderMap) -> BoxFuture<'a, Result<Grant, AuthError>>;

    /// Re-checks an open stream's grant every `reauthorize_ms`: `Ok(false)` closes the stream
    /// (`ACCESS_DENIED`); `Err(_)` counts as "authority unreachable", and after
    /// `iam_outage_ms` of continuous errors the stream closes.
    fn reauthorize<'a>(&'a self, grant: &'a Grant) -> BoxFuture<'a, Result<bool, AuthError>>;
}

/// Authenticates the caller of an administrator's route with `authorizer` and requires the
/// `admin` scope. A refusal is the [`AuthError`]'s own code and message, or `ACCESS_DENIED`
/// saying that `what` (e.g. `"closing streams"`) needs the admin scope.
pub async fn authorize_admin(authorizer: &dyn Authorizer, headers: &HeaderMap, what: &str) -> Result<Grant, ApiError> {
    let grant = authorizer.authorize(headers).await?;
    if !grant.is_admin() {
        return Err(ApiError::denied(format!("{what} needs the admin scope")));
    }
    Ok(grant)
}

/// Refuses a grant without `scope`.
pub(crate) fn require_scope(grant: &Grant, scope: &str) -> Result<(), ApiError> {
    if grant.has_scope(scope) {
        return Ok(());
    }
    Err(ApiError::denied(format!("this request needs the scope {scope}")))
}

/// The tenant a request reads: the grant's own, or `requested` when it is the grant's own or
/// the grant is an administrator's.
pub(crate) fn tenant_to_read(grant: &Grant, requested: Option<&str>) -> Result<String, ApiError> {
    let Some(requested) = requested.filter(|tenant| *tenant != grant.tenant_id) else {
        return Ok(grant.tenant_id.clone());
    };
    outbox_core::validate::check_tenant_id(requested).map_err(|rule| ApiError::invalid(format!("tenantId {rule}")))?;
    if !grant.is_admin() {
        return Err(ApiError::denied("only an administrator may read another tenant's events"));
    }
    Ok(requested.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_holds_every_scope() {
        let reader = Grant::new("acme", [scope::EVENTS_READ]);
        assert!(reader.has_scope(scope::EVENTS_READ));
        assert!(!reader.has_scope(scope::EVENTS_WRITE));
        let admin = Grant::new("ops", [scope::ADMIN]);
        assert!(admin.has_scope(scope::EVENTS_WRITE));
    }

    #[track_caller]
    fn check(grant: &Grant, requested: Option<&str>, expect: Result<&str, ErrorCode>) {
        let got = tenant_to_read(grant, requested);
        assert_eq!(got.as_deref().map_err(ApiError::code), expect, "{requested:?}");
    }

    #[test]
    fn only_an_admin_names_another_tenant() {
        let reader = Grant::new("acme", [scope::EVENTS_READ]);
        check(&reader, None, Ok("acme"));
        check(&reader, Some("acme"), Ok("acme"));
        check(&reader, Some("globex"), Err(ErrorCode::AccessDenied));
        let admin = Grant::new("ops", [scope::ADMIN]);
        check(&admin, Some("globex"), Ok("globex"));
        check(&admin, Some("bad tenant"), Err(ErrorCode::InvalidInput));
    }
}
