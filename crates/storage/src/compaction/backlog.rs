//! Compaction backlog: an estimate of the bytes compaction still has to
//! write before a table's SSTables are as compacted as its strategy wants
//! (ScyllaDB's backlog trackers, docs/dev-docs compaction_controller.md).
//! The compaction controller sets compaction's shares from the shard's
//! total, so compaction speeds up when it falls behind.
//!
//! - Size-tiered: each byte is rewritten once per tier it still has to
//!   climb, so the backlog is `Σ sᵢ · log_F(T / sᵢ)` over the SSTables of
//!   sizes `sᵢ` and total `T`, `F` being `min_threshold` (ScyllaDB's
//!   formula). One SSTable, or SSTables that are already one tier, give 0.
//! - Time-window: the size-tiered backlog of each window, summed.
//! - Leveled: L0's bytes (all go to L1), plus each level's bytes over its
//!   limit, rewritten with the next level's overlapping SSTables (`fanout`
//!   times as many bytes) — an estimate in the same units.
//!
//! Only SSTables no compaction is using count: what a running compaction
//! holds is work under way, not backlog.

use std::collections::BTreeMap;
use std::rc::Rc;

use crate::sstable::SSTable;

use super::strategy::{SizeTiered, Strategy};

impl Strategy {
    /// The bytes still to compact among `sstables` (see the module doc).
    pub fn backlog_bytes(&self, sstables: &[Rc<SSTable>]) -> f64 {
        let sizes = |members: &[&Rc<SSTable>]| members.iter().map(|s| s.data_bytes()).collect::<Vec<_>>();
        match self {
            Strategy::SizeTiered(tiers) => tiered(tiers, &sizes(&sstables.iter().collect::<Vec<_>>())),
            Strategy::TimeWindow { window_s, tiers } => {
                let mut windows: BTreeMap<i64, Vec<&Rc<SSTable>>> = BTreeMap::new();
                for s in sstables {
                    let newest_s = s.stats().max_timestamp.div_euclid(1_000_000);
                    windows.entry(newest_s.div_euclid(*window_s)).or_default().push(s);
                }
                windows.values().map(|w| tiered(tiers, &sizes(w))).sum()
            }
            Strategy::Leveled { sstable_size_bytes, fanout } => {
                let levels: Vec<(u32, u64)> = sstables.iter().map(|s| (s.stats().level, s.data_bytes())).collect();
                leveled(&levels, *sstable_size_bytes, *fanout)
            }
            // Nothing will be compacted, so nothing is owed.
            Strategy::Null => 0.0,
        }
    }
}

fn tiered(tiers: &SizeTiered, sizes: &[u64]) -> f64 {
    let total: u64 = sizes.iter().sum();
    if total == 0 {
        return 0.0;
    }
    let fan_in = (tiers.min_threshold.max(2) as f64).ln();
    sizes.iter().filter(|&&s| s > 0).map(|&s| s as f64 * ((total as f64 / s as f64).ln() / fan_in)).sum()
}

fn leveled(levels: &[(u32, u64)], sstable_size_bytes: u64, fanout: u64) -> f64 {
    let top = levels.iter().map(|(level, _)| *level).max().unwrap_or(0);
    let bytes_at = |n: u32| levels.iter().filter(|(level, _)| *level == n).map(|(_, b)| *b).sum::<u64>();
    let mut backlog = bytes_at(0) as f64;
    for n in 1..=top {
        let limit = sstable_size_bytes.saturating_mul(fanout.saturating_pow(n));
        let over = bytes_at(n).saturating_sub(limit);
        backlog += over as f64 * (1 + fanout) as f64;
    }
    backlog
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiers() -> SizeTiered {
        SizeTiered {
            min_threshold: 4,
            max_threshold: 32,
            bucket_low: 0.5,
            bucket_high: 1.5,
            min_sstable_size_bytes: 50 << 20,
        }
    }

    #[test]
    fn size_tiered_backlog_grows_with_sstables_to_merge() {
        let t = tiers();
        assert_eq!(tiered(&t, &[]), 0.0);
        assert_eq!(tiered(&t, &[100 << 20]), 0.0, "one SSTable is compacted");
        // Four equal SSTables: every byte climbs one tier.
        let four = tiered(&t, &[10, 10, 10, 10]);
        assert!((four - 40.0).abs() < 1e-9, "{four}");
        // More of them, more backlog; a new flush always adds to it.
        let mut last = 0.0;
        let mut sizes = Vec::new();
        for _ in 0..64 {
            sizes.push(10u64 << 20);
            let backlog = tiered(&t, &sizes);
            assert!(backlog >= last);
            last = backlog;
        }
        // A large SSTable beside small ones: the small ones owe more.
        assert!(tiered(&t, &[1000, 10]) < tiered(&t, &[505, 505]));
    }

    #[test]
    fn leveled_backlog_counts_l0_and_overfull_levels() {
        assert_eq!(leveled(&[], 160, 10), 0.0);
        assert_eq!(leveled(&[(1, 160), (1, 160)], 160, 10), 0.0, "L1 within its 1,600 bytes");
        assert_eq!(leveled(&[(0, 50), (0, 50)], 160, 10), 100.0);
        // L1 over its limit by 100 bytes: those and 10 times as many below.
        assert_eq!(leveled(&[(1, 1700)], 160, 10), 1100.0);
    }
}
