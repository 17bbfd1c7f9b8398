//! The row cache: a shard's partitions as its SSTables hold them, in
//! memory, ScyllaDB's model (docs/design.md §5, docs/read-path.md).
//!
//! An entry is the merge of everything the table's SSTables hold for one
//! partition — the whole partition, or the fact that there is none (a
//! negative entry). It never holds memtable data: a read merges the entry
//! with the memtables, as it would merge the SSTables. So an entry stays
//! true while memtables take writes, and changes only when the SSTable set
//! changes content: a flush merges the flushed memtable into the entries
//! of its partitions (and adds the partitions no older SSTable holds), so
//! a flush warms the cache instead of cooling it; TRUNCATE and DROP empty
//! it; compaction changes no content and leaves it alone. `Table` keeps
//! those rules (a population that overlaps a flush is not inserted).
//!
//! One cache per shard, shared by the shard's tables, with one LRU list:
//! the least recently used partition of any table goes first when the
//! cache must shrink to its share of the shard's memory
//! ([`crate::memory`]). Entries live in log-structured segments
//! ([`segments`]), found through one hash index keyed by table and token.
//!
//! Per-entry memory beyond key and data: a 32-byte slot, the index's
//! ~5 bytes (4-byte slot id and a control byte, at a load of 1/2 to 7/8),
//! an 8-byte record header and 2-3 bytes of entry framing; the compact
//! layout of single-row partitions (`entry`) adds 10 bytes (timestamp,
//! flags) and 1-2 per cell. docs/read-path.md has the measured figures.

mod copy_out;
mod entry;
pub mod saved;
pub mod segments;
mod slots;

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use copy_out::CopyOut;
use hashbrown::{HashMap, HashTable};

use crate::found::{Found, SharedRow};
use crate::partition::{Partition, PartitionPosition};
use segments::{Segments, RECORD_HEADER_BYTES, SEGMENT_BYTES};
use slots::{Location, Slots, NIL};

/// Entries larger than this are not cached (a partition this large is read
/// from its SSTables, by the clustering ranges asked).
pub const MAX_ENTRY_BYTES: usize = SEGMENT_BYTES / 4;

/// A segment is compacted to make room only when that frees at least this
/// much: compacting moves the segment's live bytes, so a small gain would
/// cost a whole segment's copy per entry inserted.
const MIN_COMPACTION_GAIN_BYTES: usize = SEGMENT_BYTES / 8;

/// One table's counters and sizes in the cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    pub insertions: u64,
    pub evictions: u64,
    /// Entries held, negative ones included.
    pub partitions: u64,
    /// Bytes of the entries' records (keys, data, headers).
    pub bytes: u64,
}

/// An entry at least this large that a read copies out is kept, shared,
/// for the reads after it (`Inner::shared`): a pipeline of gets of one
/// large item holds one copy of it, not one per get.
const SHARED_MIN_BYTES: usize = 16 * 1024;

/// What the cache knows of a partition: `T` a [`Partition`], or what a
/// read found ([`Found`]).
pub enum Lookup<T = Partition> {
    /// Cached: the SSTables' partition, or `None` if they hold none.
    Hit(Option<T>),
    Miss,
}

struct Inner {
    slots: Slots,
    segments: Segments,
    /// Slot ids, hashed by (table, token).
    index: HashTable<u32>,
    tables: HashMap<u32, CacheStats>,
    /// Tables whose entries are never evicted (`in_memory`).
    pinned: std::collections::HashSet<u32>,
    /// Bytes of all live records (the sum of the tables' `bytes`).
    record_bytes: usize,
    scratch: Vec<u8>,
    /// The last large single row a read copied out (slot id and copy),
    /// handed to the reads of the same entry after it until the entry
    /// goes: bounded to one entry, counted in the fixed part (as is
    /// `copy_out`'s chunk).
    shared: Option<(u32, SharedRow)>,
    copy_out: CopyOut,
}

pub struct RowCache {
    inner: RefCell<Inner>,
    next_table: Cell<u32>,
}

thread_local! {
    static CACHE: Rc<RowCache> = Rc::new(RowCache::new());
}

/// This shard's row cache.
pub fn local() -> Rc<RowCache> {
    CACHE.with(Rc::clone)
}

fn hash(table: u32, token: i64) -> u64 {
    // Tokens are murmur3 outputs, already well mixed; the table id moves
    // tables apart.
    (token as u64) ^ u64::from(table).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

impl Inner {
    fn find(&self, table: u32, position: &PartitionPosition) -> Option<u32> {
        let Inner { slots, segments, index, .. } = self;
        index
            .find(hash(table, position.token), |id| {
                let slot = slots.get(*id);
                slot.table == table
                    && slot.token == position.token
                    && entry::key(segments.body(slot.location)) == &position.key[..]
            })
            .copied()
    }

    fn remove(&mut self, id: u32) {
        if self.shared.as_ref().is_some_and(|(shared, _)| *shared == id) {
            self.shared = None;
        }
        let slot = *self.slots.get(id);
        let bytes = self.segments.record_bytes(slot.location);
        if let Ok(found) = self.index.find_entry(hash(slot.table, slot.token), |i| *i == id) {
            found.remove();
        }
        self.segments.kill(slot.location);
        self.slots.free(id);
        let stats = self.tables.entry(slot.table).or_default();
        stats.partitions -= 1;
        stats.bytes -= bytes as u64;
        self.record_bytes -= bytes;
    }

    fn memory_bytes(&self) -> usize {
        self.segments.segment_bytes() + self.fixed_bytes()
    }

    /// Memory that eviction does not give back: slots, index, scratch.
    fn fixed_bytes(&self) -> usize {
        self.slots.memory_bytes()
            + self.segments.table_bytes()
            + index_bytes(self.index.capacity())
            + self.scratch.capacity()
            + self.shared.as_ref().map_or(0, |(_, row)| row.len())
            + CopyOut::HELD_BYTES
    }

    /// What the segments may take of `limit`: the rest after the fixed
    /// part, and always one segment (whose records still keep to `limit`).
    fn segment_allowance(&self, limit: usize) -> usize {
        limit.saturating_sub(self.fixed_bytes()).max(SEGMENT_BYTES)
    }

    /// Evicts the least recently used entry unless it is `keep`.
    fn evict_lru(&mut self, keep: u32) -> bool {
        let Some(id) = self.slots.lru().filter(|id| *id != keep) else { return false };
        let table = self.slots.get(id).table;
        self.remove(id);
        self.tables.entry(table).or_default().evictions += 1;
        true
    }

    /// Where a record of `len` bytes can go, evicting least recently used
    /// entries as the memory limit requires.
    fn place(&mut self, slot: u32, body_len: usize) -> Location {
        let len = RECORD_HEADER_BYTES + body_len;
        // The entries never exceed the limit, even one below a segment.
        while self.record_bytes + len > crate::memory::cache_limit_bytes() && self.evict_lru(slot) {}
        loop {
            let body = &self.scratch[..body_len];
            if let Some(at) = self.segments.append(slot, body) {
                return at;
            }
            let allowance = self.segment_allowance(crate::memory::cache_limit_bytes());
            if self.segments.segment_bytes() + SEGMENT_BYTES <= allowance {
                self.segments.open_new();
                continue;
            }
            if self.segments.compact_for(len, MIN_COMPACTION_GAIN_BYTES, &mut self.slots) {
                continue;
            }
            if !self.evict_lru(slot) {
                // Nothing left to evict: the floor of the cache's share is
                // below one segment. Take one anyway.
                self.segments.open_new();
            }
        }
    }

    /// Gives back segments until the cache fits `limit`.
    fn shrink_to(&mut self, limit: usize) {
        while self.record_bytes > limit && self.evict_lru(NIL) {}
        while self.segments.segment_bytes() > self.segment_allowance(limit) {
            if !self.segments.release_one(&mut self.slots) && !self.evict_lru(NIL) {
                break;
            }
        }
    }
}

/// Heap of a hash index of `capacity`: a slot id and a control byte per
/// bucket, buckets a power of two at most 7/8 full (hashbrown's layout).
fn index_bytes(capacity: usize) -> usize {
    if capacity == 0 {
        return 0;
    }
    let buckets = if capacity < 8 { capacity + 1 } else { (capacity * 8 / 7).next_power_of_two() };
    buckets * (std::mem::size_of::<u32>() + 1) + 16
}

impl RowCache {
    fn new() -> RowCache {
        RowCache {
            inner: RefCell::new(Inner {
                slots: Slots::new(),
                segments: Segments::new(),
                index: HashTable::new(),
                tables: HashMap::new(),
                pinned: std::collections::HashSet::new(),
                record_bytes: 0,
                scratch: Vec::new(),
                shared: None,
                copy_out: CopyOut::default(),
            }),
            next_table: Cell::new(0),
        }
    }

    /// A new id for a table's entries.
    pub fn register_table(&self) -> u32 {
        let id = self.next_table.get();
        self.next_table.set(id + 1);
        self.inner.borrow_mut().tables.insert(id, CacheStats::default());
        id
    }

    /// Drops every entry of `table` (TRUNCATE, DROP, caching turned off);
    /// its counters stay.
    pub fn clear_table(&self, table: u32) {
        let mut inner = self.inner.borrow_mut();
        let ids: Vec<u32> = inner.slots.ids_in_use().filter(|id| inner.slots.get(*id).table == table).collect();
        for id in ids {
            inner.remove(id);
        }
        self.publish(&inner);
    }

    /// Pins `table`'s entries (never evicted: `in_memory`) or unpins them.
    pub fn set_pinned(&self, table: u32, pinned: bool) {
        let mut inner = self.inner.borrow_mut();
        let changed = if pinned { inner.pinned.insert(table) } else { inner.pinned.remove(&table) };
        if changed {
            let ids: Vec<u32> = inner.slots.ids_in_use().filter(|id| inner.slots.get(*id).table == table).collect();
            for id in ids {
                inner.slots.set_pinned(id, pinned);
            }
        }
    }

    /// Forgets `table` altogether (its `Table` is gone).
    pub fn forget_table(&self, table: u32) {
        self.clear_table(table);
        let mut inner = self.inner.borrow_mut();
        inner.tables.remove(&table);
        inner.pinned.remove(&table);
    }

    /// The cached partition at `position`, counted as a hit or a miss; a
    /// hit becomes the most recently used.
    pub fn get(&self, table: u32, position: &PartitionPosition) -> Lookup<Found> {
        let mut inner = self.inner.borrow_mut();
        let Some(id) = inner.find(table, position) else {
            inner.tables.entry(table).or_default().misses += 1;
            return Lookup::Miss;
        };
        inner.slots.touch(id);
        inner.tables.entry(table).or_default().hits += 1;
        if let Some((_, row)) = inner.shared.as_ref().filter(|(shared, _)| *shared == id) {
            return Lookup::Hit(Some(Found::Row(row.clone())));
        }
        let Inner { slots, segments, copy_out, .. } = &mut *inner;
        let found = entry::found(segments.body(slots.get(id).location), |row| copy_out.copy(row));
        if let Some(Found::Row(row)) = &found {
            if row.len() >= SHARED_MIN_BYTES {
                inner.shared = Some((id, row.clone()));
                self.publish(&inner);
            }
        }
        Lookup::Hit(found)
    }

    /// The cached partition without counting or touching (flush merges).
    pub fn peek(&self, table: u32, position: &PartitionPosition) -> Lookup {
        let inner = self.inner.borrow();
        match inner.find(table, position) {
            Some(id) => Lookup::Hit(entry::decode(inner.segments.body(inner.slots.get(id).location))),
            None => Lookup::Miss,
        }
    }

    /// Caches `partition` (`None`: the SSTables hold none) as the whole of
    /// what the SSTables hold at `position`, replacing any entry; a
    /// partition too large to cache only removes the old entry.
    pub fn insert(&self, table: u32, position: &PartitionPosition, partition: Option<&Partition>) {
        self.insert_with(table, position, |out| entry::encode(out, &position.key, partition));
    }

    /// [`RowCache::insert`] of what a read found: a single row's compact
    /// bytes are copied in as they are.
    pub fn insert_found(&self, table: u32, position: &PartitionPosition, found: Option<&Found>) {
        self.insert_with(table, position, |out| entry::encode_found(out, &position.key, found));
    }

    /// Caches the entry `encode` writes for `position`.
    fn insert_with(&self, table: u32, position: &PartitionPosition, encode: impl FnOnce(&mut Vec<u8>)) {
        let mut inner = self.inner.borrow_mut();
        if let Some(old) = inner.find(table, position) {
            inner.remove(old);
        }
        let mut scratch = std::mem::take(&mut inner.scratch);
        scratch.clear();
        encode(&mut scratch);
        let body_len = scratch.len();
        // A huge partition's encoding must not keep its buffer (counted in
        // the cache's memory) once it is refused.
        scratch.shrink_to(MAX_ENTRY_BYTES);
        inner.scratch = scratch;
        if body_len > MAX_ENTRY_BYTES || !Segments::fits(RECORD_HEADER_BYTES + body_len) {
            self.publish(&inner);
            return;
        }
        // The slot first (so the record names it), then its place: placing
        // may evict, but never the newest entry while older ones remain.
        let pinned = inner.pinned.contains(&table);
        let id = inner.slots.allocate(table, position.token, Location::NOWHERE, pinned);
        let at = inner.place(id, body_len);
        inner.slots.set_location(id, at);
        let Inner { index, slots, .. } = &mut *inner;
        index.insert_unique(hash(table, position.token), id, |i| {
            let s = slots.get(*i);
            hash(s.table, s.token)
        });
        let stats = inner.tables.entry(table).or_default();
        stats.insertions += 1;
        stats.partitions += 1;
        stats.bytes += (RECORD_HEADER_BYTES + body_len) as u64;
        inner.record_bytes += RECORD_HEADER_BYTES + body_len;
        // Slots and the index grow by steps of their own: give back what
        // such a step took past the limit.
        let limit = crate::memory::cache_limit_bytes();
        if inner.segments.segment_bytes() > inner.segment_allowance(limit) {
            inner.shrink_to(limit);
        }
        self.publish(&inner);
    }

    /// Removes the entry at `position`, if any.
    pub fn invalidate(&self, table: u32, position: &PartitionPosition) {
        let mut inner = self.inner.borrow_mut();
        if let Some(id) = inner.find(table, position) {
            inner.remove(id);
            self.publish(&inner);
        }
    }

    /// Shrinks the cache to its share of the shard's memory now.
    pub fn fit_to_budget(&self) {
        let mut inner = self.inner.borrow_mut();
        inner.shrink_to(crate::memory::cache_limit_bytes());
        self.publish(&inner);
    }

    pub fn stats(&self, table: u32) -> CacheStats {
        self.inner.borrow().tables.get(&table).copied().unwrap_or_default()
    }

    /// Memory the cache holds: segments, slots and index.
    pub fn memory_bytes(&self) -> usize {
        self.inner.borrow().memory_bytes()
    }

    /// Up to `max` cached partitions (negative entries left out) with their
    /// table, most recently used first: what a warm restart reads back.
    pub fn hottest(&self, max: usize) -> Vec<(u32, PartitionPosition)> {
        let inner = self.inner.borrow();
        let mut hottest = Vec::new();
        for id in inner.slots.most_recent_first() {
            if hottest.len() == max {
                break;
            }
            let slot = inner.slots.get(id);
            let body = inner.segments.body(slot.location);
            if entry::holds_partition(body) {
                let key = bytes::Bytes::copy_from_slice(entry::key(body));
                hottest.push((slot.table, PartitionPosition { token: slot.token, key }));
            }
        }
        hottest
    }

    /// Entries held, of every table.
    pub fn partitions(&self) -> usize {
        self.inner.borrow().slots.in_use()
    }

    fn publish(&self, inner: &Inner) {
        crate::memory::set_cache_bytes(inner.memory_bytes());
    }
}

#[cfg(test)]
mod tests;
