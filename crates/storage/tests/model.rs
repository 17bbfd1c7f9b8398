//! Model-based randomized test of the storage engine: random writes,
//! counter increments, deletes (row, range, partition), TTLs on a
//! controllable clock, flushes,
//! compactions (strategy-driven and major) and restarts (reopening the
//! table from its files), checked after every step against a plain
//! in-memory model — point reads of every key and a full paged scan.
//!
//! Every fourth partition is a key-value table's (no clustering key: one
//! row, written whole or a cell at a time), the shape the memtable and the
//! row cache hold in their compact form until a second row, a deletion or
//! a cell of another timestamp promotes it.
//!
//! The seed is printed; `SHOAL_MODEL_SEED=<seed>` replays a failure.
//! `SHOAL_MODEL_OPS` sets the operations per strategy (CI runs a short run);
//! `SHOAL_MODEL_CHECK_EVERY=n` checks after every n-th step (long runs).
//! The shard's memory budget is tiny (`SHOAL_MODEL_MEMORY_BYTES`, 16 KiB by
//! default), so the row cache holds a few partitions at most and evicts
//! constantly while every read checks it against the model.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::PathBuf;

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shoal_storage::commitlog::Position;
use shoal_storage::compaction::{compact_major, compact_next};
use shoal_storage::{
    Cell, ClusteredRow, ClusteringRange, ColumnData, Expiry, Partition, PartitionPosition, RangeTombstone, Row,
    RowMarker, Table, TableOptions, Tombstone,
};

const PARTITIONS: u8 = 12;
const ROWS: u8 = 16;
const COLUMNS: u32 = 3;
/// The column counter deltas go to (the others hold regular cells).
const COUNTER_COLUMN: u32 = COLUMNS;
const GC_GRACE_S: i64 = 5;

/// (partition, row, column) → (value, expires at).
type Model = BTreeMap<(u8, u8, u32), (Bytes, Option<i64>)>;

fn position(pk: u8) -> PartitionPosition {
    // Tokens collide on purpose (pk / 3), so ordering by key within a token
    // is exercised too.
    PartitionPosition { token: i64::from(pk / 3) * 1_000 - 2_000, key: Bytes::from(vec![pk]) }
}

fn ck(row: u8) -> Bytes {
    Bytes::from(vec![row])
}

/// Whether `pk` is a key-value partition: its one row has an empty
/// clustering key, and the model calls it row 0.
fn key_value(pk: u8) -> bool {
    pk % 4 == 3
}

/// The rows of `pk` a write picks from.
fn rows(pk: u8) -> std::ops::Range<u8> {
    if key_value(pk) {
        0..1
    } else {
        0..ROWS
    }
}

/// An update of row `row` of partition `pk` to `r`.
fn row_update(pk: u8, row: u8, r: Row) -> Partition {
    let (key, clustering) = if key_value(pk) { (Bytes::new(), Vec::new()) } else { (ck(row), vec![ck(row)]) };
    let mut update = Partition::default();
    update.rows.insert(key, ClusteredRow { clustering, row: r });
    update
}

/// What a reader sees of a partition at `now_s`: live cells not shadowed.
fn visible(pk: u8, p: &Partition, now_s: i64, out: &mut Model) {
    for (key, row) in &p.rows {
        let deletion = [p.tombstone, row.row.deletion]
            .into_iter()
            .flatten()
            .chain(p.range_tombstones.iter().filter(|rt| rt.range.contains(key)).map(|rt| rt.tombstone))
            .max_by_key(|t| t.timestamp);
        for (column, data) in &row.row.columns {
            let ColumnData::Atomic(cell) = data else { panic!("the test writes atomic cells only") };
            if deletion.is_some_and(|d| d.shadows(cell.timestamp)) {
                continue;
            }
            if let Some(value) = cell.live_value(now_s) {
                out.insert(
                    (pk, key.first().copied().unwrap_or(0), *column),
                    (value, cell.expiry().map(|e| e.expires_at_s)),
                );
            }
        }
    }
}

/// Fails naming only the entries where `got` and `model` differ.
fn assert_same(got: &Model, model: &Model, what: &str) {
    if got == model {
        return;
    }
    let keys: std::collections::BTreeSet<_> = got.keys().chain(model.keys()).collect();
    let differ: Vec<String> = keys
        .into_iter()
        .filter(|k| got.get(k) != model.get(k))
        .map(|k| format!("{k:?}: engine {:?}, model {:?}", got.get(k), model.get(k)))
        .collect();
    panic!("{what} differ from the model:\n{}", differ.join("\n"));
}

fn generations_on_disk(dir: &std::path::Path) -> usize {
    let names = std::fs::read_dir(dir).into_iter().flatten().flatten().filter_map(|e| e.file_name().into_string().ok());
    names.filter_map(|n| n.split('-').nth(1).map(str::to_string)).collect::<std::collections::HashSet<_>>().len()
}

struct Run {
    rng: StdRng,
    dir: PathBuf,
    options: TableOptions,
    table: Table,
    model: Model,
    /// Rows whose counter was deleted: a deleted counter must not be
    /// reused (see shoal_storage::partition), so they get no more deltas.
    retired_counters: std::collections::HashSet<(u8, u8)>,
    now_s: i64,
    timestamp: i64,
    ops: u64,
    check_every: u64,
}

impl Run {
    fn next_timestamp(&mut self) -> i64 {
        self.timestamp += 1;
        self.now_s * 1_000_000 + self.timestamp
    }

    /// Notes the rows whose counters a deletion matching `covers` removes.
    fn retire_counters(&mut self, covers: impl Fn(u8, u8) -> bool) {
        let deleted = self.model.keys().filter(|(p, r, c)| *c == COUNTER_COLUMN && covers(*p, *r));
        let deleted: Vec<(u8, u8)> = deleted.map(|(p, r, _)| (*p, *r)).collect();
        self.retired_counters.extend(deleted);
    }

    fn increment(&mut self, pk: u8, row: u8) {
        let delta: i64 = self.rng.gen_range(-1_000..1_000);
        let ts = self.next_timestamp();
        let mut r = Row::default();
        r.columns.insert(COUNTER_COLUMN, ColumnData::Atomic(Cell::counter_delta(ts, delta)));
        self.table.apply(position(pk), row_update(pk, row, r), None);
        let entry = self.model.entry((pk, row, COUNTER_COLUMN)).or_insert((Bytes::from(vec![0; 8]), None));
        let sum = i64::from_be_bytes(entry.0[..].try_into().expect("the model keeps 8-byte counters"));
        entry.0 = Bytes::copy_from_slice(&(sum + delta).to_be_bytes());
    }

    /// Two writes of one cell at one timestamp, sometimes with a flush
    /// between them: whatever the order, the winner is the one the total
    /// order of reconciliation picks (ScyllaDB's: an expiring value over a
    /// non-expiring one, then the later expiry, then the shorter TTL, then
    /// the greater value), computed here without the engine's code.
    async fn tied_writes(&mut self, pk: u8) {
        let row = self.rng.gen_range(rows(pk));
        let column = self.rng.gen_range(0..COLUMNS);
        let ts = self.next_timestamp();
        let mut versions = Vec::new();
        for _ in 0..2 {
            let value = Bytes::from(format!("t{}", self.rng.gen_range(0..3)));
            let ttl = (self.rng.gen_range(0..2) == 0).then(|| self.rng.gen_range(1..3) * 10);
            let expiry = ttl.map(|ttl_s| Expiry { ttl_s, expires_at_s: self.now_s + i64::from(ttl_s) });
            versions.push((value, expiry));
        }
        let rank = |(value, expiry): &(Bytes, Option<Expiry>)| {
            let expiry = expiry.map(|e| (e.expires_at_s, std::cmp::Reverse(e.ttl_s)));
            (expiry, value.clone())
        };
        let winner = versions.iter().max_by_key(|v| rank(v)).cloned().expect("two versions");
        for (i, (value, expiry)) in versions.into_iter().enumerate() {
            if i == 1 && self.rng.gen_range(0..2) == 0 {
                self.table.flush(Position::ZERO).await.expect("flush between tied writes");
            }
            let mut r = Row::default();
            r.columns.insert(column, ColumnData::Atomic(Cell::live(ts, value, expiry)));
            self.table.apply(position(pk), row_update(pk, row, r), None);
        }
        self.model.insert((pk, row, column), (winner.0, winner.1.map(|e| e.expires_at_s)));
    }

    fn expire_model(&mut self) {
        let now = self.now_s;
        self.model.retain(|_, (_, expires)| expires.is_none_or(|e| e > now));
    }

    async fn step(&mut self) {
        self.ops += 1;
        let pk = self.rng.gen_range(0..PARTITIONS);
        let deletion_time_s = self.now_s;
        match self.rng.gen_range(0..120) {
            0..=49 => {
                let row = self.rng.gen_range(rows(pk));
                let column = self.rng.gen_range(0..COLUMNS);
                let value = Bytes::from(format!("v{}-{}", self.ops, "x".repeat(self.rng.gen_range(0..200))));
                let ttl = (self.rng.gen_range(0..5) == 0).then(|| self.rng.gen_range(1..20));
                let expiry = ttl.map(|ttl_s| Expiry { ttl_s, expires_at_s: self.now_s + i64::from(ttl_s) });
                let ts = self.next_timestamp();
                let mut r = Row::default();
                // A key-value row written whole, as INSERT or a memcached
                // `set` writes it: a marker and every column at one
                // timestamp and expiry.
                let columns = match key_value(pk) && self.rng.gen_range(0..2) == 0 {
                    true => {
                        r.marker = Some(RowMarker { timestamp: ts, expiry });
                        0..COLUMNS
                    }
                    false => column..column + 1,
                };
                for column in columns.clone() {
                    r.columns.insert(column, ColumnData::Atomic(Cell::live(ts, value.clone(), expiry)));
                }
                self.table.apply(position(pk), row_update(pk, row, r), None);
                for column in columns {
                    self.model.insert((pk, row, column), (value.clone(), expiry.map(|e| e.expires_at_s)));
                }
            }
            50..=57 => {
                let row = self.rng.gen_range(rows(pk));
                let ts = self.next_timestamp();
                let r = Row { deletion: Some(Tombstone { timestamp: ts, deletion_time_s }), ..Row::default() };
                self.table.apply(position(pk), row_update(pk, row, r), None);
                self.retire_counters(|p, r| (p, r) == (pk, row));
                self.model.retain(|(p, r, _), _| (*p, *r) != (pk, row));
            }
            58..=60 => {
                let (a, b) = (self.rng.gen_range(0..ROWS), self.rng.gen_range(0..ROWS));
                let (lo, hi) = (a.min(b), a.max(b));
                let ts = self.next_timestamp();
                let update = Partition {
                    range_tombstones: vec![RangeTombstone {
                        range: ClusteringRange { start: Bound::Included(ck(lo)), end: Bound::Excluded(ck(hi)) },
                        tombstone: Tombstone { timestamp: ts, deletion_time_s },
                    }],
                    ..Partition::default()
                };
                self.table.apply(position(pk), update, None);
                // A key-value row's empty key lies before every range.
                let covers = |p: u8, r: u8| p == pk && !key_value(p) && r >= lo && r < hi;
                self.retire_counters(covers);
                self.model.retain(|(p, r, _), _| !covers(*p, *r));
            }
            61..=62 => {
                let ts = self.next_timestamp();
                let update =
                    Partition { tombstone: Some(Tombstone { timestamp: ts, deletion_time_s }), ..Partition::default() };
                self.table.apply(position(pk), update, None);
                self.retire_counters(|p, _| p == pk);
                self.model.retain(|(p, _, _), _| *p != pk);
            }
            63..=64 => {
                let cell_ts = self.next_timestamp();
                let row = self.rng.gen_range(rows(pk));
                let column = self.rng.gen_range(0..=COUNTER_COLUMN);
                let mut r = Row::default();
                r.columns.insert(column, ColumnData::Atomic(Cell::dead(cell_ts, deletion_time_s)));
                self.table.apply(position(pk), row_update(pk, row, r), None);
                if column == COUNTER_COLUMN {
                    // A counter cell tombstone beats every delta, later ones too.
                    self.retired_counters.insert((pk, row));
                }
                self.model.remove(&(pk, row, column));
            }
            112..=119 => self.tied_writes(pk).await,
            65..=74 => self.now_s += self.rng.gen_range(1..4),
            75..=84 => self.table.flush(Position::ZERO).await.expect("flush"),
            85..=92 => {
                compact_next(&self.table, self.now_s).await.expect("compaction");
            }
            93..=95 => {
                compact_major(&self.table, self.now_s).await.expect("major compaction");
            }
            96..=99 => {
                self.table.flush(Position::ZERO).await.expect("flush before restart");
                // Let the deletions of compacted SSTables finish, as they
                // would before a clean shutdown: wait until only the live
                // SSTables' files are left.
                let live = self.table.sstable_set().len();
                for _ in 0..500 {
                    if generations_on_disk(&self.dir) == live {
                        break;
                    }
                    shoal_runtime::time::sleep(std::time::Duration::from_millis(2)).await;
                }
                let (table, report) =
                    Table::open(self.dir.clone(), 0, self.options.clone()).await.expect("reopen after restart");
                assert!(report.quarantined.is_empty() && report.removed_partial == 0, "{report:?}");
                self.table = table;
            }
            _ => {
                let row = self.rng.gen_range(rows(pk));
                if !self.retired_counters.contains(&(pk, row)) {
                    self.increment(pk, row);
                }
            }
        }
        self.expire_model();
        if self.ops.is_multiple_of(self.check_every) {
            self.check().await;
        }
    }

    async fn check(&self) {
        let mut seen = Model::new();
        for pk in 0..PARTITIONS {
            if let Some(p) = self.table.read(&position(pk), &[ClusteringRange::all()]).await.expect("read") {
                visible(pk, &p, self.now_s, &mut seen);
            }
        }
        assert_same(&seen, &self.model, &format!("point reads after op {}", self.ops));

        // A slice: rows [4, 9) of each partition.
        let slice = [ClusteringRange { start: Bound::Included(ck(4)), end: Bound::Excluded(ck(9)) }];
        for pk in 0..PARTITIONS {
            let mut got = Model::new();
            if let Some(p) = self.table.read(&position(pk), &slice).await.expect("slice read") {
                visible(pk, &p, self.now_s, &mut got);
            }
            let want: Model = self.model.range((pk, 4, 0)..(pk, 9, 0)).map(|(k, v)| (*k, v.clone())).collect();
            assert_eq!(got, want, "slice of partition {pk} differs after op {}", self.ops);
        }

        let mut scanned = Model::new();
        let mut from: Bound<PartitionPosition> = Bound::Unbounded;
        loop {
            let page =
                self.table.scan(from.as_ref(), Bound::Unbounded, &[ClusteringRange::all()], 5).await.expect("scan");
            for (pos, p) in &page {
                visible(pos.key[0], p, self.now_s, &mut scanned);
            }
            match page.last() {
                Some((last, _)) if page.len() == 5 => from = Bound::Excluded(last.clone()),
                _ => break,
            }
        }
        assert_eq!(scanned, self.model, "scan differs from the model after op {}", self.ops);
    }
}

fn run(strategy: &[(&str, &str)]) {
    let seed: u64 =
        std::env::var("SHOAL_MODEL_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random::<u64>);
    let ops: u64 = std::env::var("SHOAL_MODEL_OPS").ok().and_then(|s| s.parse().ok()).unwrap_or(1_500);
    let check_every: u64 =
        std::env::var("SHOAL_MODEL_CHECK_EVERY").ok().and_then(|s| s.parse().ok()).unwrap_or(1).max(1);
    let memory_bytes: usize =
        std::env::var("SHOAL_MODEL_MEMORY_BYTES").ok().and_then(|s| s.parse().ok()).unwrap_or(16 << 10);
    println!(
        "model test: strategy {strategy:?}, seed {seed} (SHOAL_MODEL_SEED={seed} replays), {ops} ops, \
         {memory_bytes} bytes of memory"
    );
    let name = strategy[0].1;
    let dir = std::env::temp_dir().join(format!("shoal-model-{}-{name}-{seed}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let options = TableOptions {
        strategy: shoal_storage::compaction::strategy::Strategy::from_options(
            &strategy.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        ),
        gc_grace_s: GC_GRACE_S,
        ..TableOptions::default()
    };
    shoal_io::block_on(async {
        shoal_storage::memory::set_budget_bytes(memory_bytes, 0.2);
        let mut run = Run {
            rng: StdRng::seed_from_u64(seed),
            table: Table::new(dir.clone(), 0, options.clone()),
            dir: dir.clone(),
            options,
            model: Model::new(),
            retired_counters: Default::default(),
            now_s: 1_000,
            timestamp: 0,
            ops: 0,
            check_every,
        };
        for _ in 0..ops {
            run.step().await;
        }
        run.check().await;
        let cache = run.table.cache_stats();
        println!("row cache: {cache:?}");
        assert!(cache.hits > 0 && cache.misses > 0, "the cache took no part: {cache:?}");
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn size_tiered_matches_the_model() {
    run(&[("class", "SizeTieredCompactionStrategy"), ("min_threshold", "2")]);
}

#[test]
fn leveled_matches_the_model() {
    run(&[("class", "LeveledCompactionStrategy"), ("sstable_size_in_mb", "1")]);
}

#[test]
fn time_window_matches_the_model() {
    run(&[
        ("class", "TimeWindowCompactionStrategy"),
        ("compaction_window_unit", "MINUTES"),
        ("compaction_window_size", "1"),
    ]);
}
