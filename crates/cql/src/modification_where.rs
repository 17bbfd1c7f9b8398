//! The WHERE clause of an UPDATE or DELETE, checked before it is analyzed:
//! a write names its rows by primary key alone, so a restriction a SELECT
//! would take as a filter or a token range is an error here, with
//! ScyllaDB's texts (`modification_statement::process_where_clause` and
//! the restrictions it builds).

use std::collections::BTreeMap;

use shoal_schema::{ColumnKind, TableMeta};

use crate::ast::{Operator, Relation};
use crate::error::{invalid, CqlResult};

/// Refuses what no write may restrict: token(), a partition key range,
/// CONTAINS on the key, non-key columns, and clustering restrictions that
/// skip a column or follow a range.
pub fn check(meta: &TableMeta, relations: &[Relation]) -> CqlResult<()> {
    let mut non_key: Vec<&str> = Vec::new();
    // Restricted clustering positions: whether by equality (= or IN).
    let mut clustering: BTreeMap<i32, bool> = BTreeMap::new();
    for relation in relations {
        match relation {
            Relation::Token { columns, op, value } => {
                return Err(invalid(format!(
                    "The token function cannot be used in WHERE clauses for UPDATE and DELETE statements: token({}) {} {value}",
                    columns.join(", "),
                    op.text()
                )))
            }
            Relation::Simple { column, .. } | Relation::NotIn { column, .. } => {
                let Some(meta_column) = meta.column(column) else { continue };
                let op = match relation {
                    Relation::Simple { op, .. } => op,
                    _ => &Operator::NotIn,
                };
                match (meta_column.kind, op) {
                    (
                        ColumnKind::PartitionKey,
                        Operator::Lt | Operator::Le | Operator::Gt | Operator::Ge | Operator::NotIn,
                    ) => {
                        return Err(invalid(
                            "Only EQ and IN relation are supported on the partition key (unless you use the token() function)",
                        ))
                    }
                    (ColumnKind::Clustering, Operator::Contains | Operator::ContainsKey) => {
                        return Err(invalid(
                            "Cannot restrict clustering columns by a CONTAINS relation without a secondary index or filtering",
                        ))
                    }
                    (ColumnKind::Clustering, op) => {
                        clustering.insert(meta_column.position, *op == Operator::Eq);
                    }
                    (ColumnKind::PartitionKey, _) => {}
                    _ => non_key.push(column),
                }
            }
            Relation::In { column, .. } => match meta.column(column).map(|c| (c.kind, c.position)) {
                Some((ColumnKind::Clustering, position)) => {
                    clustering.insert(position, true);
                }
                Some((ColumnKind::Static | ColumnKind::Regular, _)) => non_key.push(column),
                _ => {}
            },
            Relation::MultiColumn { columns, op, .. } => {
                let last = columns.len().saturating_sub(1);
                for (i, column) in columns.iter().enumerate() {
                    if let Some(c) = meta.column(column).filter(|c| c.kind == ColumnKind::Clustering) {
                        clustering.insert(c.position, i < last || *op == Operator::Eq);
                    }
                }
            }
            Relation::MultiColumnIn { columns, .. } => {
                for column in columns {
                    if let Some(c) = meta.column(column).filter(|c| c.kind == ColumnKind::Clustering) {
                        clustering.insert(c.position, true);
                    }
                }
            }
            Relation::Element { column, .. } | Relation::IsNotNull { column } => non_key.push(column),
        }
    }
    if !non_key.is_empty() {
        return Err(invalid(format!("Invalid where clause contains non PRIMARY KEY columns: {}", non_key.join(", "))));
    }
    check_clustering_prefix(meta, &clustering)
}

/// Each restricted clustering column follows columns restricted by
/// equality. `clustering` maps restricted positions to whether by
/// equality. (A SELECT without ALLOW FILTERING is held to it too.)
pub(crate) fn check_clustering_prefix(meta: &TableMeta, clustering: &BTreeMap<i32, bool>) -> CqlResult<()> {
    let columns: Vec<&str> = meta.clustering_key().map(|c| c.name.as_str()).collect();
    for &position in clustering.keys() {
        let Some(name) = columns.get(position as usize) else { continue };
        let gap = (0..position).find(|p| !clustering.contains_key(p));
        if let Some(missing) = gap.and_then(|p| columns.get(p as usize)) {
            return Err(invalid(format!(
                "PRIMARY KEY column \"{name}\" cannot be restricted as preceding column \"{missing}\" is not restricted"
            )));
        }
        let range = (0..position).find(|p| clustering.get(p) == Some(&false));
        if let Some(previous) = range.and_then(|p| columns.get(p as usize)) {
            return Err(invalid(format!(
                "Clustering column \"{name}\" cannot be restricted (preceding column \"{previous}\" is restricted by a non-EQ relation)"
            )));
        }
    }
    Ok(())
}
