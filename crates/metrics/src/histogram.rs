//! Latency histograms with fixed exponential buckets: recording is a
//! leading-zeros count and one add, and histograms from different shards
//! merge bucket by bucket because every one has the same bounds.

use std::cell::Cell;
use std::time::Duration;

/// Upper bounds (inclusive) of the buckets, in microseconds: powers of two
/// from 8 µs to about 33.5 s. Anything slower lands in the `+Inf` bucket.
pub const BUCKET_BOUNDS_US: [u64; 23] = {
    let mut bounds = [0u64; 23];
    let mut i = 0;
    while i < bounds.len() {
        bounds[i] = 8 << i;
        i += 1;
    }
    bounds
};

/// Buckets plus the `+Inf` overflow bucket.
const BUCKETS: usize = BUCKET_BOUNDS_US.len() + 1;

/// A latency histogram owned by one shard.
#[derive(Debug, Default)]
pub struct Histogram {
    counts: [Cell<u64>; BUCKETS],
    sum_us: Cell<u64>,
}

impl Histogram {
    pub fn record(&self, elapsed: Duration) {
        self.record_us(u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX));
    }

    pub fn record_us(&self, us: u64) {
        let bucket = bucket_of(us);
        self.counts[bucket].set(self.counts[bucket].get() + 1);
        self.sum_us.set(self.sum_us.get().saturating_add(us));
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot { counts: self.counts.iter().map(Cell::get).collect(), sum_us: self.sum_us.get() }
    }
}

/// The index of the smallest bucket whose bound is ≥ `us`.
fn bucket_of(us: u64) -> usize {
    let bits = 64 - us.saturating_sub(1).leading_zeros() as usize; // ceil(log2(us)) for us ≥ 2
    bits.saturating_sub(3).min(BUCKETS - 1)
}

/// A histogram's values at one instant: per-bucket (not cumulative) counts,
/// `BUCKET_BOUNDS_US.len() + 1` of them, the last being `+Inf`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistogramSnapshot {
    pub counts: Vec<u64>,
    pub sum_us: u64,
}

impl HistogramSnapshot {
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Adds another shard's snapshot into this one.
    pub fn merge(&mut self, other: &HistogramSnapshot) {
        assert_eq!(self.counts.len(), other.counts.len(), "histograms share their bucket bounds");
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.sum_us = self.sum_us.saturating_add(other.sum_us);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_lands_in_the_first_bucket_whose_bound_holds_it() {
        for (us, bucket) in [(0, 0), (1, 0), (8, 0), (9, 1), (16, 1), (17, 2), (1000, 7), (1024, 7), (1025, 8)] {
            assert_eq!(bucket_of(us), bucket, "{us} µs");
            if bucket < BUCKET_BOUNDS_US.len() {
                assert!(us <= BUCKET_BOUNDS_US[bucket]);
            }
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        assert_eq!(bucket_of(BUCKET_BOUNDS_US[BUCKET_BOUNDS_US.len() - 1] + 1), BUCKETS - 1);
    }

    #[test]
    fn snapshots_merge_bucket_by_bucket() {
        let h = Histogram::default();
        h.record(Duration::from_micros(5));
        h.record(Duration::from_millis(3));
        let mut merged = h.snapshot();
        merged.merge(&h.snapshot());
        assert_eq!(merged.count(), 4);
        assert_eq!(merged.sum_us, 2 * 3005);
        assert_eq!(merged.counts[0], 2);
    }
}
