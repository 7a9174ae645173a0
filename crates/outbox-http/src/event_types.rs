//! `GET /event-types`: the event catalog (SPEC §3.4).
//!
//! The answer is `{"items":[{"type","subject","module","description"}…]}`, built-in
//! families first. It needs the `events:read` scope: the catalog holds no tenant's data,
//! but it is part of the reading API and not meant for anonymous callers.

use http::request::Parts;
use http::{Response, StatusCode};
use outbox_core::CatalogEntry;
use serde::Serialize;

use crate::auth::require_scope;
use crate::query::Query;
use crate::service::OutboxService;
use crate::{ApiError, Body, json_response, scope};

#[derive(Serialize)]
struct Items<'a> {
    items: &'a [CatalogEntry],
}

/// Answers the catalog to any caller with `events:read`.
pub(crate) async fn event_types(service: &OutboxService, parts: &Parts) -> Result<Response<Body>, ApiError> {
    let grant = service.authorizer.authorize(&parts.headers).await?;
    require_scope(&grant, scope::EVENTS_READ)?;
    Query::parse(parts.uri.query(), &[])?;
    Ok(json_response(StatusCode::OK, &Items { items: service.catalog.entries() }))
}
