//! View updates: what a write to a base partition changes in the tables
//! holding its views, secondary indexes ([`shoal_schema::index`]) and
//! materialized views ([`shoal_schema::view`]).
//!
//! The base replica reads the rows a write touches before applying it
//! (under the partition's lock, so no other write comes between), merges
//! the write in, and compares each row's view entries before and after.
//! An entry is live while some part of the base row that gives it is: the
//! indexed cell (or a materialized view's key column), a collection
//! element holding the value, or for an index on a key column (or a view
//! whose key holds only base key columns) any part of the row (its marker,
//! a cell, an element). The view row mirrors those parts as elements of its
//! liveness column ([`shoal_schema::index::LIVENESS_COLUMN`]), keyed by the
//! part, with the part's timestamp and expiry; a part that stops giving the
//! entry becomes a dead element: at the timestamp of the deletion that
//! ended it, or just below that of the new value that replaced it.
//!
//! Why that converges: every replica computes those timestamps from base
//! data alone, so replicas that saw writes in different orders agree. A
//! dead element kills only that part's older versions: when the part gives
//! the entry again, it does so with a version that beat the one that
//! ended it in the base, so one newer than a deletion (which wins ties),
//! or at least as new as a replacing value. Parts expire in the view when they expire in the
//! base. A stale entry (an index build racing a write) costs a base read,
//! never a wrong row: queries re-check each base row.
//!
//! A materialized view row also carries the base row's selected cells, as
//! they are in the base (timestamps and expiries included), and the base
//! row's deletion: everything live in the base row is newer than that
//! deletion, so copying it kills only cells the base no longer has. While
//! an entry stays at one key, a write copies only what it changes; an
//! entry arriving at a key (a new row, or a key column's new value) gets
//! the whole row. Cells left behind at a key the entry moved away from
//! show nowhere: a view row is live only by its liveness column.
//!
//! A view's filter ([`ViewMapping::key_matches`], `value_matches`) fits
//! the same scheme: a row outside it on base key columns gives no entry,
//! and a key column value outside it gives no entry, as a null would not,
//! so a row whose value leaves the filter loses its entry as when the
//! value moves, and one whose value enters it gains a whole row.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;
use shoal_schema::comparable;
use shoal_schema::index::{entry_key, entry_value, per_partition, EntryKey, LIVENESS_COLUMN};
use shoal_schema::token::{murmur3_token, serialize_partition_key, split_partition_key};
use shoal_schema::view::{views_of, ViewMapping};
use shoal_schema::{ColumnKind, ColumnMeta, CqlType, IndexKind, IndexMeta, Schema, TableMeta};
use shoal_storage::{
    Cell, CellValue, ClusteredRow, ClusteringRange, Collection, CollectionCell, ColumnData, Expiry, Partition,
    PartitionPosition, Row, Tombstone,
};

use crate::mutation::Mutation;
use crate::read::merge_tombstones;

/// What a view holds of its base table.
#[derive(Debug, Clone)]
pub enum ViewKind {
    /// A secondary index.
    Index(IndexMeta),
    /// A materialized view, with how base rows map to its rows.
    Materialized(ViewMapping),
}

/// One view of a base table, with the table holding it.
#[derive(Debug, Clone)]
pub struct View {
    pub kind: ViewKind,
    pub view: Arc<TableMeta>,
}

impl View {
    /// The name users know it by: the index's, or the view's.
    pub fn name(&self) -> &str {
        match &self.kind {
            ViewKind::Index(index) => &index.name,
            ViewKind::Materialized(_) => &self.view.name,
        }
    }
}

/// The views of table `base` in `schema`: its indexes, then its
/// materialized views.
pub fn base_views(schema: &Schema, base: &TableMeta) -> Vec<View> {
    let Some(keyspace) = schema.keyspace(&base.keyspace) else { return Vec::new() };
    let indexes = base.indexes.iter().filter_map(|index| {
        let view = keyspace.tables.get(&index.view_name())?;
        Some(View { kind: ViewKind::Index(index.clone()), view: Arc::clone(view) })
    });
    let materialized = views_of(keyspace, &base.name).filter_map(|view| {
        let mapping = ViewMapping::new(base, view)?;
        Some(View { kind: ViewKind::Materialized(mapping), view: Arc::clone(view) })
    });
    indexes.chain(materialized).collect()
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
    /// Expired (its expiry has passed): gives no entry, but as a version
    /// of the part it still replaces the older ones, in the base as in
    /// the view, so its copy goes to the view to end theirs.
    Expired { value: Bytes, liveness: Liveness },
    /// Deleted or replaced by a deletion at `timestamp`.
    Dead { timestamp: i64 },
}

/// The parts of one row (or static row) that concern an index, by
/// identity: the marker `[0]`, a cell `[1, column id]`, a collection
/// element `[2, column id, element key]`.
type Parts = BTreeMap<Bytes, Part>;

/// The view mutations that keep `base`'s views in step when `update` is
/// applied to the partition at `position`, whose rows in
/// [`affected_ranges`] were `before`.
pub fn compute(
    base: &TableMeta,
    views: &[View],
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
    let rows = RowChange { before, update, after: &after, base_pk: &base_pk, now_s };
    let mut out = ViewWrites { partitions: BTreeMap::new() };
    for view in views {
        match &view.kind {
            ViewKind::Index(index) => out.index(base, view, index, position.token, &rows),
            ViewKind::Materialized(mapping) => out.materialized(base, view, mapping, &rows),
        }
    }
    out.finish()
}

/// The entries every row of `partition` gives `view`, as writes of a view
/// that has none yet (a view being built).
pub fn build(
    base: &TableMeta,
    view: &View,
    position: &PartitionPosition,
    partition: &Partition,
    now_s: i64,
) -> Vec<Mutation> {
    compute(base, std::slice::from_ref(view), position, None, partition, now_s)
}

/// A base partition's rows before and after a write.
struct RowChange<'a> {
    before: &'a Partition,
    update: &'a Partition,
    after: &'a Partition,
    base_pk: &'a [Bytes],
    now_s: i64,
}

/// View writes gathered by view partition.
struct ViewWrites {
    partitions: BTreeMap<(uuid::Uuid, PartitionPosition), Partition>,
}

impl ViewWrites {
    /// The writes keeping index `index` (held in `view`) in step.
    fn index(&mut self, base: &TableMeta, view: &View, index: &IndexMeta, token: i64, rows: &RowChange) {
        // The DDL checked the column exists.
        let Some(column) = base.column(&index.column) else { return };
        // A global index keys the empty value too (its view partition is
        // the empty key), so `WHERE v = ''` finds it, as in ScyllaDB; a
        // local index clusters by the value, where some types cannot place
        // an empty one.
        let keyable = |value: &Bytes| match index.local {
            true => indexable(value),
            false => value.len() <= usize::from(u16::MAX),
        };
        let key_of = |value: &Bytes, base_ck: &[Bytes]| {
            keyable(value).then(|| entry_key(&view.view, index.local, value, rows.base_pk, token, base_ck))
        };
        if per_partition(column) {
            let old = static_parts(column, index.kind, rows.before, rows.now_s);
            let new = static_parts(column, index.kind, rows.after, rows.now_s);
            self.diff(view, |value| key_of(value, &[]), &old, &new, false);
            return;
        }
        for (key, row) in &rows.after.rows {
            let old = rows.before.rows.get(key).map(|r| row_parts(column, index.kind, rows.before, key, r, rows));
            let new = row_parts(column, index.kind, rows.after, key, row, rows);
            self.diff(view, |value| key_of(value, &row.clustering), &old.unwrap_or_default(), &new, false);
        }
    }

    /// The writes keeping materialized view `view` in step: its liveness
    /// as an index's, plus the selected cells.
    fn materialized(&mut self, base: &TableMeta, view: &View, mapping: &ViewMapping, rows: &RowChange) {
        // Without a regular column in its key, a view row lives by every
        // part of the base row, as an index on a key column does.
        let column = match &mapping.key_column {
            Some(name) => base.column(name),
            None => base.partition_key().next(),
        };
        let Some(column) = column else { return };
        let no_row = Row::default();
        for (key, row) in &rows.after.rows {
            // A row outside the filter on base key columns stays outside.
            if !mapping.key_matches(rows.base_pk, &row.clustering) {
                continue;
            }
            // A key column value outside the filter gives no row, as a null.
            let key_of = |value: &Bytes| {
                let keyable = mapping.key_column.is_none()
                    || (mapping.can_key(&view.view, value) && mapping.value_matches(value));
                keyable.then(|| mapping.entry_key(&view.view, value, rows.base_pk, &row.clustering))
            };
            let old =
                rows.before.rows.get(key).map(|r| row_parts(column, IndexKind::Values, rows.before, key, r, rows));
            let old = old.unwrap_or_default();
            let new = row_parts(column, IndexKind::Values, rows.after, key, row, rows);
            self.diff(view, key_of, &old, &new, true);
            let Some(value) = live_value(&new) else { continue };
            let Some(entry) = key_of(value) else { continue };
            let (source, deletion) = if live_value(&old) == Some(value) {
                // Still at this key: only what the write changes.
                let written = rows.update.rows.get(key).map(|r| &r.row);
                let deletion = rows.update.deletion_for_row(key);
                (written.unwrap_or(&no_row), merge_tombstones(deletion, written.and_then(|r| r.deletion)))
            } else {
                (&row.row, merge_tombstones(rows.after.deletion_for_row(key), row.row.deletion))
            };
            if deletion.is_none() && !mapping.payload.iter().any(|(id, _)| source.columns.contains_key(id)) {
                continue;
            }
            let target = &mut self.row(view, entry).row;
            for (base_id, view_id) in &mapping.payload {
                if let Some(data) = source.columns.get(base_id) {
                    target.columns.insert(*view_id, data.clone());
                }
            }
            target.deletion = merge_tombstones(target.deletion, deletion);
        }
    }

    /// The view writes that take a row's entries from `old` parts to
    /// `new`; `key_of` places the entry of a value (`None`: not kept).
    /// `exact`: a part's values are the base cell's own (a materialized
    /// view's key column), so a value replaced at its own timestamp can be
    /// told apart (see [`ended_at`]); an index leaves such an entry stale.
    fn diff(
        &mut self,
        view: &View,
        key_of: impl Fn(&Bytes) -> Option<EntryKey>,
        old: &Parts,
        new: &Parts,
        exact: bool,
    ) {
        for (id, part) in new {
            let (value, liveness) = match part {
                Part::Live { value, liveness } => (value, liveness),
                // An expired version matters only where it replaces one.
                Part::Expired { value, liveness } if old.contains_key(id) => (value, liveness),
                Part::Expired { .. } | Part::Dead { .. } => continue,
            };
            if old.get(id) == Some(part) {
                continue;
            }
            let cell = Cell::live(liveness.timestamp, Bytes::new(), liveness.expiry);
            if let Some(key) = key_of(value) {
                self.put(view, key, id, cell);
            }
        }
        for (id, part) in old {
            let Part::Live { value, liveness: was } = part else { continue };
            let ended = match new.get(id) {
                Some(Part::Live { value: now, liveness } | Part::Expired { value: now, liveness }) if now != value => {
                    ended_at(value, was, now, liveness, exact)
                }
                Some(Part::Dead { timestamp }) => *timestamp,
                // The same value's newer version (live or expired), copied
                // above, replaces this one in the view as in the base.
                _ => continue,
            };
            if let Some(key) = key_of(value) {
                self.put(view, key, id, Cell::dead(ended, shoal_runtime::clock::now_s()));
            }
        }
    }

    /// Sets the liveness element of `part` in the view row at `key`.
    fn put(&mut self, view: &View, key: EntryKey, part: &Bytes, cell: Cell) {
        // The view's liveness column, by construction.
        let Some(liveness) = view.view.column(LIVENESS_COLUMN).map(|c| c.id) else { return };
        let row = &mut self.row(view, key).row;
        let ColumnData::Collection(collection) =
            row.columns.entry(liveness).or_insert_with(|| ColumnData::Collection(Collection::default()))
        else {
            return;
        };
        let mut sort_key = Vec::new();
        comparable::encode(&CqlType::Blob, part, false, &mut sort_key);
        collection.cells.insert(Bytes::from(sort_key), CollectionCell { key: part.clone(), cell });
    }

    /// The view row at `key`, as written so far.
    fn row(&mut self, view: &View, key: EntryKey) -> &mut ClusteredRow {
        let parts: Vec<&[u8]> = key.partition.iter().map(|p| &p[..]).collect();
        // Components are base key components or keyable values, each at
        // most 64 KiB (`indexable`, `index`), so the key serializes.
        let partition_key = Bytes::from(serialize_partition_key(&parts).unwrap_or_default());
        let position = PartitionPosition { token: murmur3_token(&partition_key), key: partition_key };
        let partition = self.partitions.entry((view.view.id, position)).or_default();
        partition
            .rows
            .entry(key.clustering_encoded)
            .or_insert_with(|| ClusteredRow { clustering: key.clustering, row: Row::default() })
    }

    fn finish(self) -> Vec<Mutation> {
        self.partitions
            .into_iter()
            .map(|((table, position), update)| Mutation { table, position, update, list_ops: Vec::new() })
            .collect()
    }
}

/// The timestamp at which a part's entry for `old` (live as `was`) ends,
/// replaced by `new` (live as `now`): just below the new version, so a
/// version of the part giving `old` again at that timestamp (one that wins
/// in the base on its value) lives. Where the values are the base cell's
/// (`exact`) and `old` at that timestamp would lose to `new` in the base,
/// at the new version's timestamp: `old` cannot come back at it, and the
/// entry must not outlive the replacement. Otherwise an entry replaced at
/// its own timestamp stays, stale, which index queries skip.
fn ended_at(old: &Bytes, was: &Liveness, new: &Bytes, now: &Liveness, exact: bool) -> i64 {
    let old_again = Cell::live(now.timestamp, old.clone(), was.expiry);
    let replacing = Cell::live(now.timestamp, new.clone(), now.expiry);
    match exact && Cell::reconcile(old_again, replacing.clone()) == replacing {
        true => now.timestamp,
        false => now.timestamp - 1,
    }
}

/// The value the live parts of a row give its entry (they all give the
/// same), if any is live.
fn live_value(parts: &Parts) -> Option<&Bytes> {
    parts.values().find_map(|part| match part {
        Part::Live { value, .. } => Some(value),
        Part::Expired { .. } | Part::Dead { .. } => None,
    })
}

/// Whether `value` can key a view partition: not empty (a key of one
/// empty component is refused) and within the 64 KiB a key component may
/// hold. Values that cannot are not indexed.
fn indexable(value: &[u8]) -> bool {
    !value.is_empty() && value.len() <= usize::from(u16::MAX)
}

fn static_parts(column: &ColumnMeta, kind: IndexKind, partition: &Partition, now_s: i64) -> Parts {
    let deletion = merge_tombstones(partition.tombstone, partition.static_row.deletion);
    let mut parts = Parts::new();
    column_parts(column, kind, &partition.static_row, deletion, now_s, &mut parts);
    parts
}

/// The parts of row `clustered` (at `key` in `partition`) that give the
/// entry of a view of `column` (`kind` of its values).
fn row_parts(
    column: &ColumnMeta,
    kind: IndexKind,
    partition: &Partition,
    key: &[u8],
    clustered: &ClusteredRow,
    change: &RowChange,
) -> Parts {
    let (base_pk, now_s) = (change.base_pk, change.now_s);
    let deletion = merge_tombstones(partition.deletion_for_row(key), clustered.row.deletion);
    let mut parts = Parts::new();
    let key_value = match column.kind {
        ColumnKind::Static | ColumnKind::Regular => {
            column_parts(column, kind, &clustered.row, deletion, now_s, &mut parts);
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
        let liveness = Liveness { timestamp: marker.timestamp, expiry: marker.expiry };
        let part = match deletion.filter(|d| d.shadows(marker.timestamp)) {
            Some(d) => Part::Dead { timestamp: d.timestamp },
            None if live => Part::Live { value: value.clone(), liveness },
            None => Part::Expired { value: value.clone(), liveness },
        };
        parts.insert(Bytes::from_static(&[0]), part);
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
    kind: IndexKind,
    row: &Row,
    deletion: Option<Tombstone>,
    now_s: i64,
    parts: &mut Parts,
) {
    let Some(data) = row.columns.get(&column.id) else { return };
    let is_set = matches!(column.ty, CqlType::Set(_));
    each_cell(column.id, data, deletion, |part, cell, deletion| {
        let element_key = collection_element_key(&part);
        let indexed = |value: &Bytes| match (kind, element_key.clone()) {
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

/// A cell's part: live (or expired) with the value `indexed` makes of
/// it, or dead at the timestamp of what deleted it.
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
        CellValue::Live { value, expiry } => {
            let liveness = Liveness { timestamp: cell.timestamp, expiry: *expiry };
            let value = indexed(value)?;
            match cell.live_value(now_s) {
                Some(_) => Some(Part::Live { value, liveness }),
                None => Some(Part::Expired { value, liveness }),
            }
        }
        CellValue::Counter { .. } => {
            let value = indexed(&cell.live_value(now_s)?)?;
            Some(Part::Live { value, liveness: Liveness { timestamp: cell.timestamp, expiry: None } })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use shoal_schema::index::view_table;
    use shoal_schema::view::{Comparison, ViewRestriction};
    use shoal_schema::TableOptions;

    use super::*;

    /// `t (p int, c int, v int, PRIMARY KEY (p, c))` with an index on `v`.
    fn setup() -> (TableMeta, View) {
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
            materialized: None,
            dropped_columns: Default::default(),
        };
        let view = Arc::new(view_table(&base, &index));
        (base, View { kind: ViewKind::Index(index), view })
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

    /// `t (p int, c int, v int, w int, PRIMARY KEY (p, c))` and the view
    /// `SELECT * ... PRIMARY KEY (v, p, c)`, or with `by_key_only`
    /// `SELECT p, c, w ... PRIMARY KEY (c, p)`; `filtered` adds `WHERE c =
    /// 1` (and `v >= 1` where `v` is in the key).
    fn materialized_setup(by_key_only: bool, filtered: bool) -> (TableMeta, View) {
        let column = |id, name: &str, kind, position| ColumnMeta {
            id,
            name: name.into(),
            ty: CqlType::Int,
            kind,
            position,
            order: shoal_schema::ClusteringOrder::Asc,
        };
        let base = TableMeta {
            id: uuid::Uuid::from_u128(1),
            keyspace: "ks".into(),
            name: "t".into(),
            columns: vec![
                column(0, "p", ColumnKind::PartitionKey, 0),
                column(1, "c", ColumnKind::Clustering, 0),
                column(2, "v", ColumnKind::Regular, -1),
                column(3, "w", ColumnKind::Regular, -1),
                ColumnMeta { ty: CqlType::Set(Box::new(CqlType::Int)), ..column(5, "st", ColumnKind::Regular, -1) },
            ],
            options: TableOptions::default(),
            next_column_id: 6,
            indexes: Vec::new(),
            view_of: None,
            materialized: None,
            dropped_columns: Default::default(),
        };
        let mut liveness = column(4, LIVENESS_COLUMN, ColumnKind::Regular, -1);
        liveness.ty = CqlType::Set(Box::new(CqlType::Blob));
        let columns = match by_key_only {
            false => vec![
                column(0, "v", ColumnKind::PartitionKey, 0),
                column(1, "p", ColumnKind::Clustering, 0),
                column(2, "c", ColumnKind::Clustering, 1),
                column(3, "w", ColumnKind::Regular, -1),
                liveness,
            ],
            true => vec![
                column(0, "c", ColumnKind::PartitionKey, 0),
                column(1, "p", ColumnKind::Clustering, 0),
                column(3, "w", ColumnKind::Regular, -1),
                liveness,
            ],
        };
        let view = TableMeta {
            id: uuid::Uuid::from_u128(2),
            name: "mv".into(),
            columns,
            next_column_id: 5,
            view_of: Some("t".into()),
            materialized: Some(shoal_schema::view::MaterializedView {
                base_id: base.id,
                include_all_columns: true,
                where_clause: String::new(),
                filter: match filtered {
                    false => Vec::new(),
                    true => view_filter(by_key_only),
                },
            }),
            ..base.clone()
        };
        let mapping = ViewMapping::new(&base, &view).expect("the view's columns are the base's");
        (base, View { kind: ViewKind::Materialized(mapping), view: Arc::new(view) })
    }

    fn view_filter(by_key_only: bool) -> Vec<ViewRestriction> {
        let restriction = |column: &str, op, value: i32| ViewRestriction {
            columns: vec![column.into()],
            op,
            values: vec![vec![int(value)]],
        };
        let mut filter = vec![restriction("c", Comparison::Eq, 1)];
        if !by_key_only {
            filter.push(restriction("v", Comparison::Ge, 1));
        }
        filter
    }

    /// When the views are read: after every write's expiry.
    const FINAL_S: i64 = 100;

    /// A seeded xorshift: the randomized cases are the same on every run.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    fn int(v: i32) -> Bytes {
        Bytes::copy_from_slice(&v.to_be_bytes())
    }

    /// A random write to row `c` of partition `p = 1`: an INSERT (marker
    /// and both cells), an UPDATE of one cell, a cell's deletion or the
    /// row's, at a timestamp from a small range (so ties happen).
    fn random_write(rng: &mut Rng, now_s: i64) -> Partition {
        let ts = 1 + rng.below(12) as i64;
        let c = rng.below(2) as i32;
        let deletion = Tombstone { timestamp: ts, deletion_time_s: 0 };
        match rng.below(10) {
            // The partition deleted, or the range of rows from c on.
            0 => return Partition { tombstone: Some(deletion), ..Partition::default() },
            1 => {
                let mut from = Vec::new();
                comparable::encode(&CqlType::Int, &int(c), false, &mut from);
                let range = ClusteringRange { start: Bound::Included(Bytes::from(from)), end: Bound::Unbounded };
                let range_tombstones = vec![shoal_storage::RangeTombstone { range, tombstone: deletion }];
                return Partition { range_tombstones, ..Partition::default() };
            }
            _ => {}
        }
        // A third of the writes expire: a second after they are applied, or
        // already as they are (a write held up past its TTL's second).
        let expires_at_s = now_s + rng.below(2) as i64;
        let expiry = (rng.below(3) == 0).then_some(Expiry { ttl_s: 1, expires_at_s });
        let value = |rng: &mut Rng| Cell::live(ts, int(rng.below(3) as i32), expiry);
        let mut row = Row::default();
        match rng.below(7) {
            5 => {
                // A set element added, removed, or the set replaced.
                let element = int(rng.below(3) as i32);
                let mut key = Vec::new();
                comparable::encode(&CqlType::Int, &element, false, &mut key);
                let mut set = Collection::default();
                let cell = match rng.below(3) {
                    0 => Cell::dead(ts, 0),
                    1 => {
                        set.tombstone = Some(Tombstone { timestamp: ts - 1, deletion_time_s: 0 });
                        Cell::live(ts, Bytes::new(), expiry)
                    }
                    _ => Cell::live(ts, Bytes::new(), expiry),
                };
                set.cells.insert(Bytes::from(key), CollectionCell { key: element, cell });
                row.columns.insert(5, ColumnData::Collection(set));
            }
            6 => {
                row.columns.insert(
                    5,
                    ColumnData::Collection(Collection {
                        tombstone: Some(Tombstone { timestamp: ts, deletion_time_s: 0 }),
                        cells: BTreeMap::new(),
                    }),
                );
            }
            0 => {
                row.marker = Some(shoal_storage::RowMarker { timestamp: ts, expiry });
                row.columns.insert(2, ColumnData::Atomic(value(rng)));
                row.columns.insert(3, ColumnData::Atomic(value(rng)));
            }
            1 => {
                row.columns.insert(2, ColumnData::Atomic(value(rng)));
            }
            2 => {
                row.columns.insert(3, ColumnData::Atomic(value(rng)));
            }
            3 => {
                row.columns.insert(2, ColumnData::Atomic(Cell::dead(ts, 0)));
            }
            _ => row.deletion = Some(Tombstone { timestamp: ts, deletion_time_s: 0 }),
        }
        let clustering = vec![int(c)];
        let mut key = Vec::new();
        comparable::encode(&CqlType::Int, &clustering[0], false, &mut key);
        let mut partition = Partition::default();
        partition.rows.insert(Bytes::from(key), ClusteredRow { clustering, row });
        partition
    }

    /// The live atomic value of column `id` in `row` under `deletion`.
    fn live_cell(row: &Row, id: u32, deletion: Option<Tombstone>) -> Option<Bytes> {
        let deletion = merge_tombstones(deletion, row.deletion);
        match row.columns.get(&id)? {
            ColumnData::Atomic(cell) if deletion.is_none_or(|d| !d.shadows(cell.timestamp)) => cell.live_value(FINAL_S),
            _ => None,
        }
    }

    /// What the view must hold for `base`: `(v, c, w)` of each row with a
    /// live `v` (Cassandra's rule: the view row lives while its key does),
    /// or with `by_key_only` `(c, p, w)` of each live row.
    fn expected(base: &Partition, by_key_only: bool, filtered: bool) -> Vec<(Bytes, Bytes, Option<Bytes>)> {
        let mut rows: Vec<_> = base
            .rows
            .iter()
            .filter(|(_, r)| !filtered || r.clustering[0] == int(1))
            .filter_map(|(key, r)| {
                let deletion = merge_tombstones(base.deletion_for_row(key), r.row.deletion);
                let w = live_cell(&r.row, 3, deletion);
                if by_key_only {
                    let marker = r.row.marker.filter(|m| deletion.is_none_or(|d| !d.shadows(m.timestamp)));
                    let marker_live = marker.is_some_and(|m| m.expiry.is_none_or(|e| e.expires_at_s > FINAL_S));
                    let set_live = match r.row.columns.get(&5) {
                        Some(ColumnData::Collection(set)) => {
                            let deletion = merge_tombstones(deletion, set.tombstone);
                            set.cells.values().any(|e| {
                                deletion.is_none_or(|d| !d.shadows(e.cell.timestamp))
                                    && e.cell.live_value(FINAL_S).is_some()
                            })
                        }
                        _ => false,
                    };
                    let live = marker_live || live_cell(&r.row, 2, deletion).is_some() || w.is_some() || set_live;
                    return live.then(|| (r.clustering[0].clone(), int(1), w));
                }
                let v = live_cell(&r.row, 2, deletion).filter(|v| !filtered || v[..] >= int(1)[..])?;
                Some((v, r.clustering[0].clone(), w))
            })
            .collect();
        rows.sort();
        rows
    }

    /// The live rows of the view partitions in `views`, as read: `(view
    /// partition key, last clustering value, w)`.
    fn view_rows(views: &BTreeMap<PartitionPosition, Partition>) -> Vec<(Bytes, Bytes, Option<Bytes>)> {
        let mut rows = Vec::new();
        for (position, partition) in views {
            for (key, r) in &partition.rows {
                let deletion = merge_tombstones(partition.deletion_for_row(key), r.row.deletion);
                let live = match r.row.columns.get(&4) {
                    Some(ColumnData::Collection(c)) => c.cells.values().any(|e| {
                        deletion.is_none_or(|d| !d.shadows(e.cell.timestamp)) && e.cell.live_value(FINAL_S).is_some()
                    }),
                    _ => false,
                };
                if live {
                    let last = r.clustering.last().cloned().unwrap_or_default();
                    rows.push((position.key.clone(), last, live_cell(&r.row, 3, deletion)));
                }
            }
        }
        rows.sort();
        rows
    }

    #[test]
    fn a_materialized_view_matches_its_base_whatever_the_order_of_writes() {
        for by_key_only in [false, true] {
            materialized_case(by_key_only, false);
        }
    }

    #[test]
    fn a_filtered_view_holds_the_rows_its_filter_passes_whatever_the_order_of_writes() {
        for by_key_only in [false, true] {
            materialized_case(by_key_only, true);
        }
    }

    fn materialized_case(by_key_only: bool, filtered: bool) {
        let (base, view) = materialized_setup(by_key_only, filtered);
        for seed in 1..=400u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            // Each write applied at a time of its own, some after others expired.
            let mut now_s = 0;
            let writes: Vec<(i64, Partition)> = (0..1 + rng.below(8))
                .map(|_| {
                    now_s += rng.below(2) as i64;
                    (now_s, random_write(&mut rng, now_s))
                })
                .collect();
            let mut stored = Partition::default();
            let mut views: BTreeMap<PartitionPosition, Partition> = BTreeMap::new();
            for (now_s, update) in &writes {
                for m in compute(&base, std::slice::from_ref(&view), &position(), Some(&stored), update, *now_s) {
                    views.entry(m.position).or_default().merge(m.update);
                }
                stored.merge(update.clone());
            }
            assert_eq!(view_rows(&views), expected(&stored, by_key_only, filtered), "seed {seed}: writes {writes:#?}");
        }
    }
}
