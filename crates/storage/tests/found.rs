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

/// What `Table::with_found_in_memory` finds at `i`, as `Found` would
/// give it: the row's timestamp and column 1's value, or "merged" for a
/// partition; `None` where memory does not answer.
fn in_memory(table: &Table, i: u8) -> Option<Option<String>> {
    use shoal_storage::{FoundRef, RowValue};
    let read = table.with_found_in_memory(&position(i), (), |(), found| {
        found.map(|found| match found {
            FoundRef::Row(row) => {
                let (header, cells) = row.read();
                let cells: Vec<(u32, RowValue)> = cells.collect();
                let [(1, RowValue::Bytes(value))] = cells[..] else { panic!("cells {cells:?}") };
                // A share of the row's value is the bytes read in place.
                assert_eq!(row.share(value), Bytes::copy_from_slice(value));
                format!("{} {}", header.timestamp, String::from_utf8_lossy(value))
            }
            FoundRef::Partition(_) => "merged".to_string(),
            FoundRef::Deleted(tombstone) => format!("deleted at {}", tombstone.timestamp),
        })
    });
    read.ok()
}

#[test]
fn a_read_in_place_finds_what_a_shared_read_finds() {
    let dir = std::env::temp_dir().join(format!("shoal-found-in-place-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    shoal_io::block_on(async {
        let table = Table::new(dir.clone(), 0, Default::default());
        assert_eq!(in_memory(&table, 1), Some(None), "nothing anywhere: memory answers none");
        write(&table, 1, b"first", 5);
        // The active memtable alone: borrowed from its slot.
        assert_eq!(in_memory(&table, 1), Some(Some("5 first".into())));
        table.apply_tombstone(position(3), shoal_storage::Tombstone { timestamp: 9, deletion_time_s: 1 }, None);
        assert_eq!(in_memory(&table, 3), Some(Some("deleted at 9".into())));
        // Flushed: the row cache answers (through a shared read).
        table.flush(Position::ZERO).await.expect("flush");
        assert_eq!(in_memory(&table, 1), Some(Some("5 first".into())));
        // A newer write over the cached row: the two merged.
        write(&table, 1, b"second", 6);
        assert_eq!(in_memory(&table, 1), Some(Some("merged".into())));
        assert!(matches!(found(&table, 1).await, Found::Partition(_)));
        // A key the SSTable's range and Bloom filter rule out: none.
        assert_eq!(in_memory(&table, 200), Some(None));
    });
    let _ = std::fs::remove_dir_all(&dir);
}
