//! The errors of the PostgreSQL layer, each with the [`ErrorCode`] a caller reports.

use outbox_core::{ErrorCode, Position, ValidationError};

/// The result of every fallible call in this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong in the PostgreSQL layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An event broke a publishing rule; nothing was written.
    #[error("invalid event: {0}")]
    Invalid(#[from] ValidationError),
    /// A migration name or the order of owners is invalid; nothing ran.
    #[error("invalid migration {name:?}: {reason}")]
    InvalidMigration {
        /// The offending migration.
        name: String,
        /// The rule it broke.
        reason: String,
    },
    /// An applied migration's SQL differs from the code's copy.
    #[error("migration {name} was changed after it was applied (checksum differs); refusing to run")]
    MigrationDrift {
        /// The drifted migration.
        name: String,
    },
    /// A migration's SQL failed; its transaction was rolled back.
    #[error("migration {name} failed: {source}")]
    MigrationFailed {
        /// The migration that failed.
        name: String,
        /// The database's error.
        source: sqlx::Error,
    },
    /// A stored outbox row does not have the shape the outbox writes.
    #[error("outbox row {position} is malformed: {reason}")]
    MalformedRow {
        /// The row's position.
        position: Position,
        /// What is wrong with it.
        reason: String,
    },
    /// A request to this layer was out of range (a zero limit, a bad pattern).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// A webhook subscription broke a rule that needs the database to check (how many a
    /// tenant has, how many secrets are in their grace period); nothing was written.
    #[error("{0}")]
    Refused(#[from] outbox_core::webhook::Refusal),
    /// A sealed value does not open with the seal key (another key, or altered), or the
    /// system's random generator failed.
    #[error("sealed data: {0}")]
    Sealed(String),
    /// The database refused or could not be reached.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
}

impl Error {
    /// The code a caller reports for this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Invalid(_) | Error::InvalidRequest(_) | Error::Refused(_) => ErrorCode::InvalidInput,
            Error::InvalidMigration { .. } => ErrorCode::InvalidConfig,
            Error::MigrationDrift { .. } => ErrorCode::MigrationDrift,
            Error::MigrationFailed { .. } | Error::MalformedRow { .. } | Error::Sealed(_) => ErrorCode::Internal,
            Error::Database(error) if is_unavailable(error) => ErrorCode::Unavailable,
            Error::Database(_) => ErrorCode::Internal,
        }
    }
}

/// Whether the database could not be reached at all, as opposed to refusing a statement.
fn is_unavailable(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Tls(_))
}
