//! The error codes every Outbox surface speaks (SPEC §5.1).
//!
//! A code is a value, not an HTTP type: this crate knows nothing of HTTP, so
//! [`ErrorCode::status`] is a plain number that the HTTP layer turns into a status.

use std::fmt;

/// The stable, machine-readable reason for a refusal or a failure.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    /// The caller sent something that breaks a rule; the message names it.
    InvalidInput,
    /// The caller did not prove who it is.
    Unauthenticated,
    /// The caller is known but may not do this.
    AccessDenied,
    /// The thing asked for does not exist (or is not the caller's to see).
    NotFound,
    /// The method is not served on this path.
    MethodNotAllowed,
    /// The request conflicts with the current state.
    Conflict,
    /// The body is larger than allowed.
    PayloadTooLarge,
    /// A dependency (the database, an authority) cannot be reached right now.
    Unavailable,
    /// Something failed inside; the message carries no internals.
    Internal,
    /// The configuration is invalid; the message names the key.
    InvalidConfig,
    /// An applied migration differs from the code's copy (SPEC §2.1).
    MigrationDrift,
}

impl ErrorCode {
    /// Every code, in the order of the SPEC's table.
    pub const ALL: [ErrorCode; 11] = [
        ErrorCode::InvalidInput,
        ErrorCode::Unauthenticated,
        ErrorCode::AccessDenied,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::Conflict,
        ErrorCode::PayloadTooLarge,
        ErrorCode::Unavailable,
        ErrorCode::Internal,
        ErrorCode::InvalidConfig,
        ErrorCode::MigrationDrift,
    ];

    /// The code as it is written on the wire, e.g. `INVALID_INPUT`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidInput => "INVALID_INPUT",
            ErrorCode::Unauthenticated => "UNAUTHENTICATED",
            ErrorCode::AccessDenied => "ACCESS_DENIED",
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            ErrorCode::Conflict => "CONFLICT",
            ErrorCode::PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            ErrorCode::Unavailable => "UNAVAILABLE",
            ErrorCode::Internal => "INTERNAL",
            ErrorCode::InvalidConfig => "INVALID_CONFIG",
            ErrorCode::MigrationDrift => "MIGRATION_DRIFT",
        }
    }

    /// The HTTP status a refusal with this code is answered with.
    ///
    /// `INVALID_CONFIG` and `MIGRATION_DRIFT` stop a process rather than answer a
    /// request; should one reach a client it is an internal failure (500).
    pub fn status(self) -> u16 {
        match self {
            ErrorCode::InvalidInput => 400,
            ErrorCode::Unauthenticated => 401,
            ErrorCode::AccessDenied => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::Conflict => 409,
            ErrorCode::PayloadTooLarge => 413,
            ErrorCode::Unavailable => 503,
            ErrorCode::Internal | ErrorCode::InvalidConfig | ErrorCode::MigrationDrift => 500,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_form_matches_serde() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
            let back: ErrorCode = serde_json::from_str(&json).unwrap();
            assert_eq!(back, code);
        }
    }

    #[test]
    fn statuses_follow_the_spec_table() {
        let table = [
            (ErrorCode::InvalidInput, 400),
            (ErrorCode::Unauthenticated, 401),
            (ErrorCode::AccessDenied, 403),
            (ErrorCode::NotFound, 404),
            (ErrorCode::MethodNotAllowed, 405),
            (ErrorCode::Conflict, 409),
            (ErrorCode::PayloadTooLarge, 413),
            (ErrorCode::Unavailable, 503),
            (ErrorCode::Internal, 500),
        ];
        for (code, status) in table {
            assert_eq!(code.status(), status, "{code}");
        }
    }
}
