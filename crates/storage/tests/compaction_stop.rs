//! A compaction stopped while it runs (nodetool stop): it shows its
//! progress while under way, ends with `CompactionStopped` at its next
//! partition, and leaves the table as it was — its inputs in place, every
//! row readable, none of its outputs on disk.

use bytes::Bytes;
use shoal_storage::commitlog::Position;
use shoal_storage::compaction::{compact_major, CompactionKind};
use shoal_storage::sstable::compression::Compression;
use shoal_storage::sstable::format::Descriptor;
use shoal_storage::sstable::writer::{Lineage, Writer, WriterOptions};
use shoal_storage::{
    Cell, ClusteredRow, ColumnData, Partition, PartitionPosition, Row, StorageError, Table, TableOptions,
};

const KEYS: u32 = 500;

fn position(pk: u32) -> PartitionPosition {
    PartitionPosition { token: i64::from(pk), key: Bytes::copy_from_slice(&pk.to_be_bytes()) }
}

fn row(value: u32) -> Partition {
    let mut row = Row::default();
    row.columns.insert(0, ColumnData::Atomic(Cell::live(1, Bytes::copy_from_slice(&value.to_be_bytes()), None)));
    let mut partition = Partition::default();
    partition.rows.insert(Bytes::from_static(b"c"), ClusteredRow { clustering: vec![Bytes::from_static(b"c")], row });
    partition
}

async fn write(dir: &std::path::Path, generation: u64, keys: impl Iterator<Item = u32>) {
    let descriptor = Descriptor { dir: dir.to_path_buf(), shard: 0, generation };
    let options = WriterOptions { compression: Compression::Lz4, chunk_bytes: 4096, bloom_fp_chance: 0.01 };
    let mut writer =
        Writer::create(descriptor, options, KEYS as usize, shoal_io::IoClass::Flush).await.expect("create");
    for pk in keys {
        writer.add(&position(pk), &row(pk)).await.expect("add");
    }
    writer.finish(Position::ZERO, 0, Lineage::flushed()).await.expect("finish");
}

#[test]
fn a_stopped_compaction_leaves_its_inputs() {
    let dir = std::env::temp_dir().join(format!("shoal-compaction-stop-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    shoal_io::block_on(async {
        write(&dir, 1, (0..KEYS).filter(|k| k % 2 == 0)).await;
        write(&dir, 2, (0..KEYS).filter(|k| k % 2 == 1)).await;
        let (table, _) = Table::open(dir.clone(), 0, TableOptions::default()).await.expect("open");
        let stopper = async {
            loop {
                if let Some(task) = table.compactions().first() {
                    assert_eq!(task.kind, CompactionKind::Major);
                    assert_eq!(task.kind.operation_type(), "COMPACTION");
                    assert_eq!(task.total_partitions, u64::from(KEYS));
                    if task.completed_partitions() >= 10 {
                        task.stop();
                        return task.completed_partitions();
                    }
                }
                shoal_runtime::yield_now().await;
            }
        };
        let (compacted, stopped_at) = futures_util::future::join(compact_major(&table, 0), stopper).await;
        assert!(matches!(compacted, Err(StorageError::CompactionStopped)), "{compacted:?}");
        assert!(stopped_at < u64::from(KEYS), "stopped before the end");
        assert!(table.compactions().is_empty());
        let mut generations: Vec<u64> = table.sstable_set().iter().map(|s| s.generation()).collect();
        generations.sort_unstable();
        assert_eq!(generations, [1, 2]);
        for pk in 0..KEYS {
            let read = table.read(&position(pk), &[shoal_storage::ClusteringRange::all()]).await.expect("read");
            assert_eq!(read, Some(row(pk)), "key {pk}");
        }
    });
    let mut left: Vec<String> = std::fs::read_dir(&dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with("shard0-1-") && !name.starts_with("shard0-2-"))
        .collect();
    left.sort();
    assert!(left.is_empty(), "a stopped compaction's outputs are removed: {left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
