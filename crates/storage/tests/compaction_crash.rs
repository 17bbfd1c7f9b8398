//! What a start makes of compactions a crash interrupted. A compaction
//! that splits its output writes the outputs one at a time; each names the
//! inputs as ancestors and only the last is marked `last_of_run`. Whatever
//! moment the crash hit, the table opens with each row exactly once:
//! the inputs if the run is incomplete, the outputs if it is complete.

use bytes::Bytes;
use shoal_storage::commitlog::Position;
use shoal_storage::sstable::compression::Compression;
use shoal_storage::sstable::format::Descriptor;
use shoal_storage::sstable::writer::{Lineage, Writer, WriterOptions};
use shoal_storage::{Cell, ClusteredRow, ColumnData, Partition, PartitionPosition, Row, Table, TableOptions};

fn position(pk: u32) -> PartitionPosition {
    PartitionPosition { token: i64::from(pk), key: Bytes::copy_from_slice(&pk.to_be_bytes()) }
}

/// One row holding a counter delta of 1: read twice, it would sum to 2.
fn counter_row() -> Partition {
    let mut row = Row::default();
    row.columns.insert(0, ColumnData::Atomic(Cell::counter_delta(1, 1)));
    let mut partition = Partition::default();
    partition.rows.insert(Bytes::from_static(b"c"), ClusteredRow { clustering: vec![Bytes::from_static(b"c")], row });
    partition
}

async fn write(dir: &std::path::Path, generation: u64, keys: std::ops::Range<u32>, lineage: Lineage) {
    let descriptor = Descriptor { dir: dir.to_path_buf(), shard: 0, generation };
    let options = WriterOptions { compression: Compression::Lz4, chunk_bytes: 4096, bloom_fp_chance: 0.01 };
    let mut writer =
        Writer::create(descriptor, options, keys.len(), shoal_io::IoClass::Compaction).await.expect("create");
    for pk in keys {
        writer.add(&position(pk), &counter_row()).await.expect("add");
    }
    writer.finish(Position::ZERO, 0, lineage).await.expect("finish");
}

/// An output of compacting generations 1 and 2.
fn output(last_of_run: bool) -> Lineage {
    Lineage { ancestors: vec![1, 2], last_of_run }
}

static OPENED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Inputs 1 (keys 0..10) and 2 (keys 10..20), then the given outputs, on
/// disk as a crash left them; returns the generations the table opens with.
fn open_after(inputs_on_disk: bool, outputs: &[(u64, std::ops::Range<u32>, Lineage)]) -> Vec<u64> {
    let n = OPENED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("shoal-compaction-crash-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let generations = shoal_io::block_on(async {
        if inputs_on_disk {
            write(&dir, 1, 0..10, Lineage::flushed()).await;
            write(&dir, 2, 10..20, Lineage::flushed()).await;
        }
        for (generation, keys, lineage) in outputs {
            write(&dir, *generation, keys.clone(), lineage.clone()).await;
        }
        let (table, _) = Table::open(dir.clone(), 0, TableOptions::default()).await.expect("open");
        for pk in 0..20 {
            let read = table.read(&position(pk), &[shoal_storage::ClusteringRange::all()]).await.expect("read");
            let partition = read.unwrap_or_else(|| panic!("key {pk} lost"));
            assert_eq!(partition, counter_row(), "key {pk} read once");
        }
        let mut generations: Vec<u64> = table.sstable_set().iter().map(|s| s.generation()).collect();
        generations.sort_unstable();
        generations
    });
    let _ = std::fs::remove_dir_all(&dir);
    generations
}

#[test]
fn a_run_cut_short_leaves_the_inputs() {
    assert_eq!(open_after(true, &[(3, 0..8, output(false))]), [1, 2]);
    assert_eq!(open_after(true, &[(3, 0..8, output(false)), (4, 8..16, output(false))]), [1, 2]);
}

#[test]
fn a_finished_run_replaces_its_inputs() {
    let run = [(3, 0..8, output(false)), (4, 8..16, output(false)), (5, 16..20, output(true))];
    assert_eq!(open_after(true, &run), [3, 4, 5]);
    assert_eq!(open_after(true, &[(3, 0..20, output(true))]), [3]);
}

#[test]
fn outputs_whose_inputs_are_gone_stay() {
    // The run finished and its inputs were deleted; its last output (5)
    // was compacted into 6 later, leaving the earlier outputs on their own.
    let later = Lineage { ancestors: vec![5], last_of_run: true };
    let kept = open_after(false, &[(3, 0..8, output(false)), (4, 8..16, output(false)), (6, 16..20, later)]);
    assert_eq!(kept, [3, 4, 6]);
}
