//! Operations that depend on a list's current contents: remove by value
//! (`l = l - [x]`), set and delete by index (`l[i] = x`, `DELETE l[i]`).
//!
//! They run on the shard owning the partition, as one step with the write
//! they belong to: read the live elements, turn each operation into cells
//! (tombstones or overwrites at existing element keys), apply. The read may
//! await SSTable I/O, so the step holds the partition's lock
//! (`Database::apply`): no other such write, nor a conditional write, to
//! the partition comes between the read and the write.

use bytes::Bytes;
use shoal_schema::TableMeta;
use shoal_storage::{Cell, CollectionCell, ColumnData, Expiry, Partition, Row, Tombstone};

use crate::database::ReplicaError;

#[derive(Debug, Clone)]
pub struct ListOp {
    pub column: u32,
    /// Encoded clustering key of the row; `None` for the static row.
    pub row: Option<Bytes>,
    pub kind: ListOpKind,
    pub timestamp: i64,
    pub now_s: i64,
    pub expiry: Option<Expiry>,
}

#[derive(Debug, Clone)]
pub enum ListOpKind {
    RemoveValues(Vec<Bytes>),
    SetIndex { index: i32, value: Option<Bytes> },
    DeleteIndex(i32),
}

/// Adds to `update` the cells that carry out `ops` given `current`, a
/// partition of table `meta`.
pub(crate) fn resolve(
    meta: &TableMeta,
    current: Option<&Partition>,
    ops: &[ListOp],
    update: &mut Partition,
) -> Result<(), ReplicaError> {
    for op in ops {
        // Cells from before the column was dropped are no part of it.
        let dropped = crate::read::dropped_tombstone(meta, op.column);
        let target = match &op.row {
            None => &mut update.static_row,
            Some(key) => &mut update.rows.entry(key.clone()).or_default().row,
        };
        let live = live_elements(current, op, dropped);
        let cells = collection(target, op.column);
        let dead = || Cell::dead(op.timestamp, op.now_s);
        match &op.kind {
            ListOpKind::RemoveValues(values) => {
                for (key, _) in live.iter().filter(|(_, v)| values.contains(v)) {
                    put(cells, key.clone(), dead());
                }
            }
            ListOpKind::SetIndex { index, value } => {
                let cell = match value {
                    Some(v) => Cell::live(op.timestamp, v.clone(), op.expiry),
                    None => dead(),
                };
                put(cells, element_key(&live, *index)?, cell);
            }
            ListOpKind::DeleteIndex(index) => put(cells, element_key(&live, *index)?, dead()),
        }
    }
    Ok(())
}

/// Writes `cell` at `key`, reconciled with what an earlier operation of the
/// same statement wrote there (`SET l[0] = 2, l[0] = 1` keeps 2, in either
/// order), as two writes reconcile.
fn put(cells: &mut std::collections::BTreeMap<Bytes, CollectionCell>, key: Bytes, cell: Cell) {
    let cell = match cells.remove(&key) {
        Some(earlier) => Cell::reconcile(earlier.cell, cell),
        None => cell,
    };
    cells.insert(key.clone(), CollectionCell { key, cell });
}

fn element_key(live: &[(Bytes, Bytes)], index: i32) -> Result<Bytes, ReplicaError> {
    usize::try_from(index)
        .ok()
        .and_then(|i| live.get(i))
        .map(|(key, _)| key.clone())
        .ok_or_else(|| ReplicaError::Invalid(format!("List index {index} out of bound, list has size {}", live.len())))
}

fn collection(row: &mut Row, column: u32) -> &mut std::collections::BTreeMap<Bytes, CollectionCell> {
    let data = row.columns.entry(column).or_insert_with(|| ColumnData::Collection(Default::default()));
    if let ColumnData::Atomic(_) = data {
        *data = ColumnData::Collection(Default::default());
    }
    match data {
        ColumnData::Collection(c) => &mut c.cells,
        ColumnData::Atomic(_) => unreachable!("replaced by a collection just above"),
    }
}

/// (element key, value) of the list's live elements, in list order.
fn live_elements(current: Option<&Partition>, op: &ListOp, dropped: Option<Tombstone>) -> Vec<(Bytes, Bytes)> {
    let Some(partition) = current else { return Vec::new() };
    let (row, covering) = match &op.row {
        None => (Some(&partition.static_row), partition.tombstone),
        Some(key) => (partition.rows.get(key).map(|r| &r.row), partition.deletion_for_row(key)),
    };
    let Some(row) = row else { return Vec::new() };
    let Some(ColumnData::Collection(list)) = row.columns.get(&op.column) else { return Vec::new() };
    let deletion =
        [covering, row.deletion, list.tombstone, dropped].into_iter().flatten().max_by_key(|t: &Tombstone| t.timestamp);
    list.cells
        .values()
        .filter(|c| deletion.is_none_or(|d| !d.shadows(c.cell.timestamp)))
        .filter_map(|c| c.cell.live_value(op.now_s).map(|v| (c.key.clone(), v)))
        .collect()
}
