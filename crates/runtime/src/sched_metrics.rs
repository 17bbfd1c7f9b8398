//! The CPU scheduler's metrics on this shard, per group, read at scrape
//! time under ScyllaDB's names: runtime, tasks processed, tasks giving the
//! core back, time waited, shares. ScyllaDB types its runtime, tasks and
//! wait time as counters; the exporter keeps counters to names ending in
//! `_total` (OpenMetrics), so under ScyllaDB's names they are gauges that
//! only grow.

use crate::cpu_fair::GroupStats;

/// Registers the collector on the calling shard (once, with its
/// scheduler), reading the groups through `snapshot` (the scheduler's, so
/// this module names nothing above it): each group's label (`sl:NAME` for
/// a service level's) and figures.
pub(crate) fn register(snapshot: fn() -> Option<Vec<(String, GroupStats)>>) {
    shoal_metrics::register_collector(move |collector| {
        let Some(groups) = snapshot() else { return };
        for (group, stats) in groups {
            let labels = || vec![("group", group.clone())];
            collector.gauge(
                "scylla_scheduler_runtime_ms",
                "Accumulated runtime of this task queue; an increment rate of 1000ms per second indicates full utilization",
                labels(),
                stats.runtime_ns as f64 / 1e6,
            );
            collector.gauge(
                "scylla_scheduler_tasks_processed",
                "Count of tasks executing on this queue; indicates together with runtime_ms indicates length of tasks",
                labels(),
                stats.tasks as f64,
            );
            collector.gauge(
                "scylla_scheduler_queue_length",
                "Size of backlog on this queue, in tasks; indicates whether the queue is busy and/or contended",
                labels(),
                f64::from(stats.waiting),
            );
            collector.gauge(
                "scylla_scheduler_waittime_ms",
                "Accumulated waittime of this task queue; an increment rate of 1000ms per second indicates queue is waiting for something (e.g. IO)",
                labels(),
                stats.wait_ns as f64 / 1e6,
            );
            collector.gauge(
                "scylla_scheduler_shares",
                "Shares allocated to this queue",
                labels(),
                f64::from(stats.shares),
            );
        }
    });
}
