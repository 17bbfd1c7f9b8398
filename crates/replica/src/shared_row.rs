//! A single row's result cells read straight from its shared compact bytes
//! (`shoal_storage::SharedRow`: what a memtable, the row cache and an
//! SSTable's point read hand over for a one-row partition), with no
//! `Partition` decoded: no row or column map built, values slices of the
//! shared bytes.
//!
//! The cells of such a row share one timestamp and expiry and it has no
//! deletion, static row or range tombstone, so what is live is decided
//! once for the row; only a dropped column's deletion is per cell. The
//! result is what `read::Reader` makes of the decoded partition's row.

use bytes::Bytes;
use shoal_schema::TableMeta;
use shoal_storage::{SharedRow, SharedValue};

use shoal_storage::Tombstone;

/// The row's cells by the table's column index, those live at `now_s`
/// (`None` for key columns, null and dead cells), each made by `cell` from
/// its value, the row's timestamp and TTL left, and whether its row marker
/// is live; `None` when every part of the row has expired. `dropped` is a
/// dropped column's deletion, by column id. (The reader passes both, so
/// this module names nothing of `read`, which names it.)
pub(crate) fn live_cells<T: Clone>(
    meta: &TableMeta,
    row: &SharedRow,
    now_s: i64,
    dropped: impl Fn(u32) -> Option<Tombstone>,
    cell: impl Fn(Bytes, i64, Option<i32>) -> T,
) -> Option<(Vec<Option<T>>, bool)> {
    let (header, cells) = row.read();
    if !header.is_live(now_s) {
        return None;
    }
    let ttl_s = header.expiry.map(|e| (e.expires_at_s - now_s).clamp(0, i32::MAX as i64) as i32);
    let mut out = vec![None; meta.columns.len()];
    // Cells come by column id, and a table's columns mostly lie in id
    // order: each search starts after the column found last.
    let mut hint = 0;
    for (id, value) in cells {
        let Some(index) = column_of(meta, id, hint) else { continue };
        hint = index + 1;
        if dropped(id).is_some_and(|d| d.shadows(header.timestamp)) {
            continue;
        }
        let value = match value {
            SharedValue::Word(word) => Bytes::copy_from_slice(&word.to_be_bytes()),
            SharedValue::Bytes(bytes) => bytes,
        };
        out[index] = Some(cell(value, header.timestamp, ttl_s));
    }
    Some((out, header.has_marker))
}

/// The index of the regular or static column `id`, searched from `hint`
/// around; `None` for a column no longer in the table (or a key column,
/// which holds no cell).
fn column_of(meta: &TableMeta, id: u32, hint: usize) -> Option<usize> {
    let columns = &meta.columns;
    let hint = hint.min(columns.len());
    let (before, after) = columns.split_at(hint);
    let found = match after.iter().position(|c| c.id == id) {
        Some(at) => hint + at,
        None => before.iter().position(|c| c.id == id)?,
    };
    (!columns[found].kind.is_primary_key()).then_some(found)
}
