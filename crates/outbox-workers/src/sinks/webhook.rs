//! The `webhook` sink: one signed HTTP POST per event (SPEC §7.5).
//!
//! Each request carries the Standard Webhooks headers: `webhook-id` (the event id,
//! the same on every retry, so receivers deduplicate on it), `webhook-timestamp`
//! (Unix seconds of this attempt) and `webhook-signature: v1,<base64 HMAC-SHA256 of
//! "<id>.<timestamp>.<body>">` keyed with the secret's bytes (`whsec_<base64>`).
//!
//! Answers: 2xx delivered; 408, 429 and 5xx retryable, honouring `Retry-After`
//! (seconds or an HTTP date); any other status refused; connection failures and
//! timeouts retryable. Redirects are not followed. Events are posted one after the
//! other, and a failure reports its index ([`SinkError::at`]), so the dispatcher
//! records what went through and never re-posts it.

use std::sync::Once;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use futures_util::future::BoxFuture;
use hmac::{Hmac, KeyInit, Mac};
use outbox_core::Event;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, HeaderMap, RETRY_AFTER};
use sha2::Sha256;
use time::OffsetDateTime;

use crate::config::SinkConfig;
use crate::encoding::Encoder;
use crate::{Error, Result, Sink, SinkError};

/// Installs rustls' ring provider as the process default, once (reqwest is built without one).
pub fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Another part of the process may have installed one already; either is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A Standard Webhooks signing key.
#[derive(Clone)]
pub struct WebhookSecret(Vec<u8>);

impl WebhookSecret {
    /// Parses `whsec_<base64>`.
    pub fn parse(text: &str) -> std::result::Result<WebhookSecret, String> {
        let encoded = text.strip_prefix("whsec_").ok_or("must start with whsec_")?;
        let key = BASE64.decode(encoded).map_err(|e| format!("the part after whsec_ is not base64: {e}"))?;
        if key.is_empty() {
            return Err("the key is empty".into());
        }
        Ok(WebhookSecret(key))
    }

    /// The key of `bytes` (a subscription's secret, already checked).
    pub fn from_bytes(bytes: Vec<u8>) -> WebhookSecret {
        WebhookSecret(bytes)
    }

    /// `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        format!("v1,{}", BASE64.encode(mac.finalize().into_bytes()))
    }
}

impl std::fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookSecret(…)")
    }
}

/// Posts each event to a URL, signed.
pub struct WebhookSink {
    id: String,
    url: reqwest::Url,
    secret: WebhookSecret,
    encoder: Encoder,
    client: reqwest::Client,
}

impl WebhookSink {
    /// The sink a `kind = "webhook"` table describes.
    pub fn from_config(config: &SinkConfig) -> Result<WebhookSink> {
        let url_text = config.url.as_deref().unwrap_or_default();
        let url = reqwest::Url::parse(url_text)
            .map_err(|e| Error::config(config.key_name("url"), format!("{url_text:?} is not a URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Error::config(config.key_name("url"), "must be an http or https URL"));
        }
        let secret = WebhookSecret::parse(config.secret.as_deref().unwrap_or_default())
            .map_err(|reason| Error::config(config.key_name("secret"), reason))?;
        let client = client_builder(config.timeout())
            .build()
            .map_err(|e| Error::config(config.key_name("url"), format!("building the HTTP client: {e}")))?;
        Ok(WebhookSink { id: config.id.clone(), url, secret, encoder: config.encoder(), client })
    }

    async fn post(&self, event: &Event) -> std::result::Result<(), SinkError> {
        let post = SignedPost {
            client: &self.client,
            url: &self.url,
            encoder: &self.encoder,
            secrets: std::slice::from_ref(&self.secret),
            headers: None,
            keep: 0,
        };
        post.send(event).await.result
    }
}

/// A client for signed POSTs: `timeout` for the whole request and for connecting, no
/// redirect followed, Outbox's user agent; rustls with ring.
pub(crate) fn client_builder(timeout: Duration) -> reqwest::ClientBuilder {
    install_crypto_provider();
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("outbox/", env!("CARGO_PKG_VERSION")))
}

/// One event's POST with the Standard Webhooks headers, as the webhook sink and webhook
/// subscriptions send it.
pub(crate) struct SignedPost<'a> {
    pub client: &'a reqwest::Client,
    pub url: &'a reqwest::Url,
    pub encoder: &'a Encoder,
    /// Every secret that signs now: one `v1,…` each in `webhook-signature`, space-separated.
    pub secrets: &'a [WebhookSecret],
    /// Extra headers, set before the Standard Webhooks ones.
    pub headers: Option<&'a HeaderMap>,
    /// How much of the answer's body to keep (none when 0).
    pub keep: usize,
}

/// What a signed POST came to.
pub(crate) struct Answer {
    /// The answer's status, when one came.
    pub status: Option<u16>,
    /// The start of its body, up to [`SignedPost::keep`] bytes, when not empty.
    pub body: Option<String>,
    /// What it means for the delivery ([`judge`]).
    pub result: std::result::Result<(), SinkError>,
}

impl SignedPost<'_> {
    /// POSTs `event`, signed now, and reads what it asked to keep of the answer.
    pub(crate) async fn send(&self, event: &Event) -> Answer {
        let body = self.encoder.encode(event);
        let timestamp = OffsetDateTime::now_utc().unix_timestamp();
        let signature: Vec<String> =
            self.secrets.iter().map(|secret| secret.sign(&event.id, timestamp, &body)).collect();
        let mut request = self.client.post(self.url.clone());
        if let Some(headers) = self.headers {
            request = request.headers(headers.clone());
        }
        let sent = request
            .header(CONTENT_TYPE, self.encoder.content_type())
            .header("webhook-id", &event.id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature.join(" "))
            .body(body)
            .send()
            .await;
        let mut response = match sent {
            Ok(response) => response,
            Err(error) => {
                return Answer { status: None, body: None, result: Err(SinkError::retryable(describe(&error))) };
            }
        };
        let status = response.status();
        let result = judge(status, response.headers());
        let mut kept = Vec::new();
        while kept.len() < self.keep {
            match response.chunk().await {
                Ok(Some(chunk)) => kept.extend_from_slice(&chunk[..chunk.len().min(self.keep - kept.len())]),
                _ => break,
            }
        }
        let body = (!kept.is_empty()).then(|| String::from_utf8_lossy(&kept).into_owned());
        Answer { status: Some(status.as_u16()), body, result }
    }
}

/// What a response's status means for the delivery.
pub(crate) fn judge(status: StatusCode, headers: &HeaderMap) -> std::result::Result<(), SinkError> {
    if status.is_success() {
        return Ok(());
    }
    let message = format!("HTTP {status}");
    if status == StatusCode::REQUEST_TIMEOUT || status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
        let error = SinkError::retryable(message);
        let after = headers.get(RETRY_AFTER).and_then(|value| value.to_str().ok()).and_then(parse_retry_after);
        return Err(match after {
            Some(after) => error.with_retry_after(after),
            None => error,
        });
    }
    Err(SinkError::refused(message))
}

/// `Retry-After`: delay seconds, or an HTTP date (IMF-fixdate) from which the delay is taken.
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let format = time::macros::format_description!(
        "[weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] GMT"
    );
    let date = time::PrimitiveDateTime::parse(value, format).ok()?.assume_utc();
    Some((date - OffsetDateTime::now_utc()).try_into().unwrap_or(Duration::ZERO))
}

/// A transport error in a few words, without the URL's query (which can hold secrets).
pub(crate) fn describe(error: &reqwest::Error) -> String {
    let what = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "could not connect"
    } else {
        "request failed"
    };
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(error);
    let mut detail = String::new();
    while let Some(inner) = source {
        detail = inner.to_string();
        source = inner.source();
    }
    if detail.is_empty() { what.to_owned() } else { format!("{what}: {detail}") }
}

impl Sink for WebhookSink {
    fn id(&self) -> &str {
        &self.id
    }

    fn deliver<'a>(&'a self, batch: &'a [Event]) -> BoxFuture<'a, std::result::Result<(), SinkError>> {
        Box::pin(async move {
            for (index, event) in batch.iter().enumerate() {
                self.post(event).await.map_err(|error| error.at(index))?;
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_the_standard_webhooks_test_vector() {
        // From the Standard Webhooks specification's reference test.
        let secret = WebhookSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let signature = secret.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, br#"{"test": 2432232314}"#);
        assert_eq!(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn a_secret_is_whsec_and_base64() {
        assert!(WebhookSecret::parse("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap_err().contains("whsec_"));
        assert!(WebhookSecret::parse("whsec_***").unwrap_err().contains("base64"));
        assert!(WebhookSecret::parse("whsec_").is_err());
    }

    #[track_caller]
    fn check(status: u16, retry_after: Option<&str>, expect: Option<(bool, Option<u64>)>) {
        let mut headers = HeaderMap::new();
        if let Some(value) = retry_after {
            headers.insert(RETRY_AFTER, value.parse().unwrap());
        }
        let got = judge(StatusCode::from_u16(status).unwrap(), &headers)
            .err()
            .map(|e| (e.is_retryable(), e.retry_after().map(|d| d.as_secs())));
        assert_eq!(got, expect, "{status} {retry_after:?}");
    }

    #[test]
    fn status_codes_decide_delivered_retryable_or_refused() {
        check(200, None, None);
        check(204, None, None);
        check(299, None, None);
        check(408, None, Some((true, None)));
        check(429, Some("7"), Some((true, Some(7))));
        check(500, None, Some((true, None)));
        check(503, Some("120"), Some((true, Some(120))));
        check(503, Some("soon"), Some((true, None)));
        check(400, Some("7"), Some((false, None)));
        check(401, None, Some((false, None)));
        check(404, None, Some((false, None)));
        check(410, None, Some((false, None)));
        check(301, None, Some((false, None)));
    }

    #[test]
    fn retry_after_takes_seconds_or_an_http_date() {
        assert_eq!(parse_retry_after("30"), Some(Duration::from_secs(30)));
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT"), Some(Duration::ZERO), "a past date");
        let later = OffsetDateTime::now_utc() + time::Duration::seconds(90);
        let format = time::macros::format_description!(
            "[weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] GMT"
        );
        let text = later.format(format).unwrap();
        let delay = parse_retry_after(&text).unwrap().as_secs();
        assert!((85..=90).contains(&delay), "{text} -> {delay}");
        assert_eq!(parse_retry_after("-1"), None);
    }
}
