//! I/O classes: what each disk request is for, so the userspace I/O
//! scheduler (a later step; docs/design.md §6, Seastar's io queue) can give each
//! class its share of the disk. Every call into this crate names its class.
//!
//! The scheduler's contract, fixed now so callers classify correctly:
//! queries, commitlog, memtable flush and compaction get 1000 shares each;
//! streaming and maintenance 200; compaction's shares will be set by a
//! controller from its backlog. Until the scheduler exists, the class is
//! only counted (`shoal_io_operations_total` and `shoal_io_bytes_total` by
//! `class`, per shard), so the seam is visible and tested.

use std::cell::RefCell;
use std::rc::Rc;

use shoal_metrics::Counter;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IoClass {
    /// Reads that answer a client's query.
    Query,
    /// Commitlog appends, syncs and segment management.
    Commitlog,
    /// Writing a memtable out as an SSTable.
    Flush,
    /// Reading compaction's inputs and writing its outputs.
    Compaction,
    /// Moving data between nodes (bootstrap, repair).
    Streaming,
    /// Everything else: start-up replay and recovery, snapshots, schema
    /// file writes, deletions of obsolete files.
    Maintenance,
}

impl IoClass {
    pub const ALL: [IoClass; 6] = [
        IoClass::Query,
        IoClass::Commitlog,
        IoClass::Flush,
        IoClass::Compaction,
        IoClass::Streaming,
        IoClass::Maintenance,
    ];

    pub fn name(self) -> &'static str {
        match self {
            IoClass::Query => "query",
            IoClass::Commitlog => "commitlog",
            IoClass::Flush => "flush",
            IoClass::Compaction => "compaction",
            IoClass::Streaming => "streaming",
            IoClass::Maintenance => "maintenance",
        }
    }

    /// The scheduler's default shares for the class.
    pub fn default_shares(self) -> u32 {
        match self {
            IoClass::Streaming | IoClass::Maintenance => 200,
            _ => 1000,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// One class's counters on this shard.
struct ClassCounters {
    operations: Rc<Counter>,
    bytes: Rc<Counter>,
}

thread_local! {
    static COUNTERS: RefCell<Option<Vec<ClassCounters>>> = const { RefCell::new(None) };
}

/// Counts one request of `class` moving `bytes` (0 for metadata calls).
pub(crate) fn record(class: IoClass, bytes: usize) {
    COUNTERS.with(|counters| {
        let mut counters = counters.borrow_mut();
        let counters = counters.get_or_insert_with(register);
        let class_counters = &counters[class.index()];
        class_counters.operations.inc();
        class_counters.bytes.add(bytes as u64);
    });
}

fn register() -> Vec<ClassCounters> {
    IoClass::ALL
        .iter()
        .map(|class| ClassCounters {
            operations: shoal_metrics::counter(
                "shoal_io_operations_total",
                "Disk requests by I/O class (reads, writes, syncs, renames, ...).",
                &[("class", class.name())],
            ),
            bytes: shoal_metrics::counter(
                "shoal_io_bytes_total",
                "Bytes read and written by I/O class.",
                &[("class", class.name())],
            ),
        })
        .collect()
}

/// The requests and bytes counted for `class` on this shard so far.
pub fn counted(class: IoClass) -> (u64, u64) {
    COUNTERS.with(|counters| {
        counters.borrow().as_ref().map_or((0, 0), |c| {
            let class_counters = &c[class.index()];
            (class_counters.operations.get(), class_counters.bytes.get())
        })
    })
}
