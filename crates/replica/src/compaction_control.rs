//! What an operator sees and steers of this shard's compactions: those
//! under way with their progress and the tables with work pending
//! (nodetool compactionstats), stopping them (nodetool stop), and turning
//! a table's automatic compaction off and on (nodetool
//! disableautocompaction / enableautocompaction). Nothing here is kept
//! across a restart: automatic compaction is on again at the next start,
//! as in ScyllaDB.

use shoal_storage::compaction::{self, CompactionKind};
use uuid::Uuid;

use crate::database::Database;

/// A compaction under way, named for an operator.
#[derive(Debug, Clone)]
pub struct CompactionStatus {
    pub id: Uuid,
    pub keyspace: String,
    pub table: String,
    pub kind: CompactionKind,
    pub completed_partitions: u64,
    pub total_partitions: u64,
}

/// This shard's compactions: those under way, and the tables
/// (`keyspace`, `table`) whose strategy has a job waiting.
#[derive(Debug, Clone, Default)]
pub struct CompactionsReport {
    pub running: Vec<CompactionStatus>,
    pub pending: Vec<(String, String)>,
}

impl Database {
    /// The compactions under way and pending on this shard.
    pub fn compactions(&self) -> CompactionsReport {
        let schema = self.schema();
        let mut report = CompactionsReport::default();
        for (id, table) in self.tables().iter() {
            let Some(meta) = schema.table_by_id(*id) else { continue };
            for task in table.compactions() {
                report.running.push(CompactionStatus {
                    id: task.id,
                    keyspace: meta.keyspace.clone(),
                    table: meta.name.clone(),
                    kind: task.kind,
                    completed_partitions: task.completed_partitions(),
                    total_partitions: task.total_partitions,
                });
            }
            // Waiting work shows with automatic compaction off too: that
            // is how the backlog it leaves is seen.
            if compaction::has_pending(table) {
                report.pending.push((meta.keyspace.clone(), meta.name.clone()));
            }
        }
        report
    }

    /// Stops, at their next partition, the compactions of the selected
    /// tables (all of a keyspace, or all when `None`) whose operation type
    /// is `operation_type` (`COMPACTION`, `CLEANUP`); returns how many.
    pub fn stop_compactions(&self, operation_type: &str, keyspace: Option<&str>, tables: &[String]) -> usize {
        let mut stopped = 0;
        for id in self.select_tables(keyspace, tables) {
            let Ok(table) = self.table(id) else { continue };
            for task in table.compactions().iter().filter(|t| t.kind.operation_type() == operation_type) {
                task.stop();
                stopped += 1;
            }
        }
        stopped
    }

    /// Turns the strategy's compactions of the selected tables (those
    /// named of a keyspace, all of it, or all when `None`) on or off;
    /// turning them off stops those under way (not a major compaction or
    /// a cleanup). Returns the tables changed.
    pub fn set_auto_compaction(&self, keyspace: Option<&str>, tables: &[String], enabled: bool) -> usize {
        let ids = self.select_tables(keyspace, tables);
        for id in &ids {
            if enabled {
                self.auto_compaction_off.borrow_mut().remove(id);
                continue;
            }
            self.auto_compaction_off.borrow_mut().insert(*id);
            let Ok(table) = self.table(*id) else { continue };
            table.compactions().iter().filter(|t| t.kind == CompactionKind::Regular).for_each(|t| t.stop());
        }
        if enabled {
            self.wake_compaction();
        }
        ids.len()
    }

    /// Whether the strategy's compactions run for `table_id`.
    pub fn auto_compaction_enabled(&self, table_id: Uuid) -> bool {
        !self.auto_compaction_off.borrow().contains(&table_id)
    }
}
