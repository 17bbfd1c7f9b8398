//! Helpers shared by the fuzz targets: realistic partitions to build valid
//! inputs from (seed commitlog segments, the SSTables the `sstable` target
//! damages), and the checksum repair that lets mutations get past the
//! crc32c every on-disk frame carries.

use std::collections::BTreeMap;
use std::ops::Bound;

use bytes::Bytes;
use shoal_storage::commitlog::{encode_mutation, segment_header, SEGMENT_HEADER_BYTES};
use shoal_storage::{
    Cell, ClusteredRow, ClusteringRange, Collection, CollectionCell, ColumnData, CounterShard, Expiry, Partition,
    PartitionPosition, RangeTombstone, Row, RowMarker, Tombstone,
};
use uuid::Uuid;

/// The table id the seed mutations carry.
pub const TABLE: Uuid = Uuid::from_u128(0x5ea1_0000_0000_4000_8000_0000_0000_0001);

pub fn position(i: u32) -> PartitionPosition {
    PartitionPosition { token: (i64::from(i) - 2) * 1_000_003, key: Bytes::from(format!("key-{i}")) }
}

fn clustering_key(i: u32) -> Bytes {
    Bytes::from(i.to_be_bytes().to_vec())
}

fn expiry(ttl_s: i32) -> Expiry {
    Expiry { ttl_s, expires_at_s: 1_700_000_000 + i64::from(ttl_s) }
}

/// Partition `i` of the samples: small ones of every shape (static row,
/// collections, TTLs, tombstones of each kind), and with `rows` rows of
/// `value_bytes` each so that a large one gets clustering samples.
pub fn partition(i: u32, rows: u32, value_bytes: usize) -> Partition {
    let mut p = Partition::default();
    if i.is_multiple_of(3) {
        p.tombstone = Some(Tombstone { timestamp: 100 + i64::from(i), deletion_time_s: 1_700_000_000 });
    }
    if i.is_multiple_of(2) {
        p.static_row.columns.insert(7, ColumnData::Atomic(Cell::live(200, Bytes::from(format!("static {i}")), None)));
    }
    for r in 0..rows {
        let mut row = Row {
            marker: Some(RowMarker { timestamp: 300 + i64::from(r), expiry: (r % 4 == 1).then(|| expiry(3600)) }),
            deletion: (r % 5 == 4).then_some(Tombstone { timestamp: 250, deletion_time_s: 1_700_000_001 }),
            columns: BTreeMap::new(),
        };
        let value: String = format!("{i}:{r}:").chars().cycle().take(value_bytes).collect();
        let cell_expiry = (r % 3 == 2).then(|| expiry(60));
        row.columns.insert(1, ColumnData::Atomic(Cell::live(300, Bytes::from(value), cell_expiry)));
        if r % 2 == 1 {
            row.columns.insert(2, ColumnData::Atomic(Cell::dead(301, 1_700_000_002)));
        }
        if r % 4 == 3 {
            let led = CounterShard { id: u128::from(i) + 1, clock: i64::from(r), value: -i64::from(r) };
            row.columns.insert(4, ColumnData::Atomic(Cell::counter(302, Box::new([CounterShard::delta(1), led]))));
        }
        if r % 3 == 0 {
            let mut coll = Collection {
                tombstone: Some(Tombstone { timestamp: 299, deletion_time_s: 1_700_000_003 }),
                ..Default::default()
            };
            for e in 0..3u8 {
                coll.cells.insert(
                    Bytes::from(vec![e]),
                    CollectionCell { key: Bytes::from(format!("elem{e}")), cell: Cell::live(300, Bytes::new(), None) },
                );
            }
            row.columns.insert(3, ColumnData::Collection(coll));
        }
        let clustering = vec![clustering_key(r), Bytes::from_static(b"c2")];
        p.rows.insert(clustering_key(r), ClusteredRow { clustering, row });
    }
    if i % 4 == 1 {
        p.range_tombstones.push(RangeTombstone {
            range: ClusteringRange {
                start: Bound::Included(clustering_key(1)),
                end: Bound::Excluded(clustering_key(3)),
            },
            tombstone: Tombstone { timestamp: 280, deletion_time_s: 1_700_000_004 },
        });
        p.range_tombstones.push(RangeTombstone {
            range: ClusteringRange { start: Bound::Excluded(clustering_key(10)), end: Bound::Unbounded },
            tombstone: Tombstone { timestamp: 281, deletion_time_s: 1_700_000_005 },
        });
    }
    p
}

/// A few small partitions, one of each shape.
pub fn small_partitions() -> Vec<(PartitionPosition, Partition)> {
    (0..6).map(|i| (position(i), partition(i, i % 4, 12))).collect()
}

/// One commitlog entry: `[u32 length][u32 crc32c][payload]`.
pub fn append_entry(out: &mut Vec<u8>, payload: &[u8]) {
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    out.extend_from_slice(payload);
}

/// A valid commitlog segment 1 of shard 0 holding `partitions`.
pub fn commitlog_segment(partitions: &[(PartitionPosition, Partition)]) -> Vec<u8> {
    let mut out = segment_header(0, 1);
    for (position, partition) in partitions {
        let mut payload = Vec::new();
        encode_mutation(&mut payload, TABLE, position, partition);
        append_entry(&mut out, &payload);
    }
    out
}

/// Rewrites the checksum of every `[u32 length][u32 crc32c][body]` frame
/// laid end to end from `start`, so mutated bodies reach the decoders.
/// Stops at the first frame whose length runs past the end.
pub fn fix_frames(bytes: &mut [u8], start: usize) {
    let mut at = start;
    while let Some(header) = bytes.get(at..at + 8) {
        let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let body = at + 8;
        let Some(end) = body.checked_add(len).filter(|end| *end <= bytes.len()) else { break };
        let crc = crc32c::crc32c(&bytes[body..end]);
        bytes[at + 4..at + 8].copy_from_slice(&crc.to_le_bytes());
        at = end;
    }
}

/// A commitlog segment with a valid header and checksums for `bytes`'
/// entries (the framing bytes are kept as they are).
pub fn repair_segment(bytes: &[u8]) -> Vec<u8> {
    let header = SEGMENT_HEADER_BYTES as usize;
    let mut out = segment_header(0, 1);
    out.extend_from_slice(bytes.get(header..).unwrap_or_default());
    fix_frames(&mut out, header);
    out
}
