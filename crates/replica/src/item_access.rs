//! What memcached keeps about an item besides its data: when it was last
//! accessed, whether it was fetched since written, whether it is stale
//! (meta `I`), and whether a client was already handed the "win" token to
//! recache it (meta `W`/`Z`). memcached keeps these in memory only; so does
//! the shard that owns the item, here.
//!
//! The table is bounded: two generations of at most
//! [`GENERATION_ENTRIES_MAX`] entries; when the young one is full it
//! becomes the old one and the old one is dropped, and an entry found in
//! the old one moves to the young one. An item whose entry was dropped (or
//! that was written before a restart) reads as never fetched, last accessed
//! when written, fresh, no token sent: hints for a cache client, never
//! data, so forgetting them is safe.
//!
//! Entries are keyed by partition token, already a hash of the key; two
//! keys of one token (one in 2^64) would share hints.

use std::cell::RefCell;

use crate::token_hash::TokenHashMap;

/// Entries per generation, per shard: about 16 bytes each, plus the map's
/// overhead, so a few MiB per shard at most.
const GENERATION_ENTRIES_MAX: usize = 1 << 17;

/// The hints of one item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    /// Unix second of the last fetch (or of the write, if never fetched).
    pub last_s: i64,
    pub fetched: bool,
    /// Marked stale by `md ... I` or a stale `ms ... I`: served with `X`.
    pub stale: bool,
    /// A client was handed `W` for this item; others see `Z`.
    pub token_sent: bool,
}

impl Access {
    /// The hints of an item as written at `now_s`.
    pub fn written(now_s: i64) -> Access {
        Access { last_s: now_s, fetched: false, stale: false, token_sent: false }
    }
}

#[derive(Default)]
pub(crate) struct ItemAccessTable {
    generations: RefCell<Generations>,
}

#[derive(Default)]
struct Generations {
    young: TokenHashMap<i64, Access>,
    old: TokenHashMap<i64, Access>,
}

impl ItemAccessTable {
    /// The hints of the item at `token`, if remembered.
    pub fn get(&self, token: i64) -> Option<Access> {
        let mut g = self.generations.borrow_mut();
        if let Some(access) = g.young.get(&token) {
            return Some(*access);
        }
        let access = g.old.remove(&token)?;
        g.insert(token, access);
        Some(access)
    }

    pub fn set(&self, token: i64, access: Access) {
        self.generations.borrow_mut().insert(token, access);
    }

    pub fn forget(&self, token: i64) {
        let mut g = self.generations.borrow_mut();
        g.young.remove(&token);
        g.old.remove(&token);
    }
}

impl Generations {
    fn insert(&mut self, token: i64, access: Access) {
        if self.young.len() >= GENERATION_ENTRIES_MAX && !self.young.contains_key(&token) {
            self.old = std::mem::take(&mut self.young);
        }
        self.young.insert(token, access);
        debug_assert!(self.young.len() <= GENERATION_ENTRIES_MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_survive_one_generation_change_and_move_up_when_read() {
        let table = ItemAccessTable::default();
        let a = Access { last_s: 1, fetched: true, stale: false, token_sent: true };
        table.set(-1, a);
        for token in 0..GENERATION_ENTRIES_MAX as i64 {
            table.set(token, Access::written(2));
        }
        // -1 is in the old generation now; reading it moves it up.
        assert_eq!(table.get(-1), Some(a));
        for token in 0..GENERATION_ENTRIES_MAX as i64 {
            table.set(token + GENERATION_ENTRIES_MAX as i64, Access::written(3));
        }
        assert_eq!(table.get(-1), Some(a), "moved to the young generation when read");
        assert_eq!(table.get(0), None, "two generations old: forgotten");
        table.forget(-1);
        assert_eq!(table.get(-1), None);
    }
}
