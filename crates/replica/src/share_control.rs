//! The shard's backlog controllers (issue 29 item 5; ScyllaDB's
//! `compaction_controller` and `flush_controller`): every
//! [`CONTROL_PERIOD`], compaction's shares are set from its backlog (the
//! bytes its strategies still have to compact, over the memtable budget)
//! and memtable flush's from memtable fill (memtable memory over the
//! budget), each within its curve's bounds
//! (`shoal_runtime::controller`). The same shares go to the CPU group and
//! to the I/O class, so compaction speeds up on both when it falls behind
//! and stays out of the queries' way when it does not.
//!
//! ScyllaDB's `compaction_static_shares` and `memtable_flush_static_shares`
//! ([`StaticShares`]) pin a group's shares instead, for benchmarks that
//! show what the controller changes.
//!
//! Seen in `/metrics`: `scylla_scheduler_shares{group="compaction"}` and
//! `{group="memtable"}`, `shoal_io_queue_shares{class=...}`, and the inputs
//! `scylla_compaction_manager_backlog` (bytes) and
//! `shoal_memtable_dirty_ratio`.

use std::rc::Rc;
use std::time::Duration;

use shoal_io::IoClass;
use shoal_metrics::Gauge;
use shoal_runtime::controller::{Controller, COMPACTION_POINTS, FLUSH_POINTS};
use shoal_runtime::Group;

/// How often the controllers look (ScyllaDB's 250 ms).
pub(crate) const CONTROL_PERIOD: Duration = Duration::from_millis(250);

/// The inputs the controllers last saw, as metrics.
struct Inputs {
    backlog_bytes: Rc<Gauge>,
    /// Dirty memory over the budget, in thousandths (a gauge is integral).
    dirty_permille: Rc<Gauge>,
}

fn set(gauge: &Gauge, value: i64) {
    gauge.add(value - gauge.get());
}

/// Fixed shares that replace a controller; `None`: the controller.
#[derive(Debug, Clone, Copy, Default)]
pub struct StaticShares {
    pub compaction: Option<u32>,
    pub flush: Option<u32>,
}

/// What the controllers read each period (the database's figures, passed
/// in so this module names nothing above it).
pub(crate) struct Readings {
    /// Bytes the compaction strategies still have to compact.
    pub backlog_bytes: f64,
    pub memtable_bytes: usize,
    /// The memtable budget, more than zero.
    pub budget_bytes: usize,
}

/// Runs the controllers on this shard, on what `read` answers (`None`:
/// no budget yet, nothing to control); a group with static shares keeps
/// them. Never returns.
pub(crate) async fn run(statics: StaticShares, read: impl Fn() -> Option<Readings>) {
    let compaction = Controller::new(&COMPACTION_POINTS);
    let flush = Controller::new(&FLUSH_POINTS);
    let inputs = Inputs {
        backlog_bytes: shoal_metrics::gauge(
            "scylla_compaction_manager_backlog",
            "Bytes the compaction strategies still have to compact on this shard (the compaction controller's input).",
            &[],
        ),
        dirty_permille: shoal_metrics::gauge(
            "shoal_memtable_dirty_ratio_permille",
            "Memtable memory over the memtable budget, in thousandths (the flush controller's input).",
            &[],
        ),
    };
    loop {
        shoal_runtime::time::sleep(CONTROL_PERIOD).await;
        let Some(Readings { backlog_bytes, memtable_bytes, budget_bytes }) = read() else { continue };
        assert!(budget_bytes > 0, "the controllers divide by the memtable budget");
        let dirty = memtable_bytes as f64 / budget_bytes as f64;
        set(&inputs.backlog_bytes, backlog_bytes as i64);
        set(&inputs.dirty_permille, (dirty * 1000.0) as i64);
        let compaction_shares =
            statics.compaction.unwrap_or_else(|| compaction.shares(backlog_bytes / budget_bytes as f64));
        apply(Group::Compaction, IoClass::Compaction, compaction_shares);
        apply(Group::Flush, IoClass::Flush, statics.flush.unwrap_or_else(|| flush.shares(dirty)));
    }
}

fn apply(group: Group, class: IoClass, shares: u32) {
    shoal_runtime::sched::set_shares(group, shares);
    shoal_io::set_shares(class, shares);
}
