//! Errors of the CQL layer, each naming the protocol error it becomes at the
//! edge (the transport maps them one to one).

use shoal_coordinator::{ConsistencyLevel, CoordinatorError, WriteType};
use thiserror::Error;

#[derive(Debug, Clone, Error, PartialEq)]
pub enum CqlError {
    /// SyntaxError (0x2000); the message carries line and column.
    #[error("{0}")]
    Syntax(String),
    /// Invalid (0x2200): a well-formed request that cannot be run.
    #[error("{0}")]
    Invalid(String),
    /// AlreadyExists (0x2400).
    #[error("{message}")]
    AlreadyExists { keyspace: String, table: String, message: String },
    /// Unprepared (0x2500): the client must prepare the statement again.
    #[error("Prepared query with ID {} not found (either the query was not prepared on this host (maybe the host has been restarted?) or you have prepared too many queries and it has been evicted from the internal cache)", hex(.0))]
    Unprepared(Vec<u8>),
    /// BadCredentials (0x0100): a login refused.
    #[error("{0}")]
    BadCredentials(String),
    /// Unauthorized (0x2100).
    #[error("{0}")]
    Unauthorized(String),
    /// ConfigError (0x2300).
    #[error("{0}")]
    Config(String),
    /// ProtocolError (0x000A): the request itself is malformed.
    #[error("{0}")]
    Protocol(String),
    /// Overloaded (0x1001): the node has too much queued; retry later.
    #[error("{0}")]
    Overloaded(String),
    /// WriteTimeout (0x1100): the write may or may not have been applied.
    #[error("{message}")]
    WriteTimeout {
        message: String,
        consistency: ConsistencyLevel,
        write_type: WriteType,
        received: usize,
        block_for: usize,
    },
    /// ReadTimeout (0x1200).
    #[error("{message}")]
    ReadTimeout {
        message: String,
        consistency: ConsistencyLevel,
        received: usize,
        block_for: usize,
        data_present: bool,
    },
    /// Unavailable (0x1000): too few replicas are up for the level.
    #[error("{message}")]
    Unavailable { message: String, consistency: ConsistencyLevel, required: usize, alive: usize },
    /// FunctionFailure (0x1400): a function failed on its arguments, as
    /// `fromJson()` does on JSON that is no value of its receiver's type.
    #[error("{message}")]
    FunctionFailure { keyspace: String, function: String, arg_types: Vec<String>, message: String },
    /// ServerError (0x0000): our fault, not the client's.
    #[error("{0}")]
    Server(String),
}

pub type CqlResult<T> = Result<T, CqlError>;

pub(crate) fn invalid(message: impl Into<String>) -> CqlError {
    CqlError::Invalid(message.into())
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl From<CoordinatorError> for CqlError {
    fn from(e: CoordinatorError) -> CqlError {
        match e {
            CoordinatorError::Invalid(message) => CqlError::Invalid(message),
            CoordinatorError::Overloaded(message) => CqlError::Overloaded(message),
            CoordinatorError::WriteTimeout { consistency, write_type, received, block_for } => {
                CqlError::WriteTimeout { message: e.to_string(), consistency, write_type, received, block_for }
            }
            CoordinatorError::ReadTimeout { consistency, received, block_for, data_present } => {
                CqlError::ReadTimeout { message: e.to_string(), consistency, received, block_for, data_present }
            }
            CoordinatorError::Unavailable { consistency, required, alive } => {
                CqlError::Unavailable { message: e.to_string(), consistency, required, alive }
            }
            other => CqlError::Server(other.to_string()),
        }
    }
}
