//! The I/O scheduler's metrics on this shard, per class, read from the
//! shard's queue at scrape time: requests queued and in flight, requests
//! and bytes dispatched, the total time requests waited, and shares.

use crate::io_queue::snapshot;

/// Registers the collector on the calling shard (once, with its queue).
pub(crate) fn register() {
    shoal_metrics::register_collector(|collector| {
        let Some(classes) = snapshot() else { return };
        for (class, stats, queued, shares) in classes {
            let labels = || vec![("class", class.name().to_string())];
            collector.gauge(
                "shoal_io_queue_queued_requests",
                "Requests waiting in the shard's I/O queue, by class.",
                labels(),
                queued as f64,
            );
            collector.gauge(
                "shoal_io_queue_in_flight_requests",
                "Requests dispatched to the disk and not yet completed, by class.",
                labels(),
                stats.in_flight as f64,
            );
            collector.counter(
                "shoal_io_queue_dispatched_total",
                "Requests the I/O queue let go to the disk, by class.",
                labels(),
                stats.ops_dispatched as f64,
            );
            collector.counter(
                "shoal_io_queue_dispatched_bytes_total",
                "Bytes of the requests the I/O queue let go, by class.",
                labels(),
                stats.bytes_dispatched as f64,
            );
            collector.counter(
                "shoal_io_queue_delay_seconds_total",
                "Time requests waited in the I/O queue before dispatch, by class.",
                labels(),
                stats.queue_delay_ns as f64 / 1e9,
            );
            collector.gauge("shoal_io_queue_shares", "The class's shares of the disk.", labels(), f64::from(shares));
        }
    });
}
