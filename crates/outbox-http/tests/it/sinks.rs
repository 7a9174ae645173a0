//! The sink routes over a host's `SinkAdmin`: the paths, methods, scope and answers they
//! promise, whatever the host's sinks are.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use outbox_core::{ErrorCode, Event, Position};
use outbox_http::{ApiError, BoxFuture, DeadLetterPage, SinkAdmin, SinkRoutes};
use outbox_pg::internal::dead_letter::DeadLetter;
use serde::Serialize;

use crate::support::TestAuthorizer;

/// One sink, `hook`, whose only dead letter is 7; it remembers the pages it was asked for.
/// With `pending` letters, a page lists those after its cursor (two a page) and a replay
/// takes any of them but 9.
#[derive(Default)]
struct OneSink {
    pages: Mutex<Vec<DeadLetterPage>>,
    pending: Vec<DeadLetter>,
    replayed: Mutex<Vec<i64>>,
}

/// A pending letter `id` of `hook` that last failed at `failed` (Unix seconds).
fn letter(id: i64, failed: i64) -> DeadLetter {
    let time = time::OffsetDateTime::from_unix_timestamp(failed).unwrap();
    let event = Event {
        id: format!("evt_{id}"),
        event_type: "node.joined".into(),
        tenant_id: "acme".into(),
        subject: "node/n1".into(),
        time,
        sequence: Position::new(10, id as u64),
        data: Default::default(),
    };
    let position = event.sequence;
    DeadLetter {
        id,
        sink: "hook".into(),
        position,
        event,
        error: "HTTP 500".into(),
        attempts: 3,
        first_failed_at: time,
        last_failed_at: time,
        replayed_at: None,
    }
}

#[derive(Serialize)]
struct Status {
    id: &'static str,
    lag: u64,
}

fn find(id: &str) -> Result<(), ApiError> {
    match id {
        "hook" => Ok(()),
        _ => Err(ApiError::new(ErrorCode::NotFound, format!("no sink {id:?} is configured"))),
    }
}

fn find_letter(id: &str, letter: i64) -> Result<(), ApiError> {
    find(id)?;
    match letter {
        7 => Ok(()),
        _ => Err(ApiError::new(ErrorCode::NotFound, format!("sink {id:?} has no dead letter {letter}"))),
    }
}

impl SinkAdmin for OneSink {
    type Status = Status;

    fn statuses(&self) -> BoxFuture<'_, Result<Vec<Status>, ApiError>> {
        Box::pin(async { Ok(vec![Status { id: "hook", lag: 3 }]) })
    }

    fn status<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Status, ApiError>> {
        Box::pin(async move { find(id).map(|()| Status { id: "hook", lag: 3 }) })
    }

    fn dead_letters<'a>(
        &'a self,
        id: &'a str,
        page: DeadLetterPage,
    ) -> BoxFuture<'a, Result<(Vec<DeadLetter>, bool), ApiError>> {
        self.pages.lock().unwrap().push(page);
        let after: Vec<DeadLetter> =
            self.pending.iter().filter(|letter| Some(letter.id) > page.after).take(3).cloned().collect();
        let more = after.len() > 2;
        Box::pin(async move { find(id).map(|()| (after.into_iter().take(2).collect(), more)) })
    }

    fn replay<'a>(&'a self, id: &'a str, letter: i64) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            if self.pending.iter().any(|pending| pending.id == letter) {
                if letter == 9 {
                    return Err(ApiError::new(ErrorCode::Unavailable, "HTTP 500 again"));
                }
                self.replayed.lock().unwrap().push(letter);
                return Ok(());
            }
            find_letter(id, letter)
        })
    }

    fn discard<'a>(&'a self, id: &'a str, letter: i64) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move { find_letter(id, letter) })
    }
}

struct Routes {
    routes: SinkRoutes<OneSink>,
    sinks: Arc<OneSink>,
}

impl Routes {
    fn new() -> Routes {
        Routes::over(OneSink::default())
    }

    fn over(sink: OneSink) -> Routes {
        let sinks = Arc::new(sink);
        Routes { routes: SinkRoutes::new(sinks.clone(), Arc::new(TestAuthorizer::default())), sinks }
    }

    /// The status, `Allow` header and body of `method path` with `token`.
    async fn send(&self, method: Method, path: &str, token: Option<&str>) -> (StatusCode, Option<String>, String) {
        self.send_body(method, path, token, "").await
    }

    /// Like [`Routes::send`], with a request body.
    async fn send_body(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: &'static str,
    ) -> (StatusCode, Option<String>, String) {
        let mut request = Request::builder().method(method).uri(path);
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        let response = self.routes.handle(request.body(Full::new(Bytes::from_static(body.as_bytes()))).unwrap()).await;
        let status = response.status();
        let allow = response.headers().get("allow").map(|allow| allow.to_str().unwrap().to_owned());
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, allow, String::from_utf8(body.to_vec()).unwrap())
    }

    async fn check(&self, method: Method, path: &str, token: Option<&str>, status: u16, body: &str) {
        let (got, _, got_body) = self.send(method.clone(), path, token).await;
        assert_eq!((got.as_u16(), got_body.as_str()), (status, body), "{method} {path} with {token:?}");
    }
}

const ADMIN: Option<&str> = Some("ops:admin");

#[tokio::test]
async fn the_routes_answer_an_administrator() {
    let routes = Routes::new();
    routes.check(Method::GET, "/sinks", ADMIN, 200, r#"{"items":[{"id":"hook","lag":3}]}"#).await;
    routes.check(Method::GET, "/sinks/", ADMIN, 200, r#"{"items":[{"id":"hook","lag":3}]}"#).await;
    routes.check(Method::HEAD, "/sinks/hook", ADMIN, 200, r#"{"id":"hook","lag":3}"#).await;
    routes.check(Method::GET, "/sinks/hook/dead-letters", ADMIN, 200, r#"{"items":[]}"#).await;
    routes.check(Method::POST, "/sinks/hook/dead-letters/7/replay", ADMIN, 200, r#"{"replayed":7}"#).await;
    routes.check(Method::DELETE, "/sinks/hook/dead-letters/7", ADMIN, 200, r#"{"discarded":7}"#).await;
}

#[tokio::test]
async fn a_page_of_dead_letters_is_what_the_query_asks() {
    let routes = Routes::new();
    routes
        .check(Method::GET, "/sinks/hook/dead-letters?cursor=41&limit=5&replayed=true", ADMIN, 200, r#"{"items":[]}"#)
        .await;
    let pages = routes.sinks.pages.lock().unwrap().clone();
    assert_eq!(pages, [DeadLetterPage { after: Some(41), limit: 5, include_replayed: true }]);
}

#[tokio::test]
async fn refusals_name_what_is_wrong() {
    let routes = Routes::new();
    let missing = r#"{"error":{"code":"UNAUTHENTICATED","message":"a valid bearer token is required"}}"#;
    routes.check(Method::GET, "/sinks", None, 401, missing).await;
    let reader = r#"{"error":{"code":"ACCESS_DENIED","message":"managing sinks needs the admin scope"}}"#;
    routes.check(Method::GET, "/sinks", Some("acme:read"), 403, reader).await;
    let unknown = r#"{"error":{"code":"NOT_FOUND","message":"no sink \"nope\" is configured"}}"#;
    routes.check(Method::GET, "/sinks/nope", ADMIN, 404, unknown).await;
    let no_route = r#"{"error":{"code":"NOT_FOUND","message":"no route for /sinks/hook/other"}}"#;
    routes.check(Method::GET, "/sinks/hook/other", Some("acme:read"), 404, no_route).await;
    let bad_id = r#"{"error":{"code":"NOT_FOUND","message":"sink \"hook\" has no dead letter \"dl_1\""}}"#;
    routes.check(Method::DELETE, "/sinks/hook/dead-letters/dl_1", ADMIN, 404, bad_id).await;
    let limit = r#"{"error":{"code":"INVALID_INPUT","message":"limit must be a whole number from 1 to 1000"}}"#;
    routes.check(Method::GET, "/sinks/hook/dead-letters?limit=0", ADMIN, 400, limit).await;
}

#[tokio::test]
async fn another_method_is_refused_with_allow_before_the_caller_is_asked() {
    let routes = Routes::new();
    for (method, path, allow) in [
        (Method::POST, "/sinks", "GET"),
        (Method::DELETE, "/sinks/hook", "GET"),
        (Method::POST, "/sinks/hook/dead-letters", "GET"),
        (Method::GET, "/sinks/hook/dead-letters/7/replay", "POST"),
        (Method::GET, "/sinks/hook/dead-letters/7", "DELETE"),
        (Method::GET, "/sinks/hook/dead-letters/replay", "POST"),
    ] {
        let (status, got, body) = routes.send(method.clone(), path, None).await;
        assert_eq!((status.as_u16(), got.as_deref()), (405, Some(allow)), "{method} {path}");
        assert!(body.contains("METHOD_NOT_ALLOWED"), "{method} {path}: {body}");
    }
    assert!(SinkRoutes::<OneSink>::serves("/sinks/hook"));
    assert!(!SinkRoutes::<OneSink>::serves("/sinksx"));
}

#[tokio::test]
async fn a_bulk_replay_replays_every_pending_letter_or_those_since_a_time() {
    let pending = || vec![letter(7, 1_000), letter(8, 2_000), letter(9, 3_000), letter(10, 4_000), letter(11, 5_000)];
    let routes = Routes::over(OneSink { pending: pending(), ..OneSink::default() });
    let path = "/sinks/hook/dead-letters/replay";
    let (status, _, body) = routes.send_body(Method::POST, path, ADMIN, "{}").await;
    let all = r#"{"replayed":[7,8,10,11],"refused":[{"id":9,"error":"HTTP 500 again"}]}"#;
    assert_eq!((status.as_u16(), body.as_str()), (200, all));
    let pages: Vec<Option<i64>> = routes.sinks.pages.lock().unwrap().iter().map(|page| page.after).collect();
    assert_eq!(pages, [None, Some(8), Some(10)], "paged through, two at a time");

    let routes = Routes::over(OneSink { pending: pending(), ..OneSink::default() });
    let since = r#"{"since":"1970-01-01T00:50:00Z"}"#;
    let (status, _, body) = routes.send_body(Method::POST, path, ADMIN, since).await;
    let later = r#"{"replayed":[10,11],"refused":[{"id":9,"error":"HTTP 500 again"}]}"#;
    assert_eq!((status.as_u16(), body.as_str()), (200, later), "only those that last failed at 3000 s or later");
    assert_eq!(*routes.sinks.replayed.lock().unwrap(), [10, 11]);

    let (status, _, body) = routes.send_body(Method::POST, path, ADMIN, r#"{"since":"now"}"#).await;
    assert_eq!(status.as_u16(), 400, "{body}");
    let (status, _, _) = routes.send_body(Method::POST, path, Some("acme:read"), "{}").await;
    assert_eq!(status.as_u16(), 403, "administrators only");
}

#[tokio::test]
async fn a_page_of_dead_letters_shows_each_letter() {
    let routes = Routes::over(OneSink { pending: vec![letter(7, 1_000)], ..OneSink::default() });
    let (status, _, body) = routes.send(Method::GET, "/sinks/hook/dead-letters", ADMIN).await;
    assert_eq!(status.as_u16(), 200);
    let page: serde_json::Value = serde_json::from_str(&body).unwrap();
    let letter = &page["items"][0];
    assert_eq!(letter["id"], 7);
    assert_eq!(letter["sink"], "hook");
    assert_eq!(letter["event"]["id"], "evt_7");
    assert_eq!(letter["lastFailedAt"], "1970-01-01T00:16:40.000Z");
    assert!(letter.get("replayedAt").is_none(), "{letter}");
    assert!(page.get("cursor").is_none(), "{page}");
}
