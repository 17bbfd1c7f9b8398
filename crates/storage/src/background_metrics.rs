//! How long this shard's flushes spend in each step and how long its
//! compactions take, as histograms in `/metrics`
//! (`shoal_flush_phase_seconds{phase=...}`, `shoal_compaction_seconds`):
//! where the background work a write load brings goes, so a latency stall
//! can be set beside the step that ran then.
//!
//! The histograms are registered on a shard's first use (each shard
//! thread has its own, as every metric).

use std::rc::Rc;
use std::time::Duration;

use shoal_metrics::Histogram;

/// A flush's steps, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushStep {
    /// The memtable's partitions written into the SSTable's files.
    Write,
    /// The SSTable's last writes and its components' fdatasyncs.
    Finish,
    /// The new SSTable opened (its small components read back).
    Open,
    /// The memtable merged into the row cache.
    CacheMerge,
    /// The flushed memtable's memory freed.
    Release,
    /// The commitlog segments no memtable needs any more deleted.
    DiscardSegments,
}

const STEPS: [(FlushStep, &str); 6] = [
    (FlushStep::Write, "write"),
    (FlushStep::Finish, "finish"),
    (FlushStep::Open, "open"),
    (FlushStep::CacheMerge, "cache_merge"),
    (FlushStep::Release, "release"),
    (FlushStep::DiscardSegments, "discard_segments"),
];

struct Histograms {
    flush_steps: Vec<Rc<Histogram>>,
    compaction: Rc<Histogram>,
}

thread_local! {
    static HISTOGRAMS: Histograms = Histograms {
        flush_steps: STEPS
            .iter()
            .map(|(_, phase)| {
                shoal_metrics::histogram(
                    "shoal_flush_phase_seconds",
                    "Time memtable flushes spent in each step.",
                    &[("phase", phase)],
                )
            })
            .collect(),
        compaction: shoal_metrics::histogram("shoal_compaction_seconds", "Time each compaction took.", &[]),
    };
}

/// Counts `elapsed` as one run of a flush's `step`.
pub fn record_flush_step(step: FlushStep, elapsed: Duration) {
    let index = STEPS.iter().position(|(s, _)| *s == step).unwrap_or_default();
    HISTOGRAMS.with(|h| h.flush_steps[index].record(elapsed));
}

/// Counts `elapsed` as one compaction's time, start to install.
pub fn record_compaction(elapsed: Duration) {
    HISTOGRAMS.with(|h| h.compaction.record(elapsed));
}
