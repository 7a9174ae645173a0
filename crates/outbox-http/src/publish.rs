//! `POST /events`: publish one event, or `{"events":[…]}`, in one transaction (SPEC §5.7).
//!
//! The body is read up to the service's limit (413 beyond it), parsed, and
//! every event's `tenantId` must be the caller's own unless the caller is an
//! administrator (403 naming the event's index). The batch is then validated
//! whole and written in one statement by `outbox_pg`'s publisher, in one
//! transaction of its own: all events are written, or none. The answer is
//! `201 {"ids":[…]}`, the ids in input order.

use bytes::Bytes;
use http::request::Parts;
use http::{Response, StatusCode};
use http_body::Body as HttpBody;
use outbox_core::NewEvent;
use serde::Serialize;
use serde_json::Value;

use crate::auth::require_scope;
use crate::body::read_limited;
use crate::query::Query;
use crate::service::OutboxService;
use crate::{ApiError, Body, Grant, json_response, scope};

#[derive(Serialize)]
struct Ids {
    ids: Vec<String>,
}

/// Publishes the body's events for a caller with `events:write`.
pub(crate) async fn publish<B>(service: &OutboxService, parts: &Parts, body: B) -> Result<Response<Body>, ApiError>
where
    B: HttpBody<Data = Bytes>,
    B::Error: std::fmt::Display,
{
    let grant = service.authorizer.authorize(&parts.headers).await?;
    require_scope(&grant, scope::EVENTS_WRITE)?;
    Query::parse(parts.uri.query(), &[])?;
    let events = parse_events(&read_limited(body, service.body_limit).await?)?;
    check_tenants(&grant, &events)?;
    let ids = write(service, &events).await?;
    Ok(json_response(StatusCode::CREATED, &Ids { ids }))
}

/// One event object, or `{"events":[…]}`. Errors name the event's index and the field.
pub fn parse_events(body: &[u8]) -> Result<Vec<NewEvent>, ApiError> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| ApiError::invalid(format!("the body is not JSON: {e}")))?;
    let Value::Object(mut object) = value else {
        return Err(ApiError::invalid("the body must be one event object or {\"events\":[…]}"));
    };
    let Some(events) = object.remove("events") else {
        let event = Value::Object(object);
        check_text_fields("event", &event)?;
        let event = serde_json::from_value(event).map_err(|e| ApiError::invalid(format!("event: {e}")))?;
        return Ok(vec![event]);
    };
    if let Some(other) = object.keys().next() {
        return Err(ApiError::invalid(format!("unknown field {other:?} next to events")));
    }
    let Value::Array(events) = events else {
        return Err(ApiError::invalid("events must be an array of event objects"));
    };
    events.into_iter().enumerate().map(|(index, event)| parse_event(index, event)).collect()
}

fn parse_event(index: usize, event: Value) -> Result<NewEvent, ApiError> {
    let at = format!("event {index}");
    check_text_fields(&at, &event)?;
    serde_json::from_value(event).map_err(|e| ApiError::invalid(format!("{at}: {e}")))
}

/// The fields an event holds as text, named when they hold something else: serde's own
/// message (`invalid type: integer `1`, expected a string`) does not say which field.
fn check_text_fields(at: &str, event: &Value) -> Result<(), ApiError> {
    for field in ["type", "tenantId", "subject"] {
        match event.get(field) {
            None | Some(Value::String(_)) => {}
            Some(other) => {
                let kind = match other {
                    Value::Null => "null",
                    Value::Bool(_) => "a boolean",
                    Value::Number(_) => "a number",
                    Value::Array(_) => "an array",
                    Value::Object(_) => "an object",
                    Value::String(_) => "a string",
                };
                return Err(ApiError::invalid(format!("{at}: {field} must be a string (got {kind})")));
            }
        }
    }
    Ok(())
}

/// Refuses an event of another tenant than the caller's, unless the caller is an administrator.
fn check_tenants(grant: &Grant, events: &[NewEvent]) -> Result<(), ApiError> {
    if grant.is_admin() {
        return Ok(());
    }
    match events.iter().position(|event| event.tenant_id != grant.tenant_id) {
        None => Ok(()),
        Some(index) => Err(ApiError::denied(format!(
            "event {index}: tenantId must be the caller's own tenant ({:?})",
            grant.tenant_id
        ))),
    }
}

/// Writes the batch in one transaction: all or nothing.
async fn write(service: &OutboxService, events: &[NewEvent]) -> Result<Vec<String>, ApiError> {
    let context = "publishing through POST /events";
    let mut tx = service.pool.begin().await.map_err(|e| ApiError::from_pg(context, e.into()))?;
    let ids = service.publisher.publish_many(&mut *tx, events).await.map_err(|e| ApiError::from_pg(context, e))?;
    tx.commit().await.map_err(|e| ApiError::from_pg(context, e.into()))?;
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;
    use outbox_core::ErrorCode;

    #[track_caller]
    fn check(body: &str, expect: Result<usize, &str>) {
        match (parse_events(body.as_bytes()), expect) {
            (Ok(events), Ok(count)) => assert_eq!(events.len(), count, "{body}"),
            (Err(error), Err(needle)) => {
                assert_eq!(error.code(), ErrorCode::InvalidInput);
                assert!(error.message().contains(needle), "{body}: {}", error.message());
            }
            (got, expect) => panic!("{body}: got {got:?}, expected {expect:?}"),
        }
    }

    const ONE: &str = r#"{"type":"node.joined","tenantId":"acme","subject":"node/n1","data":{}}"#;

    #[test]
    fn one_event_or_a_batch() {
        check(ONE, Ok(1));
        check(&format!(r#"{{"events":[{ONE},{ONE}]}}"#), Ok(2));
        check(r#"{"events":[]}"#, Ok(0));
        check("not json", Err("not JSON"));
        check("[]", Err("one event object"));
        check(r#"{"events":{}}"#, Err("array"));
        check(&format!(r#"{{"events":[{ONE}],"extra":1}}"#), Err("extra"));
        check(&format!(r#"{{"events":[{ONE},{{"type":"node.joined"}}]}}"#), Err("event 1: missing field"));
        check(r#"{"type":"node.joined","tenantId":"acme","subject":"node/n1"}"#, Err("event: missing field `data`"));
        check(
            r#"{"type":1,"tenantId":"acme","subject":"node/n1","data":{}}"#,
            Err("event: type must be a string (got a number)"),
        );
        check(
            &format!(r#"{{"events":[{ONE},{{"type":"a.b","tenantId":null,"subject":"node/n1","data":{{}}}}]}}"#),
            Err("event 1: tenantId must be a string (got null)"),
        );
        check(
            r#"{"type":"a.b","tenantId":"acme","subject":["x"],"data":{}}"#,
            Err("event: subject must be a string (got an array)"),
        );
    }

    #[test]
    fn only_an_admin_publishes_for_another_tenant() {
        let event = |tenant: &str| NewEvent::new("node.joined", tenant, "node/n1", serde_json::json!({}));
        let writer = Grant::new("acme", [scope::EVENTS_WRITE]);
        assert!(check_tenants(&writer, &[event("acme")]).is_ok());
        let refused = check_tenants(&writer, &[event("acme"), event("globex")]).unwrap_err();
        assert_eq!(refused.code(), ErrorCode::AccessDenied);
        assert!(refused.message().starts_with("event 1:"));
        assert!(check_tenants(&Grant::new("ops", [scope::ADMIN]), &[event("globex")]).is_ok());
    }
}
