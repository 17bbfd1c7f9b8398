//! A counter cell's value: one shard per replica that led increments to it
//! (Cassandra's counter context), and how two versions of it merge.
//!
//! A counter update names only a delta. The replica that leads it (one
//! per write, chosen by the coordinator) reads its own shard, adds the
//! delta and bumps the shard's clock, then sends every replica that new
//! shard. Two versions of a shard merge by keeping the higher clock (a
//! replica's shard only ever grows), so merging is idempotent: the same
//! shard received twice — streamed during a node operation and written as
//! a pending replica, repaired, replayed from a hint — counts once. The
//! counter's value is the sum of its shards.
//!
//! A delta shard ([`CounterShard::DELTA_ID`]) is a delta no replica has led
//! yet: a counter update on its way to its leader, or a cell written before
//! shards existed (which held the replica's whole count). Delta shards
//! merge by addition, as every counter cell once did.
//!
//! Invariant: a cell has at least one shard; its shards are sorted by id,
//! with no id twice; a delta shard's clock is 0, a replica's is above 0.

use std::cmp::Ordering;

/// One replica's part of a counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CounterShard {
    /// The host id (as a `u128`) of the replica that led these increments,
    /// or [`CounterShard::DELTA_ID`].
    pub id: u128,
    /// How many increments the replica led; orders versions of the shard.
    pub clock: i64,
    /// The sum of those increments.
    pub value: i64,
}

impl CounterShard {
    /// The id of a delta shard (no host id is nil).
    pub const DELTA_ID: u128 = 0;

    pub fn delta(value: i64) -> CounterShard {
        CounterShard { id: Self::DELTA_ID, clock: 0, value }
    }

    /// Of two versions of one replica's shard, the one to keep.
    fn newer(a: CounterShard, b: CounterShard) -> CounterShard {
        debug_assert_eq!(a.id, b.id);
        if a.id == Self::DELTA_ID {
            return CounterShard::delta(a.value.wrapping_add(b.value));
        }
        // Equal clocks carry equal values unless the replica lost writes it
        // had already sent (a leader's crash with periodic commitlog sync
        // can: it then reuses their clocks); the larger value keeps the
        // merge order-independent, but one of the two versions is lost.
        if (b.clock, b.value) > (a.clock, a.value) {
            b
        } else {
            a
        }
    }
}

/// Whether `shards` hold the invariant (see the module doc).
pub fn well_formed(shards: &[CounterShard]) -> bool {
    !shards.is_empty()
        && shards.windows(2).all(|w| w[0].id < w[1].id)
        && shards.iter().all(|s| (s.id == CounterShard::DELTA_ID) == (s.clock == 0) && s.clock >= 0)
}

/// The merge of two versions of a counter's shards.
pub fn merge(a: &[CounterShard], b: &[CounterShard]) -> Box<[CounterShard]> {
    debug_assert!(well_formed(a) && well_formed(b));
    let mut merged = Vec::with_capacity(a.len().max(b.len()));
    let (mut a, mut b) = (a.iter().peekable(), b.iter().peekable());
    loop {
        let next = match (a.peek(), b.peek()) {
            (None, None) => break,
            (Some(_), None) => *a.next().expect("peeked"),
            (None, Some(_)) => *b.next().expect("peeked"),
            (Some(x), Some(y)) => match x.id.cmp(&y.id) {
                Ordering::Less => *a.next().expect("peeked"),
                Ordering::Greater => *b.next().expect("peeked"),
                Ordering::Equal => CounterShard::newer(*a.next().expect("peeked"), *b.next().expect("peeked")),
            },
        };
        merged.push(next);
    }
    merged.into_boxed_slice()
}

/// The counter's value: the sum of its shards (wrapping, as Cassandra's).
pub fn total(shards: &[CounterShard]) -> i64 {
    shards.iter().fold(0i64, |sum, s| sum.wrapping_add(s.value))
}

/// The shard `id` holds, if any.
pub fn shard_of(shards: &[CounterShard], id: u128) -> Option<CounterShard> {
    shards.binary_search_by_key(&id, |s| s.id).ok().map(|i| shards[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(id: u128, clock: i64, value: i64) -> CounterShard {
        CounterShard { id, clock, value }
    }

    #[test]
    fn a_replica_shard_keeps_its_highest_clock_and_counts_once() {
        let older = [shard(7, 1, 5)];
        let newer = [shard(7, 2, 8), shard(9, 1, 1)];
        let merged = merge(&older, &newer);
        assert_eq!(&*merged, &[shard(7, 2, 8), shard(9, 1, 1)]);
        assert_eq!(total(&merged), 9);
        // Idempotent: the same shards again change nothing.
        assert_eq!(merge(&merged, &newer), merged);
        assert_eq!(merge(&newer, &older), merged);
    }

    #[test]
    fn delta_shards_add_up() {
        let merged = merge(&[CounterShard::delta(3), shard(5, 1, 10)], &[CounterShard::delta(-1)]);
        assert_eq!(&*merged, &[CounterShard::delta(2), shard(5, 1, 10)]);
        assert_eq!(total(&merged), 12);
    }

    #[test]
    fn merging_is_commutative_and_associative() {
        let versions: [&[CounterShard]; 4] = [
            &[shard(1, 3, 30), shard(4, 1, -2)],
            &[CounterShard::delta(1), shard(1, 4, 31)],
            &[shard(4, 2, -5), shard(9, 7, 7)],
            &[CounterShard::delta(6), shard(1, 4, 31)],
        ];
        for a in versions {
            for b in versions {
                assert_eq!(merge(a, b), merge(b, a));
                for c in versions {
                    assert_eq!(merge(&merge(a, b), c), merge(a, &merge(b, c)));
                }
            }
        }
    }

    #[test]
    fn a_shard_is_found_by_its_id() {
        let shards = [CounterShard::delta(2), shard(3, 1, 1), shard(8, 2, 2)];
        assert!(well_formed(&shards));
        assert_eq!(shard_of(&shards, 8), Some(shard(8, 2, 2)));
        assert_eq!(shard_of(&shards, 4), None);
        assert!(!well_formed(&[shard(3, 1, 1), shard(3, 2, 2)]));
        assert!(!well_formed(&[shard(CounterShard::DELTA_ID, 1, 1)]));
        assert!(!well_formed(&[shard(4, 0, 1)]));
        assert!(!well_formed(&[]));
    }
}
