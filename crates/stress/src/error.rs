//! Errors of the stress tool, in two kinds that must not mix:
//! [`StressError`] ends the run before it starts (bad option, cannot connect or
//! prepare: exit status 1), while [`OpError`] fails one operation, which is
//! counted and the run goes on.

use std::time::Duration;

/// A failure that stops `shoal stress` as a whole.
#[derive(Debug, thiserror::Error)]
pub enum StressError {
    #[error("{0}")]
    InvalidOption(String),
    #[error("cannot start the tokio runtime: {0}")]
    Runtime(std::io::Error),
    #[error("cannot connect to {address}: {reason}")]
    Connect { address: String, reason: String },
    #[error("cannot create the schema: {0}")]
    Schema(String),
    #[error("cannot prepare `{statement}`: {reason}")]
    Prepare { statement: String, reason: String },
    #[error("cannot write {path}: {reason}")]
    Report { path: String, reason: String },
}

/// A failure of one operation: counted in `errors`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum OpError {
    #[error("no reply within {0:?}")]
    Timeout(Duration),
    #[error("{0}")]
    Cql(String),
    /// An `ERROR`, `CLIENT_ERROR` or `SERVER_ERROR` line from memcached.
    #[error("server replied {0:?}")]
    ServerError(String),
    /// A write the server refused without an error (`NOT_STORED`, `NS`).
    #[error("not stored")]
    NotStored,
    /// The connection failed or the reply made no sense (the connection is
    /// re-opened).
    #[error("connection: {0}")]
    Connection(String),
}
