//! `GET /whoami`: the caller's own grant, for any valid credential (no scope needed), so a
//! client learns what it may do without trying a route it expects to be refused.
//!
//! `{"tenantId":"acme","scopes":["events:read","webhooks:write"],"admin":false,
//! "expiresAt":"2026-12-05T10:00:00Z","identityId":"u1"}`: the scopes sorted, `expiresAt`
//! only when the credential expires, `identityId` only when the host knows it.

use http::request::Parts;
use http::{Response, StatusCode};
use serde::Serialize;
use time::OffsetDateTime;

use crate::query::Query;
use crate::service::OutboxService;
use crate::{ApiError, Body, Grant, json_response};

/// The grant as `GET /whoami` answers it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct WhoAmI<'a> {
    tenant_id: &'a str,
    scopes: Vec<&'a str>,
    admin: bool,
    #[serde(with = "time::serde::rfc3339::option", skip_serializing_if = "Option::is_none")]
    expires_at: Option<OffsetDateTime>,
    #[serde(skip_serializing_if = "Option::is_none")]
    identity_id: Option<&'a str>,
}

impl<'a> From<&'a Grant> for WhoAmI<'a> {
    fn from(grant: &'a Grant) -> WhoAmI<'a> {
        WhoAmI {
            tenant_id: &grant.tenant_id,
            // A `BTreeSet`: already sorted.
            scopes: grant.scopes.iter().map(String::as_str).collect(),
            admin: grant.is_admin(),
            expires_at: grant.expires_at,
            identity_id: grant.identity_id.as_deref(),
        }
    }
}

/// Answers the caller's grant; 401 without a valid credential.
pub(crate) async fn whoami(service: &OutboxService, parts: &Parts) -> Result<Response<Body>, ApiError> {
    Query::parse(parts.uri.query(), &[])?;
    let grant = service.authorizer.authorize(&parts.headers).await?;
    Ok(json_response(StatusCode::OK, &WhoAmI::from(&grant)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grant_as_answered() {
        let mut grant = Grant::new("acme", ["webhooks:write", "events:read"]);
        let json = serde_json::to_value(WhoAmI::from(&grant)).unwrap();
        assert_eq!(json, serde_json::json!({"tenantId": "acme", "scopes": ["events:read", "webhooks:write"], "admin": false}));
        grant.scopes.insert("admin".into());
        grant.expires_at = Some(OffsetDateTime::from_unix_timestamp(1_796_464_800).unwrap());
        grant.identity_id = Some("u1".into());
        let json = serde_json::to_value(WhoAmI::from(&grant)).unwrap();
        assert_eq!(json["admin"], true);
        assert_eq!(json["expiresAt"], "2026-12-05T10:00:00Z");
        assert_eq!(json["identityId"], "u1");
    }
}
