//! [`Client`]: where the server is, how to authenticate, and the request-answer calls
//! (`GET /events`, `POST /events`). The streams live in [`crate::list`], [`crate::watch`]
//! and [`crate::follow`].

use std::fmt;
use std::time::Duration;

use outbox_core::NewEvent;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, RequestBuilder, Response, Url};
use serde::Deserialize;

use crate::list::{ListQuery, Page};
use crate::{Error, Result};

/// How long establishing a connection may take before the call fails (and a watch stream
/// backs off and tries again).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a request-answer call (`list`, `publish`) may take as a whole.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// A handle on one Outbox server. Cheap to clone: clones share the connection pool.
///
/// The routes are `<base_url><path_prefix>/events` and `<base_url><path_prefix>/watch`; a
/// base URL with a path (`https://api.example.com/outbox`) works as well as a prefix.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: Url,
    prefix: String,
    headers: HeaderMap,
}

impl Client {
    /// A client of the server at `base_url` (`http://127.0.0.1:8080`), without credentials,
    /// on an HTTP client from [`http_client_builder`].
    pub fn new(base_url: &str) -> Result<Client> {
        let base = parse_base(base_url)?;
        let http = http_client_builder()
            .build()
            .map_err(|e| Error::InvalidUrl { url: base_url.to_owned(), reason: format!("no HTTP client: {e}") })?;
        Ok(Client { http, base, prefix: String::new(), headers: HeaderMap::new() })
    }

    /// Sends `Authorization: Bearer <token>` (a JWT or an API key) with every request.
    pub fn with_token(self, token: &str) -> Result<Client> {
        let mut value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| Error::InvalidToken)?;
        value.set_sensitive(true);
        Ok(self.with_header(AUTHORIZATION, value))
    }

    /// Sends `name: value` with every request (a tenant routing header, a gateway's key, …),
    /// replacing an earlier value of `name`.
    pub fn with_header(mut self, name: HeaderName, value: HeaderValue) -> Client {
        self.headers.insert(name, value);
        self
    }

    /// Serves the routes under `prefix` (`/outbox` makes `/outbox/events`, `/outbox/watch`),
    /// for hosts that mount them elsewhere.
    pub fn with_path_prefix(mut self, prefix: &str) -> Result<Client> {
        let trimmed = prefix.trim_matches('/');
        if trimmed.contains(['?', '#']) {
            let reason = "a path prefix cannot hold '?' or '#'".into();
            return Err(Error::InvalidUrl { url: prefix.to_owned(), reason });
        }
        self.prefix = if trimmed.is_empty() { String::new() } else { format!("/{trimmed}") };
        Ok(self)
    }

    /// Uses `http` for every request (your own proxy, TLS roots, headers, …). Build it from
    /// [`http_client_builder`] to keep the connect timeout and the TLS provider; set no
    /// overall request timeout on it, or it cuts watch streams, which end only on their own
    /// terms (`list` and `publish` set their own).
    pub fn with_http_client(mut self, http: reqwest::Client) -> Client {
        self.http = http;
        self
    }

    /// One page of history (`GET /events`, SPEC §5.3).
    pub async fn list(&self, query: &ListQuery) -> Result<Page> {
        let url = self.url("/events", &query.pairs());
        let response = self.send(self.request(Method::GET, url).timeout(REQUEST_TIMEOUT)).await?;
        read_json(response).await
    }

    /// Publishes one event (`POST /events`); answers its id.
    pub async fn publish(&self, event: &NewEvent) -> Result<String> {
        let ids = self.post_events(&serde_json::to_value(event).map_err(protocol)?).await?;
        ids.into_iter().next().ok_or_else(|| Error::Protocol("the server answered no id".into()))
    }

    /// Publishes `events` in one transaction (`POST /events` with `{"events":[…]}`): all or
    /// nothing. Answers their ids in input order.
    pub async fn publish_many(&self, events: &[NewEvent]) -> Result<Vec<String>> {
        let ids = self.post_events(&serde_json::json!({ "events": events })).await?;
        if ids.len() != events.len() {
            return Err(Error::Protocol(format!("{} ids for {} events", ids.len(), events.len())));
        }
        Ok(ids)
    }

    async fn post_events(&self, body: &serde_json::Value) -> Result<Vec<String>> {
        let url = self.url("/events", &[]);
        let request = self.request(Method::POST, url).timeout(REQUEST_TIMEOUT).json(body);
        let response = self.send(request).await?;
        Ok(read_json::<Ids>(response).await?.ids)
    }

    /// `<base><prefix><route>?<pairs>`.
    pub(crate) fn url(&self, route: &str, pairs: &[(&str, String)]) -> Url {
        let mut url = self.base.clone();
        let path = format!("{}{}{route}", url.path().trim_end_matches('/'), self.prefix);
        url.set_path(&path);
        if !pairs.is_empty() {
            url.query_pairs_mut().extend_pairs(pairs);
        }
        url
    }

    /// A request carrying the client's headers.
    pub(crate) fn request(&self, method: Method, url: Url) -> RequestBuilder {
        self.http.request(method, url).headers(self.headers.clone())
    }

    /// Sends `request`; a non-2xx answer becomes the typed refusal.
    pub(crate) async fn send(&self, request: RequestBuilder) -> Result<Response> {
        let response = request.send().await.map_err(Error::Connection)?;
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status().as_u16();
        let body = response.text().await.unwrap_or_default();
        Err(Error::from_refusal(status, &body))
    }
}

impl fmt::Debug for Client {
    /// Names the server; never prints the headers, which hold the token.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.base.as_str())
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

/// `{"ids":[…]}`.
#[derive(Deserialize)]
struct Ids {
    ids: Vec<String>,
}

pub(crate) async fn read_json<T: serde::de::DeserializeOwned>(response: Response) -> Result<T> {
    let bytes = response.bytes().await.map_err(Error::Connection)?;
    serde_json::from_slice(&bytes).map_err(protocol)
}

pub(crate) fn protocol(error: serde_json::Error) -> Error {
    Error::Protocol(error.to_string())
}

fn parse_base(base_url: &str) -> Result<Url> {
    let invalid = |reason: String| Error::InvalidUrl { url: base_url.to_owned(), reason };
    let url = Url::parse(base_url).map_err(|e| invalid(e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid("the scheme must be http or https".into()));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(invalid("a base URL cannot hold a query or a fragment".into()));
    }
    Ok(url)
}

/// A `reqwest` client builder configured as [`Client::new`] configures its own: connections
/// time out after 10 s, and rustls' `ring` provider is installed as the process's default
/// crypto provider when no other is installed yet.
///
/// reqwest is built here without a provider of its own (no OpenSSL, no aws-lc), and
/// `reqwest::Client::builder().build()` panics in a process that has none. Start from this
/// builder to give [`Client::with_http_client`] a client of your own:
///
/// ```
/// # fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let http = outbox_client::http_client_builder().user_agent("billing/1.4").build()?;
/// let client = outbox_client::Client::new("http://127.0.0.1:8080")?.with_http_client(http);
/// # Ok(()) }
/// ```
pub fn http_client_builder() -> reqwest::ClientBuilder {
    install_crypto_provider();
    reqwest::Client::builder().connect_timeout(CONNECT_TIMEOUT)
}

/// Installs rustls' `ring` provider as the process's default, once. Another library may
/// have installed one already; that one is kept.
fn install_crypto_provider() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(base: &str, prefix: &str, route: &str, pairs: &[(&str, String)], expect: &str) {
        let client = Client::new(base).unwrap().with_path_prefix(prefix).unwrap();
        assert_eq!(client.url(route, pairs).as_str(), expect);
    }

    #[test]
    fn routes_join_the_base_and_the_prefix() {
        check("http://h:8080", "", "/events", &[], "http://h:8080/events");
        check("http://h:8080/", "", "/watch", &[], "http://h:8080/watch");
        check("https://h/api/", "outbox/", "/events", &[], "https://h/api/outbox/events");
        check("https://h/api", "/outbox", "/watch", &[], "https://h/api/outbox/watch");
        let pairs = [("types", "node.*,a.b".to_owned()), ("tenantId", "acme".to_owned())];
        check("http://h", "", "/events", &pairs, "http://h/events?types=node.*%2Ca.b&tenantId=acme");
    }

    #[test]
    fn refuses_what_is_not_a_base_url() {
        for bad in ["127.0.0.1:8080", "ftp://h", "http://h/?x=1", "http://h/#f", ""] {
            assert!(matches!(Client::new(bad), Err(Error::InvalidUrl { .. })), "{bad}");
        }
        let client = Client::new("http://h").unwrap();
        assert!(client.with_path_prefix("/a?b").is_err());
    }

    #[test]
    fn debug_never_shows_the_token() {
        let client = Client::new("http://h").unwrap().with_token("s3cr3t").unwrap();
        assert!(!format!("{client:?}").contains("s3cr3t"));
    }
}
