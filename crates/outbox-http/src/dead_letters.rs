//! What the sink and the webhook routes share about dead letters: a page asked for by
//! `?cursor=&limit=&replayed=`, the letter as the answers show it, and the bulk replay
//! (`POST …/dead-letters/replay`).
//!
//! A bulk replay takes `{"since": "<RFC 3339>"}` (every pending letter whose last failure
//! is at or after it) or `{}` (every pending letter), replays them one at a time, oldest
//! first, and answers `{"replayed":[<id>…],"refused":[{"id":<id>,"error":"…"}…]}`: a letter
//! its target refuses again stays pending and the others still go.

use bytes::Bytes;
use outbox_core::{Event, Position, millis};
use outbox_pg::internal::dead_letter::{DeadLetter, MAX_PAGE, Page};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::query::{Query, number_in};
use crate::{ApiError, BoxFuture};

/// The page of dead letters when `limit` is not given.
const DEFAULT_PAGE: usize = 100;

/// The query parameters of a dead-letter list.
pub(crate) const PAGE_PARAMETERS: &[&str] = &["cursor", "limit", "replayed"];

/// `?cursor=<id>&limit=<n>&replayed=true` of a dead-letter list, from `query`.
pub(crate) fn page(query: &Query) -> Result<Page, ApiError> {
    let after = match query.get("cursor").filter(|text| !text.is_empty()) {
        Some(text) => {
            Some(text.parse().map_err(|_| ApiError::invalid(format!("cursor: {text:?} is not a dead letter id")))?)
        }
        None => None,
    };
    let limit = number_in("limit", query.get("limit"), 1..=MAX_PAGE as usize, DEFAULT_PAGE)?;
    let include_replayed = match query.get("replayed") {
        Some(text) => {
            text.parse().map_err(|_| ApiError::invalid(format!("replayed: must be true or false, got {text:?}")))?
        }
        None => false,
    };
    Ok(Page { after, limit: u32::try_from(limit).unwrap_or(MAX_PAGE), include_replayed })
}

/// A dead letter as the answers and the CLI show it: camelCase, times in RFC 3339 UTC with
/// milliseconds, `replayedAt` only once replayed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeadLetterView<'a> {
    /// Its id, unique across sinks.
    pub id: i64,
    /// The sink that refused the event.
    pub sink: &'a str,
    /// The event's position.
    pub position: Position,
    /// The event itself.
    pub event: &'a Event,
    /// The last refusal's message.
    pub error: &'a str,
    /// How many delivery attempts of this event failed.
    pub attempts: u32,
    /// When the first attempt failed.
    #[serde(with = "millis")]
    pub first_failed_at: OffsetDateTime,
    /// When the last attempt failed.
    #[serde(with = "millis")]
    pub last_failed_at: OffsetDateTime,
    /// When a replay delivered it, if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replayed_at: Option<String>,
}

impl<'a> From<&'a DeadLetter> for DeadLetterView<'a> {
    fn from(letter: &'a DeadLetter) -> DeadLetterView<'a> {
        DeadLetterView {
            id: letter.id,
            sink: &letter.sink,
            position: letter.position,
            event: &letter.event,
            error: &letter.error,
            attempts: letter.attempts,
            first_failed_at: letter.first_failed_at,
            last_failed_at: letter.last_failed_at,
            replayed_at: letter.replayed_at.map(millis::format),
        }
    }
}

/// A list answer: `{"items":[…],"cursor":"…"}`, `cursor` only when more follow.
#[derive(Serialize)]
pub(crate) struct Items<T> {
    pub(crate) items: Vec<T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) cursor: Option<String>,
}

impl<T> Items<T> {
    /// All there is: no cursor.
    pub(crate) fn all(items: Vec<T>) -> Items<T> {
        Items { items, cursor: None }
    }
}

/// One page of `letters` as answered: the cursor is the last letter's id when `more` follow.
pub(crate) fn letters_page(letters: &[DeadLetter], more: bool) -> Items<DeadLetterView<'_>> {
    let cursor = more.then(|| letters.last().map(|letter| letter.id.to_string())).flatten();
    Items { items: letters.iter().map(DeadLetterView::from).collect(), cursor }
}

/// The dead letters of one sink or subscription, as a bulk replay reads and replays them.
pub(crate) trait Letters: Sync {
    /// One page of the letters, oldest first, and whether more follow.
    fn page(&self, page: Page) -> BoxFuture<'_, Result<(Vec<DeadLetter>, bool), ApiError>>;

    /// Delivers letter `id` again and marks it replayed.
    fn replay(&self, id: i64) -> BoxFuture<'_, Result<(), ApiError>>;
}

/// The answer of a bulk replay.
#[derive(Debug, Default, Serialize)]
pub(crate) struct ReplayReport {
    replayed: Vec<i64>,
    refused: Vec<Refused>,
}

#[derive(Debug, Serialize)]
struct Refused {
    id: i64,
    error: String,
}

/// Replays every pending letter of `letters` chosen by `body` (`{"since": time}` or `{}`),
/// oldest first; a refusal is reported and the others still go.
pub(crate) async fn replay_all(letters: &dyn Letters, body: &Bytes) -> Result<ReplayReport, ApiError> {
    let since = parse_since(body)?;
    let mut report = ReplayReport::default();
    let mut page = Page::pending(MAX_PAGE);
    loop {
        let (letters_of_page, more) = letters.page(page).await?;
        for letter in letters_of_page.iter().filter(|letter| since.is_none_or(|since| letter.last_failed_at >= since)) {
            match letters.replay(letter.id).await {
                Ok(()) => report.replayed.push(letter.id),
                Err(error) => report.refused.push(Refused { id: letter.id, error: error.message().to_owned() }),
            }
        }
        match letters_of_page.last() {
            Some(last) if more => page.after = Some(last.id),
            _ => return Ok(report),
        }
    }
}

/// `{"since": "<RFC 3339>"}`, `{}` or an empty body (every pending letter).
fn parse_since(body: &[u8]) -> Result<Option<OffsetDateTime>, ApiError> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Since {
        #[serde(default, with = "time::serde::rfc3339::option")]
        since: Option<OffsetDateTime>,
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let Since { since } = crate::body::parse_json(body)?;
    Ok(since)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(query: Option<&str>, expect: Result<(Option<i64>, u32, bool), &str>) {
        let got = Query::parse(query, PAGE_PARAMETERS)
            .and_then(|query| page(&query))
            .map(|page| (page.after, page.limit, page.include_replayed));
        assert_eq!(got.as_ref().map_err(ApiError::message), expect.as_ref().map_err(|message| *message), "{query:?}");
    }

    #[test]
    fn dead_letter_pages() {
        check(None, Ok((None, 100, false)));
        check(Some("cursor=41&limit=1000&replayed=true"), Ok((Some(41), 1000, true)));
        check(Some("cursor="), Ok((None, 100, false)));
        check(Some("cursor=dl_1"), Err(r#"cursor: "dl_1" is not a dead letter id"#));
        check(Some("limit=0"), Err("limit must be a whole number from 1 to 1000"));
        check(Some("replayed=yes"), Err(r#"replayed: must be true or false, got "yes""#));
        check(Some("limit=5&limit=6"), Err("query parameter limit is given more than once"));
        check(Some("bogus=1"), Err(r#"unknown query parameter "bogus"; this route takes cursor, limit, replayed"#));
    }

    #[test]
    fn a_bulk_replay_names_a_time_or_nothing() {
        assert_eq!(parse_since(b"").unwrap(), None);
        assert_eq!(parse_since(b"{}").unwrap(), None);
        let since = parse_since(br#"{"since":"2026-12-05T10:00:00Z"}"#).unwrap().unwrap();
        assert_eq!(since.unix_timestamp(), 1_796_464_800);
        assert!(parse_since(br#"{"since":"yesterday"}"#).is_err());
        assert!(parse_since(br#"{"until":"2026-12-05T10:00:00Z"}"#).is_err());
    }
}
