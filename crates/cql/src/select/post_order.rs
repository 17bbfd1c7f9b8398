//! `WHERE pk IN (...) ... ORDER BY ck`: rows sorted across partitions.
//!
//! Partitions are read in ring order, each in the clustering order asked
//! for, so rows of several partitions must be merged by their ORDER BY
//! columns after the read, and LIMIT applies to the merged rows. As in
//! Cassandra and ScyllaDB, the sort is stable (rows with equal ORDER BY
//! values keep partition order) and the whole result is read at once, so it
//! cannot be paged: a paged query is refused unless at most one row can come
//! back (ScyllaDB's rule; Cassandra refuses every paged one).
//!
//! Each partition contributes at most LIMIT rows: its rows after those can
//! never make the first LIMIT of the merge, since the sort keeps each
//! partition's own order.

use std::cmp::Ordering;
use std::future::Future;

use shoal_coordinator::data::{PartitionSelection, ReadCommand, ReadResult, ResultRow};
use shoal_schema::value::compare;
use shoal_schema::{ColumnKind, CqlType, TableMeta};

use crate::ast::{Order, Relation, Select};
use crate::error::{invalid, CqlResult};

const CANNOT_PAGE: &str = "Cannot page queries with both ORDER BY and a IN restriction on the partition key; you must \
                           either remove the ORDER BY or the IN and sort client side, or disable paging for this query";

/// Whether `select` orders rows of partitions chosen by IN (Cassandra's
/// "post-query ordering"), however many values the IN lists.
pub(super) fn needed(meta: &TableMeta, select: &Select) -> bool {
    // Checked after ORDER BY, which almost no query has: this runs per request.
    let in_on_partition_key = || {
        select.where_clause.iter().any(|relation| match relation {
            Relation::In { column, .. } => meta.column(column).is_some_and(|c| c.kind == ColumnKind::PartitionKey),
            _ => false,
        })
    };
    !select.order_by.is_empty() && in_on_partition_key()
}

/// Reads the rows of `command` (at most `limit`), sorted by `order_by`.
/// `page_size` is the client's; the command's ORDER BY was validated.
pub(super) async fn read<F, Fut>(
    meta: &TableMeta,
    order_by: &[(String, Order)],
    mut command: ReadCommand,
    limit: usize,
    page_size: Option<usize>,
    read: F,
) -> CqlResult<Vec<ResultRow>>
where
    F: Fn(ReadCommand) -> Fut,
    Fut: Future<Output = CqlResult<ReadResult>>,
{
    let no_partitions = matches!(&command.partitions, PartitionSelection::Keys(keys) if keys.is_empty());
    if page_size.is_some() && limit > 1 && !no_partitions {
        return Err(invalid(CANNOT_PAGE));
    }
    command.per_partition_limit = command.per_partition_limit.min(limit);
    command.row_limit = usize::MAX;
    let mut rows = read(command).await?.rows;
    sort(meta, order_by, &mut rows);
    rows.truncate(limit);
    Ok(rows)
}

/// Stable sort by the ORDER BY columns, each in the direction asked for.
/// A static-only row (no clustering values) sorts first, as a null would.
fn sort(meta: &TableMeta, order_by: &[(String, Order)], rows: &mut [ResultRow]) {
    let keys: Vec<(usize, &CqlType, Order)> = order_by
        .iter()
        .filter_map(|(name, order)| meta.column(name).map(|c| (c.position as usize, c.ty.unfrozen(), *order)))
        .collect();
    rows.sort_by(|a, b| {
        keys.iter()
            .map(|&(position, ty, order)| {
                let ordering = match (a.clustering.get(position), b.clustering.get(position)) {
                    (Some(x), Some(y)) => compare(ty, x, y),
                    (x, y) => x.is_some().cmp(&y.is_some()),
                };
                if order == Order::Desc {
                    ordering.reverse()
                } else {
                    ordering
                }
            })
            .find(|o| *o != Ordering::Equal)
            .unwrap_or(Ordering::Equal)
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    use bytes::Bytes;
    use shoal_coordinator::data::PartitionPosition;
    use shoal_coordinator::data::RowPosition;

    fn statement(text: &str) -> crate::ast::Statement {
        match crate::parser::parse_statement(text) {
            Ok(parsed) => parsed.statement,
            Err(e) => panic!("{text}: {e}"),
        }
    }

    fn table() -> TableMeta {
        let text = "CREATE TABLE t (k int, a int, b int, v int, PRIMARY KEY (k, a, b)) WITH CLUSTERING ORDER BY (a ASC, b DESC)";
        match statement(text) {
            crate::ast::Statement::CreateTable(s) => crate::ddl::create_table("ks", &s).expect("a valid table"),
            other => panic!("not a create table: {other:?}"),
        }
    }

    fn row(token: i64, clustering: &[i32]) -> ResultRow {
        ResultRow {
            position: RowPosition {
                partition: PartitionPosition { token, key: Bytes::new() },
                clustering: Some(Bytes::new()),
            },
            clustering: clustering.iter().map(|v| Bytes::copy_from_slice(&v.to_be_bytes())).collect(),
            cells: Vec::new(),
        }
    }

    fn sorted(order_by: &[(&str, Order)], rows: Vec<ResultRow>) -> Vec<(i64, Vec<i32>)> {
        let order_by: Vec<(String, Order)> = order_by.iter().map(|(n, o)| (n.to_string(), *o)).collect();
        let mut rows = rows;
        sort(&table(), &order_by, &mut rows);
        rows.iter()
            .map(|r| {
                let values = r.clustering.iter().map(|v| i32::from_be_bytes([v[0], v[1], v[2], v[3]])).collect();
                (r.position.partition.token, values)
            })
            .collect()
    }

    #[test]
    fn merges_partitions_by_the_order_by_columns() {
        // Two partitions, each read in the order asked for (a DESC, b ASC).
        let rows = vec![row(1, &[5, 1]), row(1, &[2, 0]), row(2, &[7, 0]), row(2, &[2, -1]), row(2, &[-3, 0])];
        let desc = [("a", Order::Desc), ("b", Order::Asc)];
        assert_eq!(
            sorted(&desc, rows),
            vec![(2, vec![7, 0]), (1, vec![5, 1]), (2, vec![2, -1]), (1, vec![2, 0]), (2, vec![-3, 0])]
        );
    }

    #[test]
    fn equal_order_by_values_keep_partition_order() {
        // Ordered by `a` alone: rows with equal `a` stay in read order.
        let rows = vec![row(1, &[1, 9]), row(1, &[1, 3]), row(2, &[0, 5]), row(2, &[1, 4])];
        assert_eq!(
            sorted(&[("a", Order::Asc)], rows),
            vec![(2, vec![0, 5]), (1, vec![1, 9]), (1, vec![1, 3]), (2, vec![1, 4])]
        );
    }

    #[test]
    fn static_only_rows_sort_as_nulls() {
        let rows = vec![row(1, &[3, 0]), row(2, &[])];
        assert_eq!(sorted(&[("a", Order::Asc)], rows.clone()), vec![(2, vec![]), (1, vec![3, 0])]);
        assert_eq!(sorted(&[("a", Order::Desc)], rows), vec![(1, vec![3, 0]), (2, vec![])]);
    }

    fn select(text: &str) -> Select {
        match statement(text) {
            crate::ast::Statement::Select(s) => s,
            other => panic!("not a select: {other:?}"),
        }
    }

    #[test]
    fn needed_only_for_in_on_the_partition_key_with_order_by() {
        let meta = table();
        assert!(needed(&meta, &select("SELECT * FROM t WHERE k IN (1, 2) ORDER BY a DESC")));
        assert!(needed(&meta, &select("SELECT * FROM t WHERE k IN ? ORDER BY a ASC")));
        assert!(!needed(&meta, &select("SELECT * FROM t WHERE k IN (1, 2)")));
        assert!(!needed(&meta, &select("SELECT * FROM t WHERE k = 1 AND a IN (1, 2) ORDER BY a DESC")));
    }
}
