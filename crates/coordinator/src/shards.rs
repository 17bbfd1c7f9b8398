//! Which shard owns a token or a range of them, and running one piece of
//! work on every shard.
//!
//! A range's shards matter because a range read runs on each shard that
//! may hold its rows: a narrow range (a token restriction, a vnode piece
//! narrower than a round of the sharding) touches one or two shards, not
//! every one.

use std::future::Future;
use std::ops::Bound;

use futures_util::future::join_all;
use shoal_runtime::{nr_shards, submit_to, ShardError};
use shoal_schema::sharder::Sharder;
use shoal_storage::PartitionPosition;

/// ScyllaDB's default: the 12 most significant bits of a token are ignored
/// when choosing its shard.
pub const SHARDING_IGNORE_MSB: u32 = 12;

/// The sharder for this node's shard count.
pub fn sharder() -> Sharder {
    Sharder { nr_shards: nr_shards(), ignore_msb: SHARDING_IGNORE_MSB }
}

pub fn shard_of(token: i64) -> usize {
    sharder().shard_of(token)
}

/// The first token of the partition range starting at `from`.
pub(crate) fn first_token(from: &Bound<PartitionPosition>) -> i64 {
    match from {
        Bound::Unbounded => i64::MIN,
        Bound::Included(p) | Bound::Excluded(p) => p.token,
    }
}

/// The first and last tokens of the partition range `from..to`; `None`
/// when it holds no token. (A position with an empty key is the first of
/// its token, so a range ending before one ends at the token before.)
pub(crate) fn range_tokens(from: &Bound<PartitionPosition>, to: &Bound<PartitionPosition>) -> Option<(i64, i64)> {
    let last = match to {
        Bound::Unbounded => i64::MAX,
        Bound::Excluded(p) if p.key.is_empty() => p.token.checked_sub(1)?,
        Bound::Included(p) | Bound::Excluded(p) => p.token,
    };
    let first = first_token(from);
    (first <= last).then_some((first, last))
}

/// The shards of `sharder` owning a token in `first..=last`, ascending.
///
/// The sharding deals each round of 2^(64 - ignore_msb) tokens out in
/// `nr_shards` consecutive pieces: a range as long as a round holds every
/// shard (that a round has tokens for); a shorter one, the pieces it
/// crosses, walked from boundary to boundary (at most `nr_shards + 1`).
pub fn shards_of_range(sharder: Sharder, first: i64, last: i64) -> Vec<usize> {
    let nr_shards = sharder.nr_shards.max(1);
    if first > last || nr_shards == 1 || sharder.ignore_msb >= 64 {
        return if first > last { Vec::new() } else { vec![0] };
    }
    let unbiased = |token: i64| u128::from((token as u64) ^ (1 << 63));
    let (start, end) = (unbiased(first), unbiased(last));
    let round = 1u128 << (64 - sharder.ignore_msb);
    if end - start + 1 >= round && round >= nr_shards as u128 {
        return (0..nr_shards).collect();
    }
    // Every round is dealt alike: one holds all the shards any does.
    let end = end.min(start + round - 1);
    let mut owns = vec![false; nr_shards];
    let mut at = start;
    while at <= end {
        let shard = sharder.shard_of(((at as u64) ^ (1 << 63)) as i64);
        owns[shard] = true;
        // The first position of the round that the next shard owns.
        let next = ((shard as u128 + 1) * round).div_ceil(nr_shards as u128);
        at = (at & !(round - 1)) + next;
    }
    owns.iter().enumerate().filter(|(_, owns)| **owns).map(|(shard, _)| shard).collect()
}

/// Runs `work(shard)` on every shard at once and returns the answers in
/// shard order (Seastar's `invoke_on_all` / `map_reduce`): storage
/// operations, schema distribution, trace gathering.
pub async fn on_every_shard<W, Fut, T>(work: W) -> Result<Vec<T>, ShardError>
where
    W: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = T> + 'static,
    T: Send + 'static,
{
    let answers = join_all((0..nr_shards()).map(|shard| {
        let work = work.clone();
        submit_to(shard, move || work(shard))
    }))
    .await;
    let answers: Vec<T> = answers.into_iter().collect::<Result<_, _>>()?;
    assert_eq!(answers.len(), nr_shards(), "an answer from every shard");
    Ok(answers)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every shard owning a token of the range, token by token.
    fn walked(sharder: Sharder, first: i64, last: i64) -> Vec<usize> {
        let mut shards: Vec<usize> = (first..=last).map(|token| sharder.shard_of(token)).collect();
        shards.sort_unstable();
        shards.dedup();
        shards
    }

    #[test]
    fn a_range_is_owned_by_the_shards_of_its_tokens() {
        // Rounds of 2^(64 - ignore_msb) tokens small enough to walk.
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for nr_shards in 1..=7 {
            for ignore_msb in [54, 58, 61, 63] {
                let sharder = Sharder { nr_shards, ignore_msb };
                for _ in 0..50 {
                    state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                    let first = (state as i64).min(i64::MAX - 2048);
                    let last = first + (state >> 53) as i64;
                    assert_eq!(shards_of_range(sharder, first, last), walked(sharder, first, last), "{sharder:?}");
                }
                let (first, last) = (i64::MAX - 300, i64::MAX);
                assert_eq!(shards_of_range(sharder, first, last), walked(sharder, first, last));
                let a_round = walked(sharder, i64::MIN, i64::MIN + (1 << (64 - ignore_msb)) - 1);
                assert_eq!(shards_of_range(sharder, i64::MIN, i64::MAX), a_round, "{sharder:?}");
            }
        }
    }

    #[test]
    fn a_narrow_range_has_one_shard_and_a_round_every_shard() {
        let sharder = Sharder { nr_shards: 4, ignore_msb: SHARDING_IGNORE_MSB };
        let piece = 1i64 << (64 - SHARDING_IGNORE_MSB - 2);
        assert_eq!(shards_of_range(sharder, i64::MIN, i64::MIN + piece - 1), vec![0]);
        assert_eq!(shards_of_range(sharder, i64::MIN + piece - 1, i64::MIN + piece), vec![0, 1]);
        assert_eq!(shards_of_range(sharder, i64::MIN + 3 * piece, i64::MIN + 4 * piece), vec![0, 3]);
        assert_eq!(shards_of_range(sharder, i64::MIN, i64::MIN + 4 * piece - 1), vec![0, 1, 2, 3]);
        assert_eq!(shards_of_range(sharder, 5, 5), vec![sharder.shard_of(5)]);
        assert_eq!(shards_of_range(sharder, 6, 5), Vec::<usize>::new());
    }

    #[test]
    fn range_tokens_end_before_the_first_position_of_a_token() {
        let at = |token: i64, key: &'static [u8]| PartitionPosition { token, key: bytes::Bytes::from_static(key) };
        let range = |from, to| range_tokens(&from, &to);
        assert_eq!(range(Bound::Unbounded, Bound::Unbounded), Some((i64::MIN, i64::MAX)));
        assert_eq!(range(Bound::Included(at(3, b"")), Bound::Excluded(at(9, b""))), Some((3, 8)));
        assert_eq!(range(Bound::Excluded(at(3, b"k")), Bound::Excluded(at(9, b"k"))), Some((3, 9)));
        assert_eq!(range(Bound::Included(at(9, b"")), Bound::Excluded(at(9, b""))), None);
        assert_eq!(range(Bound::Unbounded, Bound::Excluded(at(i64::MIN, b""))), None);
    }
}
