//! The coordinator's shard-local metrics.

use std::rc::Rc;

use shoal_metrics::Counter;
use shoal_runtime::this_shard;

thread_local! {
    static FORWARDED: Rc<Counter> = shoal_metrics::counter(
        "shoal_cql_forwarded_requests_total",
        "CQL requests a shard sent to the shard owning their token.",
        &[],
    );
    static FORWARDED_WRITES: Rc<Counter> = shoal_metrics::counter(
        "shoal_cross_dc_forwarded_writes_total",
        "Writes a coordinator sent another data center's replicas as one copy, to a replica that forwards it to the others.",
        &[],
    );
    static RELAYED_WRITES: Rc<Counter> = shoal_metrics::counter(
        "shoal_cross_dc_relayed_writes_total",
        "Copies of writes from another data center this node relayed to a replica of its own data center.",
        &[],
    );
    static RECONCILE_WRITES: Rc<Counter> = shoal_metrics::counter(
        "shoal_reconcile_writes_total",
        "Copies of partitions a coordinator wrote to replicas to bring them in line (read repair, repair, the read of a Paxos round).",
        &[],
    );
}

/// Registers the metrics on the calling shard, so they read 0 before the
/// first request rather than being absent.
pub fn register_metrics() {
    FORWARDED.with(|_| ());
    RECONCILE_WRITES.with(|_| ());
    FORWARDED_WRITES.with(|_| ());
    RELAYED_WRITES.with(|_| ());
}

/// Counts a write sent to another data center through a forwarder.
pub(crate) fn note_forwarded_write() {
    FORWARDED_WRITES.with(|c| c.inc());
}

/// Counts a copy of a write relayed for a coordinator in another data center.
pub(crate) fn note_relayed_write() {
    RELAYED_WRITES.with(|c| c.inc());
}

/// Counts `copies` written by a reconciliation.
pub(crate) fn note_reconcile_writes(copies: usize) {
    RECONCILE_WRITES.with(|c| c.add(copies as u64));
}

/// Counts a single-shard request whose owner is not the shard it arrived on:
/// with shard-aware drivers this stays at zero.
pub(crate) fn note_target(shard: usize) {
    if shard != this_shard() {
        FORWARDED.with(|f| f.inc());
    }
}
