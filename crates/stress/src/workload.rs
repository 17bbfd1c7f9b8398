//! From an operation index to an operation: read or write, and which
//! partition / row.
//!
//! A write touches one row `(pk, ck)`, a read a whole partition `pk`. With
//! `seq`, index `i` covers row `i mod (keys x rows)`, i.e. `pk = j / rows`,
//! `ck = j % rows`, so a seq write run of `keys x rows` operations loads every
//! row once. Otherwise `pk` comes from the population and `ck` is uniform in
//! `0..rows`. memcache has no rows: it is run with `rows = 1`. The mixed
//! workload picks read or write at random in the `--ratio` proportion (random,
//! not by index, so that under `seq` reads do not only ever see the keys that
//! the writes skip).

use rand::Rng;

use crate::args::{PopulationKind, Ratio, WorkloadKind};
use crate::population::Population;

/// Operation type; indexes [`crate::stats`] per-op statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    Read,
    Write,
}

impl OpKind {
    pub const ALL: [OpKind; 2] = [OpKind::Read, OpKind::Write];

    pub fn name(self) -> &'static str {
        match self {
            OpKind::Read => "read",
            OpKind::Write => "write",
        }
    }
}

/// One operation to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op {
    pub kind: OpKind,
    /// Partition key (memcache: the key number).
    pub pk: u64,
    /// Clustering key; reads ignore it.
    pub ck: u32,
}

/// Turns operation indexes into operations.
#[derive(Debug, Clone, Copy)]
pub struct Workload {
    kind: WorkloadKind,
    ratio: Ratio,
    pop: PopulationKind,
    keys: Population,
    /// `keys x rows` for seq, which walks rows rather than partitions.
    rows_total: u64,
    rows: u32,
}

impl Workload {
    /// `keys >= 1`, `rows >= 1`, and `keys x rows` fits u64 (checked by `Config`).
    pub fn new(kind: WorkloadKind, ratio: Ratio, pop: PopulationKind, keys: u64, rows: u32) -> Workload {
        assert!(rows > 0, "no rows per partition");
        let rows_total = keys.saturating_mul(u64::from(rows));
        Workload { kind, ratio, pop, keys: Population::new(pop, keys), rows_total, rows }
    }

    /// The kinds of operation this workload issues.
    pub fn kinds(&self) -> &'static [OpKind] {
        match self.kind {
            WorkloadKind::Read => &[OpKind::Read],
            WorkloadKind::Write => &[OpKind::Write],
            WorkloadKind::Mixed => &OpKind::ALL,
        }
    }

    pub fn op(&self, index: u64, rng: &mut impl Rng) -> Op {
        let kind = match self.kind {
            WorkloadKind::Read => OpKind::Read,
            WorkloadKind::Write => OpKind::Write,
            WorkloadKind::Mixed => {
                let total = self.ratio.reads + self.ratio.writes;
                if rng.gen_range(0..total) < self.ratio.reads {
                    OpKind::Read
                } else {
                    OpKind::Write
                }
            }
        };
        let rows = u64::from(self.rows);
        let (pk, ck) = match self.pop {
            PopulationKind::Seq => {
                let row = index % self.rows_total;
                (row / rows, row % rows)
            }
            PopulationKind::Uniform | PopulationKind::Gaussian => (self.keys.key(index, rng), rng.gen_range(0..rows)),
        };
        // ck < rows <= u32::MAX.
        Op { kind, pk, ck: ck as u32 }
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    use super::*;

    const ONE_TO_ONE: Ratio = Ratio { reads: 1, writes: 1 };

    #[test]
    fn seq_walks_every_row_once_per_lap() {
        let w = Workload::new(WorkloadKind::Write, ONE_TO_ONE, PopulationKind::Seq, 3, 4);
        let mut rng = StdRng::seed_from_u64(0);
        let rows: Vec<(u64, u32)> = (0..14).map(|i| w.op(i, &mut rng)).map(|op| (op.pk, op.ck)).collect();
        let expected: Vec<(u64, u32)> = (0..3).flat_map(|pk| (0..4).map(move |ck| (pk, ck))).collect();
        assert_eq!(rows[..12], expected[..]);
        assert_eq!(rows[12..], [(0, 0), (0, 1)]);
    }

    #[test]
    fn mixed_follows_the_ratio() {
        let w = Workload::new(WorkloadKind::Mixed, Ratio { reads: 3, writes: 1 }, PopulationKind::Uniform, 100, 1);
        let mut rng = StdRng::seed_from_u64(0);
        let reads = (0..40_000).filter(|&i| w.op(i, &mut rng).kind == OpKind::Read).count();
        assert!((29_000..31_000).contains(&reads), "{reads} reads of 40000");
        assert_eq!(w.kinds(), OpKind::ALL);
    }

    #[test]
    fn drawn_rows_stay_in_range() {
        let w = Workload::new(WorkloadKind::Read, ONE_TO_ONE, PopulationKind::Gaussian, 10, 3);
        let mut rng = StdRng::seed_from_u64(0);
        assert!((0..1000).map(|i| w.op(i, &mut rng)).all(|op| op.pk < 10 && op.ck < 3 && op.kind == OpKind::Read));
    }
}
