//! The replica's metrics on this shard: local reads and writes per table
//! with their time, flushes and compaction work as they happen, and at
//! scrape time the sizes the engine already keeps (memtables, SSTables,
//! commitlog). `nodetool tablestats` is built from these.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use hashbrown::HashMap;
use shoal_metrics::{Collector, Counter};
use shoal_schema::SYSTEM_KEYSPACES;
use shoal_storage::commitlog::WriteLatency;
use shoal_storage::compaction::CompactionReport;
use uuid::Uuid;

use crate::database::Database;

/// Local operations on one table, since start.
#[derive(Default)]
struct TableOps {
    reads: Cell<u64>,
    read_us: Cell<u64>,
    writes: Cell<u64>,
    write_us: Cell<u64>,
}

pub(crate) struct ReplicaMetrics {
    /// Looked up on every read and write: foldhash, not SipHash.
    tables: RefCell<HashMap<Uuid, TableOps>>,
    flushes: Rc<Counter>,
    compactions: Rc<Counter>,
    compaction_bytes_read: Rc<Counter>,
    compaction_bytes_written: Rc<Counter>,
}

impl ReplicaMetrics {
    /// Registers this shard's replica metrics; `database` is read at scrape
    /// time.
    pub(crate) fn register(database: fn() -> Rc<Database>) -> ReplicaMetrics {
        shoal_metrics::register_collector(move |out| collect(&database(), out));
        ReplicaMetrics {
            tables: RefCell::new(HashMap::new()),
            flushes: shoal_metrics::counter("shoal_memtable_flushes_total", "Memtable flushes finished.", &[]),
            compactions: shoal_metrics::counter("shoal_compactions_total", "Compactions finished.", &[]),
            compaction_bytes_read: shoal_metrics::counter(
                "shoal_compaction_bytes_read_total",
                "SSTable data bytes read by compactions.",
                &[],
            ),
            compaction_bytes_written: shoal_metrics::counter(
                "shoal_compaction_bytes_written_total",
                "SSTable data bytes written by compactions.",
                &[],
            ),
        }
    }

    pub(crate) fn record_read(&self, table: Uuid, elapsed: Duration) {
        let mut tables = self.tables.borrow_mut();
        let ops = tables.entry(table).or_default();
        ops.reads.set(ops.reads.get() + 1);
        ops.read_us.set(ops.read_us.get() + elapsed.as_micros() as u64);
    }

    pub(crate) fn record_write(&self, table: Uuid, elapsed: Duration) {
        let mut tables = self.tables.borrow_mut();
        let ops = tables.entry(table).or_default();
        ops.writes.set(ops.writes.get() + 1);
        ops.write_us.set(ops.write_us.get() + elapsed.as_micros() as u64);
    }

    pub(crate) fn forget_table(&self, table: Uuid) {
        self.tables.borrow_mut().remove(&table);
    }

    pub(crate) fn record_flush(&self) {
        self.flushes.inc();
    }

    pub(crate) fn record_compaction(&self, report: &CompactionReport) {
        self.compactions.inc();
        self.compaction_bytes_read.add(report.bytes_read);
        self.compaction_bytes_written.add(report.bytes_written);
    }
}

/// The histograms the shard's data commitlog reports its writes' latency
/// into (the side logs of hints and batches do not report).
pub(crate) fn commitlog_write_latency() -> WriteLatency {
    let stage = |stage| {
        shoal_metrics::histogram(
            "shoal_commitlog_write_seconds",
            "Commitlog writes: bytes waiting for the writer (queued), opening a segment (open), a write (write).",
            &[("stage", stage)],
        )
    };
    WriteLatency { queued: stage("queued"), open: stage("open"), write: stage("write") }
}

fn collect(db: &Database, out: &mut Collector) {
    let schema = db.schema();
    let ops = db.metrics.tables.borrow();
    let tables = db.tables();
    let mut user_tables: Vec<_> = tables
        .iter()
        .filter_map(|(id, table)| Some((schema.table_by_id(*id)?, id, table)))
        .filter(|(meta, _, _)| !SYSTEM_KEYSPACES.contains(&meta.keyspace.as_str()))
        .collect();
    user_tables.sort_by(|a, b| (&a.0.keyspace, &a.0.name).cmp(&(&b.0.keyspace, &b.0.name)));
    for (meta, id, table) in user_tables {
        let labels = vec![("keyspace", meta.keyspace.clone()), ("table", meta.name.clone())];
        let sstables = table.sstable_set();
        let gauges: [(&'static str, &'static str, f64); 5] = [
            (
                "shoal_memtable_bytes",
                "Memory held by memtables (active and being flushed).",
                table.memory_used_bytes() as f64,
            ),
            ("shoal_sstables", "Live SSTables.", sstables.len() as f64),
            (
                "shoal_sstable_data_bytes",
                "Bytes of the Data components of live SSTables.",
                sstables.iter().map(|s| s.data_bytes()).sum::<u64>() as f64,
            ),
            (
                "shoal_memtable_partitions",
                "Partitions in memtables (active and being flushed; one in several counts in each).",
                table.memtable_partitions() as f64,
            ),
            (
                "shoal_sstable_partitions",
                "Partitions in live SSTables (a partition in several SSTables counts in each).",
                sstables.iter().map(|s| s.stats().partitions).sum::<u64>() as f64,
            ),
        ];
        for (name, help, value) in gauges {
            out.gauge(name, help, labels.clone(), value);
        }
        let table_ops = ops.get(id);
        let get = |f: fn(&TableOps) -> &Cell<u64>| table_ops.map_or(0, |o| f(o).get());
        let counters: [(&'static str, &'static str, f64); 4] = [
            ("shoal_table_reads_total", "Reads served by this replica.", get(|o| &o.reads) as f64),
            ("shoal_table_read_seconds_total", "Time spent in local reads.", get(|o| &o.read_us) as f64 / 1e6),
            ("shoal_table_writes_total", "Writes applied by this replica.", get(|o| &o.writes) as f64),
            (
                "shoal_table_write_seconds_total",
                "Time spent in local writes (commitlog wait included).",
                get(|o| &o.write_us) as f64 / 1e6,
            ),
        ];
        for (name, help, value) in counters {
            out.counter(name, help, labels.clone(), value);
        }
        collect_cache(table, &labels, out);
    }
    collect_memory(out);
    if let Some(log) = db.commitlog.borrow().as_ref() {
        out.counter(
            "shoal_commitlog_appended_bytes_total",
            "Bytes appended to the commitlog.",
            Vec::new(),
            log.appended_bytes() as f64,
        );
        out.counter("shoal_commitlog_syncs_total", "fdatasyncs of commitlog segments.", Vec::new(), log.syncs() as f64);
        out.counter(
            "shoal_commitlog_writes_total",
            "Commitlog segment writes (each writes the entries appended since the last).",
            Vec::new(),
            log.writes() as f64,
        );
        out.gauge(
            "shoal_commitlog_disk_bytes",
            "Bytes of commitlog segments on disk.",
            Vec::new(),
            log.disk_bytes() as f64,
        );
    }
}

/// The table's row cache on this shard.
fn collect_cache(table: &shoal_storage::Table, labels: &[(&'static str, String)], out: &mut Collector) {
    let stats = table.cache_stats();
    let counters: [(&'static str, &'static str, u64); 4] = [
        ("shoal_cache_hits_total", "Reads of partitions the row cache held.", stats.hits),
        ("shoal_cache_misses_total", "Reads of partitions the row cache did not hold.", stats.misses),
        ("shoal_cache_insertions_total", "Partitions put in the row cache (by reads and flushes).", stats.insertions),
        ("shoal_cache_evictions_total", "Partitions evicted from the row cache for memory.", stats.evictions),
    ];
    for (name, help, value) in counters {
        out.counter(name, help, labels.to_vec(), value as f64);
    }
    out.gauge(
        "shoal_cache_partitions",
        "Partitions in the row cache (known-absent ones included).",
        labels.to_vec(),
        stats.partitions as f64,
    );
    out.gauge("shoal_cache_bytes", "Bytes of the row cache's entries.", labels.to_vec(), stats.bytes as f64);
}

/// The shard's memory budget and what holds it, and the index cache.
fn collect_memory(out: &mut Collector) {
    let memory = shoal_storage::memory::report();
    if memory.budget_bytes != usize::MAX {
        out.gauge(
            "shoal_memory_budget_bytes",
            "This shard's share of --memory.",
            Vec::new(),
            memory.budget_bytes as f64,
        );
    }
    let parts = [
        ("memtables", memory.memtable_bytes),
        ("cache", memory.cache_bytes),
        ("index_cache", memory.index_cache_bytes),
        ("sstable_metadata", memory.sstable_metadata_bytes),
        ("memcache_items", memory.items_index_bytes),
    ];
    for (kind, bytes) in parts {
        out.gauge(
            "shoal_memory_used_bytes",
            "Memory held, by what holds it.",
            vec![("kind", kind.to_string())],
            bytes as f64,
        );
    }
    let index = shoal_storage::sstable::index_cache::stats();
    out.counter(
        "shoal_index_cache_hits_total",
        "Partition-index pages found in memory.",
        Vec::new(),
        index.hits as f64,
    );
    out.counter(
        "shoal_index_cache_misses_total",
        "Partition-index pages read from disk.",
        Vec::new(),
        index.misses as f64,
    );
    out.gauge("shoal_index_cache_pages", "Partition-index pages held.", Vec::new(), index.pages as f64);
    out.gauge("shoal_index_cache_capacity_bytes", "The index cache's limit.", Vec::new(), index.capacity_bytes as f64);
}
