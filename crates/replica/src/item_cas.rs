//! The CAS uniques a shard gives memcached items.
//!
//! memcached's uniques come from one counter, so no two items share one;
//! here each shard counts for itself, so the shards' counters interleave:
//! shard `s` of `n` gives only uniques `u` with `u % n == s`, and no two
//! shards of a node give the same. A unique stays small (clients read it
//! as a 32-bit number) and grows with every read-modify-write of a key,
//! across restarts too: the counter moves up to the uniques it meets,
//! except a CQL row's write timestamp (above [`ADOPTED_CAS_MAX`]), which a
//! new unique goes above without the counter following, or every later
//! unique on the shard would be as large.

use std::cell::Cell;

/// The largest item unique the counter moves up to: far above what a
/// counter reaches, far below a timestamp in µs.
const ADOPTED_CAS_MAX: u64 = u32::MAX as u64;

/// One shard's counter of CAS uniques.
pub(crate) struct CasUniques {
    last: Cell<u64>,
    shards: u64,
    shard: u64,
}

impl CasUniques {
    /// Shard `shard` of `shards`' counter, starting from nothing.
    pub(crate) fn new(shard: usize, shards: usize) -> CasUniques {
        assert!(shard < shards.max(1), "shard {shard} of {shards}");
        CasUniques { last: Cell::new(0), shards: shards.max(1) as u64, shard: shard as u64 }
    }

    /// The counter of the shard this runs on (shard 0 of 1 off a shard
    /// thread, as in unit tests).
    pub(crate) fn for_this_shard() -> CasUniques {
        match shoal_runtime::nr_shards() {
            0 => CasUniques::new(0, 1),
            shards => CasUniques::new(shoal_runtime::this_shard(), shards),
        }
    }

    /// A new unique for an item whose unique is `current` (0 when it has
    /// none): above it and above every unique this shard gave before.
    pub(crate) fn next_above(&self, current: u64) -> u64 {
        if current <= ADOPTED_CAS_MAX {
            let next = self.ours_above(self.last.get().max(current));
            self.last.set(next);
            next
        } else {
            self.last.set(self.ours_above(self.last.get()));
            self.ours_above(current)
        }
    }

    /// The smallest unique of this shard above `floor`.
    fn ours_above(&self, floor: u64) -> u64 {
        let base = floor.saturating_add(1);
        let behind = (self.shard + self.shards - base % self.shards) % self.shards;
        base.saturating_add(behind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_give_disjoint_growing_uniques() {
        let shards: Vec<CasUniques> = (0..3).map(|s| CasUniques::new(s, 3)).collect();
        let mut seen = std::collections::HashSet::new();
        for round in 0..100u64 {
            for (s, counter) in shards.iter().enumerate() {
                // Some writes meet an item with a unique of its own.
                let current = if round % 7 == 0 { round * 5 } else { 0 };
                let unique = counter.next_above(current);
                assert_eq!(unique % 3, s as u64);
                assert!(unique > current);
                assert!(seen.insert(unique), "unique {unique} given twice");
            }
        }
    }

    #[test]
    fn a_cql_timestamp_is_passed_without_the_counter_following() {
        let counter = CasUniques::new(1, 2);
        assert_eq!(counter.next_above(0), 1);
        assert_eq!(counter.next_above(40), 41);
        let timestamp_us = 1_795_617_543_956_202;
        assert_eq!(counter.next_above(timestamp_us), timestamp_us + 1);
        assert_eq!(counter.next_above(0), 45);
    }
}
