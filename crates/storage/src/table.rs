//! One table's data on one shard: the storage interface the replica uses.
//!
//! Reads return owned, merged partitions restricted to the asked clustering
//! ranges: the shape an LSM read (memtables + SSTables merged by timestamp)
//! produces. Today the only source is one memtable.

use std::ops::Bound;

use crate::memtable::Memtable;
use crate::partition::{ClusteringRange, Partition, PartitionPosition, PartitionUpdate};

#[derive(Debug, Default)]
pub struct Table {
    memtable: Memtable,
}

impl Table {
    pub fn new() -> Table {
        Table::default()
    }

    pub fn apply(&mut self, position: PartitionPosition, update: PartitionUpdate) {
        self.memtable.apply(position, update);
    }

    /// The partition at `position`, holding only rows in `ranges`; `None`
    /// when nothing at all is stored for it.
    pub fn read(&self, position: &PartitionPosition, ranges: &[ClusteringRange]) -> Option<Partition> {
        self.memtable.read(position, ranges)
    }

    /// Up to `max_partitions` partitions between `from` and `to` in ring
    /// order, each restricted to `ranges`.
    pub fn scan(
        &self,
        from: Bound<&PartitionPosition>,
        to: Bound<&PartitionPosition>,
        ranges: &[ClusteringRange],
        max_partitions: usize,
    ) -> Vec<(PartitionPosition, Partition)> {
        assert!(max_partitions > 0);
        self.memtable.scan(from, to, ranges, max_partitions)
    }

    /// Drops every row of the table.
    pub fn truncate(&mut self) {
        self.memtable = Memtable::default();
    }

    pub fn memory_used_bytes(&self) -> usize {
        self.memtable.size_bytes()
    }
}
