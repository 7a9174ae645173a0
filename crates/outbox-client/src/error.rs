//! What can go wrong talking to an Outbox server.
//!
//! A refusal is a value that knows its status and the server's error code (SPEC §5.1).
//! [`Error::is_transient`] is the watch stream's rule for what it retries by itself.

use outbox_core::ErrorCode;
use serde::Deserialize;

/// The client's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A failed call.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The base URL or the path prefix cannot be used.
    #[error("invalid url {url:?}: {reason}")]
    InvalidUrl {
        /// What was given.
        url: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// The token cannot be sent in a header: it holds a line break or another control character.
    #[error("the token cannot be sent in a header: it holds a control character")]
    InvalidToken,
    /// The server did not accept the credentials (401, or a stream ended with `UNAUTHENTICATED`).
    #[error("unauthenticated: {message}")]
    Unauthenticated {
        /// The server's reason, e.g. `token expired`.
        message: String,
    },
    /// The credentials may not do this (403, or a stream ended with `ACCESS_DENIED`).
    #[error("access denied: {message}")]
    AccessDenied {
        /// The server's reason, e.g. `signed out`.
        message: String,
    },
    /// The server refused the request with another status.
    #[error("refused with {status} {}: {message}", code.map_or("(no code)", ErrorCode::as_str))]
    Refused {
        /// The HTTP status.
        status: u16,
        /// The error code of the body, when it had a known one.
        code: Option<ErrorCode>,
        /// The server's message (or the status text when the body said nothing).
        message: String,
    },
    /// The server could not be reached, or the connection failed mid-answer.
    #[error("cannot reach the server")]
    Connection(#[source] reqwest::Error),
    /// The server did not answer (or said nothing on an open stream) in time.
    #[error("timed out: {0}")]
    Timeout(String),
    /// The answer does not follow the protocol (not JSON, not an event stream, a bad event).
    #[error("unexpected answer from the server: {0}")]
    Protocol(String),
}

impl Error {
    /// The error code of SPEC §5.1 this error stands for, when there is one.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Error::Unauthenticated { .. } => Some(ErrorCode::Unauthenticated),
            Error::AccessDenied { .. } => Some(ErrorCode::AccessDenied),
            Error::Refused { code, .. } => *code,
            Error::InvalidUrl { .. }
            | Error::InvalidToken
            | Error::Connection(_)
            | Error::Timeout(_)
            | Error::Protocol(_) => None,
        }
    }

    /// Whether trying again later can help: a connection failure, a timeout, `429`, or a
    /// `5xx` answer. Credentials, bad input and protocol violations are not transient.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Connection(_) | Error::Timeout(_) => true,
            Error::Refused { status, .. } => *status >= 500 || *status == 429 || *status == 408,
            _ => false,
        }
    }

    /// The error a refusal with `status` and `body` stands for.
    pub(crate) fn from_refusal(status: u16, body: &str) -> Error {
        let detail = serde_json::from_str::<RefusalBody>(body).ok().map(|body| body.error);
        let message =
            detail.as_ref().map(|d| d.message.clone()).filter(|m| !m.is_empty()).unwrap_or_else(|| status_text(status));
        let code = detail.and_then(|d| d.code.and_then(|c| serde_json::from_value(c.into()).ok()));
        match status {
            401 => Error::Unauthenticated { message },
            403 => Error::AccessDenied { message },
            _ => Error::Refused { status, code, message },
        }
    }
}

/// `error` and its sources, `: `-separated, for a log line.
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// `{"error":{"code":"…","message":"…"}}`.
#[derive(Deserialize)]
struct RefusalBody {
    error: RefusalDetail,
}

#[derive(Deserialize)]
struct RefusalDetail {
    code: Option<String>,
    #[serde(default)]
    message: String,
}

fn status_text(status: u16) -> String {
    let reason = reqwest::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason());
    reason.map_or_else(|| format!("status {status}"), |reason| format!("{status} {reason}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(status: u16, body: &str, expect: &str, transient: bool) {
        let error = Error::from_refusal(status, body);
        assert_eq!(error.to_string(), expect);
        assert_eq!(error.is_transient(), transient, "{expect}");
    }

    #[test]
    fn refusals_become_typed_errors() {
        let body = |code: &str, message: &str| format!(r#"{{"error":{{"code":"{code}","message":"{message}"}}}}"#);
        check(401, &body("UNAUTHENTICATED", "token expired"), "unauthenticated: token expired", false);
        check(403, &body("ACCESS_DENIED", "scope events:read"), "access denied: scope events:read", false);
        check(400, &body("INVALID_INPUT", "bad cursor"), "refused with 400 INVALID_INPUT: bad cursor", false);
        check(503, &body("UNAVAILABLE", "shutting down"), "refused with 503 UNAVAILABLE: shutting down", true);
        check(502, "<html>bad gateway</html>", "refused with 502 (no code): 502 Bad Gateway", true);
        check(418, &body("TEAPOT", "no"), "refused with 418 (no code): no", false);
        check(401, "", "unauthenticated: 401 Unauthorized", false);
    }

    #[test]
    fn codes_follow_the_variant() {
        assert_eq!(Error::from_refusal(401, "").code(), Some(ErrorCode::Unauthenticated));
        assert_eq!(Error::from_refusal(403, "").code(), Some(ErrorCode::AccessDenied));
        let body = r#"{"error":{"code":"NOT_FOUND","message":"no route"}}"#;
        assert_eq!(Error::from_refusal(404, body).code(), Some(ErrorCode::NotFound));
    }
}
