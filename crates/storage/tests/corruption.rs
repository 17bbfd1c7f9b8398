//! Damaged files: a flipped byte in an SSTable chunk fails only the reads
//! that touch it, naming file and chunk; an unreadable component moves the
//! SSTable to quarantine at open; a half-written SSTable is removed; a
//! commitlog checksum failure stops that segment only, and a torn tail is
//! dropped quietly.

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use bytes::Bytes;
use shoal_storage::commitlog::{encode_mutation, read_segment, segment_header, Position};
use shoal_storage::sstable::format::{Component, Descriptor};
use shoal_storage::sstable::writer::{Lineage, Writer, WriterOptions};
use shoal_storage::sstable::{compression::Compression, SSTable, Scanner};
use shoal_storage::{Cell, ClusteredRow, ClusteringRange, ColumnData, Partition, PartitionPosition, Row, Table};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("shoal-corruption-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn position(i: u32) -> PartitionPosition {
    PartitionPosition { token: i64::from(i) * 1_000, key: Bytes::from(i.to_be_bytes().to_vec()) }
}

fn partition(i: u32) -> Partition {
    let mut row = Row::default();
    let value = Bytes::from(format!("value {i} {}", "x".repeat(300)));
    row.columns.insert(0, ColumnData::Atomic(Cell::live(1, value, None)));
    let mut p = Partition::default();
    p.rows.insert(Bytes::from_static(b"c"), ClusteredRow { clustering: vec![Bytes::from_static(b"c")], row });
    p
}

const PARTITIONS: u32 = 200;

async fn write_sstable(dir: &Path, generation: u64) -> Descriptor {
    let descriptor = Descriptor { dir: dir.to_path_buf(), shard: 0, generation };
    let options = WriterOptions { compression: Compression::Lz4, chunk_bytes: 4096, bloom_fp_chance: 0.01 };
    let mut writer =
        Writer::create(descriptor, options, PARTITIONS as usize, shoal_io::IoClass::Flush).await.expect("create");
    for i in 0..PARTITIONS {
        writer.add(&position(i), &partition(i)).await.expect("add");
    }
    writer.finish(Position::ZERO, 0, Lineage::flushed()).await.expect("finish")
}

fn flip_byte(path: &Path, offset: usize) {
    let mut bytes = std::fs::read(path).expect("read");
    bytes[offset] ^= 0x5a;
    std::fs::write(path, bytes).expect("write");
}

#[test]
fn a_flipped_byte_fails_only_the_reads_of_its_chunk() {
    let dir = temp_dir("chunk");
    shoal_io::block_on(async {
        let descriptor = write_sstable(&dir, 1).await;
        let data = descriptor.path(Component::Data);
        let len = std::fs::metadata(&data).expect("stat").len() as usize;
        flip_byte(&data, len / 2);
        let sstable = SSTable::open(descriptor, shoal_io::IoClass::Query)
            .await
            .expect("data chunks are checked when read, not at open");
        let (mut ok, mut failed) = (0, 0);
        for i in 0..PARTITIONS {
            match sstable.read(&position(i), &[ClusteringRange::all()]).await {
                Ok(Some(p)) => {
                    assert_eq!(p, partition(i));
                    ok += 1;
                }
                Ok(None) => panic!("partition {i} lost"),
                Err(e) => {
                    let message = e.to_string();
                    assert!(message.contains("Data.db") && message.contains("chunk"), "{message}");
                    failed += 1;
                }
            }
        }
        assert!(failed > 0 && failed < 20, "{failed} reads failed, {ok} succeeded");
        // A scan stops with the same error when it reaches the chunk.
        let mut scanner = Scanner::new(Rc::new(sstable), Bound::Unbounded, Bound::Unbounded, shoal_io::IoClass::Query)
            .await
            .expect("scanner");
        let mut scanned = 0;
        let error = loop {
            match scanner.next(&[ClusteringRange::all()]).await {
                Ok(Some(_)) => scanned += 1,
                Ok(None) => panic!("scan read past the damaged chunk"),
                Err(e) => break e,
            }
        };
        assert!(scanned > 0 && error.to_string().contains("checksum"), "{error}");
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unreadable_sstables_are_quarantined_and_half_written_ones_removed() {
    let dir = temp_dir("open");
    shoal_io::block_on(async {
        let good = write_sstable(&dir, 1).await;
        let bad = write_sstable(&dir, 2).await;
        let half = write_sstable(&dir, 3).await;
        flip_byte(&bad.path(Component::Statistics), 14);
        std::fs::remove_file(half.path(Component::Toc)).expect("remove TOC");

        let (table, report) = Table::open(dir.clone(), 0, Default::default()).await.expect("open");
        assert_eq!(report.sstables, 1);
        assert_eq!(report.removed_partial, 1);
        assert_eq!(report.quarantined, vec![bad.name()]);
        assert!(dir.join("quarantine").join("shard0-2-Statistics.db").exists());
        assert!(!half.path(Component::Data).exists());
        assert!(good.path(Component::Data).exists());
        let p = table.read(&position(7), &[ClusteringRange::all()]).await.expect("read");
        assert_eq!(p, Some(partition(7)));
    });
    let _ = std::fs::remove_dir_all(&dir);
}

fn segment_with_entries(segment: u64, count: u32) -> (Vec<u8>, Vec<usize>) {
    let mut data = segment_header(0, segment);
    let mut offsets = Vec::new();
    for i in 0..count {
        let mut payload = Vec::new();
        encode_mutation(&mut payload, uuid::Uuid::nil(), &position(i), &partition(i));
        offsets.push(data.len());
        data.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        data.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
        data.extend_from_slice(&payload);
    }
    (data, offsets)
}

#[test]
fn commitlog_corruption_stops_the_segment_and_a_torn_tail_is_dropped() {
    let path = Path::new("CommitLog-0-1.log");
    let (mut data, offsets) = segment_with_entries(1, 5);
    data[offsets[2] + 20] ^= 0xff;
    let mut seen = Vec::new();
    let report = read_segment(path, 0, 1, &data, &mut |e| seen.push(e.position.offset as usize));
    assert_eq!(seen, offsets[..2]);
    let corruption = report.corruption.expect("reported");
    assert!(corruption.contains("CommitLog-0-1.log") && corruption.contains(&format!("offset {}", offsets[2])));

    // The last entry cut short, then zeros (preallocated or never written).
    let (mut data, offsets) = segment_with_entries(1, 5);
    data.truncate(offsets[4] + 30);
    data.extend_from_slice(&[0; 64]);
    let mut seen = 0;
    let report = read_segment(path, 0, 1, &data, &mut |_| seen += 1);
    assert_eq!((seen, report.corruption), (4, None));

    // A segment named for another id is refused as a whole.
    let (data, _) = segment_with_entries(2, 1);
    let report = read_segment(path, 0, 1, &data, &mut |_| panic!("no entry may be read"));
    assert!(report.corruption.is_some());
}
