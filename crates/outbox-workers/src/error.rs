//! The errors of the workers, each with the [`ErrorCode`] a caller reports.

use outbox_core::ErrorCode;

use crate::SinkError;

/// The result of every fallible call in this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong in a worker.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A configuration (a sink's, retention's) is invalid; the message names the key.
    #[error("invalid configuration: {key}: {message}")]
    Config {
        /// The offending key, e.g. `sinks[billing].url`.
        key: String,
        /// What is wrong with it.
        message: String,
    },
    /// No sink has this id here.
    #[error("no sink {0:?}")]
    UnknownSink(String),
    /// The sink has no such dead letter.
    #[error("sink {sink:?} has no dead letter {id}")]
    NoDeadLetter {
        /// The sink.
        sink: String,
        /// The dead letter's id.
        id: i64,
    },
    /// A sink refused a delivery asked for directly (a replay).
    #[error("sink {sink:?} refused the delivery: {error}")]
    Delivery {
        /// The sink.
        sink: String,
        /// Its refusal.
        error: SinkError,
    },
    /// The database refused or could not be reached.
    #[error(transparent)]
    Database(#[from] outbox_pg::Error),
}

impl Error {
    /// The code a caller reports for this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Config { .. } => ErrorCode::InvalidConfig,
            Error::UnknownSink(_) | Error::NoDeadLetter { .. } => ErrorCode::NotFound,
            Error::Delivery { .. } => ErrorCode::Unavailable,
            Error::Database(error) => error.code(),
        }
    }

    pub(crate) fn config(key: impl Into<String>, message: impl Into<String>) -> Error {
        Error::Config { key: key.into(), message: message.into() }
    }
}
