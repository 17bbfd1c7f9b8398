//! SSTables written in format version 1 (index pages without their
//! entries' offsets, before version 2 stored them) still read: the fixture
//! in `tests/fixtures/sstable-v1/` was written by the version-1 writer
//! (main at 61b04ca, `Writer` with the options of [`SSTABLES`], 4 KiB
//! chunks) from the partitions [`partitions`] builds, and every partition, slice
//! and scan of it must read back as written, with the index cache off and
//! on.

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use bytes::Bytes;
use shoal_storage::sstable::compression::Compression;
use shoal_storage::sstable::format::{Component, Descriptor};
use shoal_storage::sstable::{index_cache, SSTable, Scanner};
use shoal_storage::{Cell, ClusteredRow, ClusteringRange, ColumnData, Partition, PartitionPosition, Row};

/// Partitions per SSTable: three index pages, the last one partial.
const SMALL: u32 = 300;
/// The fixture's SSTables: generation and codec. The LZ4 one also holds a
/// partition large enough for clustering samples, its values compressible
/// so the file stays small.
const SSTABLES: [(u64, Compression); 2] = [(1, Compression::None), (2, Compression::Lz4)];

fn key(i: u32) -> Bytes {
    Bytes::from(i.to_be_bytes().to_vec())
}

fn row(value: Bytes) -> Row {
    let mut row = Row::default();
    row.columns.insert(0, ColumnData::Atomic(Cell::live(1, value, None)));
    row
}

/// What generation `generation` of the fixture holds, in ring order.
fn partitions(generation: u64) -> Vec<(PartitionPosition, Partition)> {
    let mut out: Vec<_> = (0..SMALL)
        .map(|i| {
            let mut p = Partition::default();
            for r in 0..i % 3 {
                p.rows.insert(
                    key(r),
                    ClusteredRow { clustering: vec![key(r)], row: row(Bytes::from(format!("v{i}.{r}"))) },
                );
            }
            (PartitionPosition { token: i64::from(i) * 10, key: key(i) }, p)
        })
        .collect();
    if generation == 2 {
        let mut big = Partition::default();
        for r in 0..200 {
            big.rows
                .insert(key(r), ClusteredRow { clustering: vec![key(r)], row: row(Bytes::from(vec![r as u8; 1000])) });
        }
        out.push((PartitionPosition { token: i64::from(SMALL) * 10, key: Bytes::from_static(b"big") }, big));
    }
    out
}

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sstable-v1")
}

/// The fixture copied to a fresh directory (reads are direct, and a
/// test must not depend on where the source tree lies).
fn copy_fixture() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("shoal-sstable-v1-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create dir");
    for file in std::fs::read_dir(fixture_dir()).expect("the fixture is in the tree") {
        let file = file.expect("list fixture");
        std::fs::copy(file.path(), dir.join(file.file_name())).expect("copy fixture");
    }
    dir
}

async fn read_back(sstable: Rc<SSTable>, partitions: &[(PartitionPosition, Partition)]) {
    let all = [ClusteringRange::all()];
    for (position, expected) in partitions {
        assert_eq!(sstable.read(position, &all).await.expect("read").as_ref(), Some(expected), "{position:?}");
        let slice = [ClusteringRange { start: Bound::Included(key(1)), end: Bound::Excluded(key(150)) }];
        assert_eq!(sstable.read(position, &slice).await.expect("sliced read"), Some(expected.slice(&slice)));
        let absent = PartitionPosition { token: position.token + 1, key: key(7) };
        assert_eq!(sstable.read(&absent, &all).await.expect("read"), None);
    }
    let mut scanner = Scanner::new(Rc::clone(&sstable), Bound::Unbounded, Bound::Unbounded, shoal_io::IoClass::Query)
        .await
        .expect("scan");
    let mut scanned = Vec::new();
    while let Some(next) = scanner.next(&all).await.expect("next") {
        scanned.push(next);
    }
    assert_eq!(scanned, partitions);
}

#[test]
fn sstables_of_format_version_1_read_back() {
    let dir = copy_fixture();
    for (generation, compression) in SSTABLES {
        let index = std::fs::read(Descriptor { dir: dir.clone(), shard: 0, generation }.path(Component::Index))
            .expect("read the index");
        assert_eq!(index[8..10], 1u16.to_le_bytes(), "the fixture is of version 1");
        shoal_io::block_on(async {
            let descriptor = Descriptor { dir: dir.clone(), shard: 0, generation };
            let sstable = Rc::new(SSTable::open(descriptor, shoal_io::IoClass::Query).await.expect("open"));
            let partitions = partitions(generation);
            assert_eq!(sstable.stats().partitions, partitions.len() as u64, "{compression:?}");
            // Index pages read from disk each time, then from the cache.
            read_back(Rc::clone(&sstable), &partitions).await;
            index_cache::set_capacity_bytes(1 << 20);
            read_back(Rc::clone(&sstable), &partitions).await;
            read_back(sstable, &partitions).await;
            assert!(index_cache::stats().hits > 0);
            index_cache::set_capacity_bytes(0);
        });
    }
    let _ = std::fs::remove_dir_all(&dir);
}
