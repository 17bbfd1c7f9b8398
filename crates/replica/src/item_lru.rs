//! The memcached items this shard owns, least recently used last, with the
//! bytes each is charged: what makes the items table behave as memcached's
//! cache. When the items' bytes pass the shard's share of
//! `memcache_max_size`, the least recently used are deleted (memcached's
//! evictions) instead of writes failing; an expired item met at the end of
//! the list is dropped without a delete, as its TTL already removed it
//! (memcached's reclaimed).
//!
//! An item is charged as memcached charges it: key, value and a fixed
//! header ([`ITEM_HEADER_BYTES`]). Entries are made by memcached operations
//! (every store; fetches move them to the front) and, at start, by a scan
//! of the table, most recently written first. Rows CQL writes or deletes
//! are seen at the next start: the list is a cache's bookkeeping, and an
//! entry whose row is gone costs a harmless delete when it is evicted.
//!
//! Entries live in a slab linked into one list, head most recent; a hash
//! table of slab indexes keyed by partition token (already a hash) finds
//! them. Two keys of one token (one in 2^64) would share an entry. The
//! list's memory (about 60 bytes an entry plus its key) is counted in the
//! shard's memory budget.

use std::cell::RefCell;

use bytes::Bytes;
use hashbrown::HashTable;
use uuid::Uuid;

use crate::item::Lifetime;

/// What memcached 1.6 charges an item beyond its key and value: its header
/// with the CAS unique, the key's terminator and the value's "\r\n".
pub const ITEM_HEADER_BYTES: u64 = 56;

/// The end of the list, in `prev` and `next`.
const NIL: u32 = u32::MAX;

struct Entry {
    token: i64,
    key: Box<[u8]>,
    charged_bytes: u64,
    /// Unix second; 0: never.
    expires_at_s: i64,
    prev: u32,
    next: u32,
}

/// The list's figures, for memcached's `stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ItemLruStats {
    pub items: u64,
    pub bytes: u64,
    pub evictions: u64,
    pub reclaimed: u64,
}

impl std::ops::Add for ItemLruStats {
    type Output = ItemLruStats;

    fn add(self, other: ItemLruStats) -> ItemLruStats {
        ItemLruStats {
            items: self.items + other.items,
            bytes: self.bytes + other.bytes,
            evictions: self.evictions + other.evictions,
            reclaimed: self.reclaimed + other.reclaimed,
        }
    }
}

/// The item to remove next: the least recently used, while the items are
/// over the limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Victim {
    pub token: i64,
    pub key: Bytes,
    /// Its TTL already removed it: nothing to delete.
    pub expired: bool,
}

#[derive(Default)]
pub(crate) struct ItemLru {
    inner: RefCell<Lru>,
}

struct Lru {
    /// The items table the list is about; operations on another adopt it.
    table: Option<Uuid>,
    entries: Vec<Entry>,
    free: Vec<u32>,
    index: HashTable<u32>,
    head: u32,
    tail: u32,
    len: u64,
    bytes: u64,
    key_bytes: usize,
    limit_bytes: Option<u64>,
    evictions: u64,
    reclaimed: u64,
    /// What was last reported to the shard's memory budget.
    reported_memory_bytes: usize,
}

impl Default for Lru {
    fn default() -> Lru {
        Lru {
            table: None,
            entries: Vec::new(),
            free: Vec::new(),
            index: HashTable::new(),
            head: NIL,
            tail: NIL,
            len: 0,
            bytes: 0,
            key_bytes: 0,
            limit_bytes: None,
            evictions: 0,
            reclaimed: 0,
            reported_memory_bytes: 0,
        }
    }
}

fn expires_at_s(lifetime: Lifetime) -> i64 {
    match lifetime {
        Lifetime::Forever => 0,
        Lifetime::Until(at) => at.max(1),
    }
}

fn charged_bytes(key: &[u8], value_bytes: usize) -> u64 {
    key.len() as u64 + value_bytes as u64 + ITEM_HEADER_BYTES
}

impl ItemLru {
    /// Bounds `table`'s items on this shard at `limit_bytes` (`None`: no
    /// bound); returns whether the list was about another table (or none)
    /// and so starts empty.
    pub fn track(&self, table: Uuid, limit_bytes: Option<u64>) -> bool {
        let mut lru = self.inner.borrow_mut();
        let adopted = lru.adopt(table);
        lru.limit_bytes = limit_bytes;
        adopted
    }

    /// The item at `token` was written: charged anew, moved to the front.
    pub fn stored(&self, table: Uuid, token: i64, key: &[u8], value_bytes: usize, lifetime: Lifetime) {
        let mut lru = self.inner.borrow_mut();
        lru.adopt(table);
        let charged = charged_bytes(key, value_bytes);
        match lru.find(token) {
            Some(at) => {
                lru.unlink(at);
                let entry = &mut lru.entries[at as usize];
                let before = entry.charged_bytes;
                entry.charged_bytes = charged;
                entry.expires_at_s = expires_at_s(lifetime);
                lru.bytes = lru.bytes - before + charged;
                lru.push_front(at);
            }
            None => {
                let at = lru.allocate(token, key, charged, expires_at_s(lifetime));
                lru.push_front(at);
            }
        }
        lru.report_memory();
    }

    /// The item at `token` was fetched: moved to the front.
    pub fn fetched(&self, table: Uuid, token: i64) {
        let mut lru = self.inner.borrow_mut();
        if lru.table != Some(table) {
            return;
        }
        if let Some(at) = lru.find(token) {
            lru.unlink(at);
            lru.push_front(at);
        }
    }

    /// The item at `token` is gone (deleted, expired, or never there).
    pub fn removed(&self, table: Uuid, token: i64) {
        let mut lru = self.inner.borrow_mut();
        if lru.table == Some(table) {
            lru.remove(token);
            lru.report_memory();
        }
    }

    /// Every item of `table` on this shard is gone (`flush_all`, TRUNCATE,
    /// DROP).
    pub fn cleared(&self, table: Uuid) {
        let mut lru = self.inner.borrow_mut();
        if lru.table == Some(table) {
            let limit_bytes = lru.limit_bytes;
            let (evictions, reclaimed) = (lru.evictions, lru.reclaimed);
            let reported = lru.reported_memory_bytes;
            *lru = Lru {
                table: Some(table),
                limit_bytes,
                evictions,
                reclaimed,
                reported_memory_bytes: reported,
                ..Lru::default()
            };
            lru.report_memory();
        }
    }

    /// An item found by the start-up scan, last written at `written_s`:
    /// placed behind every entry the operations made, and behind the scan's
    /// earlier finds (which the scan hands over newest first).
    pub fn found(&self, table: Uuid, token: i64, key: &[u8], value_bytes: usize, lifetime: Lifetime) {
        let mut lru = self.inner.borrow_mut();
        if lru.table != Some(table) || lru.find(token).is_some() {
            return;
        }
        let at = lru.allocate(token, key, charged_bytes(key, value_bytes), expires_at_s(lifetime));
        lru.push_back(at);
        lru.report_memory();
    }

    /// The least recently used item, while `table`'s items are over the
    /// limit; never the only item (one item over the limit stays).
    pub fn victim(&self, table: Uuid, now_s: i64) -> Option<Victim> {
        let lru = self.inner.borrow();
        let over = lru.limit_bytes.is_some_and(|limit| lru.bytes > limit);
        if lru.table != Some(table) || !over || lru.tail == lru.head {
            return None;
        }
        let entry = &lru.entries[lru.tail as usize];
        let expired = entry.expires_at_s != 0 && entry.expires_at_s <= now_s;
        Some(Victim { token: entry.token, key: Bytes::copy_from_slice(&entry.key), expired })
    }

    /// Removes `victim` if it is still the one [`ItemLru::victim`] gives
    /// (an operation may have used it meanwhile); returns whether it did.
    pub fn evict(&self, table: Uuid, victim: &Victim, now_s: i64) -> bool {
        if self.victim(table, now_s).as_ref() != Some(victim) {
            return false;
        }
        let mut lru = self.inner.borrow_mut();
        lru.remove(victim.token);
        match victim.expired {
            true => lru.reclaimed += 1,
            false => lru.evictions += 1,
        }
        lru.report_memory();
        true
    }

    /// `table`'s figures (nothing for a table the list is not about).
    pub fn stats(&self, table: Uuid) -> ItemLruStats {
        let lru = self.inner.borrow();
        if lru.table != Some(table) {
            return ItemLruStats::default();
        }
        ItemLruStats { items: lru.len, bytes: lru.bytes, evictions: lru.evictions, reclaimed: lru.reclaimed }
    }
}

impl Lru {
    /// Makes the list about `table`, emptied if it was about another.
    fn adopt(&mut self, table: Uuid) -> bool {
        if self.table == Some(table) {
            return false;
        }
        let (limit_bytes, reported) = (self.limit_bytes, self.reported_memory_bytes);
        *self = Lru { table: Some(table), limit_bytes, reported_memory_bytes: reported, ..Lru::default() };
        self.report_memory();
        true
    }

    fn find(&self, token: i64) -> Option<u32> {
        let entries = &self.entries;
        self.index.find(token as u64, |&at| entries[at as usize].token == token).copied()
    }

    /// A new entry, not yet linked.
    fn allocate(&mut self, token: i64, key: &[u8], charged_bytes: u64, expires_at_s: i64) -> u32 {
        let entry = Entry { token, key: key.into(), charged_bytes, expires_at_s, prev: NIL, next: NIL };
        let at = match self.free.pop() {
            Some(at) => {
                self.entries[at as usize] = entry;
                at
            }
            None => {
                self.entries.push(entry);
                u32::try_from(self.entries.len() - 1).expect("fewer than 2^32 items on a shard")
            }
        };
        let entries = &self.entries;
        self.index.insert_unique(token as u64, at, |&i| entries[i as usize].token as u64);
        self.len += 1;
        self.bytes += charged_bytes;
        self.key_bytes += key.len();
        at
    }

    fn remove(&mut self, token: i64) {
        let Some(at) = self.find(token) else { return };
        self.unlink(at);
        let entries = &self.entries;
        if let Ok(found) = self.index.find_entry(token as u64, |&i| entries[i as usize].token == token) {
            found.remove();
        }
        let entry = &mut self.entries[at as usize];
        self.len -= 1;
        self.bytes -= entry.charged_bytes;
        self.key_bytes -= entry.key.len();
        entry.key = Box::default();
        self.free.push(at);
    }

    fn unlink(&mut self, at: u32) {
        let (prev, next) = (self.entries[at as usize].prev, self.entries[at as usize].next);
        match prev {
            NIL => self.head = next,
            p => self.entries[p as usize].next = next,
        }
        match next {
            NIL => self.tail = prev,
            n => self.entries[n as usize].prev = prev,
        }
        let entry = &mut self.entries[at as usize];
        entry.prev = NIL;
        entry.next = NIL;
    }

    fn push_front(&mut self, at: u32) {
        let head = self.head;
        self.entries[at as usize].next = head;
        match head {
            NIL => self.tail = at,
            h => self.entries[h as usize].prev = at,
        }
        self.head = at;
    }

    fn push_back(&mut self, at: u32) {
        let tail = self.tail;
        self.entries[at as usize].prev = tail;
        match tail {
            NIL => self.head = at,
            t => self.entries[t as usize].next = at,
        }
        self.tail = at;
    }

    /// Tells the shard's memory budget what the list holds now.
    fn report_memory(&mut self) {
        let bytes = self.entries.capacity() * std::mem::size_of::<Entry>()
            + self.free.capacity() * std::mem::size_of::<u32>()
            + self.index.capacity() * (std::mem::size_of::<u32>() + 1)
            + self.key_bytes;
        if bytes != self.reported_memory_bytes {
            shoal_storage::memory::items_index_changed(bytes as isize - self.reported_memory_bytes as isize);
            self.reported_memory_bytes = bytes;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: Uuid = Uuid::from_u128(1);

    fn key(i: i64) -> Vec<u8> {
        format!("key{i}").into_bytes()
    }

    /// An LRU bounded to hold `items` items of 10-byte values under keys
    /// of `key(i)`'s length (4 bytes for i < 10).
    fn bounded(items: u64) -> ItemLru {
        let lru = ItemLru::default();
        lru.track(TABLE, Some(items * charged_bytes(&key(0), 10)));
        lru
    }

    fn victims(lru: &ItemLru, now_s: i64) -> Vec<i64> {
        let mut out = Vec::new();
        while let Some(victim) = lru.victim(TABLE, now_s) {
            assert!(lru.evict(TABLE, &victim, now_s));
            out.push(victim.token);
        }
        out
    }

    #[test]
    fn evicts_least_recently_used_first_and_fetches_refresh() {
        let lru = bounded(3);
        for i in 0..5 {
            lru.stored(TABLE, i, &key(i), 10, Lifetime::Forever);
        }
        lru.fetched(TABLE, 0);
        assert_eq!(victims(&lru, 0), vec![1, 2]);
        let stats = lru.stats(TABLE);
        assert_eq!((stats.items, stats.evictions, stats.reclaimed), (3, 2, 0));
        assert_eq!(stats.bytes, 3 * charged_bytes(&key(0), 10));
    }

    #[test]
    fn expired_items_are_reclaimed_not_evicted() {
        let lru = bounded(1);
        lru.stored(TABLE, 1, &key(1), 10, Lifetime::Until(100));
        lru.stored(TABLE, 2, &key(2), 10, Lifetime::Forever);
        let victim = lru.victim(TABLE, 100).expect("over the limit");
        assert!(victim.expired);
        assert_eq!(victim.key, Bytes::from(key(1)));
        assert!(lru.evict(TABLE, &victim, 100));
        assert_eq!((lru.stats(TABLE).evictions, lru.stats(TABLE).reclaimed), (0, 1));
    }

    #[test]
    fn a_rewrite_recharges_and_a_moved_victim_is_not_evicted() {
        let lru = bounded(2);
        lru.stored(TABLE, 1, &key(1), 10, Lifetime::Forever);
        lru.stored(TABLE, 2, &key(2), 10, Lifetime::Forever);
        lru.stored(TABLE, 1, &key(1), 30, Lifetime::Forever);
        let victim = lru.victim(TABLE, 0).expect("over the limit");
        assert_eq!(victim.token, 2);
        // Used while the eviction waited for the item's lock.
        lru.fetched(TABLE, 2);
        assert!(!lru.evict(TABLE, &victim, 0));
        assert_eq!(victims(&lru, 0), vec![1]);
    }

    #[test]
    fn one_item_over_the_limit_stays_and_removal_frees_its_bytes() {
        let lru = bounded(1);
        lru.stored(TABLE, 1, &key(1), 1000, Lifetime::Forever);
        assert_eq!(lru.victim(TABLE, 0), None);
        lru.removed(TABLE, 1);
        assert_eq!(lru.stats(TABLE).bytes, 0);
        lru.stored(TABLE, 2, &key(2), 10, Lifetime::Forever);
        assert_eq!(lru.stats(TABLE).items, 1);
    }

    #[test]
    fn scan_finds_go_behind_and_do_not_replace_entries() {
        let lru = bounded(2);
        lru.stored(TABLE, 1, &key(1), 10, Lifetime::Forever);
        lru.found(TABLE, 1, &key(1), 500, Lifetime::Forever);
        lru.found(TABLE, 2, &key(2), 10, Lifetime::Forever);
        lru.found(TABLE, 3, &key(3), 10, Lifetime::Forever);
        assert_eq!(lru.stats(TABLE).bytes, 3 * charged_bytes(&key(0), 10));
        assert_eq!(victims(&lru, 0), vec![3]);
    }

    #[test]
    fn clearing_and_another_table_start_empty() {
        let lru = bounded(10);
        for i in 0..5 {
            lru.stored(TABLE, i, &key(i), 10, Lifetime::Forever);
        }
        lru.cleared(TABLE);
        assert_eq!(lru.stats(TABLE).items, 0);
        lru.stored(TABLE, 1, &key(1), 10, Lifetime::Forever);
        let other = Uuid::from_u128(2);
        lru.stored(other, 1, &key(1), 10, Lifetime::Forever);
        assert_eq!(
            (lru.stats(TABLE).items, lru.stats(other).items),
            (0, 1),
            "the other table's entry replaced the list"
        );
        assert_eq!(lru.inner.borrow().limit_bytes, Some(10 * charged_bytes(&key(0), 10)));
    }

    #[test]
    fn slots_are_reused() {
        let lru = bounded(1);
        for i in 0..1000 {
            lru.stored(TABLE, i, &key(i), 10, Lifetime::Forever);
            victims(&lru, 0);
        }
        assert!(lru.inner.borrow().entries.len() <= 2);
    }
}
