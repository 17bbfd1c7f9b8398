//! I/O classes: what each disk request is for, so the userspace I/O
//! scheduler (a later step; docs/design.md §6, Seastar's io queue) can give each
//! class its share of the disk. Every call into this crate names its class.
//!
//! The scheduler's contract, fixed now so callers classify correctly:
//! queries, commitlog, memtable flush and compaction get 1000 shares each;
//! streaming and maintenance 200; compaction's shares will be set by a
//! controller from its backlog. Until the scheduler exists, the class is
//! only counted (`shoal_io_operations_total` and `shoal_io_bytes_total` by
//! `class`, per shard), so the seam is visible and tested. A query-class
//! read made by a background scheduling group is charged to that group's
//! class ([`effective`]).

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

/// The class a request of `named` class is charged to: the caller's
/// class, except that a read for a query (`Query`) made by background work
/// (a task running in a background CPU scheduling group: streaming,
/// repair and view building read tables through the query path) goes in
/// that group's class, as Seastar ties I/O classes to scheduling groups.
pub(crate) fn effective(named: IoClass) -> IoClass {
    use shoal_runtime::Group;
    if named != IoClass::Query {
        return named;
    }
    match shoal_runtime::sched::current_group() {
        Some(Group::Streaming) => IoClass::Streaming,
        Some(Group::Compaction) => IoClass::Compaction,
        Some(Group::Flush) => IoClass::Flush,
        Some(Group::Maintenance) => IoClass::Maintenance,
        Some(Group::Statements | Group::ServiceLevel(_) | Group::Commitlog) | None => named,
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
    let class = effective(class);
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

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_runtime::sched::in_group;
    use shoal_runtime::Group;

    #[test]
    fn a_query_read_by_background_work_goes_in_its_group_class() {
        crate::block_on(async {
            assert_eq!(effective(IoClass::Query), IoClass::Query);
            in_group(Group::Streaming, async {
                assert_eq!(effective(IoClass::Query), IoClass::Streaming);
                // A class named for its own purpose stays.
                assert_eq!(effective(IoClass::Maintenance), IoClass::Maintenance);
            })
            .await;
            in_group(Group::Statements, async { assert_eq!(effective(IoClass::Query), IoClass::Query) }).await;
            in_group(Group::Compaction, async { assert_eq!(effective(IoClass::Query), IoClass::Compaction) }).await;
            let before = counted(IoClass::Streaming);
            in_group(Group::Streaming, async { record(IoClass::Query, 10) }).await;
            assert_eq!(counted(IoClass::Streaming), (before.0 + 1, before.1 + 10));
        });
    }
}
