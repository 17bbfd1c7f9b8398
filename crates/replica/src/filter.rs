//! Row filters: restrictions the storage order cannot serve (ALLOW FILTERING),
//! checked on each live row on the shard, before limits count the row.

use std::cmp::Ordering;

use bytes::Bytes;
use shoal_schema::collection::Items;
use shoal_schema::token::split_partition_key;
use shoal_schema::value::compare;
use shoal_schema::{ColumnKind, CqlType, TableMeta};

use crate::database::ReplicaError;
use crate::read::ResultRow;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// Equal to one of the values.
    In,
    /// A collection holding the value (for a map: as a value).
    Contains,
    /// A map holding the value as a key.
    ContainsKey,
    /// A map whose entry at `values[0]` is `values[1]` (`m[k] = v`).
    EntryEq,
}

/// `column op values` on the table's column at index `column`.
#[derive(Debug, Clone)]
pub struct RowFilter {
    pub column: usize,
    pub op: FilterOp,
    /// One value, or the candidates of `In`.
    pub values: Vec<Bytes>,
}

pub(crate) fn matches_all(meta: &TableMeta, filters: &[RowFilter], row: &ResultRow) -> Result<bool, ReplicaError> {
    for filter in filters {
        if !matches(meta, filter, row)? {
            return Ok(false);
        }
    }
    Ok(true)
}

fn matches(meta: &TableMeta, filter: &RowFilter, row: &ResultRow) -> Result<bool, ReplicaError> {
    let column = &meta.columns[filter.column];
    let value: Option<&[u8]> = match column.kind {
        ColumnKind::PartitionKey => {
            let key = &row.position.partition.key;
            let parts = split_partition_key(meta.partition_key_len(), key)
                .map_err(|e| ReplicaError::Corrupt(format!("partition key of {}.{}: {e}", meta.keyspace, meta.name)))?;
            parts.get(column.position as usize).copied()
        }
        ColumnKind::Clustering => row.clustering.get(column.position as usize).map(|b| &b[..]),
        ColumnKind::Static | ColumnKind::Regular => row.cells[filter.column].as_ref().map(|c| &c.value[..]),
    };
    // A null matches no restriction, as in Cassandra.
    let Some(value) = value else { return Ok(false) };
    let ty = column.ty.unfrozen();
    let first = filter.values.first().map(|b| &b[..]).unwrap_or_default();
    let ordering = || compare(ty, value, first);
    Ok(match filter.op {
        FilterOp::Eq => ordering() == Ordering::Equal,
        FilterOp::Ne => ordering() != Ordering::Equal,
        FilterOp::Lt => ordering() == Ordering::Less,
        FilterOp::Le => ordering() != Ordering::Greater,
        FilterOp::Gt => ordering() == Ordering::Greater,
        FilterOp::Ge => ordering() != Ordering::Less,
        FilterOp::In => filter.values.iter().any(|v| compare(ty, value, v) == Ordering::Equal),
        FilterOp::Contains => collection_contains(ty, value, first, false),
        FilterOp::ContainsKey => collection_contains(ty, value, first, true),
        FilterOp::EntryEq => match (ty, &filter.values[..]) {
            (CqlType::Map(key_ty, value_ty), [key, wanted]) => Items::entries(value)
                .flatten()
                .collect::<Vec<_>>()
                .chunks_exact(2)
                .find(|entry| compare(key_ty.unfrozen(), entry[0], key) == Ordering::Equal)
                .is_some_and(|entry| compare(value_ty.unfrozen(), entry[1], wanted) == Ordering::Equal),
            _ => false,
        },
    })
}

/// Walks a serialized list, set or map looking for `needle` among its
/// elements (lists, sets), values (maps) or keys (maps, `keys`).
fn collection_contains(ty: &CqlType, collection: &[u8], needle: &[u8], keys: bool) -> bool {
    let (elem_ty, is_map) = match ty {
        CqlType::List(e) | CqlType::Set(e) => (e.as_ref(), false),
        CqlType::Map(k, v) => (if keys { k.as_ref() } else { v.as_ref() }, true),
        _ => return false,
    };
    let elements = if is_map { Items::entries(collection) } else { Items::new(collection) };
    // A map's items alternate key, value.
    elements
        .flatten()
        .enumerate()
        .filter(|(i, _)| !is_map || i.is_multiple_of(2) == keys)
        .any(|(_, element)| compare(elem_ty.unfrozen(), element, needle) == Ordering::Equal)
}
