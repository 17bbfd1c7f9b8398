//! How long the coordinator lets a request wait: Cassandra's and
//! ScyllaDB's `*_request_timeout_in_ms` options, set once at start.
//!
//! A request gets a deadline when the coordinator takes it. Work that
//! reaches its shard after the deadline is dropped with a timeout error
//! rather than run for a client that has given up (as ScyllaDB drops reads
//! that waited too long in a queue); work already started runs to its end,
//! so a write that times out may still have been applied — what a
//! WriteTimeout means in CQL. With replicas on other nodes the same
//! deadline bounds the wait for their answers.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The node's request timeouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Single-partition reads (`read_request_timeout_in_ms`).
    pub read: Duration,
    /// Reads of token ranges (`range_request_timeout_in_ms`).
    pub range: Duration,
    /// Writes (`write_request_timeout_in_ms`).
    pub write: Duration,
    /// Counter writes (`counter_write_request_timeout_in_ms`).
    pub counter_write: Duration,
    /// Conditional writes waiting for their partition
    /// (`cas_contention_timeout_in_ms`).
    pub cas: Duration,
    /// TRUNCATE (`truncate_request_timeout_in_ms`).
    pub truncate: Duration,
}

impl Default for Timeouts {
    /// ScyllaDB's defaults.
    fn default() -> Timeouts {
        Timeouts {
            read: Duration::from_millis(5_000),
            range: Duration::from_millis(10_000),
            write: Duration::from_millis(2_000),
            counter_write: Duration::from_millis(5_000),
            cas: Duration::from_millis(1_000),
            truncate: Duration::from_millis(60_000),
        }
    }
}

static TIMEOUTS: OnceLock<Timeouts> = OnceLock::new();

/// Sets the node's timeouts; call once at start, before serving.
pub fn set_timeouts(timeouts: Timeouts) {
    // A second call (tests starting several nodes in one process) keeps the first.
    let _ = TIMEOUTS.set(timeouts);
}

/// The node's timeouts (the defaults before [`set_timeouts`]).
pub fn timeouts() -> Timeouts {
    TIMEOUTS.get().copied().unwrap_or_default()
}

/// When a request taken now with `timeout` must be done by.
pub(crate) fn deadline(timeout: Duration) -> Instant {
    // A timeout too large to add is no deadline at all.
    Instant::now().checked_add(timeout).unwrap_or_else(|| Instant::now() + Duration::from_secs(365 * 86_400))
}
