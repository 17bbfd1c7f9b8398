//! Errors of the coordinator, each something a front end can say to its
//! client in its own protocol.

use shoal_replica::ReplicaError;
use shoal_runtime::ShardError;
use thiserror::Error;

use crate::ConsistencyLevel;

/// What kind of write timed out (CQL's `writeType` of a WriteTimeout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteType {
    Simple,
    Batch,
    Counter,
    Cas,
}

impl WriteType {
    /// The protocol's name of the write type.
    pub fn name(self) -> &'static str {
        match self {
            WriteType::Simple => "SIMPLE",
            WriteType::Batch => "BATCH",
            WriteType::Counter => "COUNTER",
            WriteType::Cas => "CAS",
        }
    }
}

#[derive(Debug, Error)]
pub enum CoordinatorError {
    /// The request cannot apply to the data as it is (e.g. a list index
    /// past the end): the client's to fix.
    #[error("{0}")]
    Invalid(String),
    /// Too much work is queued; the client may retry later.
    #[error("{0}")]
    Overloaded(String),
    /// Any other failure of a replica: the server's fault.
    #[error(transparent)]
    Replica(ReplicaError),
    #[error(transparent)]
    Shard(#[from] ShardError),
    #[error("Operation timed out for a {} write at consistency {consistency} - received {received} responses and {block_for} required", write_type.name())]
    WriteTimeout { consistency: ConsistencyLevel, write_type: WriteType, received: usize, block_for: usize },
    /// Too few replicas are up to meet the level: the request was not sent.
    #[error("Cannot achieve consistency level {consistency}: {required} replicas required, {alive} alive")]
    Unavailable { consistency: ConsistencyLevel, required: usize, alive: usize },
    /// A replica on another node failed the request.
    #[error("{0}")]
    Remote(String),
    /// The cluster did not agree on a schema change (no group 0 leader
    /// within the timeout, or too many changes at once).
    #[error("{0}")]
    SchemaAgreement(String),
    /// A node operation (bootstrap, decommission, removenode) could not go
    /// on: why, and what to do.
    #[error("{0}")]
    NodeOperation(String),
    /// The schema file could not be written: the change was not applied.
    #[error("cannot write the schema file: {0}")]
    SchemaFile(String),
    #[error("Operation timed out for a read at consistency {consistency} - received {received} responses and {block_for} required")]
    ReadTimeout { consistency: ConsistencyLevel, received: usize, block_for: usize, data_present: bool },
}

impl From<ReplicaError> for CoordinatorError {
    fn from(e: ReplicaError) -> CoordinatorError {
        match e {
            ReplicaError::Invalid(message) => CoordinatorError::Invalid(message),
            ReplicaError::Overloaded(message) => CoordinatorError::Overloaded(message),
            // A mutation past the commitlog's entry limit is the client's
            // to split (InvalidRequest naming the limit), not a failure.
            ReplicaError::Storage(e @ shoal_storage::StorageError::TooLarge { .. }) => {
                CoordinatorError::Invalid(e.to_string())
            }
            other => CoordinatorError::Replica(other),
        }
    }
}
