//! The row cache through `Table`: an entry stays equal to what the
//! SSTables hold through writes, flushes and compactions (continuity), a
//! negative entry gives way to a later write, and a flush updates entries
//! instead of dropping them; streamed data updates entries but adds none.

use bytes::Bytes;
use shoal_storage::cache::{self, Lookup};
use shoal_storage::commitlog::Position;
use shoal_storage::compaction::compact_major;
use shoal_storage::{Cell, ClusteredRow, ClusteringRange, ColumnData, Partition, PartitionPosition, Row, Table};

fn position(i: u8) -> PartitionPosition {
    PartitionPosition { token: i64::from(i) * 1000, key: Bytes::from(vec![i]) }
}

/// A partition of one row whose column 1 is `value`, written at `ts`.
fn partition_of(value: &str, ts: i64) -> Partition {
    let mut row = Row::default();
    row.columns.insert(1, ColumnData::Atomic(Cell::live(ts, Bytes::from(value.to_string()), None)));
    let mut p = Partition::default();
    p.rows.insert(Bytes::new(), ClusteredRow { clustering: Vec::new(), row });
    p
}

fn write(table: &Table, i: u8, value: &str, ts: i64) {
    table.apply(position(i), partition_of(value, ts), None);
}

async fn value(table: &Table, i: u8) -> Option<Bytes> {
    let p = table.read(&position(i), &[ClusteringRange::all()]).await.expect("read")?;
    match &p.rows.get(&Bytes::new())?.row.columns.get(&1)? {
        ColumnData::Atomic(cell) => cell.live_value(0),
        ColumnData::Collection(_) => None,
    }
}

fn cached(table: &Table, i: u8) -> Option<Option<Partition>> {
    match cache::local().peek(table.cache_id(), &position(i)) {
        Lookup::Hit(p) => Some(p),
        Lookup::Miss => None,
    }
}

#[test]
fn entries_follow_writes_flushes_and_compactions() {
    let dir = std::env::temp_dir().join(format!("shoal-row-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    shoal_io::block_on(async {
        let table = Table::new(dir.clone(), 0, Default::default());
        for i in 0..20 {
            write(&table, i, "one", 1);
        }
        table.flush(Position::ZERO).await.expect("flush");
        // The flush put every partition in the cache: reads are hits.
        let before = table.cache_stats();
        for i in 0..20 {
            assert_eq!(value(&table, i).await.as_deref(), Some(&b"one"[..]));
        }
        assert_eq!(table.cache_stats().hits - before.hits, 20);
        assert_eq!(table.cache_stats().misses, before.misses);

        // A negative entry (as a Bloom false positive leaves) gives way to a
        // write, before and after the write is flushed.
        cache::local().insert(table.cache_id(), &position(50), None);
        assert_eq!(value(&table, 50).await, None);
        write(&table, 50, "new", 2);
        assert_eq!(value(&table, 50).await.as_deref(), Some(&b"new"[..]));
        // Overwrites of cached partitions, flushed: the entries are updated.
        for i in 0..10 {
            write(&table, i, "two", 3);
        }
        table.flush(Position::ZERO).await.expect("flush");
        assert!(cached(&table, 50).is_some_and(|p| p.is_some()), "the negative entry was not updated by the flush");
        assert!(cached(&table, 3).is_some(), "a flush dropped a cached partition");
        let before = table.cache_stats();
        for i in 0..20 {
            let want = if i < 10 { "two" } else { "one" };
            assert_eq!(value(&table, i).await.as_deref(), Some(want.as_bytes()), "key {i}");
        }
        assert_eq!(value(&table, 50).await.as_deref(), Some(&b"new"[..]));
        // Compaction changes no content: entries stay, reads stay hits.
        compact_major(&table, 10).await.expect("compaction");
        for i in 0..20 {
            let want = if i < 10 { "two" } else { "one" };
            assert_eq!(value(&table, i).await.as_deref(), Some(want.as_bytes()), "key {i} after compaction");
        }
        let after = table.cache_stats();
        assert_eq!(after.misses, before.misses, "reads after flush and compaction missed the cache");
        assert_eq!(after.hits - before.hits, 41);
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_flush_of_streamed_data_updates_entries_but_adds_none() {
    let dir = std::env::temp_dir().join(format!("shoal-row-cache-streamed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    shoal_io::block_on(async {
        let table = Table::new(dir.clone(), 0, Default::default());
        write(&table, 1, "one", 1);
        table.flush(Position::ZERO).await.expect("flush");
        assert!(cached(&table, 1).is_some(), "a client's write is cached by its flush");

        let streamed = |i: u8, value: &str, ts: i64| table.apply_streamed(position(i), partition_of(value, ts));
        for i in 2..12 {
            streamed(i, "streamed", 2);
        }
        streamed(1, "newer", 3);
        let before = table.cache_stats().partitions;
        table.flush(Position::ZERO).await.expect("flush");
        assert_eq!(table.cache_stats().partitions, before, "streamed partitions went into the cache");
        for i in 2..12 {
            assert!(cached(&table, i).is_none(), "key {i} was cached by the flush");
            assert_eq!(value(&table, i).await.as_deref(), Some(&b"streamed"[..]));
        }
        // The entry the cache held follows the streamed write.
        assert!(cached(&table, 1).is_some());
        assert_eq!(value(&table, 1).await.as_deref(), Some(&b"newer"[..]));
    });
    let _ = std::fs::remove_dir_all(&dir);
}
