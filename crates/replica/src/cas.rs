//! Conditional writes (compare-and-set): the conditions and how they are
//! evaluated against a partition ([`CasRequest::evaluate`], a pure
//! function: the coordinator's Paxos runs it on a quorum's merged copy),
//! and the single-replica form on the owning shard: hold the partition's
//! lock, read the rows the conditions name, evaluate, and apply the
//! mutation only when every condition holds.
//!
//! Conditions are data, built by a front end from its language (CQL's `IF`)
//! and evaluated below the front end, so no front end reads and writes a
//! replica itself. On one replica the mutation takes its timestamp under the
//! lock from this shard's strictly increasing clock: conditional writes to
//! a partition apply in timestamp order whatever the coordinators' clocks,
//! so a write that passed its check is never shadowed by the one it
//! followed.

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;
use shoal_schema::collection::Items;
use shoal_schema::fields;
use shoal_schema::value::compare;
use shoal_schema::{ColumnKind, CqlType, TableMeta};
use shoal_storage::{ClusteringRange, Partition, PartitionPosition};
use uuid::Uuid;

use crate::read::{rows_of, ReadCommand, ResultRow};
use crate::{Database, Mutation, ReplicaError};

/// What a condition requires of its row.
#[derive(Debug, Clone, PartialEq)]
pub enum RowCheck {
    /// `IF NOT EXISTS`
    NotExists,
    /// `IF EXISTS`
    Exists,
    /// `IF c op v AND ...`: every check holds.
    Columns(Vec<ColumnCheck>),
}

/// `c op value` (or `c[key] op value` on a map, `c.field op value` on a
/// user type), its values already validated against the compared type.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnCheck {
    /// The column's index in the table.
    pub column: usize,
    pub part: CheckedPart,
    pub op: CheckOp,
    /// The value (`None`: null), or the candidates of `In`.
    pub values: Vec<Option<Bytes>>,
}

/// The part of a column's value a check compares.
#[derive(Debug, Clone, PartialEq)]
pub enum CheckedPart {
    Whole,
    /// The value at this key of a map.
    MapValue(Bytes),
    /// The element at this index of a list (null past its end).
    ListElement(usize),
    /// The field at this index of a user type value, frozen or not.
    Field(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    NotIn,
    /// A collection holds the value: a set's or list's element, a map's
    /// value (Cassandra 5).
    Contains,
    /// A map holds the key.
    ContainsKey,
}

/// One statement's condition, on one row of the partition.
#[derive(Debug, Clone, PartialEq)]
pub struct RowCondition {
    /// Encoded clustering key; `None` for the static row (the partition).
    pub row: Option<Bytes>,
    pub check: RowCheck,
}

/// A conditional write: conditions on rows of one partition, and the
/// mutation to apply when all hold.
#[derive(Debug, Clone)]
pub struct CasRequest {
    pub table: Uuid,
    pub position: PartitionPosition,
    /// Never empty.
    pub conditions: Vec<RowCondition>,
    /// Written at `timestamp_us`; `None` when there is nothing to write.
    pub mutation: Option<Mutation>,
    /// The timestamp the mutation was built with; it is moved to this
    /// shard's clock under the lock.
    pub timestamp_us: i64,
    /// The reader's clock: what has expired by now is gone.
    pub now_s: i64,
}

/// The outcome: whether the mutation was applied, and each condition's
/// row as it was read (its static columns merged in).
#[derive(Debug, Clone)]
pub struct CasResult {
    pub applied: bool,
    /// One per condition, in order; `None` where the row does not exist.
    pub rows: Vec<Option<ResultRow>>,
    /// What was written, when applied: the mutation at the timestamp it
    /// took here, its list operations resolved to cells (what other
    /// replicas are sent).
    pub written: Option<Mutation>,
}

impl CasRequest {
    /// The clustering ranges the check and the write read: each row a
    /// condition names, or the whole partition when a condition reads the
    /// static row or a list operation reads its list.
    pub fn read_ranges(&self) -> Vec<ClusteringRange> {
        let list_ops = self.mutation.as_ref().is_some_and(|m| !m.list_ops.is_empty());
        let mut keys: Vec<Bytes> = Vec::new();
        for condition in &self.conditions {
            match &condition.row {
                Some(key) if !list_ops => keys.push(key.clone()),
                _ => return vec![ClusteringRange::all()],
            }
        }
        keys.sort();
        keys.dedup();
        keys.into_iter()
            .map(|key| ClusteringRange { start: Bound::Included(key.clone()), end: Bound::Included(key) })
            .collect()
    }

    /// Checks the conditions against `current` (the partition as stored,
    /// holding at least [`CasRequest::read_ranges`]) and, when every one
    /// holds, makes the write: the mutation moved to `timestamp_us`, its
    /// list operations resolved to cells. Nothing is applied here.
    pub fn evaluate(
        &self,
        meta: &TableMeta,
        current: Option<&Partition>,
        timestamp_us: i64,
    ) -> Result<CasResult, ReplicaError> {
        assert!(!self.conditions.is_empty(), "a conditional write without conditions");
        assert_eq!(meta.id, self.table, "a conditional write evaluated against another table");
        let mut rows = Vec::with_capacity(self.conditions.len());
        for condition in &self.conditions {
            rows.push(condition_row(meta, &self.position, current, condition, self.now_s)?);
        }
        let mut applied = true;
        for (condition, row) in self.conditions.iter().zip(&rows) {
            applied &= condition.holds(meta, row.as_ref())?;
        }
        let mut written = None;
        if let (true, Some(mutation)) = (applied, &self.mutation) {
            assert!(mutation.table == self.table && mutation.position == self.position);
            let mut mutation = mutation.clone();
            mutation.shift_timestamps(timestamp_us - self.timestamp_us);
            let Mutation { table, position, mut update, list_ops } = mutation;
            crate::list_ops::resolve(meta, current, &list_ops, &mut update)?;
            written = Some(Mutation { table, position, update, list_ops: Vec::new() });
        }
        Ok(CasResult { applied, rows, written })
    }
}

impl Database {
    /// Runs `request` on this shard, which owns its partition and is its
    /// only replica: lock, read, check, maybe write.
    pub async fn cas(&self, request: CasRequest) -> Result<CasResult, ReplicaError> {
        let schema = self.schema();
        let meta = Arc::clone(schema.table_by_id(request.table).ok_or(ReplicaError::NoSuchTable(request.table))?);
        let _guard = self.lock_partition(request.table, request.position.clone()).await?;
        let current = self.table(request.table)?.read(&request.position, &request.read_ranges()).await?;
        let timestamp_us = shoal_runtime::clock::next_write_timestamp_us();
        let result = request.evaluate(&meta, current.as_ref(), timestamp_us)?;
        if let Some(written) = &result.written {
            let position = written.position.clone();
            self.apply_holding_lock(written.table, position, written.update.clone(), &[]).await?;
        }
        Ok(result)
    }
}

/// The live row a condition tests (its static columns merged in), or
/// the partition's static row for a condition on the partition.
fn condition_row(
    meta: &TableMeta,
    position: &PartitionPosition,
    current: Option<&Partition>,
    condition: &RowCondition,
    now_s: i64,
) -> Result<Option<ResultRow>, ReplicaError> {
    let Some(partition) = current else { return Ok(None) };
    let read = |clustering: ClusteringRange| -> Result<Option<ResultRow>, ReplicaError> {
        let mut command = ReadCommand::of_partitions(meta.id, vec![position.clone()], vec![clustering], now_s);
        command.row_limit = 1;
        command.per_partition_limit = 1;
        Ok(rows_of(meta, &command, position, partition)?.rows.into_iter().next())
    };
    if let Some(key) = &condition.row {
        let found = read(ClusteringRange { start: Bound::Included(key.clone()), end: Bound::Included(key.clone()) })?;
        if found.is_some() || !reads_static(meta, &condition.check) {
            return Ok(found);
        }
    }
    // The static row: the partition's first row yields it (its static
    // cells merged in; only those are looked at), or the static row alone
    // when no row is live. The first row's key stays, as ScyllaDB reads the
    // first row for such a condition and a batch's result shows it.
    let row = read(ClusteringRange::all())?;
    Ok(row.map(|mut r| {
        for (i, column) in meta.columns.iter().enumerate() {
            if column.kind == ColumnKind::Regular {
                r.cells[i] = None;
            }
        }
        r
    }))
}

fn reads_static(meta: &TableMeta, check: &RowCheck) -> bool {
    match check {
        RowCheck::Columns(checks) => checks.iter().any(|c| meta.columns[c.column].kind == ColumnKind::Static),
        _ => false,
    }
}

impl RowCondition {
    /// Whether `row`, read for this condition ([`condition_row`]), passes
    /// its check. The static row exists only with a live static cell: its
    /// read yields the partition's key whenever a clustering row is live,
    /// and ScyllaDB shows that key, but `INSERT ... IF NOT EXISTS` of
    /// static columns tests the static row alone.
    pub fn holds(&self, meta: &TableMeta, row: Option<&ResultRow>) -> Result<bool, ReplicaError> {
        let static_live = |r: &&ResultRow| {
            meta.columns.iter().zip(&r.cells).any(|(c, cell)| c.kind == ColumnKind::Static && cell.is_some())
        };
        let row = match (&self.row, &self.check) {
            (None, RowCheck::Exists | RowCheck::NotExists) => row.filter(static_live),
            _ => row,
        };
        self.check.holds(meta, row)
    }
}

impl RowCheck {
    /// Whether `row` (`None`: it does not exist) of a table of `meta`
    /// passes this check.
    pub fn holds(&self, meta: &TableMeta, row: Option<&ResultRow>) -> Result<bool, ReplicaError> {
        match self {
            RowCheck::NotExists => Ok(row.is_none()),
            RowCheck::Exists => Ok(row.is_some()),
            RowCheck::Columns(checks) => {
                for c in checks {
                    if !column_holds(meta, c, row)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
        }
    }
}

fn column_holds(meta: &TableMeta, check: &ColumnCheck, row: Option<&ResultRow>) -> Result<bool, ReplicaError> {
    let column = meta.columns.get(check.column).ok_or_else(|| {
        ReplicaError::Invalid(format!("condition on column {} of a table with {}", check.column, meta.columns.len()))
    })?;
    let whole = row.and_then(|r| r.cells[check.column].as_ref()).map(|c| c.value.clone());
    let (current, ty) = match (&check.part, column.ty.unfrozen()) {
        (CheckedPart::MapValue(key), CqlType::Map(key_ty, value_ty)) => {
            (whole.and_then(|m| map_get(&m, key_ty, key)), value_ty.as_ref())
        }
        (CheckedPart::ListElement(index), CqlType::List(elem)) => {
            let element = whole.and_then(|l| Items::new(&l).nth(*index).flatten().map(|e| l.slice_ref(e)));
            (element, elem.as_ref())
        }
        (CheckedPart::Field(index), CqlType::Udt(udt)) => {
            // A value too short to hold the field (written before the
            // field was added) has it null.
            let value = match whole {
                Some(v) => fields::field(&v, *index)
                    .map_err(|e| ReplicaError::Corrupt(format!("user type value: {e}")))?
                    .map(|f| v.slice_ref(f)),
                None => None,
            };
            (value, &udt.fields[*index].1)
        }
        (CheckedPart::Whole, _) => (whole, &column.ty),
        _ => return Err(ReplicaError::Invalid(format!("condition part {:?} on column {}", check.part, column.name))),
    };
    let ty = ty.unfrozen();
    let equal = |v: &Option<Bytes>| match (&current, v) {
        (None, None) => true,
        (Some(a), Some(b)) => compare(ty, a, b) == Ordering::Equal,
        _ => false,
    };
    // `IF c IN ()` holds for no value, `IF c NOT IN ()` for every one; null
    // is a candidate like any other (`IF c NOT IN (null)` fails on null).
    let any_equal = || check.values.iter().any(equal);
    let first = || check.values.first().ok_or_else(|| ReplicaError::Invalid("condition without a value".into()));
    let ordering = || -> Result<Option<Ordering>, ReplicaError> {
        Ok(match (&current, first()?) {
            (Some(a), Some(b)) => Some(compare(ty, a, b)),
            _ => None,
        })
    };
    Ok(match check.op {
        CheckOp::In => any_equal(),
        CheckOp::NotIn => !any_equal(),
        CheckOp::Eq => equal(first()?),
        CheckOp::Ne => !equal(first()?),
        CheckOp::Lt => ordering()? == Some(Ordering::Less),
        CheckOp::Le => matches!(ordering()?, Some(Ordering::Less | Ordering::Equal)),
        CheckOp::Gt => ordering()? == Some(Ordering::Greater),
        CheckOp::Ge => matches!(ordering()?, Some(Ordering::Greater | Ordering::Equal)),
        CheckOp::Contains | CheckOp::ContainsKey => match (&current, first()?) {
            (Some(collection), Some(wanted)) => contains(ty, collection, wanted, check.op == CheckOp::ContainsKey),
            _ => false,
        },
    })
}

/// Whether serialized collection `collection` of type `ty` holds `wanted`:
/// among a map's keys (`key`), else among its values or a set's or list's
/// elements.
fn contains(ty: &CqlType, collection: &Bytes, wanted: &[u8], key: bool) -> bool {
    let (element_ty, entries, skip) = match ty {
        CqlType::Map(k, _) if key => (k.as_ref(), true, 0),
        CqlType::Map(_, v) => (v.as_ref(), true, 1),
        CqlType::Set(e) | CqlType::List(e) => (e.as_ref(), false, 0),
        _ => return false,
    };
    let items = if entries { Items::entries(collection) } else { Items::new(collection) };
    let step = if entries { 2 } else { 1 };
    items.skip(skip).step_by(step).flatten().any(|item| compare(element_ty.unfrozen(), item, wanted) == Ordering::Equal)
}

/// The value at `key` of a serialized map.
fn map_get(map: &Bytes, key_ty: &CqlType, key: &[u8]) -> Option<Bytes> {
    let mut items = Items::entries(map);
    while let (Some(Some(k)), Some(v)) = (items.next(), items.next()) {
        if compare(key_ty.unfrozen(), k, key) == Ordering::Equal {
            return v.map(|v| map.slice_ref(v));
        }
    }
    None
}
