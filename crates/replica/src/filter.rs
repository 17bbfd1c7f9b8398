//! Row filters: restrictions the storage order cannot serve (ALLOW FILTERING),
//! checked on each live row on the shard, before limits count the row.

use std::cmp::Ordering;

use bytes::Bytes;
use shoal_schema::collection::Items;
use shoal_schema::token::split_partition_key;
use shoal_schema::value::compare;
use shoal_schema::{ColumnKind, CqlType, TableMeta};

use crate::database::ReplicaError;
use crate::like::like;
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
    /// A string matching the `LIKE` pattern `values[0]`.
    Like,
    /// Equal to none of the values (`NOT IN`); a null is in no list and
    /// out of none, so it does not match, as in ScyllaDB.
    NotIn,
    /// A list whose element at index `values[0]` (an int) is `values[1]`
    /// (`l[i] = v`); an index out of the list matches nothing.
    ElementEq,
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
        FilterOp::NotIn => filter.values.iter().all(|v| compare(ty, value, v) != Ordering::Equal),
        FilterOp::Like => like(first, value),
        FilterOp::ElementEq => list_element_is(ty, value, &filter.values),
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

/// `l[index] = wanted` on a serialized list, `values` being the index (a
/// 4-byte int) and `wanted`.
fn list_element_is(ty: &CqlType, list: &[u8], values: &[Bytes]) -> bool {
    let (CqlType::List(elem_ty), [index, wanted]) = (ty, values) else { return false };
    let Ok(index) = <[u8; 4]>::try_from(&index[..]).map(i32::from_be_bytes) else { return false };
    let Ok(index) = usize::try_from(index) else { return false };
    Items::new(list)
        .nth(index)
        .flatten()
        .is_some_and(|element| compare(elem_ty.unfrozen(), element, wanted) == Ordering::Equal)
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

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_schema::collection;

    #[test]
    fn list_elements_by_index() {
        let ty = CqlType::List(Box::new(CqlType::Text));
        let list = collection::serialize([Some(&b"zero"[..]), Some(&b"one"[..])], 2);
        let at = |index: i32, wanted: &'static [u8]| {
            list_element_is(&ty, &list, &[Bytes::copy_from_slice(&index.to_be_bytes()), Bytes::from_static(wanted)])
        };
        assert!(at(0, b"zero"));
        assert!(at(1, b"one"));
        assert!(!at(1, b"zero"));
        assert!(!at(2, b"one"));
        assert!(!at(-1, b"one"));
        // Not a 4-byte index: nothing.
        assert!(!list_element_is(&ty, &list, &[Bytes::from_static(b"x"), Bytes::from_static(b"one")]));
    }
}
