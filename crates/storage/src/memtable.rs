//! The memtable: a table's recent writes on one shard, sorted by partition
//! position, merged in place as writes arrive. Once full it is sealed
//! (read-only, shared by `Rc` with reads and the flush writing it out) and
//! a new one takes the writes. Its estimated size counts in the shard's
//! memory budget from the write that adds it until the memtable is dropped.
//!
//! A partition is held in one of two forms ([`Slot`]):
//! - compact: a single-row partition whose cells share one timestamp and
//!   expiry (every memcached item, a key-value table's INSERT) as the
//!   bytes of [`crate::single_row`], the row cache's own layout: its key,
//!   value and a few dozen bytes instead of a partition's maps, whose
//!   B-tree leaves cost ~2.7 KB for a one-row partition. A read of the
//!   whole partition shares the bytes ([`crate::found`]); a read of part of
//!   it and the flush decode it; a write to it decodes, merges and takes whichever
//!   form the result fits, so a second row, a tombstone or a cell of
//!   another timestamp promotes it to the general form. A memcached `set`
//!   comes as its cells ([`Memtable::apply_row`]): a new item or one that
//!   wins every part of the held row is encoded straight into its slot,
//!   with no `Partition` built.
//! - deleted: a partition tombstone alone (a memcached `delete`), as the
//!   tombstone itself; one that shadows every part of a compact row held
//!   replaces it, as compaction would drop what it shadows, so a deleted
//!   item keeps no value in memory and its delete builds no `Partition`.
//! - general: anything else, held by `Rc`, so a read of a whole partition
//!   shares it instead of copying its rows (a CQL point read); a write to a
//!   partition a read still holds copies it first (`Rc::make_mut`), so a
//!   reader never sees a write land under it.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::rc::Rc;

use bytes::Bytes;

use crate::codec::Encoder;
use crate::commitlog::Position;
use crate::found::{Found, FoundRef, RowRef, SharedRow};
use crate::partition::{ClusteringRange, Partition, PartitionPosition, PartitionUpdate, Tombstone};
use crate::single_row::{self, RowCells, SingleRow};

/// Partitions freed between yields by [`Memtable::release`]. Freeing costs
/// roughly a microsecond per small partition, so a step stays well under a
/// millisecond.
const RELEASE_STEP_PARTITIONS: usize = 256;

/// A partition as the memtable holds it (module doc).
#[derive(Debug)]
enum Slot {
    /// [`crate::single_row`]'s encoding; `Bytes` so that reads share its
    /// values instead of copying them.
    Compact(Bytes),
    /// A partition tombstone and nothing else.
    Deleted(Tombstone),
    General(Rc<Partition>),
}

impl Slot {
    /// `partition` in the most compact form that holds it.
    fn new(partition: Partition) -> Slot {
        if let Some(tombstone) = bare_tombstone(&partition) {
            return Slot::Deleted(tombstone);
        }
        match SingleRow::of(&partition) {
            Some(row) => Slot::compact(&row),
            None => Slot::General(Rc::new(partition)),
        }
    }

    fn compact(row: &SingleRow) -> Slot {
        Slot::compact_from(row.encoded_len(), |e| row.encode(e))
    }

    /// A compact slot of `len` bytes, as `encode` writes them: one
    /// allocation of its exact size.
    fn compact_from(len: usize, encode: impl FnOnce(&mut Encoder)) -> Slot {
        let mut out = Vec::with_capacity(len);
        encode(&mut Encoder { out: &mut out });
        debug_assert_eq!(out.len(), out.capacity(), "encoded_len is exact: no reallocation to fit");
        Slot::Compact(Bytes::from(out))
    }

    /// Merges `update` in, in the most compact form that holds the result.
    fn merge(&mut self, update: Partition) {
        if bare_tombstone(&update).is_some_and(|tombstone| self.delete(tombstone)) {
            return;
        }
        if let Slot::Compact(bytes) = self {
            // An overwrite by a newer whole row (a memcached `set` of an
            // item held): the result is the update, with no decoding.
            if let Some(row) = SingleRow::of(&update).filter(|row| row.supersedes(bytes).unwrap_or_else(|e| corrupt(e)))
            {
                *self = Slot::compact(&row);
                return;
            }
        }
        let mut merged = self.partition().into_owned();
        merged.merge(update);
        *self = Slot::new(merged);
    }

    /// Merges in a partition tombstone alone (a delete) where the result
    /// is the tombstone alone: it shadows all a compact slot holds, or a
    /// tombstone is held. False, and the slot unchanged, where it must
    /// merge as a partition (a general slot, a compact row newer than it).
    fn delete(&mut self, tombstone: Tombstone) -> bool {
        match self {
            Slot::Compact(bytes)
                if single_row::timestamp(bytes).unwrap_or_else(|e| corrupt(e)) <= tombstone.timestamp =>
            {
                *self = Slot::Deleted(tombstone)
            }
            Slot::Deleted(held) => *held = Tombstone::merge(Some(*held), Some(tombstone)).unwrap_or(tombstone),
            Slot::Compact(_) | Slot::General(_) => return false,
        }
        true
    }

    /// A compact slot's bytes replaced by `row`'s encoding: in place where
    /// they have its length and no reader shares them (an item overwritten
    /// by one of its size: a `set` of a same-size value, an `incr` to as
    /// many digits), else in an allocation of their own.
    fn overwrite(&mut self, row: &RowCells) {
        let len = row.encoded_len();
        if let Slot::Compact(bytes) = self {
            if bytes.len() == len && bytes.is_unique() {
                // Unique: the vector takes the allocation back, no copy.
                let mut out = Vec::from(std::mem::take(bytes));
                out.clear();
                row.encode(&mut Encoder { out: &mut out });
                debug_assert_eq!(out.len(), len, "encoded_len is exact");
                *bytes = Bytes::from(out);
                return;
            }
        }
        *self = Slot::compact_from(len, |e| row.encode(e));
    }

    /// Whether `row` wins every part of this compact slot, so that it
    /// replaces the slot's bytes.
    fn superseded_by(&self, row: &RowCells) -> bool {
        match self {
            Slot::Compact(bytes) => row.supersedes(bytes).unwrap_or_else(|e| corrupt(e)),
            // The tombstone stays for what other sources hold.
            Slot::Deleted(_) | Slot::General(_) => false,
        }
    }

    fn partition(&self) -> Cow<'_, Partition> {
        match self {
            Slot::General(partition) => Cow::Borrowed(partition),
            Slot::Compact(bytes) => Cow::Owned(single_row::decode_shared(bytes).unwrap_or_else(|e| corrupt(e))),
            Slot::Deleted(tombstone) => Cow::Owned(Partition { tombstone: Some(*tombstone), ..Partition::default() }),
        }
    }

    /// The slot's heap beyond the map entry: the partition's estimated
    /// heap and its `Rc` box, or the compact bytes.
    fn heap_bytes(&self) -> usize {
        match self {
            Slot::Compact(bytes) => bytes.len(),
            Slot::Deleted(_) => 0,
            Slot::General(partition) => {
                std::mem::size_of::<Partition>() + 2 * std::mem::size_of::<usize>() + partition.size_estimate_bytes()
            }
        }
    }
}

/// The tombstone of a partition that holds one and nothing else.
fn bare_tombstone(p: &Partition) -> Option<Tombstone> {
    let bare = p.static_row.is_empty() && p.rows.is_empty() && p.range_tombstones.is_empty();
    p.tombstone.filter(|_| bare)
}

/// A compact slot's bytes are the memtable's own, written by
/// [`Slot::compact`]: failing to read them is a bug here, not bad input.
fn corrupt(e: crate::codec::DecodeError) -> ! {
    panic!("compact memtable partition does not decode (a bug in memtable): {e}")
}

/// A partition's share of the memtable's own B-tree (leaves about 2/3
/// full), its key and its slot's heap.
fn entry_bytes(position: &PartitionPosition, slot: &Slot) -> usize {
    std::mem::size_of::<(PartitionPosition, Slot)>() * 3 / 2 + position.key.len() + slot.heap_bytes()
}

#[derive(Debug, Default)]
pub struct Memtable {
    partitions: BTreeMap<PartitionPosition, Slot>,
    /// The partitions' estimated memory ([`entry_bytes`]): a write adds
    /// what it adds and an overwritten cell stops counting, measured on the
    /// rows the write touches only.
    size_bytes: usize,
    /// The commitlog position of the first write logged into it: segments
    /// from there on are needed until it is flushed.
    first_logged: Option<Position>,
    /// The oldest write timestamp held (for tombstone purging).
    min_timestamp: Option<i64>,
    /// Whether it holds data streamed from another node (a node
    /// operation): its flush puts no new partitions into the row cache.
    streamed: bool,
}

impl Memtable {
    pub fn apply(&mut self, position: PartitionPosition, update: PartitionUpdate, logged_at: Option<Position>) {
        if self.first_logged.is_none() {
            self.first_logged = logged_at;
        }
        if let Some(ts) = update.min_timestamp() {
            self.min_timestamp = Some(self.min_timestamp.map_or(ts, |m| m.min(ts)));
        }
        let grown = match self.partitions.get_mut(&position) {
            Some(Slot::General(current)) => Rc::make_mut(current).merge_measured(update),
            Some(slot) => {
                let before = entry_bytes(&position, slot);
                slot.merge(update);
                entry_bytes(&position, slot) as isize - before as isize
            }
            None => {
                let slot = Slot::new(update);
                let added = entry_bytes(&position, &slot);
                self.partitions.insert(position, slot);
                added as isize
            }
        };
        self.size_bytes = self.size_bytes.saturating_add_signed(grown);
        crate::memory::memtables_changed(grown);
    }

    /// Applies the single row `row` (a memcached `set`), written straight
    /// into a compact slot where the partition is new or `row` supersedes
    /// the compact one held: no `Partition` built, no re-encode. Anything
    /// else merges it as [`Memtable::apply`] does.
    pub fn apply_row(&mut self, position: PartitionPosition, row: &RowCells, logged_at: Option<Position>) {
        let grown = match self.partitions.get_mut(&position) {
            Some(slot @ Slot::Compact(_)) if slot.superseded_by(row) => {
                let before = entry_bytes(&position, slot);
                slot.overwrite(row);
                entry_bytes(&position, slot) as isize - before as isize
            }
            // A slot held keeps its own key: `position`'s is dropped.
            Some(_) => return self.apply(position, row.to_partition(), logged_at),
            None => self.insert_copying_key(position, Slot::compact_from(row.encoded_len(), |e| row.encode(e))),
        };
        self.note_applied(grown, row.timestamp, logged_at);
    }

    /// Applies a partition tombstone alone (a memcached `delete`), held as
    /// the tombstone where it takes the place of what is held or nothing
    /// is: no `Partition` built, and `position`'s key copied only where a
    /// new slot keeps it (it may be a cut of a request's buffer). Anything
    /// else merges it as [`Memtable::apply`] does.
    pub fn apply_tombstone(&mut self, position: PartitionPosition, tombstone: Tombstone, logged_at: Option<Position>) {
        let grown = match self.partitions.get_mut(&position) {
            Some(slot) => {
                let before = entry_bytes(&position, slot);
                if !slot.delete(tombstone) {
                    // A slot held keeps its own key: `position`'s is dropped.
                    let update = Partition { tombstone: Some(tombstone), ..Partition::default() };
                    return self.apply(position, update, logged_at);
                }
                entry_bytes(&position, slot) as isize - before as isize
            }
            None => self.insert_copying_key(position, Slot::Deleted(tombstone)),
        };
        self.note_applied(grown, tombstone.timestamp, logged_at);
    }

    /// Holds `slot` at `position`, new here, under a copy of its key made
    /// at its size and held unshared: a memcached write's key is a cut of
    /// its request's buffer, which it would keep whole for the item's
    /// life. What it adds to the memtable's size.
    fn insert_copying_key(&mut self, position: PartitionPosition, slot: Slot) -> isize {
        let position = PartitionPosition { key: Bytes::copy_from_slice(&position.key), ..position };
        let added = entry_bytes(&position, &slot);
        self.partitions.insert(position, slot);
        added as isize
    }

    /// Notes a write of `timestamp` applied that grew the memtable by
    /// `grown` bytes.
    fn note_applied(&mut self, grown: isize, timestamp: i64, logged_at: Option<Position>) {
        if self.first_logged.is_none() {
            self.first_logged = logged_at;
        }
        self.min_timestamp = Some(self.min_timestamp.map_or(timestamp, |m| m.min(timestamp)));
        self.size_bytes = self.size_bytes.saturating_add_signed(grown);
        crate::memory::memtables_changed(grown);
    }

    /// Applies a partition streamed from another node (a node operation).
    pub fn apply_streamed(&mut self, position: PartitionPosition, update: PartitionUpdate) {
        self.streamed = true;
        self.apply(position, update, None);
    }

    /// Whether it holds data streamed from another node.
    pub fn holds_streamed(&self) -> bool {
        self.streamed
    }

    /// Frees the memtable a step at a time, yielding to the shard's other
    /// tasks between steps. Dropping a flushed memtable of a few hundred MB
    /// at once takes the shard away from its requests for over 100 ms.
    pub async fn release(mut self) {
        let mut partitions = std::mem::take(&mut self.partitions).into_iter();
        while partitions.by_ref().take(RELEASE_STEP_PARTITIONS).count() == RELEASE_STEP_PARTITIONS {
            shoal_runtime::sched::maybe_yield().await;
        }
    }

    /// The partition at `position` restricted to `ranges`: the memtable's
    /// own when it holds it in the general form and the ranges take it
    /// whole, a copy of their rows otherwise.
    pub fn read(&self, position: &PartitionPosition, ranges: &[ClusteringRange]) -> Option<Rc<Partition>> {
        self.read_found(position, ranges).map(Found::into_partition)
    }

    /// [`Memtable::read`], a compact partition read whole as its shared
    /// bytes rather than decoded (`found` module doc).
    pub fn read_found(&self, position: &PartitionPosition, ranges: &[ClusteringRange]) -> Option<Found> {
        let slot = self.partitions.get(position)?;
        Some(match (slot, ClusteringRange::is_whole(ranges)) {
            (Slot::Compact(bytes), true) => Found::Row(SharedRow::new(bytes.clone())),
            (Slot::General(partition), true) => Found::Partition(Rc::clone(partition)),
            (_, whole) => Found::Partition(Rc::new(sliced(slot.partition(), ranges, whole))),
        })
    }

    /// The whole partition at `position`, borrowed: nothing shared or
    /// copied, for a reader that keeps none of it past the borrow.
    pub fn found_ref(&self, position: &PartitionPosition) -> Option<FoundRef<'_>> {
        Some(match self.partitions.get(position)? {
            Slot::Compact(bytes) => FoundRef::Row(RowRef::new(bytes)),
            Slot::General(partition) => FoundRef::Partition(partition),
            Slot::Deleted(tombstone) => FoundRef::Deleted(*tombstone),
        })
    }

    /// Up to `max_partitions` partitions in `(from, to)`, in ring order.
    pub fn scan(
        &self,
        from: Bound<&PartitionPosition>,
        to: Bound<&PartitionPosition>,
        ranges: &[ClusteringRange],
        max_partitions: usize,
    ) -> Vec<(PartitionPosition, Partition)> {
        if crate::partition::ring_range_is_empty(from, to) {
            return Vec::new(); // BTreeMap::range panics on these.
        }
        self.partitions
            .range::<PartitionPosition, _>((from, to))
            .take(max_partitions)
            .map(|(pos, slot)| (pos.clone(), sliced(slot.partition(), ranges, ClusteringRange::is_whole(ranges))))
            .collect()
    }

    pub fn contains(&self, position: &PartitionPosition) -> bool {
        self.partitions.contains_key(position)
    }

    /// The partitions in ring order; a compact one decoded.
    pub fn iter(&self) -> impl Iterator<Item = (&PartitionPosition, Cow<'_, Partition>)> {
        self.partitions.iter().map(|(position, slot)| (position, slot.partition()))
    }

    pub fn len(&self) -> usize {
        self.partitions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.partitions.is_empty()
    }

    pub fn size_bytes(&self) -> usize {
        self.size_bytes
    }

    pub fn first_logged(&self) -> Option<Position> {
        self.first_logged
    }

    pub fn min_timestamp(&self) -> Option<i64> {
        self.min_timestamp
    }
}

/// `partition` restricted to `ranges` (`whole`: they take all of it),
/// copied only if it is borrowed.
fn sliced(partition: Cow<'_, Partition>, ranges: &[ClusteringRange], whole: bool) -> Partition {
    match (partition, whole) {
        (Cow::Owned(partition), true) => partition,
        (partition, _) => partition.slice(ranges),
    }
}

/// The shard's memory stops counting a memtable once it is gone.
impl Drop for Memtable {
    fn drop(&mut self) {
        crate::memory::memtables_changed(-(self.size_bytes as isize));
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::rc::Rc;

    use bytes::Bytes;

    use super::*;
    use crate::partition::{self, ClusteredRow, ColumnData, Expiry, Row, RowMarker, Tombstone};

    /// A partition with one row `row` holding `value` in column 1, at `ts`.
    fn one_row(row: &'static [u8], value: &[u8], ts: i64) -> Partition {
        let mut r = Row::default();
        r.columns.insert(1, ColumnData::Atomic(partition::Cell::live(ts, Bytes::copy_from_slice(value), None)));
        let mut p = Partition::default();
        p.rows.insert(Bytes::from_static(row), ClusteredRow { clustering: Vec::new(), row: r });
        p
    }

    #[test]
    fn overwrites_count_once_and_stale_writes_not_at_all() {
        let mut memtable = Memtable::default();
        let position = PartitionPosition { token: 7, key: Bytes::from_static(b"k") };
        let exact = |m: &Memtable| m.partitions.iter().map(|(p, slot)| entry_bytes(p, slot)).sum::<usize>();
        for ts in 1..=100 {
            memtable.apply(position.clone(), one_row(b"r", &[b'x'; 1000], ts), None);
        }
        memtable.apply(position.clone(), one_row(b"s", b"small", 5), None);
        // An older write loses the merge: nothing changes.
        memtable.apply(position.clone(), one_row(b"r", &[b'y'; 5000], 0), None);
        assert_eq!(memtable.size_bytes(), exact(&memtable));
        assert!(memtable.size_bytes() < 2 * 1000 + 3000, "{}", memtable.size_bytes());
    }

    #[test]
    fn a_newer_row_at_another_clustering_key_joins_a_compact_one() {
        let mut memtable = Memtable::default();
        let position = PartitionPosition { token: 7, key: Bytes::from_static(b"k") };
        memtable.apply(position.clone(), one_row(b"r", b"first", 1), None);
        assert!(matches!(memtable.partitions[&position], Slot::Compact(_)), "one clustered row is held compactly");
        memtable.apply(position.clone(), one_row(b"s", b"second", 2), None);
        let read = memtable.read(&position, &[ClusteringRange::all()]).expect("written");
        assert_eq!(read.rows.keys().collect::<Vec<_>>(), [&Bytes::from_static(b"r"), &Bytes::from_static(b"s")]);
        memtable.apply(position.clone(), one_row(b"s", b"third", 3), None);
        let read = memtable.read(&position, &[ClusteringRange::all()]).expect("written");
        assert_eq!(read.rows.len(), 2);
    }

    #[test]
    fn a_whole_read_shares_the_partition_and_a_later_write_leaves_it_be() {
        let mut memtable = Memtable::default();
        let position = PartitionPosition { token: 7, key: Bytes::from_static(b"k") };
        memtable.apply(position.clone(), one_row(b"r", b"old", 1), None);
        // Two rows: held in the general form (one is held compactly).
        memtable.apply(position.clone(), one_row(b"s", b"other", 1), None);
        let whole = memtable.read(&position, &[ClusteringRange::all()]).expect("written");
        let again = memtable.read(&position, &[ClusteringRange::all()]).expect("written");
        assert!(Rc::ptr_eq(&whole, &again), "a whole read copies nothing");
        memtable.apply(position.clone(), one_row(b"r", b"new", 2), None);
        let value = |p: &Partition| match p.rows[&Bytes::from_static(b"r")].row.columns[&1] {
            ColumnData::Atomic(ref cell) => cell.live_value(0),
            _ => None,
        };
        assert_eq!(value(&whole), Some(Bytes::from_static(b"old")), "the reader keeps what it read");
        let after = memtable.read(&position, &[ClusteringRange::all()]).expect("written");
        assert_eq!(value(&after), Some(Bytes::from_static(b"new")));
    }

    /// A memcached item: one row of no clustering key, marker and value,
    /// flags and CAS cells, all at `ts` with `expiry`.
    fn item(value: &[u8], ts: i64, expiry: Option<Expiry>) -> Partition {
        let cell = |v: &[u8]| ColumnData::Atomic(partition::Cell::live(ts, Bytes::copy_from_slice(v), expiry));
        let mut row = Row { marker: Some(RowMarker { timestamp: ts, expiry }), ..Row::default() };
        row.columns.insert(1, cell(value));
        row.columns.insert(2, cell(&0u32.to_be_bytes()));
        row.columns.insert(3, cell(&(ts as u64).to_be_bytes()));
        let mut p = Partition::default();
        p.rows.insert(Bytes::new(), ClusteredRow { clustering: Vec::new(), row });
        p
    }

    fn is_compact(memtable: &Memtable, position: &PartitionPosition) -> bool {
        matches!(memtable.partitions.get(position), Some(Slot::Compact(_)))
    }

    /// Applies `writes` to a memtable in turn and checks after each that it
    /// reads back their merge, takes the form `compact` says, and counts
    /// exactly its entries' bytes.
    fn apply_all(writes: &[(Partition, bool)]) {
        let mut memtable = Memtable::default();
        let position = PartitionPosition { token: 3, key: Bytes::from_static(b"item") };
        let mut expected = Partition::default();
        for (i, (write, compact)) in writes.iter().enumerate() {
            memtable.apply(position.clone(), write.clone(), None);
            expected.merge(write.clone());
            let read = memtable.read(&position, &[ClusteringRange::all()]).expect("written");
            assert_eq!(*read, expected, "write {i}");
            assert_eq!(is_compact(&memtable, &position), *compact, "write {i}: {expected:?}");
            let exact: usize = memtable.partitions.iter().map(|(p, slot)| entry_bytes(p, slot)).sum();
            assert_eq!(memtable.size_bytes(), exact, "write {i}");
            let (_, flushed) = memtable.iter().next().expect("one partition");
            assert_eq!(*flushed, expected, "write {i}: what a flush writes");
        }
    }

    #[test]
    fn single_rows_stay_compact_through_overwrites() {
        let expiry = Some(Expiry { ttl_s: 60, expires_at_s: 1_000_060 });
        apply_all(&[
            (item(&[b'a'; 1000], 10, None), true),
            // Newer and whole: taken as it is.
            (item(b"newer", 20, expiry), true),
            // Older: loses the merge, nothing changes.
            (item(b"older", 5, None), true),
            // Tied: merged cell by cell, and still one timestamp and expiry.
            (item(b"newest", 20, expiry), true),
        ]);
    }

    #[test]
    fn a_second_row_a_tombstone_or_another_timestamp_promotes_to_the_general_form() {
        let mut clustered = Partition::default();
        clustered.rows.insert(Bytes::from_static(b"c"), ClusteredRow::default());
        apply_all(&[(item(b"v", 10, None), true), (clustered, false), (item(b"w", 30, None), false)]);

        let deleted =
            Partition { tombstone: Some(Tombstone { timestamp: 5, deletion_time_s: 1 }), ..Partition::default() };
        apply_all(&[(item(b"v", 10, None), true), (deleted, false)]);

        // One cell rewritten at a later timestamp: the row's cells differ.
        let mut one_cell = item(b"v", 20, None);
        let row = &mut one_cell.rows.values_mut().next().expect("one row").row;
        row.marker = None;
        row.columns.retain(|id, _| *id == 1);
        apply_all(&[(item(b"v", 10, None), true), (one_cell, false)]);

        // A deleted cell is not a live one.
        let mut dead = item(b"v", 20, None);
        let row = &mut dead.rows.values_mut().next().expect("one row").row;
        row.columns.insert(1, ColumnData::Atomic(partition::Cell::dead(20, 1)));
        apply_all(&[(dead, false)]);
    }

    #[test]
    fn a_row_written_as_its_cells_merges_as_its_partition_does() {
        let expiry = Some(Expiry { ttl_s: 60, expires_at_s: 1_000_060 });
        // A value of 8 bytes is held as a word.
        let values: [&[u8]; 3] = [b"value", b"8 bytes!", b"v"];
        let cells_of: Vec<Vec<(u32, &[u8])>> = [&[1u32][..], &[1, 2], &[2, 3], &[1, 2, 3]]
            .iter()
            .map(|columns| columns.iter().map(|id| (*id, values[*id as usize - 1])).collect())
            .collect();
        let mut rows = Vec::new();
        for timestamp in [10, 20, 30] {
            for expiry in [None, expiry] {
                rows.extend(cells_of.iter().map(|cells| RowCells { timestamp, expiry, cells }));
            }
        }
        let mut clustered = Partition::default();
        clustered.rows.insert(Bytes::from_static(b"c"), ClusteredRow::default());
        // Nothing held, each row held compact, a row with a marker, the
        // general form.
        let mut befores = vec![Partition::default()];
        befores.extend(rows.iter().map(RowCells::to_partition));
        befores.extend([item(b"marked", 20, None), clustered]);
        let position = PartitionPosition { token: 3, key: Bytes::from_static(b"item") };
        for before in &befores {
            for row in &rows {
                let mut memtable = Memtable::default();
                if *before != Partition::default() {
                    memtable.apply(position.clone(), before.clone(), None);
                }
                memtable.apply_row(position.clone(), row, None);
                let mut expected = before.clone();
                expected.merge(row.to_partition());
                let read = memtable.read(&position, &[ClusteringRange::all()]).expect("written");
                assert_eq!(*read, expected, "{before:?} then {row:?}");
                let exact: usize = memtable.partitions.iter().map(|(p, slot)| entry_bytes(p, slot)).sum();
                assert_eq!(memtable.size_bytes(), exact);
            }
        }
    }

    #[test]
    fn every_pair_of_single_rows_merges_as_partitions_do() {
        // Rows of every shape the shortcut looks at: older, tied and newer
        // timestamps, with and without a marker, an expiry, each column.
        let expiry = Some(Expiry { ttl_s: 60, expires_at_s: 1_000_060 });
        let mut rows = Vec::new();
        for ts in [10, 20] {
            for marker in [false, true] {
                for expiry in [None, expiry] {
                    for columns in [&[1u32][..], &[1, 2], &[2, 3], &[1, 2, 3]] {
                        let mut p = item(format!("v{ts}").as_bytes(), ts, expiry);
                        let row = &mut p.rows.values_mut().next().expect("one row").row;
                        row.columns.retain(|id, _| columns.contains(id));
                        row.marker = row.marker.filter(|_| marker);
                        rows.push(p);
                    }
                }
            }
        }
        let position = PartitionPosition { token: 3, key: Bytes::from_static(b"item") };
        for a in &rows {
            for b in &rows {
                let mut memtable = Memtable::default();
                memtable.apply(position.clone(), a.clone(), None);
                memtable.apply(position.clone(), b.clone(), None);
                let mut expected = a.clone();
                expected.merge(b.clone());
                let read = memtable.read(&position, &[ClusteringRange::all()]).expect("written");
                assert_eq!(*read, expected, "{a:?} then {b:?}");
                let exact: usize = memtable.partitions.iter().map(|(p, slot)| entry_bytes(p, slot)).sum();
                assert_eq!(memtable.size_bytes(), exact);
            }
        }
    }

    /// `p` as reads see it: what a partition tombstone shadows dropped, as
    /// compaction drops it (and nothing expired: expiries lie ahead).
    fn as_read(mut p: Partition) -> Partition {
        let rules = crate::compaction::purge::PurgeRules {
            now_s: 0,
            gc_grace_s: i64::MAX / 4,
            max_purgeable_timestamp: i64::MIN,
            dropped_columns: &[],
        };
        crate::compaction::purge::purge(&mut p, &rules);
        p
    }

    fn deletion(timestamp: i64) -> Partition {
        Partition { tombstone: Some(Tombstone { timestamp, deletion_time_s: 1 }), ..Partition::default() }
    }

    #[test]
    fn a_delete_of_a_compact_item_holds_its_tombstone_alone() {
        let mut memtable = Memtable::default();
        let position = PartitionPosition { token: 3, key: Bytes::from_static(b"item") };
        memtable.apply(position.clone(), item(&[b'x'; 1000], 10, None), None);
        let held = memtable.size_bytes();
        memtable.apply(position.clone(), deletion(20), None);
        assert!(matches!(memtable.partitions.get(&position), Some(Slot::Deleted(_))));
        assert!(memtable.size_bytes() < held - 1000, "the value is no longer held: {}", memtable.size_bytes());
        let exact: usize = memtable.partitions.iter().map(|(p, slot)| entry_bytes(p, slot)).sum();
        assert_eq!(memtable.size_bytes(), exact);
        assert_eq!(*memtable.read(&position, &[ClusteringRange::all()]).expect("held"), deletion(20));
        // Another delete keeps the newer tombstone; a newer item is held
        // with it, for what other sources hold.
        memtable.apply(position.clone(), deletion(15), None);
        assert_eq!(*memtable.read(&position, &[ClusteringRange::all()]).expect("held"), deletion(20));
        let newer = RowCells { timestamp: 30, expiry: None, cells: &[(1, b"new")] };
        memtable.apply_row(position.clone(), &newer, None);
        let mut expected = deletion(20);
        expected.merge(newer.to_partition());
        assert_eq!(*memtable.read(&position, &[ClusteringRange::all()]).expect("held"), expected);
        // A delete older than the item held leaves it.
        let other = PartitionPosition { token: 4, key: Bytes::from_static(b"other") };
        memtable.apply(other.clone(), item(b"v", 10, None), None);
        memtable.apply(other.clone(), deletion(5), None);
        let mut expected = item(b"v", 10, None);
        expected.merge(deletion(5));
        assert_eq!(*memtable.read(&other, &[ClusteringRange::all()]).expect("held"), expected);
    }

    #[test]
    fn an_overwrite_of_its_size_reuses_the_bytes_unless_a_reader_holds_them() {
        let mut memtable = Memtable::default();
        let position = PartitionPosition { token: 3, key: Bytes::from_static(b"item") };
        type Cells<'a> = [(u32, &'a [u8]); 1];
        let (a, b, c): (Cells, Cells, Cells) = ([(1, b"aaaa")], [(1, b"bbbb")], [(1, b"cccc")]);
        let row = |timestamp, cells| RowCells { timestamp, expiry: None, cells };
        let bytes_at = |m: &Memtable| match m.partitions.get(&position) {
            Some(Slot::Compact(bytes)) => bytes.as_ptr(),
            other => panic!("{other:?}"),
        };
        memtable.apply_row(position.clone(), &row(1, &a), None);
        let first = bytes_at(&memtable);
        memtable.apply_row(position.clone(), &row(2, &b), None);
        assert_eq!(bytes_at(&memtable), first, "rewritten in place");
        let read = memtable.read_found(&position, &[ClusteringRange::all()]).expect("held");
        memtable.apply_row(position.clone(), &row(3, &c), None);
        assert_ne!(bytes_at(&memtable), first, "a reader holds the old bytes");
        let value = |found: Found| found.into_partition().rows[&Bytes::new()].row.columns[&1].clone();
        assert_eq!(value(read), ColumnData::Atomic(partition::Cell::live(2, Bytes::from_static(b"bbbb"), None)));
        let now = memtable.read_found(&position, &[ClusteringRange::all()]).expect("held");
        assert_eq!(value(now), ColumnData::Atomic(partition::Cell::live(3, Bytes::from_static(b"cccc"), None)));
        let exact: usize = memtable.partitions.iter().map(|(p, slot)| entry_bytes(p, slot)).sum();
        assert_eq!(memtable.size_bytes(), exact);
    }

    #[test]
    fn a_row_s_key_cut_from_a_larger_buffer_is_kept_as_a_copy() {
        let mut memtable = Memtable::default();
        let buffer = Bytes::from(b"set item 0 0 4\r\nvvvv\r\nset deleted 0 0 1\r\ndelete gone\r\n".to_vec());
        let cut = |word: &[u8]| {
            let at = buffer.windows(word.len()).position(|w| w == word).expect("in the buffer");
            buffer.slice(at..at + word.len())
        };
        let kept_key = |m: &Memtable, key: &[u8]| {
            let (position, _) = m.partitions.iter().find(|(p, _)| &p.key[..] == key).expect("held");
            position.key.as_ptr()
        };
        let row = RowCells { timestamp: 5, expiry: None, cells: &[(1, b"vvvv")] };
        // A new slot, an overwrite and a merge over a tombstone: the
        // buffer is never what the memtable keeps.
        memtable.apply_row(PartitionPosition { token: 1, key: cut(b"item") }, &row, None);
        memtable.apply_row(PartitionPosition { token: 1, key: cut(b"item") }, &row, None);
        memtable.apply(PartitionPosition { token: 2, key: Bytes::from_static(b"deleted") }, deletion(3), None);
        memtable.apply_row(PartitionPosition { token: 2, key: cut(b"deleted") }, &row, None);
        // A delete given as its tombstone: of a key not held (a new slot),
        // again over it, and over the compact row held.
        let tombstone = |timestamp| Tombstone { timestamp, deletion_time_s: 1 };
        memtable.apply_tombstone(PartitionPosition { token: 3, key: cut(b"gone") }, tombstone(4), None);
        memtable.apply_tombstone(PartitionPosition { token: 3, key: cut(b"gone") }, tombstone(6), None);
        memtable.apply_tombstone(PartitionPosition { token: 1, key: cut(b"item") }, tombstone(6), None);
        assert!(matches!(memtable.partitions.values().next(), Some(Slot::Deleted(t)) if t.timestamp == 6));
        for key in [&b"item"[..], b"deleted", b"gone"] {
            let buffer_range = buffer.as_ptr_range();
            assert!(!buffer_range.contains(&kept_key(&memtable, key)), "{key:?} is the memtable's own");
        }
        assert!(buffer.is_unique(), "nothing else holds the request's buffer");
    }

    /// Seeded random runs of item writes, rows written as their cells,
    /// deletes and rows of other shapes, at random timestamps, on a few
    /// keys: after each, every key reads as the merge of its writes (as
    /// reads see it) and the memtable counts exactly its entries.
    #[test]
    fn random_writes_and_deletes_read_as_their_merge() {
        use rand::{Rng, SeedableRng};
        let values: [&[u8]; 4] = [b"v", b"8 bytes!", b"same", b"sane"];
        for seed in 0..200u64 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut memtable = Memtable::default();
            let positions: Vec<PartitionPosition> =
                (0..3).map(|i| PartitionPosition { token: i, key: Bytes::from(vec![b'k', i as u8]) }).collect();
            let mut model: Vec<Partition> = vec![Partition::default(); positions.len()];
            let mut readers = Vec::new();
            for step in 0..40 {
                let at = rng.gen_range(0..positions.len());
                let ts = rng.gen_range(1..30);
                let value = values[rng.gen_range(0..values.len())];
                let write = match rng.gen_range(0..6) {
                    0 => {
                        let cells = [(1, value), (2, &b"flags..."[..]), (3, &b"cas....."[..])];
                        let row = RowCells { timestamp: ts, expiry: None, cells: &cells };
                        memtable.apply_row(positions[at].clone(), &row, None);
                        row.to_partition()
                    }
                    1 => {
                        let cells = [(1, value)];
                        let row = RowCells { timestamp: ts, expiry: None, cells: &cells };
                        memtable.apply_row(positions[at].clone(), &row, None);
                        row.to_partition()
                    }
                    2 => {
                        memtable.apply(positions[at].clone(), item(value, ts, None), None);
                        item(value, ts, None)
                    }
                    3 => {
                        memtable.apply(positions[at].clone(), deletion(ts), None);
                        deletion(ts)
                    }
                    4 => {
                        let tombstone = Tombstone { timestamp: ts, deletion_time_s: 1 };
                        memtable.apply_tombstone(positions[at].clone(), tombstone, None);
                        deletion(ts)
                    }
                    _ => {
                        let mut clustered = one_row(b"c", value, ts);
                        clustered.tombstone =
                            rng.gen_bool(0.3).then_some(Tombstone { timestamp: ts, deletion_time_s: 1 });
                        memtable.apply(positions[at].clone(), clustered.clone(), None);
                        clustered
                    }
                };
                model[at].merge(write);
                if rng.gen_bool(0.2) {
                    // Held across later writes: it keeps what it read.
                    let found = memtable.read_found(&positions[at], &[ClusteringRange::all()]);
                    readers.push((found.expect("written").into_partition(), as_read(model[at].clone())));
                }
                for (position, expected) in positions.iter().zip(&model) {
                    let read = memtable.read(position, &[ClusteringRange::all()]);
                    let read = read.map_or_else(Partition::default, |p| as_read((*p).clone()));
                    assert_eq!(read, as_read(expected.clone()), "seed {seed} step {step} key {position:?}");
                }
                let exact: usize = memtable.partitions.iter().map(|(p, slot)| entry_bytes(p, slot)).sum();
                assert_eq!(memtable.size_bytes(), exact, "seed {seed} step {step}");
            }
            for (read, expected) in readers {
                assert_eq!(as_read((*read).clone()), expected, "seed {seed}: a reader's partition changed under it");
            }
            for (position, flushed) in memtable.iter() {
                let at = positions.iter().position(|p| p == position).expect("a written key");
                assert_eq!(
                    as_read(flushed.into_owned()),
                    as_read(model[at].clone()),
                    "seed {seed}: what a flush writes"
                );
            }
        }
    }

    #[test]
    fn a_compact_item_costs_its_key_value_and_little_else() {
        let mut memtable = Memtable::default();
        let items = 1000u64;
        for i in 0..items {
            let key = Bytes::from(format!("key:{i:012}"));
            memtable.apply(PartitionPosition { token: i as i64, key }, item(&[b'x'; 1024], 1, None), None);
        }
        let per_item = memtable.size_bytes() / items as usize;
        let general = {
            let position = PartitionPosition { token: 0, key: Bytes::from_static(b"key:000000000000") };
            entry_bytes(&position, &Slot::General(Rc::new(item(&[b'x'; 1024], 1, None))))
        };
        // Key 16, value 1024, and the map's entry (the slot a 32-byte
        // `Bytes`, so reads share the value); the general form of the
        // same item is ~3.6 KB.
        assert!(per_item <= 16 + 1024 + 160, "{per_item} bytes per item (general form: {general})");
        assert!(general > 3 * per_item, "{per_item} bytes per item (general form: {general})");
    }

    #[test]
    fn release_lets_other_tasks_run_between_steps() {
        let mut memtable = Memtable::default();
        let partitions = RELEASE_STEP_PARTITIONS * 8;
        for i in 0..partitions as u64 {
            let position = PartitionPosition { token: i as i64, key: Bytes::from(i.to_be_bytes().to_vec()) };
            memtable.apply(position, Partition::default(), None);
        }
        assert_eq!(memtable.len(), partitions);
        shoal_io::block_on(async {
            let ticks = Rc::new(Cell::new(0usize));
            let counter = Rc::clone(&ticks);
            shoal_runtime::spawn(async move {
                loop {
                    counter.set(counter.get() + 1);
                    shoal_runtime::yield_now().await;
                }
            });
            memtable.release().await;
            // One step per RELEASE_STEP_PARTITIONS, each followed by a yield.
            assert!(ticks.get() >= 7, "the other task ran {} times during the release", ticks.get());
        });
    }
}
