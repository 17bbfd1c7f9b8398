//! A shard's memory budget: what its memtables, row cache, index cache,
//! SSTable metadata (Bloom filters, summaries) and memcached item list hold, against the share of
//! `--memory` the shard was given (docs/design.md §5).
//!
//! Memtables are bounded by the replica's own budget (flushes start at half
//! of it, writers wait at the whole); the row cache takes what the others
//! leave and gives it back as they grow: every growth of a memtable that
//! puts the shard over its budget makes the cache shrink at once. The
//! figures are kept where the memory is allocated (a memtable's merge, an
//! SSTable's open, a cache segment's allocation) so the sum is exact for
//! what each part counts.
//!
//! One per shard, in a thread-local: a shard's thread is the only one that
//! touches it. Until a budget is set (tests, tools) it is unbounded.

use std::cell::Cell;

/// The row cache's floor: it keeps at least this much whatever the
/// memtables hold, so a write burst does not empty it entirely.
const CACHE_FLOOR_FRACTION: f64 = 0.05;

struct ShardMemory {
    budget_bytes: Cell<usize>,
    memtable_bytes: Cell<usize>,
    cache_bytes: Cell<usize>,
    metadata_bytes: Cell<usize>,
    items_index_bytes: Cell<usize>,
    /// The most the index cache may hold (its own limit).
    index_capacity_bytes: Cell<usize>,
}

thread_local! {
    static MEMORY: ShardMemory = const {
        ShardMemory {
            budget_bytes: Cell::new(usize::MAX),
            memtable_bytes: Cell::new(0),
            cache_bytes: Cell::new(0),
            metadata_bytes: Cell::new(0),
            items_index_bytes: Cell::new(0),
            index_capacity_bytes: Cell::new(0),
        }
    };
}

/// What a shard's memory holds, by part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryReport {
    /// `usize::MAX` when no budget was set.
    pub budget_bytes: usize,
    pub memtable_bytes: usize,
    /// Row cache: its segments, slots and index.
    pub cache_bytes: usize,
    /// Decoded partition-index pages.
    pub index_cache_bytes: usize,
    /// Bloom filters and summaries of open SSTables.
    pub sstable_metadata_bytes: usize,
    /// memcached items' LRU list (`replica::item_lru`).
    pub items_index_bytes: usize,
}

impl MemoryReport {
    pub fn used_bytes(&self) -> usize {
        self.memtable_bytes
            + self.cache_bytes
            + self.index_cache_bytes
            + self.sstable_metadata_bytes
            + self.items_index_bytes
    }
}

/// Gives this shard `bytes` of memory, and the index cache its fraction of
/// the half that memtables never take.
pub fn set_budget_bytes(bytes: usize, index_cache_fraction: f64) {
    assert!((0.0..=1.0).contains(&index_cache_fraction), "index_cache_fraction {index_cache_fraction}");
    let index_capacity_bytes = (bytes as f64 / 2.0 * index_cache_fraction) as usize;
    MEMORY.with(|m| {
        m.budget_bytes.set(bytes);
        m.index_capacity_bytes.set(index_capacity_bytes);
    });
    crate::sstable::index_cache::set_capacity_bytes(index_capacity_bytes);
    crate::cache::local().fit_to_budget();
}

pub fn report() -> MemoryReport {
    MEMORY.with(|m| MemoryReport {
        budget_bytes: m.budget_bytes.get(),
        memtable_bytes: m.memtable_bytes.get(),
        cache_bytes: m.cache_bytes.get(),
        index_cache_bytes: crate::sstable::index_cache::stats().bytes,
        sstable_metadata_bytes: m.metadata_bytes.get(),
        items_index_bytes: m.items_index_bytes.get(),
    })
}

/// What this shard's memtables hold, sealed ones included.
pub fn memtable_bytes() -> usize {
    MEMORY.with(|m| m.memtable_bytes.get())
}

/// The most the row cache may hold now: the budget less everything else,
/// but never below its floor.
pub(crate) fn cache_limit_bytes() -> usize {
    let r = report();
    if r.budget_bytes == usize::MAX {
        return usize::MAX;
    }
    let others = r.memtable_bytes + r.index_cache_bytes + r.sstable_metadata_bytes + r.items_index_bytes;
    let floor = (r.budget_bytes as f64 * CACHE_FLOOR_FRACTION) as usize;
    r.budget_bytes.saturating_sub(others).max(floor)
}

/// A memtable grew (or, negative, shrank) by `delta` bytes; past the budget
/// the cache gives memory back.
pub(crate) fn memtables_changed(delta: isize) {
    // Runs on every write: only Cells here. The index cache's capacity
    // stands in for its bytes, so the exact test runs only when the shard
    // may be over.
    let may_be_over = MEMORY.with(|m| {
        m.memtable_bytes.set(m.memtable_bytes.get().saturating_add_signed(delta));
        let most = m.memtable_bytes.get()
            + m.cache_bytes.get()
            + m.metadata_bytes.get()
            + m.items_index_bytes.get()
            + m.index_capacity_bytes.get();
        delta > 0 && m.cache_bytes.get() > 0 && most > m.budget_bytes.get()
    });
    if may_be_over && MEMORY.with(|m| m.cache_bytes.get()) > cache_limit_bytes() {
        crate::cache::local().fit_to_budget();
    }
}

pub(crate) fn set_cache_bytes(bytes: usize) {
    MEMORY.with(|m| m.cache_bytes.set(bytes));
}

pub(crate) fn metadata_changed(delta: isize) {
    MEMORY.with(|m| m.metadata_bytes.set(m.metadata_bytes.get().saturating_add_signed(delta)));
}

/// The memcached item list grew (or, negative, shrank) by `delta` bytes.
/// The cache makes room at its next change ([`cache_limit_bytes`]).
pub fn items_index_changed(delta: isize) {
    MEMORY.with(|m| m.items_index_bytes.set(m.items_index_bytes.get().saturating_add_signed(delta)));
}
