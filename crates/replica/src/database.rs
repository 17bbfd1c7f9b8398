//! The shard-local database: schema copy, tables, commitlog, schema-change
//! listeners — and when memtables are flushed and SSTables compacted.
//!
//! Until [`Database::open_storage`] runs (at start, before clients), the
//! database keeps data in memtables only; after it, every write to a table
//! of a keyspace with `durable_writes` goes to the commitlog first.
//!
//! Memory: when the active memtables of the shard pass half the memtable
//! budget, the largest is flushed; when active and flushing memtables
//! together reach the whole budget, writes wait for a flush to finish
//! (back-pressure, never an error).

use std::cell::Ref;
use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::future::Future;
use std::ops::Bound;
use std::path::PathBuf;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use shoal_runtime::sched::in_group;
use shoal_runtime::Group;
use shoal_schema::token::murmur3_token;
use shoal_schema::{Schema, SchemaChange, TableMeta};
use shoal_storage::background_metrics::{record_flush_step, FlushStep};
use shoal_storage::commitlog::{
    encode_mutation, encode_received_mutation, encode_row_mutation, encode_tombstone_mutation, CommitLog,
    CommitLogConfig, Position, SyncMode,
};
use shoal_storage::compaction::strategy::Strategy;
use shoal_storage::sstable::compression::Compression;
use shoal_storage::sstable::writer::WriterOptions;
use shoal_storage::{
    ClusteringRange, Event, Partition, PartitionPosition, PartitionUpdate, RowCells, StorageError, Table, TableOptions,
    Tombstone,
};
use thiserror::Error;
use uuid::Uuid;

use crate::counter_leader;
use crate::item::Tokens;
use crate::item_access::ItemAccessTable;
use crate::item_cas::CasUniques;
use crate::item_lru::ItemLru;
use crate::list_ops::{self, ListOp};
use crate::metrics::ReplicaMetrics;
use crate::mutation::Mutation;
use crate::partition_lock::{PartitionGuard, PartitionLocks};
use crate::paxos::{self, PAXOS_TABLE};
use crate::read::{self, PartitionSelection, ReadCommand, ReadResult};
use crate::share_control::StaticShares;
use crate::top_partitions::{Sampler, TopPartitions};
use crate::view_update::{self, View};
use crate::write_gate::WriteGate;

#[derive(Debug, Error)]
pub enum ReplicaError {
    #[error("table {0} does not exist (it may have been dropped)")]
    NoSuchTable(Uuid),
    #[error("corrupt stored value: {0}")]
    Corrupt(String),
    /// A partition position whose token is not its key's (a bug in, or
    /// bytes damaged on the way from, whoever sent it): refused, as it
    /// would be filed where no read finds it.
    #[error("partition token {token} is not its key's token {key_token}")]
    WrongToken { token: i64, key_token: i64 },
    /// The request cannot apply to the data as it is (e.g. a list index
    /// past the end).
    #[error("{0}")]
    Invalid(String),
    /// Too much work is queued on this shard; the client may retry later.
    #[error("{0}")]
    Overloaded(String),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Where and how a shard keeps its data.
#[derive(Debug, Clone)]
pub struct StorageConfig {
    pub data_dir: PathBuf,
    pub commitlog_dir: PathBuf,
    pub sync: SyncMode,
    pub segment_size_bytes: u32,
    /// This shard's share of `commitlog_total_space_in_mb`.
    pub commitlog_space_bytes: u64,
    /// This shard's memtable budget.
    pub memtable_budget_bytes: usize,
    /// This shard's share of `--memory`: memtables, row cache, index
    /// cache and SSTable metadata together (`shoal_storage::memory`).
    pub memory_budget_bytes: usize,
    /// The index cache's share of the half of the budget memtables leave.
    pub index_cache_fraction: f64,
    /// Where the row cache's hot keys are saved for a warm restart.
    pub saved_caches_dir: PathBuf,
    /// How often they are saved; `None`: never.
    pub cache_save_period: Option<Duration>,
    /// This shard's share of `in_memory_storage_size_mb`: what its
    /// `in_memory` tables may hold, in memtables and cache together.
    pub in_memory_limit_bytes: usize,
    /// Fixed shares in place of the backlog controllers (contrast
    /// benchmarks only).
    pub static_shares: StaticShares,
}

/// A write [`Database::log_and_apply`] logs and applies.
pub(crate) enum Write<'a> {
    Partition(PartitionUpdate),
    /// A partition received from its coordinator with its encoding as it
    /// came, which the commitlog takes as it is.
    Received {
        update: PartitionUpdate,
        encoded: &'a [u8],
    },
    /// A single row held compact as its cells lie (a memcached `set`).
    Row(RowCells<'a>),
    /// A partition tombstone alone (a memcached `delete`), held as such;
    /// its key copied only where a new memtable slot keeps it.
    Tombstone(Tombstone),
}

impl Write<'_> {
    /// What its commitlog entry holds twice (a memcached row: nothing).
    fn repeated_key_bytes(&self) -> usize {
        match self {
            Write::Partition(update) | Write::Received { update, .. } => update.repeated_key_bytes(),
            Write::Row(_) | Write::Tombstone(_) => 0,
        }
    }
}

/// What a write applied with [`Database::apply_unsynced`] waits for before
/// it is answered: its commitlog entry on disk under `commitlog_sync:
/// batch`, in the file under `periodic` (`CommitLog::wait_durable`);
/// nothing for an unlogged write.
#[derive(Default)]
#[must_use = "a write is answered only once it is durable"]
pub(crate) struct Durability {
    until: Option<(Rc<CommitLog>, Position)>,
}

impl Durability {
    /// The later of two writes' waits (entries of one log become durable
    /// in order).
    pub(crate) fn and(self, other: Durability) -> Durability {
        match (&self.until, &other.until) {
            (Some((_, a)), Some((_, b))) if a >= b => self,
            (Some(_), None) => self,
            _ => other,
        }
    }

    pub(crate) async fn durable(self) -> Result<(), ReplicaError> {
        if let Some((log, end)) = self.until {
            log.wait_durable(end).await?;
        }
        Ok(())
    }
}

/// Told about every schema change this shard applies (e.g. connections
/// registered for SCHEMA_CHANGE events).
pub type SchemaListener = Box<dyn Fn(&SchemaChange)>;

/// Delivers index view updates (made by a write to the base partition of
/// the given token) to the replicas of the views (the coordinator's,
/// registered at start): a base write is answered once its
/// view updates were delivered or, where a view replica is unreachable,
/// kept as hints. Without one (tests of this crate alone), view updates
/// apply on this node through [`Database::apply_view_updates`].
pub type ViewSink = Rc<dyn Fn(i64, Vec<Mutation>) -> Pin<Box<dyn Future<Output = ()>>>>;

pub struct Database {
    schema: RefCell<Arc<Schema>>,
    /// Looked up on every request: foldhash, not SipHash.
    tables: RefCell<hashbrown::HashMap<Uuid, Rc<Table>>>,
    listeners: RefCell<Vec<(u64, SchemaListener)>>,
    next_listener_id: Cell<u64>,
    pub(crate) storage: RefCell<Option<StorageConfig>>,
    pub(crate) commitlog: RefCell<Option<Rc<CommitLog>>>,
    /// Tables of keyspaces with `durable_writes = false`: not logged.
    unlogged: RefCell<HashSet<Uuid>>,
    /// Tables with views (secondary indexes, materialized views): their
    /// writes read before they write and update the views. A set, so the
    /// check on every write is one lookup, not a walk of the schema.
    with_views: RefCell<HashSet<Uuid>>,
    /// Writes under way, by the schema they chose their views from.
    write_gate: WriteGate,
    /// Tables with a flush under way.
    flushing: RefCell<HashSet<Uuid>>,
    /// Memtable memory was freed (a flush finished).
    memory_freed: Event,
    compaction_wanted: Event,
    /// Tables whose strategy's compactions are off (nodetool
    /// disableautocompaction; see `compaction_control`).
    pub(crate) auto_compaction_off: RefCell<HashSet<Uuid>>,
    /// Partitions with a conditional write under way.
    partition_locks: Rc<PartitionLocks>,
    /// memcached's per-item hints (last access, fetched, stale, token).
    pub(crate) item_access: ItemAccessTable,
    /// memcached items in least-recently-used order, for eviction.
    pub(crate) item_lru: ItemLru,
    /// The CAS uniques this shard gives memcached items.
    pub(crate) item_cas: CasUniques,
    pub(crate) metrics: ReplicaMetrics,
    /// The sampling of nodetool toppartitions, while one runs.
    top_partitions: RefCell<Option<Sampler>>,
    view_sink: RefCell<Option<ViewSink>>,
}

thread_local! {
    static LOCAL: Rc<Database> = Rc::new(Database::new());
}

/// This shard's database.
pub fn local() -> Rc<Database> {
    LOCAL.with(Rc::clone)
}

/// How a table is stored, from its schema options.
pub(crate) fn table_options(meta: &TableMeta) -> TableOptions {
    let o = &meta.options;
    let chunk_kb = o.compression.get("chunk_length_in_kb").and_then(|v| v.parse::<usize>().ok()).unwrap_or(16);
    TableOptions {
        writer: WriterOptions {
            compression: Compression::from_options(&o.compression),
            chunk_bytes: chunk_kb.clamp(4, 1024) * 1024,
            bloom_fp_chance: o.bloom_filter_fp_chance,
        },
        strategy: Strategy::from_options(&o.compaction),
        gc_grace_s: i64::from(o.gc_grace_seconds),
        cache: caching_enabled(&o.caching) || o.in_memory,
        in_memory: o.in_memory,
        dropped_columns: meta.dropped_columns.values().map(|d| (d.id, d.dropped_at_us)).collect(),
    }
}

/// ScyllaDB's reading of the `caching` option: the row cache is on unless
/// `'enabled': 'false'` (Cassandra's `keys` and `rows_per_partition` are
/// kept and shown but do not turn it off).
fn caching_enabled(caching: &std::collections::BTreeMap<String, String>) -> bool {
    caching.get("enabled").is_none_or(|v| !v.trim().eq_ignore_ascii_case("false"))
}

impl Database {
    fn new() -> Database {
        Database {
            schema: RefCell::new(Arc::new(Schema::empty())),
            tables: RefCell::new(hashbrown::HashMap::from([(
                PAXOS_TABLE,
                Rc::new(Table::new(PathBuf::new(), shoal_runtime::this_shard(), paxos::table_options())),
            )])),
            listeners: RefCell::new(Vec::new()),
            next_listener_id: Cell::new(0),
            storage: RefCell::new(None),
            commitlog: RefCell::new(None),
            unlogged: RefCell::new(HashSet::new()),
            with_views: RefCell::new(HashSet::new()),
            write_gate: WriteGate::default(),
            flushing: RefCell::new(HashSet::new()),
            memory_freed: Event::default(),
            compaction_wanted: Event::default(),
            auto_compaction_off: RefCell::new(HashSet::new()),
            partition_locks: Rc::default(),
            item_access: ItemAccessTable::default(),
            item_lru: ItemLru::default(),
            item_cas: CasUniques::for_this_shard(),
            metrics: ReplicaMetrics::register(local),
            top_partitions: RefCell::new(None),
            view_sink: RefCell::new(None),
        }
    }

    pub fn schema(&self) -> Arc<Schema> {
        Arc::clone(&self.schema.borrow())
    }

    /// The directory of a table's SSTables (shared by all shards; file
    /// names carry the shard).
    pub(crate) fn table_dir(&self, meta: &TableMeta) -> PathBuf {
        match &*self.storage.borrow() {
            Some(config) => config.data_dir.join(&meta.keyspace).join(format!("{}-{}", meta.name, meta.id.simple())),
            None => PathBuf::new(),
        }
    }

    /// The file by which this shard records that it built the view held
    /// in table `view` (in that table's directory, where opening SSTables
    /// ignores it); `None` before storage is open.
    pub fn view_built_marker(&self, view: &TableMeta) -> Option<PathBuf> {
        let built = format!("view-built-shard{}", shoal_runtime::this_shard());
        self.storage.borrow().is_some().then(|| self.table_dir(view).join(built))
    }

    /// Installs a new schema snapshot: creates storage for new tables, drops
    /// it for removed ones, then tells the listeners about `change`.
    pub fn set_schema(&self, schema: Arc<Schema>, change: Option<&SchemaChange>) {
        let schema = Arc::new(schema.unshared().indexed());
        {
            let mut tables = self.tables.borrow_mut();
            tables.retain(|id, table| {
                let keep = *id == PAXOS_TABLE || schema.table_by_id(*id).is_some();
                if !keep {
                    table.drop_data();
                    self.item_lru.cleared(*id);
                    self.metrics.forget_table(*id);
                }
                keep
            });
            for meta in schema.tables() {
                match tables.get(&meta.id) {
                    Some(table) => table.set_options(table_options(meta)),
                    None => {
                        let table = Table::new(self.table_dir(meta), shoal_runtime::this_shard(), table_options(meta));
                        tables.insert(meta.id, Rc::new(table));
                    }
                }
            }
        }
        *self.unlogged.borrow_mut() = schema
            .keyspaces
            .values()
            .filter(|k| !k.durable_writes)
            .flat_map(|k| k.tables.values().map(|t| t.id))
            .collect();
        *self.with_views.borrow_mut() = schema
            .keyspaces
            .values()
            .flat_map(|k| k.tables.values().filter(|t| !view_update::base_views(&schema, t).is_empty()).map(|t| t.id))
            .collect();
        // Each service level's CPU scheduling group on this shard, before
        // a request can resolve its role's level in the new schema.
        let levels =
            schema.roles.service_levels.iter().map(|(name, level)| (name.as_str(), level.shares.unsigned_abs()));
        shoal_runtime::sched::set_service_levels(levels);
        *self.schema.borrow_mut() = schema;
        self.write_gate.schema_changed();
        if let Some(change) = change {
            for (_, listener) in self.listeners.borrow().iter() {
                listener(change);
            }
        }
    }

    /// Registers `listener`; the returned id removes it.
    pub fn add_schema_listener(&self, listener: SchemaListener) -> u64 {
        let id = self.next_listener_id.get();
        self.next_listener_id.set(id + 1);
        self.listeners.borrow_mut().push((id, listener));
        id
    }

    pub fn remove_schema_listener(&self, id: u64) {
        self.listeners.borrow_mut().retain(|(i, _)| *i != id);
    }

    pub(crate) fn table(&self, id: Uuid) -> Result<Rc<Table>, ReplicaError> {
        self.tables.borrow().get(&id).cloned().ok_or(ReplicaError::NoSuchTable(id))
    }

    pub(crate) fn replace_table(&self, id: Uuid, table: Table) {
        self.tables.borrow_mut().insert(id, Rc::new(table));
    }

    pub(crate) fn tables(&self) -> Ref<'_, hashbrown::HashMap<Uuid, Rc<Table>>> {
        self.tables.borrow()
    }

    pub(crate) fn table_ids(&self) -> Vec<Uuid> {
        self.tables.borrow().keys().copied().collect()
    }

    /// Applies `update`, after adding the cells of list operations that
    /// depend on the partition's current contents. With `batch` commitlog
    /// sync, returns once the write is on disk.
    ///
    /// A write with such operations reads before it writes, and the read
    /// may await SSTable I/O: it holds the partition's lock meanwhile, so
    /// two of them (or one and a conditional write) cannot interleave and
    /// lose an update (`SET u.a = 1` beside `SET u.b = 2` on one row).
    pub async fn apply(
        &self,
        table_id: Uuid,
        position: PartitionPosition,
        update: PartitionUpdate,
        list_ops: &[ListOp],
    ) -> Result<(), ReplicaError> {
        if list_ops.is_empty() && !self.has_views(table_id) {
            return self.apply_holding_lock(table_id, position, update, list_ops).await;
        }
        // Boxed, as every path with a read before the write: inline, its
        // state (the lock's wait, the read, the views' updates) would size
        // every write's future, which callers box and move whole.
        Box::pin(async move {
            let _guard = self.lock_partition(table_id, position.clone()).await?;
            self.apply_holding_lock(table_id, position, update, list_ops).await
        })
        .await
    }

    /// [`Database::apply`] of a write received from its coordinator, with
    /// `encoded`, its partition's encoding as it came (what decodes to
    /// `update`): logged as those bytes, not encoded again. A write with
    /// list operations, or to a table with views, is applied as any other.
    pub async fn apply_received(
        &self,
        table_id: Uuid,
        position: PartitionPosition,
        update: PartitionUpdate,
        list_ops: &[ListOp],
        encoded: &[u8],
    ) -> Result<(), ReplicaError> {
        if !list_ops.is_empty() || self.has_views(table_id) {
            // Boxed (see `apply`): this future is what a replica's handler
            // boxes for every write it receives.
            return Box::pin(self.apply(table_id, position, update, list_ops)).await;
        }
        let started = Instant::now();
        let ticket = self.write_gate.enter();
        self.note_top_write(table_id, position.token, &position.key);
        check_token(&position)?;
        let table = self.table(table_id)?;
        self.check_in_memory_room(table_id, &table)?;
        self.wait_for_memtable_space().await;
        let durability = self.log_and_apply(table_id, &table, position, Write::Received { update, encoded })?;
        drop(ticket);
        durability.durable().await?;
        self.metrics.record_write(table_id, started.elapsed());
        Ok(())
    }

    /// [`Database::apply`] for a caller that holds the partition's lock
    /// already when `list_ops` is not empty or the table has views (a
    /// conditional write).
    pub(crate) async fn apply_holding_lock(
        &self,
        table_id: Uuid,
        position: PartitionPosition,
        update: PartitionUpdate,
        list_ops: &[ListOp],
    ) -> Result<(), ReplicaError> {
        if self.has_views(table_id) {
            // Boxed (see `apply`).
            return Box::pin(self.apply_with_views(table_id, position, update, list_ops)).await;
        }
        let started = Instant::now();
        let ticket = self.write_gate.enter();
        self.note_top_write(table_id, position.token, &position.key);
        let durability = self.apply_unsynced(table_id, position, update, list_ops).await?;
        // Landed: a view build or a view write waits no longer for it.
        drop(ticket);
        durability.durable().await?;
        self.metrics.record_write(table_id, started.elapsed());
        Ok(())
    }

    /// [`Database::apply_holding_lock`] of a write to a table with views:
    /// read before the write, and the views' updates delivered.
    async fn apply_with_views(
        &self,
        table_id: Uuid,
        position: PartitionPosition,
        mut update: PartitionUpdate,
        list_ops: &[ListOp],
    ) -> Result<(), ReplicaError> {
        let started = Instant::now();
        let ticket = self.write_gate.enter();
        self.note_top_write(table_id, position.token, &position.key);
        let schema = self.schema();
        let meta = schema.table_by_id(table_id).ok_or(ReplicaError::NoSuchTable(table_id))?;
        let views = view_update::base_views(&schema, meta);
        // Read before write, once for the list operations and the views,
        // once no write that skipped these views can still land here.
        check_token(&position)?;
        ticket.settle().await;
        let table = self.table(table_id)?;
        let ranges = match list_ops.is_empty() {
            true => view_update::affected_ranges(&update),
            false => vec![ClusteringRange::all()],
        };
        // Boxed: a read's state (memtables, row cache, SSTables) is kilobytes,
        // and inline every write's future carried it, copied at each move.
        let before = Box::pin(table.read(&position, &ranges)).await?;
        list_ops::resolve(meta, before.as_ref(), list_ops, &mut update)?;
        let now_s = shoal_runtime::clock::now_s();
        let view_updates = view_update::compute(meta, &views, &position, before.as_ref(), &update, now_s);
        let token = position.token;
        let durability = self.apply_unsynced(table_id, position, update, &[]).await?;
        drop(ticket);
        durability.durable().await?;
        self.deliver_view_updates(token, view_updates).await?;
        self.metrics.record_write(table_id, started.elapsed());
        Ok(())
    }

    /// Whether writes to `table_id` update views.
    fn has_views(&self, table_id: Uuid) -> bool {
        self.with_views.borrow().contains(&table_id)
    }

    /// Registers the coordinator's delivery of view updates.
    pub fn set_view_sink(&self, sink: ViewSink) {
        *self.view_sink.borrow_mut() = Some(sink);
    }

    /// Sends `updates`, made by a write to the base partition at
    /// `base_token`, to their views' replicas (see [`ViewSink`]).
    pub async fn deliver_view_updates(&self, base_token: i64, updates: Vec<Mutation>) -> Result<(), ReplicaError> {
        if updates.is_empty() {
            return Ok(());
        }
        let sink = self.view_sink.borrow().clone();
        match sink {
            Some(sink) => {
                sink(base_token, updates).await;
                Ok(())
            }
            None => self.apply_view_updates(updates).await,
        }
    }

    /// Applies view updates on this shard (view tables have no indexes of
    /// their own, so this never recurses).
    pub async fn apply_view_updates(&self, updates: Vec<Mutation>) -> Result<(), ReplicaError> {
        for Mutation { table, position, update, .. } in updates {
            self.apply_unsynced(table, position, update, &[]).await?.durable().await?;
        }
        Ok(())
    }

    /// The views of table `base_id` (indexes, materialized views) with
    /// the tables holding them.
    pub fn base_views(&self, base_id: Uuid) -> Vec<View> {
        let schema = self.schema();
        schema.table_by_id(base_id).map_or_else(Vec::new, |meta| view_update::base_views(&schema, meta))
    }

    /// One step of building view `view` of table `base_id` on this shard:
    /// the view updates of up to `max_partitions` partitions after `from`
    /// (each with its base partition's token), and the last partition read
    /// (`None` once the table is read through). The first step reads only
    /// once every write that started before the view existed has landed
    /// (see [`crate::write_gate`]).
    #[allow(clippy::type_complexity)]
    pub async fn view_build_step(
        &self,
        base_id: Uuid,
        view: &View,
        from: Bound<&PartitionPosition>,
        max_partitions: usize,
    ) -> Result<(Vec<(i64, Vec<Mutation>)>, Option<PartitionPosition>), ReplicaError> {
        if from == Bound::Unbounded {
            self.write_gate.settle().await;
        }
        let schema = self.schema();
        let meta = schema.table_by_id(base_id).ok_or(ReplicaError::NoSuchTable(base_id))?;
        let table = self.table(base_id)?;
        let batch = table.scan(from, Bound::Unbounded, &[ClusteringRange::all()], max_partitions).await?;
        let now_s = shoal_runtime::clock::now_s();
        let updates = batch
            .iter()
            .map(|(position, partition)| (position.token, view_update::build(meta, view, position, partition, now_s)))
            .filter(|(_, updates)| !updates.is_empty())
            .collect();
        let last = match batch.len() == max_partitions {
            true => batch.last().map(|(position, _)| position.clone()),
            false => None,
        };
        Ok((updates, last))
    }

    /// Leads a counter write (`crate::counter_leader`): turns `update`'s
    /// counter deltas into this replica's (`leader`'s) grown shards under
    /// the partition's lock and applies that; returns a copy of it for the
    /// other replicas when there are any (`for_replicas`).
    pub async fn lead_counter_update(
        &self,
        table_id: Uuid,
        position: PartitionPosition,
        mut update: PartitionUpdate,
        leader: u128,
        for_replicas: bool,
    ) -> Result<Option<PartitionUpdate>, ReplicaError> {
        check_token(&position)?;
        let _guard = self.lock_partition(table_id, position.clone()).await?;
        let current = self.table(table_id)?.read(&position, &counter_leader::rows_read(&update)).await?;
        counter_leader::lead(current.as_ref(), &mut update, leader)?;
        let copy = for_replicas.then(|| update.clone());
        self.apply_holding_lock(table_id, position, update, &[]).await?;
        Ok(copy)
    }

    /// Applies a streamed partition (a node operation moving data here)
    /// to the memtable without logging it: the stream's caller flushes
    /// once it is done, and a stream cut short is streamed again, so the
    /// commitlog would only cost the copy.
    pub async fn apply_streamed(
        &self,
        table_id: Uuid,
        position: PartitionPosition,
        update: PartitionUpdate,
    ) -> Result<(), ReplicaError> {
        check_token(&position)?;
        let table = self.table(table_id)?;
        self.check_in_memory_room(table_id, &table)?;
        self.wait_for_memtable_space().await;
        table.apply_streamed(position, update);
        self.maybe_flush();
        Ok(())
    }

    /// Logs and applies a write without waiting for the log to be on disk:
    /// the caller awaits [`Durability::durable`] before answering, once for
    /// a run of writes (a memcached pipeline) rather than once per write.
    /// A caller reading before it writes holds the partition's lock.
    pub(crate) async fn apply_unsynced(
        &self,
        table_id: Uuid,
        position: PartitionPosition,
        mut update: PartitionUpdate,
        list_ops: &[ListOp],
    ) -> Result<Durability, ReplicaError> {
        check_token(&position)?;
        let table = self.table(table_id)?;
        self.check_in_memory_room(table_id, &table)?;
        if !list_ops.is_empty() {
            // Boxed, as the read before a write with views.
            let current = Box::pin(table.read(&position, &[ClusteringRange::all()])).await?;
            let schema = self.schema();
            let meta = schema.table_by_id(table_id).ok_or(ReplicaError::NoSuchTable(table_id))?;
            list_ops::resolve(meta, current.as_ref(), list_ops, &mut update)?;
        }
        self.wait_for_memtable_space().await;
        self.log_and_apply(table_id, &table, position, Write::Partition(update))
    }

    /// [`Database::apply_unsynced`] (no list operations) at once, for a
    /// caller that found room in the memtables
    /// ([`Database::has_memtable_room`]) with no await since: a memcached
    /// write decided from a read of memory lands with no await between its
    /// read and its write, so it needs no partition lock to be atomic. A
    /// single row given as its cells (`Write::Row`, a memcached `set`) is
    /// logged and held compact as they lie, no `Partition` built. `table`
    /// is `table_id`'s, which the caller looked up to read it; `position`'s
    /// token is checked unless this node hashed it ([`Tokens::Hashed`]).
    pub(crate) fn apply_now(
        &self,
        table: &Table,
        table_id: Uuid,
        position: PartitionPosition,
        write: Write<'_>,
        tokens: Tokens,
    ) -> Result<Durability, ReplicaError> {
        debug_assert!(self.has_memtable_room(), "the caller checked for room, with no await since");
        match tokens {
            Tokens::Received => check_token(&position)?,
            Tokens::Hashed => debug_assert!(check_token(&position).is_ok(), "a token hashed here is its key's"),
        }
        self.check_in_memory_room(table_id, table)?;
        self.log_and_apply(table_id, table, position, write)
    }

    /// Logs `write` (unless its table is unlogged) and applies it to the
    /// memtable, for a caller that found room for it
    /// ([`Database::wait_for_memtable_space`]).
    fn log_and_apply(
        &self,
        table_id: Uuid,
        table: &Table,
        position: PartitionPosition,
        write: Write<'_>,
    ) -> Result<Durability, ReplicaError> {
        let log = self.commitlog.borrow().clone().filter(|_| !self.unlogged.borrow().contains(&table_id));
        let logged = match &log {
            Some(log) => Some(log.append_repeating(write.repeated_key_bytes(), |out| match &write {
                Write::Partition(update) => encode_mutation(out, table_id, &position, update),
                Write::Received { update, encoded } => {
                    encode_received_mutation(out, table_id, &position, update, encoded)
                }
                Write::Row(row) => encode_row_mutation(out, table_id, &position, row),
                Write::Tombstone(tombstone) => encode_tombstone_mutation(out, table_id, &position, *tombstone),
            })?),
            None => None,
        };
        // No await between the append and the memtable: memtables and
        // commitlog positions stay in the same order.
        let at = logged.map(|(at, _)| at);
        match write {
            Write::Partition(update) | Write::Received { update, .. } => table.apply(position, update, at),
            Write::Row(row) => table.apply_row(position, &row, at),
            Write::Tombstone(tombstone) => table.apply_tombstone(position, tombstone, at),
        }
        self.maybe_flush();
        let (Some(log), Some((_, end))) = (log, logged) else { return Ok(Durability::default()) };
        if log.disk_bytes() > self.storage.borrow().as_ref().map_or(u64::MAX, |c| c.commitlog_space_bytes) {
            self.flush_oldest_segment_holders(&log);
        }
        Ok(Durability { until: Some((log, end)) })
    }

    /// Refuses a write to an `in_memory` table whose data on this shard has
    /// reached the shard's share of `in_memory_storage_size_mb`.
    fn check_in_memory_room(&self, table_id: Uuid, table: &Table) -> Result<(), ReplicaError> {
        if !table.in_memory() {
            return Ok(());
        }
        let Some(limit) = self.storage.borrow().as_ref().map(|c| c.in_memory_limit_bytes) else { return Ok(()) };
        let held = table.cache_stats().bytes as usize + table.memory_used_bytes();
        if held < limit {
            return Ok(());
        }
        let name = self.schema().table_by_id(table_id).map(|t| format!("{}.{}", t.keyspace, t.name));
        Err(ReplicaError::Invalid(format!(
            "in-memory table {} holds {} MiB on shard {}, its share of in_memory_storage_size_mb ({} MiB per shard): \
             raise in_memory_storage_size_mb, delete data, or ALTER the table WITH in_memory = false",
            name.unwrap_or_else(|| table_id.to_string()),
            held >> 20,
            shoal_runtime::this_shard(),
            limit >> 20
        )))
    }

    /// Waits until no other conditional write holds the partition, then
    /// holds it until the guard drops: a read-check-write under the guard is
    /// atomic against every other conditional write to the partition.
    pub async fn lock_partition(
        &self,
        table: Uuid,
        position: PartitionPosition,
    ) -> Result<PartitionGuard, ReplicaError> {
        self.partition_locks.lock(table, position).await
    }

    /// Whether a write holds (or waits for) the partition's lock: one that
    /// would write without it must not land inside that write's
    /// read-modify-write.
    pub(crate) fn partition_locked(&self, table: Uuid, position: &PartitionPosition) -> bool {
        self.partition_locks.is_held(table, position)
    }

    pub async fn query(&self, command: &ReadCommand) -> Result<ReadResult, ReplicaError> {
        if let PartitionSelection::Keys(keys) = &command.partitions {
            keys.iter().try_for_each(check_token)?;
            keys.iter().for_each(|k| self.note_top_read(command.table, k.token, &k.key));
        }
        let schema = self.schema();
        let meta = schema.table_by_id(command.table).ok_or(ReplicaError::NoSuchTable(command.table))?;
        let table = self.table(command.table)?;
        let started = Instant::now();
        let result = read::execute(meta, &table, command).await;
        self.metrics.record_read(command.table, started.elapsed());
        result
    }

    /// The stored partitions at `keys` as they are — tombstones and
    /// timestamps kept, limited to `clustering` — for reconciling replicas
    /// that answered differently (read repair); `None` where none is held.
    /// Up to `max_partitions` stored partitions of `table_id` between
    /// `from` and `to` on this shard, in ring order, as they are
    /// (tombstones and timestamps kept): what streaming sends.
    pub async fn scan_raw(
        &self,
        table_id: Uuid,
        from: Bound<&PartitionPosition>,
        to: Bound<&PartitionPosition>,
        max_partitions: usize,
    ) -> Result<Vec<(PartitionPosition, Partition)>, ReplicaError> {
        let table = self.table(table_id)?;
        Ok(table.scan(from, to, &[ClusteringRange::all()], max_partitions).await?)
    }

    pub async fn read_raw(
        &self,
        table_id: Uuid,
        keys: &[PartitionPosition],
        clustering: &[ClusteringRange],
    ) -> Result<Vec<Option<Partition>>, ReplicaError> {
        let table = self.table(table_id)?;
        let mut partitions = Vec::with_capacity(keys.len());
        for key in keys {
            check_token(key)?;
            partitions.push(table.read(key, clustering).await?);
        }
        Ok(partitions)
    }

    /// Removes every row of the table on this shard.
    pub async fn truncate(&self, table_id: Uuid) -> Result<(), ReplicaError> {
        let table = self.table(table_id)?;
        table.truncate(self.log_position()).await?;
        self.item_lru.cleared(table_id);
        self.memory_freed.notify_all();
        Ok(())
    }

    /// Memory held by the memtables of this shard.
    pub(crate) fn memtable_bytes(&self) -> usize {
        self.tables.borrow().values().map(|t| t.memory_used_bytes()).sum()
    }

    pub(crate) fn memtable_budget_bytes(&self) -> Option<usize> {
        self.storage.borrow().as_ref().map(|c| c.memtable_budget_bytes)
    }

    /// Where the next commitlog entry goes (or the start, without a log).
    fn log_position(&self) -> Position {
        self.commitlog.borrow().as_ref().map_or(Position::ZERO, |log| log.current_position())
    }

    pub(crate) async fn wait_for_memtable_space(&self) {
        while !self.has_memtable_room() {
            self.memory_freed.wait().await;
        }
    }

    /// Whether a write may go to the memtables now: they are under their
    /// budget, or no flush is under way to free any.
    pub(crate) fn has_memtable_room(&self) -> bool {
        let Some(budget) = self.memtable_budget_bytes() else { return true };
        // The cheap test first: this runs on every write.
        self.flushing.borrow().is_empty() || self.memtable_bytes() < budget
    }

    /// Starts a flush of the largest memtable once the active memtables
    /// pass half the budget.
    fn maybe_flush(&self) {
        let Some(budget) = self.memtable_budget_bytes() else { return };
        // All memtables hold at least what the active ones do: most writes
        // stop here without summing every table's.
        if shoal_storage::memory::memtable_bytes() < budget / 2 {
            return;
        }
        let tables = self.tables.borrow();
        let active: usize = tables.values().map(|t| t.active_memtable_bytes()).sum();
        if active < budget / 2 {
            return;
        }
        // The largest memtable frees the most. If it is already being
        // flushed, wait for that: flushing the next largest instead (a
        // system table's few bytes, at every write) frees nothing and
        // writes tiny SSTables.
        let Some((id, table)) = tables.iter().max_by_key(|(_, t)| t.active_memtable_bytes()) else { return };
        if table.active_memtable_bytes() == 0 || self.flushing.borrow().contains(id) {
            return;
        }
        let id = *id;
        drop(tables);
        self.spawn_flush(id);
    }

    /// Flushes the tables whose memtables hold the oldest commitlog segment,
    /// so it can be deleted (the log is over its space limit).
    fn flush_oldest_segment_holders(&self, log: &CommitLog) {
        let oldest = log.oldest_segment();
        let holders: Vec<Uuid> = self
            .tables
            .borrow()
            .iter()
            .filter(|(_, t)| t.first_logged().is_some_and(|p| p.segment <= oldest))
            .map(|(id, _)| *id)
            .collect();
        for id in holders {
            self.spawn_flush(id);
        }
    }

    fn spawn_flush(&self, id: Uuid) {
        if !self.flushing.borrow_mut().insert(id) {
            return;
        }
        shoal_runtime::spawn(async move {
            let db = local();
            if let Err(e) = db.flush_table(id).await {
                tracing::error!("flush of table {id} failed (retrying at the next flush): {e}");
                shoal_runtime::time::sleep(Duration::from_secs(1)).await;
            }
            db.flushing.borrow_mut().remove(&id);
            db.memory_freed.notify_all();
        });
    }

    /// Flushes a table's memtables, then deletes the commitlog segments no
    /// memtable needs any more and wakes compaction.
    pub async fn flush_table(&self, id: Uuid) -> Result<(), ReplicaError> {
        let table = self.table(id)?;
        in_group(Group::Flush, table.flush(self.log_position())).await?;
        self.metrics.record_flush();
        self.discard_flushed_segments().await;
        self.memory_freed.notify_all();
        self.compaction_wanted.notify_all();
        Ok(())
    }

    async fn discard_flushed_segments(&self) {
        let Some(log) = self.commitlog.borrow().clone() else { return };
        let started = std::time::Instant::now();
        let needed = self.tables.borrow().values().filter_map(|t| t.first_logged()).min();
        log.discard_before(needed.unwrap_or_else(|| log.current_position())).await;
        record_flush_step(FlushStep::DiscardSegments, started.elapsed());
    }

    /// Flushes every table of `keyspace` (all keyspaces if `None`), or only
    /// `tables` of it if given (nodetool flush).
    pub async fn flush(&self, keyspace: Option<&str>, tables: &[String]) -> Result<usize, ReplicaError> {
        let ids = self.select_tables(keyspace, tables);
        for id in &ids {
            self.flush_table(*id).await?;
        }
        Ok(ids.len())
    }

    /// Makes this shard's data whole on disk for a clean stop (nodetool
    /// drain, SIGTERM): the commitlog closed (writes fail from now on),
    /// every memtable flushed, then every commitlog segment deleted, so the
    /// next start replays nothing. Returns the tables flushed; a shard
    /// whose storage is not open yet (still recovering) has none.
    pub async fn drain(&self) -> Result<usize, ReplicaError> {
        let Some(log) = self.commitlog.borrow().clone() else { return Ok(0) };
        log.close().await?;
        let ids = self.table_ids();
        for id in &ids {
            self.flush_table(*id).await?;
        }
        log.discard_all().await?;
        Ok(ids.len())
    }

    pub(crate) fn select_tables(&self, keyspace: Option<&str>, tables: &[String]) -> Vec<Uuid> {
        let schema = self.schema();
        schema
            .tables()
            .filter(|t| keyspace.is_none_or(|k| t.keyspace == k) && (tables.is_empty() || tables.contains(&t.name)))
            .filter(|t| self.tables.borrow().contains_key(&t.id))
            .map(|t| t.id)
            .collect()
    }

    /// Compacts all SSTables of the selected tables into one per table
    /// (nodetool compact), after flushing them.
    pub async fn compact(&self, keyspace: Option<&str>, tables: &[String]) -> Result<usize, ReplicaError> {
        let ids = self.select_tables(keyspace, tables);
        for id in &ids {
            self.flush_table(*id).await?;
            let table = self.table(*id)?;
            let major = shoal_storage::compaction::compact_major(&table, shoal_runtime::clock::now_s());
            if let Some(report) = in_group(Group::Compaction, major).await? {
                self.metrics.record_compaction(&report);
            }
        }
        Ok(ids.len())
    }

    /// This shard's load: the bytes of its user tables' SSTables' Data
    /// components (nodetool status's Load).
    pub fn load_bytes(&self) -> u64 {
        let schema = self.schema();
        let tables = self.tables.borrow();
        let user = tables.iter().filter(|(id, _)| {
            schema.table_by_id(**id).is_some_and(|t| !shoal_schema::SYSTEM_KEYSPACES.contains(&t.keyspace.as_str()))
        });
        user.map(|(_, table)| table.sstable_set().iter().map(|s| s.data_bytes()).sum::<u64>()).sum()
    }

    /// Table `id`'s partitions and their bytes in this shard's SSTables
    /// (`system.size_estimates` counts flushed data only, as Cassandra's);
    /// zeros for a table this shard does not have.
    pub fn flushed_partitions(&self, id: Uuid) -> (u64, u64) {
        let Some(table) = self.tables.borrow().get(&id).cloned() else { return (0, 0) };
        let sstables = table.sstable_set();
        sstables
            .iter()
            .fold((0, 0), |(partitions, bytes), s| (partitions + s.stats().partitions, bytes + s.stats().raw_bytes))
    }

    /// Drops, from `tables` (ids), the partitions whose token `keep`
    /// refuses (nodetool cleanup, after this node's share of the ring
    /// shrank): each is flushed, then compacted whole without them.
    /// Returns how many tables it cleaned.
    pub async fn cleanup(&self, tables: &[Uuid], keep: &dyn Fn(i64) -> bool) -> Result<usize, ReplicaError> {
        let mut cleaned = 0;
        for id in tables {
            let Ok(table) = self.table(*id) else { continue };
            self.flush_table(*id).await?;
            let now_s = shoal_runtime::clock::now_s();
            if let Some(report) =
                in_group(Group::Compaction, shoal_storage::compaction::cleanup(&table, now_s, keep)).await?
            {
                tracing::info!(
                    "cleanup of table {id}: {} SSTable(s) of {} bytes became {} of {} bytes, {} partitions kept",
                    report.inputs,
                    report.bytes_read,
                    report.outputs,
                    report.bytes_written,
                    report.partitions_written
                );
                self.metrics.record_compaction(&report);
            }
            cleaned += 1;
        }
        Ok(cleaned)
    }

    /// Hard-links the selected tables' SSTables into
    /// `<table dir>/snapshots/<tag>` after flushing them (nodetool snapshot).
    pub async fn snapshot(&self, keyspace: Option<&str>, tag: &str) -> Result<usize, ReplicaError> {
        let ids = self.select_tables(keyspace, &[]);
        let mut linked = 0;
        for id in &ids {
            self.flush_table(*id).await?;
            let table = self.table(*id)?;
            linked += table.snapshot(&table.dir().join("snapshots").join(tag)).await?;
        }
        Ok(linked)
    }

    /// Runs compactions as strategies ask, one at a time on this shard,
    /// woken by flushes. Never returns.
    pub(crate) async fn compaction_loop(&self) {
        loop {
            let wanted = self.compaction_wanted.wait();
            let mut worked = true;
            while worked {
                worked = false;
                for id in self.table_ids().into_iter().filter(|id| self.auto_compaction_enabled(*id)) {
                    let Ok(table) = self.table(id) else { continue };
                    let next = shoal_storage::compaction::compact_next(&table, shoal_runtime::clock::now_s());
                    match in_group(Group::Compaction, next).await {
                        Ok(Some(report)) => {
                            tracing::debug!("compacted table {id}: {report:?}");
                            self.metrics.record_compaction(&report);
                            worked = true;
                        }
                        Ok(None) => {}
                        // Not retried until the next flush wakes the loop.
                        Err(StorageError::CompactionStopped) => tracing::info!("compaction of table {id} stopped"),
                        Err(e) => tracing::error!("compaction of table {id} failed: {e}"),
                    }
                }
            }
            wanted.await;
        }
    }

    /// Starts the commitlog (after recovery) and the compaction task.
    pub(crate) fn start_commitlog(&self, config: &StorageConfig, first_segment: u64) {
        let log = CommitLog::start(
            CommitLogConfig {
                dir: config.commitlog_dir.clone(),
                shard: shoal_runtime::this_shard(),
                segment_size_bytes: config.segment_size_bytes,
                sync: config.sync,
            },
            first_segment,
        );
        log.report_latency(crate::metrics::commitlog_write_latency());
        *self.commitlog.borrow_mut() = Some(log);
        shoal_runtime::spawn(async { local().compaction_loop().await });
        shoal_runtime::spawn(crate::share_control::run(config.static_shares, || {
            let db = local();
            let budget_bytes = db.memtable_budget_bytes().filter(|b| *b > 0)?;
            let backlog_bytes = db.tables().values().map(|t| shoal_storage::compaction::backlog_bytes(t)).sum();
            Some(crate::share_control::Readings { backlog_bytes, memtable_bytes: db.memtable_bytes(), budget_bytes })
        }));
        // Saving starts once warming is done: a save during it would
        // replace the file with the part read back so far.
        let period = config.cache_save_period;
        shoal_runtime::spawn(async move {
            in_group(Group::Maintenance, local().warm_cache()).await;
            if let Some(period) = period {
                local().save_hot_keys_every(period).await;
            }
        });
        self.wake_compaction();
    }

    /// Has the compaction loop look at every table again.
    pub(crate) fn wake_compaction(&self) {
        self.compaction_wanted.notify_all();
    }

    /// Starts counting the reads and writes of `tables` (all when empty),
    /// at most `capacity` partitions of each kind (nodetool
    /// toppartitions, [`crate::top_partitions`]); a sampling under way is
    /// replaced.
    pub fn start_top_partitions(&self, tables: HashSet<Uuid>, capacity: usize) {
        *self.top_partitions.borrow_mut() = Some(Sampler::new(tables, capacity));
    }

    /// Ends the sampling and answers what it counted, most seen first
    /// (nothing when none was under way).
    pub fn finish_top_partitions(&self) -> TopPartitions {
        self.top_partitions.borrow_mut().take().map(Sampler::finish).unwrap_or_default()
    }

    fn note_top_write(&self, table: Uuid, token: i64, key: &bytes::Bytes) {
        if let Some(sampler) = self.top_partitions.borrow_mut().as_mut() {
            sampler.note_write(table, token, key);
        }
    }

    fn note_top_read(&self, table: Uuid, token: i64, key: &bytes::Bytes) {
        if let Some(sampler) = self.top_partitions.borrow_mut().as_mut() {
            sampler.note_read(table, token, key);
        }
    }
}

/// The invariant every shard relies on: a partition's token is its key's
/// token, so the partition is stored on, and read from, one place. (Which
/// shard owns a token is the coordinator's to choose; the token itself is
/// checked here, where a wrong one would file data where no read finds it.)
/// Positions come from other nodes too, so a wrong one fails its request,
/// never the shard.
pub(crate) fn check_token(position: &PartitionPosition) -> Result<(), ReplicaError> {
    let key_token = murmur3_token(&position.key);
    if position.token != key_token {
        return Err(ReplicaError::WrongToken { token: position.token, key_token });
    }
    Ok(())
}
