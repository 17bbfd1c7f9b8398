//! Whole-partition reads of single rows through `Table::read_found`: a
//! memtable's compact row and a row cache entry are found shared, not
//! decoded (values are slices, a memtable's not copied at all); a row two
//! sources hold is merged; a large cached row is copied out once and
//! shared by the reads after, until its entry changes.

use std::ops::Bound;

use bytes::Bytes;
use shoal_storage::commitlog::Position;
use shoal_storage::{
    Cell, ClusteredRow, ClusteringRange, ColumnData, Found, Partition, PartitionPosition, Row, SharedValue, Table,
};

fn position(i: u8) -> PartitionPosition {
    PartitionPosition { token: i64::from(i) * 1000, key: Bytes::from(vec![i]) }
}

/// A single row whose column 1 is `value`, written at `ts`.
fn write(table: &Table, i: u8, value: &[u8], ts: i64) {
    let mut row = Row::default();
    row.columns.insert(1, ColumnData::Atomic(Cell::live(ts, Bytes::copy_from_slice(value), None)));
    let mut p = Partition::default();
    p.rows.insert(Bytes::new(), ClusteredRow { clustering: Vec::new(), row });
    table.apply(position(i), p, None);
}

async fn found(table: &Table, i: u8) -> Found {
    table.read_found(&position(i), &[ClusteringRange::all()]).await.expect("read").expect("a partition")
}

/// The shared row's timestamp and column 1's value; panics on a partition.
fn shared(found: &Found) -> (i64, Bytes) {
    let Found::Row(row) = found else { panic!("not found shared: {found:?}") };
    let (header, cells) = row.read();
    let cells: Vec<(u32, SharedValue)> = cells.collect();
    match &cells[..] {
        [(1, SharedValue::Bytes(value))] => (header.timestamp, value.clone()),
        other => panic!("cells {other:?}"),
    }
}

#[test]
fn single_rows_are_found_shared_and_merged_where_two_sources_hold_one() {
    let dir = std::env::temp_dir().join(format!("shoal-found-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    shoal_io::block_on(async {
        let table = Table::new(dir.clone(), 0, Default::default());
        write(&table, 1, b"a memtable", 5);
        // From the memtable: the value is the memtable's own bytes.
        let (ts, first) = shared(&found(&table, 1).await);
        assert_eq!((ts, &first[..]), (5, &b"a memtable"[..]));
        assert_eq!(shared(&found(&table, 1).await).1.as_ptr(), first.as_ptr(), "a memtable read copied the value");

        // From the row cache, once flushed.
        table.flush(Position::ZERO).await.expect("flush");
        let hits = table.cache_stats().hits;
        assert_eq!(shared(&found(&table, 1).await), (5, Bytes::from_static(b"a memtable")));
        assert_eq!(table.cache_stats().hits, hits + 1);

        // A newer write in the memtable over the cached row: merged.
        write(&table, 1, b"newer", 6);
        let Found::Partition(merged) = found(&table, 1).await else { panic!("two sources, not merged") };
        let Some(ColumnData::Atomic(cell)) = merged.rows.get(&Bytes::new()).and_then(|r| r.row.columns.get(&1)) else {
            panic!("no cell: {merged:?}")
        };
        assert_eq!(cell.live_value(0).as_deref(), Some(&b"newer"[..]));

        // A large cached row is copied out once, then shared; a small one
        // is copied per read.
        let large = vec![b'x'; 100_000];
        write(&table, 2, &large, 7);
        table.flush(Position::ZERO).await.expect("flush");
        let (_, a) = shared(&found(&table, 2).await);
        let (_, b) = shared(&found(&table, 2).await);
        assert_eq!((&a[..], a.as_ptr()), (&large[..], b.as_ptr()), "two reads of a large cached row made two copies");
        let (_, c) = shared(&found(&table, 1).await);
        let (_, d) = shared(&found(&table, 1).await);
        assert_ne!(c.as_ptr(), d.as_ptr());

        // Its entry changes with a flush of a newer value: the shared copy
        // goes with it.
        let newer = vec![b'z'; 100_000];
        write(&table, 2, &newer, 8);
        table.flush(Position::ZERO).await.expect("flush");
        assert_eq!(shared(&found(&table, 2).await), (8, Bytes::from(newer)));
        // Ranges that do not take the partition whole: decoded, as before.
        let row_only = ClusteringRange { start: Bound::Included(Bytes::new()), end: Bound::Included(Bytes::new()) };
        let part = table.read_found(&position(2), &[row_only]).await.expect("read");
        assert!(matches!(part, Some(Found::Partition(_))), "{part:?}");
    });
    let _ = std::fs::remove_dir_all(&dir);
}
