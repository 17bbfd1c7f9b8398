//! Index view updates: what a write to a base partition changes in the
//! tables holding its indexes ([`shoal_schema::index`]).
//!
//! The base replica reads the rows a write touches before applying it
//! (under the partition's lock, so no other write comes between), merges
//! the write in, and compares each row's index entries before and after.
//! An entry is live while some part of the base row that gives it is: the
//! indexed cell, a collection element holding the value, or for an index
//! on a key column any part of the row (its marker, a cell, an element).
//! The view row mirrors those parts as elements of its liveness column
//! ([`shoal_schema::index::LIVENESS_COLUMN`]), keyed by the part, with the
//! part's timestamp and expiry; a part that stops giving the entry becomes
//! a dead element: at the timestamp of the deletion that ended it, or just
//! below that of the new value that replaced it.
//!
//! Why that converges: every replica computes those timestamps from base
//! data alone, so replicas that saw writes in different orders agree. A
//! dead element kills only that part's older versions: when the part gives
//! the entry again, it does so with a version that beat the one that
//! ended it in the base, so one newer than a deletion (which wins ties),
//! or at least as new as a replacing value. Parts expire in the view when they expire in the
//! base. A stale entry (an index build racing a write) costs a base read,
//! never a wrong row: queries re-check each base row.

use std::collections::BTreeMap;
use std::ops::Bound;

use bytes::Bytes;
use shoal_schema::comparable;
use shoal_schema::index::{entry_key, entry_value, per_partition, LIVENESS_COLUMN};
use shoal_schema::token::{murmur3_token, serialize_partition_key, split_partition_key};
use shoal_schema::{ColumnKind, ColumnMeta, CqlType, IndexKind, IndexMeta, Schema, TableMeta};
use shoal_storage::{
    Cell, CellValue, ClusteredRow, ClusteringRange, Collection, CollectionCell, ColumnData, Expiry, Partition,
    PartitionPosition, Row, Tombstone,
};

use crate::mutation::Mutation;
use crate::read::merge_tombstones;

/// One index of a base table, with the table holding it.
#[derive(Debug, Clone)]
pub struct IndexView {
    pub index: IndexMeta,
    pub view: std::sync::Arc<TableMeta>,
}

/// The indexes of table `base` in `schema` with their views.
pub fn index_views(schema: &Schema, base: &TableMeta) -> Vec<IndexView> {
    let Some(keyspace) = schema.keyspace(&base.keyspace) else { return Vec::new() };
    base.indexes
        .iter()
        .filter_map(|index| {
            let view = keyspace.tables.get(&index.view_name())?;
            Some(IndexView { index: index.clone(), view: std::sync::Arc::clone(view) })
        })
        .collect()
}

/// The clustering ranges a read before `update` must cover to see every
/// row whose index entries it may change.
pub fn affected_ranges(update: &Partition) -> Vec<ClusteringRange> {
    if update.tombstone.is_some() {
        return vec![ClusteringRange::all()];
    }
    let rows = update
        .rows
        .keys()
        .map(|key| ClusteringRange { start: Bound::Included(key.clone()), end: Bound::Included(key.clone()) });
    let ranges: Vec<ClusteringRange> = rows.chain(update.range_tombstones.iter().map(|rt| rt.range.clone())).collect();
    if ranges.is_empty() {
        // Only the static row changes: a range holding no row still
        // brings the partition's static row.
        return vec![ClusteringRange { start: Bound::Excluded(Bytes::new()), end: Bound::Excluded(Bytes::new()) }];
    }
    ranges
}

/// What makes a part of an index entry live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Liveness {
    timestamp: i64,
    expiry: Option<Expiry>,
}

/// A part of a base row that can give an index entry: its identity (the
/// liveness column's element key) and, here, its state.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    /// Live, giving the entry for `value`.
    Live { value: Bytes, liveness: Liveness },
    /// Deleted or replaced by a deletion at `timestamp`.
    Dead { timestamp: i64 },
}

/// The parts of one row (or static row) that concern an index, by
/// identity: the marker `[0]`, a cell `[1, column id]`, a collection
/// element `[2, column id, element key]`. Expired parts are left out:
/// their copies in the view expire too.
type Parts = BTreeMap<Bytes, Part>;

/// The view mutations that keep `base`'s indexes (`views`) in step when
/// `update` is applied to the partition at `position`, whose rows in
/// [`affected_ranges`] were `before`.
pub fn compute(
    base: &TableMeta,
    views: &[IndexView],
    position: &PartitionPosition,
    before: Option<&Partition>,
    update: &Partition,
    now_s: i64,
) -> Vec<Mutation> {
    let empty = Partition::default();
    let before = before.unwrap_or(&empty);
    let mut after = before.clone();
    after.merge(update.clone());
    let Ok(parts) = split_partition_key(base.partition_key_len(), &position.key) else { return Vec::new() };
    let base_pk: Vec<Bytes> = parts.iter().map(|p| Bytes::copy_from_slice(p)).collect();
    let mut out = ViewWrites { partitions: BTreeMap::new() };
    for view in views {
        // The DDL checked the column exists.
        let Some(column) = base.column(&view.index.column) else { continue };
        if per_partition(column) {
            let old = static_parts(column, &view.index, before, now_s);
            let new = static_parts(column, &view.index, &after, now_s);
            out.diff(view, &base_pk, position.token, &[], &old, &new);
            continue;
        }
        for (key, row) in &after.rows {
            let old = before.rows.get(key).map(|r| row_parts(column, &view.index, before, key, r, &base_pk, now_s));
            let new = row_parts(column, &view.index, &after, key, row, &base_pk, now_s);
            out.diff(view, &base_pk, position.token, &row.clustering, &old.unwrap_or_default(), &new);
        }
    }
    out.finish()
}

/// The entries every row of `partition` gives `view`'s index, as writes
/// of a view that has none yet (an index being built).
pub fn build(
    base: &TableMeta,
    view: &IndexView,
    position: &PartitionPosition,
    partition: &Partition,
    now_s: i64,
) -> Vec<Mutation> {
    compute(base, std::slice::from_ref(view), position, None, partition, now_s)
}

/// View writes gathered by view partition.
struct ViewWrites {
    partitions: BTreeMap<(uuid::Uuid, PartitionPosition), Partition>,
}

impl ViewWrites {
    /// The view writes that take a row's entries from `old` parts to `new`.
    fn diff(&mut self, view: &IndexView, base_pk: &[Bytes], token: i64, base_ck: &[Bytes], old: &Parts, new: &Parts) {
        for (id, part) in new {
            let Part::Live { value, liveness } = part else { continue };
            if old.get(id) == Some(part) {
                continue;
            }
            let cell = Cell::live(liveness.timestamp, Bytes::new(), liveness.expiry);
            self.put(view, value, base_pk, token, base_ck, id, cell);
        }
        for (id, part) in old {
            let Part::Live { value, .. } = part else { continue };
            let ended = match new.get(id) {
                // Just below the new version: a version of the part that
                // gives this entry again at that timestamp (it wins in the
                // base on its value) must live. One replaced at that very
                // timestamp is left as a stale entry, which queries skip.
                Some(Part::Live { value: now, liveness }) if now != value => liveness.timestamp - 1,
                Some(Part::Dead { timestamp }) => *timestamp,
                // Still gives the entry (handled above), or expired.
                _ => continue,
            };
            self.put(view, value, base_pk, token, base_ck, id, Cell::dead(ended, shoal_runtime::clock::now_s()));
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn put(
        &mut self,
        view: &IndexView,
        value: &Bytes,
        base_pk: &[Bytes],
        token: i64,
        base_ck: &[Bytes],
        part: &Bytes,
        cell: Cell,
    ) {
        if !indexable(value) {
            return;
        }
        let key = entry_key(&view.view, view.index.local, value, base_pk, token, base_ck);
        let parts: Vec<&[u8]> = key.partition.iter().map(|p| &p[..]).collect();
        // Components are base key components or indexable values.
        let Ok(partition_key) = serialize_partition_key(&parts) else { return };
        let partition_key = Bytes::from(partition_key);
        let position = PartitionPosition { token: murmur3_token(&partition_key), key: partition_key };
        // The view's one regular column, by construction.
        let Some(liveness) = view.view.column(LIVENESS_COLUMN) else { return };
        let partition = self.partitions.entry((view.view.id, position)).or_default();
        let row = partition
            .rows
            .entry(key.clustering_encoded)
            .or_insert_with(|| ClusteredRow { clustering: key.clustering, row: Row::default() });
        let ColumnData::Collection(collection) =
            row.row.columns.entry(liveness.id).or_insert_with(|| ColumnData::Collection(Collection::default()))
        else {
            return;
        };
        let mut sort_key = Vec::new();
        comparable::encode(&CqlType::Blob, part, false, &mut sort_key);
        collection.cells.insert(Bytes::from(sort_key), CollectionCell { key: part.clone(), cell });
    }

    fn finish(self) -> Vec<Mutation> {
        self.partitions
            .into_iter()
            .map(|((table, position), update)| Mutation { table, position, update, list_ops: Vec::new() })
            .collect()
    }
}

/// Whether `value` can key a view partition: not empty (a key of one
/// empty component is refused) and within the 64 KiB a key component may
/// hold. Values that cannot are not indexed.
fn indexable(value: &[u8]) -> bool {
    !value.is_empty() && value.len() <= usize::from(u16::MAX)
}

fn static_parts(column: &ColumnMeta, index: &IndexMeta, partition: &Partition, now_s: i64) -> Parts {
    let deletion = merge_tombstones(partition.tombstone, partition.static_row.deletion);
    let mut parts = Parts::new();
    column_parts(column, index, &partition.static_row, deletion, now_s, &mut parts);
    parts
}

#[allow(clippy::too_many_arguments)]
fn row_parts(
    column: &ColumnMeta,
    index: &IndexMeta,
    partition: &Partition,
    key: &[u8],
    clustered: &ClusteredRow,
    base_pk: &[Bytes],
    now_s: i64,
) -> Parts {
    let deletion = merge_tombstones(partition.deletion_for_row(key), clustered.row.deletion);
    let mut parts = Parts::new();
    let key_value = match column.kind {
        ColumnKind::Static | ColumnKind::Regular => {
            column_parts(column, index, &clustered.row, deletion, now_s, &mut parts);
            return parts;
        }
        ColumnKind::Clustering => clustered.clustering.get(column.position as usize),
        ColumnKind::PartitionKey => base_pk.get(column.position as usize),
    };
    let Some(value) = key_value else { return parts };
    // A key column's index: every part of the row gives the entry.
    let row = &clustered.row;
    if let Some(marker) = row.marker {
        let live = marker.expiry.is_none_or(|e| e.expires_at_s > now_s);
        let part = match deletion.filter(|d| d.shadows(marker.timestamp)) {
            Some(d) => Some(Part::Dead { timestamp: d.timestamp }),
            None if live => {
                let liveness = Liveness { timestamp: marker.timestamp, expiry: marker.expiry };
                Some(Part::Live { value: value.clone(), liveness })
            }
            None => None,
        };
        parts.extend(part.map(|p| (Bytes::from_static(&[0]), p)));
    }
    for (id, data) in &row.columns {
        each_cell(*id, data, deletion, |part, cell, deletion| {
            let state = cell_part(cell, deletion, now_s, |_| Some(value.clone()));
            parts.extend(state.map(|s| (part, s)));
        });
    }
    parts
}

/// The parts a regular or static column's value gives its index.
fn column_parts(
    column: &ColumnMeta,
    index: &IndexMeta,
    row: &Row,
    deletion: Option<Tombstone>,
    now_s: i64,
    parts: &mut Parts,
) {
    let Some(data) = row.columns.get(&column.id) else { return };
    let is_set = matches!(column.ty, CqlType::Set(_));
    each_cell(column.id, data, deletion, |part, cell, deletion| {
        let element_key = collection_element_key(&part);
        let indexed = |value: &Bytes| match (index.kind, element_key.clone()) {
            (IndexKind::Keys, Some(key)) => Some(key),
            (IndexKind::Values, Some(key)) if is_set => Some(key),
            (IndexKind::Entries, Some(key)) => Some(entry_value(&key, value)),
            _ => Some(value.clone()),
        };
        parts.extend(cell_part(cell, deletion, now_s, indexed).map(|s| (part, s)));
    });
}

/// Calls `f` with each cell of a column: its part identity, the cell, and
/// the deletion covering it.
fn each_cell(
    column_id: u32,
    data: &ColumnData,
    deletion: Option<Tombstone>,
    mut f: impl FnMut(Bytes, &Cell, Option<Tombstone>),
) {
    let id = column_id.to_be_bytes();
    match data {
        ColumnData::Atomic(cell) => f(Bytes::from([&[1u8][..], &id].concat()), cell, deletion),
        ColumnData::Collection(collection) => {
            let deletion = merge_tombstones(deletion, collection.tombstone);
            for element in collection.cells.values() {
                f(Bytes::from([&[2u8][..], &id, &element.key].concat()), &element.cell, deletion);
            }
        }
    }
}

/// The serialized element key of a collection element's part identity.
fn collection_element_key(part: &[u8]) -> Option<Bytes> {
    match part.split_first() {
        Some((2, rest)) if rest.len() >= 4 => Some(Bytes::copy_from_slice(&rest[4..])),
        _ => None,
    }
}

/// A cell's part: live with the value `indexed` makes of it, dead at the
/// timestamp of what deleted it, or `None` when it expired.
fn cell_part(
    cell: &Cell,
    deletion: Option<Tombstone>,
    now_s: i64,
    indexed: impl Fn(&Bytes) -> Option<Bytes>,
) -> Option<Part> {
    if let Some(d) = deletion.filter(|d| d.shadows(cell.timestamp)) {
        return Some(Part::Dead { timestamp: d.timestamp });
    }
    match &cell.value {
        CellValue::Dead { .. } => Some(Part::Dead { timestamp: cell.timestamp }),
        _ => {
            let value = indexed(&cell.live_value(now_s)?)?;
            Some(Part::Live { value, liveness: Liveness { timestamp: cell.timestamp, expiry: cell.expiry() } })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use shoal_schema::index::view_table;
    use shoal_schema::TableOptions;

    use super::*;

    /// `t (p int, c int, v int, PRIMARY KEY (p, c))` with an index on `v`.
    fn setup() -> (TableMeta, IndexView) {
        let column = |id, name: &str, kind, position| ColumnMeta {
            id,
            name: name.into(),
            ty: CqlType::Int,
            kind,
            position,
            order: shoal_schema::ClusteringOrder::Asc,
        };
        let index = IndexMeta {
            name: "i".into(),
            column: "v".into(),
            kind: IndexKind::Values,
            local: false,
            view_id: uuid::Uuid::from_u128(2),
        };
        let base = TableMeta {
            id: uuid::Uuid::from_u128(1),
            keyspace: "ks".into(),
            name: "t".into(),
            columns: vec![
                column(0, "p", ColumnKind::PartitionKey, 0),
                column(1, "c", ColumnKind::Clustering, 0),
                column(2, "v", ColumnKind::Regular, -1),
            ],
            options: TableOptions::default(),
            next_column_id: 3,
            indexes: vec![index.clone()],
            view_of: None,
        };
        let view = Arc::new(view_table(&base, &index));
        (base, IndexView { index, view })
    }

    fn position() -> PartitionPosition {
        let key = Bytes::from(serialize_partition_key(&[&1i32.to_be_bytes()]).expect("one component"));
        PartitionPosition { token: murmur3_token(&key), key }
    }

    /// A write of `v = value` (or its deletion) at `ts` to row `c = 0`.
    fn write(value: Option<i32>, ts: i64) -> Partition {
        let cell = match value {
            Some(v) => Cell::live(ts, Bytes::copy_from_slice(&v.to_be_bytes()), None),
            None => Cell::dead(ts, 0),
        };
        let mut row = Row::default();
        row.columns.insert(2, ColumnData::Atomic(cell));
        let mut partition = Partition::default();
        let clustering = vec![Bytes::copy_from_slice(&0i32.to_be_bytes())];
        let mut key = Vec::new();
        comparable::encode(&CqlType::Int, &clustering[0], false, &mut key);
        partition.rows.insert(Bytes::from(key), ClusteredRow { clustering, row });
        partition
    }

    /// Applies `writes` in order to a base partition and a view, and
    /// returns the indexed values whose view entries are live.
    fn live_entries(writes: &[Partition]) -> Vec<i32> {
        let (base, view) = setup();
        let mut stored = Partition::default();
        let mut views: BTreeMap<PartitionPosition, Partition> = BTreeMap::new();
        for update in writes {
            for m in compute(&base, std::slice::from_ref(&view), &position(), Some(&stored), update, 0) {
                views.entry(m.position).or_default().merge(m.update);
            }
            stored.merge(update.clone());
        }
        let mut live = Vec::new();
        for (position, partition) in views {
            let value = i32::from_be_bytes(position.key[..].try_into().expect("an int key"));
            let alive = partition.rows.values().any(|r| {
                r.row.columns.values().any(|data| match data {
                    ColumnData::Collection(c) => c.cells.values().any(|e| e.cell.live_value(0).is_some()),
                    ColumnData::Atomic(_) => false,
                })
            });
            if alive {
                live.push(value);
            }
        }
        live
    }

    #[test]
    fn an_entry_follows_its_cell() {
        assert_eq!(live_entries(&[write(Some(1), 10)]), [1]);
        assert_eq!(live_entries(&[write(Some(1), 10), write(Some(2), 20)]), [2]);
        assert_eq!(live_entries(&[write(Some(1), 10), write(None, 20)]), Vec::<i32>::new());
        // An older write changes nothing.
        assert_eq!(live_entries(&[write(Some(1), 10), write(Some(2), 5)]), [1]);
    }

    #[test]
    fn a_value_back_at_the_replacing_timestamp_is_indexed() {
        // 3@16, then 0@36, then 3@36 (3 > 0 wins the tie in the base).
        // 0, replaced at its own timestamp, stays as a stale entry, which
        // queries skip by re-checking the base row.
        let writes = [write(Some(3), 16), write(Some(0), 36), write(Some(3), 36)];
        assert_eq!(live_entries(&writes), [0, 3]);
    }

    #[test]
    fn a_value_back_after_a_deletion_is_indexed() {
        let writes = [write(Some(1), 10), write(None, 20), write(Some(1), 30)];
        assert_eq!(live_entries(&writes), [1]);
        // At the deletion's timestamp the deletion wins, in both.
        let writes = [write(Some(1), 10), write(None, 20), write(Some(1), 20)];
        assert_eq!(live_entries(&writes), Vec::<i32>::new());
    }
}
