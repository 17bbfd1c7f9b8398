//! A shard's log of records kept beside the data — hints for down
//! replicas, batches held for other coordinators — so a restart does not
//! lose them (Cassandra keeps these in its hints directory and
//! `system.batches`).
//!
//! The log is the storage engine's commitlog machinery in its own
//! directory (segments `CommitLog-<shard>-<id>.log`), synced every
//! [`SYNC_PERIOD_MS`]: both are best efforts on top of a write's
//! consistency level, not worth an fdatasync each. The owner appends a
//! record when it starts keeping something and notes the position; once
//! nothing it keeps is before a position, the segments before it go
//! ([`SideLog::discard_before`]). At start ([`open`]) a fresh log begins
//! after the old segments, which are read back, their records handed to
//! the owner (which appends again what it keeps) and deleted:
//! a crash in between only repeats records, and every record here is an
//! idempotent write (a counter write's hint carries its leader's counter
//! shards, which merge by clock).

use std::path::Path;
use std::rc::Rc;

use shoal_io::IoClass;
use shoal_storage::commitlog::{self, CommitLog, CommitLogConfig, Position, SyncMode};
use shoal_storage::StorageError;

/// How often the log reaches the disk.
const SYNC_PERIOD_MS: u64 = 10_000;
/// Segment size: an owner's memory bound (64 MiB) is a few of them.
const SEGMENT_BYTES: u32 = 16 << 20;

/// A shard's side log.
pub(crate) struct SideLog {
    log: Rc<CommitLog>,
}

impl SideLog {
    /// Appends the record `encode` writes; where it is.
    pub(crate) fn append(&self, encode: impl FnOnce(&mut Vec<u8>)) -> Result<Position, StorageError> {
        let (at, _) = self.log.append(encode)?;
        Ok(at)
    }

    /// Deletes the segments wholly before `oldest_kept`, the oldest
    /// record the owner still keeps (`None`: it keeps none, so every
    /// segment but the current one goes).
    pub(crate) async fn discard_before(&self, oldest_kept: Option<Position>) {
        self.log.discard_before(oldest_kept.unwrap_or_else(|| self.log.current_position())).await;
    }
}

/// Starts this shard's log in `dir` after its old segments and hands it
/// to `install`; then reads the old segments' records in order, handing
/// each to `keep` (which appends again what it keeps), and deletes them.
pub(crate) async fn open(
    dir: &Path,
    install: impl FnOnce(Rc<SideLog>),
    mut keep: impl FnMut(&[u8]),
) -> Result<(), StorageError> {
    let shard = shoal_runtime::this_shard();
    shoal_io::create_dir_all(dir, IoClass::Commitlog).await?;
    let old = commitlog::segment_ids(dir, shard).await?;
    let config = CommitLogConfig {
        dir: dir.to_path_buf(),
        shard,
        segment_size_bytes: SEGMENT_BYTES,
        sync: SyncMode::Periodic { period_ms: SYNC_PERIOD_MS },
    };
    install(Rc::new(SideLog { log: CommitLog::start(config, old.last().map_or(0, |last| last + 1)) }));
    for segment in &old {
        let mut apply = |entry: commitlog::ReplayEntry<'_>| keep(entry.payload);
        let report = commitlog::replay_segment(dir, shard, *segment, &mut apply).await?;
        if let Some(corruption) = report.corruption {
            tracing::error!("{}: segment {segment}: {corruption}; its later records are lost", dir.display());
        }
    }
    for segment in old {
        shoal_io::remove_file_if_exists(&commitlog::segment_path(dir, shard, segment), IoClass::Commitlog).await?;
    }
    Ok(())
}
