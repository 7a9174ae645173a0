//! Refusals as values that know their status and body (SPEC §5.1).
//!
//! Every refusal is `{"error":{"code":"…","message":"…"}}` with the code's
//! status; `405` adds `Allow`. Failures inside (the database, a malformed row)
//! become `INTERNAL` or `UNAVAILABLE` with a generic message: the detail is
//! logged with `tracing`, never sent to the client.

use std::fmt;

use bytes::Bytes;
use http::header::{ALLOW, CONTENT_TYPE, HeaderValue};
use http::{Response, StatusCode};
use outbox_core::ErrorCode;
use serde::Serialize;

use crate::Body;
use crate::body::full;

/// A refusal: its [`ErrorCode`], a message for the caller, and for `405` the methods allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    code: ErrorCode,
    message: String,
    allow: Option<String>,
}

impl ApiError {
    /// A refusal with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError { code, message: message.into(), allow: None }
    }

    /// `INVALID_INPUT` (400) with `message`, which names the parameter and the rule.
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::InvalidInput, message)
    }

    /// `ACCESS_DENIED` (403) with `message`.
    pub fn denied(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::AccessDenied, message)
    }

    /// `METHOD_NOT_ALLOWED` (405) naming the methods `allow`ed, e.g. `"GET, POST"`.
    pub fn method_not_allowed(allow: &str) -> ApiError {
        let message = format!("this path serves only {allow}");
        ApiError { code: ErrorCode::MethodNotAllowed, message, allow: Some(allow.to_owned()) }
    }

    /// A failure of the database layer. Refusals of the input keep their message; anything
    /// else is logged with `context` and answered with a generic message.
    pub fn from_pg(context: &str, error: outbox_pg::Error) -> ApiError {
        match error.code() {
            ErrorCode::InvalidInput => ApiError::invalid(error.to_string()),
            ErrorCode::Unavailable => {
                tracing::warn!(error = %error, "{context}: the database is unavailable");
                ApiError::new(ErrorCode::Unavailable, "the database is unavailable; try again")
            }
            _ => ApiError::internal(context, &error),
        }
    }

    /// `INTERNAL` (500) with a generic message; `error` is logged with `context`, not sent.
    pub fn internal(context: &str, error: &dyn fmt::Display) -> ApiError {
        tracing::error!(error = %error, "{context}");
        ApiError::new(ErrorCode::Internal, "internal error")
    }

    /// The refusal's code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The refusal's message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The refusal as a response: the JSON body with the code's status, and `Allow` on a 405.
    pub fn into_response(self) -> Response<Body> {
        let mut response = json_response(status(self.code), &Envelope::new(self.code, &self.message));
        if let Some(allow) = self.allow.and_then(|allow| HeaderValue::from_str(&allow).ok()) {
            response.headers_mut().insert(ALLOW, allow);
        }
        response
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ApiError {}

/// The JSON refusal of SPEC §5.1 as a response: `{"error":{"code","message"}}` with the
/// code's status. For `METHOD_NOT_ALLOWED` use [`method_not_allowed`], which also sets `Allow`.
pub fn error_response(code: ErrorCode, message: impl Into<String>) -> Response<Body> {
    ApiError::new(code, message).into_response()
}

/// `405 METHOD_NOT_ALLOWED` with `Allow: <allow>` (e.g. `"GET, POST"`).
pub fn method_not_allowed(allow: &str) -> Response<Body> {
    ApiError::method_not_allowed(allow).into_response()
}

/// `value` as a JSON response with `status`. Should `value` fail to serialize, the answer is
/// a 500 `INTERNAL` refusal.
pub fn json_response(status: StatusCode, value: &impl Serialize) -> Response<Body> {
    match serde_json::to_vec(value) {
        Ok(json) => bytes_response(status, "application/json", json.into()),
        Err(error) => {
            tracing::error!(error = %error, "serializing a response");
            let fallback = br#"{"error":{"code":"INTERNAL","message":"internal error"}}"#;
            bytes_response(StatusCode::INTERNAL_SERVER_ERROR, "application/json", Bytes::from_static(fallback))
        }
    }
}

/// `body` with `status` and `Content-Type: <content_type>`.
pub(crate) fn bytes_response(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<Body> {
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

fn status(code: ErrorCode) -> StatusCode {
    StatusCode::from_u16(code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// `{"error":{"code","message"}}`.
#[derive(Serialize)]
struct Envelope<'a> {
    error: Detail<'a>,
}

#[derive(Serialize)]
struct Detail<'a> {
    code: ErrorCode,
    message: &'a str,
}

impl<'a> Envelope<'a> {
    fn new(code: ErrorCode, message: &'a str) -> Envelope<'a> {
        Envelope { error: Detail { code, message } }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    async fn body_text(response: Response<Body>) -> String {
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn a_refusal_is_the_json_envelope_with_its_status() {
        let response = error_response(ErrorCode::AccessDenied, "not yours");
        assert_eq!(response.status(), 403);
        assert_eq!(response.headers()[CONTENT_TYPE], "application/json");
        assert_eq!(body_text(response).await, r#"{"error":{"code":"ACCESS_DENIED","message":"not yours"}}"#);
    }

    #[tokio::test]
    async fn method_not_allowed_names_the_allowed_methods() {
        let response = method_not_allowed("GET, POST");
        assert_eq!(response.status(), 405);
        assert_eq!(response.headers()[ALLOW], "GET, POST");
        assert!(body_text(response).await.contains("METHOD_NOT_ALLOWED"));
    }

    #[test]
    fn internal_failures_carry_no_detail() {
        let error = ApiError::internal("reading", &"relation \"outbox\" does not exist");
        assert_eq!(error.code(), ErrorCode::Internal);
        assert_eq!(error.message(), "internal error");
    }
}
