//! CDC streams: the generation of stream ids a log row's partition key is
//! drawn from, and the rows of `system_distributed.cdc_generation_timestamps`
//! and `cdc_streams_descriptions_v2` through which readers find them
//! (ScyllaDB's `cdc/generation.cc`).
//!
//! Invariants:
//! - One generation, made from the ring (every member's tokens) and this
//!   node's shard count: for each vnode (the ring's ranges, by their end
//!   token, in ring order; the first wraps around) one stream per shard.
//! - A stream id is ScyllaDB's 16 bytes: the high 8 a token inside its
//!   vnode owned by its shard (the first such one), the low 8 random bits
//!   (38), the vnode's index (22) and the version 1 (4), low bits last.
//!   The random bits come from a hash of the vnode and shard, so every
//!   shard and node computes the same ids from the same ring.
//! - A base partition of token `t` logs to the stream of `t`'s vnode and
//!   shard, so the streams listed for that vnode cover its log rows.
//! - The generation's timestamp is when this process first made it; the
//!   rows list this one generation only.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::OnceLock;

use bytes::Bytes;
use shoal_schema::sharder::Sharder;
use shoal_schema::token::murmur3_x64_128;

use crate::system_cells::{bigint, text, Values};

/// The stream id version ScyllaDB's readers accept.
const VERSION: u64 = 1;
const VERSION_BITS: u32 = 4;
const INDEX_BITS: u32 = 22;
const RANDOM_BITS: u32 = 38;

/// One generation: its start, and each vnode's streams by shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generation {
    /// Milliseconds since the epoch.
    pub timestamp_ms: i64,
    sharder: Sharder,
    /// Vnode end tokens, ascending, with their streams (one per shard).
    pub vnodes: Vec<(i64, Vec<Bytes>)>,
}

impl Generation {
    /// The generation of a ring whose vnodes end at `ends` (any order,
    /// duplicates ignored), for nodes split as `sharder` says.
    pub fn new(mut ends: Vec<i64>, sharder: Sharder, timestamp_ms: i64) -> Generation {
        ends.sort_unstable();
        ends.dedup();
        if ends.is_empty() {
            ends.push(i64::MAX);
        }
        let shards = sharder.nr_shards.max(1);
        let vnodes = ends
            .iter()
            .enumerate()
            .map(|(index, &end)| {
                let start = if index == 0 { ends[ends.len() - 1] } else { ends[index - 1] };
                let streams = (0..shards)
                    .map(|shard| {
                        let token = first_token_in(sharder, start, end, shard).unwrap_or(end);
                        stream_id(token, index, end, shard)
                    })
                    .collect();
                (end, streams)
            })
            .collect();
        Generation { timestamp_ms, sharder, vnodes }
    }

    /// The stream a base partition of token `token` logs to.
    pub fn stream_of(&self, token: i64) -> Bytes {
        let index = self.vnodes.partition_point(|(end, _)| *end < token);
        let (_, streams) = &self.vnodes[if index == self.vnodes.len() { 0 } else { index }];
        let shard = self.sharder.shard_of(token).min(streams.len() - 1);
        streams[shard].clone()
    }
}

/// ScyllaDB's stream id layout (see the module's invariants).
fn stream_id(token: i64, index: usize, vnode_end: i64, shard: usize) -> Bytes {
    let mut seed = [0u8; 16];
    seed[..8].copy_from_slice(&vnode_end.to_be_bytes());
    seed[8..].copy_from_slice(&(shard as u64).to_be_bytes());
    let random = murmur3_x64_128(&seed, 0).0;
    let mask = |value: u64, bits: u32| value & ((1u64 << bits) - 1);
    let low = mask(VERSION, VERSION_BITS)
        | mask(index as u64, INDEX_BITS) << VERSION_BITS
        | mask(random, RANDOM_BITS) << (VERSION_BITS + INDEX_BITS);
    let mut id = Vec::with_capacity(16);
    id.extend_from_slice(&token.to_be_bytes());
    id.extend_from_slice(&low.to_be_bytes());
    Bytes::from(id)
}

/// The first token after `start` up to `end` (the range wraps when
/// `start >= end`) that `shard` owns.
fn first_token_in(sharder: Sharder, start: i64, end: i64, shard: usize) -> Option<i64> {
    let within = |t: i64, last: i64| (t <= last).then_some(t);
    if start < end {
        return next_token_of_shard(sharder, start.checked_add(1)?, shard).and_then(|t| within(t, end));
    }
    let tail = start.checked_add(1).and_then(|from| next_token_of_shard(sharder, from, shard));
    tail.or_else(|| next_token_of_shard(sharder, i64::MIN, shard).and_then(|t| within(t, end)))
}

/// The first token at or after `from` that `shard` owns, if any.
fn next_token_of_shard(sharder: Sharder, from: i64, shard: usize) -> Option<i64> {
    if sharder.shard_of(from) == shard {
        return Some(from);
    }
    let n = sharder.nr_shards as u128;
    let msb = sharder.ignore_msb.min(63);
    let unbiased = u128::from((from as u64).wrapping_add(1 << 63));
    let cycle_bits = 64 - msb;
    let cycle = unbiased >> cycle_bits;
    // The shard's slice of a cycle starts at fraction ceil(shard / n).
    let slice_start = (shard as u128 * (1u128 << 64)).div_ceil(n);
    let offset = slice_start.div_ceil(1u128 << msb);
    let cycle = if sharder.shard_of(from) < shard { cycle } else { cycle + 1 };
    let candidate = (cycle << cycle_bits) + offset;
    if candidate >= 1u128 << 64 {
        return None;
    }
    let token = (candidate as u64).wrapping_sub(1 << 63) as i64;
    (sharder.shard_of(token) == shard).then_some(token)
}

/// The ring's tokens as last read (unsorted), the sharder, and the
/// generation made from them.
type Kept = (Vec<i64>, Sharder, Rc<Generation>);

thread_local! {
    static CURRENT: RefCell<Option<Kept>> = const { RefCell::new(None) };
}

/// When this process made its generation (ms).
fn generation_timestamp_ms() -> i64 {
    static STARTED: OnceLock<i64> = OnceLock::new();
    *STARTED.get_or_init(|| shoal_runtime::clock::now_us() / 1000)
}

/// The current generation, made again when the ring or shard count changed.
pub fn current() -> Rc<Generation> {
    let mut ends = shoal_coordinator::cluster::tokens();
    ends.extend(shoal_coordinator::cluster::peers().iter().flat_map(|p| p.tokens.iter().copied()));
    let sharder = shoal_coordinator::sharder();
    CURRENT.with(|current| {
        let mut current = current.borrow_mut();
        match current.as_ref() {
            Some((kept_ends, kept_sharder, kept)) if *kept_ends == ends && *kept_sharder == sharder => Rc::clone(kept),
            _ => {
                let made = Rc::new(Generation::new(ends.clone(), sharder, generation_timestamp_ms()));
                *current = Some((ends, sharder, Rc::clone(&made)));
                made
            }
        }
    })
}

/// `system_distributed.cdc_generation_timestamps`: the one generation.
pub fn generation_timestamp_rows() -> Vec<Values> {
    vec![vec![text("timestamps"), bigint(current().timestamp_ms), None]]
}

/// `system_distributed.cdc_streams_descriptions_v2`: each vnode's streams.
pub fn stream_description_rows() -> Vec<Values> {
    let generation = current();
    generation
        .vnodes
        .iter()
        .map(|(end, streams)| {
            let mut sorted: Vec<&Bytes> = streams.iter().collect();
            sorted.sort();
            sorted.dedup();
            let set = shoal_schema::collection::serialize(sorted.iter().map(|s| Some(&s[..])), sorted.len());
            vec![bigint(generation.timestamp_ms), bigint(*end), Some(set)]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_token_of_shard_finds_the_first_token_of_the_shard() {
        for (shards, msb) in [(1, 12), (2, 12), (3, 12), (7, 12), (8, 0), (5, 3)] {
            let sharder = Sharder { nr_shards: shards, ignore_msb: msb };
            for from in [i64::MIN, -5_000_000_000_000_000_000, -1, 0, 1, 1 << 51, 4_000_000_000_000_000_000] {
                for shard in 0..shards {
                    let Some(found) = next_token_of_shard(sharder, from, shard) else { continue };
                    assert_eq!(sharder.shard_of(found), shard, "{shards} shards, from {from}");
                    assert!(found >= from);
                    assert!(found == from || sharder.shard_of(found - 1) != shard, "{found} is not the first");
                }
            }
        }
    }

    #[test]
    fn every_token_logs_to_a_listed_stream_of_its_vnode_and_shard() {
        let sharder = Sharder { nr_shards: 3, ignore_msb: 12 };
        let ends = vec![-6_000_000_000_000_000_000, -10, 3_000_000_000_000_000_000, 8_000_000_000_000_000_000];
        let generation = Generation::new(ends.clone(), sharder, 0);
        assert_eq!(generation, Generation::new(ends, sharder, 0), "the same ring gives the same ids");
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let token = state as i64;
            let stream = generation.stream_of(token);
            let (index, (end, streams)) =
                generation.vnodes.iter().enumerate().find(|(_, (_, s))| s.contains(&stream)).expect("listed");
            assert_eq!(stream.len(), 16);
            let low = u64::from_be_bytes(stream[8..].try_into().expect("test value"));
            assert_eq!(low & 0xf, 1, "version 1");
            assert_eq!((low >> 4) & ((1 << 22) - 1), index as u64);
            let start = if index == 0 {
                generation.vnodes.last().expect("test value").0
            } else {
                generation.vnodes[index - 1].0
            };
            let inside = |t: i64| if start < *end { t > start && t <= *end } else { t > start || t <= *end };
            assert!(inside(token), "token {token} logs to its own vnode");
            let stream_token = i64::from_be_bytes(stream[..8].try_into().expect("test value"));
            assert!(inside(stream_token));
            assert_eq!(sharder.shard_of(stream_token), sharder.shard_of(token));
            assert_eq!(streams.len(), 3);
        }
    }
}
