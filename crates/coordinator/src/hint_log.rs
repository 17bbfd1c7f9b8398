//! Hints on disk: every hint a shard keeps is also appended to the shard's
//! hint log, so a coordinator that restarts still delivers the writes its
//! down replicas missed (Cassandra's and ScyllaDB's hints directory).
//!
//! The log is the storage engine's commitlog machinery in its own
//! directory (`<workdir>/hints`, segments `CommitLog-<shard>-<id>.log`),
//! synced every [`SYNC_PERIOD_MS`]: a hint is a best effort on top of the
//! consistency level, so it is not worth an fdatasync per write. An entry
//! is `[16 target host id][i64 token][i64 written, ms since the epoch]
//! [the mutation, as sent]` (fuzzed: `fuzz/fuzz_targets/data_messages.rs`).
//!
//! Segments are deleted once every hint in them was delivered or dropped
//! ([`HintLog::discard_before`]). At start a fresh log begins after the
//! old segments ([`open`]), which are read back, their hints appended
//! again to the fresh log, and deleted ([`take_back`]): a crash in between only repeats hints, and a repeated write
//! changes nothing (hints are never kept for counters).

use std::path::Path;
use std::rc::Rc;

use shoal_io::IoClass;
use shoal_storage::codec::{DecodeError, Decoder};
use shoal_storage::commitlog::{self, CommitLog, CommitLogConfig, Position, SyncMode};
use shoal_storage::StorageError;
use uuid::Uuid;

/// How often the hint log reaches the disk.
const SYNC_PERIOD_MS: u64 = 10_000;
/// Segment size: the shard's hint memory bound is a few of them.
const SEGMENT_BYTES: u32 = 16 << 20;

/// A hint as the log keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HintEntry {
    pub target: Uuid,
    pub token: i64,
    pub written_ms: i64,
    pub payload: Vec<u8>,
}

pub fn encode_hint_entry(out: &mut Vec<u8>, target: Uuid, token: i64, written_ms: i64, payload: &[u8]) {
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(&token.to_be_bytes());
    out.extend_from_slice(&written_ms.to_be_bytes());
    out.extend_from_slice(payload);
}

pub fn decode_hint_entry(bytes: &[u8]) -> Result<HintEntry, DecodeError> {
    let mut d = Decoder::new(bytes);
    let target = Uuid::from_slice(d.slice(16)?).map_err(|_| d.error("bad target host id"))?;
    let token = d.fixed_i64()?;
    let written_ms = d.fixed_i64()?;
    let payload = d.slice(d.remaining())?.to_vec();
    Ok(HintEntry { target, token, written_ms, payload })
}

/// A shard's hint log.
pub(crate) struct HintLog {
    log: Rc<CommitLog>,
}

impl HintLog {
    /// Appends a hint; where its entry is.
    pub(crate) fn append(
        &self,
        target: Uuid,
        token: i64,
        written_ms: i64,
        payload: &[u8],
    ) -> Result<Position, StorageError> {
        let (at, _) = self.log.append(|out| encode_hint_entry(out, target, token, written_ms, payload))?;
        Ok(at)
    }

    /// Where the next hint will go.
    pub(crate) fn end(&self) -> Position {
        self.log.current_position()
    }

    /// Deletes the segments whose hints are all gone (before `position`).
    pub(crate) async fn discard_before(&self, position: Position) {
        self.log.discard_before(position).await;
    }
}

/// Starts this shard's hint log in `dir` after its old segments, and
/// names those (oldest first) for [`take_back`].
pub(crate) async fn open(dir: &Path) -> Result<(Rc<HintLog>, Vec<u64>), StorageError> {
    let shard = shoal_runtime::this_shard();
    shoal_io::create_dir_all(dir, IoClass::Commitlog).await?;
    let old = commitlog::segment_ids(dir, shard).await?;
    let config = CommitLogConfig {
        dir: dir.to_path_buf(),
        shard,
        segment_size_bytes: SEGMENT_BYTES,
        sync: SyncMode::Periodic { period_ms: SYNC_PERIOD_MS },
    };
    let log = Rc::new(HintLog { log: CommitLog::start(config, old.last().map_or(0, |last| last + 1)) });
    Ok((log, old))
}

/// Reads the hints of the `old` segments in order, handing each to
/// `keep` (which appends what it keeps to the fresh log), then deletes them.
pub(crate) async fn take_back(dir: &Path, old: Vec<u64>, mut keep: impl FnMut(HintEntry)) -> Result<(), StorageError> {
    let shard = shoal_runtime::this_shard();
    let mut undecodable = 0u64;
    for segment in &old {
        let mut apply = |entry: commitlog::ReplayEntry<'_>| match decode_hint_entry(entry.payload) {
            Ok(hint) => keep(hint),
            Err(_) => undecodable += 1,
        };
        let report = commitlog::replay_segment(dir, shard, *segment, &mut apply).await?;
        if let Some(corruption) = report.corruption {
            tracing::error!("hint segment {segment}: {corruption}; its later hints are lost");
        }
    }
    if undecodable > 0 {
        tracing::error!("{undecodable} hint(s) with a valid checksum did not decode");
    }
    for segment in old {
        shoal_io::remove_file_if_exists(&commitlog::segment_path(dir, shard, segment), IoClass::Commitlog).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_short_ones_are_errors() {
        let mut bytes = Vec::new();
        encode_hint_entry(&mut bytes, Uuid::from_u128(7), -42, 1_700_000_000_000, b"mutation");
        let entry = decode_hint_entry(&bytes).expect("decodes");
        let expected = HintEntry {
            target: Uuid::from_u128(7),
            token: -42,
            written_ms: 1_700_000_000_000,
            payload: b"mutation".to_vec(),
        };
        assert_eq!(entry, expected);
        for cut in 0..32 {
            assert!(decode_hint_entry(&bytes[..cut]).is_err(), "{cut} bytes");
        }
    }
}
