//! ScyllaDB's token → shard mapping ("biased-token-round-robin",
//! `dht::zero_based_shard_of`), which shard-aware drivers also compute to
//! route a request to the owning shard's connection.
//!
//! Invariants:
//! - `shard_of` is exactly ScyllaDB's formula: unbias the token (view it as
//!   u64 and add 2^63, so `i64::MIN` → 0), shift left by `ignore_msb` (the
//!   bits shifted out are lost), then take the high 64 bits of the 128-bit
//!   product with the shard count — i.e. treat the shifted token as a
//!   fraction in [0, 1) and scale it to [0, nr_shards).
//! - The result is always `< nr_shards` (0 when `nr_shards` is 0 or 1), and
//!   nothing panics for any field values.

/// How a node splits its tokens between shards. Drivers learn both fields
/// from the `SCYLLA_NR_SHARDS` and `SCYLLA_SHARDING_IGNORE_MSB` options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sharder {
    pub nr_shards: usize,
    pub ignore_msb: u32,
}

impl Sharder {
    /// ScyllaDB's default `murmur3_partitioner_ignore_msb_bits`.
    pub const DEFAULT_IGNORE_MSB: u32 = 12;

    pub fn new(nr_shards: usize) -> Self {
        Sharder { nr_shards, ignore_msb: Self::DEFAULT_IGNORE_MSB }
    }

    /// The shard (0-based) owning `token`.
    pub fn shard_of(&self, token: i64) -> usize {
        let unbiased = (token as u64).wrapping_add(1 << 63);
        // A shift of 64 or more leaves no bits: every token maps to shard 0.
        let shifted = unbiased.checked_shl(self.ignore_msb).unwrap_or(0);
        ((u128::from(shifted) * self.nr_shards as u128) >> 64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sharder(nr_shards: usize, ignore_msb: u32) -> Sharder {
        Sharder { nr_shards, ignore_msb }
    }

    #[test]
    fn hand_computed_cases() {
        // nr=2, msb=12, token i64::MIN: unbiased = 0x8000… + 0x8000… = 0
        // (wrapping); 0 << 12 = 0; 0 × 2 >> 64 = 0.
        assert_eq!(sharder(2, 12).shard_of(i64::MIN), 0);
        // nr=2, msb=12, token 0: unbiased = 0x8000_0000_0000_0000; << 12
        // shifts the only set bit out → 0 → shard 0.
        assert_eq!(sharder(2, 12).shard_of(0), 0);
        // nr=2, msb=12, token 2^51: unbiased = 0x8008_0000_0000_0000; << 12
        // drops bit 63 and moves bit 51 to bit 63 → 2^63; 2^63 × 2 = 2^64;
        // >> 64 = 1.
        assert_eq!(sharder(2, 12).shard_of(1 << 51), 1);
        // nr=2, msb=12, token -1: unbiased = 0xFFFF… + 0x8000… =
        // 0x7FFF_FFFF_FFFF_FFFF; << 12 = 0xFFFF_FFFF_FFFF_F000 (≥ 2^63);
        // × 2 >> 64 = 1.
        assert_eq!(sharder(2, 12).shard_of(-1), 1);
        // nr=3, msb=12, token 2^51: shifted = 2^63 (as above), i.e. 0.5;
        // 3 × 2^63 = 1.5 × 2^64; >> 64 = 1.
        assert_eq!(sharder(3, 12).shard_of(1 << 51), 1);
        // nr=3, msb=12, token 2^51 + 2^50: unbiased = 0x800C_0000_0000_0000;
        // << 12 = 0xC000_0000_0000_0000 = 0.75 × 2^64; × 3 = 2.25 × 2^64;
        // >> 64 = 2.
        assert_eq!(sharder(3, 12).shard_of((1 << 51) + (1 << 50)), 2);
        // nr=8, msb=0, token i64::MAX: unbiased = 0xFFFF_FFFF_FFFF_FFFF;
        // × 8 = 8 × 2^64 - 8; >> 64 = 7.
        assert_eq!(sharder(8, 0).shard_of(i64::MAX), 7);
        // nr=8, msb=0, token 0: unbiased = 2^63; × 8 = 4 × 2^64; >> 64 = 4.
        assert_eq!(sharder(8, 0).shard_of(0), 4);
        // nr=8, msb=0, token -1: unbiased = 2^63 - 1; × 8 = 4 × 2^64 - 8;
        // >> 64 = 3 (just below the shard 4 boundary).
        assert_eq!(sharder(8, 0).shard_of(-1), 3);
        // nr=12, msb=12, token 2^50: unbiased = 0x8004_0000_0000_0000;
        // << 12 = 0x4000_0000_0000_0000 = 0.25 × 2^64; × 12 = 3 × 2^64 → 3.
        assert_eq!(sharder(12, 12).shard_of(1 << 50), 3);
    }

    #[test]
    fn degenerate_configurations_do_not_panic() {
        for token in [i64::MIN, -1, 0, 1, i64::MAX] {
            assert_eq!(sharder(1, 12).shard_of(token), 0);
            assert_eq!(sharder(0, 12).shard_of(token), 0);
            assert_eq!(sharder(7, 64).shard_of(token), 0);
            assert_eq!(sharder(7, u32::MAX).shard_of(token), 0);
        }
        assert_eq!(Sharder::new(4), sharder(4, 12));
    }

    #[test]
    fn shard_is_always_in_range_and_monotonic_within_a_wrap() {
        // With ignore_msb = 0 the mapping is monotonic in the token.
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for nr_shards in 1..=64 {
            let mut last = 0;
            let s0 = sharder(nr_shards, 0);
            for step in 0..=256i64 {
                let token = i64::MIN.wrapping_add(step.wrapping_mul(i64::MAX / 128));
                let shard = s0.shard_of(token);
                assert!(shard < nr_shards && shard >= last);
                last = shard;
            }
            for _ in 0..200 {
                state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                let token = state as i64;
                for msb in [0, 1, 12, 63] {
                    assert!(sharder(nr_shards, msb).shard_of(token) < nr_shards);
                }
            }
        }
    }
}
