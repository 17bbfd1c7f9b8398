//! Schema: CQL types and their values, keyspace and table metadata, and the
//! partitioner (Murmur3 tokens) with ScyllaDB's token→shard mapping.
//!
//! Everything here is plain data and pure functions: no I/O, no shard state.
//! A schema snapshot is immutable once built and shared read-only by shards.

pub mod arithmetic;
pub mod cast;
pub mod collection;
pub mod comparable;
pub mod fields;
pub mod function;
pub mod index;
pub mod literal;
pub mod marshal;
pub mod math;
pub mod roles;
pub mod schema;
pub mod service_level;
pub mod sharder;
pub mod temporal_arithmetic;
pub mod token;
pub mod type_compat;
pub mod types;
pub mod value;
pub mod vector;
pub mod view;

pub use function::{Functions, UserAggregate, UserFunction};
pub use index::{IndexKind, IndexMeta};
pub use literal::{parse_literal, LiteralError, LiteralKind};
pub use roles::{Role, Roles};
pub use schema::{
    ClusteringOrder, ColumnKind, ColumnMeta, DroppedColumn, KeyspaceMeta, Schema, SchemaChange, SchemaChangeKind,
    SchemaChangeTarget, TableMeta, TableOptions, SYSTEM_KEYSPACES,
};
pub use service_level::{EffectiveServiceLevel, ServiceLevel, Workload};
pub use sharder::Sharder;
pub use token::{murmur3_token, TokenError};
pub use types::{CqlType, TypeError, UserType, MAX_VECTOR_DIMENSION};
pub use value::{Value, ValueError};
