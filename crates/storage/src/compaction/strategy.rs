//! Compaction strategies: which SSTables to merge next. Cassandra's three,
//! chosen per table with `WITH compaction = {'class': ...}` and Cassandra's
//! option names.
//!
//! - Size-tiered (default): SSTables of similar size (within
//!   `bucket_low`..`bucket_high` of their bucket's average, or all below
//!   `min_sstable_size`) are merged once `min_threshold` of them exist.
//! - Leveled: flushed SSTables land in L0; L0 merges into L1 once it holds
//!   `min_threshold` (4); level n holds at most `fanout`^n SSTables of
//!   `sstable_size_in_mb`, and an overfull level pushes its oldest SSTable,
//!   with the SSTables it overlaps, one level down. Within a level ≥ 1 key
//!   ranges do not overlap, so a read touches one SSTable per level.
//! - Time-window: SSTables are grouped by the window of their newest write
//!   (`compaction_window_unit` × `compaction_window_size`); the newest window
//!   compacts size-tiered, an older window with more than one SSTable is
//!   merged into one.
//! - ScyllaDB's `NullCompactionStrategy`: nothing is compacted on its own
//!   (a major compaction still merges everything).

use std::collections::BTreeMap;
use std::rc::Rc;

use crate::sstable::SSTable;

#[derive(Debug, Clone, PartialEq)]
pub enum Strategy {
    SizeTiered(SizeTiered),
    Leveled { sstable_size_bytes: u64, fanout: u64 },
    TimeWindow { window_s: i64, tiers: SizeTiered },
    Null,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SizeTiered {
    pub min_threshold: usize,
    pub max_threshold: usize,
    pub bucket_low: f64,
    pub bucket_high: f64,
    pub min_sstable_size_bytes: u64,
}

/// What to compact: the inputs, the level of the outputs, and the size at
/// which to start a new output SSTable.
pub struct Job {
    pub inputs: Vec<Rc<SSTable>>,
    pub output_level: u32,
    pub max_output_bytes: Option<u64>,
}

impl Strategy {
    /// From a table's `compaction` option map.
    pub fn from_options(options: &BTreeMap<String, String>) -> Strategy {
        let number = |key: &str, default: f64| options.get(key).and_then(|v| v.parse::<f64>().ok()).unwrap_or(default);
        let tiers = SizeTiered {
            min_threshold: number("min_threshold", 4.0).max(2.0) as usize,
            max_threshold: number("max_threshold", 32.0).max(2.0) as usize,
            bucket_low: number("bucket_low", 0.5),
            bucket_high: number("bucket_high", 1.5),
            min_sstable_size_bytes: (number("min_sstable_size", 50.0 * 1024.0 * 1024.0)) as u64,
        };
        let class = options.get("class").map(String::as_str).unwrap_or_default();
        match class.rsplit('.').next().unwrap_or(class) {
            "LeveledCompactionStrategy" => Strategy::Leveled {
                sstable_size_bytes: (number("sstable_size_in_mb", 160.0).max(1.0) * 1024.0 * 1024.0) as u64,
                fanout: number("fanout_size", 10.0).max(2.0) as u64,
            },
            "TimeWindowCompactionStrategy" => {
                let unit_s = match options.get("compaction_window_unit").map(|u| u.to_ascii_uppercase()).as_deref() {
                    Some("MINUTES") => 60,
                    Some("HOURS") => 3600,
                    _ => 86_400,
                };
                Strategy::TimeWindow { window_s: unit_s * number("compaction_window_size", 1.0).max(1.0) as i64, tiers }
            }
            "NullCompactionStrategy" => Strategy::Null,
            _ => Strategy::SizeTiered(tiers),
        }
    }

    /// The next job for `sstables` (those not already being compacted).
    pub fn pick(&self, sstables: &[Rc<SSTable>]) -> Option<Job> {
        match self {
            Strategy::SizeTiered(tiers) => {
                tiers.pick(sstables).map(|inputs| Job { inputs, output_level: 0, max_output_bytes: None })
            }
            Strategy::Leveled { sstable_size_bytes, fanout } => pick_leveled(sstables, *sstable_size_bytes, *fanout),
            Strategy::TimeWindow { window_s, tiers } => {
                let mut windows: BTreeMap<i64, Vec<Rc<SSTable>>> = BTreeMap::new();
                for s in sstables {
                    let newest_s = s.stats().max_timestamp.div_euclid(1_000_000);
                    windows.entry(newest_s.div_euclid(*window_s)).or_default().push(Rc::clone(s));
                }
                let (_, newest) = windows.pop_last()?;
                let older = windows.into_values().find(|w| w.len() > 1);
                let inputs = older.or_else(|| tiers.pick(&newest))?;
                Some(Job { inputs, output_level: 0, max_output_bytes: None })
            }
            Strategy::Null => None,
        }
    }

    /// A major compaction of `sstables`: everything into one (leveled: into
    /// SSTables of the configured size on the first level below L0 in use).
    pub fn major(&self, sstables: Vec<Rc<SSTable>>) -> Job {
        match self {
            Strategy::Leveled { sstable_size_bytes, .. } => {
                let level = sstables.iter().map(|s| s.stats().level).max().unwrap_or(0).max(1);
                Job { inputs: sstables, output_level: level, max_output_bytes: Some(*sstable_size_bytes) }
            }
            _ => Job { inputs: sstables, output_level: 0, max_output_bytes: None },
        }
    }
}

impl SizeTiered {
    fn pick(&self, sstables: &[Rc<SSTable>]) -> Option<Vec<Rc<SSTable>>> {
        let mut sorted: Vec<Rc<SSTable>> = sstables.to_vec();
        sorted.sort_by_key(|s| s.data_bytes());
        let mut buckets: Vec<(f64, Vec<Rc<SSTable>>)> = Vec::new();
        for s in sorted {
            let size = s.data_bytes() as f64;
            let fits = |(avg, _): &&mut (f64, Vec<Rc<SSTable>>)| {
                (size >= *avg * self.bucket_low && size <= *avg * self.bucket_high)
                    || (size < self.min_sstable_size_bytes as f64 && *avg < self.min_sstable_size_bytes as f64)
            };
            match buckets.iter_mut().find(fits) {
                Some((avg, members)) => {
                    *avg = (*avg * members.len() as f64 + size) / (members.len() + 1) as f64;
                    members.push(s);
                }
                None => buckets.push((size, vec![s])),
            }
        }
        let (_, mut bucket) = buckets.into_iter().find(|(_, members)| members.len() >= self.min_threshold)?;
        bucket.truncate(self.max_threshold);
        Some(bucket)
    }
}

fn overlapping(a: &SSTable, b: &SSTable) -> bool {
    match (&a.stats().first, &a.stats().last, &b.stats().first, &b.stats().last) {
        (Some(af), Some(al), Some(bf), Some(bl)) => af <= bl && bf <= al,
        _ => false,
    }
}

fn pick_leveled(sstables: &[Rc<SSTable>], sstable_size_bytes: u64, fanout: u64) -> Option<Job> {
    const L0_TRIGGER: usize = 4;
    const L0_MAX_INPUTS: usize = 32;
    let level = |n: u32| -> Vec<Rc<SSTable>> { sstables.iter().filter(|s| s.stats().level == n).cloned().collect() };
    let job = |inputs: Vec<Rc<SSTable>>, output_level: u32| Job {
        inputs,
        output_level,
        max_output_bytes: Some(sstable_size_bytes),
    };
    let mut l0 = level(0);
    if l0.len() >= L0_TRIGGER {
        l0.sort_by_key(|s| s.generation());
        l0.truncate(L0_MAX_INPUTS);
        let l1: Vec<Rc<SSTable>> = level(1).into_iter().filter(|s| l0.iter().any(|z| overlapping(s, z))).collect();
        return Some(job(l0.into_iter().chain(l1).collect(), 1));
    }
    let top = sstables.iter().map(|s| s.stats().level).max().unwrap_or(0);
    for n in 1..=top {
        let members = level(n);
        let limit = sstable_size_bytes.saturating_mul(fanout.saturating_pow(n));
        if members.iter().map(|s| s.data_bytes()).sum::<u64>() > limit {
            // Invariant: the level is over its (positive) limit, so not empty.
            #[allow(clippy::unwrap_used)]
            let oldest = members.iter().min_by_key(|s| s.generation()).unwrap();
            let below: Vec<Rc<SSTable>> = level(n + 1).into_iter().filter(|s| overlapping(s, oldest)).collect();
            return Some(job(std::iter::once(Rc::clone(oldest)).chain(below).collect(), n + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_strategy_never_picks() {
        let options = BTreeMap::from([("class".to_string(), "NullCompactionStrategy".to_string())]);
        let strategy = Strategy::from_options(&options);
        assert_eq!(strategy, Strategy::Null);
        assert!(strategy.pick(&[]).is_none());
        assert_eq!(strategy.backlog_bytes(&[]), 0.0);
    }
}
