//! The console (SPEC §8.3): one page, its script and style, and the standalone
//! `watchEvents` module, embedded in the library and served as they are.
//!
//! | route | what |
//! |---|---|
//! | `GET /` | the page (`console/index.html`) |
//! | `GET /console/console.js` | the page's script, an ES module importing the others |
//! | `GET /console/{api,dom,format,refresh}.js` | its helpers: the API with the token, text-only elements, words, refreshing |
//! | `GET /console/{live,history,sinks,webhooks,dead-letters}.js` | one module per view |
//! | `GET /console/console.css` | its style |
//! | `GET /console/watch-events.js` | `watchEvents`, an ES module any page may import (CORS open) |
//! | `GET /console/icon.svg` | the page's icon |
//!
//! The files are plain text written by hand, served from one table (`ASSETS`): no build
//! step, no framework, nothing loaded from elsewhere (`script-src 'self'` admits module
//! scripts and their imports from this origin). They hold no data and need no credential; the page reads the API with
//! the token the user gives it, in an `Authorization` header. Every answer carries a strict
//! `Content-Security-Policy` (scripts, styles, connections and images only from this origin,
//! no inline script or style, no framing, no form posts, no `<base>`), `nosniff`,
//! `Referrer-Policy: no-referrer` and `X-Frame-Options: DENY`.
//!
//! **Architecture invariant:** static files only; the console reaches the outbox through
//! the same HTTP routes as any client, so it knows nothing the API does not say.

use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use outbox_core::ErrorCode;

use crate::body::full;
use crate::{ApiError, Body};

/// The policy every console answer carries.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// One embedded file: its path, media type and text.
struct Asset {
    path: &'static str,
    content_type: &'static str,
    text: &'static str,
}

impl Asset {
    const fn new(path: &'static str, content_type: &'static str, text: &'static str) -> Asset {
        Asset { path, content_type, text }
    }
}

const HTML: &str = "text/html; charset=utf-8";
const JAVASCRIPT: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const SVG: &str = "image/svg+xml";

/// Everything the console serves: the page first, then its style, icon and ES modules
/// (`console.js` the entry, importing the others by these paths).
const ASSETS: &[Asset] = &[
    Asset::new("/", HTML, include_str!("console/index.html")),
    Asset::new("/console/console.css", CSS, include_str!("console/console.css")),
    Asset::new("/console/icon.svg", SVG, include_str!("console/icon.svg")),
    Asset::new("/console/console.js", JAVASCRIPT, include_str!("console/console.js")),
    Asset::new("/console/api.js", JAVASCRIPT, include_str!("console/api.js")),
    Asset::new("/console/dom.js", JAVASCRIPT, include_str!("console/dom.js")),
    Asset::new("/console/format.js", JAVASCRIPT, include_str!("console/format.js")),
    Asset::new("/console/refresh.js", JAVASCRIPT, include_str!("console/refresh.js")),
    Asset::new("/console/live.js", JAVASCRIPT, include_str!("console/live.js")),
    Asset::new("/console/history.js", JAVASCRIPT, include_str!("console/history.js")),
    Asset::new("/console/sinks.js", JAVASCRIPT, include_str!("console/sinks.js")),
    Asset::new("/console/webhooks.js", JAVASCRIPT, include_str!("console/webhooks.js")),
    Asset::new("/console/dead-letters.js", JAVASCRIPT, include_str!("console/dead-letters.js")),
    Asset::new(WATCH_EVENTS_PATH, JAVASCRIPT, include_str!("console/watch-events.js")),
];

/// Where `watchEvents` is served; other origins may import it.
pub const WATCH_EVENTS_PATH: &str = "/console/watch-events.js";

/// The mountable console: `GET /` and the files under `/console/`.
///
/// It needs no state: the page signs in with the user's token against the API routes the
/// host mounts beside it ([`OutboxService`](crate::OutboxService),
/// [`SinkRoutes`](crate::SinkRoutes), [`WebhookRoutes`](crate::WebhookRoutes)).
#[derive(Debug, Clone, Copy, Default)]
pub struct Console;

impl Console {
    /// The console.
    pub fn new() -> Console {
        Console
    }

    /// Whether `path` is the console's (so a host router can delegate to it).
    pub fn serves(path: &str) -> bool {
        path == "/" || path.starts_with("/console/")
    }

    /// Answers one request: the file at its path for `GET` and `HEAD`, `405` with `Allow`
    /// for another method, a JSON `NOT_FOUND` for a path under `/console/` that is no file.
    pub fn handle<B>(&self, request: Request<B>) -> Response<Body> {
        let path = request.uri().path();
        let Some(asset) = ASSETS.iter().find(|asset| asset.path == path) else {
            return secured(ApiError::new(ErrorCode::NotFound, format!("no route for {path}")).into_response());
        };
        let method = request.method();
        if method != Method::GET && method != Method::HEAD {
            return secured(ApiError::method_not_allowed("GET, HEAD").into_response());
        }
        secured(asset.response(method == Method::HEAD))
    }
}

impl Asset {
    /// The file as an answer (no body for `HEAD`), cached only after revalidation.
    fn response(&self, head: bool) -> Response<Body> {
        let body = if head { Bytes::new() } else { Bytes::from_static(self.text.as_bytes()) };
        let mut response = Response::new(full(body));
        *response.status_mut() = StatusCode::OK;
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(self.content_type));
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        if self.path == WATCH_EVENTS_PATH {
            // A module script from another origin is fetched with CORS; it holds no secret.
            set(headers, "access-control-allow-origin", "*");
            set(headers, "cross-origin-resource-policy", "cross-origin");
        } else {
            set(headers, "cross-origin-resource-policy", "same-origin");
        }
        response
    }
}

fn set(headers: &mut http::HeaderMap, name: &'static str, value: &'static str) {
    headers.insert(HeaderName::from_static(name), HeaderValue::from_static(value));
}

/// `response` with the console's security headers.
fn secured(mut response: Response<Body>) -> Response<Body> {
    let headers = response.headers_mut();
    set(headers, "content-security-policy", CONTENT_SECURITY_POLICY);
    set(headers, "x-content-type-options", "nosniff");
    set(headers, "referrer-policy", "no-referrer");
    set(headers, "x-frame-options", "DENY");
    set(headers, "cross-origin-opener-policy", "same-origin");
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    fn request(method: Method, path: &str) -> Request<()> {
        Request::builder().method(method).uri(path).body(()).unwrap()
    }

    async fn text(response: Response<Body>) -> String {
        String::from_utf8(response.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap()
    }

    #[tokio::test]
    async fn the_page_is_served_with_a_strict_policy() {
        let response = Console.handle(request(Method::GET, "/"));
        assert_eq!(response.status(), 200);
        let headers = response.headers();
        assert_eq!(headers[CONTENT_TYPE], "text/html; charset=utf-8");
        assert_eq!(headers["content-security-policy"], CONTENT_SECURITY_POLICY);
        assert_eq!(headers["x-content-type-options"], "nosniff");
        assert_eq!(headers["referrer-policy"], "no-referrer");
        assert_eq!(headers["x-frame-options"], "DENY");
        let page = text(response).await;
        assert!(page.contains(r#"<script type="module" src="/console/console.js"></script>"#), "{page}");
    }

    #[tokio::test]
    async fn the_page_has_no_inline_script_style_or_outside_address() {
        for asset in ASSETS {
            let page = asset.text;
            assert!(!page.contains("style=\""), "{}: an inline style attribute", asset.path);
            assert!(!page.contains("<style"), "{}: an inline style element", asset.path);
            assert!(!page.contains("innerHTML"), "{}: markup from strings", asset.path);
            assert!(!page.contains("insertAdjacentHTML"), "{}: markup from strings", asset.path);
            assert!(!page.contains("@import") && !page.contains("url("), "{}: a style from elsewhere", asset.path);
            for attribute in ["src=\"", "href=\""] {
                for (at, _) in page.match_indices(attribute) {
                    let value = &page[at + attribute.len()..];
                    assert!(value.starts_with('/') || value.starts_with('#'), "{}: an outside address", asset.path);
                }
            }
        }
        let page = ASSETS[0].text;
        assert_eq!(page.matches("<script").count(), 1, "one script, by address");
        assert!(!has_inline_handler(page), "an inline event handler attribute");
    }

    /// Whether `html` has an attribute such as ` onerror=`.
    fn has_inline_handler(html: &str) -> bool {
        html.match_indices(" on").any(|(at, _)| {
            let rest = &html[at + 3..];
            let name = rest.bytes().take_while(u8::is_ascii_lowercase).count();
            name > 0 && rest.as_bytes().get(name) == Some(&b'=')
        })
    }

    #[tokio::test]
    async fn watch_events_may_be_imported_from_anywhere() {
        let response = Console.handle(request(Method::GET, WATCH_EVENTS_PATH));
        assert_eq!(response.headers()["access-control-allow-origin"], "*");
        assert_eq!(response.headers()[CONTENT_TYPE], "text/javascript; charset=utf-8");
        assert!(text(response).await.contains("export function watchEvents("));
    }

    #[test]
    fn every_module_a_script_imports_is_served() {
        let mut imported = 0;
        for asset in ASSETS.iter().filter(|asset| asset.content_type == JAVASCRIPT) {
            for line in asset.text.lines().filter(|line| line.starts_with("import ")) {
                let quoted = line.rsplit(" from ").next().unwrap().trim_end_matches(';');
                let target = quoted.trim_matches('\'');
                let path = target.strip_prefix("./").map_or(target.to_owned(), |name| format!("/console/{name}"));
                assert!(ASSETS.iter().any(|served| served.path == path), "{} imports {target}, not served", asset.path);
                imported += 1;
            }
        }
        assert!(imported >= 10, "the modules import each other ({imported} imports found)");
    }

    #[tokio::test]
    async fn other_methods_and_paths_are_refused() {
        let response = Console.handle(request(Method::POST, "/"));
        assert_eq!(response.status(), 405);
        assert_eq!(response.headers()["allow"], "GET, HEAD");
        let response = Console.handle(request(Method::GET, "/console/nothing.js"));
        assert_eq!(response.status(), 404);
        assert_eq!(response.headers()["content-security-policy"], CONTENT_SECURITY_POLICY);
        let response = Console.handle(request(Method::HEAD, "/console/console.css"));
        assert_eq!(response.status(), 200);
        assert!(text(response).await.is_empty());
        assert!(Console::serves("/") && Console::serves("/console/x") && !Console::serves("/events"));
    }
}
