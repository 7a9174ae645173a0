//! The sink routes (SPEC §5.7), all with scope `admin`, over the host's [`SinkAdmin`]:
//!
//! | route | answer |
//! |---|---|
//! | `GET /sinks` | `{"items":[<status>…]}` in the host's order |
//! | `GET /sinks/{id}` | one sink's status, as the host serializes it |
//! | `GET /sinks/{id}/dead-letters?cursor=&limit=&replayed=true` | `{"items":[DeadLetter…],"cursor":"<id>"}`, oldest first; `cursor` only when more follow |
//! | `POST /sinks/{id}/dead-letters/{dl}/replay` | `{"replayed":<dl>}` once the sink took it again |
//! | `DELETE /sinks/{id}/dead-letters/{dl}` | `{"discarded":<dl>}` |
//! | `POST /sinks/{id}/dead-letters/replay` | `{"since": time}` or `{}`: every pending letter that failed since then (or all), `{"replayed":[…],"refused":[{"id","error"}]}` |
//!
//! This crate knows nothing of the sinks themselves (they live in `outbox-workers`): the
//! host implements [`SinkAdmin`] over its configured sinks, and its refusals (an unknown
//! sink or dead letter is `NOT_FOUND`, a replay the sink refuses `UNAVAILABLE` with the
//! sink's message) are answered as they are. A host mounts [`SinkRoutes`] as it mounts
//! [`OutboxService`](crate::OutboxService), handing over the paths [`SinkRoutes::serves`].

use std::fmt::Display;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body::Body as HttpBody;
use outbox_core::ErrorCode;
use outbox_pg::internal::dead_letter::DeadLetter;
use serde::Serialize;

use crate::auth::authorize_admin;
use crate::dead_letters::{self, Items, Letters, letters_page};
use crate::query::Query;
use crate::route::{Reads, pick, read, segments};
use crate::{ApiError, Authorizer, Body, BoxFuture, json_response};

pub use outbox_pg::internal::dead_letter::{MAX_PAGE as MAX_DEAD_LETTER_PAGE, Page as DeadLetterPage};

/// The largest body of a bulk replay.
const BODY_LIMIT: usize = 4 * 1024;

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

/// One sink route, chosen once from the path after `/sinks` and the method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SinkRoute<'a> {
    List,
    Status(&'a str),
    DeadLetters(&'a str),
    ReplayAll(&'a str),
    Replay(&'a str, &'a str),
    Discard(&'a str, &'a str),
}

impl<'a> SinkRoute<'a> {
    /// Each method the path at `segments` serves and the route it means (none: no such path).
    fn served(segments: &[&'a str]) -> Vec<(Method, SinkRoute<'a>)> {
        match *segments {
            [] => vec![(Method::GET, SinkRoute::List)],
            [id] if !id.is_empty() => vec![(Method::GET, SinkRoute::Status(id))],
            [id, "dead-letters"] if !id.is_empty() => vec![(Method::GET, SinkRoute::DeadLetters(id))],
            [id, "dead-letters", "replay"] if !id.is_empty() => vec![(Method::POST, SinkRoute::ReplayAll(id))],
            [id, "dead-letters", letter, "replay"] if !id.is_empty() => {
                vec![(Method::POST, SinkRoute::Replay(id, letter))]
            }
            [id, "dead-letters", letter] if !id.is_empty() && !letter.is_empty() => {
                vec![(Method::DELETE, SinkRoute::Discard(id, letter))]
            }
            _ => Vec::new(),
        }
    }
}

impl Reads for SinkRoute<'_> {
    fn parameters(&self) -> &'static [&'static str] {
        if matches!(self, SinkRoute::DeadLetters(_)) { dead_letters::PAGE_PARAMETERS } else { &[] }
    }

    fn has_body(&self) -> bool {
        matches!(self, SinkRoute::ReplayAll(_))
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

    /// Handles one request. An unknown path under `/sinks/` is a 404 JSON refusal; a known
    /// path with a method it does not serve is a 405 with `Allow`.
    pub async fn handle<B>(&self, request: Request<B>) -> Response<Body>
    where
        B: HttpBody<Data = Bytes> + Send + 'static,
        B::Error: Display,
    {
        let (parts, body) = request.into_parts();
        let answer = async {
            let path = parts.uri.path();
            let route = pick(path, &parts.method, SinkRoute::served(&segments(path)))?;
            authorize_admin(self.authorizer.as_ref(), &parts.headers, "managing sinks").await?;
            let (query, body) = read(&route, &parts.uri, body, BODY_LIMIT).await?;
            self.answer(route, &query, body).await
        };
        Box::pin(answer).await.unwrap_or_else(ApiError::into_response)
    }

    async fn answer(&self, route: SinkRoute<'_>, query: &Query, body: Bytes) -> Result<Response<Body>, ApiError> {
        match route {
            SinkRoute::List => Ok(ok(&Items::all(self.sinks.statuses().await?))),
            SinkRoute::Status(id) => Ok(ok(&self.sinks.status(id).await?)),
            SinkRoute::DeadLetters(id) => {
                let (letters, more) = self.sinks.dead_letters(id, dead_letters::page(query)?).await?;
                Ok(ok(&letters_page(&letters, more)))
            }
            SinkRoute::ReplayAll(id) => {
                let letters = SinkLetters { sinks: self.sinks.as_ref(), id };
                Ok(ok(&dead_letters::replay_all(&letters, &body).await?))
            }
            SinkRoute::Replay(id, letter) => {
                let letter = letter_id(id, letter)?;
                self.sinks.replay(id, letter).await?;
                Ok(ok(&serde_json::json!({ "replayed": letter })))
            }
            SinkRoute::Discard(id, letter) => {
                let letter = letter_id(id, letter)?;
                self.sinks.discard(id, letter).await?;
                Ok(ok(&serde_json::json!({ "discarded": letter })))
            }
        }
    }
}

/// One sink's dead letters, as a bulk replay reads and replays them.
struct SinkLetters<'a, S> {
    sinks: &'a S,
    id: &'a str,
}

impl<S: SinkAdmin> Letters for SinkLetters<'_, S> {
    fn page(&self, page: DeadLetterPage) -> BoxFuture<'_, Result<(Vec<DeadLetter>, bool), ApiError>> {
        self.sinks.dead_letters(self.id, page)
    }

    fn replay(&self, id: i64) -> BoxFuture<'_, Result<(), ApiError>> {
        self.sinks.replay(self.id, id)
    }
}

fn letter_id(sink: &str, letter: &str) -> Result<i64, ApiError> {
    letter
        .parse()
        .map_err(|_| ApiError::new(ErrorCode::NotFound, format!("sink {sink:?} has no dead letter {letter:?}")))
}

fn ok(value: &impl Serialize) -> Response<Body> {
    json_response(StatusCode::OK, value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn allow(segments: &[&str]) -> Option<String> {
        let served = SinkRoute::served(segments);
        (!served.is_empty()).then(|| crate::route::allow(&served))
    }

    #[test]
    fn the_routes_and_their_methods() {
        assert_eq!(allow(&[]).as_deref(), Some("GET"));
        assert_eq!(allow(&["hook"]).as_deref(), Some("GET"));
        assert_eq!(allow(&["hook", "dead-letters"]).as_deref(), Some("GET"));
        assert_eq!(allow(&["hook", "dead-letters", "replay"]).as_deref(), Some("POST"));
        assert_eq!(allow(&["hook", "dead-letters", "7"]).as_deref(), Some("DELETE"));
        assert_eq!(allow(&["hook", "dead-letters", "7", "replay"]).as_deref(), Some("POST"));
        assert_eq!(allow(&["hook", "status"]), None);
        assert_eq!(allow(&["hook", "dead-letters", "7", "retry"]), None);
        assert_eq!(allow(&[""]), None);
        let served = SinkRoute::served(&["hook", "dead-letters", "7"]);
        assert_eq!(pick("/sinks/hook/dead-letters/7", &Method::DELETE, served), Ok(SinkRoute::Discard("hook", "7")));
    }
}
