//! Choosing a route from its path and method, with the `Allow` of a 405 taken from the
//! same table: a router lists, for the path's segments, each method it serves there and
//! the route that method means; [`pick`] takes the request's, or refuses.

use std::fmt::Display;

use bytes::Bytes;
use http::{Method, Uri};
use http_body::Body as HttpBody;
use outbox_core::ErrorCode;

use crate::query::Query;
use crate::{ApiError, read_limited};

/// What a route reads of a request beyond its path and method.
pub(crate) trait Reads {
    /// The query parameters it takes; any other is refused.
    fn parameters(&self) -> &'static [&'static str];
    /// Whether it reads a body.
    fn has_body(&self) -> bool;
}

/// The query and the body `route` reads from `uri` and `body` (an empty body for a route
/// that reads none, which is not read): an unknown parameter or a body over `limit` is refused.
pub(crate) async fn read<R: Reads, B>(route: &R, uri: &Uri, body: B, limit: usize) -> Result<(Query, Bytes), ApiError>
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Display,
{
    let query = Query::parse(uri.query(), route.parameters())?;
    let body = if route.has_body() { read_limited(body, limit).await? } else { Bytes::new() };
    Ok((query, body))
}

/// The segments of `path` after its first one (`/webhooks/wh_1/ping` → `["wh_1", "ping"]`),
/// a trailing slash ignored.
pub(crate) fn segments(path: &str) -> Vec<&str> {
    path.trim_end_matches('/').split('/').skip(2).collect()
}

/// The route `method` means among `served` (each method of the path and its route): `HEAD`
/// is served as `GET`. A path that serves nothing is `NOT_FOUND`; a method it does not
/// serve is a 405 whose `Allow` lists the methods of `served`.
pub(crate) fn pick<R>(path: &str, method: &Method, served: Vec<(Method, R)>) -> Result<R, ApiError> {
    if served.is_empty() {
        return Err(ApiError::new(ErrorCode::NotFound, format!("no route for {path}")));
    }
    let wanted = if method == Method::HEAD { &Method::GET } else { method };
    let allow = allow(&served);
    served
        .into_iter()
        .find_map(|(served, route)| (served == wanted).then_some(route))
        .ok_or_else(|| ApiError::method_not_allowed(&allow))
}

/// The `Allow` of `served`: its methods, in its order.
pub(crate) fn allow<R>(served: &[(Method, R)]) -> String {
    served.iter().map(|(method, _)| method.as_str()).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_method_picks_its_route_or_is_refused_with_allow() {
        let served = || vec![(Method::GET, "list"), (Method::POST, "create")];
        assert_eq!(pick("/x", &Method::POST, served()), Ok("create"));
        assert_eq!(pick("/x", &Method::HEAD, served()), Ok("list"));
        let refused = pick("/x", &Method::DELETE, served()).unwrap_err();
        assert_eq!(refused.code(), ErrorCode::MethodNotAllowed);
        assert_eq!(refused.message(), "this path serves only GET, POST");
        assert_eq!(pick::<&str>("/x/y", &Method::GET, vec![]).unwrap_err().code(), ErrorCode::NotFound);
        assert_eq!(segments("/webhooks/wh_1/ping/"), ["wh_1", "ping"]);
        assert!(segments("/webhooks").is_empty());
    }
}
