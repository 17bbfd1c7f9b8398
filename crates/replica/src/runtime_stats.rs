//! What ScyllaDB's `system.runtime_info` shows of one shard: its tables'
//! memtables, row cache and SSTables summed, and its memory budget. The
//! coordinator adds the shards' figures up.

use crate::database::Database;

/// One shard's figures (or several shards' summed with `+`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RuntimeStats {
    pub memtable_bytes: u64,
    pub memtable_partitions: u64,
    pub cache_bytes: u64,
    pub cache_partitions: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    /// Bytes of the Data components of live SSTables.
    pub disk_bytes: u64,
    /// The shard's memory budget; `None` when it has none.
    pub memory_budget_bytes: Option<u64>,
    /// What holds memory within the budget: memtables, cache, index cache,
    /// SSTable metadata, the memcached items' index.
    pub memory_used_bytes: u64,
}

impl std::ops::Add for RuntimeStats {
    type Output = RuntimeStats;

    fn add(self, other: RuntimeStats) -> RuntimeStats {
        RuntimeStats {
            memtable_bytes: self.memtable_bytes + other.memtable_bytes,
            memtable_partitions: self.memtable_partitions + other.memtable_partitions,
            cache_bytes: self.cache_bytes + other.cache_bytes,
            cache_partitions: self.cache_partitions + other.cache_partitions,
            cache_hits: self.cache_hits + other.cache_hits,
            cache_misses: self.cache_misses + other.cache_misses,
            disk_bytes: self.disk_bytes + other.disk_bytes,
            memory_budget_bytes: match (self.memory_budget_bytes, other.memory_budget_bytes) {
                (Some(a), Some(b)) => Some(a + b),
                (one, other) => one.or(other),
            },
            memory_used_bytes: self.memory_used_bytes + other.memory_used_bytes,
        }
    }
}

impl Database {
    /// This shard's figures now.
    pub fn runtime_stats(&self) -> RuntimeStats {
        let memory = shoal_storage::memory::report();
        let used = memory.memtable_bytes
            + memory.cache_bytes
            + memory.index_cache_bytes
            + memory.sstable_metadata_bytes
            + memory.items_index_bytes;
        let mut stats = RuntimeStats {
            memory_budget_bytes: (memory.budget_bytes != usize::MAX).then_some(memory.budget_bytes as u64),
            memory_used_bytes: used as u64,
            ..RuntimeStats::default()
        };
        for table in self.tables().values() {
            let cache = table.cache_stats();
            stats.memtable_bytes += table.memory_used_bytes() as u64;
            stats.memtable_partitions += table.memtable_partitions() as u64;
            stats.cache_bytes += cache.bytes;
            stats.cache_partitions += cache.partitions;
            stats.cache_hits += cache.hits;
            stats.cache_misses += cache.misses;
            stats.disk_bytes += table.sstable_set().iter().map(|s| s.data_bytes()).sum::<u64>();
        }
        stats
    }
}

#[cfg(test)]
mod tests {
    use super::RuntimeStats;

    #[test]
    fn shards_add_up_and_a_budget_counts_once_known() {
        let one =
            RuntimeStats { memtable_bytes: 10, cache_hits: 2, memory_budget_bytes: Some(100), ..Default::default() };
        let other =
            RuntimeStats { memtable_bytes: 5, cache_misses: 1, memory_budget_bytes: None, ..Default::default() };
        let sum = one + other;
        assert_eq!((sum.memtable_bytes, sum.cache_hits, sum.cache_misses), (15, 2, 1));
        assert_eq!(sum.memory_budget_bytes, Some(100));
        assert_eq!((one + one).memory_budget_bytes, Some(200));
    }
}
