//! memcached's statistics (`stats`, `stats settings|items|slabs`): counters
//! kept per shard, summed over every shard when a client asks, and also
//! exported on `/metrics` as `shoal_memcache_operations_total{stat=...}`.

use std::cell::Cell;

use shoal_metrics::Collector;

/// The counters memcached's `stats` reports, by position in [`NAMES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stat {
    CmdGet,
    CmdSet,
    CmdFlush,
    CmdTouch,
    GetHits,
    GetMisses,
    DeleteMisses,
    DeleteHits,
    IncrMisses,
    IncrHits,
    DecrMisses,
    DecrHits,
    CasMisses,
    CasHits,
    CasBadval,
    TouchHits,
    TouchMisses,
    TotalItems,
    TotalConnections,
    BytesRead,
    BytesWritten,
}

pub const NAMES: [&str; 21] = [
    "cmd_get",
    "cmd_set",
    "cmd_flush",
    "cmd_touch",
    "get_hits",
    "get_misses",
    "delete_misses",
    "delete_hits",
    "incr_misses",
    "incr_hits",
    "decr_misses",
    "decr_hits",
    "cas_misses",
    "cas_hits",
    "cas_badval",
    "touch_hits",
    "touch_misses",
    "total_items",
    "total_connections",
    "bytes_read",
    "bytes_written",
];

thread_local! {
    /// Set by `cache_memlimit` (on every shard), reported as
    /// `limit_maxbytes`.
    static MEMORY_LIMIT_BYTES: Cell<Option<u64>> = const { Cell::new(None) };
    static COUNTERS: [Cell<u64>; NAMES.len()] = Default::default();
    static CONNECTIONS: Cell<u64> = const { Cell::new(0) };
}

pub fn add(stat: Stat, n: u64) {
    COUNTERS.with(|c| c[stat as usize].set(c[stat as usize].get() + n));
}

pub fn bump(stat: Stat) {
    add(stat, 1);
}

/// This shard's counters, and its open connections.
pub fn snapshot() -> ([u64; NAMES.len()], u64) {
    (COUNTERS.with(|c| std::array::from_fn(|i| c[i].get())), CONNECTIONS.with(Cell::get))
}

/// Counts a connection as open while it lives.
pub(crate) struct OpenConnection(());

impl OpenConnection {
    pub(crate) fn new() -> OpenConnection {
        bump(Stat::TotalConnections);
        CONNECTIONS.with(|c| c.set(c.get() + 1));
        OpenConnection(())
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        CONNECTIONS.with(|c| c.set(c.get() - 1));
    }
}

pub fn memory_limit_bytes() -> Option<u64> {
    MEMORY_LIMIT_BYTES.with(Cell::get)
}

pub fn set_memory_limit_bytes(bytes: u64) {
    MEMORY_LIMIT_BYTES.with(|limit| limit.set(Some(bytes)));
}

/// Exports the counters on the calling shard's `/metrics`.
pub fn register_metrics() {
    shoal_metrics::register_collector(|collector: &mut Collector| {
        let (counters, connections) = snapshot();
        for (name, value) in NAMES.iter().zip(counters) {
            collector.counter(
                "shoal_memcache_operations_total",
                "memcached protocol statistics, as its `stats` command names them.",
                vec![("stat", (*name).to_string())],
                value as f64,
            );
        }
        collector.gauge(
            "shoal_memcache_connections",
            "Open memcached protocol connections.",
            Vec::new(),
            connections as f64,
        );
    });
}
