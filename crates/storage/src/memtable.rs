//! The memtable: a table's recent writes on one shard, sorted by partition
//! position, merged in place as writes arrive. Once full it is sealed
//! (read-only, shared by `Rc` with reads and the flush writing it out) and
//! a new one takes the writes. Its estimated size counts in the shard's
//! memory budget from the write that adds it until the memtable is dropped.
//!
//! Each partition is held by `Rc`, so a read of a whole partition shares
//! it instead of copying its rows (a memcached `get`, a CQL point read); a
//! write to a partition a read still holds copies it first
//! (`Rc::make_mut`), so a reader never sees a write land under it.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::rc::Rc;

use crate::commitlog::Position;
use crate::partition::{ClusteringRange, Partition, PartitionPosition, PartitionUpdate};

/// Partitions freed between yields by [`Memtable::release`]. Freeing costs
/// roughly a microsecond per small partition, so a step stays well under a
/// millisecond.
const RELEASE_STEP_PARTITIONS: usize = 256;

/// A partition's share of the memtable's own B-tree (leaves about 2/3
/// full), its `Rc` box (two counts beside it), its key and its estimated
/// heap.
fn entry_bytes(position: &PartitionPosition, partition: &Partition) -> usize {
    std::mem::size_of::<(PartitionPosition, Rc<Partition>)>() * 3 / 2
        + std::mem::size_of::<Partition>()
        + 2 * std::mem::size_of::<usize>()
        + position.key.len()
        + partition.size_estimate_bytes()
}

#[derive(Debug, Default)]
pub struct Memtable {
    partitions: BTreeMap<PartitionPosition, Rc<Partition>>,
    /// The partitions' estimated heap (`Partition::size_estimate_bytes`
    /// plus keys): a write adds what it adds and an overwritten cell stops
    /// counting, measured on the rows the write touches only.
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
            Some(current) => Rc::make_mut(current).merge_measured(update),
            None => {
                let added = entry_bytes(&position, &update);
                self.partitions.insert(position, Rc::new(update));
                added as isize
            }
        };
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
    /// own when the ranges take it whole, a copy of their rows otherwise.
    pub fn read(&self, position: &PartitionPosition, ranges: &[ClusteringRange]) -> Option<Rc<Partition>> {
        let partition = self.partitions.get(position)?;
        Some(match ClusteringRange::is_whole(ranges) {
            true => Rc::clone(partition),
            false => Rc::new(partition.slice(ranges)),
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
            .map(|(pos, p)| (pos.clone(), p.slice(ranges)))
            .collect()
    }

    pub fn contains(&self, position: &PartitionPosition) -> bool {
        self.partitions.contains_key(position)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&PartitionPosition, &Partition)> {
        self.partitions.iter().map(|(position, partition)| (position, &**partition))
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
    use crate::partition::{self, ClusteredRow, ColumnData, Row};

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
        let exact = |m: &Memtable| m.iter().map(|(p, part)| entry_bytes(p, part)).sum::<usize>();
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
    fn a_whole_read_shares_the_partition_and_a_later_write_leaves_it_be() {
        let mut memtable = Memtable::default();
        let position = PartitionPosition { token: 7, key: Bytes::from_static(b"k") };
        memtable.apply(position.clone(), one_row(b"r", b"old", 1), None);
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
