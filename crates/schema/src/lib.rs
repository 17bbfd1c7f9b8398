//! Schema: CQL types and their values, keyspace and table metadata, and the
//! partitioner (Murmur3 tokens) with ScyllaDB's token→shard mapping.
//!
//! Everything here is plain data and pure functions: no I/O, no shard state.
//! A schema snapshot is immutable once built and shared read-only by shards.

pub mod types;

pub use types::{CqlType, TypeError};
