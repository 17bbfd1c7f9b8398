//! Conditional writes (lightweight transactions): `INSERT ... IF NOT EXISTS`,
//! `UPDATE`/`DELETE ... IF EXISTS | IF cond AND ...`, and batches of them.
//!
//! This module turns a statement's `IF` clause into conditions as data
//! ([`RowCondition`]) and the coordinator's answer into Cassandra's result;
//! the coordinator runs the read-check-write on the shard owning the
//! partition, under its lock ([`shoal_coordinator::cas`]).
//!
//! Results follow ScyllaDB (its "LWT differences"): `[applied]` first, then,
//! applied or not, the values the conditions were checked against — the
//! condition columns (every column for IF [NOT] EXISTS), preceded in a batch
//! by the key columns — nulls where no row was there. Cassandra shows them
//! only when not applied. A batch answers one row per statement, its own
//! conditions or not: the row the statement names as it was read, else the
//! partition's static row, else nulls.

use std::sync::Arc;

use bytes::Bytes;
use shoal_coordinator::data::{
    CasRequest, CheckOp, CheckedPart, ColumnCheck, Mutation, PartitionPosition, ResultRow, RowCheck, RowCondition,
};
use shoal_coordinator::{timeouts, ConsistencyLevel};
use shoal_schema::{ColumnKind, ColumnMeta, CqlType, TableMeta};

use crate::ast::{ColumnCondition, Condition, Operator, Statement, Term};
use crate::error::{invalid, CqlError, CqlResult};
use crate::result::{ColumnSpec, QueryResult, Rows};
use crate::select::column_value;
use crate::values::{eval, validate_value, Bindings, BoundValue, Receiver};

/// One statement of a write that may be conditional (a statement alone,
/// or one of a batch): the row it names and its condition, if any.
#[derive(Debug, Clone)]
pub(crate) struct Conditional {
    table: Arc<TableMeta>,
    /// The encoded clustering key of the one row the statement writes;
    /// `None` when it writes the partition (or no single row).
    row: Option<Bytes>,
    /// With the partition it is checked in; `None` for a statement
    /// without `IF`.
    condition: Option<(PartitionPosition, RowCondition)>,
}

/// Whether any statement of a write has a condition (it then runs as a
/// conditional write).
pub(crate) fn any_condition(statements: &[Conditional]) -> bool {
    statements.iter().any(|s| s.condition.is_some())
}

/// The condition of `statement`, given the writes built for it (with none
/// when it has no `IF`).
pub(crate) fn conditional(
    meta: &Arc<TableMeta>,
    statement: &Statement,
    writes: &[Mutation],
    bindings: Bindings<'_>,
) -> CqlResult<Conditional> {
    let unconditional = || {
        let row = match writes {
            [write] if write.update.rows.len() == 1 => write.update.rows.keys().next().cloned(),
            _ => None,
        };
        Conditional { table: Arc::clone(meta), row, condition: None }
    };
    let (check, using) = match statement {
        Statement::Insert(s) if s.if_not_exists => (Some(RowCheck::NotExists), &s.using),
        Statement::Update(s) => (check_of(meta, &s.condition, bindings)?, &s.using),
        Statement::Delete(s) => (check_of(meta, &s.condition, bindings)?, &s.using),
        _ => return Ok(unconditional()),
    };
    let Some(check) = check else { return Ok(unconditional()) };
    if crate::ddl::is_counter_table(meta) {
        return Err(invalid("Conditional updates are not supported on counter tables"));
    }
    if using.timestamp.is_some() {
        return Err(invalid("Cannot provide custom timestamp for conditional updates"));
    }
    match statement {
        Statement::Update(s) => check_no_key_in(meta, &s.where_clause, "updates")?,
        Statement::Delete(s) => check_no_key_in(meta, &s.where_clause, "deletions")?,
        _ => {}
    }
    let [write] = writes else {
        return Err(invalid("IN on the partition key is not supported with conditional updates"));
    };
    let row = match write.update.rows.len() {
        // Without clustering columns the partition is one row, under the
        // empty clustering key, whether the write names it or deletes the
        // whole partition.
        _ if meta.clustering_key_len() == 0 => Some(Bytes::new()),
        0 => None,
        1 => write.update.rows.keys().next().cloned(),
        _ => return Err(invalid("IN on the clustering key columns is not supported with conditional updates")),
    };
    // An INSERT without a clustering key writes only static columns: its
    // IF NOT EXISTS tests the partition's static row. So does the IF EXISTS
    // of an UPDATE or DELETE of static columns alone.
    let whole_row_deleted = write.update.tombstone.is_some() || !write.update.range_tombstones.is_empty();
    let only_static = match &check {
        RowCheck::Columns(checks) => checks.iter().all(|c| meta.columns[c.column].kind == ColumnKind::Static),
        RowCheck::Exists => !whole_row_deleted && writes_only_static(meta, statement),
        RowCheck::NotExists => false,
    };
    let partition_level = meta.clustering_key_len() > 0 && (row.is_none() || whole_row_deleted);
    if partition_level && !only_static {
        match statement {
            Statement::Insert(_) => {}
            // ScyllaDB's text: the first clustering column left out.
            Statement::Update(update) => {
                let named = |name: &str| update.where_clause.iter().any(|r| relation_names(r, name));
                let missing = meta.clustering_key().find(|c| !named(&c.name)).map_or("", |c| c.name.as_str());
                return Err(invalid(format!("Missing mandatory PRIMARY KEY part {missing}")));
            }
            Statement::Delete(delete) => return Err(delete_key_error(meta, delete)),
            _ => {}
        }
    }
    Ok(Conditional {
        table: Arc::clone(meta),
        row: row.clone(),
        condition: Some((write.position.clone(), RowCondition { row, check })),
    })
}

/// ScyllaDB's text for a conditional DELETE without its whole primary key:
/// deleting regular columns (or the row) first, then conditions on them.
pub(crate) fn delete_key_error(meta: &TableMeta, delete: &crate::ast::Delete) -> CqlError {
    let regular = |name: &str| meta.column(name).is_none_or(|c| c.kind != ColumnKind::Static);
    let what = match delete.columns.is_empty() || delete.columns.iter().any(|c| regular(&c.column)) {
        true => "delete non static columns",
        false => "use IF condition on non static columns",
    };
    invalid(format!(
        "DELETE statements must restrict all PRIMARY KEY columns with equality relations in order to {what}"
    ))
}

/// Whether `statement` names only static columns to write: a DELETE of
/// listed static columns, or an UPDATE (whose writes are then checked to
/// hold no clustering row).
fn writes_only_static(meta: &TableMeta, statement: &Statement) -> bool {
    let is_static = |name: &str| meta.column(name).is_some_and(|c| c.kind == ColumnKind::Static);
    match statement {
        Statement::Delete(delete) => !delete.columns.is_empty() && delete.columns.iter().all(|c| is_static(&c.column)),
        Statement::Update(_) => true,
        _ => false,
    }
}

/// Whether `relation` restricts the column `name`.
/// A conditional write names one row: IN on a key column is refused,
/// whatever its values (ScyllaDB's texts; `what` is "updates" or "deletions").
fn check_no_key_in(meta: &TableMeta, relations: &[crate::ast::Relation], what: &str) -> CqlResult<()> {
    use crate::ast::Relation;
    let in_on = |kind: ColumnKind| {
        relations.iter().any(|relation| match relation {
            Relation::In { column, .. } => meta.column(column).is_some_and(|c| c.kind == kind),
            Relation::MultiColumnIn { columns, .. } => {
                columns.iter().any(|column| meta.column(column).is_some_and(|c| c.kind == kind))
            }
            _ => false,
        })
    };
    if in_on(ColumnKind::PartitionKey) {
        return Err(invalid(format!("IN on the partition key is not supported with conditional {what}")));
    }
    if in_on(ColumnKind::Clustering) {
        return Err(invalid(format!("IN on the clustering key columns is not supported with conditional {what}")));
    }
    Ok(())
}

fn relation_names(relation: &crate::ast::Relation, name: &str) -> bool {
    use crate::ast::Relation;
    match relation {
        Relation::Simple { column, .. } | Relation::In { column, .. } => column == name,
        Relation::MultiColumn { columns, .. } | Relation::MultiColumnIn { columns, .. } => {
            columns.iter().any(|c| c == name)
        }
        _ => false,
    }
}

/// The check of an UPDATE or DELETE's `IF` clause; `None` without one.
fn check_of(meta: &TableMeta, condition: &Condition, bindings: Bindings<'_>) -> CqlResult<Option<RowCheck>> {
    Ok(match condition {
        Condition::None => None,
        Condition::IfExists => Some(RowCheck::Exists),
        Condition::IfColumns(conditions) => Some(RowCheck::Columns(
            conditions.iter().map(|c| column_check(meta, c, bindings)).collect::<CqlResult<_>>()?,
        )),
    })
}

fn column_check(meta: &TableMeta, condition: &ColumnCondition, bindings: Bindings<'_>) -> CqlResult<ColumnCheck> {
    let name = &condition.target.column;
    let column = meta.column_index(name).ok_or_else(|| invalid(format!("Undefined column name {name}")))?;
    let meta_column = &meta.columns[column];
    if meta_column.kind.is_primary_key() {
        return Err(invalid(format!("PRIMARY KEY column '{name}' cannot have IF conditions")));
    }
    let (part, ty) = match (&condition.target.element, &condition.target.field) {
        (None, None) => (CheckedPart::Whole, &meta_column.ty),
        (Some(key), _) => match meta_column.ty.unfrozen() {
            CqlType::Map(key_ty, value_ty) => {
                let key = match eval(key, Receiver { name, ty: key_ty }, bindings)? {
                    BoundValue::Value(key) => key,
                    _ => return Err(invalid(format!("Invalid null value for {name} element access"))),
                };
                (CheckedPart::MapValue(key), value_ty.as_ref())
            }
            CqlType::List(elem_ty) => {
                let index = match eval(key, Receiver { name, ty: &CqlType::Int }, bindings)? {
                    BoundValue::Value(index) => i32::from_be_bytes(
                        index[..].try_into().map_err(|_| invalid(format!("Invalid list index for {name}")))?,
                    ),
                    _ => return Err(invalid(format!("Invalid null value for list index of {name}"))),
                };
                let index = usize::try_from(index)
                    .map_err(|_| invalid(format!("Invalid negative list index {index} for {name}")))?;
                (CheckedPart::ListElement(index), elem_ty.as_ref())
            }
            _ => {
                return Err(invalid(format!("Element conditions are only supported on map and list columns ({name})")))
            }
        },
        (None, Some(field)) => {
            let (index, ty) = field_of(meta_column, field)?;
            (CheckedPart::Field(index), ty)
        }
    };
    // A field's values are received as `c.field`, as Cassandra names them.
    let receiver_name = condition.target.field.as_ref().map_or_else(|| name.clone(), |f| format!("{name}.{f}"));
    let name = &receiver_name;
    // Durations have no order (ScyllaDB's text, from its binary operator).
    let slice = matches!(condition.op, Operator::Lt | Operator::Le | Operator::Gt | Operator::Ge);
    if slice && crate::durations::references_duration(ty) {
        return Err(invalid(format!("Duration type is unordered for {name}")));
    }
    let receiver = Receiver { name, ty };
    let values = match (condition.op, &condition.value) {
        (Operator::In | Operator::NotIn, Term::List(terms)) => {
            terms.iter().map(|t| condition_value(t, receiver, bindings)).collect::<CqlResult<_>>()?
        }
        (Operator::In | Operator::NotIn, term) => {
            // Elements are checked one by one, and a null one is a null
            // candidate, as ScyllaDB takes it: the Rust driver sends it as
            // null, the Python driver as an empty value (which stands for
            // null where the type has no empty value).
            let list_ty = CqlType::List(Box::new(CqlType::Blob));
            let list = match term {
                Term::Bind(index) => bindings.values.get(*index).cloned().unwrap_or(BoundValue::Unset),
                _ => eval(term, Receiver { name, ty: &list_ty }, bindings)?,
            };
            let BoundValue::Value(list) = list else {
                return Err(invalid(format!("Invalid null list in IN condition on {name}")));
            };
            let binding_error = |e| invalid(format!("Exception while binding column {name}: {e}"));
            let element = |item: Option<&[u8]>| match item.map(|i| (i, validate_value(ty, i))) {
                Some((item, Ok(()))) => Ok(Some(list.slice_ref(item))),
                None | Some(([], Err(_))) => Ok(None),
                Some((_, Err(e))) => Err(binding_error(e)),
            };
            let items = shoal_schema::collection::list_items_with_nulls(&list, &list_ty).map_err(binding_error)?;
            items.into_iter().map(element).collect::<CqlResult<_>>()?
        }
        (Operator::Eq | Operator::Ne | Operator::Lt | Operator::Le | Operator::Gt | Operator::Ge, term) => {
            let value = condition_value(term, receiver, bindings)?;
            if value.is_none() && !matches!(condition.op, Operator::Eq | Operator::Ne) {
                return Err(invalid(format!("Invalid comparison with null for operator \"{}\"", condition.op.text())));
            }
            vec![value]
        }
        (Operator::Contains | Operator::ContainsKey, term) => {
            let element = match (condition.op, &condition.target.element, ty.unfrozen()) {
                (_, Some(_), _) => None,
                (Operator::ContainsKey, _, CqlType::Map(key, _)) => Some(key.as_ref()),
                (Operator::Contains, _, CqlType::Map(_, value)) => Some(value.as_ref()),
                (Operator::Contains, _, CqlType::Set(e) | CqlType::List(e)) => Some(e.as_ref()),
                _ => None,
            };
            let Some(element) = element else {
                let collection = matches!(ty.unfrozen(), CqlType::Set(_) | CqlType::List(_) | CqlType::Map(..));
                return Err(invalid(match (condition.op, collection) {
                    (Operator::ContainsKey, true) => format!("Cannot use CONTAINS KEY on non-map column {name}"),
                    (op, _) => format!("Cannot use {} on non-collection column {name}", op.text()),
                }));
            };
            let value = condition_value(term, Receiver { name, ty: element }, bindings)?;
            if value.is_none() {
                return Err(invalid(format!("Invalid comparison with null for operator \"{}\"", condition.op.text())));
            }
            vec![value]
        }
        (op, _) => return Err(invalid(format!("Unsupported operator {} in an IF condition", op.text()))),
    };
    Ok(ColumnCheck { column, part, op: check_op(condition.op)?, values })
}

/// The index and type of `field` of `column`'s user type; Cassandra allows
/// conditions on a field of frozen and non-frozen user types alike.
fn field_of<'c>(column: &'c ColumnMeta, field: &str) -> CqlResult<(usize, &'c CqlType)> {
    let CqlType::Udt(udt) = column.ty.unfrozen() else {
        return Err(invalid(format!(
            "Invalid field condition {0}.{field}: column {0} of type {1} is not a user type",
            column.name, column.ty
        )));
    };
    let index =
        udt.field_index(field).ok_or_else(|| invalid(format!("Unknown field {field} for column {}", column.name)))?;
    Ok((index, &udt.fields[index].1))
}

/// A value a condition compares with (`None`: null); unset is refused, as
/// by Cassandra, since "leave it alone" means nothing in a comparison.
fn condition_value(term: &Term, receiver: Receiver<'_>, bindings: Bindings<'_>) -> CqlResult<Option<Bytes>> {
    match eval(term, receiver, bindings)? {
        BoundValue::Unset => Err(invalid("Invalid 'unset' value in condition")),
        value => Ok(value.into_option()),
    }
}

/// Checks that the conditional statements of a batch (or one statement) and
/// its other writes all touch one partition of one table.
pub(crate) fn check_single_partition(statements: &[Conditional], writes: &[Mutation]) -> CqlResult<()> {
    let Some((first, (position, _))) = statements.iter().find_map(|s| Some((s, s.condition.as_ref()?))) else {
        return Ok(());
    };
    let tables = statements.iter().map(|c| c.table.id).chain(writes.iter().map(|w| w.table));
    if tables.clone().any(|t| t != first.table.id) {
        return Err(invalid("Batch with conditions cannot span multiple tables"));
    }
    let conditional = statements.iter().filter_map(|s| s.condition.as_ref().map(|(p, _)| p));
    let positions = conditional.chain(writes.iter().map(|w| &w.position));
    if positions.clone().any(|p| p != position) {
        return Err(invalid("Batch with conditions cannot span multiple partitions"));
    }
    Ok(())
}

/// Runs conditional writes through the coordinator: `writes` carry
/// `timestamp_us`, moved to the owning shard's clock under the lock.
/// Some statement has a condition and [`check_single_partition`] passed.
pub(crate) async fn execute(
    statements: Vec<Conditional>,
    writes: Vec<Mutation>,
    consistency: ConsistencyLevel,
    serial: Option<ConsistencyLevel>,
    timestamp_us: i64,
    now_s: i64,
    is_batch: bool,
) -> CqlResult<QueryResult> {
    let Some((first, (position, _))) = statements.iter().find_map(|s| Some((s, s.condition.as_ref()?))) else {
        return Err(CqlError::Server("no condition to check".into()));
    };
    let (meta, position) = (Arc::clone(&first.table), position.clone());
    // One partition, so one mutation: the batch applies whole or not at all.
    let mut writes = writes.into_iter();
    let mutation = writes.next().map(|mut merged| {
        writes.for_each(|write| merged.absorb(write));
        merged
    });
    // Copied only for a CDC-enabled table, whose log rows are made from it.
    let logged = mutation
        .as_ref()
        .filter(|m| crate::cdc_log::any_logged(&shoal_coordinator::schema(), std::slice::from_ref(*m)))
        .cloned();
    let request = CasRequest {
        table: meta.id,
        position,
        conditions: statements.iter().filter_map(|s| Some(s.condition.as_ref()?.1.clone())).collect(),
        mutation,
        timestamp_us,
        now_s,
    };
    let serial = serial.unwrap_or(ConsistencyLevel::Serial);
    let answer = shoal_coordinator::cas(request, consistency, serial, timeouts().cas).await?;
    if let (Some(write), true) = (logged, answer.applied) {
        Box::pin(crate::cdc_log::log_applied(write, consistency, now_s)).await?;
    }
    result(&meta, &statements, &answer.rows, answer.applied, is_batch)
}

/// The coordinator's comparison for a CQL operator allowed in `IF`.
fn check_op(op: Operator) -> CqlResult<CheckOp> {
    Ok(match op {
        Operator::Eq => CheckOp::Eq,
        Operator::Ne => CheckOp::Ne,
        Operator::Lt => CheckOp::Lt,
        Operator::Le => CheckOp::Le,
        Operator::Gt => CheckOp::Gt,
        Operator::Ge => CheckOp::Ge,
        Operator::In => CheckOp::In,
        Operator::NotIn => CheckOp::NotIn,
        Operator::Contains => CheckOp::Contains,
        Operator::ContainsKey => CheckOp::ContainsKey,
        other => return Err(invalid(format!("Unsupported operator {} in an IF condition", other.text()))),
    })
}

/// The columns a result shows after `[applied]`: the condition columns
/// (every column for IF [NOT] EXISTS), and in a batch the key columns too.
fn shown_columns(meta: &TableMeta, statements: &[Conditional], is_batch: bool) -> Vec<usize> {
    let checks = || statements.iter().filter_map(|s| s.condition.as_ref().map(|(_, c)| &c.check));
    let whole_row = checks().any(|check| !matches!(check, RowCheck::Columns(_)));
    (0..meta.columns.len())
        .filter(|&i| {
            whole_row
                || (is_batch && meta.columns[i].kind.is_primary_key())
                || checks().any(|check| match check {
                    RowCheck::Columns(checks) => checks.iter().any(|k| k.column == i),
                    _ => false,
                })
        })
        .collect()
}

fn columns_of(meta: &TableMeta, shown: &[usize]) -> Arc<[ColumnSpec]> {
    let mut columns = vec![applied_spec(meta)];
    columns.extend(shown.iter().map(|&i| spec(meta, meta.columns[i].name.clone(), meta.columns[i].ty.clone())));
    columns.into()
}

/// The result, as ScyllaDB gives it whether applied or not: `[applied]`,
/// then the values the conditions were checked against ([`shown_columns`]),
/// one row per statement (a batch's, conditional or not, in order): the
/// row the statement names as read; else the partition's static row (its
/// key and static columns, where the table has both), unless the statement
/// names a row and tests IF [NOT] EXISTS; else nulls.
fn result(
    meta: &TableMeta,
    statements: &[Conditional],
    current: &[Option<ResultRow>],
    applied: bool,
    is_batch: bool,
) -> CqlResult<QueryResult> {
    let shown = shown_columns(meta, statements, is_batch);
    // Rows read for a named row first: a read for the static row keeps
    // only the static cells of the partition's first row.
    let conditions = statements.iter().filter_map(|s| s.condition.as_ref().map(|(_, c)| c));
    let (named, partition): (Vec<_>, Vec<_>) = conditions.zip(current).partition(|(c, _)| c.row.is_some());
    let read: Vec<&ResultRow> = named.into_iter().chain(partition).filter_map(|(_, row)| row.as_ref()).collect();
    let has_static_row = meta.clustering_key_len() > 0 && meta.columns.iter().any(|c| c.kind == ColumnKind::Static);
    let static_row = read.first().copied().filter(|_| has_static_row);
    let mut rows = Vec::with_capacity(statements.len());
    for statement in statements {
        let mut out = vec![Some(bool_value(applied))];
        let own = statement.row.as_ref().and_then(|key| {
            read.iter().copied().find(|r| {
                meta.clustering_key_len() == 0
                    || (r.position.clustering.as_ref() == Some(key) && r.clustering.len() == meta.clustering_key_len())
            })
        });
        let tests_existence = statement
            .condition
            .as_ref()
            .is_some_and(|(_, c)| matches!(c.check, RowCheck::Exists | RowCheck::NotExists));
        match (own, static_row) {
            (Some(row), _) => {
                for &i in &shown {
                    out.push(column_value(meta, i, row)?);
                }
            }
            (None, Some(row)) if statement.row.is_none() || !tests_existence => {
                for &i in &shown {
                    let partition_level = matches!(meta.columns[i].kind, ColumnKind::PartitionKey | ColumnKind::Static);
                    out.push(if partition_level { column_value(meta, i, row)? } else { None });
                }
            }
            _ => out.resize(shown.len() + 1, None),
        }
        rows.push(out);
    }
    Ok(QueryResult::Rows(Rows { columns: columns_of(meta, &shown), rows, paging_state: None }))
}

fn spec(meta: &TableMeta, name: String, ty: CqlType) -> ColumnSpec {
    ColumnSpec { keyspace: meta.keyspace.clone(), table: meta.name.clone(), name, ty }
}

fn applied_spec(meta: &TableMeta) -> ColumnSpec {
    spec(meta, "[applied]".to_string(), CqlType::Boolean)
}

fn bool_value(value: bool) -> Bytes {
    Bytes::from_static(if value { &[1] } else { &[0] })
}

/// Whether a prepared statement is conditional (drivers route such
/// statements specially, told by a bit of the PREPARED metadata flags).
pub(crate) fn is_conditional(statement: &Statement) -> bool {
    match statement {
        Statement::Insert(s) => s.if_not_exists,
        Statement::InsertJson(s) => s.if_not_exists,
        Statement::Update(s) => s.condition != Condition::None,
        Statement::Delete(s) => s.condition != Condition::None,
        Statement::Batch(b) => b.statements.iter().any(is_conditional),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use shoal_coordinator::data::{ResultCell, RowPosition};
    use shoal_schema::UserType;

    use crate::ast::Statement;

    /// `(k int PRIMARY KEY, u <frozen?> pt, v int)` with `pt (x int, tag text)`.
    fn table(frozen: bool) -> TableMeta {
        let text = "CREATE TABLE t (k int PRIMARY KEY, u int, v int)";
        let Ok(Statement::CreateTable(create)) = crate::parser::parse_statement(text).map(|p| p.statement) else {
            panic!("not a create table")
        };
        let mut meta = crate::ddl::create_table("ks", &create).expect("a valid table");
        let fields = vec![("x".to_string(), CqlType::Int), ("tag".to_string(), CqlType::Text)];
        let udt = CqlType::Udt(Arc::new(UserType { keyspace: "ks".into(), name: "pt".into(), fields }));
        meta.columns[1].ty = if frozen { CqlType::Frozen(Box::new(udt)) } else { udt };
        meta
    }

    fn checks(meta: &TableMeta, condition: &str) -> CqlResult<Vec<ColumnCheck>> {
        let text = format!("UPDATE t SET v = 1 WHERE k = 1 IF {condition}");
        let Ok(Statement::Update(update)) = crate::parser::parse_statement(&text).map(|p| p.statement) else {
            panic!("not an update: {text}")
        };
        let Condition::IfColumns(conditions) = &update.condition else { panic!("no column conditions") };
        conditions.iter().map(|c| column_check(meta, c, Bindings::NONE)).collect()
    }

    /// A row whose `u` is `{x: x, tag: tag}` (a value cut short after `x`
    /// when `tag` is absent, as values written before a field was added are).
    fn row(x: Option<i32>, tag: Option<&str>) -> ResultRow {
        let mut value = Vec::new();
        match x {
            Some(x) => {
                value.extend_from_slice(&4i32.to_be_bytes());
                value.extend_from_slice(&x.to_be_bytes());
            }
            None => value.extend_from_slice(&(-1i32).to_be_bytes()),
        }
        if let Some(tag) = tag {
            value.extend_from_slice(&(tag.len() as i32).to_be_bytes());
            value.extend_from_slice(tag.as_bytes());
        }
        let cell = ResultCell { value: Bytes::from(value), timestamp: 1, ttl_s: None, elements: Vec::new() };
        let position = RowPosition { partition: PartitionPosition { token: 0, key: Bytes::new() }, clustering: None };
        ResultRow { position, clustering: Vec::new(), cells: vec![None, Some(cell), None] }
    }

    fn holds_on(meta: &TableMeta, condition: &str, row: Option<&ResultRow>) -> bool {
        let checks = checks(meta, condition).expect("a valid condition");
        RowCheck::Columns(checks).holds(meta, row).expect("a readable row")
    }

    #[test]
    fn field_conditions_compare_the_field_frozen_or_not() {
        for frozen in [false, true] {
            let meta = table(frozen);
            let stored = row(Some(3), Some("abc"));
            for (condition, expected) in [
                ("u.x = 3", true),
                ("u.x != 3", false),
                ("u.x < 4", true),
                ("u.x >= 4", false),
                ("u.x IN (1, 3)", true),
                ("u.x IN (null)", false),
                ("u.tag > 'abb'", true),
                ("u.tag = 'abc' AND u.x > 3", false),
            ] {
                assert_eq!(holds_on(&meta, condition, Some(&stored)), expected, "{condition} (frozen: {frozen})");
            }
        }
    }

    #[test]
    fn missing_fields_and_rows_are_null() {
        let meta = table(false);
        let short = row(Some(3), None);
        assert!(holds_on(&meta, "u.tag = null", Some(&short)));
        assert!(!holds_on(&meta, "u.tag != null", Some(&short)));
        assert!(holds_on(&meta, "u.x = null", Some(&row(None, Some("a")))));
        assert!(holds_on(&meta, "u.x = null AND u.tag IN (null, 'b')", None));
        assert!(!holds_on(&meta, "u.x < 5", None));
    }

    #[test]
    fn field_condition_errors() {
        let meta = table(false);
        let message = |condition: &str| match checks(&meta, condition) {
            Err(CqlError::Invalid(message)) => message,
            other => panic!("{condition}: {other:?}"),
        };
        assert_eq!(message("u.nope = 1"), "Unknown field nope for column u");
        assert!(message("v.x = 1").contains("column v of type int is not a user type"));
        assert!(message("u.x = 'a'").contains("u.x"));
        assert_eq!(message("u.x > null"), "Invalid comparison with null for operator \">\"");
    }
}
