//! The sink routes of the bundled server (SPEC §5.7), all with scope `admin`:
//!
//! | route | answer |
//! |---|---|
//! | `GET /sinks` | `{"items":[SinkStatus…]}` in configuration order |
//! | `GET /sinks/{id}` | one `SinkStatus`: position, lag, state, backoff, last error, lease holder, dead letters |
//! | `GET /sinks/{id}/dead-letters?cursor=&limit=&replayed=true` | `{"items":[DeadLetter…],"cursor":"<id>"}`, oldest first; `cursor` only when more follow |
//! | `POST /sinks/{id}/dead-letters/{dl}/replay` | `{"replayed":<dl>}` once the sink took it again |
//! | `DELETE /sinks/{id}/dead-letters/{dl}` | `{"discarded":<dl>}` |
//!
//! An unknown sink or dead letter is `NOT_FOUND`; a replay the sink refuses is `UNAVAILABLE`
//! with the sink's message, and the letter stays as it was.

use http::request::Parts;
use http::{Method, Response, StatusCode};
use outbox_core::ErrorCode;
use outbox_http::{Body, error_response, json_response};
use outbox_workers::{Error, SinkStatus};
use serde::Serialize;

use crate::app::{AppState, authorize_admin, method_not_allowed};
use crate::sinks::MAX_PAGE;
use outbox_pg::dead_letter::DeadLetter;

/// The default page of dead letters.
const DEFAULT_PAGE: u32 = 100;

/// Whether `path` is one of the sink routes.
pub fn serves(path: &str) -> bool {
    path == "/sinks" || path.starts_with("/sinks/")
}

/// Answers a request for one of the sink routes (none reads a body).
pub async fn handle(state: &AppState, request: &Parts) -> Response<Body> {
    let segments: Vec<&str> = request.uri.path().trim_end_matches('/').split('/').skip(2).collect();
    let method = &request.method;
    let allowed = match segments.as_slice() {
        [] | [_] | [_, "dead-letters"] => "GET",
        [_, "dead-letters", _, "replay"] => "POST",
        [_, "dead-letters", _] => "DELETE",
        _ => return error_response(ErrorCode::NotFound, format!("no route for {}", request.uri.path())),
    };
    let head = allowed == "GET" && method == Method::HEAD;
    if method.as_str() != allowed && !head {
        return method_not_allowed(allowed);
    }
    if let Err(refusal) = authorize_admin(state, &request.headers, "managing sinks").await {
        return refusal;
    }
    let sinks = &state.sinks;
    let query = request.uri.query().unwrap_or_default();
    match segments.as_slice() {
        [] => match sinks.statuses().await {
            Ok(items) => json_response(StatusCode::OK, &Items::<SinkStatus> { items, cursor: None }),
            Err(error) => refusal(&error),
        },
        [id] => match sinks.status(id).await {
            Ok(status) => json_response(StatusCode::OK, &status),
            Err(error) => refusal(&error),
        },
        [id, _] => {
            let page = match Page::parse(query) {
                Ok(page) => page,
                Err(message) => return error_response(ErrorCode::InvalidInput, message),
            };
            match sinks.dead_letters(id, page.after, page.limit, page.replayed).await {
                Ok((items, more)) => {
                    let cursor = more.then(|| items.last().map(|letter| letter.id.to_string())).flatten();
                    json_response(StatusCode::OK, &Items::<DeadLetter> { items, cursor })
                }
                Err(error) => refusal(&error),
            }
        }
        [id, _, letter, ..] => {
            let Ok(letter) = letter.parse::<i64>() else {
                return error_response(ErrorCode::NotFound, format!("sink {id:?} has no dead letter {letter:?}"));
            };
            if allowed == "POST" {
                match sinks.replay(id, letter).await {
                    Ok(()) => json_response(StatusCode::OK, &Replayed { replayed: letter }),
                    Err(error) => refusal(&error),
                }
            } else {
                match sinks.discard(id, letter).await {
                    Ok(()) => json_response(StatusCode::OK, &Discarded { discarded: letter }),
                    Err(error) => refusal(&error),
                }
            }
        }
    }
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

/// `?cursor=<id>&limit=<n>&replayed=true` of the dead-letter list.
struct Page {
    after: Option<i64>,
    limit: u32,
    replayed: bool,
}

impl Page {
    fn parse(query: &str) -> Result<Page, String> {
        let mut page = Page { after: None, limit: DEFAULT_PAGE, replayed: false };
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            match key.as_ref() {
                "cursor" => {
                    let after = value.parse().map_err(|_| format!("cursor: {value:?} is not a dead letter id"))?;
                    page.after = Some(after);
                }
                "limit" => {
                    page.limit = value
                        .parse()
                        .ok()
                        .filter(|limit| (1..=MAX_PAGE).contains(limit))
                        .ok_or_else(|| format!("limit: must be 1 to {MAX_PAGE}, got {value:?}"))?;
                }
                "replayed" => {
                    page.replayed =
                        value.parse().map_err(|_| format!("replayed: must be true or false, got {value:?}"))?;
                }
                other => return Err(format!("unknown parameter {other:?} (expected cursor, limit, replayed)")),
            }
        }
        Ok(page)
    }
}

/// The JSON refusal for a workers error: its code, and no database internals.
fn refusal(error: &Error) -> Response<Body> {
    match error {
        Error::Database(inner) => {
            tracing::warn!(error = %inner, "a sink route failed on the database");
            error_response(ErrorCode::Unavailable, "the database did not answer; try again")
        }
        other => error_response(other.code(), other.to_string()),
    }
}
