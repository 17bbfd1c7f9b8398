//! The shard's cache of partition-index pages, for point reads.
//!
//! A point read that misses memory goes Bloom filter → summary → one index
//! page → the data chunks. The summary and the filter are in RAM; the index
//! page is not, and reading it costs a disk request, a checksum and a walk
//! of up to [`INDEX_PAGE_ENTRIES`](super::format::INDEX_PAGE_ENTRIES)
//! entries, for the one entry the read wants. Keeping pages turns that step
//! into a lookup and a binary search.
//!
//! What it owns: checked pages ([`IndexPage`]: the encoded entries and
//! the table of where each starts, as stored), keyed by (SSTable id, page number), each an
//! `Rc<IndexPage>` so a hit hands out the page without copying it (a page
//! of 128 partitions with 8-byte keys and no clustering samples costs
//! about 3.5 KiB; decoded it cost 13). The SSTable id is shard-unique
//! (`next_sstable_id`, taken at open): generations are only unique within
//! one table.
//!
//! Invariants:
//! - One cache per shard (thread-local: a shard is one thread), so no locks.
//! - `bytes` is the sum of the pages' [`page_bytes`] estimates, and never
//!   exceeds the capacity after any call returns. Capacity 0 (the default)
//!   means off: nothing is stored, and lookups are not counted.
//! - A page is inserted only by a point read of a live SSTable, and an
//!   SSTable forgets its pages when it is dropped, so no page outlives its
//!   SSTable (ids are never reused, so a stale page could not be found
//!   anyway; forgetting returns the memory at once).
//! - Least recently used pages are evicted first. A hit only notes its
//!   use tick on the page (a hash lookup and a store, no reordering); the
//!   LRU order holds each page once, under a tick no later than its last
//!   use, and eviction moves a page found there with a later use to that
//!   use before going on: the page evicted is still the least recently
//!   used, and each hit costs at most one move, paid only when the cache
//!   is full.
//!
//! What it must never do: be populated by scans or compaction. They read
//! every page once, in order; caching them would evict the pages point
//! reads come back to.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::mem::size_of;
use std::rc::Rc;

use hashbrown::HashMap;

use super::index_page::IndexPage;

/// A cached index page.
pub type Page = Rc<IndexPage>;

/// (shard-unique SSTable id, page number).
type Key = (u64, usize);

/// This shard's cache: its counters since the shard started, and its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IndexCacheStats {
    /// Lookups answered from the cache (since the shard started).
    pub hits: u64,
    /// Lookups that had to read the page (since the shard started).
    pub misses: u64,
    /// Estimated heap bytes the cached pages hold ([`page_bytes`]).
    pub bytes: usize,
    pub pages: usize,
    pub capacity_bytes: usize,
}

/// What the allocator adds to each heap allocation (glibc: an 8-byte
/// header, sizes rounded up to 16), counted once per allocation.
const ALLOCATION_OVERHEAD_BYTES: usize = 16;

/// The bytes a cached page costs beyond its entries and their keys: the
/// `Rc` counts and the allocation's overhead, plus its element in the hash
/// map and in the LRU B-tree, doubled because a hash table may be half
/// empty and B-tree nodes only half full.
pub const PAGE_OVERHEAD_BYTES: usize =
    2 * size_of::<usize>() + ALLOCATION_OVERHEAD_BYTES + 2 * (size_of::<(Key, Slot)>() + size_of::<(u64, Key)>());

/// The estimated heap bytes of a page while cached: its own
/// ([`IndexPage::heap_bytes`], one allocation) and [`PAGE_OVERHEAD_BYTES`].
pub fn page_bytes(page: &IndexPage) -> usize {
    PAGE_OVERHEAD_BYTES + ALLOCATION_OVERHEAD_BYTES + page.heap_bytes()
}

struct Slot {
    page: Page,
    bytes: usize,
    /// The page's last use tick.
    used: u64,
    /// The slot's key in `IndexCache::lru`: at most `used`.
    queued: u64,
}

/// An LRU map of pages bounded by bytes. A hit is a hash lookup; inserts
/// and evictions are O(log pages); forgetting an SSTable is O(pages).
struct IndexCache {
    pages: HashMap<Key, Slot>,
    /// Queued tick → page, each page once: the first is the least
    /// recently used once moved to its last use (module doc).
    lru: BTreeMap<u64, Key>,
    /// The last use tick given out; only grows.
    tick: u64,
    bytes: usize,
    capacity_bytes: usize,
    hits: u64,
    misses: u64,
}

impl IndexCache {
    fn new() -> IndexCache {
        IndexCache {
            pages: HashMap::new(),
            lru: BTreeMap::new(),
            tick: 0,
            bytes: 0,
            capacity_bytes: 0,
            hits: 0,
            misses: 0,
        }
    }

    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    fn get(&mut self, key: Key) -> Option<Page> {
        if self.capacity_bytes == 0 {
            return None;
        }
        let tick = self.next_tick();
        let Some(slot) = self.pages.get_mut(&key) else {
            self.misses += 1;
            return None;
        };
        self.hits += 1;
        slot.used = tick;
        Some(Rc::clone(&slot.page))
    }

    /// Caches `page` as `key` unless it alone exceeds the capacity,
    /// evicting least recently used pages to make room.
    fn insert(&mut self, key: Key, page: Page) {
        // Two reads of one page may both miss and both insert: the later
        // replaces the earlier.
        self.remove(key);
        let bytes = page_bytes(&page);
        if bytes > self.capacity_bytes {
            return;
        }
        self.evict_to(self.capacity_bytes - bytes);
        let used = self.next_tick();
        self.pages.insert(key, Slot { page, bytes, used, queued: used });
        self.lru.insert(used, key);
        self.bytes += bytes;
        assert!(self.bytes <= self.capacity_bytes, "the cache holds no more than its capacity");
        assert_eq!(self.pages.len(), self.lru.len(), "every page is in the LRU order once");
    }

    fn remove(&mut self, key: Key) {
        if let Some(slot) = self.pages.remove(&key) {
            let removed = self.lru.remove(&slot.queued);
            assert_eq!(removed, Some(key), "a cached page is in the LRU order under its tick");
            self.bytes -= slot.bytes;
        }
    }

    /// Evicts least recently used pages until at most `bytes` are held.
    fn evict_to(&mut self, bytes: usize) {
        while self.bytes > bytes {
            let Some((queued, key)) = self.lru.pop_first() else { break };
            let Some(slot) = self.pages.get_mut(&key) else { panic!("a page in the LRU order is cached") };
            assert_eq!(slot.queued, queued, "a page is queued under its slot's tick");
            if slot.used > queued {
                // Used since it was queued: to its place, and go on.
                slot.queued = slot.used;
                self.lru.insert(slot.used, key);
                continue;
            }
            self.bytes -= slot.bytes;
            self.pages.remove(&key);
        }
        assert!(self.bytes <= bytes, "an empty cache holds no bytes");
    }

    fn forget(&mut self, sstable: u64) {
        let keys: Vec<Key> = self.pages.keys().filter(|key| key.0 == sstable).copied().collect();
        for key in keys {
            self.remove(key);
        }
    }

    fn set_capacity_bytes(&mut self, bytes: usize) {
        self.capacity_bytes = bytes;
        self.evict_to(bytes);
    }

    fn stats(&self) -> IndexCacheStats {
        IndexCacheStats {
            hits: self.hits,
            misses: self.misses,
            bytes: self.bytes,
            pages: self.pages.len(),
            capacity_bytes: self.capacity_bytes,
        }
    }
}

thread_local! {
    static CACHE: RefCell<IndexCache> = RefCell::new(IndexCache::new());
    /// The last SSTable id given out on this shard.
    static LAST_SSTABLE_ID: Cell<u64> = const { Cell::new(0) };
}

/// Sets this shard's cache capacity; shrinking it evicts at once, and 0
/// turns the cache off (dropping every page).
pub fn set_capacity_bytes(bytes: usize) {
    CACHE.with(|cache| cache.borrow_mut().set_capacity_bytes(bytes));
}

/// This shard's cache counters and size.
pub fn stats() -> IndexCacheStats {
    CACHE.with(|cache| cache.borrow().stats())
}

/// A fresh SSTable id, unique on this shard for the life of the process.
pub(super) fn next_sstable_id() -> u64 {
    LAST_SSTABLE_ID.with(|last| {
        let id = last.get() + 1;
        last.set(id);
        id
    })
}

/// The cached page, counting a hit or a miss (nothing when the cache is
/// off).
pub(super) fn get(sstable: u64, page: usize) -> Option<Page> {
    CACHE.with(|cache| cache.borrow_mut().get((sstable, page)))
}

/// Caches a page a point read read; a no-op when the cache is off or
/// the page is larger than the whole capacity.
pub(super) fn insert(sstable: u64, page: usize, entries: Page) {
    CACHE.with(|cache| cache.borrow_mut().insert((sstable, page), entries));
}

/// Drops every page of `sstable` (when the SSTable is dropped).
pub(super) fn forget(sstable: u64) {
    // An SSTable dropped while the shard's thread exits may find the cache
    // already destroyed: then there is nothing left to forget.
    let _ = CACHE.try_with(|cache| cache.borrow_mut().forget(sstable));
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::codec::Encoder;
    use crate::partition::PartitionPosition;
    use crate::sstable::IndexEntry;

    fn page(first: u32, entries: u32) -> Page {
        let entries: Vec<IndexEntry> = (first..first + entries)
            .map(|i| IndexEntry {
                position: PartitionPosition { token: i64::from(i), key: Bytes::from(i.to_be_bytes().to_vec()) },
                offset: u64::from(i) * 100,
                len: 100,
                samples: Vec::new(),
            })
            .collect();
        let mut body = Vec::new();
        entries.iter().for_each(|e| e.encode(&mut Encoder { out: &mut body }));
        // A version-1 body (entries only), given its offsets when opened.
        Rc::new(IndexPage::open(&body, 1, &entries[0].position, u64::MAX).expect("a valid page"))
    }

    fn with_capacity(bytes: usize) -> IndexCache {
        let mut cache = IndexCache::new();
        cache.set_capacity_bytes(bytes);
        cache
    }

    #[test]
    fn page_bytes_counts_the_body_with_its_entry_offsets() {
        let three = page(0, 3);
        // An entry: an 8-byte token, a 4-byte key and its length, offset,
        // length and sample count of a byte or two each, and its 4-byte
        // offset in the page's table; then the count.
        assert!(three.heap_bytes() >= 3 * (8 + 5 + 3 + 4) + 4);
        assert_eq!(page_bytes(&three), PAGE_OVERHEAD_BYTES + ALLOCATION_OVERHEAD_BYTES + three.heap_bytes());
        assert!(page_bytes(&page(0, 6)) > page_bytes(&three));
    }

    #[test]
    fn the_least_recently_used_page_goes_first() {
        let one = page_bytes(&page(0, 4));
        let mut cache = with_capacity(3 * one);
        for n in 0..3 {
            cache.insert((1, n), page(0, 4));
        }
        // Page 0 is used again: page 1 is now the least recently used.
        assert!(cache.get((1, 0)).is_some());
        cache.insert((1, 3), page(0, 4));
        assert!(cache.get((1, 1)).is_none(), "page 1 evicted");
        assert!(cache.get((1, 0)).is_some() && cache.get((1, 2)).is_some() && cache.get((1, 3)).is_some());
        // Now 2 is the least recently used, then 0.
        assert!(cache.get((1, 0)).is_some());
        cache.insert((2, 0), page(0, 4));
        assert!(cache.get((1, 3)).is_some());
        assert!(cache.get((1, 2)).is_none(), "page 2 evicted");
        assert_eq!(cache.stats().pages, 3);
    }

    /// Hits that only note their tick still evict in exact LRU order:
    /// seeded random gets and inserts against a list in use order.
    #[test]
    fn evictions_follow_a_model_lru() {
        use rand::{Rng, SeedableRng};
        let seed = std::env::var("SHOAL_MODEL_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(29);
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut cache = with_capacity(8 * page_bytes(&page(0, 4)));
        // Least recently used first.
        let mut model: Vec<Key> = Vec::new();
        for step in 0..5_000 {
            let key = (rng.gen_range(0..3), rng.gen_range(0..8));
            if rng.gen_bool(0.6) {
                let hit = cache.get(key).is_some();
                assert_eq!(hit, model.contains(&key), "seed {seed}, step {step}: get {key:?}");
                if !hit {
                    continue;
                }
            } else {
                cache.insert(key, page(0, 4));
            }
            model.retain(|k| *k != key);
            model.push(key);
            if model.len() > 8 {
                model.remove(0);
            }
            assert_eq!(cache.stats().pages, model.len(), "seed {seed}, step {step}");
        }
    }

    #[test]
    fn bytes_never_exceed_the_capacity() {
        // A capacity that is no multiple of any page's size.
        let capacity = 5 * page_bytes(&page(0, 7)) + 123;
        let mut cache = with_capacity(capacity);
        let mut held = BTreeMap::new();
        for n in 0..200usize {
            let entries = page(n as u32, 1 + (n as u32 * 7) % 23);
            held.insert(n, page_bytes(&entries));
            cache.insert((n as u64 % 3, n), entries);
            let stats = cache.stats();
            assert!(stats.bytes <= capacity, "{} > {capacity} after insert {n}", stats.bytes);
            // The count is exact: the sum of the cached pages' sizes.
            let sum: usize = cache.pages.values().map(|s| s.bytes).sum();
            assert_eq!(stats.bytes, sum);
            assert!(cache.pages.contains_key(&(n as u64 % 3, n)), "the newest page fits");
        }
        // A page larger than the whole cache is not cached, and evicts
        // nothing.
        let pages = cache.stats().pages;
        cache.insert((9, 0), page(0, 1_000));
        assert!(!cache.pages.contains_key(&(9, 0)));
        assert_eq!(cache.stats().pages, pages);
        // Shrinking evicts at once; zero empties the cache.
        cache.set_capacity_bytes(capacity / 2);
        assert!(cache.stats().bytes <= capacity / 2);
        cache.set_capacity_bytes(0);
        assert_eq!((cache.stats().bytes, cache.stats().pages), (0, 0));
    }

    #[test]
    fn a_reinserted_page_replaces_the_first_copy() {
        let mut cache = with_capacity(1 << 20);
        cache.insert((1, 0), page(0, 4));
        cache.insert((1, 0), page(0, 8));
        assert_eq!(cache.stats().pages, 1);
        assert_eq!(cache.stats().bytes, page_bytes(&page(0, 8)));
        assert_eq!(cache.get((1, 0)).map(|p| p.len()), Some(8));
    }

    #[test]
    fn hits_and_misses_are_counted_only_while_on() {
        let mut cache = IndexCache::new();
        cache.insert((1, 0), page(0, 4));
        assert!(cache.get((1, 0)).is_none(), "capacity 0 caches nothing");
        assert_eq!((cache.stats().hits, cache.stats().misses), (0, 0), "and counts nothing");
        cache.set_capacity_bytes(1 << 20);
        assert!(cache.get((1, 0)).is_none());
        cache.insert((1, 0), page(0, 4));
        let hit = cache.get((1, 0));
        assert!(hit.as_ref().is_some_and(|p| Rc::ptr_eq(p, &cache.pages[&(1, 0)].page)), "a hit shares the page");
        assert!(cache.get((1, 1)).is_none());
        let stats = cache.stats();
        assert_eq!((stats.hits, stats.misses, stats.pages), (1, 2, 1));
        assert_eq!(stats.capacity_bytes, 1 << 20);
    }

    #[test]
    fn forgetting_an_sstable_drops_only_its_pages() {
        let mut cache = with_capacity(1 << 20);
        for sstable in 1..=3 {
            for n in 0..4 {
                cache.insert((sstable, n), page(0, 2));
            }
        }
        cache.forget(2);
        assert_eq!(cache.stats().pages, 8);
        assert_eq!(cache.stats().bytes, 8 * page_bytes(&page(0, 2)));
        assert!((0..4).all(|n| cache.get((2, n)).is_none()));
        assert!((0..4).all(|n| cache.get((1, n)).is_some() && cache.get((3, n)).is_some()));
        assert_eq!(cache.lru.len(), 8);
    }

    #[test]
    fn the_shard_cache_and_ids() {
        // Each test runs on its own thread, so this is a fresh shard.
        assert_eq!(stats(), IndexCacheStats::default());
        let (a, b) = (next_sstable_id(), next_sstable_id());
        assert!(b > a);
        set_capacity_bytes(1 << 20);
        insert(a, 0, page(0, 2));
        insert(b, 0, page(0, 2));
        assert!(get(a, 0).is_some());
        forget(a);
        assert!(get(a, 0).is_none());
        let stats = stats();
        assert_eq!((stats.hits, stats.misses, stats.pages), (1, 1, 1));
        set_capacity_bytes(0);
        assert_eq!(super::stats().pages, 0);
    }
}
