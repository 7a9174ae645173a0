//! `GET /watch`: one tenant's events as Server-Sent Events (SPEC §5.4).
//!
//! Everything that can be refused is decided before the stream starts, and
//! answered as the JSON error of SPEC §5.1: the caller ([`Authorizer`](crate::Authorizer)),
//! the tenant, the type list, the start position (`Last-Event-ID` wins over
//! `?cursor=`; neither means the head at open time). Then the response is
//! `200 text/event-stream`, and [`stream::WatchStream`] produces its frames.

mod options;
mod sse;
mod stream;

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use futures_util::{Stream, StreamExt};
use http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderMap, HeaderValue};
use http::request::Parts;
use http::{Response, StatusCode};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use outbox_core::{ErrorCode, Pattern, Position};
use outbox_pg::ReadRequest;
use outbox_pg::internal::head::SharedHead;
use outbox_pg::tail::Tail;

pub use options::WatchOptions;

use crate::auth::{require_scope, tenant_to_read};
use crate::query::{Query, pattern_list, position};
use crate::service::OutboxService;
use crate::{ApiError, Body, Grant, scope};
use stream::{StreamContext, WatchStream};

/// The query parameters `/watch` takes.
const PARAMETERS: &[&str] = &["types", "tenantId", "cursor"];

/// Opens a stream, or refuses before it starts.
pub(crate) async fn watch(service: &OutboxService, parts: &Parts) -> Result<Response<Body>, ApiError> {
    let grant = service.authorizer.authorize(&parts.headers).await?;
    require_scope(&grant, scope::EVENTS_READ)?;
    let (request, start) = stream_request(&grant, parts.uri.query(), &parts.headers)?;
    if service.is_shut_down() {
        return Err(ApiError::new(ErrorCode::Unavailable, "the server is shutting down; reconnect"));
    }
    let tail = service.tail();
    let from_now = start.is_none();
    let start = match start {
        Some(start) => start,
        None => head(&service.heads, tail.as_ref()).await?,
    };
    // One grant for the registry and the stream.
    let grant = Arc::new(grant);
    let registration = service.registry.register(grant.clone());
    let context = StreamContext {
        pool: service.pool.clone(),
        authorizer: service.authorizer.clone(),
        options: service.options,
        shutdown: service.shutdown_signal(),
        stats: service.stats.clone(),
        tail,
    };
    service.stats.opened();
    Ok(sse_response(WatchStream::new(context, grant, registration, request, start, from_now)))
}

/// The read that `query` asks of `grant`'s events and where it starts (`None`: the head),
/// or the refusal naming the parameter or header.
pub fn stream_request(
    grant: &Grant,
    query: Option<&str>,
    headers: &HeaderMap,
) -> Result<(ReadRequest, Option<Position>), ApiError> {
    let query = Query::parse(query, PARAMETERS)?;
    let tenant = tenant_to_read(grant, query.get("tenantId"))?;
    let patterns = match query.get("types") {
        Some(list) => pattern_list(list)?,
        None => vec![Pattern::all()],
    };
    let start = start_position(headers, query.get("cursor"))?;
    Ok((ReadRequest::tenant(tenant).types(patterns), start))
}

/// Where a stream "from now" starts: the head at open time, or the tail's position when it
/// is further. Nothing lies between them: the tail's position was read first, and every row
/// before it was already visible when the head was read, so none of them is after the head.
/// Both are complete for every tenant, so such a stream joins the tail without a read of
/// its own.
async fn head(heads: &SharedHead, tail: Option<&Tail>) -> Result<Position, ApiError> {
    let tail_position = tail.and_then(Tail::position);
    let head = heads.head().await.map_err(|e| ApiError::from_pg("finding the head", e))?;
    Ok(tail_position.map_or(head, |position| position.max(head)))
}

/// Where the stream starts: strictly after `Last-Event-ID` when it is sent and not empty,
/// else after `?cursor=`, else `None` (the head).
fn start_position(headers: &HeaderMap, cursor: Option<&str>) -> Result<Option<Position>, ApiError> {
    if let Some(value) = headers.get("last-event-id") {
        let text = value.to_str().map_err(|_| ApiError::invalid("Last-Event-ID must be a position"))?.trim();
        if !text.is_empty() {
            return position("Last-Event-ID", text).map(Some);
        }
    }
    cursor.map(|cursor| position("cursor", cursor)).transpose()
}

/// The `200 text/event-stream` response whose body is the stream's frames.
fn sse_response(stream: WatchStream) -> Response<Body> {
    let frames = futures_util::stream::unfold(stream, |mut stream| async move {
        let frame = stream.next_frame().await?;
        Some((Ok::<_, Infallible>(Frame::data(frame)), stream))
    })
    .fuse(); // an ended stream stays ended, however often the body is polled
    let mut response = Response::new(BodyExt::boxed(StreamBody::new(SyncStream::new(frames))));
    *response.status_mut() = StatusCode::OK;
    // Sized for exactly these: hyper keeps a connection's last response headers for reuse,
    // so an open stream holds them as long as it lives.
    let mut headers = HeaderMap::with_capacity(3);
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache, no-transform"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    *response.headers_mut() = headers;
    response
}

/// A stream that is `Sync` because it is only ever reached through `&mut`: the response
/// body type must be `Sync`, and the stream's future (a database read in flight) is not.
/// `Mutex::get_mut` never locks, so this costs nothing.
struct SyncStream<S>(Mutex<Pin<Box<S>>>);

impl<S> SyncStream<S> {
    fn new(stream: S) -> SyncStream<S> {
        SyncStream(Mutex::new(Box::pin(stream)))
    }
}

impl<S: Stream> Stream for SyncStream<S> {
    type Item = S::Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        let inner = self.get_mut().0.get_mut().unwrap_or_else(PoisonError::into_inner);
        inner.as_mut().poll_next(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(last_event_id: Option<&str>, cursor: Option<&str>, expect: Result<Option<(u64, u64)>, ()>) {
        let mut headers = HeaderMap::new();
        if let Some(id) = last_event_id {
            headers.insert("last-event-id", HeaderValue::from_str(id).unwrap());
        }
        let got = start_position(&headers, cursor).map(|p| p.map(|p| (p.txid, p.seq))).map_err(|_| ());
        assert_eq!(got, expect, "{last_event_id:?} {cursor:?}");
    }

    #[test]
    fn last_event_id_wins_over_the_cursor() {
        check(None, None, Ok(None));
        check(None, Some("5:6"), Ok(Some((5, 6))));
        check(Some("7.8"), Some("5:6"), Ok(Some((7, 8))));
        check(Some("7:8"), None, Ok(Some((7, 8))));
        check(Some(""), Some("5.6"), Ok(Some((5, 6))));
        check(Some("7.x"), Some("5.6"), Err(()));
        check(None, Some("5"), Err(()));
    }
}
