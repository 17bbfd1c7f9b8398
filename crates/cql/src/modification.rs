//! INSERT, UPDATE and DELETE: from a statement and its bound values to the
//! partition updates that carry it out.
//!
//! Cassandra's semantics: INSERT writes a row marker (the row exists even
//! with every column null; not in COMPACT STORAGE tables, whose rows live
//! by their cells, `TableMeta::insert_writes_marker`), UPDATE does not; setting a non-frozen collection
//! replaces it with a collection tombstone one microsecond below the write;
//! a null value is a cell tombstone; an unset value leaves the column alone.
//! Counter tables take only UPDATE (`c = c + n`, a delta cell that the
//! counter's leading replica turns into its shard: `coordinator::
//! counter_write`) and DELETE, without TTL or client timestamps.

use std::cell::Cell as StdCell;

use bytes::Bytes;
use shoal_coordinator::data::{
    Cell, ClusteredRow, Collection, CollectionCell, ColumnData, Expiry, Partition, PartitionPosition, RangeTombstone,
    Row, RowMarker, Tombstone,
};
use shoal_coordinator::data::{ListOp, ListOpKind, Mutation};
use shoal_schema::{comparable, fields};
use shoal_schema::{ColumnKind, ColumnMeta, CqlType, TableMeta, UserType};

use crate::ast::{Assignment, ColumnTarget, Condition, Delete, Insert, Operator, Relation, Term, Update, Using};
use crate::ddl::is_counter_table;
use crate::error::{invalid, CqlResult};
use crate::restrictions::{analyze_write, check_clustering_length, check_key_value, position_of, PartitionRestriction};
use crate::values::{collection_items, eval, eval_required, Bindings, BoundValue, Receiver};

/// Cassandra's ceiling on TTLs: 20 years.
const TTL_MAX_S: i64 = 20 * 365 * 24 * 3600;

/// A list operation before the rows it applies to are known.
struct PendingListOp {
    column: u32,
    is_static: bool,
    kind: ListOpKind,
}

impl PendingListOp {
    fn for_row(&self, row: Option<&Bytes>, attrs: &Attributes) -> ListOp {
        ListOp {
            column: self.column,
            row: if self.is_static { None } else { row.cloned() },
            kind: self.kind.clone(),
            timestamp: attrs.timestamp,
            now_s: attrs.now_s,
            expiry: attrs.expiry,
        }
    }
}

/// What every write of one statement (or batch) shares.
#[derive(Debug, Clone, Copy)]
pub struct WriteContext<'a> {
    pub bindings: Bindings<'a>,
    /// The client's default timestamp, or one the server chose (µs).
    pub timestamp: i64,
    pub now_s: i64,
}

impl<'a> WriteContext<'a> {
    /// The same context, user functions in its terms looked up in
    /// `keyspace` (the written table's).
    pub fn in_keyspace<'b>(self, keyspace: &'b str) -> WriteContext<'b>
    where
        'a: 'b,
    {
        WriteContext { bindings: self.bindings.in_keyspace(keyspace), ..self }
    }
}

/// Write attributes resolved from USING.
struct Attributes {
    timestamp: i64,
    expiry: Option<Expiry>,
    now_s: i64,
}

fn attributes(meta: &TableMeta, using: &Using, ctx: WriteContext<'_>) -> CqlResult<Attributes> {
    let timestamp = match &using.timestamp {
        Some(term) => match eval(term, Receiver { name: "[timestamp]", ty: &CqlType::Bigint }, ctx.bindings)? {
            BoundValue::Value(v) => i64::from_be_bytes(v[..].try_into().map_err(|_| invalid("Invalid timestamp"))?),
            _ => ctx.timestamp,
        },
        None => ctx.timestamp,
    };
    // Cassandra's bounds: i64::MIN marks "no timestamp".
    if timestamp == i64::MIN {
        return Err(invalid(format!("Out of bound timestamp, must be in [{}, {}]", i64::MIN + 1, i64::MAX)));
    }
    let ttl_s = match &using.ttl {
        Some(term) => match eval(term, Receiver { name: "[ttl]", ty: &CqlType::Int }, ctx.bindings)? {
            BoundValue::Value(v) => i32::from_be_bytes(v[..].try_into().map_err(|_| invalid("Invalid TTL"))?) as i64,
            _ => meta.options.default_time_to_live_s as i64,
        },
        None => meta.options.default_time_to_live_s as i64,
    };
    if ttl_s < 0 {
        return Err(invalid(format!("A TTL must be greater or equal to 0, but was {ttl_s}")));
    }
    if ttl_s > TTL_MAX_S {
        return Err(invalid(format!("ttl is too large. requested ({ttl_s}) maximum ({TTL_MAX_S})")));
    }
    let expiry = (ttl_s > 0).then(|| Expiry { ttl_s: ttl_s as i32, expires_at_s: ctx.now_s + ttl_s });
    Ok(Attributes { timestamp, expiry, now_s: ctx.now_s })
}

pub fn insert(meta: &TableMeta, statement: &Insert, ctx: WriteContext<'_>) -> CqlResult<Mutation> {
    if is_counter_table(meta) {
        return Err(invalid("INSERT statements are not allowed on counter tables, use UPDATE instead"));
    }
    if statement.columns.len() != statement.values.len() {
        return Err(invalid("Unmatched column names/values"));
    }
    let attrs = attributes(meta, &statement.using, ctx)?;
    let mut key_values: Vec<Option<Bytes>> = vec![None; meta.columns.len()];
    let marker = meta.insert_writes_marker().then_some(RowMarker { timestamp: attrs.timestamp, expiry: attrs.expiry });
    let mut row = Row { marker, ..Row::default() };
    let mut static_row = Row::default();
    let mut seen = vec![false; meta.columns.len()];
    for (name, term) in statement.columns.iter().zip(&statement.values) {
        let index = meta.column_index(name).ok_or_else(|| invalid(format!("Undefined column name {name}")))?;
        if std::mem::replace(&mut seen[index], true) {
            return Err(invalid(format!("Multiple definitions found for column {name}")));
        }
        let column = &meta.columns[index];
        let value = eval(term, Receiver { name, ty: &column.ty }, ctx.bindings)?;
        if column.kind.is_primary_key() {
            match value {
                BoundValue::Value(v) => {
                    check_key_value(column, &v)?;
                    key_values[index] = Some(v);
                }
                BoundValue::Unset => return Err(invalid(format!("Invalid unset value for column {name}"))),
                BoundValue::Null => return Err(invalid(format!("Invalid null value in condition for column {name}"))),
            }
            continue;
        }
        let target = if column.kind == ColumnKind::Static { &mut static_row } else { &mut row };
        write_value(target, column, value, &attrs)?;
    }
    let position = partition_position(meta, &key_values)?;
    let mut update = Partition { static_row, ..Partition::default() };
    let clustering: Vec<Option<Bytes>> =
        meta.clustering_key().map(|c| key_values[column_index(meta, c)].clone()).collect();
    let only_static = row.columns.is_empty() && !update.static_row.columns.is_empty();
    match clustering.iter().cloned().collect::<Option<Vec<Bytes>>>() {
        Some(values) => {
            check_written_clustering(meta, &values)?;
            update.rows.insert(meta.encode_clustering(&values), ClusteredRow { clustering: values, row });
        }
        None if only_static && clustering.iter().all(Option::is_none) => {}
        // A dense table takes a row at a clustering prefix (CASSANDRA-7990):
        // its missing trailing columns read as null.
        None if meta.is_dense() => {
            let prefix: Vec<Bytes> = clustering.iter().map_while(Clone::clone).collect();
            let names: Vec<&str> = meta.clustering_key().map(|c| c.name.as_str()).collect();
            if let Some(given) = (prefix.len()..clustering.len()).find(|&i| clustering[i].is_some()) {
                return Err(invalid(format!(
                    "PRIMARY KEY column \"{}\" cannot be restricted as preceding column \"{}\" is not restricted",
                    names[given],
                    names[given - 1]
                )));
            }
            if prefix.is_empty() {
                return Err(invalid(format!("Missing PRIMARY KEY part {}", names[0])));
            }
            check_written_clustering(meta, &prefix)?;
            update.rows.insert(meta.encode_clustering(&prefix), ClusteredRow { clustering: prefix, row });
        }
        None => {
            let missing: Vec<&str> = meta
                .clustering_key()
                .filter(|c| key_values[column_index(meta, c)].is_none())
                .map(|c| c.name.as_str())
                .collect();
            return Err(invalid(format!("Some clustering keys are missing: {}", missing.join(", "))));
        }
    }
    // A dense COMPACT STORAGE row is its key and its value: no value, no row.
    if meta.is_dense() {
        if let Some(value) = meta.columns.iter().position(|c| c.kind == ColumnKind::Regular) {
            if !seen[value] {
                let name = &meta.columns[value].name;
                return Err(invalid(format!("Column {name} is mandatory for this COMPACT STORAGE table")));
            }
        }
    }
    Ok(Mutation { table: meta.id, position, update, list_ops: Vec::new() })
}

pub fn update(meta: &TableMeta, statement: &Update, ctx: WriteContext<'_>) -> CqlResult<Vec<Mutation>> {
    if is_counter_table(meta) && statement.using.ttl.is_some() {
        return Err(invalid("Cannot provide custom TTL for counter updates"));
    }
    if is_counter_table(meta) && statement.using.timestamp.is_some() {
        return Err(invalid("Cannot provide custom timestamp for counter updates"));
    }
    let attrs = attributes(meta, &statement.using, ctx)?;
    crate::modification_where::check(meta, &statement.where_clause)?;
    let restrictions = analyze_write(meta, &statement.where_clause, ctx.bindings)?;
    let PartitionRestriction::Keys(positions) = restrictions.partitions else {
        return Err(invalid(missing_key_message(meta, "partition key")));
    };
    let written = statement.assignments.iter().map(assignment_column);
    check_static_only(meta, "UPDATE", written, &statement.condition, restrictions.clustering_restricted)?;
    let mut row = Row::default();
    let mut static_row = Row::default();
    let mut pending = Vec::new();
    for assignment in &statement.assignments {
        let name = assignment_column(assignment);
        let column = meta.column(name).ok_or_else(|| invalid(format!("Undefined column name {name}")))?;
        if column.kind.is_primary_key() {
            return Err(invalid(format!("PRIMARY KEY part {name} found in SET part")));
        }
        let target = if column.kind == ColumnKind::Static { &mut static_row } else { &mut row };
        merge_write(target, |part| assign(part, column, assignment, &attrs, ctx.bindings, &mut pending))?;
    }
    let has_regular = !row.columns.is_empty() || pending.iter().any(|p| !p.is_static);
    // A write of static columns conditioned on its row's columns still
    // names the row, for the condition to read (nothing is written there).
    let names_row = has_regular || conditions_name_row(meta, &statement.condition);
    let keys = match restrictions.clustering_keys {
        Some(keys) if meta.clustering_key_len() > 0 || keys.len() == 1 => keys,
        _ if !names_row => Vec::new(),
        _ => return Err(invalid(missing_key_message(meta, "clustering key"))),
    };
    keys.iter().try_for_each(|(_, values)| check_written_clustering(meta, values))?;
    Ok(positions
        .into_iter()
        .map(|position| {
            let mut update = Partition { static_row: static_row.clone(), ..Partition::default() };
            let mut list_ops = Vec::new();
            if names_row {
                for (encoded, values) in &keys {
                    update.rows.insert(encoded.clone(), ClusteredRow { clustering: values.clone(), row: row.clone() });
                    list_ops.extend(pending.iter().filter(|p| !p.is_static).map(|p| p.for_row(Some(encoded), &attrs)));
                }
            }
            list_ops.extend(pending.iter().filter(|p| p.is_static).map(|p| p.for_row(None, &attrs)));
            Mutation { table: meta.id, position, update, list_ops }
        })
        .collect())
}

pub fn delete(meta: &TableMeta, statement: &Delete, ctx: WriteContext<'_>) -> CqlResult<Vec<Mutation>> {
    if statement.using.ttl.is_some() {
        return Err(invalid("A DELETE statement cannot use TTL"));
    }
    let attrs = attributes(meta, &statement.using, ctx)?;
    let tombstone = Tombstone { timestamp: attrs.timestamp, deletion_time_s: attrs.now_s };
    crate::modification_where::check(meta, &statement.where_clause)?;
    let restrictions = analyze_write(meta, &statement.where_clause, ctx.bindings)?;
    if !restrictions.filters.is_empty() {
        return Err(invalid("Invalid restrictions in DELETE: only the primary key can be restricted, by = and IN, and the last clustering column by a range"));
    }
    let PartitionRestriction::Keys(positions) = restrictions.partitions else {
        return Err(invalid(missing_key_message(meta, "partition key")));
    };
    if !statement.columns.is_empty() {
        let written = statement.columns.iter().map(|c| c.column.as_str());
        check_static_only(meta, "DELETE", written, &statement.condition, restrictions.clustering_restricted)?;
        if deletes_a_range(meta, &statement.where_clause) {
            return Err(invalid("Range deletions are not supported for specific columns"));
        }
    }
    let mut update = Partition::default();
    let mut pending = Vec::new();
    if statement.columns.is_empty() {
        match &restrictions.clustering_keys {
            // Whole keys delete rows; a dense table's prefix deletes a range.
            Some(keys)
                if meta.clustering_key_len() > 0 && keys.iter().all(|(_, v)| v.len() == meta.clustering_key_len()) =>
            {
                for (encoded, values) in keys {
                    let row = Row { deletion: Some(tombstone), ..Row::default() };
                    update.rows.insert(encoded.clone(), ClusteredRow { clustering: values.clone(), row });
                }
            }
            // A slice or a key prefix deletes its rows, one range
            // tombstone per range, and never the static row: an empty
            // slice (`c > 5 AND c < 3`) deletes nothing.
            _ if restrictions.clustering_restricted => {
                update.range_tombstones = restrictions
                    .clustering_ranges
                    .iter()
                    .map(|range| RangeTombstone { range: range.clone(), tombstone })
                    .collect();
            }
            _ => update.tombstone = Some(tombstone),
        }
    } else {
        delete_columns(
            meta,
            statement,
            &restrictions.clustering_keys,
            &attrs,
            ctx.bindings,
            &mut update,
            &mut pending,
        )?;
    }
    let mut list_ops: Vec<ListOp> = pending.iter().filter(|p| p.is_static).map(|p| p.for_row(None, &attrs)).collect();
    for (encoded, _) in restrictions.clustering_keys.iter().flatten() {
        list_ops.extend(pending.iter().filter(|p| !p.is_static).map(|p| p.for_row(Some(encoded), &attrs)));
    }
    Ok(positions
        .into_iter()
        .map(|position| Mutation { table: meta.id, position, update: update.clone(), list_ops: list_ops.clone() })
        .collect())
}

/// Whether the WHERE clause slices the clustering key (`c >= 1`,
/// `(c1, c2) > (1, 2)`): such a DELETE removes a range of rows, which
/// cannot name columns (ScyllaDB's `deletes_a_range`).
fn deletes_a_range(meta: &TableMeta, relations: &[Relation]) -> bool {
    let slice = |op: &Operator| matches!(op, Operator::Lt | Operator::Le | Operator::Gt | Operator::Ge);
    let clustering = |name: &str| meta.column(name).is_some_and(|c| c.kind == ColumnKind::Clustering);
    relations.iter().any(|relation| match relation {
        Relation::Simple { column, op, .. } => slice(op) && clustering(column),
        Relation::MultiColumn { op, .. } => slice(op),
        _ => false,
    })
}

fn delete_columns(
    meta: &TableMeta,
    statement: &Delete,
    keys: &Option<Vec<(Bytes, Vec<Bytes>)>>,
    attrs: &Attributes,
    bindings: Bindings<'_>,
    update: &mut Partition,
    pending: &mut Vec<PendingListOp>,
) -> CqlResult<()> {
    let mut row = Row::default();
    for ColumnTarget { column: name, element, field } in &statement.columns {
        let column = meta.column(name).ok_or_else(|| invalid(format!("Undefined column name {name}")))?;
        if column.kind.is_primary_key() {
            return Err(invalid(format!("Invalid identifier {name} for deletion (should not be a PRIMARY KEY part)")));
        }
        let target = if column.kind == ColumnKind::Static { &mut update.static_row } else { &mut row };
        if let Some(field) = field {
            let (_, index) = user_type_field(column, field, None)?;
            merge_write(target, |part| {
                put_field(collection_of(part, column), index, Cell::dead(attrs.timestamp, attrs.now_s));
                Ok(())
            })?;
            continue;
        }
        if element.is_some() {
            check_element_deletion(column)?;
        }
        merge_write(target, |part| match element {
            None => write_value(part, column, BoundValue::Null, attrs),
            Some(key) if matches!(column.ty, CqlType::List(_)) => {
                // An unset index deletes nothing (Cassandra's NEWS.txt).
                if matches!(eval(key, Receiver { name: &column.name, ty: &CqlType::Int }, bindings)?, BoundValue::Unset)
                {
                    return Ok(());
                }
                let index = list_index(key, column, bindings)?;
                pending.push(PendingListOp {
                    column: column.id,
                    is_static: column.kind == ColumnKind::Static,
                    kind: ListOpKind::DeleteIndex(index),
                });
                // The row must be in the update for the operation to land.
                collection_of(part, column);
                Ok(())
            }
            Some(key) => delete_element(part, column, key, attrs, bindings),
        })?;
    }
    // A condition on the row's columns reads the row.
    let names_row = conditions_name_row(meta, &statement.condition);
    if !row.columns.is_empty() || pending.iter().any(|p| !p.is_static) || names_row {
        let Some(keys) = keys else {
            return Err(match statement.condition {
                Condition::None => invalid(missing_key_message(meta, "clustering key")),
                _ => crate::lwt::delete_key_error(meta, statement),
            });
        };
        for (encoded, values) in keys {
            update.rows.insert(encoded.clone(), ClusteredRow { clustering: values.clone(), row: row.clone() });
        }
    }
    Ok(())
}

/// A frozen list, set or map: written whole, never element by element.
fn is_frozen_collection(ty: &CqlType) -> bool {
    matches!(ty, CqlType::Frozen(inner) if matches!(inner.as_ref(), CqlType::List(_) | CqlType::Set(_) | CqlType::Map(..)))
}

/// Refuses element updates and additions or removals on a frozen
/// collection (ScyllaDB's texts), at PREPARE as at execution.
pub(crate) fn check_collection_operation(column: &ColumnMeta, assignment: &Assignment) -> CqlResult<()> {
    if !is_frozen_collection(&column.ty) {
        return Ok(());
    }
    let c = &column.name;
    let operation = match assignment {
        Assignment::SetElement { key, value, .. } => format!("{c}[{key}] = {value}"),
        Assignment::Add { value, .. } => format!("{c} = {c} + {value}"),
        Assignment::Subtract { value, .. } => format!("{c} = {c} - {value}"),
        _ => return Ok(()),
    };
    Err(invalid(format!("Invalid operation ({operation}) for frozen collection column {c}")))
}

/// Refuses `DELETE c[key]` on a frozen collection (ScyllaDB's text), at
/// PREPARE as at execution.
pub(crate) fn check_element_deletion(column: &ColumnMeta) -> CqlResult<()> {
    match is_frozen_collection(&column.ty) {
        true => Err(invalid(format!("Invalid deletion operation for frozen collection column {}", column.name))),
        false => Ok(()),
    }
}

fn delete_element(
    row: &mut Row,
    column: &ColumnMeta,
    key: &Term,
    attrs: &Attributes,
    bindings: Bindings<'_>,
) -> CqlResult<()> {
    let key_ty = match &column.ty {
        CqlType::Map(k, _) => k.as_ref(),
        CqlType::Set(e) => e.as_ref(),
        _ => return Err(invalid(format!("Invalid element deletion on non-collection column {}", column.name))),
    };
    let key = eval_required(key, Receiver { name: &column.name, ty: key_ty }, bindings)?;
    let cell = Cell::dead(attrs.timestamp, attrs.now_s);
    collection_of(row, column).cells.insert(sort_key(key_ty, &key), CollectionCell { key, cell });
    Ok(())
}

/// Whether `condition` tests a column of the row rather than a static one.
fn conditions_name_row(meta: &TableMeta, condition: &Condition) -> bool {
    let is_static = |name: &str| meta.column(name).is_some_and(|c| c.kind == ColumnKind::Static);
    matches!(condition, Condition::IfColumns(conditions) if conditions.iter().any(|c| !is_static(&c.target.column)))
}

/// Rejects clustering restrictions on an UPDATE or DELETE that touches only
/// static columns, in what it writes and in its `IF` conditions: as in
/// ScyllaDB and Cassandra, they suggest the statement is not what was meant.
fn check_static_only<'a>(
    meta: &TableMeta,
    kind: &str,
    mut written: impl Iterator<Item = &'a str>,
    condition: &Condition,
    clustering_restricted: bool,
) -> CqlResult<()> {
    let is_static = |name: &str| meta.column(name).is_some_and(|c| c.kind == ColumnKind::Static);
    let conditions_static = !conditions_name_row(meta, condition);
    if clustering_restricted && meta.clustering_key_len() > 0 && conditions_static && written.all(is_static) {
        return Err(invalid(format!(
            "Invalid restrictions on clustering columns since the {kind} statement modifies only static columns"
        )));
    }
    Ok(())
}

pub(crate) fn assignment_column(assignment: &Assignment) -> &str {
    match assignment {
        Assignment::Set { column, .. }
        | Assignment::Add { column, .. }
        | Assignment::Prepend { column, .. }
        | Assignment::Subtract { column, .. }
        | Assignment::SetElement { column, .. }
        | Assignment::SetField { column, .. } => column,
    }
}

/// Runs one assignment or deletion of a statement into a row of its own,
/// then merges that into the statement's `row` by the rules that reconcile
/// two writes: a statement that writes one cell twice (`SET m[2] = 9,
/// m[2] = 6`, `SET s = s - {3}, s = s + {3, 4}`) keeps what those rules
/// pick at one timestamp (the greater value; a tombstone over a value),
/// whatever the order of its assignments.
fn merge_write(row: &mut Row, write: impl FnOnce(&mut Row) -> CqlResult<()>) -> CqlResult<()> {
    if row.is_empty() {
        return write(row);
    }
    let mut part = Row::default();
    write(&mut part)?;
    row.merge(part);
    Ok(())
}

fn list_index(term: &Term, column: &ColumnMeta, bindings: Bindings<'_>) -> CqlResult<i32> {
    let index = eval_required(term, Receiver { name: &column.name, ty: &CqlType::Int }, bindings)?;
    Ok(i32::from_be_bytes(
        index[..].try_into().map_err(|_| invalid(format!("Invalid list index for {}", column.name)))?,
    ))
}

fn assign(
    row: &mut Row,
    column: &ColumnMeta,
    assignment: &Assignment,
    attrs: &Attributes,
    bindings: Bindings<'_>,
    pending: &mut Vec<PendingListOp>,
) -> CqlResult<()> {
    let receiver = Receiver { name: &column.name, ty: &column.ty };
    if let Assignment::Prepend { value, .. } = assignment {
        check_prepend(column, value)?;
    }
    check_collection_operation(column, assignment)?;
    if column.ty.is_counter() {
        return add_to_counter(row, column, assignment, attrs, bindings);
    }
    match assignment {
        Assignment::Set { value, .. } => write_value(row, column, eval(value, receiver, bindings)?, attrs),
        Assignment::Add { value, .. } | Assignment::Prepend { value, .. } => {
            // ScyllaDB prints the operation with its operand (`a = a + 1`).
            if !column.ty.is_multi_cell() {
                return Err(invalid(format!(
                    "Invalid operation ({0} = {0} + {value}) for non counter column {0}",
                    column.name
                )));
            }
            let BoundValue::Value(items) = eval(value, receiver, bindings)? else { return Ok(()) };
            let prepend = matches!(assignment, Assignment::Prepend { .. });
            add_elements(collection_of(row, column), &column.ty, &items, attrs, prepend);
            Ok(())
        }
        Assignment::Subtract { value, .. } if matches!(column.ty, CqlType::List(_)) => {
            let BoundValue::Value(items) = eval(value, receiver, bindings)? else { return Ok(()) };
            pending.push(PendingListOp {
                column: column.id,
                is_static: column.kind == ColumnKind::Static,
                kind: ListOpKind::RemoveValues(collection_items(&items)),
            });
            collection_of(row, column);
            Ok(())
        }
        Assignment::Subtract { value, .. } => subtract(row, column, value, attrs, bindings),
        Assignment::SetElement { key, value, .. } if matches!(column.ty, CqlType::List(_)) => {
            let CqlType::List(elem) = &column.ty else { unreachable!("matched a list") };
            let index = list_index(key, column, bindings)?;
            let value = eval(value, Receiver { name: &column.name, ty: elem }, bindings)?;
            if value == BoundValue::Unset {
                return Ok(());
            }
            pending.push(PendingListOp {
                column: column.id,
                is_static: column.kind == ColumnKind::Static,
                kind: ListOpKind::SetIndex { index, value: value.into_option() },
            });
            collection_of(row, column);
            Ok(())
        }
        Assignment::SetElement { key, value, .. } => {
            // ScyllaDB's text for a frozen collection (#13657).
            if matches!(&column.ty, CqlType::Frozen(inner) if inner.is_multi_cell()) {
                return Err(invalid(format!(
                    "Invalid operation ({}[{key}] = {value}) for frozen collection column {}",
                    column.name, column.name
                )));
            }
            let CqlType::Map(key_ty, value_ty) = &column.ty else {
                return Err(invalid(format!(
                    "Invalid operation ({}[...] = ...) on a column that is neither a non-frozen list nor a map",
                    column.name
                )));
            };
            let key = eval_required(key, Receiver { name: &column.name, ty: key_ty }, bindings)?;
            let cell = match eval(value, Receiver { name: &column.name, ty: value_ty }, bindings)? {
                BoundValue::Value(v) => Cell::live(attrs.timestamp, v, attrs.expiry),
                BoundValue::Null => Cell::dead(attrs.timestamp, attrs.now_s),
                BoundValue::Unset => return Ok(()),
            };
            collection_of(row, column).cells.insert(sort_key(key_ty, &key), CollectionCell { key, cell });
            Ok(())
        }
        Assignment::SetField { field, value, .. } => {
            let (udt, index) = user_type_field(column, field, Some(value))?;
            let name = format!("{}.{field}", column.name);
            let value = eval(value, Receiver { name: &name, ty: &udt.fields[index].1 }, bindings)?;
            let cell = match value {
                BoundValue::Value(v) => Cell::live(attrs.timestamp, v, attrs.expiry),
                BoundValue::Null => Cell::dead(attrs.timestamp, attrs.now_s),
                BoundValue::Unset => return Ok(()),
            };
            put_field(collection_of(row, column), index, cell);
            Ok(())
        }
    }
}

/// The user type of `column` and the index of its field named `field`; only
/// non-frozen user types have fields that can be set (`value` is the term
/// assigned) or deleted (`None`). ScyllaDB's texts.
fn user_type_field<'c>(column: &'c ColumnMeta, field: &str, value: Option<&Term>) -> CqlResult<(&'c UserType, usize)> {
    let name = &column.name;
    let CqlType::Udt(udt) = &column.ty else {
        let frozen_udt = matches!(column.ty.unfrozen(), CqlType::Udt(_));
        return Err(invalid(match (value, frozen_udt) {
            (None, true) => format!("Frozen UDT column {name} does not support field deletion"),
            (None, false) => format!("Invalid field deletion operation for non-UDT column {name}"),
            (Some(value), true) => format!("Invalid operation ({name}.{field} = {value}) for frozen UDT column {name}"),
            (Some(value), false) => format!("Invalid operation ({name}.{field} = {value}) for non-UDT column {name}"),
        }));
    };
    let index = udt
        .field_index(field)
        .ok_or_else(|| invalid(format!("UDT column {name} does not have a field named {field}")))?;
    Ok((udt, index))
}

/// `c = value + c` prepends to a non-frozen list and means nothing else: a
/// counter is not a list (Cassandra and ScyllaDB refuse `c = 5 + c` too;
/// counters take `c = c + 5`).
fn check_prepend(column: &ColumnMeta, value: &Term) -> CqlResult<()> {
    let kind = match &column.ty {
        CqlType::List(_) => return Ok(()),
        ty if matches!(ty.unfrozen(), CqlType::List(_)) => "frozen list",
        _ => "non list",
    };
    Err(invalid(format!("Invalid operation ({0} = {value} + {0}) for {kind} column {0}", column.name)))
}

/// `c = c + n` or `c = c - n` on a counter: a delta cell.
fn add_to_counter(
    row: &mut Row,
    column: &ColumnMeta,
    assignment: &Assignment,
    attrs: &Attributes,
    bindings: Bindings<'_>,
) -> CqlResult<()> {
    let (value, negate) = match assignment {
        Assignment::Add { value, .. } => (value, false),
        Assignment::Subtract { value, .. } => (value, true),
        _ => {
            return Err(invalid(format!(
                "Cannot set the value of counter column {} (counters can only be incremented/decremented, not set)",
                column.name
            )))
        }
    };
    let delta = match eval(value, Receiver { name: &column.name, ty: &CqlType::Counter }, bindings)? {
        BoundValue::Value(v) => i64::from_be_bytes(
            v[..].try_into().map_err(|_| invalid(format!("Invalid counter increment for {}", column.name)))?,
        ),
        BoundValue::Null => return Err(invalid("Invalid null value for counter increment")),
        BoundValue::Unset => return Ok(()),
    };
    let delta = if negate { delta.wrapping_neg() } else { delta };
    let cell = match row.columns.remove(&column.id) {
        // `SET c = c + 1, c = c + 2` adds both.
        Some(ColumnData::Atomic(earlier)) => Cell::reconcile(earlier, Cell::counter_delta(attrs.timestamp, delta)),
        _ => Cell::counter_delta(attrs.timestamp, delta),
    };
    row.columns.insert(column.id, ColumnData::Atomic(cell));
    Ok(())
}

fn subtract(
    row: &mut Row,
    column: &ColumnMeta,
    value: &Term,
    attrs: &Attributes,
    bindings: Bindings<'_>,
) -> CqlResult<()> {
    let (key_ty, operand_ty) = match &column.ty {
        CqlType::Set(e) => (e.as_ref().clone(), column.ty.clone()),
        CqlType::Map(k, _) => (k.as_ref().clone(), CqlType::Set(k.clone())),
        _ => {
            return Err(invalid(format!(
                "Invalid operation ({0} = {0} - {value}) for non counter column {0}",
                column.name
            )))
        }
    };
    let BoundValue::Value(items) = eval(value, Receiver { name: &column.name, ty: &operand_ty }, bindings)? else {
        return Ok(());
    };
    let collection = collection_of(row, column);
    for key in collection_items(&items) {
        let cell = Cell::dead(attrs.timestamp, attrs.now_s);
        collection.cells.insert(sort_key(&key_ty, &key), CollectionCell { key, cell });
    }
    Ok(())
}

/// Writes a whole value (or null) into a column: a cell, or for a
/// non-frozen collection, a tombstone plus one cell per element.
fn write_value(row: &mut Row, column: &ColumnMeta, value: BoundValue, attrs: &Attributes) -> CqlResult<()> {
    if column.ty.is_counter() && matches!(value, BoundValue::Value(_)) {
        return Err(invalid(format!(
            "Cannot set the value of counter column {} (counters can only be incremented/decremented, not set)",
            column.name
        )));
    }
    if column.ty.is_multi_cell() || matches!(column.ty, CqlType::Udt(_)) {
        // A null (or DELETE) deletes the collection (or non-frozen user
        // type, one cell per field) at the write's own timestamp, as any
        // deletion; a new value replaces it with a tombstone one
        // microsecond below, so its own elements survive.
        let at = |timestamp: i64| Some(Tombstone { timestamp, deletion_time_s: attrs.now_s });
        let collection = collection_of(row, column);
        match value {
            BoundValue::Unset => {}
            BoundValue::Null => collection.tombstone = at(attrs.timestamp),
            BoundValue::Value(items) if matches!(column.ty, CqlType::Udt(_)) => {
                collection.tombstone = at(attrs.timestamp - 1);
                let fields = fields::split(&items).map_err(|e| invalid(format!("Invalid user type value: {e}")))?;
                for (index, field) in fields.into_iter().enumerate() {
                    if let Some(field) = field {
                        let cell = Cell::live(attrs.timestamp, Bytes::copy_from_slice(field), attrs.expiry);
                        put_field(collection, index, cell);
                    }
                }
            }
            BoundValue::Value(items) => {
                collection.tombstone = at(attrs.timestamp - 1);
                add_elements(collection, &column.ty, &items, attrs, false);
            }
        }
        return Ok(());
    }
    let cell = match value {
        BoundValue::Value(v) => Cell::live(attrs.timestamp, v, attrs.expiry),
        BoundValue::Null => Cell::dead(attrs.timestamp, attrs.now_s),
        BoundValue::Unset => return Ok(()),
    };
    row.columns.insert(column.id, ColumnData::Atomic(cell));
    Ok(())
}

/// Field `index`'s cell of a non-frozen user type.
fn put_field(collection: &mut Collection, index: usize, cell: Cell) {
    let key = fields::cell_key(index);
    collection.cells.insert(key.clone(), CollectionCell { key, cell });
}

fn collection_of<'r>(row: &'r mut Row, column: &ColumnMeta) -> &'r mut Collection {
    let data = row.columns.entry(column.id).or_insert_with(|| ColumnData::Collection(Collection::default()));
    if !matches!(data, ColumnData::Collection(_)) {
        *data = ColumnData::Collection(Collection::default());
    }
    match data {
        ColumnData::Collection(c) => c,
        ColumnData::Atomic(_) => unreachable!("replaced by a collection just above"),
    }
}

fn add_elements(collection: &mut Collection, ty: &CqlType, items: &Bytes, attrs: &Attributes, prepend: bool) {
    let items = collection_items(items);
    match ty {
        CqlType::List(_) => {
            let keys: Vec<Bytes> = (0..items.len()).map(|_| list_key(prepend)).collect();
            // Prepending [a, b] must read a, b: the later key goes first.
            let order: Box<dyn Iterator<Item = (Bytes, Bytes)>> = if prepend {
                Box::new(keys.into_iter().zip(items.into_iter().rev()))
            } else {
                Box::new(keys.into_iter().zip(items))
            };
            for (key, value) in order {
                let cell = Cell::live(attrs.timestamp, value, attrs.expiry);
                collection.cells.insert(key.clone(), CollectionCell { key, cell });
            }
        }
        CqlType::Set(elem) => {
            for item in items {
                let cell = Cell::live(attrs.timestamp, Bytes::new(), attrs.expiry);
                collection.cells.insert(sort_key(elem, &item), CollectionCell { key: item, cell });
            }
        }
        CqlType::Map(key_ty, _) => {
            for pair in items.chunks(2) {
                if let [key, value] = pair {
                    let cell = Cell::live(attrs.timestamp, value.clone(), attrs.expiry);
                    collection.cells.insert(sort_key(key_ty, key), CollectionCell { key: key.clone(), cell });
                }
            }
        }
        _ => {}
    }
}

fn sort_key(ty: &CqlType, key: &[u8]) -> Bytes {
    let mut out = Vec::new();
    comparable::encode(ty.unfrozen(), key, false, &mut out);
    Bytes::from(out)
}

thread_local! {
    static LIST_SEQ: StdCell<u64> = const { StdCell::new(0) };
}

/// A list element key: appends sort after every earlier element and
/// prepends before, by time; a shard-local sequence breaks ties.
fn list_key(prepend: bool) -> Bytes {
    const MIDDLE: u64 = 1 << 63;
    let seq = LIST_SEQ.with(|s| {
        s.set(s.get() + 1);
        s.get() % 1024
    });
    let tick = (shoal_runtime::clock::now_us() as u64).saturating_mul(1024) + seq;
    let key = if prepend { MIDDLE - tick } else { MIDDLE + tick };
    Bytes::copy_from_slice(&key.to_be_bytes())
}

/// A written clustering key fits the key length limit, and a dense table
/// with one clustering column takes no empty value in it (ScyllaDB: the
/// empty prefix is no row of such a table).
fn check_written_clustering(meta: &TableMeta, values: &[Bytes]) -> CqlResult<()> {
    check_clustering_length(values)?;
    match values {
        [only] if only.is_empty() && meta.is_dense() => {
            let name = meta.clustering_key().next().map_or("", |c| c.name.as_str());
            Err(invalid(format!("Missing PRIMARY KEY part {name}")))
        }
        _ => Ok(()),
    }
}

/// The index of `column` in `meta`, whose own column it is.
fn column_index(meta: &TableMeta, column: &ColumnMeta) -> usize {
    let index = meta.columns.iter().position(|c| c.id == column.id);
    // Invariant: callers pass key columns taken from `meta` itself; a miss
    // would silently read another column's value.
    index.expect("a column of the table it was taken from")
}

fn partition_position(meta: &TableMeta, key_values: &[Option<Bytes>]) -> CqlResult<PartitionPosition> {
    let mut parts = Vec::new();
    let mut missing = Vec::new();
    for column in meta.partition_key() {
        match &key_values[column_index(meta, column)] {
            Some(v) => parts.push(v.clone()),
            None => missing.push(column.name.as_str()),
        }
    }
    if !missing.is_empty() {
        return Err(invalid(format!("Some partition key parts are missing: {}", missing.join(", "))));
    }
    position_of(&parts)
}

fn missing_key_message(meta: &TableMeta, what: &str) -> String {
    let names: Vec<&str> = if what == "partition key" {
        meta.partition_key().map(|c| c.name.as_str()).collect()
    } else {
        meta.clustering_key().map(|c| c.name.as_str()).collect()
    };
    format!("Some {what} parts are missing or not restricted by = or IN: {}", names.join(", "))
}

#[cfg(test)]
mod tests {
    use shoal_schema::ClusteringOrder;

    use super::*;
    use crate::ast::Literal;

    fn column(ty: CqlType) -> ColumnMeta {
        ColumnMeta { id: 1, name: "c".into(), ty, kind: ColumnKind::Regular, position: -1, order: ClusteringOrder::Asc }
    }

    #[test]
    fn prepend_is_for_non_frozen_lists_only() {
        let five = Term::Literal(Literal::Integer("5".into()));
        let list = CqlType::List(Box::new(CqlType::Int));
        assert!(check_prepend(&column(list.clone()), &five).is_ok());
        let message = |ty| match check_prepend(&column(ty), &five) {
            Err(crate::error::CqlError::Invalid(message)) => message,
            other => panic!("{other:?}"),
        };
        assert_eq!(message(CqlType::Counter), "Invalid operation (c = 5 + c) for non list column c");
        assert_eq!(
            message(CqlType::Set(Box::new(CqlType::Int))),
            "Invalid operation (c = 5 + c) for non list column c"
        );
        assert_eq!(message(CqlType::Frozen(Box::new(list))), "Invalid operation (c = 5 + c) for frozen list column c");
    }
}
