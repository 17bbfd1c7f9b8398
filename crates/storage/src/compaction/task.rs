//! A compaction under way, as its table lists it while it runs
//! ([`crate::table::Table::compactions`]): its kind, its progress in input
//! partitions (nodetool compactionstats) and the flag that stops it at its
//! next partition (nodetool stop). Apart from the job running it
//! (`compaction`), so that the table can hold it without naming the
//! compaction that names the table.

use std::cell::Cell;

use super::strategy::Job;

/// Why a compaction runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactionKind {
    /// A job the table's strategy picked (autocompaction).
    Regular,
    /// Every SSTable into one (nodetool compact).
    Major,
    /// Every SSTable, without the ranges the node no longer replicates
    /// (nodetool cleanup).
    Cleanup,
}

impl CompactionKind {
    /// The type nodetool shows and `nodetool stop` names: Cassandra's
    /// `OperationType` (a major compaction is a `COMPACTION` too).
    pub fn operation_type(self) -> &'static str {
        match self {
            CompactionKind::Regular | CompactionKind::Major => "COMPACTION",
            CompactionKind::Cleanup => "CLEANUP",
        }
    }
}

/// A compaction under way on this shard.
#[derive(Debug)]
pub struct CompactionTask {
    pub id: uuid::Uuid,
    pub kind: CompactionKind,
    /// The partitions of the inputs: a partition in several inputs counts
    /// once for each, as it is read once from each.
    pub total_partitions: u64,
    completed_partitions: Cell<u64>,
    stopped: Cell<bool>,
}

impl CompactionTask {
    pub(crate) fn new(kind: CompactionKind, job: &Job) -> CompactionTask {
        CompactionTask {
            id: uuid::Uuid::new_v4(),
            kind,
            total_partitions: job.inputs.iter().map(|s| s.stats().partitions).sum(),
            completed_partitions: Cell::new(0),
            stopped: Cell::new(false),
        }
    }

    /// Input partitions read so far (at most `total_partitions`).
    pub fn completed_partitions(&self) -> u64 {
        self.completed_partitions.get()
    }

    /// Asks the job to stop before its next partition.
    pub fn stop(&self) {
        self.stopped.set(true);
    }

    /// Whether the job was asked to stop.
    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped.get()
    }

    /// One more input partition read.
    pub(crate) fn count_partition(&self) {
        self.completed_partitions.set(self.completed_partitions.get() + 1);
    }
}
