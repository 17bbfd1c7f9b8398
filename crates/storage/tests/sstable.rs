//! SSTable round trips: every partition reads back as written, and slices
//! of a large partition (one with clustering samples, read run by run)
//! equal the same slices of the partition in memory — for each codec.

use std::ops::Bound;
use std::rc::Rc;

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shoal_storage::commitlog::Position;
use shoal_storage::sstable::compression::Compression;
use shoal_storage::sstable::format::Descriptor;
use shoal_storage::sstable::writer::{Lineage, Writer, WriterOptions};
use shoal_storage::sstable::{SSTable, Scanner};
use shoal_storage::{
    Cell, ClusteredRow, ClusteringRange, ColumnData, Partition, PartitionPosition, RangeTombstone, Row, Tombstone,
};

fn big_partition(rows: u32) -> Partition {
    let mut p = Partition { tombstone: Some(Tombstone { timestamp: 1, deletion_time_s: 5 }), ..Partition::default() };
    p.static_row.columns.insert(7, ColumnData::Atomic(Cell::live(9, Bytes::from_static(b"static"), None)));
    for i in 0..rows {
        let key = Bytes::from(i.to_be_bytes().to_vec());
        let mut row = Row::default();
        row.columns.insert(1, ColumnData::Atomic(Cell::live(10, Bytes::from(vec![(i % 251) as u8; 700]), None)));
        p.rows.insert(key.clone(), ClusteredRow { clustering: vec![key], row });
    }
    p.range_tombstones.push(RangeTombstone {
        range: ClusteringRange {
            start: Bound::Included(Bytes::from(10u32.to_be_bytes().to_vec())),
            end: Bound::Excluded(Bytes::from(20u32.to_be_bytes().to_vec())),
        },
        tombstone: Tombstone { timestamp: 11, deletion_time_s: 5 },
    });
    p
}

fn key(i: u32) -> Bytes {
    Bytes::from(i.to_be_bytes().to_vec())
}

#[test]
fn slices_of_a_large_partition_equal_slices_in_memory() {
    let dir = std::env::temp_dir().join(format!("shoal-sstable-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut rng = StdRng::seed_from_u64(7);
    for (generation, compression) in [(1, Compression::Lz4), (2, Compression::Zstd), (3, Compression::None)] {
        shoal_io::block_on(async {
            let small = |i: u32| PartitionPosition { token: i64::from(i), key: key(i) };
            let big_position = PartitionPosition { token: 50, key: Bytes::from_static(b"big") };
            let big = big_partition(2_000);
            let descriptor = Descriptor { dir: dir.clone(), shard: 0, generation };
            let options = WriterOptions { compression, chunk_bytes: 16 * 1024, bloom_fp_chance: 0.01 };
            let mut writer = Writer::create(descriptor, options, 101, shoal_io::IoClass::Flush).await.expect("create");
            for i in 0..100 {
                writer.add(&small(i), &big_partition(i % 3)).await.expect("add small");
                if i == 50 {
                    writer.add(&big_position, &big).await.expect("add big");
                }
            }
            let descriptor = writer.finish(Position::ZERO, 0, Lineage::flushed()).await.expect("finish");
            let sstable = SSTable::open(descriptor, shoal_io::IoClass::Query).await.expect("open");

            let all = [ClusteringRange::all()];
            assert_eq!(sstable.read(&big_position, &all).await.expect("read"), Some(big.clone()));
            for _ in 0..200 {
                let (a, b) = (rng.gen_range(0..2_100), rng.gen_range(0..2_100));
                let bound =
                    |k: u32, included: bool| if included { Bound::Included(key(k)) } else { Bound::Excluded(key(k)) };
                let mut ranges =
                    vec![ClusteringRange { start: bound(a.min(b), rng.gen()), end: bound(a.max(b), rng.gen()) }];
                if rng.gen() {
                    ranges.push(ClusteringRange { start: Bound::Unbounded, end: bound(rng.gen_range(0..100), true) });
                }
                if rng.gen() {
                    ranges.push(ClusteringRange {
                        start: bound(rng.gen_range(1_900..2_100), false),
                        end: Bound::Unbounded,
                    });
                }
                ranges.retain(|r| !r.is_empty());
                if ranges.is_empty() {
                    continue;
                }
                let got = sstable.read(&big_position, &ranges).await.expect("slice").expect("present");
                assert_eq!(got, big.slice(&ranges), "{compression:?} {ranges:?}");
            }
            for i in 0..100 {
                assert_eq!(sstable.read(&small(i), &all).await.expect("read"), Some(big_partition(i % 3)));
            }
            assert_eq!(sstable.read(&small(100), &all).await.expect("read"), None);

            let sstable = Rc::new(sstable);
            let mut scanner = Scanner::new(
                sstable,
                Bound::Excluded(&small(10)),
                Bound::Included(small(60)),
                shoal_io::IoClass::Query,
            )
            .await
            .expect("scan");
            let mut seen = Vec::new();
            while let Some((position, _)) = scanner.next(&all).await.expect("next") {
                seen.push(position);
            }
            let mut want: Vec<PartitionPosition> = (11..=60).map(small).collect();
            want.push(big_position.clone());
            want.sort();
            assert_eq!(seen, want);
        });
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Point reads of an uncompressed SSTable read only the blocks a partition
/// lies in: partitions within one chunk, across two and across more (read
/// chunk by chunk) all read back as written.
#[test]
fn uncompressed_point_reads_of_partitions_across_chunks_read_back() {
    let dir = std::env::temp_dir().join(format!("shoal-sstable-uncompressed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    shoal_io::block_on(async {
        let position = |i: u32| PartitionPosition { token: i64::from(i), key: key(i) };
        // 1 to 12 rows of 700 bytes: up to twice the 4 KiB chunk.
        let partition = |i: u32| big_partition(1 + i % 12);
        let descriptor = Descriptor { dir: dir.clone(), shard: 0, generation: 1 };
        let options = WriterOptions { compression: Compression::None, chunk_bytes: 4096, bloom_fp_chance: 0.01 };
        let mut writer = Writer::create(descriptor, options, 300, shoal_io::IoClass::Flush).await.expect("create");
        for i in 0..300 {
            writer.add(&position(i), &partition(i)).await.expect("add");
        }
        let descriptor = writer.finish(Position::ZERO, 0, Lineage::flushed()).await.expect("finish");
        let sstable = SSTable::open(descriptor, shoal_io::IoClass::Query).await.expect("open");
        for i in 0..300 {
            let got = sstable.read(&position(i), &[ClusteringRange::all()]).await.expect("read");
            assert_eq!(got, Some(partition(i)), "partition {i}");
        }
    });
    let _ = std::fs::remove_dir_all(&dir);
}
