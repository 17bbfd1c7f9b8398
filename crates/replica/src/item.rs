//! memcached items on the shard that owns them: the operations of
//! memcached's protocols (store modes, arithmetic, touch, compare-and-set)
//! as data, run where the item lives.
//!
//! An item is the one row of a partition of an items table (`key blob
//! PRIMARY KEY, value blob, flags bigint, cas bigint`), its expiry the
//! cells' TTL, so CQL reads what memcached clients write. The front end
//! (`memcache`) parses a command into an [`ItemOp`]; the coordinator sends
//! it to the owning shard; this module reads the item, decides, and writes.
//!
//! Atomicity without locks across threads: one shard owns each key. Where
//! memory answers an operation's read and its write need not wait for
//! memtable room, it reads, decides and writes with no await between them:
//! atomic on the shard as it is, it takes no lock (unless another write
//! holds the partition's, when it queues behind it). A read may otherwise
//! await SSTable I/O, so such an operation that writes holds the
//! partition's lock (shard-local, FIFO) from its read to its write, and a
//! plain `set` that must wait holds it too, so it cannot land between
//! another write's read and its write. Reads take no lock: they see the
//! item before or after a write, never a half. Durability is awaited after the lock is released,
//! for a whole run of operations before any is answered
//! ([`Database::run_items`]).
//!
//! Each operation in a run has its own outcome: one that fails (a write
//! refused by an in-memory table over its limit, a commitlog append that
//! fails) leaves the others of the run to run, and the writes that
//! applied are answered as applied once durable. So a client that retries
//! only what it was told failed never applies a write twice.
//!
//! Each operation also keeps the shard's LRU list of items
//! (`item_lru`) up to date, and a run that leaves the items over the
//! shard's share of `memcache_max_size` deletes the least recently used
//! before it answers ([`Database::evict_items`]).
//!
//! The CAS unique of an item is its `cas` cell: the shard's next unique
//! (`item_cas`: above the item's previous unique when the operation read
//! it, and never one another shard gives), unless the client chose one
//! (meta `E`). A row written by CQL without `cas` reports
//! its value's timestamp.

use std::ops::Bound;
use std::rc::Rc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use shoal_runtime::clock;
use shoal_storage::{
    Cell, ClusteredRow, ClusteringRange, ColumnData, Expiry, FoundRef, Partition, PartitionPosition, Row, RowCells,
    Table, Tombstone,
};

use crate::database::{Durability, Write};
use crate::item_access::Access;
use crate::item_cas::CasUniques;
use crate::item_lru::ItemLruStats;
use crate::item_read::{self, Held};
pub use crate::item_read::{Item, ItemTable, Lifetime};
use crate::{Database, ReplicaError};

/// What a store command does with an existing (or missing) item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreMode {
    Set,
    /// Only if missing.
    Add,
    /// Only if present.
    Replace,
    /// Present only; keeps its flags and lifetime.
    Append,
    Prepend,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Store {
    pub mode: StoreMode,
    pub value: Bytes,
    pub flags: u32,
    pub lifetime: Lifetime,
    /// Store only if the item's CAS unique is this (`cas`, meta `C`).
    pub compare_cas: Option<u64>,
    /// The item's new CAS unique (meta `E`); else the shard's next one.
    pub new_cas: Option<u64>,
    /// Add/replace-style modes on a missing item: create it with these
    /// (meta `ms ... N`: append to a missing item vivifies it).
    pub vivify: Option<Lifetime>,
    /// With `compare_cas` older than the item's: store it anyway, marked
    /// stale, keeping the item's lifetime (ms `I`).
    pub stale_if_older: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Arith {
    pub decrement: bool,
    pub delta: u64,
    /// Create a missing item with this value and lifetime (meta `N`, `J`).
    pub create: Option<(u64, Lifetime)>,
    pub compare_cas: Option<u64>,
    pub new_cas: Option<u64>,
    /// Also set a new lifetime on an existing item (meta `T`).
    pub touch: Option<Lifetime>,
}

/// A read of an item, and what it may change (meta `mg`'s flags).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fetch {
    /// Also give it a new lifetime (gat, mg `T`).
    pub touch: Option<Lifetime>,
    /// On a miss, create an empty item with this lifetime and hand this
    /// client the token to fill it (mg `N`).
    pub vivify: Option<Lifetime>,
    /// Hand this client the token to recache the item if it expires within
    /// this many seconds (mg `R`).
    pub recache_within_s: Option<i64>,
    /// Leave its last access time and fetched mark as they are (mg `u`).
    pub no_bump: bool,
}

/// One memcached operation on one item.
#[derive(Debug, Clone, PartialEq)]
pub enum ItemOp {
    Get(Fetch),
    Store(Store),
    Arith(Arith),
    Delete {
        compare_cas: Option<u64>,
    },
    /// Mark it stale instead of deleting it (md `I`), giving it a new
    /// lifetime if one is given (md `T`): the next fetch gets the token to
    /// recache it, others get the stale value meanwhile.
    Invalidate {
        compare_cas: Option<u64>,
        lifetime: Option<Lifetime>,
        /// Its new CAS unique (md `E`); else a fresh one.
        new_cas: Option<u64>,
    },
    Touch {
        lifetime: Lifetime,
    },
}

impl ItemOp {
    /// Whether it may write the item (and so runs under the partition lock).
    pub fn writes(&self) -> bool {
        !matches!(self, ItemOp::Get(Fetch { touch: None, vivify: None, .. }))
    }

    /// Whether its outcome depends on the item as it is. A plain `set` does
    /// not: it writes blind (still under the lock, so it cannot land inside
    /// another write's read-modify-write), and its CAS unique comes from the
    /// shard's counter alone — unique within a run, as memcached's are.
    pub fn reads(&self) -> bool {
        !matches!(self, ItemOp::Store(Store { mode: StoreMode::Set, compare_cas: None, stale_if_older: false, .. }))
    }
}

/// Where a run's tokens come from, and so whether a write hashes its key
/// again to check its token: a position filed under a token that is not
/// its key's would be stored where no read finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tokens {
    /// This node hashed each from its key (`coordinator::item_position`),
    /// moments before: not hashed again.
    Hashed,
    /// As another node sent them: each write checks its own, and is
    /// refused where it is wrong.
    Received,
}

/// How an operation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ItemOutcome {
    /// A get or touch found it (after the touch); arithmetic's result (its
    /// value the new number in decimal).
    Found(Item),
    /// No such item (or it expired).
    Missing,
    Stored {
        cas: u64,
    },
    /// The store mode's condition failed (add of a present item, ...).
    NotStored,
    /// The CAS unique did not match.
    Exists,
    Deleted,
    /// Arithmetic on a value that is not a decimal number below 2^64.
    NotANumber,
}

/// What a run of item operations did: each operation's outcome, in order,
/// and, when asked for the item's other replicas, what it wrote.
#[derive(Debug)]
pub struct ItemRun {
    pub outcomes: Vec<Result<ItemOutcome, ReplicaError>>,
    pub writes: Vec<ItemWrite>,
}

/// A write of a run: an operation's (`op`: its index in the run) or an
/// eviction's (`None`), as applied here.
#[derive(Debug, Clone)]
pub struct ItemWrite {
    pub op: Option<usize>,
    pub position: PartitionPosition,
    pub update: Partition,
}

/// Evictions between yields to the shard's other tasks.
const EVICTIONS_PER_YIELD: u64 = 64;

/// Partitions the start-up scan reads at a time.
const SCAN_PAGE_PARTITIONS: usize = 256;

/// Digits of the largest u64: a longer value is not a counter.
const COUNTER_DIGITS_MAX: usize = 20;

impl Database {
    /// Runs `ops` in order on this shard, which owns their keys, each to
    /// its own outcome: one that fails leaves the others to run, and the
    /// writes before it stay answered as applied (a client retries only
    /// what it was told failed). Waits, before answering, until each write
    /// among them is durable; a write whose wait fails answers that. With
    /// `for_replicas` (this node leads items other replicas also hold), the
    /// run also hands back what it wrote, evictions included, for them.
    pub async fn run_items(
        &self,
        table: ItemTable,
        ops: Vec<(PartitionPosition, ItemOp)>,
        for_replicas: bool,
        tokens: Tokens,
    ) -> ItemRun {
        let started = Instant::now();
        let mut ran = Vec::with_capacity(ops.len());
        let mut evictions = Durability::default();
        let mut wrote = false;
        let mut writes = Vec::new();
        // The clock, read again after each await: the reads between them
        // run at once (memcached reads its clock once a second).
        let mut now_s = clock::now_s();
        for (index, (position, op)) in ops.into_iter().enumerate() {
            let op_writes = op.writes();
            wrote |= op_writes;
            let result = match self.run_item_now(table, &position, op, for_replicas, tokens, now_s) {
                Ok(outcome) => outcome.map(|(outcome, durable)| (outcome, durable, None)),
                Err(op) => {
                    // What it writes may be kept (a lock's entry, a general
                    // partition, a replica's copy): its key is its own, not
                    // a cut of the request's buffer.
                    let position = match op_writes {
                        true => owned(position),
                        false => position,
                    };
                    let ran = self.run_item(table, position, op, for_replicas, tokens, now_s).await;
                    now_s = clock::now_s();
                    ran
                }
            };
            let result = result.map(|(outcome, durable, written)| {
                if let Some((position, update)) = written {
                    writes.push(ItemWrite { op: Some(index), position, update });
                }
                (outcome, durable)
            });
            if op_writes && result.is_ok() {
                let evicted = if for_replicas { Some(&mut writes) } else { None };
                // Only an eviction awaits: the clock is read again after one.
                if self.item_lru.victim(table.id, now_s).is_some() {
                    match self.evict_items(table, evicted, now_s).await {
                        Ok(durable) => evictions = evictions.and(durable),
                        // The write stands; a later one evicts again.
                        Err(e) => tracing::warn!("memcached items: eviction stopped, items stay over their limit: {e}"),
                    }
                    now_s = clock::now_s();
                }
            }
            ran.push(result);
        }
        // Entries of one log become durable in order: after the first wait
        // that blocks, the others find theirs durable already.
        let mut outcomes = Vec::with_capacity(ran.len());
        for result in ran {
            outcomes.push(match result {
                Ok((outcome, durable)) => durable.durable().await.map(|()| outcome),
                Err(e) => Err(e),
            });
        }
        if let Err(e) = evictions.durable().await {
            tracing::warn!("memcached items: evictions may not be durable (evicted items may come back): {e}");
        }
        if wrote {
            self.metrics.record_write(table.id, started.elapsed());
        } else {
            self.metrics.record_read(table.id, started.elapsed());
        }
        ItemRun { outcomes, writes }
    }

    /// Runs one operation at `now_s` (the caller's clock, read with no
    /// await since); its write is applied but not yet durable (and
    /// handed back with it `for_replicas`). The item's hints and LRU entry change only
    /// once its write applied, so a failed write leaves them as they were.
    async fn run_item(
        &self,
        table: ItemTable,
        position: PartitionPosition,
        op: ItemOp,
        for_replicas: bool,
        tokens: Tokens,
        now_s: i64,
    ) -> Result<(ItemOutcome, Durability, Option<(PartitionPosition, Partition)>), ReplicaError> {
        let _guard = match op.writes() {
            true => Some(self.lock_partition(table.id, position.clone()).await?),
            // Reads take no lock: the hints they change are changed
            // synchronously below, after the read's last await.
            false => None,
        };
        let stored = match op.reads() {
            true => self.table(table.id)?.read_found(&position, &[ClusteringRange::all()]).await?,
            false => None,
        };
        let current = stored.as_ref().and_then(|found| self.with_hints(table, &position, found.as_found_ref(), now_s));
        let (Decision { update, outcome, access }, lru) = decide_noted(op, current, now_s, &self.item_cas);
        // The read's share of the slot goes before the write, which may
        // then overwrite it in place.
        drop(stored);
        let (durable, written) = match update {
            Some(update) if !for_replicas => {
                // No await after the room is found: the write lands in it.
                self.wait_for_memtable_space().await;
                let store = self.table(table.id)?;
                (self.apply_item_now(&store, table, position.clone(), update, tokens, now_s)?, None)
            }
            Some(update) => {
                let partition = update.into_partition(table, now_s);
                let written = Some((position.clone(), partition.clone()));
                (self.apply_unsynced(table.id, position.clone(), partition, &[]).await?, written)
            }
            None => (Durability::default(), None),
        };
        self.note_item(table, &position, access, lru);
        Ok((outcome, durable, written))
    }

    /// Logs and applies `update` at once, for a caller that found room in
    /// the memtables with no await since ([`Database::apply_now`]). A live
    /// item goes as its cells lie: the value's bytes as the request brought
    /// them, the flags and CAS unique as words on the stack, encoded once
    /// into the commitlog entry and once into the memtable's compact slot,
    /// no `Partition` built (its key, which may be a cut of the request's
    /// buffer, copied only where a new slot keeps it). A deletion (or an
    /// item already expired) is a bare partition tombstone, which the
    /// memtable holds as such, its key copied likewise.
    fn apply_item_now(
        &self,
        store: &Table,
        table: ItemTable,
        position: PartitionPosition,
        update: ItemUpdate,
        tokens: Tokens,
        now_s: i64,
    ) -> Result<Durability, ReplicaError> {
        match update {
            ItemUpdate::Put { value, flags, cas, lifetime, timestamp } if lifetime.is_live(now_s) => {
                let flags = i64::from(flags).to_be_bytes();
                let cas = (cas as i64).to_be_bytes();
                let mut cells = [(table.value, &value[..]), (table.flags, &flags[..]), (table.cas, &cas[..])];
                cells.sort_unstable_by_key(|(id, _)| *id);
                let row = RowCells { timestamp, expiry: expiry(lifetime, now_s), cells: &cells };
                self.apply_now(store, table.id, position, Write::Row(row), tokens)
            }
            ItemUpdate::Put { timestamp, .. } | ItemUpdate::Delete { timestamp } => {
                let tombstone = Tombstone { timestamp, deletion_time_s: now_s };
                self.apply_now(store, table.id, position, Write::Tombstone(tombstone), tokens)
            }
        }
    }

    /// Runs an operation at once, without awaiting, where memory answers
    /// its read (`Table::with_found_in_memory`: a memtable or the row cache
    /// holds the item, or no SSTable can) and, if it may write, no other
    /// write holds the partition's lock and the memtables have room: its
    /// read and its write, with no await between them, are atomic on the
    /// shard without taking the lock, and a hit builds no future.
    /// `Err(op)` hands it back where the SSTables must be read, its write
    /// would wait, or it goes to other replicas too (`for_replicas`).
    fn run_item_now(
        &self,
        table: ItemTable,
        position: &PartitionPosition,
        op: ItemOp,
        for_replicas: bool,
        tokens: Tokens,
        now_s: i64,
    ) -> Result<Result<(ItemOutcome, Durability), ReplicaError>, ItemOp> {
        if op.writes() && (for_replicas || !self.has_memtable_room() || self.partition_locked(table.id, position)) {
            return Err(op);
        }
        let store = match self.table(table.id) {
            Ok(store) => store,
            Err(e) => return Ok(Err(e)),
        };
        let (Decision { update, outcome, access }, lru) = match op.reads() {
            true => {
                // Decided on the item where it lies: nothing kept from it
                // but what the decision keeps.
                store.with_found_in_memory(position, op, |op, found| {
                    let current = found.and_then(|found| self.with_hints(table, position, found, now_s));
                    decide_noted(op, current, now_s, &self.item_cas)
                })?
            }
            false => decide_noted(op, None, now_s, &self.item_cas),
        };
        let durable = match update {
            Some(update) => match self.apply_item_now(&store, table, position.clone(), update, tokens, now_s) {
                Ok(durable) => durable,
                Err(e) => return Ok(Err(e)),
            },
            None => Durability::default(),
        };
        self.note_item(table, position, access, lru);
        Ok(Ok((outcome, durable)))
    }

    /// Notes an operation's change to the item's hints and LRU entry, once
    /// its write (if any) applied.
    fn note_item(&self, table: ItemTable, position: &PartitionPosition, access: AccessUpdate, lru: LruUpdate) {
        match access {
            AccessUpdate::Keep => {}
            AccessUpdate::Set(access) => self.item_access.set(position.token, access),
            AccessUpdate::Forget => self.item_access.forget(position.token),
        }
        match lru {
            LruUpdate::Stored(value_bytes, lifetime) => {
                self.item_lru.stored(table.id, position.token, &position.key, value_bytes, lifetime)
            }
            LruUpdate::Removed => self.item_lru.removed(table.id, position.token),
            LruUpdate::Fetched => self.item_lru.fetched(table.id, position.token),
            LruUpdate::Keep => {}
        }
    }

    /// Deletes the least recently used items while the shard's items are
    /// over its limit. Each victim is deleted under its partition's lock,
    /// taken with no other held (so evictions cannot deadlock with
    /// operations), and only if still the least recently used once the
    /// lock is held. The deletions go to `evicted` too, when given.
    async fn evict_items(
        &self,
        table: ItemTable,
        mut evicted: Option<&mut Vec<ItemWrite>>,
        now_s: i64,
    ) -> Result<Durability, ReplicaError> {
        let mut durability = Durability::default();
        // Each pass removes an entry, or finds that an operation used the
        // victim while its lock was awaited: the list is finite.
        for pass in 0u64.. {
            let Some(victim) = self.item_lru.victim(table.id, now_s) else { break };
            if pass % EVICTIONS_PER_YIELD == EVICTIONS_PER_YIELD - 1 {
                shoal_runtime::yield_now().await;
            }
            let position = PartitionPosition { token: victim.token, key: victim.key.clone() };
            let _guard = self.lock_partition(table.id, position.clone()).await?;
            if !self.item_lru.evict(table.id, &victim, now_s) {
                continue;
            }
            self.item_access.forget(victim.token);
            if !victim.expired {
                let delete = ItemUpdate::Delete { timestamp: clock::next_write_timestamp_us() };
                let partition = delete.into_partition(table, now_s);
                if let Some(evicted) = evicted.as_deref_mut() {
                    evicted.push(ItemWrite { op: None, position: position.clone(), update: partition.clone() });
                }
                durability = durability.and(self.apply_unsynced(table.id, position, partition, &[]).await?);
            }
        }
        Ok(durability)
    }

    /// Bounds `table`'s items on this shard at `limit_bytes` (`None`: no
    /// bound, items are never evicted). The first call for a table fills
    /// the LRU list from what the table holds, in the background, oldest
    /// write last.
    pub fn track_items(self: &Rc<Self>, table: ItemTable, limit_bytes: Option<u64>) {
        if self.item_lru.track(table.id, limit_bytes) {
            let database = Rc::clone(self);
            shoal_runtime::spawn(async move {
                if let Err(e) = database.scan_items(table).await {
                    tracing::warn!("memcached items: cannot list the items table's items for eviction: {e}");
                }
            });
        }
    }

    /// Hands every live item on this shard to the LRU list, newest first.
    async fn scan_items(&self, table: ItemTable) -> Result<(), ReplicaError> {
        let store = self.table(table.id)?;
        let now_s = clock::now_s();
        let mut found = Vec::new();
        let mut after: Option<PartitionPosition> = None;
        loop {
            let from = after.as_ref().map_or(Bound::Unbounded, Bound::Excluded);
            let page = store.scan(from, Bound::Unbounded, &[ClusteringRange::all()], SCAN_PAGE_PARTITIONS).await?;
            let full = page.len() == SCAN_PAGE_PARTITIONS;
            for (position, partition) in page {
                if let Some(item) = item_read::live_item(table, &partition, now_s) {
                    found.push((
                        value_timestamp_us(table, &partition),
                        item.value.len(),
                        item.lifetime,
                        position.token,
                        position.key.clone(),
                    ));
                }
                after = Some(position);
            }
            if !full {
                break;
            }
        }
        found.sort_unstable_by_key(|(written_s, ..)| std::cmp::Reverse(*written_s));
        for (_, value_bytes, lifetime, token, key) in found {
            self.item_lru.found(table.id, token, &key, value_bytes, lifetime);
        }
        Ok(())
    }

    /// The shard's item count, bytes and evictions (memcached's `stats`).
    pub fn items_stats(&self, table: ItemTable) -> ItemLruStats {
        self.item_lru.stats(table.id)
    }

    /// The live item `found` holds, if any, with its hints.
    fn with_hints<'a>(
        &self,
        table: ItemTable,
        position: &PartitionPosition,
        found: FoundRef<'a>,
        now_s: i64,
    ) -> Option<Held<'a>> {
        let mut item = item_read::found_item(table, found, now_s)?;
        if let Some(access) = self.item_access.get(position.token) {
            item.access = access;
        }
        Some(item)
    }
}

/// `position` with a key of its own: a key cut from a request's buffer
/// would keep the whole buffer for as long as it is kept.
fn owned(position: PartitionPosition) -> PartitionPosition {
    PartitionPosition { key: Bytes::copy_from_slice(&position.key), ..position }
}

/// When the item's value was written (µs), for a live item's partition.
fn value_timestamp_us(table: ItemTable, partition: &Partition) -> i64 {
    match partition.rows.get(&Bytes::new()).and_then(|r| r.row.columns.get(&table.value)) {
        Some(ColumnData::Atomic(cell)) => cell.timestamp,
        _ => 0,
    }
}

/// [`decide`], and what the operation does to the item's place in the
/// LRU list.
fn decide_noted(op: ItemOp, current: Option<Held<'_>>, now_s: i64, uniques: &CasUniques) -> (Decision, LruUpdate) {
    let bumps = !matches!(op, ItemOp::Get(Fetch { no_bump: true, .. }));
    let decision = decide(op, current, now_s, uniques);
    let lru = match (&decision.update, &decision.outcome) {
        (Some(ItemUpdate::Put { value, lifetime, .. }), _) if lifetime.is_live(now_s) => {
            LruUpdate::Stored(value.len(), *lifetime)
        }
        (Some(_), _) | (None, ItemOutcome::Missing) => LruUpdate::Removed,
        (None, ItemOutcome::Found(_)) if bumps => LruUpdate::Fetched,
        (None, _) => LruUpdate::Keep,
    };
    (decision, lru)
}

/// What an operation does, given the item as it is: the item's new state
/// (none: unchanged), the answer, and the change to its hints.
struct Decision {
    update: Option<ItemUpdate>,
    outcome: ItemOutcome,
    access: AccessUpdate,
}

enum AccessUpdate {
    Keep,
    Set(Access),
    Forget,
}

/// What an operation does to the item's place in the LRU list.
enum LruUpdate {
    Keep,
    /// Stored live: its value's bytes and lifetime.
    Stored(usize, Lifetime),
    Removed,
    Fetched,
}

impl Decision {
    fn answer(outcome: ItemOutcome) -> Decision {
        Decision { update: None, outcome, access: AccessUpdate::Keep }
    }

    /// A write that makes a new item: fresh hints.
    fn write(update: ItemUpdate, outcome: ItemOutcome, now_s: i64) -> Decision {
        Decision { update: Some(update), outcome, access: AccessUpdate::Set(Access::written(now_s)) }
    }
}

/// A new state of an item, or its deletion.
enum ItemUpdate {
    Put { value: Bytes, flags: u32, cas: u64, lifetime: Lifetime, timestamp: i64 },
    Delete { timestamp: i64 },
}

impl ItemUpdate {
    fn into_partition(self, table: ItemTable, now_s: i64) -> Partition {
        let mut partition = Partition::default();
        match self {
            ItemUpdate::Delete { timestamp } => {
                partition.tombstone = Some(Tombstone { timestamp, deletion_time_s: now_s });
            }
            ItemUpdate::Put { lifetime: Lifetime::Until(at), timestamp, .. } if at <= now_s => {
                // Already expired (a negative or past exptime): gone at once.
                partition.tombstone = Some(Tombstone { timestamp, deletion_time_s: now_s });
            }
            ItemUpdate::Put { value, flags, cas, lifetime, timestamp } => {
                let expiry = expiry(lifetime, now_s);
                let cell = |bytes: Bytes| ColumnData::Atomic(Cell::live(timestamp, bytes, expiry));
                let mut row = Row::default();
                // Copied: a request's value is cut from its connection's
                // read buffer, which this partition (held in a memtable,
                // or kept as a hint for a replica) must not hold.
                row.columns.insert(table.value, cell(Bytes::copy_from_slice(&value)));
                row.columns.insert(table.flags, cell(Bytes::copy_from_slice(&i64::from(flags).to_be_bytes())));
                row.columns.insert(table.cas, cell(Bytes::copy_from_slice(&(cas as i64).to_be_bytes())));
                partition.rows.insert(Bytes::new(), ClusteredRow { clustering: Vec::new(), row });
            }
        }
        partition
    }
}

/// The cells' expiry for an item of `lifetime` written at `now_s`.
fn expiry(lifetime: Lifetime, now_s: i64) -> Option<Expiry> {
    match lifetime {
        Lifetime::Forever => None,
        Lifetime::Until(at) => Some(Expiry { ttl_s: i32::try_from(at - now_s).unwrap_or(i32::MAX), expires_at_s: at }),
    }
}

/// A fetch of a present item: whether it wins the token to recache (it is
/// stale, or expires within `recache_within_s`, and no client got the
/// token yet), and its hints after the fetch.
fn fetched(mut item: Item, fetch: &Fetch, now_s: i64) -> (Item, Access) {
    let before = item.access;
    let expires_soon = match (fetch.recache_within_s, item.lifetime) {
        (Some(within_s), Lifetime::Until(at)) => at - now_s < within_s,
        _ => false,
    };
    item.won = !before.token_sent && (before.stale || expires_soon);
    let mut after = Access { token_sent: before.token_sent || item.won, ..before };
    if !fetch.no_bump {
        after.last_s = now_s;
        after.fetched = true;
    }
    (item, after)
}

/// What `op` does to the item as it is (`None` also for an operation that
/// does not read it). A new CAS unique is the shard's next one above the
/// item's current one when known ([`CasUniques::next_above`]).
fn decide(op: ItemOp, current: Option<Held<'_>>, now_s: i64, uniques: &CasUniques) -> Decision {
    // Taken only by a write: the clock's write timestamps are for writes.
    let timestamp = clock::next_write_timestamp_us;
    let current_cas = current.as_ref().map_or(0, |item| item.cas);
    let put = |value: Bytes, flags: u32, lifetime: Lifetime, new_cas: Option<u64>| {
        let timestamp = timestamp();
        let cas = new_cas.unwrap_or_else(|| uniques.next_above(current_cas));
        (ItemUpdate::Put { value, flags, cas, lifetime, timestamp }, cas)
    };
    let cas_mismatch = |compare: Option<u64>, item: &Option<Held>| match (compare, item) {
        (Some(expected), Some(item)) => item.cas != expected,
        _ => false,
    };
    let missing = || Decision::answer(ItemOutcome::Missing);
    match op {
        ItemOp::Get(fetch) => match (current, fetch.vivify) {
            (None, None) => missing(),
            (None, Some(lifetime)) => {
                let (update, cas) = put(Bytes::new(), 0, lifetime, None);
                let access = Access::written(now_s);
                let item = Item { value: Bytes::new(), flags: 0, cas, lifetime, access, won: true };
                let access = AccessUpdate::Set(Access { token_sent: true, ..access });
                Decision { update: Some(update), outcome: ItemOutcome::Found(item), access }
            }
            (Some(item), _) => {
                let (item, after) = fetched(item.into_item(), &fetch, now_s);
                let access = if after == item.access { AccessUpdate::Keep } else { AccessUpdate::Set(after) };
                let Some(lifetime) = fetch.touch else {
                    return Decision { update: None, outcome: ItemOutcome::Found(item), access };
                };
                let (update, _) = put(item.value.clone(), item.flags, lifetime, Some(item.cas));
                Decision { update: Some(update), outcome: ItemOutcome::Found(Item { lifetime, ..item }), access }
            }
        },
        ItemOp::Touch { lifetime } => match current {
            None => missing(),
            Some(item) => {
                let (item, after) = fetched(item.into_item(), &Fetch::default(), now_s);
                let (update, _) = put(item.value.clone(), item.flags, lifetime, Some(item.cas));
                let outcome = ItemOutcome::Found(Item { lifetime, ..item });
                Decision { update: Some(update), outcome, access: AccessUpdate::Set(after) }
            }
        },
        ItemOp::Delete { compare_cas } => match &current {
            None => missing(),
            _ if cas_mismatch(compare_cas, &current) => Decision::answer(ItemOutcome::Exists),
            Some(_) => Decision {
                update: Some(ItemUpdate::Delete { timestamp: timestamp() }),
                outcome: ItemOutcome::Deleted,
                access: AccessUpdate::Forget,
            },
        },
        ItemOp::Invalidate { compare_cas, lifetime, new_cas } => match current {
            None => missing(),
            Some(item) if compare_cas.is_some_and(|c| c != item.cas) => Decision::answer(ItemOutcome::Exists),
            Some(item) => {
                let item = item.into_item();
                let (update, _) = put(item.value, item.flags, lifetime.unwrap_or(item.lifetime), new_cas);
                let access = Access { stale: true, token_sent: false, ..item.access };
                Decision { update: Some(update), outcome: ItemOutcome::Deleted, access: AccessUpdate::Set(access) }
            }
        },
        ItemOp::Store(store) => {
            let Some(item) = &current else {
                if store.compare_cas.is_some() {
                    return missing();
                }
                let lifetime = match store.mode {
                    StoreMode::Set | StoreMode::Add => store.lifetime,
                    _ => match store.vivify {
                        Some(lifetime) => lifetime,
                        None => return Decision::answer(ItemOutcome::NotStored),
                    },
                };
                let (update, cas) = put(store.value, store.flags, lifetime, store.new_cas);
                return Decision::write(update, ItemOutcome::Stored { cas }, now_s);
            };
            if let Some(compare) = store.compare_cas.filter(|c| *c != item.cas) {
                if !(store.stale_if_older && compare < item.cas) {
                    return Decision::answer(ItemOutcome::Exists);
                }
                // An older writer's value, kept as stale until a fresh one
                // comes: memcached's serve-stale.
                let (update, cas) = put(store.value, store.flags, item.lifetime, store.new_cas);
                let access = Access { stale: true, token_sent: item.access.token_sent, ..Access::written(now_s) };
                let access = AccessUpdate::Set(access);
                return Decision { update: Some(update), outcome: ItemOutcome::Stored { cas }, access };
            }
            let (value, flags, lifetime) = match store.mode {
                StoreMode::Add => return Decision::answer(ItemOutcome::NotStored),
                StoreMode::Append => (item.with_value(|held| concat(held, &store.value)), item.flags, item.lifetime),
                StoreMode::Prepend => (item.with_value(|held| concat(&store.value, held)), item.flags, item.lifetime),
                StoreMode::Set | StoreMode::Replace => (store.value, store.flags, store.lifetime),
            };
            let (update, cas) = put(value, flags, lifetime, store.new_cas);
            Decision::write(update, ItemOutcome::Stored { cas }, now_s)
        }
        ItemOp::Arith(arith) => {
            if cas_mismatch(arith.compare_cas, &current) {
                return Decision::answer(ItemOutcome::Exists);
            }
            let (number, flags, lifetime) = match &current {
                None => match arith.create {
                    // A created counter starts at its initial value; the
                    // delta is not applied (memcached's `ma N J`).
                    Some((initial, lifetime)) => (initial, 0, lifetime),
                    None => return missing(),
                },
                Some(item) => {
                    let Some(number) = item.with_value(parse_counter) else {
                        return Decision::answer(ItemOutcome::NotANumber);
                    };
                    let next = if arith.decrement {
                        number.saturating_sub(arith.delta)
                    } else {
                        number.wrapping_add(arith.delta)
                    };
                    (next, item.flags, arith.touch.unwrap_or(item.lifetime))
                }
            };
            let value = decimal(number);
            let (update, cas) = put(value.clone(), flags, lifetime, arith.new_cas);
            let item = Item { value, flags, cas, lifetime, access: Access::written(now_s), won: false };
            Decision::write(update, ItemOutcome::Found(item), now_s)
        }
    }
}

/// Bytes of the shard's chunk that counters' digits are cut from.
const DIGITS_CHUNK_BYTES: usize = 4096;

thread_local! {
    /// What is left of the shard's chunk of digits ([`decimal`]).
    static DIGITS: std::cell::RefCell<BytesMut> = std::cell::RefCell::new(BytesMut::new());
}

/// A number's decimal digits, as bytes the written item and the answer
/// share: cut from the shard's chunk, a reference count each, so that
/// a chunk's two allocations (its bytes and, at its first cut, its shared
/// count) serve ~200 counters. The memtable and the commitlog copy the
/// digits, and an answer lives until it is written: a chunk is freed soon
/// after its last cut.
fn decimal(number: u64) -> Bytes {
    let mut buffer = itoa::Buffer::new();
    let text = buffer.format(number).as_bytes();
    DIGITS.with_borrow_mut(|chunk| {
        if chunk.capacity() - chunk.len() < text.len() {
            *chunk = BytesMut::with_capacity(DIGITS_CHUNK_BYTES);
        }
        chunk.extend_from_slice(text);
        chunk.split().freeze()
    })
}

fn concat(a: &[u8], b: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(a.len() + b.len());
    out.extend_from_slice(a);
    out.extend_from_slice(b);
    Bytes::from(out)
}

/// A value holding a decimal number below 2^64 (trailing spaces allowed:
/// memcached pads a decremented value that got shorter).
fn parse_counter(value: &[u8]) -> Option<u64> {
    let digits = value.strip_suffix(b" ").map_or(value, |v| {
        let end = v.iter().rposition(|b| *b != b' ').map_or(0, |i| i + 1);
        &v[..end]
    });
    if digits.is_empty() || digits.len() > COUNTER_DIGITS_MAX || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;

    fn set(value: &'static [u8]) -> ItemOp {
        ItemOp::Store(Store {
            mode: StoreMode::Set,
            value: Bytes::from_static(value),
            flags: 0,
            lifetime: Lifetime::Forever,
            compare_cas: None,
            new_cas: None,
            vivify: None,
            stale_if_older: false,
        })
    }

    fn item(cas: u64) -> Held<'static> {
        let access = Access::written(0);
        Held::of(Item {
            value: Bytes::from_static(b"v"),
            flags: 0,
            cas,
            lifetime: Lifetime::Forever,
            access,
            won: false,
        })
    }

    fn stored_cas(decision: Decision) -> u64 {
        match decision.outcome {
            ItemOutcome::Stored { cas } => cas,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_counter_is_its_decimal_digits_shared_by_the_write_and_the_answer() {
        for (number, text) in [(0, "0"), (9, "9"), (10, "10"), (u64::MAX, "18446744073709551615")] {
            let value = decimal(number);
            assert_eq!(&value[..], text.as_bytes());
            assert_eq!(value.clone().as_ptr(), value.as_ptr(), "a clone is the same bytes");
            assert_eq!(parse_counter(&value), Some(number));
        }
        // Cut one after another from chunks, none overwrites another.
        let numbers: Vec<u64> = (0..2_000u64).map(|n| n.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (n % 64)).collect();
        let kept: Vec<Bytes> = numbers.iter().map(|n| decimal(*n)).collect();
        for (number, value) in numbers.iter().zip(&kept) {
            assert_eq!(&value[..], number.to_string().as_bytes());
        }
    }

    #[test]
    fn cas_uniques_grow_per_key_and_stay_small_past_a_cql_timestamp() {
        let counter = CasUniques::new(0, 1);
        assert_eq!(stored_cas(decide(set(b"a"), None, 0, &counter)), 1);
        // Above the item's unique, and the counter follows it.
        assert_eq!(stored_cas(decide(set(b"b"), Some(item(40)), 0, &counter)), 41);
        assert_eq!(stored_cas(decide(set(b"c"), None, 0, &counter)), 42);
        // A CQL row reports its write timestamp: go above it, but the
        // shard's next uniques stay small.
        let timestamp_us = 1_795_617_543_956_202;
        assert_eq!(stored_cas(decide(set(b"d"), Some(item(timestamp_us)), 0, &counter)), timestamp_us + 1);
        assert_eq!(stored_cas(decide(set(b"e"), None, 0, &counter)), 44);
    }

    /// `ks.items`, the items table's shape, in this thread's database
    /// (no storage: nothing logged, so nothing to wait for).
    fn items_table(database: &Database) -> ItemTable {
        use shoal_schema::{ClusteringOrder, ColumnKind, ColumnMeta, CqlType, KeyspaceMeta, Schema, TableMeta};
        let column = |id, name: &str, ty, kind| ColumnMeta {
            id,
            name: name.into(),
            ty,
            kind,
            position: if kind == ColumnKind::PartitionKey { 0 } else { -1 },
            order: ClusteringOrder::Asc,
        };
        let meta = TableMeta {
            id: Uuid::from_u128(7),
            keyspace: "ks".into(),
            name: "items".into(),
            columns: vec![
                column(0, "key", CqlType::Blob, ColumnKind::PartitionKey),
                column(1, "value", CqlType::Blob, ColumnKind::Regular),
                column(2, "flags", CqlType::Bigint, ColumnKind::Regular),
                column(3, "cas", CqlType::Bigint, ColumnKind::Regular),
            ],
            options: Default::default(),
            next_column_id: 4,
            indexes: Vec::new(),
            view_of: None,
            materialized: None,
            dropped_columns: Default::default(),
        };
        let keyspace = KeyspaceMeta {
            name: "ks".into(),
            replication: Default::default(),
            durable_writes: true,
            tables: [("items".to_string(), std::sync::Arc::new(meta))].into(),
            types: Default::default(),
            functions: Default::default(),
        };
        let schema =
            Schema { keyspaces: [("ks".to_string(), std::sync::Arc::new(keyspace))].into(), ..Schema::empty() };
        database.set_schema(std::sync::Arc::new(schema), None);
        ItemTable { id: Uuid::from_u128(7), value: 1, flags: 2, cas: 3 }
    }

    fn at(key: &'static [u8]) -> PartitionPosition {
        let key = Bytes::from_static(key);
        PartitionPosition { token: shoal_schema::murmur3_token(&key), key }
    }

    fn incr() -> ItemOp {
        ItemOp::Arith(Arith { decrement: false, delta: 1, create: None, compare_cas: None, new_cas: None, touch: None })
    }

    fn value(outcome: &Result<ItemOutcome, ReplicaError>) -> &[u8] {
        match outcome {
            Ok(ItemOutcome::Found(item)) => &item.value,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_operation_that_fails_fails_alone() {
        let (done, finished) = std::sync::mpsc::channel();
        // The database is a shard's: run on one.
        let shards = shoal_runtime::start_shards(1, None, move |_| {
            let done = done.clone();
            async move {
                let database = crate::local();
                let table = items_table(&database);
                // Filed under a token that is not its key's: the write is
                // refused, as a replica refuses any such write.
                let misfiled = PartitionPosition { token: at(b"b").token.wrapping_add(1), ..at(b"b") };
                let ops = vec![
                    (at(b"n"), set(b"1")),
                    (at(b"n"), incr()),
                    (misfiled, set(b"x")),
                    (at(b"n"), incr()),
                    (at(b"n"), ItemOp::Get(Fetch::default())),
                ];
                let outcomes = database.run_items(table, ops, false, Tokens::Received).await.outcomes;
                let get = vec![(at(b"b"), ItemOp::Get(Fetch::default()))];
                let again = database.run_items(table, get, false, Tokens::Received).await;
                let again = again.outcomes;
                let _ = done.send((outcomes, again, database.items_stats(table).items));
            }
        });
        assert!(shards.is_ok());
        let (outcomes, again, items) =
            finished.recv_timeout(std::time::Duration::from_secs(10)).expect("the shard ran the operations");
        assert_eq!(outcomes.len(), 5);
        assert!(matches!(outcomes[0], Ok(ItemOutcome::Stored { .. })), "{:?}", outcomes[0]);
        // Applied before the failure, and answered as applied.
        assert_eq!(value(&outcomes[1]), b"2");
        assert!(matches!(outcomes[2], Err(ReplicaError::WrongToken { .. })), "{:?}", outcomes[2]);
        // Run after it.
        assert_eq!(value(&outcomes[3]), b"3");
        assert_eq!(value(&outcomes[4]), b"3");
        // The refused write left no item, nor an entry in the LRU list.
        assert!(matches!(again[..], [Ok(ItemOutcome::Missing)]), "{again:?}");
        assert_eq!(items, 1);
    }

    #[test]
    fn counters_are_decimal_below_two_to_the_64() {
        assert_eq!(parse_counter(b"0"), Some(0));
        assert_eq!(parse_counter(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_counter(b"18446744073709551616"), None);
        assert_eq!(parse_counter(b"9 "), Some(9));
        assert_eq!(parse_counter(b""), None);
        assert_eq!(parse_counter(b"-1"), None);
        assert_eq!(parse_counter(b"1a"), None);
    }
}
