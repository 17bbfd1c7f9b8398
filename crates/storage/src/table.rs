//! One table's data on one shard: the active memtable, sealed memtables
//! being flushed, and the SSTables — and the reads that merge them.
//!
//! Reads return owned partitions restricted to the asked clustering ranges,
//! merged from every source by timestamp (the merge is commutative, so the
//! order sources are read in does not matter). A read takes a snapshot of
//! the SSTable list (an `Rc`), so a compaction that swaps SSTables meanwhile
//! neither disturbs it nor deletes files under it.
//!
//! Flush, truncate and compaction change the SSTable list only between
//! awaits, by replacing it. Work that started before a TRUNCATE or DROP
//! (tracked by `epoch`) throws its output away instead of installing it.
//!
//! The row cache ([`crate::cache`]) stands in for the SSTables of a
//! partition it holds. Its entries must equal what the SSTables hold, so:
//! a flush merges the memtable into the cache (step by step, yielding)
//! before its SSTable replaces the memtable, and while it does, reads of
//! positions it has passed skip that memtable on a hit (`cache_merge`); a
//! read that misses populates the cache only if no flush began or ended
//! during its SSTable reads (`cache_generation`), else its entry could
//! lack the flushed data.

use shoal_io::IoClass;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashSet};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Instant;

use crate::background_metrics::{record_flush_step, FlushStep};
use crate::cache::{Lookup, RowCache};
use crate::commitlog::Position;
use crate::compaction::strategy::Strategy;
use crate::compaction::task::CompactionTask;
use crate::error::StorageResult;
use crate::event::Event;
use crate::found::{Found, FoundRef};
use crate::memtable::Memtable;
use crate::partition::{ClusteringRange, Partition, PartitionPosition, PartitionUpdate, Tombstone};
use crate::single_row::RowCells;
use crate::sstable::compression::Compression;
use crate::sstable::format::{Component, Descriptor};
use crate::sstable::writer::{self, Lineage, Writer, WriterOptions};
use crate::sstable::{SSTable, SSTableSet, Scanner};

/// How a table's data is written and compacted (from its schema options).
#[derive(Debug, Clone)]
pub struct TableOptions {
    pub writer: WriterOptions,
    pub strategy: Strategy,
    pub gc_grace_s: i64,
    /// Whether reads use and fill the row cache (`caching = {'enabled': ...}`).
    pub cache: bool,
    /// Every partition held in the cache and never evicted (`in_memory`).
    pub in_memory: bool,
    /// Dropped columns as (column id, drop time in µs): compaction purges
    /// their cells written at or before the drop.
    pub dropped_columns: Vec<(u32, i64)>,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            // 16 KiB chunks: a point read that misses memory decompresses a
            // quarter of what 64 KiB costs, for ~12% more disk on
            // compressible data (measured: docs/sstable-format.md).
            writer: WriterOptions { compression: Compression::Lz4, chunk_bytes: 16 * 1024, bloom_fp_chance: 0.01 },
            strategy: Strategy::from_options(&BTreeMap::new()),
            gc_grace_s: 864_000,
            cache: true,
            in_memory: false,
            dropped_columns: Vec::new(),
        }
    }
}

/// Partitions a flush merges into the row cache between yields.
const CACHE_MERGE_STEP_PARTITIONS: usize = 128;
/// Partitions a flush writes between its yield points.
const FLUSH_STEP_PARTITIONS: usize = 64;

/// Counts the time since `started` as `step`'s, and starts the next step's.
fn record_step(step: FlushStep, started: &mut Instant) {
    let now = Instant::now();
    record_flush_step(step, now - *started);
    *started = now;
}

/// A sealed memtable and the commitlog position it covers up to.
struct Sealed {
    memtable: Rc<Memtable>,
    position: Position,
    writing: Cell<bool>,
}

pub struct Table {
    dir: PathBuf,
    shard: usize,
    options: RefCell<TableOptions>,
    active: RefCell<Memtable>,
    sealed: RefCell<Vec<Rc<Sealed>>>,
    sstables: RefCell<SSTableSet>,
    /// Generations being compacted now.
    compacting: RefCell<HashSet<u64>>,
    /// The compactions under way.
    compactions: RefCell<Vec<Rc<CompactionTask>>>,
    next_generation: Cell<u64>,
    /// Bumped by TRUNCATE and DROP: flushes and compactions begun before
    /// discard their output.
    epoch: Cell<u64>,
    flushed: Event,
    cache: Rc<RowCache>,
    cache_id: u32,
    /// Bumped when a flush starts merging into the cache and when it ends:
    /// a population whose SSTable reads overlap either is not inserted.
    cache_generation: Cell<u64>,
    /// The memtable a flush is merging into the cache, and the last
    /// position merged: entries at or before it already hold its data.
    cache_merge: RefCell<Option<(Rc<Memtable>, PartitionPosition)>>,
}

/// What opening a table's files found, for the log.
#[derive(Debug, Default)]
pub struct OpenReport {
    pub sstables: usize,
    pub removed_partial: usize,
    pub quarantined: Vec<String>,
}

impl Table {
    /// A table with no files yet (and, for virtual tables, never any).
    pub fn new(dir: PathBuf, shard: usize, options: TableOptions) -> Table {
        let cache = crate::cache::local();
        let cache_id = cache.register_table();
        cache.set_pinned(cache_id, options.in_memory);
        Table {
            dir,
            shard,
            options: RefCell::new(options),
            active: RefCell::new(Memtable::default()),
            sealed: RefCell::new(Vec::new()),
            sstables: RefCell::new(Rc::new(Vec::new())),
            compacting: RefCell::new(HashSet::new()),
            compactions: RefCell::new(Vec::new()),
            next_generation: Cell::new(1),
            epoch: Cell::new(0),
            flushed: Event::default(),
            cache,
            cache_id,
            cache_generation: Cell::new(0),
            cache_merge: RefCell::new(None),
        }
    }

    /// Opens the table's SSTables of this shard in `dir`: removes
    /// half-written ones (no TOC) and ones a finished compaction replaced,
    /// and moves unreadable ones to `dir/quarantine`.
    pub async fn open(dir: PathBuf, shard: usize, options: TableOptions) -> StorageResult<(Table, OpenReport)> {
        let table = Table::new(dir, shard, options);
        let mut report = OpenReport::default();
        let mut generations: BTreeMap<u64, (Descriptor, bool)> = BTreeMap::new();
        let mut stray = Vec::new();
        for name in shoal_io::list_dir(&table.dir, IoClass::Maintenance).await? {
            match Descriptor::parse(&table.dir, &name) {
                Some((d, component)) if d.shard == shard => {
                    let has_toc = component == Some(Component::Toc);
                    let slot = generations.entry(d.generation).or_insert((d, false));
                    slot.1 |= has_toc;
                }
                Some(_) => {}
                None if name.ends_with(".tmp") => stray.push(table.dir.join(&name)),
                None => {}
            }
        }
        for path in stray {
            shoal_io::remove_file_if_exists(&path, IoClass::Maintenance).await?;
        }
        let max_generation = generations.keys().next_back().copied().unwrap_or(0);
        table.next_generation.set(max_generation + 1);
        let mut opened = Vec::new();
        for (_, (descriptor, complete)) in generations {
            if !complete {
                tracing::warn!("removing half-written SSTable {}", descriptor.name());
                writer::remove_files(&descriptor).await;
                report.removed_partial += 1;
                continue;
            }
            match SSTable::open(descriptor.clone(), IoClass::Maintenance).await {
                Ok(sstable) => opened.push(Rc::new(sstable)),
                Err(e) => {
                    tracing::error!("quarantining SSTable {}: {e}", descriptor.name());
                    quarantine(&descriptor).await?;
                    report.quarantined.push(descriptor.name());
                }
            }
        }
        let (replaced, partial) = settle_compactions(&opened);
        opened.retain(|s| {
            if replaced.contains(&s.generation()) {
                tracing::info!("removing SSTable {}, already compacted into another", s.descriptor().name());
            } else if partial.contains(&s.generation()) {
                tracing::warn!("removing SSTable {}, part of a compaction a crash cut short", s.descriptor().name());
            } else {
                return true;
            }
            s.mark_obsolete();
            false
        });
        report.sstables = opened.len();
        *table.sstables.borrow_mut() = Rc::new(opened);
        Ok((table, report))
    }

    pub fn set_options(&self, options: TableOptions) {
        if !options.cache {
            self.cache.clear_table(self.cache_id);
        }
        self.cache.set_pinned(self.cache_id, options.in_memory);
        *self.options.borrow_mut() = options;
    }

    /// The id the shard's row cache knows this table by.
    pub fn cache_id(&self) -> u32 {
        self.cache_id
    }

    /// The table's row cache counters and sizes on this shard.
    pub fn cache_stats(&self) -> crate::cache::CacheStats {
        self.cache.stats(self.cache_id)
    }

    /// Whether the table is `in_memory` (cheap: on every write).
    pub fn in_memory(&self) -> bool {
        self.options.borrow().in_memory
    }

    pub fn options(&self) -> TableOptions {
        self.options.borrow().clone()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Applies a write (already in the commitlog at `logged_at`, if logged).
    pub fn apply(&self, position: PartitionPosition, update: PartitionUpdate, logged_at: Option<Position>) {
        self.active.borrow_mut().apply(position, update, logged_at);
    }

    /// Applies the single row `row` (a memcached `set`), written compact
    /// ([`Memtable::apply_row`]).
    pub fn apply_row(&self, position: PartitionPosition, row: &RowCells, logged_at: Option<Position>) {
        self.active.borrow_mut().apply_row(position, row, logged_at);
    }

    /// Applies a partition tombstone alone (a memcached `delete`), held as
    /// such ([`Memtable::apply_tombstone`]).
    pub fn apply_tombstone(&self, position: PartitionPosition, tombstone: Tombstone, logged_at: Option<Position>) {
        self.active.borrow_mut().apply_tombstone(position, tombstone, logged_at);
    }

    /// Applies a partition streamed from another node (a node operation),
    /// unlogged: its memtable's flush updates the row cache's entries but
    /// adds none, so a stream does not push the cache's hot partitions out
    /// with cold ones (ScyllaDB's streaming bypasses its cache too).
    pub fn apply_streamed(&self, position: PartitionPosition, update: PartitionUpdate) {
        self.active.borrow_mut().apply_streamed(position, update);
    }

    /// The partition at `position`, holding only rows in `ranges`; `None`
    /// when nothing at all is stored for it. The row cache stands in for
    /// the SSTables where it holds the partition, and a read of a whole
    /// partition that misses fills it.
    pub async fn read(
        &self,
        position: &PartitionPosition,
        ranges: &[ClusteringRange],
    ) -> StorageResult<Option<Partition>> {
        Ok(self.read_shared(position, ranges).await?.map(Rc::unwrap_or_clone))
    }

    /// [`Table::read`] for a reader that only looks: where one memtable
    /// alone holds the partition and `ranges` take it whole, the memtable's
    /// own, shared instead of copied.
    pub async fn read_shared(
        &self,
        position: &PartitionPosition,
        ranges: &[ClusteringRange],
    ) -> StorageResult<Option<Rc<Partition>>> {
        Ok(self.read_found(position, ranges).await?.map(Found::into_partition))
    }

    /// [`Table::read_shared`], where one source alone (a memtable, the row
    /// cache) holds the partition as a single row, as its shared bytes
    /// rather than decoded (`found` module doc): a memcached hit.
    pub async fn read_found(
        &self,
        position: &PartitionPosition,
        ranges: &[ClusteringRange],
    ) -> StorageResult<Option<Found>> {
        let use_cache = self.options.borrow().cache;
        self.read_using(position, ranges, use_cache).await
    }

    /// [`Table::read_found`] without the row cache: neither served from it
    /// nor filling it (`SELECT ... BYPASS CACHE`).
    pub async fn read_bypassing_cache(
        &self,
        position: &PartitionPosition,
        ranges: &[ClusteringRange],
    ) -> StorageResult<Option<Found>> {
        self.read_using(position, ranges, false).await
    }

    /// The SSTables' part is boxed where it is awaited: its state (the
    /// index lookup's and the data read's, over a KiB) would otherwise
    /// make this future, and every one above it that holds it, that much
    /// larger, copied as it moves up to a box, for reads memory answers
    /// too. A read that goes to disk pays one allocation for it.
    async fn read_using(
        &self,
        position: &PartitionPosition,
        ranges: &[ClusteringRange],
        use_cache: bool,
    ) -> StorageResult<Option<Found>> {
        let (mut result, cache_missed) = match self.read_in_memory(position, ranges, use_cache) {
            InMemory::Whole(result) => return Ok(result),
            InMemory::Partial { memtables, cache_missed } => (memtables, cache_missed),
        };
        if cache_missed && ClusteringRange::is_whole(ranges) {
            let generation = self.cache_generation.get();
            let (stored, consulted) = Box::pin(self.read_sstables(position, ranges)).await?;
            // A negative entry is worth its memory only where the Bloom
            // filters could not rule the key out on their own.
            let worth_caching = stored.is_some() || consulted;
            if worth_caching && self.cache_generation.get() == generation && self.cache_merge.borrow().is_none() {
                self.cache.insert_found(self.cache_id, position, stored.as_ref());
            }
            merge_found(&mut result, stored);
        } else {
            let stored = Box::pin(self.read_sstables(position, ranges)).await?.0;
            merge_found(&mut result, stored);
        }
        Ok(result)
    }

    /// [`Table::read_found`] of the whole partition where memory answers
    /// it (the memtables, with the row cache's entry, or with no SSTable
    /// that may hold the partition by its key range and Bloom filter),
    /// without awaiting; `None` where SSTables must be read. A memcached
    /// hit is answered so, with no future built for the read, and so is a
    /// miss the Bloom filters rule out (a delete of a deleted item).
    pub fn read_found_in_memory(&self, position: &PartitionPosition) -> Option<Option<Found>> {
        let use_cache = self.options.borrow().cache;
        match self.read_in_memory(position, &[ClusteringRange::all()], use_cache) {
            InMemory::Whole(result) => Some(result),
            InMemory::Partial { memtables, .. } if !self.sstables.borrow().iter().any(|s| s.may_contain(position)) => {
                Some(memtables)
            }
            InMemory::Partial { .. } => None,
        }
    }

    /// Runs `decide` on the whole partition at `position` where memory
    /// answers it ([`Table::read_found_in_memory`]), with `state`, handed
    /// back where SSTables must be read. Where the active memtable is all
    /// there is (no sealed memtable, no SSTable, so no row cache entry
    /// either) `decide` borrows its slot: nothing shared, nothing copied.
    /// `decide` must not write to the table (its memtable is borrowed).
    pub fn with_found_in_memory<S, R>(
        &self,
        position: &PartitionPosition,
        state: S,
        decide: impl FnOnce(S, Option<FoundRef<'_>>) -> R,
    ) -> Result<R, S> {
        if self.sealed.borrow().is_empty() && self.sstables.borrow().is_empty() {
            return Ok(decide(state, self.active.borrow().found_ref(position)));
        }
        match self.read_found_in_memory(position) {
            Some(found) => Ok(decide(state, found.as_ref().map(Found::as_found_ref))),
            None => Err(state),
        }
    }

    /// The memtables' part of a read, and the row cache's entry, which
    /// stands in for the SSTables where it holds the partition.
    fn read_in_memory(&self, position: &PartitionPosition, ranges: &[ClusteringRange], use_cache: bool) -> InMemory {
        let mut result = self.active.borrow().read_found(position, ranges);
        // Without SSTables the cache has nothing to stand in for (a table
        // still in its memtables, or truncated).
        let has_sstables = !self.sstables.borrow().is_empty();
        let use_cache = use_cache && has_sstables;
        let lookup = if use_cache { self.cache.get(self.cache_id, position) } else { Lookup::Miss };
        let hit = matches!(lookup, Lookup::Hit(_));
        {
            let merging = self.cache_merge.borrow();
            for sealed in self.sealed.borrow().iter() {
                let in_entry = hit
                    && merging
                        .as_ref()
                        .is_some_and(|(m, merged_to)| Rc::ptr_eq(m, &sealed.memtable) && position <= merged_to);
                if !in_entry {
                    merge_found(&mut result, sealed.memtable.read_found(position, ranges));
                }
            }
        }
        match lookup {
            Lookup::Hit(cached) => {
                merge_found(&mut result, cached.map(|found| restrict(found, ranges)));
                InMemory::Whole(result)
            }
            Lookup::Miss if !has_sstables => InMemory::Whole(result),
            Lookup::Miss => InMemory::Partial { memtables: result, cache_missed: use_cache },
        }
    }

    /// What the SSTables hold at `position`, and whether any had to be read
    /// (one whose key range and Bloom filter may hold it). A whole
    /// partition one SSTable alone holds as a single row comes as its
    /// compact bytes (`SSTable::read_found`), decoded only to merge.
    async fn read_sstables(
        &self,
        position: &PartitionPosition,
        ranges: &[ClusteringRange],
    ) -> StorageResult<(Option<Found>, bool)> {
        let (mut result, mut consulted) = (None, false);
        let whole = ClusteringRange::is_whole(ranges);
        let sstables = self.sstable_set();
        for sstable in sstables.iter().filter(|s| s.may_contain(position)) {
            consulted = true;
            let found = match whole {
                true => sstable.read_found_admitted(position).await?,
                false => sstable.read_admitted(position, ranges).await?.map(|p| Found::Partition(Rc::new(p))),
            };
            merge_found(&mut result, found);
        }
        Ok((result, consulted))
    }

    /// Up to `max_partitions` partitions between `from` and `to` in ring
    /// order, each restricted to `ranges`.
    pub async fn scan(
        &self,
        from: Bound<&PartitionPosition>,
        to: Bound<&PartitionPosition>,
        ranges: &[ClusteringRange],
        max_partitions: usize,
    ) -> StorageResult<Vec<(PartitionPosition, Partition)>> {
        assert!(max_partitions > 0);
        let mut merged: BTreeMap<PartitionPosition, Partition> = BTreeMap::new();
        let mut add = |position: PartitionPosition, partition: Partition| match merged.get_mut(&position) {
            Some(current) => current.merge(partition),
            None => {
                merged.insert(position, partition);
            }
        };
        for (position, partition) in self.active.borrow().scan(from, to, ranges, max_partitions) {
            add(position, partition);
        }
        for sealed in self.sealed.borrow().iter() {
            for (position, partition) in sealed.memtable.scan(from, to, ranges, max_partitions) {
                add(position, partition);
            }
        }
        let sstables = self.sstable_set();
        for sstable in sstables.iter().filter(|s| s.overlaps(from, to)) {
            let mut scanner = Scanner::new(Rc::clone(sstable), from, to.cloned(), IoClass::Query).await?;
            for _ in 0..max_partitions {
                let Some((position, partition)) = scanner.next(ranges).await? else { break };
                add(position, partition);
            }
        }
        Ok(merged.into_iter().take(max_partitions).collect())
    }

    /// The current SSTables (a snapshot: later swaps do not change it).
    pub fn sstable_set(&self) -> SSTableSet {
        Rc::clone(&self.sstables.borrow())
    }

    /// Heap held by the active and sealed memtables.
    pub fn memory_used_bytes(&self) -> usize {
        self.active.borrow().size_bytes() + self.sealed.borrow().iter().map(|s| s.memtable.size_bytes()).sum::<usize>()
    }

    /// Partitions in the active and sealed memtables (one in several
    /// counts in each).
    pub fn memtable_partitions(&self) -> usize {
        self.active.borrow().len() + self.sealed.borrow().iter().map(|s| s.memtable.len()).sum::<usize>()
    }

    pub fn active_memtable_bytes(&self) -> usize {
        self.active.borrow().size_bytes()
    }

    /// The oldest commitlog position a memtable still needs.
    pub fn first_logged(&self) -> Option<Position> {
        let active = self.active.borrow().first_logged();
        self.sealed.borrow().iter().filter_map(|s| s.memtable.first_logged()).chain(active).min()
    }

    /// Replay skips this table's commitlog entries before this position:
    /// they are in SSTables.
    pub fn replay_floor(&self) -> Position {
        self.sstables.borrow().iter().map(|s| s.stats().commitlog_position).max().unwrap_or(Position::ZERO)
    }

    /// Seals the active memtable, if it holds anything, as covering the
    /// commitlog up to `position`, and writes every sealed memtable
    /// (including ones an earlier failure left), then returns.
    ///
    /// Sealed memtables are written one at a time, oldest first, whoever
    /// sealed them: replay skips every entry below the highest position
    /// among the SSTables (`replay_floor`), so a newer memtable's SSTable
    /// must never exist without the older ones' — a crash between the two
    /// would lose the older memtable's writes.
    pub async fn flush(&self, position: Position) -> StorageResult<()> {
        if !self.active.borrow().is_empty() {
            let memtable = Rc::new(std::mem::take(&mut *self.active.borrow_mut()));
            self.sealed.borrow_mut().push(Rc::new(Sealed { memtable, position, writing: Cell::new(false) }));
        }
        loop {
            while self.sealed.borrow().iter().any(|s| s.writing.get()) {
                self.flushed.wait().await;
            }
            // No await between this look and `writing.set(true)`: no other
            // task can pick the same memtable.
            let Some(sealed) = self.sealed.borrow().first().cloned() else { return Ok(()) };
            sealed.writing.set(true);
            let result = self.write_sealed(&sealed).await;
            sealed.writing.set(false);
            self.flushed.notify_all();
            result?;
            // Written and out of the sealed list: reads no longer see it, and
            // they never hold it across an await, so this is the last handle.
            if let Ok(Sealed { memtable, .. }) = Rc::try_unwrap(sealed) {
                if let Ok(memtable) = Rc::try_unwrap(memtable) {
                    let started = Instant::now();
                    memtable.release().await;
                    record_flush_step(FlushStep::Release, started.elapsed());
                }
            }
        }
    }

    async fn write_sealed(&self, sealed: &Rc<Sealed>) -> StorageResult<()> {
        let epoch = self.epoch.get();
        let mut started = Instant::now();
        let mut writer = self.new_writer(sealed.memtable.len(), IoClass::Flush).await?;
        for (i, (position, partition)) in sealed.memtable.iter().enumerate() {
            if let Err(e) = writer.add(position, &partition).await {
                writer.abort().await;
                return Err(e);
            }
            // The flush's yield point, once it has held the core for a task
            // quota (64 partitions of 1 KiB items could take a millisecond),
            // or every few partitions outside a group: other tasks run, and
            // the flush gives the core back when it has had more than its
            // shares.
            if shoal_runtime::sched::need_preempt() || i % FLUSH_STEP_PARTITIONS == FLUSH_STEP_PARTITIONS - 1 {
                shoal_runtime::sched::maybe_yield().await;
            }
        }
        let target = writer.descriptor().clone();
        record_step(FlushStep::Write, &mut started);
        let descriptor = match writer.finish(sealed.position, 0, Lineage::flushed()).await {
            Ok(d) => d,
            Err(e) => {
                writer::remove_files(&target).await;
                return Err(e);
            }
        };
        record_step(FlushStep::Finish, &mut started);
        let sstable = Rc::new(SSTable::open(descriptor, IoClass::Flush).await?);
        record_step(FlushStep::Open, &mut started);
        if self.epoch.get() != epoch {
            // TRUNCATE or DROP came meanwhile and discarded this memtable.
            sstable.mark_obsolete();
            return Ok(());
        }
        self.merge_into_cache(&sealed.memtable, epoch).await;
        record_step(FlushStep::CacheMerge, &mut started);
        if self.epoch.get() != epoch {
            sstable.mark_obsolete();
            return Ok(());
        }
        let oldest = self.sealed.borrow().first().is_some_and(|first| Rc::ptr_eq(first, sealed));
        assert!(oldest, "a sealed memtable is written only after every older one");
        // No await from here on: the cache, the memtable list and the
        // SSTable list change together.
        self.sealed.borrow_mut().remove(0);
        self.install(&[], vec![sstable]);
        self.cache_merge.borrow_mut().take();
        self.cache_generation.set(self.cache_generation.get() + 1);
        Ok(())
    }

    /// Reads every partition of the SSTables into the cache (an
    /// `in_memory` table at start); returns how many it cached. Reads that
    /// overlap a flush are skipped, as for any population: the flush puts
    /// its own partitions in, and a later read fills the rest.
    pub async fn load_into_cache(&self) -> StorageResult<usize> {
        let sstables = self.sstable_set();
        let mut loaded = 0;
        for sstable in sstables.iter() {
            let mut scanner =
                Scanner::new(Rc::clone(sstable), Bound::Unbounded, Bound::Unbounded, IoClass::Maintenance).await?;
            loop {
                let generation = self.cache_generation.get();
                let Some((position, scanned)) = scanner.next(&[ClusteringRange::all()]).await? else { break };
                if matches!(self.cache.peek(self.cache_id, &position), Lookup::Hit(_)) {
                    shoal_runtime::sched::maybe_yield().await;
                    continue;
                }
                // With one SSTable, still the only one, what the scan read is
                // all there is.
                let alone = sstables.len() == 1 && Rc::ptr_eq(&sstables, &self.sstable_set());
                let stored = match alone {
                    true => Some(Found::Partition(Rc::new(scanned))),
                    false => self.read_sstables(&position, &[ClusteringRange::all()]).await?.0,
                };
                if self.cache_generation.get() == generation && self.cache_merge.borrow().is_none() {
                    self.cache.insert_found(self.cache_id, &position, stored.as_ref());
                    loaded += 1;
                }
                if loaded % CACHE_MERGE_STEP_PARTITIONS == 0 {
                    shoal_runtime::sched::maybe_yield().await;
                }
            }
        }
        Ok(loaded)
    }

    /// Merges a memtable about to become an SSTable into the cache: into
    /// the entries of its partitions, and as new entries for partitions no
    /// current SSTable may hold (so the memtable's version is all there
    /// is) unless it holds streamed data. Yields every few partitions;
    /// stops if TRUNCATE or DROP comes.
    async fn merge_into_cache(&self, memtable: &Rc<Memtable>, epoch: u64) {
        let insert_new = self.options.borrow().cache && !memtable.holds_streamed();
        if !insert_new && self.cache_stats().partitions == 0 {
            return;
        }
        self.cache_generation.set(self.cache_generation.get() + 1);
        let older = self.sstable_set();
        for (i, (position, partition)) in memtable.iter().enumerate() {
            if shoal_runtime::sched::need_preempt()
                || i % CACHE_MERGE_STEP_PARTITIONS == CACHE_MERGE_STEP_PARTITIONS - 1
            {
                shoal_runtime::sched::maybe_yield().await;
                if self.epoch.get() != epoch {
                    return;
                }
            }
            match self.cache.peek(self.cache_id, position) {
                Lookup::Hit(cached) => {
                    let mut merged = cached.unwrap_or_default();
                    merged.merge(partition.into_owned());
                    self.cache.insert(self.cache_id, position, Some(&merged));
                }
                Lookup::Miss if insert_new && !older.iter().any(|s| s.may_contain(position)) => {
                    self.cache.insert(self.cache_id, position, Some(&partition));
                }
                Lookup::Miss => {}
            }
            *self.cache_merge.borrow_mut() = Some((Rc::clone(memtable), position.clone()));
        }
    }

    fn descriptor(&self, generation: u64) -> Descriptor {
        Descriptor { dir: self.dir.clone(), shard: self.shard, generation }
    }

    /// A writer for a new SSTable of this table.
    pub(crate) async fn new_writer(&self, expected_partitions: usize, class: IoClass) -> StorageResult<Writer> {
        let generation = self.next_generation.get();
        self.next_generation.set(generation + 1);
        let options = self.options.borrow().writer;
        Writer::create(self.descriptor(generation), options, expected_partitions, class).await
    }

    /// Replaces `removed` by `added` in the SSTable list; the removed ones'
    /// files go once no read uses them.
    pub(crate) fn install(&self, removed: &[Rc<SSTable>], added: Vec<Rc<SSTable>>) {
        let mut next: Vec<Rc<SSTable>> =
            self.sstables.borrow().iter().filter(|s| !removed.iter().any(|r| Rc::ptr_eq(r, s))).cloned().collect();
        next.extend(added);
        *self.sstables.borrow_mut() = Rc::new(next);
        for s in removed {
            s.mark_obsolete();
        }
    }

    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.get()
    }

    /// SSTables no compaction is using, to pick a job from.
    pub(crate) fn idle_sstables(&self) -> Vec<Rc<SSTable>> {
        let busy = self.compacting.borrow();
        self.sstables.borrow().iter().filter(|s| !busy.contains(&s.generation())).cloned().collect()
    }

    pub(crate) fn set_compacting(&self, sstables: &[Rc<SSTable>], busy: bool) {
        let mut compacting = self.compacting.borrow_mut();
        for s in sstables {
            if busy {
                compacting.insert(s.generation());
            } else {
                compacting.remove(&s.generation());
            }
        }
    }

    /// The compactions of this table under way.
    pub fn compactions(&self) -> Vec<Rc<CompactionTask>> {
        self.compactions.borrow().clone()
    }

    pub(crate) fn add_compaction(&self, task: Rc<CompactionTask>) {
        self.compactions.borrow_mut().push(task);
    }

    pub(crate) fn remove_compaction(&self, task: &Rc<CompactionTask>) {
        self.compactions.borrow_mut().retain(|t| !Rc::ptr_eq(t, task));
    }

    /// The oldest write timestamp that data of `position` may have outside
    /// `inputs` (memtables and other SSTables): tombstones older than it
    /// shadow nothing that remains.
    pub(crate) fn max_purgeable_timestamp(&self, position: &PartitionPosition, inputs: &[Rc<SSTable>]) -> i64 {
        let mut min = i64::MAX;
        let active = self.active.borrow();
        let sealed = self.sealed.borrow();
        let memtables = std::iter::once(&*active).chain(sealed.iter().map(|s| &*s.memtable));
        for memtable in memtables.filter(|m| m.contains(position)) {
            min = min.min(memtable.min_timestamp().unwrap_or(i64::MAX));
        }
        for s in self.sstables.borrow().iter() {
            if !inputs.iter().any(|i| Rc::ptr_eq(i, s)) && s.may_contain(position) {
                min = min.min(s.stats().min_timestamp);
            }
        }
        min
    }

    /// Drops every row: memtables go, SSTables are deleted, and an empty
    /// SSTable records `position` so replay skips older commitlog entries.
    pub async fn truncate(&self, position: Position) -> StorageResult<()> {
        self.discard_everything();
        let writer = self.new_writer(1, IoClass::Maintenance).await?;
        let descriptor = writer.finish(position, 0, Lineage::flushed()).await?;
        let marker = Rc::new(SSTable::open(descriptor, IoClass::Maintenance).await?);
        self.install(&[], vec![marker]);
        Ok(())
    }

    /// Forgets all data and deletes the files (DROP TABLE).
    pub fn drop_data(&self) {
        self.discard_everything();
    }

    /// Empties the table's row cache (reads fill it again from the
    /// memtables and SSTables). A flush merging into the cache meanwhile
    /// goes on: the entries it passed are gone, so no hit relies on them,
    /// and reads begun before the clear do not fill it (the generation).
    pub fn clear_cache(&self) {
        self.cache.clear_table(self.cache_id);
        self.cache_generation.set(self.cache_generation.get() + 1);
    }

    fn discard_everything(&self) {
        self.epoch.set(self.epoch.get() + 1);
        self.clear_cache();
        self.cache_merge.borrow_mut().take();
        *self.active.borrow_mut() = Memtable::default();
        self.sealed.borrow_mut().clear();
        let old = std::mem::replace(&mut *self.sstables.borrow_mut(), Rc::new(Vec::new()));
        for s in old.iter() {
            s.mark_obsolete();
        }
        self.flushed.notify_all();
    }

    /// Hard-links every current SSTable's files into `target` (a snapshot).
    pub async fn snapshot(&self, target: &Path) -> StorageResult<usize> {
        shoal_io::create_dir_all(target, IoClass::Maintenance).await?;
        let sstables = self.sstable_set();
        for s in sstables.iter() {
            for component in Component::ALL {
                let from = s.descriptor().path(component);
                // Invariant: descriptor paths always end in a file name.
                #[allow(clippy::unwrap_used)]
                let name = from.file_name().unwrap();
                shoal_io::hard_link(&from, &target.join(name), IoClass::Maintenance).await?;
            }
        }
        Ok(sstables.len())
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        self.cache.forget_table(self.cache_id);
    }
}

/// What a start finds of the compactions before it, from the SSTables'
/// lineage: (generations compacted into others, so replaced; outputs of a
/// compaction that did not finish, so partial). A compaction finished iff
/// its last output (`last_of_run`) is on disk, or none of its inputs is
/// (inputs are deleted only once every output is written). Partial outputs
/// must go, not stay beside their inputs: they hold the same data, and
/// counter deltas would count twice.
fn settle_compactions(sstables: &[Rc<SSTable>]) -> (HashSet<u64>, HashSet<u64>) {
    let on_disk: HashSet<u64> = sstables.iter().map(|s| s.generation()).collect();
    let mut runs: BTreeMap<Vec<u64>, (bool, Vec<u64>)> = BTreeMap::new();
    for s in sstables.iter().filter(|s| !s.stats().ancestors.is_empty()) {
        let mut ancestors = s.stats().ancestors.clone();
        ancestors.sort_unstable();
        let run = runs.entry(ancestors).or_default();
        run.0 |= s.stats().last_of_run;
        run.1.push(s.generation());
    }
    let (mut replaced, mut partial) = (HashSet::new(), HashSet::new());
    for (ancestors, (has_last, outputs)) in runs {
        if has_last || !ancestors.iter().any(|g| on_disk.contains(g)) {
            replaced.extend(ancestors);
        } else {
            partial.extend(outputs);
        }
    }
    assert!(replaced.is_disjoint(&partial), "an SSTable is both an input and a partial output");
    (replaced, partial)
}

/// What memory tells of a partition, for a read.
enum InMemory {
    /// All there is: nothing stored elsewhere can add to it.
    Whole(Option<Found>),
    /// What the memtables hold; the SSTables must be read too (the row
    /// cache missed when it was asked).
    Partial { memtables: Option<Found>, cache_missed: bool },
}

/// Merges what one more source found into `result`: shared as found
/// while only one source holds the partition, decoded and merged once two
/// do.
fn merge_found(result: &mut Option<Found>, more: Option<Found>) {
    let Some(more) = more else { return };
    *result = Some(match result.take() {
        None => more,
        Some(current) => {
            let mut merged = current.into_partition();
            Rc::make_mut(&mut merged).merge(Rc::unwrap_or_clone(more.into_partition()));
            Found::Partition(merged)
        }
    });
}

/// A cache entry (a whole partition) with only the rows in `ranges`: as
/// found when they take it whole.
fn restrict(found: Found, ranges: &[ClusteringRange]) -> Found {
    if ClusteringRange::is_whole(ranges) {
        return found;
    }
    let mut p = Rc::unwrap_or_clone(found.into_partition());
    p.rows.retain(|key, _| ranges.iter().any(|r| r.contains(key)));
    Found::Partition(Rc::new(p))
}

async fn quarantine(descriptor: &Descriptor) -> StorageResult<()> {
    let target = descriptor.dir.join("quarantine");
    shoal_io::create_dir_all(&target, IoClass::Maintenance).await?;
    for component in Component::ALL {
        let from = descriptor.path(component);
        if shoal_io::exists(&from, IoClass::Maintenance).await? {
            // Invariant: descriptor paths always end in a file name.
            #[allow(clippy::unwrap_used)]
            let to = target.join(from.file_name().unwrap());
            shoal_io::rename(&from, &to, IoClass::Maintenance).await?;
        }
    }
    Ok(())
}
