//! `GET /events`: one page of a tenant's history (SPEC §5.3).
//!
//! A page is read with the xmin rule, oldest first, the tenant inside the
//! query. With a type or subject filter a single read may return fewer events
//! than asked for while more rows follow (it examines at most about a thousand
//! rows), so the page is filled by reading on from where the last read
//! stopped, until the page is full, the visible end is reached, or
//! [`SCAN_BUDGET`] rows were examined.
//!
//! `cursor` is present only when more rows follow, and it is where the next
//! page starts: the last item's position when the page ended on an item, or
//! the last row examined when the page ended on rows the filter skipped, so
//! that the next page does not examine them again. A sparse filter can
//! therefore answer a short page, even an empty one, that still has a cursor.
//! Without a cursor the page reached the visible end; to keep tailing, pass
//! the last item's `sequence` as the next `cursor`.
//!
//! `order=desc` reads the other way with the same rule: the newest visible events first
//! (all below the xmin horizon, so none can ever commit between them), from the newest or
//! strictly before `cursor`; the answer's `cursor`, present while older rows follow, is
//! where the next, older, page starts.

use http::header::{ACCEPT, HeaderMap};
use http::request::Parts;
use http::{Response, StatusCode};
use outbox_core::{Event, Position};
use outbox_pg::sqlx::PgPool;
use outbox_pg::{MAX_LIMIT, ReadRequest, read_page};
use prost::Message;
use serde::Serialize;

use crate::auth::{require_scope, tenant_to_read};
use crate::error::bytes_response;
use crate::query::{Query, number_in, position, subject, type_filter};
use crate::service::OutboxService;
use crate::{ApiError, Body, Grant, json_response, proto, scope};

/// The most rows one page examines under a filter before it answers with what it has.
pub(crate) const SCAN_BUDGET: usize = 5_000;
/// The page size when `limit` is not given.
const DEFAULT_LIMIT: usize = 100;
/// The largest page when `subject` is given.
const MAX_SUBJECT_LIMIT: usize = 200;
/// The query parameters `/events` takes.
const PARAMETERS: &[&str] = &["tenantId", "types", "type", "subject", "cursor", "limit", "order"];
/// The media type of the protobuf answer.
const PROTOBUF: &str = "application/x-protobuf";

/// One page: its events, and where the next page starts when more rows follow.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Page {
    items: Vec<Event>,
    cursor: Option<Position>,
}

/// Answers one page as JSON, or as protobuf when the caller asks for it.
pub(crate) async fn list(service: &OutboxService, parts: &Parts) -> Result<Response<Body>, ApiError> {
    let grant = service.authorizer.authorize(&parts.headers).await?;
    require_scope(&grant, scope::EVENTS_READ)?;
    let request = read_request(&grant, parts.uri.query())?;
    let page = fill_page(&service.pool, request).await?;
    service.stats.listed();
    if wants_protobuf(&parts.headers) { Ok(protobuf_page(&page)) } else { Ok(json_page(&page)) }
}

/// The read that `query` asks of `grant`'s events, or the refusal naming the parameter.
pub fn read_request(grant: &Grant, query: Option<&str>) -> Result<ReadRequest, ApiError> {
    let query = Query::parse(query, PARAMETERS)?;
    let mut request = ReadRequest::tenant(tenant_to_read(grant, query.get("tenantId"))?);
    request.patterns = type_filter(query.get("types"), query.get("type"))?.unwrap_or_default();
    request.subject = query.get("subject").map(|text| subject("subject", text)).transpose()?;
    request.after = query.get("cursor").map(|cursor| position("cursor", cursor)).transpose()?;
    request.limit = page_limit(query.get("limit"), request.subject.is_some())?;
    request.descending = descending(query.get("order"))?;
    Ok(request)
}

/// `order`: `asc` (the default, oldest first) or `desc` (newest first).
fn descending(order: Option<&str>) -> Result<bool, ApiError> {
    match order {
        None | Some("asc") => Ok(false),
        Some("desc") => Ok(true),
        Some(other) => Err(ApiError::invalid(format!("order must be asc or desc, got {other:?}"))),
    }
}

fn page_limit(limit: Option<&str>, with_subject: bool) -> Result<usize, ApiError> {
    if with_subject {
        let refuse = || ApiError::invalid(format!("limit must be 1 to {MAX_SUBJECT_LIMIT} when subject is given"));
        number_in("limit", limit, 1..=MAX_LIMIT, DEFAULT_LIMIT)
            .ok()
            .filter(|limit| *limit <= MAX_SUBJECT_LIMIT)
            .ok_or_else(refuse)
    } else {
        number_in("limit", limit, 1..=MAX_LIMIT, DEFAULT_LIMIT)
    }
}

/// Reads until the page holds `request.limit` events, the visible end is reached, or
/// [`SCAN_BUDGET`] rows were examined; see the module documentation for the cursor.
pub(crate) async fn fill_page(pool: &PgPool, mut request: ReadRequest) -> Result<Page, ApiError> {
    let limit = request.limit;
    let mut items = Vec::with_capacity(limit.min(DEFAULT_LIMIT));
    let mut examined = 0;
    loop {
        request.limit = limit - items.len();
        let page = read_page(pool, &request).await.map_err(|e| ApiError::from_pg("reading a page of /events", e))?;
        examined += request.rows_to_scan();
        items.extend(page.events);
        request.after = Some(page.next_after);
        if !page.more {
            return Ok(Page { items, cursor: None });
        }
        if items.len() >= limit || examined >= SCAN_BUDGET {
            return Ok(Page { items, cursor: Some(page.next_after) });
        }
    }
}

/// Whether the `Accept` header prefers protobuf: of the media types this route answers
/// (`application/json`, `application/x-protobuf`), the first one listed and not refused
/// with `q=0` decides; anything else gets JSON.
fn wants_protobuf(headers: &HeaderMap) -> bool {
    let ranges = headers.get_all(ACCEPT).iter().filter_map(|value| value.to_str().ok()).flat_map(|v| v.split(','));
    for range in ranges {
        let mut params = range.split(';').map(str::trim);
        let media = params.next().unwrap_or_default().to_ascii_lowercase();
        let refused =
            params.any(|param| matches!(param.split_once('='), Some(("q", q)) if q.trim().parse::<f32>() == Ok(0.0)));
        if refused {
            continue;
        }
        match media.as_str() {
            PROTOBUF => return true,
            "application/json" => return false,
            _ => {}
        }
    }
    false
}

#[derive(Serialize)]
struct JsonPage<'a> {
    items: &'a [Event],
    #[serde(skip_serializing_if = "Option::is_none")]
    cursor: Option<String>,
}

fn json_page(page: &Page) -> Response<Body> {
    json_response(StatusCode::OK, &JsonPage { items: &page.items, cursor: page.cursor.map(Position::colon) })
}

fn protobuf_page(page: &Page) -> Response<Body> {
    let message = proto::EventPage {
        items: page.items.iter().map(proto::Event::from).collect(),
        cursor: page.cursor.map(Position::colon).unwrap_or_default(),
    };
    bytes_response(StatusCode::OK, PROTOBUF, message.encode_to_vec().into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[track_caller]
    fn check(accept: &[&str], expect: bool) {
        let mut headers = HeaderMap::new();
        for value in accept {
            headers.append(ACCEPT, HeaderValue::from_str(value).unwrap());
        }
        assert_eq!(wants_protobuf(&headers), expect, "{accept:?}");
    }

    #[test]
    fn protobuf_only_when_asked_for_first() {
        check(&[], false);
        check(&["*/*"], false);
        check(&["application/x-protobuf"], true);
        check(&["Application/X-Protobuf"], true);
        check(&["application/json, application/x-protobuf"], false);
        check(&["application/x-protobuf;q=0.9, application/json"], true);
        check(&["application/x-protobuf;q=0, application/json"], false);
        check(&["text/html", "application/x-protobuf"], true);
    }

    #[test]
    fn the_order_is_asc_or_desc() {
        let grant = Grant::new("acme", [scope::EVENTS_READ]);
        assert!(!read_request(&grant, None).unwrap().descending);
        assert!(!read_request(&grant, Some("order=asc")).unwrap().descending);
        let newest = read_request(&grant, Some("order=desc&cursor=5:2")).unwrap();
        assert!(newest.descending);
        assert_eq!(newest.after, Some(Position::new(5, 2)));
        assert!(read_request(&grant, Some("order=newest")).is_err());
    }

    #[test]
    fn limits_follow_the_spec() {
        assert_eq!(page_limit(None, false).unwrap(), 100);
        assert_eq!(page_limit(Some("1000"), false).unwrap(), 1000);
        assert!(page_limit(Some("1001"), false).is_err());
        assert!(page_limit(Some("0"), false).is_err());
        assert_eq!(page_limit(Some("200"), true).unwrap(), 200);
        assert!(page_limit(Some("201"), true).is_err());
        assert_eq!(page_limit(None, true).unwrap(), 100);
    }
}
