//! Overlapping flushes of one table. Replay skips every commitlog entry
//! below the highest position among a table's SSTables, so a newer
//! memtable's SSTable must never be on disk while an older one is still
//! being written: a crash between the two would lose the older writes.
//! Here a large memtable is being flushed when a second flush seals a tiny
//! one, which would finish first if both were written at once; the table
//! asserts (in `write_sealed`) that memtables reach disk oldest first.

use bytes::Bytes;
use shoal_storage::commitlog::Position;
use shoal_storage::{Cell, ClusteredRow, ColumnData, Partition, PartitionPosition, Row, Table, TableOptions};

fn position(pk: u32) -> PartitionPosition {
    PartitionPosition { token: i64::from(pk), key: Bytes::copy_from_slice(&pk.to_be_bytes()) }
}

fn one_row(value_bytes: usize) -> Partition {
    let mut row = Row::default();
    row.columns.insert(0, ColumnData::Atomic(Cell::live(1, Bytes::from(vec![7u8; value_bytes]), None)));
    let mut partition = Partition::default();
    partition.rows.insert(Bytes::from_static(b"c"), ClusteredRow { clustering: vec![Bytes::from_static(b"c")], row });
    partition
}

#[test]
fn overlapping_flushes_write_memtables_oldest_first() {
    const OLDER_PARTITIONS: u32 = 20_000;
    let dir = std::env::temp_dir().join(format!("shoal-flush-order-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    shoal_io::block_on(async {
        let table = Table::new(dir.clone(), 0, TableOptions::default());
        for pk in 0..OLDER_PARTITIONS {
            table.apply(position(pk), one_row(1024), Some(Position { segment: 1, offset: pk }));
        }
        let older_end = Position { segment: 1, offset: OLDER_PARTITIONS };
        let newer_end = Position { segment: 2, offset: 1 };
        let older = table.flush(older_end);
        // Polled after `older` has sealed its memtable and begun writing it.
        let newer = async {
            table.apply(position(OLDER_PARTITIONS), one_row(16), Some(Position { segment: 2, offset: 0 }));
            table.flush(newer_end).await
        };
        let (older, newer) = futures_util::join!(older, newer);
        older.expect("the older flush");
        newer.expect("the newer flush");
        assert_eq!(table.sstable_set().len(), 2);
        assert_eq!(table.replay_floor(), newer_end);
        assert_eq!(table.memory_used_bytes(), 0);
    });
    let _ = std::fs::remove_dir_all(&dir);
}
