//! GROUP BY (Cassandra 3.10+): rows grouped by a prefix of the primary key
//! (the whole partition key, then clustering columns in order; a key column
//! restricted by `=` may be left out), one result row per group: aggregates
//! over the group's rows, other selectors from its first row.
//!
//! Rows arrive in key order, so a group is a run of consecutive rows. LIMIT,
//! PER PARTITION LIMIT and the page size count groups, as in Cassandra. A
//! group is known to be complete only once a row of the next group (or the
//! end) has been read, so a page always ends on the last row of a complete
//! group and the next page resumes after it, with a fresh group: no group is
//! split across pages or returned twice.

use std::collections::HashSet;
use std::future::Future;

use bytes::Bytes;
use shoal_coordinator::data::{ReadCommand, ReadResult, ResultRow, RowPosition};
use shoal_schema::{ColumnKind, TableMeta};

use super::aggregate::aggregate_row;
use super::{PagingState, Sel};
use crate::ast::{Operator, Relation, Select};
use crate::error::{invalid, CqlResult};
use crate::live_config::select_internal_page_size;

/// How rows are grouped: by partition, then by the first `clustering`
/// clustering columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Grouping {
    clustering: usize,
}

/// The statement's grouping, `None` without GROUP BY; Invalid (with
/// Cassandra's messages) unless it names a prefix of the primary key.
pub(super) fn grouping(meta: &TableMeta, select: &Select) -> CqlResult<Option<Grouping>> {
    if select.group_by.is_empty() {
        return Ok(None);
    }
    let out_of_order = || {
        invalid("Group by currently only support groups of columns following their declared order in the PRIMARY KEY")
    };
    let restricted_by_eq = restricted_by_eq(&select.where_clause);
    let mut key = meta.partition_key().chain(meta.clustering_key()).peekable();
    let mut clustering = 0;
    for name in &select.group_by {
        let column = meta.column(name).ok_or_else(|| invalid(format!("Undefined column name {name}")))?;
        if !column.kind.is_primary_key() {
            return Err(invalid(format!(
                "Group by is currently only supported on the columns of the PRIMARY KEY, got {name}"
            )));
        }
        loop {
            let next = key.next().ok_or_else(out_of_order)?;
            if next.kind == ColumnKind::Clustering {
                clustering += 1;
            }
            if next.name == *name {
                break;
            }
            if !restricted_by_eq.contains(next.name.as_str()) {
                return Err(out_of_order());
            }
        }
    }
    if key.peek().is_some_and(|c| c.kind == ColumnKind::PartitionKey) {
        return Err(invalid("Group by is not supported on only a part of the partition key"));
    }
    if clustering > 0 && select.distinct {
        return Err(invalid("Grouping on clustering columns is not allowed for SELECT DISTINCT queries"));
    }
    Ok(Some(Grouping { clustering }))
}

/// Columns a `c = ...` or `(c1, c2) = ...` relation pins to one value.
fn restricted_by_eq(relations: &[Relation]) -> HashSet<&str> {
    let mut columns = HashSet::new();
    for relation in relations {
        match relation {
            Relation::Simple { column, op: Operator::Eq, .. } => {
                columns.insert(column.as_str());
            }
            Relation::MultiColumn { columns: list, op: Operator::Eq, .. } => {
                columns.extend(list.iter().map(String::as_str));
            }
            _ => {}
        }
    }
    columns
}

impl Grouping {
    fn same_group(self, a: &ResultRow, b: &ResultRow) -> bool {
        a.position.partition == b.position.partition
            && a.clustering.iter().take(self.clustering).eq(b.clustering.iter().take(self.clustering))
    }
}

/// What a GROUP BY query asks for, beside the read itself.
pub(super) struct GroupedQuery<'a> {
    pub meta: &'a TableMeta,
    pub sels: &'a [Sel],
    pub grouping: Grouping,
    /// Groups per page; `usize::MAX` when the client does not page.
    pub page_size: usize,
    /// Groups left of the statement's LIMIT.
    pub remaining: usize,
    pub per_partition_limit: usize,
}

/// Reads groups from `command` onwards (resuming from `state`), at most a
/// page of them; returns their result rows and the state of the next page.
pub(super) async fn execute<F, Fut>(
    query: GroupedQuery<'_>,
    mut command: ReadCommand,
    state: Option<PagingState>,
    read: F,
) -> CqlResult<(Vec<Vec<Option<Bytes>>>, Option<PagingState>)>
where
    F: Fn(ReadCommand) -> Fut,
    Fut: Future<Output = CqlResult<ReadResult>>,
{
    let max_groups = query.page_size.min(query.remaining);
    let mut out = Vec::new();
    if max_groups == 0 {
        return Ok((out, None));
    }
    // The partition whose groups `partition_groups` counts (for PER
    // PARTITION LIMIT), carried across pages.
    let (mut partition, mut partition_groups) = match state {
        Some(state) => {
            let partition = state.position.partition.clone();
            command.start_after = Some(state.position);
            (Some(partition), state.in_partition)
        }
        None => (None, 0),
    };
    // A page of single-row groups needs one row past them; bigger groups
    // get bigger reads, up to the aggregates' chunk.
    let page_rows_max = select_internal_page_size();
    command.row_limit = max_groups.saturating_add(1).min(page_rows_max);
    // The replica's limit counts rows; this one counts groups.
    command.per_partition_limit = usize::MAX;
    let mut group: Vec<ResultRow> = Vec::new();
    loop {
        let page = read(command.clone()).await?;
        let mut next = page.rows.last().map(|r| r.position.clone());
        let mut more = page.limit_reached;
        for row in page.rows {
            if let Some(first) = group.first() {
                if query.grouping.same_group(first, &row) {
                    group.push(row);
                    continue;
                }
                out.push(aggregate_row(query.meta, query.sels, &group)?);
                partition_groups += 1;
                if out.len() == max_groups {
                    let left = query.remaining - out.len();
                    // The group is complete: `row` starts the next one.
                    let last = group.pop().map(|r| r.position).filter(|_| left > 0);
                    let state = last.map(|position| PagingState {
                        position,
                        remaining: left,
                        in_partition: partition_groups,
                        at_key: false,
                    });
                    return Ok((out, state));
                }
                group.clear();
            }
            if partition.as_ref() != Some(&row.position.partition) {
                partition = Some(row.position.partition.clone());
                partition_groups = 0;
            }
            if partition_groups >= query.per_partition_limit {
                // Skip the rest of this partition: resume after all of it.
                next = Some(RowPosition { partition: row.position.partition, clustering: None });
                more = true;
                break;
            }
            group.push(row);
        }
        if !more {
            break;
        }
        command.start_after = next;
        command.row_limit = command.row_limit.saturating_mul(2).min(page_rows_max);
    }
    let Some(last) = group.last().map(|r| r.position.clone()) else { return Ok((out, None)) };
    out.push(aggregate_row(query.meta, query.sels, &group)?);
    partition_groups += 1;
    // A full page carries a state even when the read ended with it, as in
    // Cassandra and ScyllaDB: a client that pages while pages come back
    // full (rather than while a state comes back) then gets a last, empty
    // page instead of starting over from the first.
    let left = query.remaining - out.len();
    let state = (out.len() == max_groups && left > 0).then_some(PagingState {
        position: last,
        remaining: left,
        in_partition: partition_groups,
        at_key: false,
    });
    Ok((out, state))
}
