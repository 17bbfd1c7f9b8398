//! The memtable: a table's recent writes on one shard, sorted by partition
//! position, merged in place as writes arrive.

use std::collections::BTreeMap;
use std::ops::Bound;

use crate::partition::{ClusteringRange, Partition, PartitionPosition, PartitionUpdate};

#[derive(Debug, Default)]
pub struct Memtable {
    partitions: BTreeMap<PartitionPosition, Partition>,
    /// Grows with every write (overwrites are not subtracted): an upper
    /// bound of the heap held, which is what flush decisions need.
    size_bytes: usize,
}

impl Memtable {
    pub fn apply(&mut self, position: PartitionPosition, update: PartitionUpdate) {
        self.size_bytes += position.key.len() + update.size_estimate_bytes();
        match self.partitions.get_mut(&position) {
            Some(current) => current.merge(update),
            None => {
                self.partitions.insert(position, update);
            }
        }
    }

    pub fn read(&self, position: &PartitionPosition, ranges: &[ClusteringRange]) -> Option<Partition> {
        self.partitions.get(position).map(|p| p.slice(ranges))
    }

    /// Up to `max_partitions` partitions in `(from, to)`, in ring order.
    pub fn scan(
        &self,
        from: Bound<&PartitionPosition>,
        to: Bound<&PartitionPosition>,
        ranges: &[ClusteringRange],
        max_partitions: usize,
    ) -> Vec<(PartitionPosition, Partition)> {
        self.partitions
            .range::<PartitionPosition, _>((from, to))
            .take(max_partitions)
            .map(|(pos, p)| (pos.clone(), p.slice(ranges)))
            .collect()
    }

    pub fn size_bytes(&self) -> usize {
        self.size_bytes
    }
}
