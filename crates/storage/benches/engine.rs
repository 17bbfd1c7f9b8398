//! Storage-engine benchmark: what one shard (one core, one thread) of the
//! engine sustains, measured through the same calls the replica makes.
//!
//! Figures, one printed line each, with units:
//! 1. commitlog writes (append + memtable apply): the log's throughput with
//!    appends that do not wait, then concurrent writers each waiting for
//!    its ack, under periodic sync (the entry written to the file) and
//!    batch sync (fdatasynced): ack latency and writes per ack group;
//! 2. memtable flush to an SSTable, per compression codec;
//! 3. major compaction of overlapping SSTables (read and write MB/s);
//! 4. point-read latency from SSTables, before and after that compaction;
//! 5. commitlog replay (read, decode, apply), as recovery does it;
//! 6. point reads from one SSTable per compression chunk size (4 to 64 KiB,
//!    LZ4), with the index page cache on and off, and each file's size;
//! 7. a fixed number (`SHOAL_BENCH_READS`, default 20000) of random point
//!    reads from one uncompressed SSTable (16 KiB chunks, the default),
//!    index cache off unless `SHOAL_BENCH_INDEX_CACHE_MB`: the disk-bound
//!    read's path (`SSTable::read_found`, a table's whole-partition read). Its reads run in `counted_reads`, so callgrind can count
//!    them alone: `bench/callgrind_sstable_reads.sh`.
//!
//! Why: these are the per-core budgets the rest of the design leans on
//! (e.g. compaction ≥ 150 MB/s per core), so regressions must be visible.
//!
//! Rows are realistic CQL rows: an 8-byte partition key whose token is a
//! hash of it (spread over the ring), one clustered row with a row marker
//! and one 1 KiB cell of random (incompressible) bytes; [6] also uses
//! text-like values (words of a small vocabulary), which compress as real
//! text roughly does, since how chunk size trades read cost against
//! compression only shows on data that compresses. Reads and replay hit the
//! OS page cache, warm because the files were just written, unless
//! `SHOAL_BENCH_DROP_CACHES=1`. [4] reads through the table (memtables and
//! row cache as the table's defaults have them); [6] reads the SSTable
//! itself, so it measures the SSTable read path alone.
//!
//! Runs in about two and a half minutes at default sizes ([6] is about half
//! of it). Knobs (environment):
//! `SHOAL_BENCH_MB` (data per flush / compaction / replay stage, default
//! 256), `SHOAL_BENCH_SECS` (length of each timed write or read loop,
//! default 3), `SHOAL_BENCH_WRITERS` (concurrent batch-mode writers, default
//! 64), `SHOAL_BENCH_SSTABLES` (compaction inputs, default 6),
//! `SHOAL_BENCH_DIR` (parent of the scratch directory, default the system
//! temp dir), `SHOAL_BENCH_DIRECT_IO` (`0`: files through the page cache,
//! for contrast with direct I/O, the default), `SHOAL_BENCH_CHUNK_ROWS` (rows of [6]'s SSTables, default
//! 100000), `SHOAL_BENCH_STAGES` (which figures to run, e.g. `6` or `1,5`;
//! default all; [5] replays [1]'s log, so it runs [1]'s periodic stage too).
//! MB are 10^6 bytes.
//!
//! Just [6], in about a minute: `SHOAL_BENCH_STAGES=6 cargo bench -p
//! shoal-storage --bench engine`.

use std::cell::{Cell as StdCell, RefCell};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use shoal_runtime::yield_now;
use shoal_storage::commitlog::{
    decode_mutation, encode_mutation, replay_segment, segment_ids, CommitLog, CommitLogConfig, Position, SyncMode,
};
use shoal_storage::compaction::compact_major;
use shoal_storage::sstable::compression::Compression;
use shoal_storage::sstable::{index_cache, SSTable};
use shoal_storage::{
    Cell, ClusteredRow, ClusteringRange, ColumnData, Partition, PartitionPosition, PartitionUpdate, Row, RowMarker,
    Table, TableOptions,
};
use uuid::Uuid;

const VALUE_BYTES: usize = 1024;
const SEGMENT_BYTES: u32 = 32 << 20;
/// The server's default periodic sync period: no timer sync falls inside a
/// timed loop, only the fdatasync at each segment switch.
const PERIODIC_SYNC_MS: u64 = 10_000;
const TABLE_ID: Uuid = Uuid::from_u128(0x5_4041);
const MB: f64 = 1e6;

struct Config {
    mb: u64,
    secs: Duration,
    writers: usize,
    sstables: u64,
    drop_caches: bool,
    direct_io: bool,
    chunk_rows: u64,
    /// [7]'s reads and index cache.
    reads: u64,
    index_cache_mb: usize,
    /// Figures to run (1 to 7); empty: all.
    stages: Vec<u32>,
}

impl Config {
    fn from_env() -> Config {
        let number = |name: &str, default: u64| {
            std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok()).filter(|v| *v > 0).unwrap_or(default)
        };
        Config {
            mb: number("SHOAL_BENCH_MB", 256),
            secs: Duration::from_secs(number("SHOAL_BENCH_SECS", 3)),
            writers: number("SHOAL_BENCH_WRITERS", 64) as usize,
            sstables: number("SHOAL_BENCH_SSTABLES", 6).max(2),
            drop_caches: std::env::var("SHOAL_BENCH_DROP_CACHES").is_ok_and(|v| v == "1"),
            direct_io: std::env::var("SHOAL_BENCH_DIRECT_IO").map_or(true, |v| v != "0"),
            chunk_rows: number("SHOAL_BENCH_CHUNK_ROWS", 100_000),
            reads: number("SHOAL_BENCH_READS", 20_000),
            index_cache_mb: std::env::var("SHOAL_BENCH_INDEX_CACHE_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(0),
            stages: std::env::var("SHOAL_BENCH_STAGES")
                .unwrap_or_default()
                .split(',')
                .filter_map(|s| s.trim().parse().ok())
                .collect(),
        }
    }

    fn runs(&self, stage: u32) -> bool {
        self.stages.is_empty() || self.stages.contains(&stage)
    }

    /// Rows of one 1 KiB value holding `mb` of values.
    fn rows(&self) -> u64 {
        self.mb * 1_000_000 / VALUE_BYTES as u64
    }
}

/// The scratch directory, removed when the benchmark ends (or panics).
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn new() -> ScratchDir {
        let parent = std::env::var_os("SHOAL_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
        let dir = parent.join(format!("shoal-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the scratch directory");
        ScratchDir(dir)
    }

    /// A fresh subdirectory for one stage.
    fn stage(&self, name: &str) -> PathBuf {
        let dir = self.0.join(name);
        std::fs::create_dir_all(&dir).expect("create a stage directory");
        dir
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Makes rows: keys from ids, values sliced from a pool of random bytes
/// (slicing is free, so generating data costs the timed loops nothing).
struct Rows {
    pool: Bytes,
    rng: u64,
}

impl Rows {
    fn new() -> Rows {
        let mut rng = 0x5eed_u64;
        let pool: Vec<u8> = (0..(16 << 20) / 8).flat_map(|_| splitmix64(&mut rng).to_le_bytes()).collect();
        Rows { pool: Bytes::from(pool), rng }
    }

    /// Rows whose values are text-like: words drawn at random from a
    /// vocabulary of 256 (3 to 10 lowercase letters each), spaced. LZ4
    /// compresses these about as well as it does English text or JSON.
    fn text() -> Rows {
        let mut rng = 0x7e47_u64;
        let words: Vec<Vec<u8>> = (0..256)
            .map(|_| {
                let len = 3 + splitmix64(&mut rng) % 8;
                (0..len).map(|_| b'a' + (splitmix64(&mut rng) % 26) as u8).collect()
            })
            .collect();
        let mut pool = Vec::with_capacity((16 << 20) + 16);
        while pool.len() < 16 << 20 {
            pool.extend_from_slice(&words[(splitmix64(&mut rng) % 256) as usize]);
            pool.push(b' ');
        }
        Rows { pool: Bytes::from(pool), rng }
    }

    fn value(&mut self) -> Bytes {
        let start = (splitmix64(&mut self.rng) % (self.pool.len() - VALUE_BYTES) as u64) as usize;
        self.pool.slice(start..start + VALUE_BYTES)
    }

    /// The write of partition `id` at `timestamp`: one row, one cell.
    fn row(&mut self, id: u64, timestamp: i64) -> (PartitionPosition, PartitionUpdate) {
        let mut row = Row { marker: Some(RowMarker { timestamp, expiry: None }), ..Row::default() };
        row.columns.insert(1, ColumnData::Atomic(Cell::live(timestamp, self.value(), None)));
        let mut update = Partition::default();
        // Clustering key: the int 0, raw and order-preserving encodings.
        let clustered = ClusteredRow { clustering: vec![Bytes::from_static(&[0, 0, 0, 0])], row };
        update.rows.insert(Bytes::from_static(&[0x80, 0, 0, 0]), clustered);
        (position(id), update)
    }
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Partition `id`: an 8-byte key, its token a hash of the key.
fn position(id: u64) -> PartitionPosition {
    let key = id.to_be_bytes();
    PartitionPosition { token: xxhash_rust::xxh3::xxh3_64(&key) as i64, key: Bytes::copy_from_slice(&key) }
}

fn now_micros() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64)
}

fn mb_per_s(bytes: u64, elapsed: Duration) -> f64 {
    bytes as f64 / MB / elapsed.as_secs_f64()
}

fn per_s(count: u64, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64()
}

/// A latency histogram in nanoseconds (1 ns to 60 s, 3 significant digits).
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram bounds")
}

fn percentiles_us(h: &Histogram<u64>) -> String {
    let us = |q: f64| h.value_at_quantile(q) as f64 / 1_000.0;
    format!(
        "p50 {:.1} µs, p99 {:.1} µs, p999 {:.1} µs, max {:.1} µs",
        us(0.5),
        us(0.99),
        us(0.999),
        h.max() as f64 / 1_000.0
    )
}

fn dir_bytes(dir: &Path) -> u64 {
    let entries = std::fs::read_dir(dir).into_iter().flatten().flatten();
    entries.filter_map(|e| e.metadata().ok()).filter(|m| m.is_file()).map(|m| m.len()).sum()
}

/// Empties the OS page cache (root only), so reads go to the disk.
fn drop_caches(config: &Config) {
    if config.drop_caches {
        // Sync first so that dirty pages can be dropped too.
        let _ = std::process::Command::new("sync").status();
        if let Err(e) = std::fs::write("/proc/sys/vm/drop_caches", "3") {
            println!("    (could not drop the page cache: {e})");
        }
    }
}

fn page_cache_note(config: &Config) -> &'static str {
    if config.drop_caches {
        "page cache dropped first"
    } else {
        "page cache warm"
    }
}

fn main() {
    let config = Config::from_env();
    shoal_io::set_direct_io(config.direct_io);
    let scratch = ScratchDir::new();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("Shoal storage engine benchmark: one shard = one thread");
    println!(
        "  scratch dir {}, {} CPUs, load average at start {}",
        scratch.0.display(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    println!(
        "  SHOAL_BENCH_MB={} SHOAL_BENCH_SECS={} SHOAL_BENCH_WRITERS={} SHOAL_BENCH_SSTABLES={} \
         SHOAL_BENCH_DIRECT_IO={}; rows: 8-byte key, 1 clustered row, one {VALUE_BYTES}-byte random value; \
         MB = 10^6 bytes",
        config.mb,
        config.secs.as_secs(),
        config.writers,
        config.sstables,
        u8::from(config.direct_io)
    );

    let periodic_log = scratch.stage("commitlog-periodic");
    if config.runs(1) || config.runs(5) {
        shoal_io::block_on(commitlog_periodic(&config, &periodic_log));
    }
    if config.runs(1) {
        let periodic = SyncMode::Periodic { period_ms: PERIODIC_SYNC_MS };
        shoal_io::block_on(commitlog_acked(&config, &scratch.stage("commitlog-periodic-acked"), periodic));
        shoal_io::block_on(commitlog_acked(&config, &scratch.stage("commitlog-batch"), SyncMode::Batch));
    }
    if config.runs(2) {
        for compression in [Compression::Lz4, Compression::Zstd, Compression::None] {
            shoal_io::block_on(flush(&config, &scratch.stage(&format!("flush-{compression:?}")), compression));
        }
    }
    if config.runs(3) || config.runs(4) {
        shoal_io::block_on(compaction_and_reads(&config, &scratch.stage("compaction")));
    }
    if config.runs(5) {
        shoal_io::block_on(replay(&config, &periodic_log));
    }
    if config.runs(6) {
        for (values, rows) in [("random values", Rows::new as fn() -> Rows), ("text-like values", Rows::text)] {
            for chunk_kib in CHUNK_KIB {
                let dir = scratch.stage(&format!("chunk-{chunk_kib}k-{}", values.split(' ').next().unwrap_or("")));
                shoal_io::block_on(chunk_reads(&config, &dir, chunk_kib, values, rows()));
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
    }
    if config.runs(7) {
        shoal_io::block_on(uncompressed_reads(&config, &scratch.stage("uncompressed")));
    }
}

/// [1] Periodic sync, appends that do not wait for their acks: the log's
/// throughput. The clock stops once every appended byte is written to the
/// segment files.
async fn commitlog_periodic(config: &Config, dir: &Path) {
    let sync = SyncMode::Periodic { period_ms: PERIODIC_SYNC_MS };
    let log = CommitLog::start(
        CommitLogConfig { dir: dir.to_path_buf(), shard: 0, segment_size_bytes: SEGMENT_BYTES, sync },
        1,
    );
    let table = Table::new(dir.join("table"), 0, TableOptions::default());
    let mut rows = Rows::new();
    // Bounds memory (the memtable keeps every write) on a fast machine.
    let max_bytes = config.mb * 8 * 1_000_000;
    let start = Instant::now();
    let deadline = start + config.secs;
    let (mut writes, mut end) = (0u64, Position::ZERO);
    while Instant::now() < deadline && log.appended_bytes() < max_bytes {
        // A batch of writes, then let the log's writer task run, as a
        // shard's request tasks would.
        for _ in 0..16 {
            let (position, update) = rows.row(writes, now_micros());
            let (at, next) = log.append(|out| encode_mutation(out, TABLE_ID, &position, &update)).expect("append");
            table.apply(position, update, Some(at));
            end = next;
            writes += 1;
        }
        yield_now().await;
    }
    let appended = start.elapsed();
    // Under periodic sync this waits until the entry is in the file.
    log.wait_durable(end).await.expect("commitlog write");
    let elapsed = start.elapsed();
    let bytes = log.appended_bytes();
    println!(
        "[1] commitlog write, periodic sync: {:.0} writes/s, {:.1} MB/s of log ({writes} writes, {:.1} MB in {:.2} s \
         until written to the segment files; appended in {:.2} s)",
        per_s(writes, elapsed),
        mb_per_s(bytes, elapsed),
        bytes as f64 / MB,
        elapsed.as_secs_f64(),
        appended.as_secs_f64()
    );
}

/// What the writers waiting for acks share.
struct AckedRun {
    log: Rc<CommitLog>,
    table: Table,
    rows: RefCell<Rows>,
    deadline: Instant,
    writes: StdCell<u64>,
    latency: RefCell<Histogram<u64>>,
    /// Acks share a write round, and under batch its fdatasync ("a group"),
    /// while their entries were appended before the group's first ack: the
    /// log's position then is the floor.
    group_floor: StdCell<Position>,
    groups: StdCell<u64>,
}

/// [1] Concurrent writers, each waiting for its ack: under batch sync for
/// its fdatasync, under periodic sync for its entry to be in the file;
/// writers share a round (group commit).
async fn commitlog_acked(config: &Config, dir: &Path, sync: SyncMode) {
    let log = CommitLog::start(
        CommitLogConfig { dir: dir.to_path_buf(), shard: 0, segment_size_bytes: SEGMENT_BYTES, sync },
        1,
    );
    let start = Instant::now();
    let run = Rc::new(AckedRun {
        log,
        table: Table::new(dir.join("table"), 0, TableOptions::default()),
        rows: RefCell::new(Rows::new()),
        deadline: start + config.secs,
        writes: StdCell::new(0),
        latency: RefCell::new(histogram()),
        group_floor: StdCell::new(Position::ZERO),
        groups: StdCell::new(0),
    });
    let mut done = Vec::new();
    for _ in 0..config.writers {
        let (tx, rx) = futures_channel::oneshot::channel();
        let run = Rc::clone(&run);
        shoal_runtime::spawn(async move {
            acked_writer(&run).await;
            let _ = tx.send(());
        });
        done.push(rx);
    }
    for rx in done {
        let _ = rx.await;
    }
    let elapsed = start.elapsed();
    let (writes, bytes, groups) = (run.writes.get(), run.log.appended_bytes(), run.groups.get().max(1));
    println!(
        "[1] commitlog write, {} sync, {} writers: {:.0} writes/s, {:.1} MB/s of log ({writes} writes in {:.2} s); \
         ≈{:.1} writes per ack group ({groups} groups); ack latency {}",
        if sync == SyncMode::Batch { "batch" } else { "periodic" },
        config.writers,
        per_s(writes, elapsed),
        mb_per_s(bytes, elapsed),
        elapsed.as_secs_f64(),
        writes as f64 / groups as f64,
        percentiles_us(&run.latency.borrow())
    );
}

async fn acked_writer(run: &AckedRun) {
    while Instant::now() < run.deadline {
        let id = run.writes.get();
        run.writes.set(id + 1);
        let (position, update) = run.rows.borrow_mut().row(id, now_micros());
        let began = Instant::now();
        let (at, end) = run.log.append(|out| encode_mutation(out, TABLE_ID, &position, &update)).expect("append");
        run.table.apply(position, update, Some(at));
        run.log.wait_durable(end).await.expect("commitlog ack");
        run.latency.borrow_mut().saturating_record(began.elapsed().as_nanos() as u64);
        // An entry appended after the current group began cannot be covered
        // by that group's fdatasync: this ack starts a new group.
        if end > run.group_floor.get() {
            run.groups.set(run.groups.get() + 1);
            run.group_floor.set(run.log.current_position());
        }
    }
}

/// [2] A memtable of `config.mb` of values flushed to one SSTable.
async fn flush(config: &Config, dir: &Path, compression: Compression) {
    let mut options = TableOptions::default();
    options.writer.compression = compression;
    let table = Table::new(dir.to_path_buf(), 0, options);
    let mut rows = Rows::new();
    let n = config.rows();
    let filling = Instant::now();
    for id in 0..n {
        let (position, update) = rows.row(id, now_micros());
        table.apply(position, update, None);
    }
    let filled = filling.elapsed();
    let memtable_bytes = table.active_memtable_bytes() as u64;
    let start = Instant::now();
    table.flush(Position::ZERO).await.expect("flush");
    let elapsed = start.elapsed();
    let sstables = table.sstable_set();
    let raw: u64 = sstables.iter().map(|s| s.stats().raw_bytes).sum();
    let data: u64 = sstables.iter().map(|s| s.data_bytes()).sum();
    println!(
        "[2] flush, {compression:?}: {:.1} MB/s ({:.1} MB of encoded rows in {:.2} s → {:.1} MB data file, \
         ratio {:.2}x, {:.1} MB on disk in all; memtable held ≈{:.1} MB, filled at {:.0} rows/s)",
        mb_per_s(raw, elapsed),
        raw as f64 / MB,
        elapsed.as_secs_f64(),
        data as f64 / MB,
        raw as f64 / data.max(1) as f64,
        dir_bytes(dir) as f64 / MB,
        memtable_bytes as f64 / MB,
        per_s(n, filled),
    );
    drop(sstables);
    table.drop_data();
}

/// [3] and [4]: SSTables of overlapping keys, point reads over them, a
/// major compaction, point reads over its output.
async fn compaction_and_reads(config: &Config, dir: &Path) {
    let table = Table::new(dir.to_path_buf(), 0, TableOptions::default());
    let mut rows = Rows::new();
    // SSTable i holds ids [i·step, i·step + per_table): each shares half its
    // keys with the next, and every one spans the whole ring.
    let per_table = config.rows() / config.sstables;
    let step = per_table / 2;
    for i in 0..config.sstables {
        for id in i * step..i * step + per_table {
            let (position, update) = rows.row(id, now_micros());
            table.apply(position, update, None);
        }
        table.flush(Position::ZERO).await.expect("flush");
    }
    let keys = (config.sstables - 1) * step + per_table;

    let inputs = table.sstable_set().len();
    point_reads(config, &table, keys, &format!("{inputs} overlapping SSTables")).await;

    let raw_in: u64 = table.sstable_set().iter().map(|s| s.stats().raw_bytes).sum();
    let start = Instant::now();
    let report =
        compact_major(&table, now_micros() / 1_000_000).await.expect("compaction").expect("SSTables to compact");
    let elapsed = start.elapsed();
    let raw_out: u64 = table.sstable_set().iter().map(|s| s.stats().raw_bytes).sum();
    println!(
        "[3] compaction, major, {} → {} SSTables: {:.1} MB/s read, {:.1} MB/s written per core \
         ({:.1} MB read, {:.1} MB written in {:.2} s; {:.0} partitions/s out; raw {:.1} → {:.1} MB)",
        report.inputs,
        report.outputs,
        mb_per_s(report.bytes_read, elapsed),
        mb_per_s(report.bytes_written, elapsed),
        report.bytes_read as f64 / MB,
        report.bytes_written as f64 / MB,
        elapsed.as_secs_f64(),
        per_s(report.partitions_written, elapsed),
        raw_in as f64 / MB,
        raw_out as f64 / MB,
    );

    let outputs = table.sstable_set().len();
    point_reads(config, &table, keys, &format!("{outputs} SSTable after compaction")).await;
    table.drop_data();
}

/// [4] Reads of random existing keys, one at a time, for `config.secs`.
async fn point_reads(config: &Config, table: &Table, keys: u64, what: &str) {
    drop_caches(config);
    let mut latency = histogram();
    let mut rng = 0x4ead_u64;
    let all = [ClusteringRange::all()];
    let start = Instant::now();
    let deadline = start + config.secs;
    let mut reads = 0u64;
    while Instant::now() < deadline {
        let position = position(splitmix64(&mut rng) % keys);
        let began = Instant::now();
        let partition = table.read(&position, &all).await.expect("read");
        latency.saturating_record(began.elapsed().as_nanos() as u64);
        assert!(partition.is_some_and(|p| p.rows.len() == 1), "a written key reads back");
        reads += 1;
    }
    println!(
        "[4] point read, {what}: {} ({:.0} reads/s, {reads} reads, {})",
        percentiles_us(&latency),
        per_s(reads, start.elapsed()),
        page_cache_note(config)
    );
}

/// [5] Replays the periodic stage's segments into a memtable.
async fn replay(config: &Config, dir: &Path) {
    drop_caches(config);
    let table = Table::new(dir.join("replayed"), 0, TableOptions::default());
    let (mut entries, mut bytes) = (0u64, 0u64);
    let start = Instant::now();
    for segment in segment_ids(dir, 0).await.expect("list segments") {
        let report = replay_segment(dir, 0, segment, &mut |entry| {
            let (_table, position, update) = decode_mutation(entry.payload).expect("a well-formed mutation");
            table.apply(position, update, Some(entry.position));
        })
        .await
        .expect("replay");
        assert!(report.corruption.is_none(), "clean segments replay whole");
        entries += report.entries;
        bytes += report.bytes;
    }
    let elapsed = start.elapsed();
    println!(
        "[5] commitlog replay: {:.1} MB/s, {:.0} entries/s ({:.1} MB, {entries} entries in {:.2} s; {})",
        mb_per_s(bytes, elapsed),
        per_s(entries, elapsed),
        bytes as f64 / MB,
        elapsed.as_secs_f64(),
        page_cache_note(config)
    );
}

/// [6]'s compression chunk sizes, in KiB.
const CHUNK_KIB: [usize; 5] = [4, 8, 16, 32, 64];

/// [6]'s index cache: enough for every page of its SSTables (a page of
/// 128 entries with 8-byte keys is about 12 KiB).
const INDEX_CACHE_BYTES: usize = 64 << 20;

/// [6] `config.chunk_rows` rows flushed to one LZ4 SSTable of `chunk_kib`
/// KiB chunks; uniform random point reads of it with the index cache on
/// (warmed first), then off.
async fn chunk_reads(config: &Config, dir: &Path, chunk_kib: usize, values: &str, mut rows: Rows) {
    let mut options = TableOptions::default();
    options.writer.compression = Compression::Lz4;
    options.writer.chunk_bytes = chunk_kib << 10;
    let table = one_sstable(config, dir, options, &mut rows).await;
    let n = config.chunk_rows;
    let sstables = table.sstable_set();
    let sstable = &sstables[0];
    let (raw, data) = (sstable.stats().raw_bytes, sstable.data_bytes());

    drop_caches(config);
    index_cache::set_capacity_bytes(INDEX_CACHE_BYTES);
    let mut rng = 0xc4_u64;
    // Warm-up: enough reads that every index page is cached (coupon
    // collecting n / 128 pages takes about pages · ln(pages) reads).
    for _ in 0..n / 4 {
        read_one(sstable, splitmix64(&mut rng) % n).await;
    }
    let warm = index_cache::stats();
    let on = timed_reads(config, sstable, n, &mut rng).await;
    let after = index_cache::stats();
    index_cache::set_capacity_bytes(0);
    let off = timed_reads(config, sstable, n, &mut rng).await;

    let hits = after.hits - warm.hits;
    let lookups = hits + after.misses - warm.misses;
    println!(
        "[6] point read, 1 SSTable, LZ4 {chunk_kib:>2} KiB chunks, {values}: index cache on {}; off {}; \
         data file {:.1} MB for {:.1} MB raw (ratio {:.2}x), {:.1} MB on disk in all; \
         index cache {:.1}% hits, {} pages in {:.1} MB; {}",
        on,
        off,
        data as f64 / MB,
        raw as f64 / MB,
        raw as f64 / data.max(1) as f64,
        dir_bytes(dir) as f64 / MB,
        100.0 * hits as f64 / lookups.max(1) as f64,
        after.pages,
        after.bytes as f64 / MB,
        page_cache_note(config)
    );
    drop(sstables);
    table.drop_data();
}

/// A table of `options` whose `config.chunk_rows` rows are flushed to one
/// SSTable ([6] and [7]).
async fn one_sstable(config: &Config, dir: &Path, options: TableOptions, rows: &mut Rows) -> Table {
    let table = Table::new(dir.to_path_buf(), 0, options);
    for id in 0..config.chunk_rows {
        let (position, update) = rows.row(id, now_micros());
        table.apply(position, update, None);
    }
    table.flush(Position::ZERO).await.expect("flush");
    assert_eq!(table.sstable_set().len(), 1, "one flush, one SSTable");
    table
}

/// [7] `config.chunk_rows` rows flushed to one uncompressed SSTable, then
/// `config.reads` uniform random point reads of it.
async fn uncompressed_reads(config: &Config, dir: &Path) {
    let mut options = TableOptions::default();
    options.writer.compression = Compression::None;
    let table = one_sstable(config, dir, options, &mut Rows::new()).await;
    let n = config.chunk_rows;
    let sstables = table.sstable_set();
    drop_caches(config);
    index_cache::set_capacity_bytes(config.index_cache_mb << 20);
    let cpu_start = thread_cpu_ns();
    let start = Instant::now();
    counted_reads(&sstables[0], n, config.reads).await;
    let elapsed = start.elapsed();
    let cpu = match (cpu_start, thread_cpu_ns()) {
        (Some(from), Some(to)) => format!("{:.0}", (to - from) as f64 / config.reads as f64),
        _ => "?".to_string(),
    };
    let cache = index_cache::stats();
    println!(
        "[7] point read, 1 uncompressed SSTable of {n} rows, index cache {} MB: {} reads, {:.0} ns/read \
         ({cpu} ns CPU), index cache {} hits / {} misses",
        config.index_cache_mb,
        config.reads,
        elapsed.as_nanos() as f64 / config.reads as f64,
        cache.hits,
        cache.misses
    );
    index_cache::set_capacity_bytes(0);
    drop(sstables);
    table.drop_data();
}

/// [7]'s reads, for callgrind's `--toggle-collect='*counted_reads*'`:
/// whole partitions as a table's point read finds them
/// (`SSTable::read_found`, what the row cache and the replica take);
/// boxed, so their future is polled through its own function
/// (`counted_reads::{{closure}}`), never inlined into the caller's.
fn counted_reads(sstable: &SSTable, keys: u64, reads: u64) -> Pin<Box<dyn Future<Output = ()> + '_>> {
    Box::pin(async move {
        let mut rng = 0x7_u64;
        for _ in 0..reads {
            let id = splitmix64(&mut rng) % keys;
            let found = sstable.read_found(&position(id)).await.expect("read");
            assert!(found.is_some(), "a written key reads back");
        }
    })
}

async fn read_one(sstable: &SSTable, id: u64) {
    let partition = sstable.read(&position(id), &[ClusteringRange::all()]).await.expect("read");
    assert!(partition.is_some_and(|p| p.rows.len() == 1), "a written key reads back");
}

/// CPU time this thread has used (user and system), from
/// `/proc/thread-self/stat` in clock ticks of 10 ms (Linux's USER_HZ is
/// 100); `None` where that file is missing. Reads on a loaded machine wait
/// for the CPU, which wall time counts and this does not.
fn thread_cpu_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // Fields 14 and 15 (utime, stime); the name before them may hold spaces.
    let mut after_name = stat.rsplit_once(')')?.1.split_whitespace().skip(11);
    let (user, system) = (after_name.next()?.parse::<u64>().ok()?, after_name.next()?.parse::<u64>().ok()?);
    Some((user + system) * 10_000_000)
}

/// Uniform random point reads of ids below `keys` for `config.secs`: mean
/// wall and CPU time per read, reads/s and latency percentiles.
async fn timed_reads(config: &Config, sstable: &SSTable, keys: u64, rng: &mut u64) -> String {
    let mut latency = histogram();
    let cpu_start = thread_cpu_ns();
    let start = Instant::now();
    let deadline = start + config.secs;
    let mut reads = 0u64;
    while Instant::now() < deadline {
        let id = splitmix64(rng) % keys;
        let began = Instant::now();
        read_one(sstable, id).await;
        latency.saturating_record(began.elapsed().as_nanos() as u64);
        reads += 1;
    }
    let elapsed = start.elapsed();
    let cpu = match (cpu_start, thread_cpu_ns()) {
        (Some(from), Some(to)) => format!("{:.0}", (to - from) as f64 / reads.max(1) as f64),
        _ => "?".to_string(),
    };
    format!(
        "{:.0} ns/read ({cpu} ns CPU), {:.0} reads/s (p50 {:.1} µs, p99 {:.1} µs)",
        elapsed.as_nanos() as f64 / reads.max(1) as f64,
        per_s(reads, elapsed),
        latency.value_at_quantile(0.5) as f64 / 1_000.0,
        latency.value_at_quantile(0.99) as f64 / 1_000.0
    )
}
