//! The sink routes (SPEC §5.7), all with scope `admin`, over the host's [`SinkAdmin`]:
//!
//! | route | answer |
//! |---|---|
//! | `GET /sinks` | `{"items":[<status>…]}` in the host's order |
//! | `GET /sinks/{id}` | one sink's status, as the host serializes it |
//! | `GET /sinks/{id}/dead-letters?cursor=&limit=&replayed=true` | `{"items":[DeadLetter…],"cursor":"<id>"}`, oldest first; `cursor` only when more follow |
//! | `POST /sinks/{id}/dead-letters/{dl}/replay` | `{"replayed":<dl>}` once the sink took it again |
//! | `DELETE /sinks/{id}/dead-letters/{dl}` | `{"discarded":<dl>}` |
//!
//! This crate knows nothing of the sinks themselves (they live in `outbox-workers`): the
//! host implements [`SinkAdmin`] over its configured sinks, and its refusals (an unknown
//! sink or dead letter is `NOT_FOUND`, a replay the sink refuses `UNAVAILABLE` with the
//! sink's message) are answered as they are. A host mounts [`SinkRoutes`] as it mounts
//! [`OutboxService`](crate::OutboxService), handing over the paths [`SinkRoutes::serves`].

use std::sync::Arc;

use http::request::Parts;
use http::{Method, Request, Response, StatusCode};
use outbox_core::ErrorCode;
use outbox_pg::internal::dead_letter::DeadLetter;
use serde::Serialize;

use crate::auth::authorize_admin;
use crate::query::{Query, number_in};
use crate::{ApiError, Authorizer, Body, BoxFuture, json_response};

/// The most dead letters one page of `GET /sinks/{id}/dead-letters` lists.
pub const MAX_DEAD_LETTER_PAGE: u32 = 1000;

/// The page of dead letters when `limit` is not given.
const DEFAULT_PAGE: usize = 100;

/// The parameters of `GET /sinks/{id}/dead-letters`.
const PAGE_PARAMETERS: &[&str] = &["cursor", "limit", "replayed"];

/// One page of a sink's dead letters, as `GET /sinks/{id}/dead-letters` asks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadLetterPage {
    /// Only letters whose id follows this one (the previous page's `cursor`).
    pub after: Option<i64>,
    /// At most this many letters, 1 to [`MAX_DEAD_LETTER_PAGE`].
    pub limit: u32,
    /// Whether letters already replayed are listed too.
    pub include_replayed: bool,
}

/// The host's configured sinks, as the sink routes show and operate them.
///
/// A refusal is answered as it is, so the host decides its code and message (and keeps
/// database details out of it, see [`ApiError::from_pg`]).
pub trait SinkAdmin: Send + Sync + 'static {
    /// A sink's status: the answer of `GET /sinks/{id}` and an item of `GET /sinks`.
    type Status: Serialize + Send;

    /// The status of every sink, in the order `GET /sinks` lists them.
    fn statuses(&self) -> BoxFuture<'_, Result<Vec<Self::Status>, ApiError>>;

    /// The status of sink `id`.
    fn status<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Self::Status, ApiError>>;

    /// One `page` of sink `id`'s dead letters, oldest first, and whether more follow.
    fn dead_letters<'a>(
        &'a self,
        id: &'a str,
        page: DeadLetterPage,
    ) -> BoxFuture<'a, Result<(Vec<DeadLetter>, bool), ApiError>>;

    /// Delivers dead letter `letter` of sink `id` again and marks it replayed.
    fn replay<'a>(&'a self, id: &'a str, letter: i64) -> BoxFuture<'a, Result<(), ApiError>>;

    /// Deletes dead letter `letter` of sink `id`.
    fn discard<'a>(&'a self, id: &'a str, letter: i64) -> BoxFuture<'a, Result<(), ApiError>>;
}

/// The mountable sink routes: `GET /sinks`, `GET /sinks/{id}` and the dead letters.
///
/// Clones share the host's sinks and authorizer.
pub struct SinkRoutes<S> {
    sinks: Arc<S>,
    authorizer: Arc<dyn Authorizer>,
}

impl<S> Clone for SinkRoutes<S> {
    fn clone(&self) -> Self {
        SinkRoutes { sinks: self.sinks.clone(), authorizer: self.authorizer.clone() }
    }
}

impl<S> std::fmt::Debug for SinkRoutes<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SinkRoutes").finish_non_exhaustive()
    }
}

impl<S: SinkAdmin> SinkRoutes<S> {
    /// The routes over `sinks`, admitting callers whose grant from `authorizer` is an
    /// administrator's.
    pub fn new(sinks: Arc<S>, authorizer: Arc<dyn Authorizer>) -> SinkRoutes<S> {
        SinkRoutes { sinks, authorizer }
    }

    /// Whether `path` is one of the sink routes (so a host router can delegate to them).
    pub fn serves(path: &str) -> bool {
        path == "/sinks" || path.starts_with("/sinks/")
    }

    /// Handles one request (none of the routes reads a body). An unknown path under
    /// `/sinks/` is a 404 JSON refusal; a known path with a method it does not serve is a
    /// 405 with `Allow`.
    pub async fn handle<B>(&self, request: Request<B>) -> Response<Body> {
        let (parts, _) = request.into_parts();
        self.route(&parts).await.unwrap_or_else(ApiError::into_response)
    }

    async fn route(&self, parts: &Parts) -> Result<Response<Body>, ApiError> {
        let path = parts.uri.path();
        let segments: Vec<&str> = path.trim_end_matches('/').split('/').skip(2).collect();
        let allow = allowed_methods(&segments)
            .ok_or_else(|| ApiError::new(ErrorCode::NotFound, format!("no route for {path}")))?;
        let head = allow == "GET" && parts.method == Method::HEAD;
        if parts.method.as_str() != allow && !head {
            return Err(ApiError::method_not_allowed(allow));
        }
        authorize_admin(self.authorizer.as_ref(), &parts.headers, "managing sinks").await?;
        match segments.as_slice() {
            [] => Ok(ok(&Items { items: self.sinks.statuses().await?, cursor: None })),
            [id] => Ok(ok(&self.sinks.status(id).await?)),
            [id, _] => self.dead_letters(id, parts.uri.query()).await,
            [id, _, letter, ..] => self.letter(id, letter, &parts.method).await,
        }
    }

    async fn dead_letters(&self, id: &str, query: Option<&str>) -> Result<Response<Body>, ApiError> {
        let (items, more) = self.sinks.dead_letters(id, page(query)?).await?;
        let cursor = more.then(|| items.last().map(|letter| letter.id.to_string())).flatten();
        Ok(ok(&Items { items, cursor }))
    }

    /// Replays (`POST …/replay`) or discards (`DELETE`) one dead letter.
    async fn letter(&self, id: &str, letter: &str, method: &Method) -> Result<Response<Body>, ApiError> {
        let Ok(letter) = letter.parse::<i64>() else {
            return Err(ApiError::new(ErrorCode::NotFound, format!("sink {id:?} has no dead letter {letter:?}")));
        };
        if method == Method::POST {
            self.sinks.replay(id, letter).await?;
            Ok(ok(&Replayed { replayed: letter }))
        } else {
            self.sinks.discard(id, letter).await?;
            Ok(ok(&Discarded { discarded: letter }))
        }
    }
}

/// The methods the sink route at `segments` (the path after `/sinks`) allows, if it is one.
fn allowed_methods(segments: &[&str]) -> Option<&'static str> {
    match segments {
        [] | [_] | [_, "dead-letters"] => Some("GET"),
        [_, "dead-letters", _, "replay"] => Some("POST"),
        [_, "dead-letters", _] => Some("DELETE"),
        _ => None,
    }
}

/// `?cursor=<id>&limit=<n>&replayed=true` of the dead-letter list.
fn page(query: Option<&str>) -> Result<DeadLetterPage, ApiError> {
    let query = Query::parse(query, PAGE_PARAMETERS)?;
    let after = match query.get("cursor") {
        Some(text) => {
            Some(text.parse().map_err(|_| ApiError::invalid(format!("cursor: {text:?} is not a dead letter id")))?)
        }
        None => None,
    };
    let limit = number_in("limit", query.get("limit"), 1..=MAX_DEAD_LETTER_PAGE as usize, DEFAULT_PAGE)?;
    let include_replayed = match query.get("replayed") {
        Some(text) => {
            text.parse().map_err(|_| ApiError::invalid(format!("replayed: must be true or false, got {text:?}")))?
        }
        None => false,
    };
    Ok(DeadLetterPage { after, limit: limit as u32, include_replayed })
}

fn ok(value: &impl Serialize) -> Response<Body> {
    json_response(StatusCode::OK, value)
}

#[derive(Serialize)]
struct Items<T> {
    items: Vec<T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cursor: Option<String>,
}

#[derive(Serialize)]
struct Replayed {
    replayed: i64,
}

#[derive(Serialize)]
struct Discarded {
    discarded: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(query: Option<&str>, expect: Result<(Option<i64>, u32, bool), &str>) {
        let got = page(query).map(|page| (page.after, page.limit, page.include_replayed));
        assert_eq!(got.as_ref().map_err(ApiError::message), expect.as_ref().map_err(|message| *message), "{query:?}");
    }

    #[test]
    fn dead_letter_pages() {
        check(None, Ok((None, 100, false)));
        check(Some("cursor=41&limit=1000&replayed=true"), Ok((Some(41), 1000, true)));
        check(Some("cursor=dl_1"), Err(r#"cursor: "dl_1" is not a dead letter id"#));
        check(Some("limit=0"), Err("limit must be a whole number from 1 to 1000"));
        check(Some("replayed=yes"), Err(r#"replayed: must be true or false, got "yes""#));
        check(Some("limit=5&limit=6"), Err("query parameter limit is given more than once"));
        check(Some("bogus=1"), Err(r#"unknown query parameter "bogus"; this route takes cursor, limit, replayed"#));
    }

    #[test]
    fn the_routes_and_their_methods() {
        assert_eq!(allowed_methods(&[]), Some("GET"));
        assert_eq!(allowed_methods(&["hook"]), Some("GET"));
        assert_eq!(allowed_methods(&["hook", "dead-letters"]), Some("GET"));
        assert_eq!(allowed_methods(&["hook", "dead-letters", "7"]), Some("DELETE"));
        assert_eq!(allowed_methods(&["hook", "dead-letters", "7", "replay"]), Some("POST"));
        assert_eq!(allowed_methods(&["hook", "status"]), None);
        assert_eq!(allowed_methods(&["hook", "dead-letters", "7", "retry"]), None);
    }
}
