//! The cache on its own: eviction order, negative entries, and memory
//! accounting against exact sums, under a budget small enough that
//! eviction and segment compaction happen all the time.

use bytes::Bytes;
use rand::{Rng, SeedableRng};

use super::*;
use crate::partition::{Cell, ClusteredRow, ColumnData, Row};

fn position(i: u64) -> PartitionPosition {
    // Any token will do here; make them collide now and then.
    PartitionPosition { token: (i % 1000) as i64, key: Bytes::from(format!("key-{i}")) }
}

fn partition(value_len: usize, ts: i64) -> Partition {
    let mut row = Row::default();
    row.columns.insert(1, ColumnData::Atomic(Cell::live(ts, Bytes::from(vec![b'v'; value_len]), None)));
    let mut p = Partition::default();
    p.rows.insert(Bytes::new(), ClusteredRow { clustering: Vec::new(), row });
    p
}

fn hit(cache: &RowCache, table: u32, p: &PartitionPosition) -> Option<Option<Partition>> {
    match cache.get(table, p) {
        Lookup::Hit(found) => Some(found.map(|f| Rc::unwrap_or_clone(f.into_partition()))),
        Lookup::Miss => None,
    }
}

/// Runs `test` with a fresh cache under `budget_bytes` of shard memory.
fn with_budget(budget_bytes: usize, test: impl FnOnce(&RowCache)) {
    crate::memory::set_budget_bytes(budget_bytes, 0.0);
    let cache = RowCache::new();
    test(&cache);
    crate::memory::set_budget_bytes(usize::MAX, 0.0);
}

#[test]
fn entries_come_back_and_negative_entries_say_absent() {
    with_budget(64 << 20, |cache| {
        let t = cache.register_table();
        let other = cache.register_table();
        cache.insert(t, &position(1), Some(&partition(100, 5)));
        cache.insert(t, &position(2), None);
        assert_eq!(hit(cache, t, &position(1)), Some(Some(partition(100, 5))));
        assert_eq!(hit(cache, t, &position(2)), Some(None));
        assert_eq!(hit(cache, t, &position(3)), None);
        assert_eq!(hit(cache, other, &position(1)), None);
        // A later insert replaces: a negative entry becomes a positive one.
        cache.insert(t, &position(2), Some(&partition(10, 6)));
        assert_eq!(hit(cache, t, &position(2)), Some(Some(partition(10, 6))));
        let stats = cache.stats(t);
        assert_eq!((stats.hits, stats.misses, stats.insertions, stats.partitions), (3, 1, 3, 2));
        cache.clear_table(t);
        assert_eq!(hit(cache, t, &position(1)), None);
        assert_eq!(cache.stats(t).partitions, 0);
    });
}

#[test]
fn the_least_recently_used_entry_goes_first() {
    // Room for a few segments: the cache evicts once they are full.
    with_budget(4 * SEGMENT_BYTES + (1 << 20), |cache| {
        let t = cache.register_table();
        let n = 5000u64;
        for i in 0..n {
            cache.insert(t, &position(i), Some(&partition(1000, 1)));
            // Key 0 is read after every insert: it stays the most recent.
            assert!(hit(cache, t, &position(0)).is_some(), "key 0 evicted at insert {i}");
        }
        let stats = cache.stats(t);
        assert!(stats.evictions > 0, "nothing was evicted: {stats:?}");
        // The survivors are exactly the newest keys (and key 0).
        let held: Vec<u64> = (1..n).filter(|i| cache.peek(t, &position(*i)).is_hit()).collect();
        assert_eq!(held.len() as u64 + 1, stats.partitions);
        let oldest_held = held[0];
        assert_eq!(held, (oldest_held..n).collect::<Vec<_>>());
        assert!(cache.memory_bytes() <= crate::memory::cache_limit_bytes());
    });
}

#[test]
fn accounting_matches_exact_sums_through_churn() {
    with_budget(6 * SEGMENT_BYTES, |cache| {
        let tables = [cache.register_table(), cache.register_table()];
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for step in 0..40_000u64 {
            let t = tables[rng.gen_range(0..2)];
            let key = rng.gen_range(0..3000);
            match rng.gen_range(0..10) {
                0 => cache.insert(t, &position(key), None),
                1..=5 => cache.insert(t, &position(key), Some(&partition(rng.gen_range(0..3000), step as i64))),
                6 => cache.invalidate(t, &position(key)),
                _ => {
                    let _ = cache.get(t, &position(key));
                }
            }
            if step % 997 == 0 {
                check_sums(cache, &tables);
            }
        }
        check_sums(cache, &tables);
        assert!(cache.stats(tables[0]).evictions > 0);
    });
}

/// Every figure the cache reports equals the sum over what it holds.
fn check_sums(cache: &RowCache, tables: &[u32]) {
    let inner = cache.inner.borrow();
    let ids: Vec<u32> = inner.slots.ids_in_use().collect();
    assert_eq!(ids.len(), inner.slots.in_use());
    assert_eq!(ids.len(), inner.index.len());
    let record_bytes: usize = ids.iter().map(|id| inner.segments.record_bytes(inner.slots.get(*id).location)).sum();
    assert_eq!(record_bytes, inner.segments.live_bytes());
    assert_eq!(record_bytes, inner.record_bytes);
    for t in tables {
        let of_table: Vec<&u32> = ids.iter().filter(|id| inner.slots.get(**id).table == *t).collect();
        let stats = inner.tables[t];
        assert_eq!(stats.partitions as usize, of_table.len());
        let bytes: usize = of_table.iter().map(|id| inner.segments.record_bytes(inner.slots.get(**id).location)).sum();
        assert_eq!(stats.bytes as usize, bytes);
    }
    for id in ids {
        let slot = inner.slots.get(id);
        let key = entry::key(inner.segments.body(slot.location));
        let found = inner.find(slot.table, &PartitionPosition { token: slot.token, key: Bytes::copy_from_slice(key) });
        assert_eq!(found, Some(id));
    }
    let memory = inner.memory_bytes();
    assert_eq!(crate::memory::report().cache_bytes, memory);
    assert!(memory <= crate::memory::cache_limit_bytes() + SEGMENT_BYTES, "cache {memory} over its limit");
}

#[test]
fn the_cache_shrinks_when_its_share_shrinks() {
    with_budget(16 * SEGMENT_BYTES, |cache| {
        let t = cache.register_table();
        for i in 0..12_000 {
            cache.insert(t, &position(i), Some(&partition(1000, 1)));
        }
        let before = cache.memory_bytes();
        assert!(before > 8 * SEGMENT_BYTES);
        crate::memory::set_budget_bytes(4 * SEGMENT_BYTES, 0.0);
        cache.fit_to_budget();
        assert!(cache.memory_bytes() <= 4 * SEGMENT_BYTES, "{} bytes held", cache.memory_bytes());
        assert!(cache.stats(t).partitions > 1000);
    });
}

impl<T> Lookup<T> {
    fn is_hit(&self) -> bool {
        matches!(self, Lookup::Hit(_))
    }
}

#[test]
fn pinned_tables_are_never_evicted() {
    with_budget(4 * SEGMENT_BYTES, |cache| {
        let pinned = cache.register_table();
        let other = cache.register_table();
        cache.set_pinned(pinned, true);
        for i in 0..500 {
            cache.insert(pinned, &position(i), Some(&partition(1000, 1)));
        }
        for i in 0..10_000 {
            cache.insert(other, &position(i), Some(&partition(1000, 1)));
        }
        assert_eq!(cache.stats(pinned).partitions, 500);
        assert_eq!(cache.stats(pinned).evictions, 0);
        assert!(cache.stats(other).evictions > 0);
        assert!((0..500).all(|i| cache.peek(pinned, &position(i)).is_hit()));
        // Unpinned, they age like any entry.
        cache.set_pinned(pinned, false);
        for i in 10_000..20_000 {
            cache.insert(other, &position(i), Some(&partition(1000, 1)));
        }
        assert!(cache.stats(pinned).evictions > 0);
    });
}
