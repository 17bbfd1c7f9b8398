//! What executing a statement produces, before the transport encodes it.

use std::sync::Arc;

use bytes::Bytes;
use shoal_schema::{CqlType, SchemaChange};

/// A column of a result or a bind variable, as described to drivers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnSpec {
    pub keyspace: String,
    pub table: String,
    pub name: String,
    pub ty: CqlType,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Rows {
    /// Shared with the statement that produced them (a compiled SELECT
    /// builds its result columns once).
    pub columns: Arc<[ColumnSpec]>,
    /// Row-major cells; `None` is null.
    pub rows: Vec<Vec<Option<Bytes>>>,
    /// Present when more pages follow; opaque to clients.
    pub paging_state: Option<Bytes>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum QueryResult {
    Void,
    Rows(Rows),
    SetKeyspace(String),
    SchemaChange(SchemaChange),
}

/// A prepared statement as the PREPARE answer describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedInfo {
    pub id: Bytes,
    pub variables: Vec<ColumnSpec>,
    /// Indexes in `variables` of the partition key columns, in key order,
    /// when every key column is bound by a marker: drivers route by them.
    pub pk_indexes: Vec<u16>,
    /// The result columns of a SELECT; empty otherwise.
    pub result_columns: Vec<ColumnSpec>,
    /// A conditional (LWT) statement.
    pub conditional: bool,
}
