//! The sink routes over a host's `SinkAdmin`: the paths, methods, scope and answers they
//! promise, whatever the host's sinks are.

use std::sync::{Arc, Mutex};

use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use outbox_core::ErrorCode;
use outbox_http::{ApiError, BoxFuture, DeadLetterPage, SinkAdmin, SinkRoutes};
use outbox_pg::internal::dead_letter::DeadLetter;
use serde::Serialize;

use crate::support::TestAuthorizer;

/// One sink, `hook`, whose only dead letter is 7; it remembers the pages it was asked for.
#[derive(Default)]
struct OneSink {
    pages: Mutex<Vec<DeadLetterPage>>,
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
        Box::pin(async move { find(id).map(|()| (Vec::new(), false)) })
    }

    fn replay<'a>(&'a self, id: &'a str, letter: i64) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move { find_letter(id, letter) })
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
        let sinks = Arc::new(OneSink::default());
        Routes { routes: SinkRoutes::new(sinks.clone(), Arc::new(TestAuthorizer::default())), sinks }
    }

    /// The status, `Allow` header and body of `method path` with `token`.
    async fn send(&self, method: Method, path: &str, token: Option<&str>) -> (StatusCode, Option<String>, String) {
        let mut request = Request::builder().method(method).uri(path);
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        let response = self.routes.handle(request.body(()).unwrap()).await;
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
    ] {
        let (status, got, body) = routes.send(method.clone(), path, None).await;
        assert_eq!((status.as_u16(), got.as_deref()), (405, Some(allow)), "{method} {path}");
        assert!(body.contains("METHOD_NOT_ALLOWED"), "{method} {path}: {body}");
    }
    assert!(SinkRoutes::<OneSink>::serves("/sinks/hook"));
    assert!(!SinkRoutes::<OneSink>::serves("/sinksx"));
}
