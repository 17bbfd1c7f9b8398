//! Reading from one shard: turning stored partitions into live result rows.
//!
//! Here tombstones and expiry are applied with the reader's clock, static
//! columns are joined to their partition's rows, filters run, and the row and
//! per-partition limits stop the read. A result carries where it stopped, so
//! the coordinator can page and merge results of several shards in ring order.
//!
//! A paged read also stops once it has passed `tombstone_limit` tombstones
//! (ScyllaDB's `query_tombstone_page_limit`), even with no row to return:
//! partition tombstones, deleted or otherwise dead rows that still hold a
//! deletion or expired data (rows a wider deletion shadows do not count,
//! as ScyllaDB compacts them away before counting), and both bounds of each
//! range tombstone. Such a stop is reported as a [`ShortStop`] naming the
//! position reached, which may lie on a range tombstone's bound, before a
//! key (`at_key`). Counting only touches tombstones: a read of live data
//! pays one branch per partition.

use std::ops::Bound;

use bytes::Bytes;
use shoal_schema::index::LIVENESS_COLUMN;
use shoal_schema::{collection, fields};
use shoal_schema::{CqlType, TableMeta};
use shoal_storage::{
    Cell, ClusteredRow, ClusteringRange, ColumnData, Found, Partition, PartitionPosition, Row, SharedRow, Table,
    Tombstone,
};
use uuid::Uuid;

use crate::database::ReplicaError;
use crate::filter::{self, RowFilter};
use crate::shared_row;
use crate::tombstone_limit::{dead_row_counts, range_tombstone_points, Point, Resume};

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
    /// `start_after`'s clustering key is itself still to read: the read
    /// resumes at it (a page cut on a range tombstone's bound before it).
    pub start_at_key: bool,
    /// Tombstones past which the read stops with a [`ShortStop`];
    /// `usize::MAX` for none (unpaged and internal reads).
    pub tombstone_limit: usize,
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
            start_at_key: false,
            tombstone_limit: usize::MAX,
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
    /// Set when the read stopped at its tombstone limit: where to resume,
    /// at or after its last row. `limit_reached` is then set too.
    /// Boxed: rarely set, and a result moves through several futures.
    pub short: Option<Box<ShortStop>>,
}

/// Where a read cut short by its tombstone limit stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShortStop {
    /// Everything up to here has been read; a clustering of `None` is the
    /// end of the partition.
    pub position: RowPosition,
    /// The position lies just before its clustering key, in read order,
    /// which is still to read.
    pub at_key: bool,
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
                let found = match command.bypass_cache {
                    true => table.read_bypassing_cache(&position, &command.clustering).await?,
                    false => table.read_found(&position, &command.clustering).await?,
                };
                if let Some(found) = found {
                    reader.emit_found(&position, found)?;
                    reader.end_partition(&position);
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
                // Boxed: a scan's state (an SSTable scanner's reads) is
                // kilobytes, and inline every read's future carried it,
                // a point read's too, copied whole where a handler boxes it.
                let scan = table.scan(from.as_ref(), to.as_ref(), &command.clustering, SCAN_BATCH_PARTITIONS);
                let batch = Box::pin(scan).await?;
                for (position, partition) in &batch {
                    reader.emit_partition(position, partition)?;
                    reader.end_partition(position);
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
    reader.end_partition(position);
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
    /// Tombstones passed, counted only under a tombstone limit.
    tombstones: usize,
}

impl<'a> Reader<'a> {
    fn new(meta: &'a TableMeta, command: &'a ReadCommand) -> Reader<'a> {
        let liveness = meta.materialized.as_ref().and_then(|_| meta.column_index(LIVENESS_COLUMN));
        Reader { meta, command, liveness, result: ReadResult::default(), tombstones: 0 }
    }

    fn before_start(&self, position: &PartitionPosition) -> bool {
        self.command.start_after.as_ref().is_some_and(|s| position < &s.partition)
    }

    fn counting(&self) -> bool {
        self.command.tombstone_limit != usize::MAX
    }

    /// Counts one tombstone; whether the limit is reached.
    fn count_tombstone(&mut self) -> bool {
        self.tombstones += 1;
        self.tombstones >= self.command.tombstone_limit
    }

    fn stop_short(&mut self, partition: &PartitionPosition, clustering: Option<Bytes>, at_key: bool) {
        let position = RowPosition { partition: partition.clone(), clustering };
        self.result.short = Some(Box::new(ShortStop { position, at_key }));
        self.result.limit_reached = true;
    }

    /// Counts a range tombstone's bound; whether the page stops on it
    /// (never while `hold`).
    fn pass_bound(&mut self, position: &PartitionPosition, point: &Point, hold: bool) -> bool {
        if !self.count_tombstone() || hold {
            return false;
        }
        match point {
            Point::Key { key, at_key } => {
                self.stop_short(position, Some(key.clone()), *at_key);
                true
            }
            // A partition's edge: `end_partition` stops there.
            Point::First | Point::Last => false,
        }
    }

    /// After a partition has been read whole (or to its limit): the page
    /// ends here once the tombstones passed reach the limit.
    #[inline]
    fn end_partition(&mut self, position: &PartitionPosition) {
        if self.counting() && !self.result.limit_reached && self.tombstones >= self.command.tombstone_limit {
            self.stop_short(position, None, false);
        }
    }

    /// [`Reader::emit_partition`] of what a read found: a single row's
    /// cells taken from its shared bytes ([`shared_row`]), unless the
    /// read resumes inside its partition or counts it as a tombstone (a
    /// dead row under a tombstone limit), which the decoded partition
    /// serves.
    fn emit_found(&mut self, position: &PartitionPosition, found: Found) -> Result<(), ReplicaError> {
        let row = match found {
            Found::Row(row) if self.command.start_after.as_ref().is_none_or(|s| s.partition < *position) => row,
            found => return self.emit_partition(position, &found.into_partition()),
        };
        match self.live_shared_row(&row) {
            Some(cells) => {
                if self.command.per_partition_limit == 0 {
                    return Ok(());
                }
                let (key, clustering) = row.clustering();
                let row = ResultRow {
                    position: RowPosition { partition: position.clone(), clustering: Some(key) },
                    clustering,
                    cells,
                };
                self.take_row(position, row, &mut 0)?;
                Ok(())
            }
            None if self.counting() => self.emit_partition(position, &Found::Row(row).into_partition()),
            None => Ok(()),
        }
    }

    /// A single row's live cells, or `None` when the row is dead.
    fn live_shared_row(&self, row: &SharedRow) -> Option<Vec<Option<ResultCell>>> {
        let dropped = |id| dropped_tombstone(self.meta, id);
        let cell = |value, timestamp, ttl_s| ResultCell { value, timestamp, ttl_s, elements: Vec::new() };
        let (cells, marker) = shared_row::live_cells(self.meta, row, self.command.now_s, dropped, cell)?;
        let live = match self.liveness {
            Some(liveness) => cells[liveness].is_some(),
            None => marker || cells.iter().any(Option::is_some),
        };
        live.then_some(cells)
    }

    /// Takes a live row into the result (a DISTINCT read takes its cells as
    /// its partition's one row); whether the partition's rows stop here.
    fn take_row(
        &mut self,
        position: &PartitionPosition,
        row: ResultRow,
        emitted: &mut usize,
    ) -> Result<bool, ReplicaError> {
        if self.command.distinct {
            self.push_distinct(position, row.cells)?;
            return Ok(true);
        }
        if !self.accept(&row)? {
            return Ok(false);
        }
        self.result.rows.push(row);
        *emitted += 1;
        Ok(self.limits_reached(*emitted))
    }

    fn emit_partition(&mut self, position: &PartitionPosition, partition: &Partition) -> Result<(), ReplicaError> {
        if self.before_start(position) {
            return Ok(());
        }
        let resume = match &self.command.start_after {
            Some(start) if &start.partition == position => match &start.clustering {
                // Paged past this partition's only (static or distinct) row,
                // or past its end.
                None => return Ok(()),
                Some(key) => Some(Resume { key: key.clone(), at_key: self.command.start_at_key }),
            },
            _ => None,
        };
        let mut emitted = match resume {
            Some(_) => self.command.start_partition_rows,
            None => 0,
        };
        if emitted >= self.command.per_partition_limit {
            return Ok(());
        }
        let reversed = self.command.reversed;
        let statics = self.live_cells(&partition.static_row, partition.tombstone)?;
        let static_live = statics.iter().any(Option::is_some);
        let whole_partition = self.command.clustering.iter().any(|r| r == &ClusteringRange::all());
        // A static-only row may still be due at the partition's end: no
        // page stops inside the partition before it has a row.
        let static_due = static_live && (whole_partition || self.command.distinct) && resume.is_none();
        // Borrowed, not owned: with no limit or no range tombstone the
        // Vec is never made, so there is none to drop (a call per
        // partition on the path of every read).
        let points;
        let mut bounds: &[Point] = &[];
        if self.counting() {
            if partition.tombstone.is_some() && resume.is_none() {
                self.count_tombstone();
            }
            if !partition.range_tombstones.is_empty() {
                points = range_tombstone_points(partition, &self.command.clustering, reversed, resume.as_ref());
                bounds = &points;
            }
        }
        // Read by index: an empty slice (no limit, no range tombstone)
        // costs one comparison per row.
        let mut next_bound = 0;
        let rows: Box<dyn Iterator<Item = (&Bytes, &ClusteredRow)>> =
            if reversed { Box::new(partition.rows.iter().rev()) } else { Box::new(partition.rows.iter()) };
        for (key, clustered) in rows {
            if resume.as_ref().is_some_and(|r| r.passed_row(key, reversed)) {
                continue;
            }
            while let Some(point) = bounds.get(next_bound).filter(|p| p.before_row(key, reversed)) {
                next_bound += 1;
                if self.pass_bound(position, point, static_due && emitted == 0) {
                    return Ok(());
                }
            }
            let deletion = partition.deletion_for_row(key);
            let Some(mut cells) = self.live_row(&clustered.row, deletion)? else {
                if self.counting()
                    && dead_row_counts(&clustered.row, deletion)
                    && self.count_tombstone()
                    && !(static_due && emitted == 0)
                {
                    self.stop_short(position, Some(key.clone()), false);
                    return Ok(());
                }
                continue;
            };
            merge_statics(&mut cells, &statics);
            let row = ResultRow {
                position: RowPosition { partition: position.clone(), clustering: Some(key.clone()) },
                clustering: clustered.clustering.clone(),
                cells,
            };
            if self.take_row(position, row, &mut emitted)? {
                return Ok(());
            }
        }
        for point in &bounds[next_bound..] {
            if self.pass_bound(position, point, static_due && emitted == 0) {
                return Ok(());
            }
        }
        if emitted == 0 && static_due {
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use shoal_schema::TableOptions;
    use shoal_storage::{RangeTombstone, RowMarker};

    use super::*;

    fn meta() -> TableMeta {
        TableMeta {
            id: Uuid::nil(),
            keyspace: "ks".into(),
            name: "t".into(),
            columns: Vec::new(),
            options: TableOptions::default(),
            next_column_id: 0,
            indexes: Vec::new(),
            view_of: None,
            materialized: None,
            dropped_columns: BTreeMap::new(),
        }
    }

    fn key(k: u8) -> Bytes {
        Bytes::copy_from_slice(&[k])
    }

    /// Rows at `live` (a marker at 20) and `deleted` (a row tombstone at
    /// 10), and range tombstones at 15 over `ranges`.
    fn partition(live: &[u8], deleted: &[u8], ranges: &[(Bound<u8>, Bound<u8>)]) -> Partition {
        let mut partition = Partition::default();
        let mut put = |k: u8, row: Row| {
            partition.rows.insert(key(k), ClusteredRow { clustering: vec![key(k)], row });
        };
        for &k in live {
            put(k, Row { marker: Some(RowMarker { timestamp: 20, expiry: None }), ..Row::default() });
        }
        for &k in deleted {
            put(k, Row { deletion: Some(Tombstone { timestamp: 10, deletion_time_s: 0 }), ..Row::default() });
        }
        for (start, end) in ranges {
            let range = ClusteringRange { start: start.map(key), end: end.map(key) };
            let tombstone = Tombstone { timestamp: 15, deletion_time_s: 0 };
            partition.range_tombstones.push(RangeTombstone { range, tombstone });
        }
        partition
    }

    /// The keys of each page of `partition` read `page_rows` rows at a
    /// time under `limit` tombstones, each page resuming where the last
    /// stopped.
    fn pages(partition: &Partition, limit: usize, page_rows: usize, reversed: bool) -> Vec<Vec<u8>> {
        let position = PartitionPosition { token: 0, key: Bytes::new() };
        let mut command =
            ReadCommand::of_partitions(Uuid::nil(), vec![position.clone()], vec![ClusteringRange::all()], 0);
        (command.tombstone_limit, command.row_limit, command.reversed) = (limit, page_rows, reversed);
        let mut out = Vec::new();
        loop {
            let result = rows_of(&meta(), &command, &position, partition).expect("reads");
            out.push(result.rows.iter().map(|r| r.position.clustering.as_ref().expect("a row")[0]).collect());
            assert!(out.len() < 1000, "paging does not end");
            (command.start_after, command.start_at_key) = match (result.short, result.rows.last()) {
                (Some(short), _) => (Some(short.position), short.at_key),
                (None, Some(last)) if result.limit_reached => (Some(last.position.clone()), false),
                _ => return out,
            };
        }
    }

    #[test]
    fn a_page_ends_once_its_tombstones_reach_the_limit() {
        let deleted: Vec<u8> = (0..30).collect();
        let rows = partition(&[31], &deleted, &[]);
        assert_eq!(pages(&rows, 10, 10, false), [vec![], vec![], vec![], vec![31]]);
        assert_eq!(pages(&rows, 10, 10, true), [vec![31], vec![], vec![], vec![]]);
        // Without a limit: one page.
        assert_eq!(pages(&rows, usize::MAX, 10, false), [vec![31]]);
        // Twelve range tombstones, two bounds each.
        let ranges: Vec<_> = (0..12u8).map(|i| (Bound::Excluded(4 * i), Bound::Excluded(4 * i + 3))).collect();
        let rows = partition(&[200], &[], &ranges);
        assert_eq!(pages(&rows, 10, 10, false), [vec![], vec![], vec![200]]);
        let live: Vec<u8> = (0..12).collect();
        let ranges: Vec<_> = (8..18u8).map(|i| (Bound::Excluded(4 * i), Bound::Excluded(4 * i + 3))).collect();
        let rows = partition(&live, &[], &ranges);
        let mut expected = vec![(0..10).collect::<Vec<u8>>(), vec![10, 11], vec![], vec![]];
        assert_eq!(pages(&rows, 10, 10, false), expected);
        // A row the range tombstone covers but written after it lives.
        let rows = partition(&[5, 9, 10, 40], &[6, 7], &[(Bound::Included(3), Bound::Included(10))]);
        expected = vec![vec![5, 9, 10, 40]];
        assert_eq!(pages(&rows, 10, 10, false), expected);
    }

    #[test]
    fn every_live_row_comes_back_once_whatever_the_limit() {
        let ranges = [
            (Bound::Included(2), Bound::Excluded(9)),
            (Bound::Excluded(4), Bound::Included(20)),
            (Bound::Unbounded, Bound::Excluded(1)),
            (Bound::Included(30), Bound::Unbounded),
        ];
        let live = [0, 3, 4, 8, 9, 20, 21, 29, 30, 35];
        let rows = partition(&live, &[1, 5, 6, 22, 23, 24, 25], &ranges);
        for limit in 1..8 {
            for page_rows in 1..5 {
                for reversed in [false, true] {
                    let got: Vec<u8> = pages(&rows, limit, page_rows, reversed).concat();
                    let mut want = live.to_vec();
                    if reversed {
                        want.reverse();
                    }
                    assert_eq!(got, want, "limit {limit}, {page_rows} rows a page, reversed {reversed}");
                }
            }
        }
    }
}
