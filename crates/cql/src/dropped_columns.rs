//! Dropped columns as Cassandra and ScyllaDB keep them: `ALTER TABLE t
//! DROP c [USING TIMESTAMP n]` leaves a record (name, type, kind, id, drop
//! time) in the table's schema, shown in `system_schema.dropped_columns`
//! and kept in the schema file. A column added again under that name takes
//! the dropped column's id back, so its cells written after the drop time
//! read again while those at or before it never do (the replica reads them
//! as deleted, compaction purges them). Re-adding is refused where the old
//! cells would not read as the new column: a counter, another kind of
//! collection, a type that does not read the old values, another kind.

use shoal_schema::{ColumnKind, ColumnMeta, CqlType, DroppedColumn, TableMeta};

use crate::ast::{AlterTableOp, Statement, Term};
use crate::error::{invalid, CqlResult};
use crate::values::{eval_required, Bindings, Receiver};

/// Gives a `DROP ... USING TIMESTAMP ?` its bound time, refusing a null or
/// unset one as a write's `USING TIMESTAMP` is refused.
pub fn bind(statement: &mut Statement, bindings: Bindings<'_>) -> CqlResult<()> {
    let Statement::AlterTable(alter) = statement else { return Ok(()) };
    let AlterTableOp::Drop { timestamp, timestamp_marker: Some(index), .. } = &mut alter.op else { return Ok(()) };
    let receiver = Receiver { name: "[timestamp]", ty: &CqlType::Bigint };
    let bytes = eval_required(&Term::Bind(*index), receiver, bindings)?;
    *timestamp = Some(i64::from_be_bytes(bytes[..].try_into().map_err(|_| invalid("Invalid timestamp"))?));
    Ok(())
}

/// Gives a `DROP` without `USING TIMESTAMP` the time `now_us()` (the clock
/// of write timestamps, µs), so the pure schema transition has it.
pub fn stamp(statement: &mut Statement, now_us: impl FnOnce() -> i64) {
    if let Statement::AlterTable(alter) = statement {
        if let AlterTableOp::Drop { timestamp: timestamp @ None, .. } = &mut alter.op {
            *timestamp = Some(now_us());
        }
    }
}

/// Records the drop of `column` from `table` at `at_us`. A later drop of
/// the name replaces an earlier record; an earlier one is ignored (as in
/// ScyllaDB), so the drop time never moves back.
pub fn record(table: &mut TableMeta, column: &ColumnMeta, at_us: i64) {
    debug_assert!(!column.kind.is_primary_key(), "key columns cannot be dropped");
    if table.dropped_columns.get(&column.name).is_some_and(|d| d.dropped_at_us >= at_us) {
        return;
    }
    let dropped =
        DroppedColumn { id: column.id, ty: column.ty.expand_user_types(), kind: column.kind, dropped_at_us: at_us };
    table.dropped_columns.insert(column.name.clone(), dropped);
}

/// For a column `name` of type `ty` being added to `table`: the id of the
/// dropped column of that name it takes back, `None` for a new name, or
/// ScyllaDB's (then Cassandra's) refusal.
pub fn readd(table: &TableMeta, name: &str, ty: &CqlType, kind: ColumnKind) -> CqlResult<Option<u32>> {
    let Some(dropped) = table.dropped_columns.get(name) else { return Ok(None) };
    if ty.is_counter() || dropped.ty.is_counter() {
        return Err(invalid(format!("Cannot re-add previously dropped counter column {name}")));
    }
    let expanded = ty.expand_user_types();
    if expanded.is_value_compatible_with(&dropped.ty) {
        if dropped.kind != kind {
            return Err(invalid(format!(
                "Cannot re-add previously dropped column '{name}' of kind {}, incompatible with previous kind {}",
                kind_name(kind),
                kind_name(dropped.kind)
            )));
        }
        return Ok(Some(dropped.id));
    }
    if ty.is_multi_cell() && dropped.ty.is_multi_cell() {
        return Err(invalid(format!(
            "Cannot add a collection with the name {name} because a collection with the same name and a different type has already been used in the past"
        )));
    }
    Err(invalid(format!(
        "Cannot re-add previously dropped column '{name}' of type {ty}, incompatible with previous type {}",
        dropped.ty
    )))
}

/// Cassandra's `ColumnMetadata.Kind` names, as its messages print them.
fn kind_name(kind: ColumnKind) -> &'static str {
    match kind {
        ColumnKind::Static => "STATIC",
        ColumnKind::Regular => "REGULAR",
        ColumnKind::PartitionKey => "PARTITION_KEY",
        ColumnKind::Clustering => "CLUSTERING",
    }
}

/// The columns a CREATE TABLE that rebuilds `table` with its drop history
/// declares, as (name, type, kind, id): its columns, each re-added one with
/// the type and kind it was dropped with, then the dropped ones not added
/// again. After it come [`history`]'s statements.
pub fn columns_with_history(table: &TableMeta) -> Vec<(&str, &CqlType, ColumnKind, u32)> {
    let mut columns: Vec<_> = table
        .columns
        .iter()
        .map(|c| match table.dropped_columns.get(&c.name) {
            Some(d) => (c.name.as_str(), &d.ty, d.kind, c.id),
            None => (c.name.as_str(), &c.ty, c.kind, c.id),
        })
        .collect();
    let gone = table.dropped_columns.iter().filter(|(name, _)| table.column(name).is_none());
    columns.extend(gone.map(|(name, d)| (name.as_str(), &d.ty, d.kind, d.id)));
    columns
}

/// The statements that replay `table`'s drop history after the CREATE
/// TABLE [`columns_with_history`] describes (Cassandra's DESCRIBE ... WITH
/// INTERNALS): each drop with its time, then the re-adding of a column
/// that came back. `name` is the table's qualified, quoted name.
pub fn history(table: &TableMeta, name: &str, quote: fn(&str) -> String) -> Vec<String> {
    let mut statements = Vec::new();
    for (column, dropped) in &table.dropped_columns {
        let column_name = quote(column);
        statements.push(format!("ALTER TABLE {name} DROP {column_name} USING TIMESTAMP {}", dropped.dropped_at_us));
        if let Some(current) = table.column(column) {
            let is_static = if current.kind == ColumnKind::Static { " static" } else { "" };
            statements.push(format!("ALTER TABLE {name} ADD {column_name} {}{is_static}", current.ty));
        }
    }
    statements
}
