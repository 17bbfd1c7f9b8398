//! Recording operation results: HDR latency histograms (microseconds) and
//! error/miss counts, per operation kind for the run and merged per
//! one-second interval for the progress lines.
//!
//! Workers record into a small number of [`Recorder`] slots behind plain
//! mutexes (held for one operation's or one pipelined batch's increments, never across an await); the
//! slot count follows the worker threads, not the concurrency, because one
//! set of histograms is ~0.5 MB. The progress reporter swaps the interval
//! histograms out once a second. Only successful operations (misses
//! included) have a latency; errors are counted apart.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::error::OpError;
use crate::workload::OpKind;

/// Highest latency kept exactly (one hour); longer ones are clamped to it.
const LATENCY_MAX_US: u64 = 3_600_000_000;
/// Significant decimal digits of the histograms.
const LATENCY_DIGITS: u8 = 3;

/// A successful operation's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Written, or read and found.
    Done,
    /// Read and not found: counted as an operation, not an error.
    Miss,
}

/// Latencies and counts of one kind of operation (or of all, per interval).
#[derive(Debug, Clone)]
pub struct OpStats {
    /// Successful operations' latencies in microseconds.
    pub latency_us: Histogram<u64>,
    pub errors: u64,
    pub misses: u64,
}

impl OpStats {
    pub fn new() -> OpStats {
        // Invariant: the bounds are constants that satisfy the histogram's
        // requirements (low >= 1, high >= 2 * low, digits <= 5).
        let latency_us =
            Histogram::new_with_bounds(1, LATENCY_MAX_US, LATENCY_DIGITS).expect("constant histogram bounds are valid");
        OpStats { latency_us, errors: 0, misses: 0 }
    }

    /// Successful operations (misses included).
    pub fn ops(&self) -> u64 {
        self.latency_us.len()
    }

    pub fn add(&mut self, other: &OpStats) {
        // Same bounds on both sides, and the histograms auto-resize anyway.
        self.latency_us.add(&other.latency_us).expect("histograms of equal bounds merge");
        self.errors += other.errors;
        self.misses += other.misses;
    }

    fn record(&mut self, result: &Result<Outcome, OpError>, latency_us: u64) {
        match result {
            Ok(outcome) => {
                self.latency_us.saturating_record(latency_us);
                self.misses += u64::from(*outcome == Outcome::Miss);
            }
            Err(_) => self.errors += 1,
        }
    }

    fn reset(&mut self) {
        self.latency_us.reset();
        self.errors = 0;
        self.misses = 0;
    }
}

impl Default for OpStats {
    fn default() -> Self {
        OpStats::new()
    }
}

/// What one slot has recorded.
#[derive(Debug, Default)]
struct Recorder {
    /// All kinds, warm-up included, since the last progress line.
    interval: OpStats,
    /// Measured operations only, indexed like [`OpKind::ALL`].
    totals: [OpStats; 2],
    first_error: Option<String>,
}

/// The run's statistics, shared by all workers.
#[derive(Debug)]
pub struct Recorders {
    slots: Vec<Mutex<Recorder>>,
}

fn lock(slot: &Mutex<Recorder>) -> MutexGuard<'_, Recorder> {
    // A worker cannot panic while holding the lock (histogram calls do not
    // panic), and the counts stay usable either way.
    slot.lock().unwrap_or_else(PoisonError::into_inner)
}

fn kind_index(kind: OpKind) -> usize {
    match kind {
        OpKind::Read => 0,
        OpKind::Write => 1,
    }
}

/// One finished operation, as recorded.
#[derive(Debug, Clone)]
pub struct Finished {
    pub kind: OpKind,
    pub result: Result<Outcome, OpError>,
    pub latency: Duration,
    /// False during the warm-up.
    pub measured: bool,
}

/// Run totals, merged over the slots.
#[derive(Debug, Default)]
pub struct Totals {
    pub read: OpStats,
    pub write: OpStats,
    pub first_error: Option<String>,
}

impl Totals {
    pub fn of(&self, kind: OpKind) -> &OpStats {
        match kind {
            OpKind::Read => &self.read,
            OpKind::Write => &self.write,
        }
    }

    /// Both kinds together.
    pub fn all(&self) -> OpStats {
        let mut all = self.read.clone();
        all.add(&self.write);
        all
    }
}

impl Recorders {
    pub fn new(slots: usize) -> Recorders {
        Recorders { slots: (0..slots.max(1)).map(|_| Mutex::default()).collect() }
    }

    /// Records one finished operation in slot `worker % slots`.
    pub fn record(
        &self,
        worker: usize,
        kind: OpKind,
        result: &Result<Outcome, OpError>,
        latency: Duration,
        measured: bool,
    ) {
        self.record_all(worker, [Finished { kind, result: result.clone(), latency, measured }]);
    }

    /// Records finished operations in slot `worker % slots`, under one lock
    /// (a pipelined batch costs one lock, not one per operation).
    pub fn record_all(&self, worker: usize, finished: impl IntoIterator<Item = Finished>) {
        let mut r = lock(&self.slots[worker % self.slots.len()]);
        for f in finished {
            let latency_us = u64::try_from(f.latency.as_micros()).unwrap_or(u64::MAX);
            r.interval.record(&f.result, latency_us);
            if f.measured {
                r.totals[kind_index(f.kind)].record(&f.result, latency_us);
            }
            if let (Err(e), None) = (&f.result, &r.first_error) {
                r.first_error = Some(e.to_string());
            }
        }
    }

    /// Everything recorded since the last call, all kinds merged.
    pub fn take_interval(&self) -> OpStats {
        let mut merged = OpStats::new();
        for slot in &self.slots {
            let mut r = lock(slot);
            merged.add(&r.interval);
            r.interval.reset();
        }
        merged
    }

    pub fn totals(&self) -> Totals {
        let mut totals = Totals::default();
        for slot in &self.slots {
            let r = lock(slot);
            totals.read.add(&r.totals[kind_index(OpKind::Read)]);
            totals.write.add(&r.totals[kind_index(OpKind::Write)]);
            if totals.first_error.is_none() {
                totals.first_error.clone_from(&r.first_error);
            }
        }
        totals
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measured_ops_reach_the_totals_and_every_op_the_interval() {
        let rec = Recorders::new(2);
        let us = Duration::from_micros;
        rec.record(0, OpKind::Read, &Ok(Outcome::Done), us(100), true);
        rec.record(1, OpKind::Read, &Ok(Outcome::Miss), us(200), true);
        rec.record(2, OpKind::Write, &Err(OpError::NotStored), us(300), true);
        rec.record(3, OpKind::Write, &Ok(Outcome::Done), us(400), false);
        let interval = rec.take_interval();
        assert_eq!((interval.ops(), interval.errors, interval.misses), (3, 1, 1));
        assert_eq!(rec.take_interval().ops(), 0, "the interval resets");
        let totals = rec.totals();
        assert_eq!((totals.read.ops(), totals.read.misses), (2, 1));
        assert_eq!((totals.write.ops(), totals.write.errors), (0, 1));
        assert_eq!(totals.all().latency_us.max(), 200);
        assert_eq!(totals.first_error.as_deref(), Some("not stored"));
    }
}
