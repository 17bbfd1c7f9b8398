//! Reading from one shard: turning stored partitions into live result rows.
//!
//! Here tombstones and expiry are applied with the reader's clock, static
//! columns are joined to their partition's rows, filters run, and the row and
//! per-partition limits stop the read. A result carries where it stopped, so
//! the coordinator can page and merge results of several shards in ring order.

use std::ops::Bound;

use bytes::Bytes;
use shoal_schema::index::LIVENESS_COLUMN;
use shoal_schema::{collection, fields};
use shoal_schema::{CqlType, TableMeta};
use shoal_storage::{
    Cell, ClusteredRow, ClusteringRange, ColumnData, Partition, PartitionPosition, Row, Table, Tombstone,
};
use uuid::Uuid;

use crate::database::ReplicaError;
use crate::filter::{self, RowFilter};

/// Partitions scanned per storage call in a range read: bounds the memory of
/// one step while rows are filtered out.
const SCAN_BATCH_PARTITIONS: usize = 64;

#[derive(Debug, Clone)]
pub enum PartitionSelection {
    /// These partitions, read in ring order whatever the order given.
    Keys(Vec<PartitionPosition>),
    /// Every partition between the bounds, in ring order.
    Range { from: Bound<PartitionPosition>, to: Bound<PartitionPosition> },
}

/// A row's place in a result, for paging: partition, then clustering key
/// (its order-preserving encoding; `None` for a partition's static row).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RowPosition {
    pub partition: PartitionPosition,
    pub clustering: Option<Bytes>,
}

#[derive(Debug, Clone)]
pub struct ReadCommand {
    pub table: Uuid,
    pub partitions: PartitionSelection,
    /// Never empty; `[ClusteringRange::all()]` reads whole partitions.
    pub clustering: Vec<ClusteringRange>,
    /// Rows of a partition in descending clustering order.
    pub reversed: bool,
    pub filters: Vec<RowFilter>,
    /// One row per partition, holding the partition key and static columns.
    pub distinct: bool,
    pub row_limit: usize,
    pub per_partition_limit: usize,
    /// Resume after this row (paging); rows at or before it are skipped.
    pub start_after: Option<RowPosition>,
    /// Rows earlier pages returned from `start_after`'s partition: they
    /// count against `per_partition_limit`.
    pub start_partition_rows: usize,
    /// The reader's clock: what has expired by now is gone.
    pub now_s: i64,
    /// Neither served from nor filling the row cache (`BYPASS CACHE`).
    pub bypass_cache: bool,
}

impl ReadCommand {
    /// Every row of `clustering` in the partitions at `keys`, unlimited and
    /// unfiltered, as read at `now_s`: the reads the coordinator makes of
    /// its own accord (a conditional write's catch-up, repair).
    pub fn of_partitions(
        table: Uuid,
        keys: Vec<PartitionPosition>,
        clustering: Vec<ClusteringRange>,
        now_s: i64,
    ) -> ReadCommand {
        ReadCommand {
            table,
            partitions: PartitionSelection::Keys(keys),
            clustering,
            reversed: false,
            filters: Vec::new(),
            distinct: false,
            row_limit: usize::MAX,
            per_partition_limit: usize::MAX,
            start_after: None,
            start_partition_rows: 0,
            now_s,
            bypass_cache: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultCell {
    pub value: Bytes,
    /// Write timestamp (µs); for a collection, its newest element's.
    pub timestamp: i64,
    pub ttl_s: Option<i32>,
    /// A non-frozen map's or set's live elements, by key in key order,
    /// with their own write times (`WRITETIME(m[k])`, `TTL(s[e])`); empty
    /// for every other column.
    pub elements: Vec<ElementStamp>,
}

/// One collection element's key with its write timestamp and TTL left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElementStamp {
    pub key: Bytes,
    pub timestamp: i64,
    pub ttl_s: Option<i32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultRow {
    pub position: RowPosition,
    /// The clustering key values (empty for a static-only row).
    pub clustering: Vec<Bytes>,
    /// Static and regular columns by the table's column index; `None` for key
    /// columns and for null cells.
    pub cells: Vec<Option<ResultCell>>,
}

#[derive(Debug, Clone, Default)]
pub struct ReadResult {
    pub rows: Vec<ResultRow>,
    /// Whether the read stopped at a limit (so more rows may follow).
    pub limit_reached: bool,
}

pub(crate) async fn execute(
    meta: &TableMeta,
    table: &Table,
    command: &ReadCommand,
) -> Result<ReadResult, ReplicaError> {
    assert!(!command.clustering.is_empty(), "a read asks for at least one clustering range");
    let mut reader = Reader::new(meta, command);
    match &command.partitions {
        PartitionSelection::Keys(keys) => {
            let mut keys = keys.clone();
            keys.sort();
            keys.dedup();
            for position in keys {
                if reader.before_start(&position) {
                    continue;
                }
                let partition = match command.bypass_cache {
                    true => table.read_bypassing_cache(&position, &command.clustering).await?,
                    false => table.read_shared(&position, &command.clustering).await?,
                };
                if let Some(partition) = partition {
                    reader.emit_partition(&position, &partition)?;
                }
                if reader.result.limit_reached {
                    break;
                }
            }
        }
        PartitionSelection::Range { from, to } => {
            let mut from = match &command.start_after {
                Some(start) if range_contains_start(from, &start.partition) => Bound::Included(start.partition.clone()),
                _ => from.clone(),
            };
            loop {
                let batch = table.scan(from.as_ref(), to.as_ref(), &command.clustering, SCAN_BATCH_PARTITIONS).await?;
                for (position, partition) in &batch {
                    reader.emit_partition(position, partition)?;
                    if reader.result.limit_reached {
                        return Ok(reader.result);
                    }
                }
                match batch.last() {
                    Some((last, _)) if batch.len() == SCAN_BATCH_PARTITIONS => from = Bound::Excluded(last.clone()),
                    _ => break,
                }
            }
        }
    }
    Ok(reader.result)
}

/// The rows `command` asks of one partition already in hand (a
/// coordinator's merge of replicas' copies), as a read of this shard
/// would return them.
pub fn rows_of(
    meta: &TableMeta,
    command: &ReadCommand,
    position: &PartitionPosition,
    partition: &Partition,
) -> Result<ReadResult, ReplicaError> {
    let mut reader = Reader::new(meta, command);
    if ClusteringRange::is_whole(&command.clustering) {
        reader.emit_partition(position, partition)?;
    } else {
        reader.emit_partition(position, &partition.slice(&command.clustering))?;
    }
    Ok(reader.result)
}

fn range_contains_start(from: &Bound<PartitionPosition>, start: &PartitionPosition) -> bool {
    match from {
        Bound::Included(f) => start >= f,
        Bound::Excluded(f) => start > f,
        Bound::Unbounded => true,
    }
}

struct Reader<'a> {
    meta: &'a TableMeta,
    command: &'a ReadCommand,
    /// In a materialized view, the column of its liveness column: a view
    /// row lives by it alone (`shoal_schema::view`).
    liveness: Option<usize>,
    result: ReadResult,
}

impl<'a> Reader<'a> {
    fn new(meta: &'a TableMeta, command: &'a ReadCommand) -> Reader<'a> {
        let liveness = meta.materialized.as_ref().and_then(|_| meta.column_index(LIVENESS_COLUMN));
        Reader { meta, command, liveness, result: ReadResult::default() }
    }

    fn before_start(&self, position: &PartitionPosition) -> bool {
        self.command.start_after.as_ref().is_some_and(|s| position < &s.partition)
    }

    fn emit_partition(&mut self, position: &PartitionPosition, partition: &Partition) -> Result<(), ReplicaError> {
        if self.before_start(position) {
            return Ok(());
        }
        let resume_in_partition = match &self.command.start_after {
            Some(start) if &start.partition == position => match &start.clustering {
                // Paged past this partition's only (static or distinct) row.
                None => return Ok(()),
                Some(key) => Some(key.clone()),
            },
            _ => None,
        };
        let mut emitted = match resume_in_partition {
            Some(_) => self.command.start_partition_rows,
            None => 0,
        };
        if emitted >= self.command.per_partition_limit {
            return Ok(());
        }
        let statics = self.live_cells(&partition.static_row, partition.tombstone)?;
        let rows: Box<dyn Iterator<Item = (&Bytes, &ClusteredRow)>> =
            if self.command.reversed { Box::new(partition.rows.iter().rev()) } else { Box::new(partition.rows.iter()) };
        for (key, clustered) in rows {
            if let Some(resume) = &resume_in_partition {
                let done = if self.command.reversed { key >= resume } else { key <= resume };
                if done {
                    continue;
                }
            }
            let deletion = partition.deletion_for_row(key);
            let Some(mut cells) = self.live_row(&clustered.row, deletion)? else { continue };
            merge_statics(&mut cells, &statics);
            let row = ResultRow {
                position: RowPosition { partition: position.clone(), clustering: Some(key.clone()) },
                clustering: clustered.clustering.clone(),
                cells,
            };
            if self.command.distinct {
                return self.push_distinct(position, row.cells);
            }
            if !self.accept(&row)? {
                continue;
            }
            self.result.rows.push(row);
            emitted += 1;
            if self.limits_reached(emitted) {
                return Ok(());
            }
        }
        let static_live = statics.iter().any(Option::is_some);
        let whole_partition = self.command.clustering.iter().any(|r| r == &ClusteringRange::all());
        if emitted == 0 && static_live && (whole_partition || self.command.distinct) && resume_in_partition.is_none() {
            let row = ResultRow {
                position: RowPosition { partition: position.clone(), clustering: None },
                clustering: Vec::new(),
                cells: statics,
            };
            if self.accept(&row)? {
                self.result.rows.push(row);
                self.limits_reached(1);
            }
        }
        Ok(())
    }

    fn push_distinct(
        &mut self,
        position: &PartitionPosition,
        cells: Vec<Option<ResultCell>>,
    ) -> Result<(), ReplicaError> {
        let row = ResultRow {
            position: RowPosition { partition: position.clone(), clustering: None },
            clustering: Vec::new(),
            cells,
        };
        if self.accept(&row)? {
            self.result.rows.push(row);
            self.limits_reached(1);
        }
        Ok(())
    }

    fn limits_reached(&mut self, emitted_in_partition: usize) -> bool {
        if self.result.rows.len() >= self.command.row_limit {
            self.result.limit_reached = true;
            return true;
        }
        emitted_in_partition >= self.command.per_partition_limit
    }

    fn accept(&self, row: &ResultRow) -> Result<bool, ReplicaError> {
        filter::matches_all(self.meta, &self.command.filters, row)
    }

    /// The row's live cells, or `None` when the row is dead (no live marker
    /// and no live cell, or deleted).
    fn live_row(
        &self,
        row: &Row,
        covering: Option<Tombstone>,
    ) -> Result<Option<Vec<Option<ResultCell>>>, ReplicaError> {
        let deletion = merge_tombstones(covering, row.deletion);
        let marker_live = row.marker.is_some_and(|m| {
            deletion.is_none_or(|d| !d.shadows(m.timestamp))
                && m.expiry.is_none_or(|e| e.expires_at_s > self.command.now_s)
        });
        let cells = self.live_cells(row, deletion)?;
        let live = match self.liveness {
            Some(liveness) => cells[liveness].is_some(),
            None => marker_live || cells.iter().any(Option::is_some),
        };
        Ok(live.then_some(cells))
    }

    fn live_cells(&self, row: &Row, deletion: Option<Tombstone>) -> Result<Vec<Option<ResultCell>>, ReplicaError> {
        let deletion = merge_tombstones(deletion, row.deletion);
        let mut cells = vec![None; self.meta.columns.len()];
        for (index, column) in self.meta.columns.iter().enumerate() {
            if column.kind.is_primary_key() {
                continue;
            }
            let Some(data) = row.columns.get(&column.id) else { continue };
            let deletion = merge_tombstones(deletion, dropped_tombstone(self.meta, column.id));
            cells[index] = match data {
                ColumnData::Atomic(cell) => self.live_atomic(cell, deletion),
                ColumnData::Collection(collection) => {
                    let tombstone = merge_tombstones(deletion, collection.tombstone);
                    let live: Vec<(&Bytes, &Cell)> = collection
                        .cells
                        .values()
                        .filter(|c| tombstone.is_none_or(|t| !t.shadows(c.cell.timestamp)))
                        .filter(|c| c.cell.live_value(self.command.now_s).is_some())
                        .map(|c| (&c.key, &c.cell))
                        .collect();
                    serialize_collection(&column.ty, &live, self.command.now_s)
                }
            };
        }
        Ok(cells)
    }

    fn live_atomic(&self, cell: &Cell, deletion: Option<Tombstone>) -> Option<ResultCell> {
        if deletion.is_some_and(|d| d.shadows(cell.timestamp)) {
            return None;
        }
        let value = cell.live_value(self.command.now_s)?;
        let ttl_s = cell.expiry().map(|e| (e.expires_at_s - self.command.now_s).clamp(0, i32::MAX as i64) as i32);
        Some(ResultCell { value, timestamp: cell.timestamp, ttl_s, elements: Vec::new() })
    }
}

/// What dropping column `id` (or an earlier column of its name) did to
/// its cells: a deletion at the drop's time, as Cassandra and ScyllaDB
/// read a re-added column (its cells from before the drop never return).
pub(crate) fn dropped_tombstone(meta: &TableMeta, id: u32) -> Option<Tombstone> {
    // The deletion time only matters to purging, which compaction does
    // from the schema, never from this tombstone.
    meta.dropped_at_us(id).map(|timestamp| Tombstone { timestamp, deletion_time_s: 0 })
}

/// The stronger of two deletions (the later timestamp).
pub(crate) fn merge_tombstones(a: Option<Tombstone>, b: Option<Tombstone>) -> Option<Tombstone> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b.timestamp > a.timestamp { b } else { a }),
        (a, b) => a.or(b),
    }
}

fn merge_statics(cells: &mut [Option<ResultCell>], statics: &[Option<ResultCell>]) {
    for (cell, stat) in cells.iter_mut().zip(statics) {
        if cell.is_none() && stat.is_some() {
            cell.clone_from(stat);
        }
    }
}

/// A live collection as clients read it (protocol v4 serialization); an
/// empty collection reads as null, as in Cassandra.
fn serialize_collection(ty: &CqlType, live: &[(&Bytes, &Cell)], now_s: i64) -> Option<ResultCell> {
    if live.is_empty() {
        return None;
    }
    let values: Vec<Bytes> = live.iter().map(|(_, cell)| cell.live_value(now_s).unwrap_or_default()).collect();
    let keys = live.iter().map(|(key, _)| Some(&key[..]));
    let value = match ty {
        CqlType::List(_) => collection::serialize(values.iter().map(|v| Some(&v[..])), live.len()),
        CqlType::Set(_) => collection::serialize(keys, live.len()),
        // A non-frozen user type: one cell per field, the missing ones null.
        CqlType::Udt(udt) => {
            let mut parts: Vec<Option<&[u8]>> = vec![None; udt.fields.len()];
            for ((key, _), value) in live.iter().zip(&values) {
                match fields::index_of_key(key).and_then(|i| parts.get_mut(i)) {
                    Some(field) => *field = Some(&value[..]),
                    // A field dropped from the type since (ALTER TYPE
                    // cannot drop one) or a malformed key: not shown.
                    None => continue,
                }
            }
            Bytes::from(fields::join(parts))
        }
        _ => collection::serialize_map(keys.zip(&values).flat_map(|(k, v)| [k, Some(&v[..])]), live.len()),
    };
    let ttl_left = |cell: &Cell| cell.expiry().map(|e| (e.expires_at_s - now_s).max(0) as i32);
    let timestamp = live.iter().map(|(_, c)| c.timestamp).max().unwrap_or_default();
    let ttl_s = live.iter().filter_map(|(_, c)| ttl_left(c)).max();
    // A list's keys are time-based positions no selector names.
    let elements = match ty {
        CqlType::List(_) => Vec::new(),
        _ => live
            .iter()
            .map(|(key, cell)| ElementStamp { key: (*key).clone(), timestamp: cell.timestamp, ttl_s: ttl_left(cell) })
            .collect(),
    };
    Some(ResultCell { value, timestamp, ttl_s, elements })
}
