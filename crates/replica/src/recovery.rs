//! Start-up of a shard's storage: open every table's SSTables, replay the
//! commitlog over them, flush what was replayed, and start a fresh log.
//!
//! The internal paxos table is opened beside the schema's tables.
//! Replay skips entries a table already has in SSTables (before its replay
//! floor) and entries of tables no longer in the schema. After each replayed
//! segment, if memtables pass half the budget, they are flushed with a floor
//! just past that segment, so replaying a log larger than memory works and a
//! crash during replay loses nothing. The new log's first segment id is past
//! every old segment and every floor, so positions keep growing.

use std::collections::HashMap;

use shoal_storage::commitlog::{decode_mutation, replay_segment, segment_ids, Position};
use shoal_storage::Table;

use crate::database::{table_options, Database, ReplicaError, StorageConfig};
use crate::paxos::{self, PAXOS_TABLE};

/// What recovery did, for the start-up log.
#[derive(Debug, Default, Clone)]
pub struct RecoveryReport {
    pub tables: usize,
    pub sstables: usize,
    pub removed_partial: usize,
    pub quarantined: Vec<String>,
    pub segments_replayed: usize,
    pub entries_replayed: u64,
    pub bytes_replayed: u64,
    pub corrupt_segments: Vec<String>,
}

impl Database {
    /// Opens this shard's data under `config` (once, at start, after the
    /// schema is installed and before clients are served).
    pub async fn open_storage(&self, config: StorageConfig) -> Result<RecoveryReport, ReplicaError> {
        let shard = shoal_runtime::this_shard();
        *self.storage.borrow_mut() = Some(config.clone());
        shoal_storage::memory::set_budget_bytes(config.memory_budget_bytes, config.index_cache_fraction);
        shoal_io::create_dir_all(&config.commitlog_dir, shoal_io::IoClass::Maintenance)
            .await
            .map_err(shoal_storage::StorageError::from)?;
        let mut report = RecoveryReport::default();
        let schema = self.schema();
        let mut floors: HashMap<uuid::Uuid, Position> = HashMap::new();
        for meta in schema.tables() {
            let (table, opened) = Table::open(self.table_dir(meta), shard, table_options(meta)).await?;
            report.tables += 1;
            report.sstables += opened.sstables;
            report.removed_partial += opened.removed_partial;
            report.quarantined.extend(opened.quarantined);
            floors.insert(meta.id, table.replay_floor());
            self.replace_table(meta.id, table);
        }
        let (paxos, opened) = Table::open(paxos::table_dir(&config.data_dir), shard, paxos::table_options()).await?;
        report.sstables += opened.sstables;
        report.removed_partial += opened.removed_partial;
        report.quarantined.extend(opened.quarantined);
        floors.insert(PAXOS_TABLE, paxos.replay_floor());
        self.replace_table(PAXOS_TABLE, paxos);

        let segments = segment_ids(&config.commitlog_dir, shard).await?;
        let highest_floor = floors.values().map(|p| p.segment).max().unwrap_or(0);
        let first_segment = segments.last().copied().unwrap_or(0).max(highest_floor) + 1;
        for segment in &segments {
            let mut bad_entries = 0u64;
            let mut apply = |entry: shoal_storage::commitlog::ReplayEntry<'_>| match decode_mutation(entry.payload) {
                Ok((table_id, position, update)) => {
                    let wanted = floors.get(&table_id).is_some_and(|floor| entry.position >= *floor);
                    if let (true, Ok(table)) = (wanted, self.table(table_id)) {
                        table.apply(position, update, None);
                    }
                }
                Err(_) => bad_entries += 1,
            };
            let segment_report = replay_segment(&config.commitlog_dir, shard, *segment, &mut apply).await?;
            if bad_entries > 0 {
                tracing::error!(
                    "commitlog segment {segment}: {bad_entries} entries with a valid checksum did not decode"
                );
            }
            report.segments_replayed += 1;
            report.entries_replayed += segment_report.entries;
            report.bytes_replayed += segment_report.bytes;
            report.corrupt_segments.extend(segment_report.corruption);
            if self.memtable_bytes() >= config.memtable_budget_bytes / 2 {
                self.flush_replayed(Position { segment: segment + 1, offset: 0 }).await?;
            }
        }
        self.flush_replayed(Position { segment: first_segment, offset: 0 }).await?;
        for segment in segments {
            let path = shoal_storage::commitlog::segment_path(&config.commitlog_dir, shard, segment);
            shoal_io::remove_file_if_exists(&path, shoal_io::IoClass::Maintenance)
                .await
                .map_err(shoal_storage::StorageError::from)?;
        }
        self.start_commitlog(&config, first_segment);
        Ok(report)
    }

    /// Flushes every memtable as covering the log up to `floor`.
    async fn flush_replayed(&self, floor: Position) -> Result<(), ReplicaError> {
        for id in self.table_ids() {
            self.table(id)?.flush(floor).await?;
        }
        Ok(())
    }
}
