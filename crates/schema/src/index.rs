//! Secondary indexes: what an index is (its name, target and kind) and the
//! layout of the hidden table that holds it.
//!
//! As in ScyllaDB, an index is a materialized view of its base table. A
//! global index is keyed by the indexed value, so a query by value reads one
//! view partition and then the base rows it names; its clustering key is the
//! base row's token, partition key and clustering key, so a view partition
//! lists rows in the order a full scan meets them. A local index
//! (`CREATE INDEX ON t ((p), v)`) is keyed by the base partition key, so it
//! lives on the base partition's replicas, and clusters by the indexed value.
//!
//! Invariants:
//! - a view table's columns are: its partition key (the indexed value, or
//!   the base partition key for a local index), then clustering columns
//!   (see [`view_table`]), and [`LIVENESS_COLUMN`];
//! - an index's view table is named [`IndexMeta::view_name`] and has the id
//!   [`IndexMeta::view_id`], in the base table's keyspace, and carries the
//!   base table's name in [`TableMeta::view_of`].

use bytes::Bytes;
use uuid::Uuid;

use crate::schema::{ClusteringOrder, ColumnKind, ColumnMeta, TableMeta, TableOptions};
use crate::types::CqlType;

/// The view column holding the base row's token in a global index.
pub const TOKEN_COLUMN: &str = "idx_token";
/// The view column whose elements make an entry live: one per part of the
/// base row that gives the entry (the indexed cell, a collection element,
/// or for a key column's index every part of the row), each with that
/// part's timestamp and expiry, so the entry lives exactly as long as one
/// of them does (ScyllaDB's virtual columns).
pub const LIVENESS_COLUMN: &str = "idx_live";

/// Which values of the target column an index holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexKind {
    /// The column's value; for a non-frozen collection, its elements'
    /// values (`values(c)`).
    Values,
    /// A non-frozen map's keys (`keys(m)`).
    Keys,
    /// A non-frozen map's entries (`entries(m)`), as `(key, value)` tuples.
    Entries,
    /// A frozen collection's whole value (`full(c)`).
    Full,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexMeta {
    pub name: String,
    /// The indexed column's name.
    pub column: String,
    pub kind: IndexKind,
    /// Keyed by the base partition key (`CREATE INDEX ON t ((p), v)`).
    pub local: bool,
    /// The id of the view table holding the index.
    pub view_id: Uuid,
}

impl IndexMeta {
    /// The name of the table holding the index (ScyllaDB's).
    pub fn view_name(&self) -> String {
        view_name(&self.name)
    }
}

/// The name of the table holding index `index`.
pub fn view_name(index: &str) -> String {
    format!("{index}_index")
}

/// The type of the values an index of `kind` on a column of type `ty`
/// holds, or `None` where the kind does not apply to the type.
pub fn value_type(ty: &CqlType, kind: IndexKind) -> Option<CqlType> {
    match (kind, ty) {
        (IndexKind::Values, CqlType::List(e) | CqlType::Set(e)) => Some(e.as_ref().clone()),
        (IndexKind::Values, CqlType::Map(_, v)) => Some(v.as_ref().clone()),
        (IndexKind::Values, ty) => Some(ty.clone()),
        (IndexKind::Keys, CqlType::Map(k, _)) => Some(k.as_ref().clone()),
        (IndexKind::Entries, CqlType::Map(k, v)) => {
            Some(CqlType::Frozen(Box::new(CqlType::Tuple(vec![k.as_ref().clone(), v.as_ref().clone()]))))
        }
        (IndexKind::Full, CqlType::Frozen(_)) => Some(ty.clone()),
        _ => None,
    }
}

/// The value an `entries()` index holds for the map entry `key: value`.
pub fn entry_value(key: &[u8], value: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(8 + key.len() + value.len());
    for part in [key, value] {
        out.extend_from_slice(&(part.len() as i32).to_be_bytes());
        out.extend_from_slice(part);
    }
    Bytes::from(out)
}

/// Whether an index on `column` has one entry per base partition (a
/// static column's) rather than one per row.
pub fn per_partition(column: &ColumnMeta) -> bool {
    column.kind == ColumnKind::Static
}

/// The view table of `index` on `base`.
pub fn view_table(base: &TableMeta, index: &IndexMeta) -> TableMeta {
    // The DDL checked the column and the kind.
    let target = base.column(&index.column).expect("an index's column is in its base table");
    let value_ty = value_type(&target.ty, index.kind).expect("an index's kind fits its column");
    let key_column = target.kind.is_primary_key();
    let value_name = if key_column { format!("idx_{}", target.name) } else { target.name.clone() };
    let mut columns = Vec::new();
    let mut push = |name: String, ty: CqlType, kind: ColumnKind, order: ClusteringOrder| {
        let position = match kind.is_primary_key() {
            true => columns.iter().filter(|c: &&ColumnMeta| c.kind == kind).count() as i32,
            false => -1,
        };
        let id = columns.len() as u32;
        columns.push(ColumnMeta { id, name, ty, kind, position, order });
    };
    let base_pk = base.partition_key().map(|c| (c.name.clone(), c.ty.clone()));
    if index.local {
        for (name, ty) in base_pk {
            push(name, ty, ColumnKind::PartitionKey, ClusteringOrder::Asc);
        }
        push(value_name, value_ty, ColumnKind::Clustering, ClusteringOrder::Asc);
    } else {
        push(value_name, value_ty, ColumnKind::PartitionKey, ClusteringOrder::Asc);
        push(TOKEN_COLUMN.to_string(), CqlType::Bigint, ColumnKind::Clustering, ClusteringOrder::Asc);
        for (name, ty) in base_pk {
            push(name, ty, ColumnKind::Clustering, ClusteringOrder::Asc);
        }
    }
    if !per_partition(target) {
        for c in base.clustering_key() {
            push(c.name.clone(), c.ty.clone(), ColumnKind::Clustering, c.order);
        }
    }
    let liveness = CqlType::Set(Box::new(CqlType::Blob));
    push(LIVENESS_COLUMN.to_string(), liveness, ColumnKind::Regular, ClusteringOrder::Asc);
    let next_column_id = columns.len() as u32;
    let mut view = TableMeta {
        id: index.view_id,
        keyspace: base.keyspace.clone(),
        name: index.view_name(),
        columns,
        options: TableOptions::default(),
        next_column_id,
        indexes: Vec::new(),
        view_of: Some(base.name.clone()),
        materialized: None,
        dropped_columns: Default::default(),
    };
    view.normalize_columns();
    view
}

/// Where an index entry lives in its view: the view partition key's
/// components and the view clustering key (its values and encoding).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryKey {
    pub partition: Vec<Bytes>,
    pub clustering: Vec<Bytes>,
    pub clustering_encoded: Bytes,
}

/// The view key of the entry for indexed value `value` of the base row
/// with partition key components `base_pk`, token `token` and clustering
/// values `base_ck` (empty for a per-partition entry).
pub fn entry_key(
    view: &TableMeta,
    local: bool,
    value: &[u8],
    base_pk: &[Bytes],
    token: i64,
    base_ck: &[Bytes],
) -> EntryKey {
    let value = Bytes::copy_from_slice(value);
    let (partition, clustering): (Vec<Bytes>, Vec<Bytes>) = if local {
        (base_pk.to_vec(), std::iter::once(value).chain(base_ck.iter().cloned()).collect())
    } else {
        let token = Bytes::copy_from_slice(&token.to_be_bytes());
        let clustering = std::iter::once(token).chain(base_pk.iter().cloned()).chain(base_ck.iter().cloned()).collect();
        (vec![value], clustering)
    };
    let clustering_encoded = view.encode_clustering(&clustering);
    EntryKey { partition, clustering, clustering_encoded }
}
