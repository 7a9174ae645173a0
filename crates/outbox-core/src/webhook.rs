//! The rules of a webhook subscription (SPEC §7.6): what a tenant may ask for, each
//! refusal naming the field and the rule.
//!
//! Whether the URL's host may be reached is decided by address ([`crate::target`]) once the
//! name is resolved; here an IP literal is only extracted ([`literal_ip`]), since the `url`
//! crate normalises every way of writing one (`http://2130706433/` is `127.0.0.1`).

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
pub use url::Url;

use crate::{Catalog, Pattern};

/// The longest URL, in characters.
pub const MAX_URL: usize = 2_048;
/// The most type patterns of one subscription.
pub const MAX_TYPES: usize = 20;
/// The longest description, in characters.
pub const MAX_DESCRIPTION: usize = 256;
/// The most extra request headers.
pub const MAX_HEADERS: usize = 10;
/// The longest header value, in bytes.
pub const MAX_HEADER_VALUE: usize = 1_024;
/// The largest metadata object, serialized, in bytes.
pub const MAX_METADATA: usize = 4_096;
/// The shortest and the longest signing key, in bytes (Standard Webhooks: 24 to 64).
pub const SECRET_BYTES: std::ops::RangeInclusive<usize> = 24..=64;

/// Headers a subscription may not set: those the delivery sets, and those HTTP reserves
/// for the connection.
pub const RESERVED_HEADERS: &[&str] = &[
    "connection",
    "content-encoding",
    "content-length",
    "content-type",
    "expect",
    "host",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "webhook-id",
    "webhook-signature",
    "webhook-timestamp",
];

/// Why a subscription is refused: the field (`types[2]`, `headers.x-api-key`) and the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {rule}")]
pub struct Refusal {
    /// The refused field, as the JSON names it.
    pub field: String,
    /// The rule it broke, in words.
    pub rule: String,
}

impl Refusal {
    /// A refusal of `field` for breaking `rule`.
    pub fn new(field: impl Into<String>, rule: impl Into<String>) -> Refusal {
        Refusal { field: field.into(), rule: rule.into() }
    }
}

/// Checks a target URL: `https://` (`http://` too when `allow_http`), at most
/// [`MAX_URL`] characters, a host, no user info, no fragment. Answers it parsed.
pub fn check_url(text: &str, allow_http: bool) -> Result<Url, Refusal> {
    let refuse = |rule: &str| Refusal::new("url", rule);
    if text.chars().count() > MAX_URL {
        return Err(refuse(&format!("at most {MAX_URL} characters")));
    }
    let url = Url::parse(text).map_err(|error| refuse(&format!("not a URL ({error})")))?;
    match url.scheme() {
        "https" => {}
        "http" if allow_http => {}
        "http" => return Err(refuse("must be https:// (http:// only where private targets are allowed)")),
        _ => return Err(refuse("must be an https:// URL")),
    }
    if url.host().is_none() {
        return Err(refuse("must name a host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(refuse("must not carry a user name or password"));
    }
    if url.fragment().is_some() {
        return Err(refuse("must not carry a #fragment"));
    }
    Ok(url)
}

/// The URL's host when it is an IP address written out (in any form the URL standard
/// accepts), which no resolver sees: it must be checked by address before connecting.
pub fn literal_ip(url: &Url) -> Option<IpAddr> {
    match url.host()? {
        url::Host::Ipv4(v4) => Some(IpAddr::V4(v4)),
        url::Host::Ipv6(v6) => Some(IpAddr::V6(v6)),
        url::Host::Domain(_) => None,
    }
}

/// Checks 1 to [`MAX_TYPES`] patterns, each of which must be able to match an entry of
/// `catalog` (SPEC §3.4): a subscription that could never receive anything is a mistake.
pub fn check_types(types: &[String], catalog: &Catalog) -> Result<Vec<Pattern>, Refusal> {
    if types.is_empty() || types.len() > MAX_TYPES {
        return Err(Refusal::new("types", format!("1 to {MAX_TYPES} patterns")));
    }
    let mut patterns = Vec::with_capacity(types.len());
    for (index, text) in types.iter().enumerate() {
        let field = format!("types[{index}]");
        let pattern = Pattern::parse(text).map_err(|error| Refusal::new(&field, error.rule()))?;
        if catalog.can_match(&pattern).is_none() {
            let rule = format!("{text:?} can match no event type of the catalog (GET /event-types)");
            return Err(Refusal::new(field, rule));
        }
        patterns.push(pattern);
    }
    Ok(patterns)
}

/// Checks a description: at most [`MAX_DESCRIPTION`] characters, no control character.
pub fn check_description(text: &str) -> Result<(), Refusal> {
    if text.chars().count() > MAX_DESCRIPTION {
        return Err(Refusal::new("description", format!("at most {MAX_DESCRIPTION} characters")));
    }
    if text.chars().any(char::is_control) {
        return Err(Refusal::new("description", "no control characters"));
    }
    Ok(())
}

/// Checks extra request headers: at most [`MAX_HEADERS`], each name an HTTP token not in
/// [`RESERVED_HEADERS`] (compared without case), each value visible ASCII and spaces, at
/// most [`MAX_HEADER_VALUE`] bytes.
pub fn check_headers(headers: &BTreeMap<String, String>) -> Result<(), Refusal> {
    if headers.len() > MAX_HEADERS {
        return Err(Refusal::new("headers", format!("at most {MAX_HEADERS} headers")));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (name, value) in headers {
        let field = format!("headers.{name}");
        let is_token =
            !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !is_token {
            return Err(Refusal::new(field, "a header name is letters, digits and !#$%&'*+-.^_`|~"));
        }
        let lower = name.to_ascii_lowercase();
        if RESERVED_HEADERS.contains(&lower.as_str()) {
            return Err(Refusal::new(field, "is set by the delivery or reserved by HTTP"));
        }
        if !seen.insert(lower) {
            return Err(Refusal::new(field, "is given twice (header names ignore case)"));
        }
        if value.len() > MAX_HEADER_VALUE || !value.bytes().all(|b| b == b' ' || b.is_ascii_graphic()) {
            return Err(Refusal::new(field, format!("a value is visible ASCII, at most {MAX_HEADER_VALUE} bytes")));
        }
    }
    Ok(())
}

/// Checks metadata: a JSON object of at most [`MAX_METADATA`] bytes serialized, without
/// the NUL character anywhere.
pub fn check_metadata(metadata: &serde_json::Value) -> Result<(), Refusal> {
    if !metadata.is_object() {
        return Err(Refusal::new("metadata", "a JSON object"));
    }
    if crate::validate::contains_nul(metadata) {
        return Err(Refusal::new(
            "metadata",
            "must not contain the NUL character (\\u0000), which PostgreSQL's jsonb refuses",
        ));
    }
    let size = serde_json::to_vec(metadata).map_or(usize::MAX, |bytes| bytes.len());
    if size > MAX_METADATA {
        return Err(Refusal::new("metadata", format!("at most {MAX_METADATA} bytes serialized, it has {size}")));
    }
    Ok(())
}

/// A header value as answers show it: never the value itself, which may be a credential.
pub fn redacted(value: &str) -> String {
    format!("<redacted, {} bytes>", value.len())
}

/// What `POST /webhooks/{id}/ping` answers: whether the endpoint took the signed
/// `webhook.ping`, its status, how long it took, and what went wrong.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PingOutcome {
    /// The endpoint answered 2xx.
    pub delivered: bool,
    /// Its status, when it answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// How long the request took.
    pub duration_ms: u32,
    /// What went wrong, when something did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A Standard Webhooks signing key: `whsec_` and the base64 of 24 to 64 bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl Secret {
    /// Parses `whsec_<base64>`, refusing a key outside [`SECRET_BYTES`].
    pub fn parse(text: &str) -> Result<Secret, Refusal> {
        let refuse = |rule: String| Refusal::new("secret", rule);
        let encoded = text.strip_prefix("whsec_").ok_or_else(|| refuse("must start with whsec_".into()))?;
        let key = BASE64.decode(encoded).map_err(|_| refuse("the part after whsec_ must be base64".into()))?;
        Secret::from_bytes(key).map_err(refuse)
    }

    /// A key of `bytes` (24 to 64 of them).
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Secret, String> {
        if !SECRET_BYTES.contains(&bytes.len()) {
            let (low, high) = (SECRET_BYTES.start(), SECRET_BYTES.end());
            return Err(format!("the key must be {low} to {high} bytes, it has {}", bytes.len()));
        }
        Ok(Secret(bytes))
    }

    /// The key's bytes, which sign.
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }

    /// `whsec_<base64>`: the form shown to the tenant once, and parsed back.
    pub fn expose(&self) -> String {
        format!("whsec_{}", BASE64.encode(&self.0))
    }
}

impl fmt::Debug for Secret {
    /// Never prints the key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret(<{} bytes>)", self.0.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CatalogEntry;

    #[test]
    fn a_url_is_https_with_a_host_and_nothing_secret_in_it() {
        assert_eq!(
            check_url("https://hooks.example.com/outbox?x=1", false).unwrap().host_str(),
            Some("hooks.example.com")
        );
        assert!(check_url("http://127.0.0.1:9000/hook", true).is_ok());
        for (bad, rule) in [
            ("http://hooks.example.com/", "must be https://"),
            ("ftp://hooks.example.com/", "must be an https:// URL"),
            ("https://user:pw@hooks.example.com/", "user name or password"),
            ("https://hooks.example.com/#top", "#fragment"),
            ("not a url", "not a URL"),
            ("mailto:ops@example.com", "must be an https:// URL"),
        ] {
            let refusal = check_url(bad, false).unwrap_err();
            assert_eq!(refusal.field, "url");
            assert!(refusal.rule.contains(rule), "{bad}: {refusal}");
        }
        let long = format!("https://example.com/{}", "a".repeat(MAX_URL));
        assert!(check_url(&long, false).unwrap_err().rule.contains("2048"));
    }

    #[test]
    fn every_way_of_writing_an_ip_literal_is_found() {
        let literal = |text: &str| literal_ip(&check_url(text, true).unwrap()).map(|ip| ip.to_string());
        assert_eq!(literal("http://2130706433/"), Some("127.0.0.1".into()), "decimal");
        assert_eq!(literal("http://0x7f.1/"), Some("127.0.0.1".into()), "hex and short");
        assert_eq!(literal("http://0177.0.0.1/"), Some("127.0.0.1".into()), "octal");
        assert_eq!(literal("https://[::ffff:169.254.169.254]/"), Some("::ffff:169.254.169.254".into()));
        assert_eq!(literal("https://hooks.example.com/"), None);
        assert_eq!(literal("https://localhost/"), None, "a name: resolved and checked by address");
    }

    #[test]
    fn types_must_be_able_to_match_the_catalog() {
        let order = CatalogEntry::new(Pattern::parse("order.*").unwrap(), "order/{id}", "shop", "Orders");
        let catalog = Catalog::new([order]);
        let ok = check_types(&["order.placed".into(), "*".into(), "webhook.ping".into()], &catalog).unwrap();
        assert_eq!(ok.len(), 3);
        let refusal = check_types(&["order.*".into(), "node.*".into()], &catalog).unwrap_err();
        assert_eq!(refusal.field, "types[1]");
        assert!(refusal.rule.contains("can match no event type"), "{refusal}");
        assert_eq!(check_types(&["Order".into()], &catalog).unwrap_err().field, "types[0]");
        assert_eq!(check_types(&[], &catalog).unwrap_err().field, "types");
        assert_eq!(check_types(&vec!["*".to_owned(); 21], &catalog).unwrap_err().field, "types");
    }

    #[test]
    fn headers_are_few_unreserved_and_plain() {
        let headers = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        assert!(check_headers(&headers(&[("x-api-key", "k1"), ("Authorization", "Bearer t")])).is_ok());
        for (name, value, field) in [
            ("Webhook-Signature", "v1,x", "headers.Webhook-Signature"),
            ("content-type", "text/plain", "headers.content-type"),
            ("Host", "evil", "headers.Host"),
            ("bad name", "x", "headers.bad name"),
            ("x-ok", "line\nbreak", "headers.x-ok"),
        ] {
            assert_eq!(check_headers(&headers(&[(name, value)])).unwrap_err().field, field);
        }
        let twice = headers(&[("X-Key", "a"), ("x-key", "b")]);
        assert!(check_headers(&twice).unwrap_err().rule.contains("twice"));
        let many: BTreeMap<String, String> = (0..11).map(|i| (format!("x-h{i}"), "v".into())).collect();
        assert_eq!(check_headers(&many).unwrap_err().field, "headers");
        assert!(!redacted("Bearer s3cr3t").contains("s3cr3t"));
    }

    #[test]
    fn metadata_and_description_have_bounds() {
        assert!(check_metadata(&serde_json::json!({"team": "billing"})).is_ok());
        assert!(check_metadata(&serde_json::json!([1])).is_err());
        assert!(check_metadata(&serde_json::json!({"k\u{0}": 1})).unwrap_err().rule.contains("NUL"));
        assert!(check_metadata(&serde_json::json!({"k": ["a\u{0}"]})).unwrap_err().rule.contains("NUL"));
        let big = serde_json::json!({ "x": "y".repeat(MAX_METADATA) });
        assert!(check_metadata(&big).unwrap_err().rule.contains("4096"));
        assert!(check_description(&"d".repeat(MAX_DESCRIPTION)).is_ok());
        assert!(check_description(&"d".repeat(MAX_DESCRIPTION + 1)).is_err());
        assert!(check_description("a\u{7}bell").is_err());
    }

    #[test]
    fn secrets_are_whsec_of_24_to_64_bytes_and_never_printed() {
        let secret = Secret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        assert_eq!(secret.bytes().len(), 24);
        assert_eq!(Secret::parse(&secret.expose()).unwrap(), secret);
        assert!(!format!("{secret:?}").contains("MfKQ"));
        for bad in ["MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_!!!", "whsec_c2hvcnQ="] {
            assert_eq!(Secret::parse(bad).unwrap_err().field, "secret", "{bad}");
        }
        assert!(Secret::from_bytes(vec![7; 65]).is_err());
        assert!(Secret::from_bytes(vec![7; 64]).is_ok());
    }
}
