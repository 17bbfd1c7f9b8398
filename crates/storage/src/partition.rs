//! Partitions, rows and cells, and how two versions of them merge.
//!
//! Merging is Cassandra's reconciliation: the higher write timestamp wins; at
//! equal timestamps a deletion beats a live value (between two deletions the
//! later deletion time wins), and between two live values ScyllaDB's order
//! (Cassandra 4+ agrees up to the last two steps): an expiring value beats a
//! non-expiring one, then the later expiry wins, then the shorter TTL (the
//! later write of the two), then the greater value bytes. Row markers
//! follow the same rule. Every field takes part, so the order is total:
//! every replica and every merge order reaches the same result (merge is
//! commutative and associative). Shadowed data is kept until read or
//! compaction; reads apply tombstones and expiry with the reader's clock.
//!
//! Counter cells are the exception: each holds shards, one per replica
//! that led increments to it, and two versions merge shard by shard
//! ([`crate::counter`]), never by choosing one cell. A counter cell
//! tombstone beats every counter cell whatever the timestamps, as in
//! Cassandra, so the merge stays order-independent. Row, range and
//! partition tombstones shadow a merged counter cell by its (latest)
//! timestamp: a deleted counter therefore must not be reused — an
//! increment after the deletion can bring back shards older than it.

use std::cmp::Ordering;
use std::collections::{btree_map, BTreeMap};
use std::ops::Bound;

use bytes::Bytes;

use crate::counter::{self, CounterShard};

/// Where a partition sits in the ring: by token, then by key bytes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PartitionPosition {
    pub token: i64,
    pub key: Bytes,
}

/// A deletion at `timestamp` (microseconds, the writer's clock), made at
/// `deletion_time_s` (seconds, the node's clock; drives gc_grace purging).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tombstone {
    pub timestamp: i64,
    pub deletion_time_s: i64,
}

impl Tombstone {
    /// Whether data written at `timestamp` is deleted by this tombstone.
    pub fn shadows(&self, timestamp: i64) -> bool {
        timestamp <= self.timestamp
    }

    fn merge(a: Option<Tombstone>, b: Option<Tombstone>) -> Option<Tombstone> {
        match (a, b) {
            (Some(a), Some(b)) => {
                Some(if (b.timestamp, b.deletion_time_s) > (a.timestamp, a.deletion_time_s) { b } else { a })
            }
            (a, b) => a.or(b),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expiry {
    pub ttl_s: i32,
    pub expires_at_s: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CellValue {
    Live {
        value: Bytes,
        expiry: Option<Expiry>,
    },
    Dead {
        deletion_time_s: i64,
    },
    /// A counter: its shards, sorted by id ([`crate::counter`]).
    Counter {
        shards: Box<[CounterShard]>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    pub timestamp: i64,
    pub value: CellValue,
}

impl Cell {
    pub fn live(timestamp: i64, value: Bytes, expiry: Option<Expiry>) -> Cell {
        Cell { timestamp, value: CellValue::Live { value, expiry } }
    }

    pub fn dead(timestamp: i64, deletion_time_s: i64) -> Cell {
        Cell { timestamp, value: CellValue::Dead { deletion_time_s } }
    }

    /// A counter update of `delta` that no replica has led yet.
    pub fn counter_delta(timestamp: i64, delta: i64) -> Cell {
        Cell::counter(timestamp, Box::new([CounterShard::delta(delta)]))
    }

    /// A counter cell of `shards`, sorted by id.
    pub fn counter(timestamp: i64, shards: Box<[CounterShard]>) -> Cell {
        assert!(counter::well_formed(&shards), "a counter's shards are sorted by id, each id once");
        Cell { timestamp, value: CellValue::Counter { shards } }
    }

    /// The value, if the cell is live at `now_s`; a counter's is its sum as
    /// a bigint.
    pub fn live_value(&self, now_s: i64) -> Option<Bytes> {
        match &self.value {
            CellValue::Live { value, expiry } if expiry.is_none_or(|e| e.expires_at_s > now_s) => Some(value.clone()),
            CellValue::Counter { shards } => Some(Bytes::copy_from_slice(&counter::total(shards).to_be_bytes())),
            _ => None,
        }
    }

    pub fn expiry(&self) -> Option<Expiry> {
        match &self.value {
            CellValue::Live { expiry, .. } => *expiry,
            CellValue::Dead { .. } | CellValue::Counter { .. } => None,
        }
    }

    /// Merges two versions of a cell (see the module doc).
    pub fn reconcile(a: Cell, b: Cell) -> Cell {
        match (&a.value, &b.value) {
            (CellValue::Counter { shards: sa }, CellValue::Counter { shards: sb }) => {
                Cell::counter(a.timestamp.max(b.timestamp), counter::merge(sa, sb))
            }
            (CellValue::Dead { .. }, CellValue::Counter { .. }) => a,
            (CellValue::Counter { .. }, CellValue::Dead { .. }) => b,
            _ if Cell::beats(&b, &a) => b,
            _ => a,
        }
    }

    fn beats(b: &Cell, a: &Cell) -> bool {
        match b.timestamp.cmp(&a.timestamp) {
            Ordering::Greater => return true,
            Ordering::Less => return false,
            Ordering::Equal => {}
        }
        match (&a.value, &b.value) {
            (CellValue::Live { .. } | CellValue::Counter { .. }, CellValue::Dead { .. }) => true,
            (CellValue::Dead { .. }, CellValue::Live { .. } | CellValue::Counter { .. }) => false,
            // Only after a column changed between counter and non-counter,
            // which the schema layer forbids; any fixed order will do.
            (CellValue::Counter { .. }, CellValue::Live { .. }) => true,
            (CellValue::Live { .. }, CellValue::Counter { .. }) => false,
            // Never asked: `reconcile` merges two counter cells.
            (CellValue::Counter { .. }, CellValue::Counter { .. }) => false,
            (CellValue::Dead { deletion_time_s: da }, CellValue::Dead { deletion_time_s: db }) => db > da,
            (CellValue::Live { value: va, expiry: ea }, CellValue::Live { value: vb, expiry: eb }) => {
                (expiry_rank(*eb), vb) > (expiry_rank(*ea), va)
            }
        }
    }
}

/// One element of a non-frozen collection. `sort_key` orders elements (an
/// order-preserving encoding of the map key / set element, or a time-based
/// key for lists); `key` is the element's serialized key as clients see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectionCell {
    pub key: Bytes,
    pub cell: Cell,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Collection {
    /// Deletes every element written at or before it (`SET c = ...` writes
    /// one just below its own timestamp, so the new elements survive).
    pub tombstone: Option<Tombstone>,
    pub cells: BTreeMap<Bytes, CollectionCell>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnData {
    Atomic(Cell),
    Collection(Collection),
}

impl ColumnData {
    fn merge(a: ColumnData, b: ColumnData) -> ColumnData {
        match (a, b) {
            (ColumnData::Atomic(a), ColumnData::Atomic(b)) => ColumnData::Atomic(Cell::reconcile(a, b)),
            (ColumnData::Collection(mut a), ColumnData::Collection(b)) => {
                a.tombstone = Tombstone::merge(a.tombstone, b.tombstone);
                for (sort_key, incoming) in b.cells {
                    let merged = match a.cells.remove(&sort_key) {
                        Some(current) => {
                            CollectionCell { key: incoming.key, cell: Cell::reconcile(current.cell, incoming.cell) }
                        }
                        None => incoming,
                    };
                    a.cells.insert(sort_key, merged);
                }
                ColumnData::Collection(a)
            }
            // Only after a column was dropped and re-added with another kind
            // of type, which the schema layer forbids; keep the newer shape.
            (_, b) => b,
        }
    }
}

/// The liveness of a row written by INSERT: the row exists even when all its
/// regular columns are null.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowMarker {
    pub timestamp: i64,
    pub expiry: Option<Expiry>,
}

impl RowMarker {
    /// Whether `b` wins over `a`: the later timestamp, then, at equal
    /// timestamps, the expiry as for live cells, so the merge does not
    /// depend on arrival order.
    fn beats(b: &RowMarker, a: &RowMarker) -> bool {
        (b.timestamp, expiry_rank(b.expiry)) > (a.timestamp, expiry_rank(a.expiry))
    }
}

/// How an expiry ranks between two live values of one timestamp, greater
/// winning (ScyllaDB's order): expiring beats not expiring, then the later
/// expiry, then the shorter TTL, i.e. the later write.
fn expiry_rank(expiry: Option<Expiry>) -> (bool, i64, std::cmp::Reverse<i32>) {
    match expiry {
        Some(e) => (true, e.expires_at_s, std::cmp::Reverse(e.ttl_s)),
        None => (false, 0, std::cmp::Reverse(0)),
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Row {
    pub marker: Option<RowMarker>,
    pub deletion: Option<Tombstone>,
    /// By column id.
    pub columns: BTreeMap<u32, ColumnData>,
}

impl Row {
    /// Moves every timestamp of the row by `delta` µs (see
    /// [`Partition::shift_timestamps`]).
    fn shift_timestamps(&mut self, delta: i64) {
        if let Some(marker) = &mut self.marker {
            marker.timestamp += delta;
        }
        if let Some(deletion) = &mut self.deletion {
            deletion.timestamp += delta;
        }
        for data in self.columns.values_mut() {
            match data {
                ColumnData::Atomic(cell) => cell.timestamp += delta,
                ColumnData::Collection(collection) => {
                    if let Some(tombstone) = &mut collection.tombstone {
                        tombstone.timestamp += delta;
                    }
                    collection.cells.values_mut().for_each(|c| c.cell.timestamp += delta);
                }
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.marker.is_none() && self.deletion.is_none() && self.columns.is_empty()
    }

    pub fn merge(&mut self, other: Row) {
        self.marker = match (self.marker, other.marker) {
            (Some(a), Some(b)) => Some(if RowMarker::beats(&b, &a) { b } else { a }),
            (a, b) => a.or(b),
        };
        self.deletion = Tombstone::merge(self.deletion, other.deletion);
        for (id, incoming) in other.columns {
            match self.columns.entry(id) {
                // Merged in its place: a remove and an insert walked the
                // tree twice and could free and reallocate its one leaf.
                btree_map::Entry::Occupied(mut slot) => {
                    // An empty collection allocates nothing: a placeholder.
                    let current = std::mem::replace(slot.get_mut(), ColumnData::Collection(Collection::default()));
                    *slot.get_mut() = ColumnData::merge(current, incoming);
                }
                btree_map::Entry::Vacant(slot) => {
                    slot.insert(incoming);
                }
            }
        }
    }
}

/// A clustered row with its clustering key as clients see it (one
/// serialized value per clustering column).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusteredRow {
    pub clustering: Vec<Bytes>,
    pub row: Row,
}

/// A range of clustering keys, as bounds over their order-preserving
/// encodings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusteringRange {
    pub start: Bound<Bytes>,
    pub end: Bound<Bytes>,
}

impl ClusteringRange {
    pub fn all() -> ClusteringRange {
        ClusteringRange { start: Bound::Unbounded, end: Bound::Unbounded }
    }

    /// Whether `ranges` is the whole partition (`[all()]`).
    pub fn is_whole(ranges: &[ClusteringRange]) -> bool {
        matches!(ranges, [ClusteringRange { start: Bound::Unbounded, end: Bound::Unbounded }])
    }

    pub fn contains(&self, key: &[u8]) -> bool {
        let after_start = match &self.start {
            Bound::Included(s) => key >= &s[..],
            Bound::Excluded(s) => key > &s[..],
            Bound::Unbounded => true,
        };
        let before_end = match &self.end {
            Bound::Included(e) => key <= &e[..],
            Bound::Excluded(e) => key < &e[..],
            Bound::Unbounded => true,
        };
        after_start && before_end
    }

    fn as_bounds(&self) -> (Bound<&Bytes>, Bound<&Bytes>) {
        (self.start.as_ref(), self.end.as_ref())
    }

    /// Whether no key can fall in the range.
    pub fn is_empty(&self) -> bool {
        match (&self.start, &self.end) {
            (Bound::Included(s), Bound::Included(e)) => s > e,
            (Bound::Included(s) | Bound::Excluded(s), Bound::Excluded(e))
            | (Bound::Excluded(s), Bound::Included(e)) => s >= e,
            _ => false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeTombstone {
    pub range: ClusteringRange,
    pub tombstone: Tombstone,
}

/// A partition's data, or an update to it: the same shape serves both.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Partition {
    pub tombstone: Option<Tombstone>,
    pub static_row: Row,
    /// By the order-preserving encoding of the clustering key.
    pub rows: BTreeMap<Bytes, ClusteredRow>,
    pub range_tombstones: Vec<RangeTombstone>,
}

/// A write: the update for one partition of one table.
pub type PartitionUpdate = Partition;

impl Partition {
    /// Whether a counter cell here holds a delta no replica led
    /// ([`crate::counter`]): one written before counter shards existed.
    pub fn holds_counter_deltas(&self) -> bool {
        let has_delta = |row: &Row| {
            row.columns.values().any(|c| match c {
                ColumnData::Atomic(Cell { value: CellValue::Counter { shards }, .. }) => {
                    shards.iter().any(|s| s.id == CounterShard::DELTA_ID)
                }
                _ => false,
            })
        };
        has_delta(&self.static_row) || self.rows.values().any(|r| has_delta(&r.row))
    }

    /// Bytes an encoding of the partition holds twice: each element of a
    /// non-frozen collection is stored under its sort key and with its key
    /// as clients see it, one the other's image; the smaller copy counts
    /// here. Size limits meant for what a client wrote leave these out, so
    /// a 9 MB set element weighs what a 9 MB text does.
    pub fn repeated_key_bytes(&self) -> usize {
        let of_row = |row: &Row| -> usize {
            row.columns
                .values()
                .map(|data| match data {
                    ColumnData::Collection(c) => c.cells.iter().map(|(sort, cc)| sort.len().min(cc.key.len())).sum(),
                    ColumnData::Atomic(_) => 0,
                })
                .sum()
        };
        of_row(&self.static_row) + self.rows.values().map(|r| of_row(&r.row)).sum::<usize>()
    }

    /// Moves every timestamp of the update by `delta` µs, keeping their
    /// differences (a collection tombstone stays just below its elements).
    /// A conditional write takes its timestamp only once it holds the
    /// partition, so conditional writes apply in timestamp order.
    pub fn shift_timestamps(&mut self, delta: i64) {
        if let Some(tombstone) = &mut self.tombstone {
            tombstone.timestamp += delta;
        }
        self.static_row.shift_timestamps(delta);
        self.rows.values_mut().for_each(|r| r.row.shift_timestamps(delta));
        self.range_tombstones.iter_mut().for_each(|r| r.tombstone.timestamp += delta);
    }

    pub fn merge(&mut self, other: Partition) {
        self.tombstone = Tombstone::merge(self.tombstone, other.tombstone);
        self.static_row.merge(other.static_row);
        for (key, incoming) in other.rows {
            match self.rows.get_mut(&key) {
                Some(current) => current.row.merge(incoming.row),
                None => {
                    self.rows.insert(key, incoming);
                }
            }
        }
        if !other.range_tombstones.is_empty() {
            self.range_tombstones.extend(other.range_tombstones);
            self.canonicalize_range_tombstones();
        }
    }

    /// Sorts range tombstones into one order (any total order: copies that
    /// hold the same ones then compare and hash alike) and drops repeats:
    /// a merge of two copies of a partition holds each of its range
    /// tombstones once, so reconciling copies again and again does not
    /// grow them.
    pub fn canonicalize_range_tombstones(&mut self) {
        fn bound(b: &Bound<Bytes>) -> (u8, &[u8]) {
            match b {
                Bound::Unbounded => (0, &[]),
                Bound::Included(key) => (1, key),
                Bound::Excluded(key) => (2, key),
            }
        }
        let key = |rt: &RangeTombstone| (rt.tombstone.timestamp, rt.tombstone.deletion_time_s);
        self.range_tombstones.sort_by(|a, b| {
            (bound(&a.range.start), bound(&a.range.end), key(a)).cmp(&(
                bound(&b.range.start),
                bound(&b.range.end),
                key(b),
            ))
        });
        self.range_tombstones.dedup();
    }

    /// A copy holding only what a read of `ranges` needs: the partition
    /// tombstone, the static row, the rows in the ranges and the range
    /// tombstones that overlap them.
    pub fn slice(&self, ranges: &[ClusteringRange]) -> Partition {
        // The whole partition (point reads by partition key): a clone
        // copies the row map's shape instead of inserting row by row.
        if ClusteringRange::is_whole(ranges) {
            return self.clone();
        }
        let mut rows = BTreeMap::new();
        // BTreeMap::range panics on empty or inverted bounds.
        for range in ranges.iter().filter(|r| !r.is_empty()) {
            for (key, row) in self.rows.range::<Bytes, _>(range.as_bounds()) {
                rows.insert(key.clone(), row.clone());
            }
        }
        Partition {
            tombstone: self.tombstone,
            static_row: self.static_row.clone(),
            rows,
            range_tombstones: self.range_tombstones.clone(),
        }
    }

    /// The strongest deletion covering the row at `key`.
    pub fn deletion_for_row(&self, key: &[u8]) -> Option<Tombstone> {
        let ranges = self.range_tombstones.iter().filter(|rt| rt.range.contains(key)).map(|rt| Some(rt.tombstone));
        ranges.fold(self.tombstone, Tombstone::merge)
    }

    /// The oldest write timestamp in the partition (data or deletion).
    pub fn min_timestamp(&self) -> Option<i64> {
        let mut min: Option<i64> = None;
        let mut note = |ts: i64| min = Some(min.map_or(ts, |m| m.min(ts)));
        let mut row = |row: &Row| {
            if let Some(m) = row.marker {
                note(m.timestamp);
            }
            if let Some(t) = row.deletion {
                note(t.timestamp);
            }
            for data in row.columns.values() {
                match data {
                    ColumnData::Atomic(c) => note(c.timestamp),
                    ColumnData::Collection(c) => {
                        if let Some(t) = c.tombstone {
                            note(t.timestamp);
                        }
                        c.cells.values().for_each(|cc| note(cc.cell.timestamp));
                    }
                }
            }
        };
        row(&self.static_row);
        self.rows.values().for_each(|r| row(&r.row));
        if let Some(t) = self.tombstone {
            note(t.timestamp);
        }
        for rt in &self.range_tombstones {
            note(rt.tombstone.timestamp);
        }
        min
    }

    /// Estimated heap bytes, for memtable accounting: the B-tree nodes of
    /// its maps as std allocates them (`btree_bytes`), keys and values.
    pub fn size_estimate_bytes(&self) -> usize {
        let clustered: usize = self.rows.iter().map(|(k, r)| clustered_row_bytes(k, r)).sum();
        clustered + self.fixed_bytes()
    }

    /// The part of the estimate that does not belong to one clustered row.
    fn fixed_bytes(&self) -> usize {
        btree_bytes(self.rows.len(), std::mem::size_of::<(Bytes, ClusteredRow)>())
            + row_bytes(&self.static_row)
            + self.range_tombstones.capacity() * std::mem::size_of::<RangeTombstone>()
    }

    /// Merges `other` in and returns the change of
    /// [`Self::size_estimate_bytes`], measuring only what `other` touches:
    /// an overwrite of a cell frees the old one, so a memtable that takes
    /// the same rows again and again does not count them again and again.
    pub fn merge_measured(&mut self, other: Partition) -> isize {
        let touched = |p: &Partition, keys: &[Bytes]| -> usize {
            let rows: usize =
                keys.iter().filter_map(|k| p.rows.get_key_value(k)).map(|(k, r)| clustered_row_bytes(k, r)).sum();
            rows + p.fixed_bytes()
        };
        let keys: Vec<Bytes> = other.rows.keys().cloned().collect();
        let before = touched(self, &keys);
        self.merge(other);
        touched(self, &keys) as isize - before as isize
    }
}

/// Entries in a leaf of std's `BTreeMap` (2B - 1 with B = 6).
const BTREE_LEAF_ENTRIES: usize = 11;

/// Heap of a std `BTreeMap` of `len` entries of `entry_bytes`: a leaf is
/// allocated whole (11 entries and a header) even for one entry; past one
/// leaf, leaves run about 2/3 full and internal nodes add about 1/8.
/// Single-row partitions pay a whole leaf per map, which is why they cost
/// far more than their data in a memtable.
pub(crate) fn btree_bytes(len: usize, entry_bytes: usize) -> usize {
    let leaf = BTREE_LEAF_ENTRIES * entry_bytes + 16;
    match len {
        0 => 0,
        1..=BTREE_LEAF_ENTRIES => leaf,
        _ => len.div_ceil(BTREE_LEAF_ENTRIES * 2 / 3) * leaf * 9 / 8,
    }
}

fn clustered_row_bytes(key: &Bytes, row: &ClusteredRow) -> usize {
    key.len()
        + row.clustering.capacity() * std::mem::size_of::<Bytes>()
        + row.clustering.iter().map(Bytes::len).sum::<usize>()
        + row_bytes(&row.row)
}

fn row_bytes(row: &Row) -> usize {
    let values: usize = row
        .columns
        .values()
        .map(|c| match c {
            ColumnData::Atomic(cell) => cell_bytes(cell),
            ColumnData::Collection(coll) => {
                btree_bytes(coll.cells.len(), std::mem::size_of::<(Bytes, CollectionCell)>())
                    + coll.cells.iter().map(|(k, c)| k.len() + c.key.len() + cell_bytes(&c.cell)).sum::<usize>()
            }
        })
        .sum();
    btree_bytes(row.columns.len(), std::mem::size_of::<(u32, ColumnData)>()) + values
}

fn cell_bytes(cell: &Cell) -> usize {
    match &cell.value {
        CellValue::Live { value, .. } => value.len(),
        CellValue::Counter { shards } => std::mem::size_of_val(&**shards),
        CellValue::Dead { .. } => 0,
    }
}

/// Whether no partition position lies between `from` and `to` (the cases
/// `BTreeMap::range` refuses).
pub fn ring_range_is_empty(from: Bound<&PartitionPosition>, to: Bound<&PartitionPosition>) -> bool {
    match (from, to) {
        (Bound::Included(f), Bound::Included(t)) => f > t,
        (Bound::Included(f) | Bound::Excluded(f), Bound::Excluded(t)) | (Bound::Excluded(f), Bound::Included(t)) => {
            f >= t
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(ts: i64, v: &'static [u8]) -> Cell {
        Cell::live(ts, Bytes::from_static(v), None)
    }

    /// Cells of one timestamp (and one older) in every shape a tie can take.
    fn tied_cells() -> Vec<Cell> {
        let expiring = |at: i64, ttl_s: i32, v: &'static [u8]| {
            Cell::live(7, Bytes::from_static(v), Some(Expiry { ttl_s, expires_at_s: at }))
        };
        vec![
            live(7, b"a"),
            live(7, b"b"),
            live(6, b"z"),
            expiring(100, 10, b"a"),
            expiring(100, 20, b"a"),
            expiring(100, 10, b"b"),
            expiring(200, 10, b"a"),
            Cell::dead(7, 50),
            Cell::dead(7, 60),
        ]
    }

    #[test]
    fn merged_copies_hold_each_range_tombstone_once_in_one_order() {
        let rt = |from: &'static [u8], ts: i64| RangeTombstone {
            range: ClusteringRange { start: Bound::Included(Bytes::from_static(from)), end: Bound::Unbounded },
            tombstone: Tombstone { timestamp: ts, deletion_time_s: 1 },
        };
        let a = Partition { range_tombstones: vec![rt(b"b", 5), rt(b"a", 5)], ..Partition::default() };
        let b = Partition { range_tombstones: vec![rt(b"a", 5), rt(b"b", 5), rt(b"a", 6)], ..Partition::default() };
        let mut ab = a.clone();
        ab.merge(b.clone());
        let mut ba = b.clone();
        ba.merge(a.clone());
        assert_eq!(ab, ba, "the same whichever copy merges into which");
        assert_eq!(ab.range_tombstones.len(), 3, "{ab:?}");
        // Reconciling again changes nothing.
        let mut again = ab.clone();
        again.merge(ab.clone());
        assert_eq!(again, ab);
    }

    #[test]
    fn ties_resolve_the_same_in_any_order() {
        let cells = tied_cells();
        for a in &cells {
            for b in &cells {
                let ab = Cell::reconcile(a.clone(), b.clone());
                assert_eq!(ab, Cell::reconcile(b.clone(), a.clone()), "{a:?} vs {b:?}");
                for c in &cells {
                    let left = Cell::reconcile(ab.clone(), c.clone());
                    let right = Cell::reconcile(a.clone(), Cell::reconcile(b.clone(), c.clone()));
                    assert_eq!(left, right, "({a:?} {b:?}) {c:?}");
                }
            }
        }
    }

    #[test]
    fn row_markers_of_one_timestamp_resolve_the_same_in_any_order() {
        let marker = |expiry: Option<(i32, i64)>| RowMarker {
            timestamp: 7,
            expiry: expiry.map(|(ttl_s, expires_at_s)| Expiry { ttl_s, expires_at_s }),
        };
        let markers = [marker(None), marker(Some((10, 100))), marker(Some((20, 100))), marker(Some((10, 200)))];
        for a in markers {
            for b in markers {
                let merged = |x: RowMarker, y: RowMarker| {
                    let mut row = Row { marker: Some(x), ..Row::default() };
                    row.merge(Row { marker: Some(y), ..Row::default() });
                    row.marker
                };
                assert_eq!(merged(a, b), merged(b, a), "{a:?} vs {b:?}");
            }
        }
        // An expiring marker beats one without expiry (ScyllaDB's order).
        let mut row = Row { marker: Some(marker(Some((10, 100)))), ..Row::default() };
        row.merge(Row { marker: Some(marker(None)), ..Row::default() });
        assert_eq!(row.marker, Some(marker(Some((10, 100)))));
    }

    #[test]
    fn newer_timestamp_wins_and_ties_prefer_deletion() {
        assert_eq!(Cell::reconcile(live(1, b"a"), live(2, b"b")), live(2, b"b"));
        assert_eq!(Cell::reconcile(live(2, b"b"), live(1, b"a")), live(2, b"b"));
        assert_eq!(Cell::reconcile(live(2, b"b"), Cell::dead(2, 9)), Cell::dead(2, 9));
        assert_eq!(Cell::reconcile(Cell::dead(2, 9), live(2, b"b")), Cell::dead(2, 9));
        // Equal timestamps, both live: the greater value, whatever the order.
        assert_eq!(Cell::reconcile(live(3, b"a"), live(3, b"b")), live(3, b"b"));
        assert_eq!(Cell::reconcile(live(3, b"b"), live(3, b"a")), live(3, b"b"));
        // ScyllaDB's order at equal timestamps: expiring beats not expiring,
        // then the later expiry, then the shorter TTL, before the value.
        let expiring = |at: i64, ttl_s: i32, v: &'static [u8]| {
            Cell::live(3, Bytes::from_static(v), Some(Expiry { ttl_s, expires_at_s: at }))
        };
        assert_eq!(Cell::reconcile(live(3, b"z"), expiring(100, 10, b"a")), expiring(100, 10, b"a"));
        assert_eq!(Cell::reconcile(expiring(200, 20, b"a"), expiring(100, 10, b"z")), expiring(200, 20, b"a"));
        assert_eq!(Cell::reconcile(expiring(100, 20, b"z"), expiring(100, 10, b"a")), expiring(100, 10, b"a"));
    }

    #[test]
    fn counter_deltas_add_up_and_a_cell_tombstone_beats_them_all() {
        let sum = Cell::reconcile(Cell::counter_delta(5, 3), Cell::counter_delta(2, -1));
        assert_eq!(sum, Cell::counter_delta(5, 2));
        assert_eq!(sum.live_value(0), Some(Bytes::copy_from_slice(&2i64.to_be_bytes())));
        // Whatever the order and the timestamps, the deletion wins.
        assert_eq!(Cell::reconcile(Cell::counter_delta(9, 1), Cell::dead(1, 0)), Cell::dead(1, 0));
        assert_eq!(Cell::reconcile(Cell::dead(1, 0), Cell::counter_delta(9, 1)), Cell::dead(1, 0));
        let grouped =
            Cell::reconcile(Cell::reconcile(Cell::counter_delta(1, 1), Cell::dead(2, 0)), Cell::counter_delta(3, 4));
        let other =
            Cell::reconcile(Cell::counter_delta(1, 1), Cell::reconcile(Cell::dead(2, 0), Cell::counter_delta(3, 4)));
        assert_eq!(grouped, other);
    }

    #[test]
    fn expired_cells_are_not_live() {
        let cell = Cell::live(1, Bytes::from_static(b"v"), Some(Expiry { ttl_s: 10, expires_at_s: 100 }));
        assert!(cell.live_value(99).is_some());
        assert!(cell.live_value(100).is_none());
    }

    #[test]
    fn slicing_with_empty_or_inverted_ranges_reads_nothing() {
        let mut p = Partition::default();
        p.rows.insert(Bytes::from_static(b"b"), ClusteredRow::default());
        let key = |k: &'static [u8]| Bytes::from_static(k);
        let ranges = [
            ClusteringRange { start: Bound::Excluded(key(b"b")), end: Bound::Excluded(key(b"b")) },
            ClusteringRange { start: Bound::Included(key(b"c")), end: Bound::Excluded(key(b"a")) },
        ];
        assert!(p.slice(&ranges).rows.is_empty());
    }

    #[test]
    fn partition_merge_keeps_newest_cells_and_strongest_tombstone() {
        let mut stored = Partition::default();
        let mut row = Row::default();
        row.columns.insert(1, ColumnData::Atomic(live(5, b"old")));
        stored.rows.insert(Bytes::from_static(b"k"), ClusteredRow { clustering: vec![], row });
        let mut update =
            Partition { tombstone: Some(Tombstone { timestamp: 3, deletion_time_s: 1 }), ..Partition::default() };
        let mut row = Row::default();
        row.columns.insert(1, ColumnData::Atomic(live(6, b"new")));
        update.rows.insert(Bytes::from_static(b"k"), ClusteredRow { clustering: vec![], row });
        stored.merge(update);
        assert_eq!(stored.tombstone.map(|t| t.timestamp), Some(3));
        let cell = &stored.rows[&Bytes::from_static(b"k")].row.columns[&1];
        assert_eq!(cell, &ColumnData::Atomic(live(6, b"new")));
    }

    #[test]
    fn shifting_timestamps_moves_every_one_and_keeps_their_differences() {
        let tombstone = |timestamp| Some(Tombstone { timestamp, deletion_time_s: 1 });
        let mut row = Row { marker: Some(RowMarker { timestamp: 10, expiry: None }), ..Row::default() };
        row.columns.insert(1, ColumnData::Atomic(live(10, b"v")));
        let mut cells = BTreeMap::new();
        cells.insert(Bytes::from_static(b"e"), CollectionCell { key: Bytes::from_static(b"e"), cell: live(10, b"") });
        row.columns.insert(2, ColumnData::Collection(Collection { tombstone: tombstone(9), cells }));
        let mut p = Partition { tombstone: tombstone(4), ..Partition::default() };
        p.rows.insert(Bytes::from_static(b"k"), ClusteredRow { clustering: vec![], row });
        p.shift_timestamps(100);
        assert_eq!(p.tombstone.map(|t| t.timestamp), Some(104));
        let row = &p.rows[&Bytes::from_static(b"k")].row;
        assert_eq!(row.marker.map(|m| m.timestamp), Some(110));
        assert_eq!(row.columns[&1], ColumnData::Atomic(live(110, b"v")));
        let ColumnData::Collection(collection) = &row.columns[&2] else { panic!("not a collection") };
        assert_eq!(collection.tombstone.map(|t| t.timestamp), Some(109));
        assert_eq!(collection.cells[&Bytes::from_static(b"e")].cell.timestamp, 110);
    }

    #[test]
    fn range_tombstones_cover_only_their_range() {
        let p = Partition {
            range_tombstones: vec![RangeTombstone {
                range: ClusteringRange {
                    start: Bound::Included(Bytes::from_static(b"b")),
                    end: Bound::Excluded(Bytes::from_static(b"d")),
                },
                tombstone: Tombstone { timestamp: 7, deletion_time_s: 0 },
            }],
            ..Partition::default()
        };
        assert!(p.deletion_for_row(b"a").is_none());
        assert_eq!(p.deletion_for_row(b"c").map(|t| t.timestamp), Some(7));
        assert!(p.deletion_for_row(b"d").is_none());
    }
}
