//! The partitions this shard reads and writes most, sampled for a while
//! (nodetool toppartitions), with Cassandra's and ScyllaDB's algorithm:
//! Metwally's space-saving counters. At most `capacity` partitions are
//! counted; a partition seen when all are taken replaces the one counted
//! least, inheriting its count, which becomes its possible overcount
//! (`error`). A partition seen more often than `1/capacity` of the
//! operations is always among those counted.
//!
//! Sampling costs nothing while off (one `RefCell` look per read or
//! write); while on, a write or read of a partition not counted yet scans
//! the counters for the least (`capacity` is at most
//! [`CAPACITY_MAX`]), which is why sampling is bounded in time. The
//! shard's `Database` holds the sampler under way and feeds it.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use uuid::Uuid;

/// The most partitions one sampler counts, per kind (reads, writes).
pub const CAPACITY_MAX: usize = 1024;
/// Distinct partitions counted for the cardinality, at most.
const CARDINALITY_MAX: usize = 1 << 16;

/// A partition counted: its table and key, how often it was seen, and by
/// how much that may overcount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopPartition {
    pub table: Uuid,
    pub key: Bytes,
    pub count: u64,
    pub error: u64,
}

/// What a sampling found on this shard.
#[derive(Debug, Clone, Default)]
pub struct TopPartitions {
    pub reads: Vec<TopPartition>,
    pub writes: Vec<TopPartition>,
    /// Distinct partitions read (written), counted up to 65,536.
    pub read_cardinality: usize,
    pub write_cardinality: usize,
}

/// Space-saving counters of one kind of operation.
#[derive(Debug)]
struct Counters {
    capacity: usize,
    counted: HashMap<(Uuid, Bytes), (u64, u64)>,
    /// Tokens seen, for the cardinality (bounded).
    seen: HashSet<(Uuid, i64)>,
}

impl Counters {
    fn new(capacity: usize) -> Counters {
        Counters { capacity, counted: HashMap::new(), seen: HashSet::new() }
    }

    fn note(&mut self, table: Uuid, token: i64, key: &Bytes) {
        if self.seen.len() < CARDINALITY_MAX {
            self.seen.insert((table, token));
        }
        let id = (table, key.clone());
        if let Some((count, _)) = self.counted.get_mut(&id) {
            *count += 1;
            return;
        }
        if self.counted.len() < self.capacity {
            self.counted.insert(id, (1, 0));
            return;
        }
        let least =
            self.counted.iter().min_by_key(|(_, (count, _))| *count).map(|(id, (count, _))| (id.clone(), *count));
        if let Some((evicted, least)) = least {
            self.counted.remove(&evicted);
            self.counted.insert(id, (least + 1, least));
        }
    }

    fn into_top(self) -> (Vec<TopPartition>, usize) {
        let mut top: Vec<TopPartition> = self
            .counted
            .into_iter()
            .map(|((table, key), (count, error))| TopPartition { table, key, count, error })
            .collect();
        top.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
        (top, self.seen.len())
    }
}

/// A sampling under way on this shard.
#[derive(Debug)]
pub(crate) struct Sampler {
    /// The tables sampled; all when empty.
    tables: HashSet<Uuid>,
    reads: Counters,
    writes: Counters,
}

impl Sampler {
    /// Counts the reads and writes of `tables` (all when empty), at most
    /// `capacity` partitions of each kind.
    pub(crate) fn new(tables: HashSet<Uuid>, capacity: usize) -> Sampler {
        assert!((1..=CAPACITY_MAX).contains(&capacity), "capacity {capacity} out of 1..={CAPACITY_MAX}");
        Sampler { tables, reads: Counters::new(capacity), writes: Counters::new(capacity) }
    }

    fn wants(&self, table: Uuid) -> bool {
        self.tables.is_empty() || self.tables.contains(&table)
    }

    pub(crate) fn note_write(&mut self, table: Uuid, token: i64, key: &Bytes) {
        if self.wants(table) {
            self.writes.note(table, token, key);
        }
    }

    pub(crate) fn note_read(&mut self, table: Uuid, token: i64, key: &Bytes) {
        if self.wants(table) {
            self.reads.note(table, token, key);
        }
    }

    /// What it counted, most seen first.
    pub(crate) fn finish(self) -> TopPartitions {
        let (reads, read_cardinality) = self.reads.into_top();
        let (writes, write_cardinality) = self.writes.into_top();
        TopPartitions { reads, writes, read_cardinality, write_cardinality }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> Bytes {
        Bytes::from(vec![n])
    }

    #[test]
    fn counts_exactly_below_capacity_and_keeps_the_frequent_past_it() {
        let table = Uuid::from_u128(1);
        let mut counters = Counters::new(3);
        for _ in 0..10 {
            counters.note(table, 7, &key(7));
        }
        for n in 0..20 {
            counters.note(table, 1000 + i64::from(n), &key(100 + n));
        }
        counters.note(table, 7, &key(7));
        let (top, cardinality) = counters.into_top();
        assert_eq!(cardinality, 21);
        assert_eq!(top.len(), 3);
        assert_eq!((top[0].key.clone(), top[0].count, top[0].error), (key(7), 11, 0));
        // The others replaced each other: each count is an overcount by at
        // most its error.
        assert!(top[1..].iter().all(|t| t.count > t.error && t.error > 0));
    }
}
