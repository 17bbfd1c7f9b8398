//! Reading segments back at start.
//!
//! Entries are yielded in log order. Reading a segment stops at the first
//! entry that does not check out: zeros or a short entry at the end are a
//! torn tail (a write the crash cut short) and are dropped quietly; a
//! checksum failure is logged with file and offset, and replay goes on with
//! the next segment, as Cassandra and ScyllaDB do.

use std::path::Path;

use shoal_io::IoClass;

use super::{
    segment_header, segment_path, Position, ENTRY_HEADER_BYTES, SEGMENT_HEADER_BYTES, SEGMENT_MAGIC, SEGMENT_VERSION,
};
use crate::error::StorageResult;

/// One entry read back: where it was and its payload.
pub struct ReplayEntry<'a> {
    pub position: Position,
    pub payload: &'a [u8],
}

/// The ids of `shard`'s segments in `dir`, oldest first.
pub async fn segment_ids(dir: &Path, shard: usize) -> StorageResult<Vec<u64>> {
    let prefix = format!("CommitLog-{shard}-");
    let mut ids: Vec<u64> = shoal_io::list_dir(dir, IoClass::Commitlog)
        .await?
        .iter()
        .filter_map(|name| name.strip_prefix(&prefix)?.strip_suffix(".log")?.parse().ok())
        .collect();
    ids.sort_unstable();
    Ok(ids)
}

/// What reading one segment found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SegmentReport {
    pub entries: u64,
    pub bytes: u64,
    /// Where and why reading stopped early, if it did for corruption.
    pub corruption: Option<String>,
}

/// Walks the entries of one segment's bytes, calling `apply` for each.
pub fn read_segment(
    path: &Path,
    shard: usize,
    segment: u64,
    data: &[u8],
    apply: &mut dyn FnMut(ReplayEntry<'_>),
) -> SegmentReport {
    let mut report = SegmentReport::default();
    let header = SEGMENT_HEADER_BYTES as usize;
    if data.len() < header {
        return report; // Created, never written: a torn tail.
    }
    if &data[..8] != SEGMENT_MAGIC || data[..header] != segment_header(shard, segment)[..] {
        let version = u16::from_le_bytes([data[8], data[9]]);
        report.corruption = Some(if &data[..8] == SEGMENT_MAGIC && version != SEGMENT_VERSION {
            format!("{}: commitlog format version {version}; this build reads {SEGMENT_VERSION}", path.display())
        } else {
            format!("{}: bad segment header", path.display())
        });
        return report;
    }
    let mut offset = header;
    while data.len() - offset >= ENTRY_HEADER_BYTES as usize {
        let len = u32::from_le_bytes([data[offset], data[offset + 1], data[offset + 2], data[offset + 3]]) as usize;
        let crc = u32::from_le_bytes([data[offset + 4], data[offset + 5], data[offset + 6], data[offset + 7]]);
        let start = offset + ENTRY_HEADER_BYTES as usize;
        if len == 0 && crc == 0 {
            break; // Never written: the end of the log.
        }
        let Some(payload) = data.get(start..start + len) else {
            // Longer than what is there: either the write was torn (all
            // that follows is the tail) or the length is damaged.
            break;
        };
        if crc32c::crc32c(payload) != crc {
            if data[start..].iter().all(|b| *b == 0) || start + len >= data.len() {
                break; // The last entry, cut short by the crash.
            }
            report.corruption = Some(format!("{}: checksum mismatch at offset {offset}", path.display()));
            return report;
        }
        apply(ReplayEntry { position: Position { segment, offset: offset as u32 }, payload });
        report.entries += 1;
        report.bytes += (ENTRY_HEADER_BYTES as usize + len) as u64;
        offset = start + len;
    }
    report
}

/// Reads one segment file back, calling `apply` for each entry; logs (and
/// reports) a corruption that stopped the read early.
pub async fn replay_segment(
    dir: &Path,
    shard: usize,
    segment: u64,
    apply: &mut dyn FnMut(ReplayEntry<'_>),
) -> StorageResult<SegmentReport> {
    let path = segment_path(dir, shard, segment);
    let class = shoal_io::IoClass::Maintenance;
    let data = shoal_io::File::open(&path, class).await?.read_all(class).await?;
    let report = read_segment(&path, shard, segment, &data, apply);
    if let Some(corruption) = &report.corruption {
        tracing::error!("commitlog replay: {corruption}; going on with the next segment");
    }
    Ok(report)
}
