//! The coordinator's shard-local counters.

use std::cell::Cell;

use shoal_runtime::this_shard;

thread_local! {
    static FORWARDED: Cell<u64> = const { Cell::new(0) };
}

/// Counts a single-shard request whose owner is not the shard it arrived on:
/// with shard-aware drivers this stays at zero.
pub(crate) fn note_target(shard: usize) {
    if shard != this_shard() {
        FORWARDED.with(|f| f.set(f.get() + 1));
    }
}

/// Requests this shard forwarded to another shard since start.
pub fn forwarded_requests_total() -> u64 {
    FORWARDED.with(Cell::get)
}
