//! CDC log rows: what a write to a CDC-enabled table adds to its log table
//! (ScyllaDB's `cdc/log.cc` and `cdc/split.cc`), computed where the write
//! is assembled, as the write's own mutations, and sent with them.
//!
//! Invariants:
//! - Each base mutation gives one log "batch": rows of one stream (that of
//!   the base partition's token, `cdc_streams`) and one `cdc$time` (a
//!   timeuuid of the write's timestamp with random low bits, so writes at
//!   the same microsecond do not overwrite each other), numbered by
//!   `cdc$batch_seq_no` from 0: the pre-image rows (operation 0) first,
//!   then the deltas, then the post-image rows (9); the last has
//!   `cdc$end_of_batch` true.
//! - Delta operations are ScyllaDB's: 1 update, 2 insert (a row marker),
//!   3 row delete, 4 partition delete, 5/6 a range delete's inclusive/
//!   exclusive start, 7/8 its inclusive/exclusive end.
//! - A log cell is written at the base write's timestamp and expires
//!   after the table's CDC `ttl` (none when 0).
//! - Pre-images are read before the write (at the write's consistency
//!   level, ONE for ANY) and logged with the deltas, in one mutation of
//!   the log partition; post-images are read after the write has been
//!   applied and logged as a second mutation of the same batch (same
//!   `cdc$time`, numbering continued), so they show the row as stored,
//!   but a write landing in between may show in them too.

use std::collections::BTreeSet;
use std::ops::Bound;
use std::time::Duration;

use bytes::Bytes;
use shoal_coordinator::data::{
    Cell, CellValue, ClusteredRow, ClusteringRange, Collection, ColumnData, Expiry, Mutation, Partition,
    PartitionPosition, ReadCommand, ResultRow, Row, RowMarker,
};
use shoal_coordinator::{ConsistencyLevel, WriteType};
use shoal_schema::token::split_partition_key;
use shoal_schema::{fields, ColumnKind, CqlType, Schema, TableMeta};
use uuid::Uuid;

use crate::cdc::{deleted_column, deleted_elements_column, log_name, CdcOptions};
use crate::error::CqlResult;
use crate::restrictions::position_of;

/// ScyllaDB's `cdc::operation` codes.
pub mod operation {
    pub const PRE_IMAGE: i8 = 0;
    pub const UPDATE: i8 = 1;
    pub const INSERT: i8 = 2;
    pub const ROW_DELETE: i8 = 3;
    pub const PARTITION_DELETE: i8 = 4;
    pub const RANGE_DELETE_START_INCLUSIVE: i8 = 5;
    pub const RANGE_DELETE_START_EXCLUSIVE: i8 = 6;
    pub const RANGE_DELETE_END_INCLUSIVE: i8 = 7;
    pub const RANGE_DELETE_END_EXCLUSIVE: i8 = 8;
    pub const POST_IMAGE: i8 = 9;
}

/// One log row before it is laid out: its operation, clustering key (for
/// rows of a clustered row) and the log columns it sets, by name.
#[derive(Debug, Clone, PartialEq)]
pub struct LogRow {
    pub operation: i8,
    pub clustering: Option<Vec<Bytes>>,
    pub cells: Vec<(String, Bytes)>,
    pub ttl_s: Option<i64>,
}

/// A base table's CDC setup: the table, its options and its log table.
pub struct Logged<'s> {
    pub base: &'s TableMeta,
    pub log: &'s TableMeta,
    pub options: CdcOptions,
}

impl<'s> Logged<'s> {
    /// The CDC setup of table `id`, when its writes are logged.
    pub fn of(schema: &'s Schema, id: Uuid) -> Option<Logged<'s>> {
        let base = schema.table_by_id(id)?;
        let options = CdcOptions::of(base).filter(|o| o.enabled)?;
        let log = schema.table(&base.keyspace, &log_name(&base.name)).filter(|t| t.options.cdc_log)?;
        Some(Logged { base, log, options })
    }
}

/// What a write to CDC-enabled tables still owes its log once it has
/// been applied: the post-images of the rows it touched.
#[derive(Default)]
pub struct PendingImages {
    pending: Vec<PendingImage>,
}

struct PendingImage {
    table: Uuid,
    position: PartitionPosition,
    touched: Touched,
    stream: Bytes,
    time: Bytes,
    timestamp: i64,
    next_seq: usize,
}

/// What a write touched: its static row and which clustered rows, by
/// clustering key, with the columns it wrote in each.
#[derive(Clone)]
struct Touched {
    statics: BTreeSet<u32>,
    rows: Vec<(Vec<Bytes>, BTreeSet<u32>)>,
}

impl Touched {
    fn of(update: &Partition) -> Touched {
        let ids = |row: &Row| row.columns.keys().copied().collect();
        Touched {
            statics: ids(&update.static_row),
            rows: update.rows.values().map(|r| (r.clustering.clone(), ids(&r.row))).collect(),
        }
    }
}

/// Whether any of `writes` goes to a table whose writes are logged.
pub fn any_logged(schema: &Schema, writes: &[Mutation]) -> bool {
    writes.iter().any(|w| Logged::of(schema, w.table).is_some())
}

/// `writes` followed by the log mutations of those made to CDC-enabled
/// tables (pre-images read first where wanted), and the post-images still
/// to log once `writes` are applied.
pub async fn with_log_rows(
    schema: &Schema,
    mut writes: Vec<Mutation>,
    consistency: ConsistencyLevel,
    timeout: Duration,
    now_s: i64,
) -> CqlResult<(Vec<Mutation>, PendingImages)> {
    let mut logs = Vec::new();
    let mut pending = PendingImages::default();
    for write in &writes {
        let Some(logged) = Logged::of(schema, write.table) else { continue };
        let touched = Touched::of(&write.update);
        let mut rows = Vec::new();
        if logged.options.preimage() {
            let before = read_rows(&logged, write, consistency, timeout, now_s).await?;
            rows.extend(image_rows(&logged, &write.position, &before, &touched, operation::PRE_IMAGE));
        }
        rows.extend(delta_rows(&logged, write));
        if rows.is_empty() {
            continue;
        }
        let stream = crate::cdc_streams::current().stream_of(write.position.token);
        let timestamp = write_timestamp(&write.update);
        let time = log_time(timestamp);
        let images_follow = logged.options.postimage;
        logs.push(log_mutation(&logged, stream.clone(), &time, 0, &rows, !images_follow, timestamp, now_s)?);
        if images_follow {
            pending.pending.push(PendingImage {
                table: write.table,
                position: write.position.clone(),
                touched,
                stream,
                time,
                timestamp,
                next_seq: rows.len(),
            });
        }
    }
    writes.extend(logs);
    Ok((writes, pending))
}

/// The delta rows of a conditional write that applied, written after it
/// (no images: the replicas decided it under the partition's lock, which
/// a read from here would race).
pub async fn log_applied(write: Mutation, consistency: ConsistencyLevel, now_s: i64) -> CqlResult<()> {
    let schema = shoal_coordinator::schema();
    let Some(logged) = Logged::of(&schema, write.table) else { return Ok(()) };
    let rows = delta_rows(&logged, &write);
    if rows.is_empty() {
        return Ok(());
    }
    let stream = crate::cdc_streams::current().stream_of(write.position.token);
    let timestamp = write_timestamp(&write.update);
    let log = log_mutation(&logged, stream, &log_time(timestamp), 0, &rows, true, timestamp, now_s)?;
    let consistency = match consistency {
        ConsistencyLevel::Serial | ConsistencyLevel::LocalSerial => ConsistencyLevel::Quorum,
        other => other,
    };
    let timeout = shoal_coordinator::timeouts().write;
    shoal_coordinator::mutate(log, consistency, WriteType::Simple, timeout).await?;
    Ok(())
}

impl PendingImages {
    /// Reads the rows the write touched, now applied, and logs them as
    /// post-images.
    pub async fn write(self, consistency: ConsistencyLevel, timeout: Duration, now_s: i64) -> CqlResult<()> {
        for image in self.pending {
            let schema = shoal_coordinator::schema();
            let Some(logged) = Logged::of(&schema, image.table) else { continue };
            let probe = Mutation {
                table: image.table,
                position: image.position.clone(),
                update: Partition::default(),
                list_ops: Vec::new(),
            };
            let after = read_rows(&logged, &probe, consistency, timeout, now_s).await?;
            let mut rows = image_rows(&logged, &image.position, &after, &image.touched, operation::POST_IMAGE);
            if rows.is_empty() {
                // The batch still needs its end: a bare post-image of the keys.
                let cells = partition_key_cells(logged.base, &image.position.key);
                rows.push(LogRow { operation: operation::POST_IMAGE, clustering: None, cells, ttl_s: None });
            }
            let log =
                log_mutation(&logged, image.stream, &image.time, image.next_seq, &rows, true, image.timestamp, now_s)?;
            shoal_coordinator::mutate(log, consistency, WriteType::Simple, timeout).await?;
        }
        Ok(())
    }
}

/// The base partition's rows as stored now (whole: a pre-image of a
/// static row or of a row delete needs them all).
async fn read_rows(
    logged: &Logged<'_>,
    write: &Mutation,
    consistency: ConsistencyLevel,
    timeout: Duration,
    now_s: i64,
) -> CqlResult<Vec<ResultRow>> {
    let consistency = match consistency {
        ConsistencyLevel::Any => ConsistencyLevel::One,
        other => other,
    };
    let command =
        ReadCommand::of_partitions(logged.base.id, vec![write.position.clone()], vec![ClusteringRange::all()], now_s);
    Ok(shoal_coordinator::read(command, consistency, timeout).await?.rows)
}

/// The image rows (pre- or post-) of the rows `touched` names, from
/// `rows` as read: every column with `preimage = 'full'` or for a
/// post-image, else those the write touched.
fn image_rows(
    logged: &Logged<'_>,
    position: &PartitionPosition,
    rows: &[ResultRow],
    touched: &Touched,
    operation: i8,
) -> Vec<LogRow> {
    let base = logged.base;
    let all = operation == operation::POST_IMAGE || logged.options.preimage == "full";
    let keys = partition_key_cells(base, &position.key);
    let mut out = Vec::new();
    let cells_of = |row: &ResultRow, kind: ColumnKind, wanted: &BTreeSet<u32>| {
        let mut cells = Vec::new();
        for (column, cell) in base.columns.iter().zip(&row.cells) {
            let Some(cell) = cell else { continue };
            if column.kind != kind || !(all || wanted.contains(&column.id)) {
                continue;
            }
            cells.push((column.name.clone(), image_value(&column.ty, &cell.value)));
        }
        cells
    };
    if !touched.statics.is_empty() {
        if let Some(row) = rows.first() {
            let mut cells = keys.clone();
            cells.extend(cells_of(row, ColumnKind::Static, &touched.statics));
            out.push(LogRow { operation, clustering: None, cells, ttl_s: None });
        }
    }
    for (clustering, wanted) in &touched.rows {
        let Some(row) = rows.iter().find(|r| &r.clustering == clustering) else { continue };
        let mut cells = keys.clone();
        cells.extend(base.clustering_key().zip(clustering).map(|(c, v)| (c.name.clone(), v.clone())));
        cells.extend(cells_of(row, ColumnKind::Regular, wanted));
        out.push(LogRow { operation, clustering: Some(clustering.clone()), cells, ttl_s: None });
    }
    out
}

/// A column's value as read, as its log column holds it: a non-frozen
/// list as `map<timeuuid, T>` (keys made from the element's place).
fn image_value(ty: &CqlType, value: &Bytes) -> Bytes {
    if !matches!(ty, CqlType::List(_)) || !ty.is_multi_cell() {
        return value.clone();
    }
    let items = crate::values::collection_items(value);
    let keys: Vec<Bytes> = (0..items.len()).map(|i| timeuuid_of(i as u64, 0)).collect();
    let entries = keys.iter().zip(&items).flat_map(|(k, v)| [Some(&k[..]), Some(&v[..])]);
    shoal_schema::collection::serialize_map(entries, items.len())
}

/// The delta rows of one base mutation.
pub fn delta_rows(logged: &Logged<'_>, write: &Mutation) -> Vec<LogRow> {
    let base = logged.base;
    let update = &write.update;
    let keys = partition_key_cells(base, &write.position.key);
    let row_keys = |clustering: &[Bytes]| {
        let mut cells = keys.clone();
        cells.extend(base.clustering_key().zip(clustering).map(|(c, v)| (c.name.clone(), v.clone())));
        cells
    };
    let mut deltas = Vec::new();
    if update.tombstone.is_some() {
        deltas.push(LogRow {
            operation: operation::PARTITION_DELETE,
            clustering: None,
            cells: keys.clone(),
            ttl_s: None,
        });
    }
    for range in &update.range_tombstones {
        let start = match range.range.start {
            Bound::Excluded(_) => operation::RANGE_DELETE_START_EXCLUSIVE,
            _ => operation::RANGE_DELETE_START_INCLUSIVE,
        };
        let end = match range.range.end {
            Bound::Excluded(_) => operation::RANGE_DELETE_END_EXCLUSIVE,
            _ => operation::RANGE_DELETE_END_INCLUSIVE,
        };
        for operation in [start, end] {
            deltas.push(LogRow { operation, clustering: None, cells: keys.clone(), ttl_s: None });
        }
    }
    if !update.static_row.columns.is_empty() {
        let (cells, ttl_s) = delta_cells(base, &update.static_row, logged.options.delta_full);
        let mut all = keys.clone();
        all.extend(cells);
        deltas.push(LogRow { operation: operation::UPDATE, clustering: None, cells: all, ttl_s });
    }
    for row in update.rows.values() {
        let clustering = Some(row.clustering.clone());
        if row.row.deletion.is_some() {
            let cells = row_keys(&row.clustering);
            deltas.push(LogRow {
                operation: operation::ROW_DELETE,
                clustering: clustering.clone(),
                cells,
                ttl_s: None,
            });
        }
        if row.row.marker.is_some() || !row.row.columns.is_empty() {
            let (cells, mut ttl_s) = delta_cells(base, &row.row, logged.options.delta_full);
            let operation = match row.row.marker {
                Some(marker) => {
                    ttl_s = ttl_s.or(marker.expiry.map(|e| i64::from(e.ttl_s)));
                    operation::INSERT
                }
                None => operation::UPDATE,
            };
            let mut all = row_keys(&row.clustering);
            all.extend(cells);
            deltas.push(LogRow { operation, clustering, cells: all, ttl_s });
        }
    }
    deltas
}

/// The partition key's columns by name, from the serialized key.
fn partition_key_cells(base: &TableMeta, key: &Bytes) -> Vec<(String, Bytes)> {
    let columns: Vec<_> = base.partition_key().collect();
    if columns.len() == 1 {
        return vec![(columns[0].name.clone(), key.clone())];
    }
    match split_partition_key(columns.len(), key) {
        Ok(parts) => columns.iter().zip(parts).map(|(c, p)| (c.name.clone(), key.slice_ref(p))).collect(),
        Err(_) => Vec::new(),
    }
}

/// The log columns a row's change sets, and the TTL its cells carry.
fn delta_cells(base: &TableMeta, row: &Row, full: bool) -> (Vec<(String, Bytes)>, Option<i64>) {
    let mut cells = Vec::new();
    let mut ttl_s = None;
    if !full {
        return (cells, ttl_s);
    }
    for (id, data) in &row.columns {
        let Some(column) = base.columns.iter().find(|c| c.id == *id && !c.kind.is_primary_key()) else { continue };
        match data {
            ColumnData::Atomic(Cell { value: CellValue::Live { value, expiry }, .. }) => {
                ttl_s = ttl_s.or(expiry.map(|e| i64::from(e.ttl_s)));
                cells.push((column.name.clone(), value.clone()));
            }
            ColumnData::Atomic(Cell { value: CellValue::Dead { .. }, .. }) => {
                cells.push((deleted_column(&column.name), Bytes::from_static(&[1])));
            }
            ColumnData::Atomic(_) => {}
            ColumnData::Collection(collection) => {
                if collection.tombstone.is_some() {
                    cells.push((deleted_column(&column.name), Bytes::from_static(&[1])));
                }
                let live = live_elements(&column.ty, collection);
                ttl_s = ttl_s.or(collection.cells.values().find_map(|c| match c.cell.value {
                    CellValue::Live { expiry: Some(e), .. } => Some(i64::from(e.ttl_s)),
                    _ => None,
                }));
                if let Some(value) = live {
                    cells.push((column.name.clone(), value));
                }
                let dead: Vec<Bytes> = collection
                    .cells
                    .values()
                    .filter(|c| matches!(c.cell.value, CellValue::Dead { .. }))
                    .map(|c| element_key(&column.ty, &c.key))
                    .collect();
                if !dead.is_empty() {
                    let mut sorted = dead;
                    sorted.sort();
                    let set = shoal_schema::collection::serialize(sorted.iter().map(|k| Some(&k[..])), sorted.len());
                    cells.push((deleted_elements_column(&column.name), set));
                }
            }
        }
    }
    (cells, ttl_s)
}

/// A non-frozen column's live elements as the log's frozen value (a list
/// as `map<timeuuid, T>`, a user type as its tuple); `None` when none.
fn live_elements(ty: &CqlType, collection: &Collection) -> Option<Bytes> {
    let live: Vec<(&Bytes, &Bytes)> = collection
        .cells
        .values()
        .filter_map(|c| match &c.cell.value {
            CellValue::Live { value, .. } => Some((&c.key, value)),
            _ => None,
        })
        .collect();
    if live.is_empty() {
        return None;
    }
    let count = live.len();
    Some(match ty.unfrozen() {
        CqlType::List(_) => {
            let keys: Vec<Bytes> = live.iter().map(|(k, _)| element_key(ty, k)).collect();
            let items = keys.iter().zip(&live).flat_map(|(k, (_, v))| [Some(&k[..]), Some(&v[..])]);
            shoal_schema::collection::serialize_map(items, count)
        }
        CqlType::Set(_) => shoal_schema::collection::serialize(live.iter().map(|(k, _)| Some(&k[..])), count),
        CqlType::Map(..) => {
            shoal_schema::collection::serialize_map(live.iter().flat_map(|(k, v)| [Some(&k[..]), Some(&v[..])]), count)
        }
        CqlType::Udt(udt) => {
            let mut values: Vec<Option<&[u8]>> = vec![None; udt.fields.len()];
            for (key, value) in &live {
                if let Some(slot) = fields::index_of_key(key).and_then(|i| values.get_mut(i)) {
                    *slot = Some(&value[..]);
                }
            }
            Bytes::from(fields::join(values))
        }
        _ => return None,
    })
}

/// How the log names an element of a non-frozen column: a list element by
/// a timeuuid made from its key, a user type's field by its index (a
/// smallint), others by their key.
fn element_key(ty: &CqlType, key: &Bytes) -> Bytes {
    match ty.unfrozen() {
        CqlType::List(_) => {
            let mut tick = [0u8; 8];
            let n = key.len().min(8);
            tick[8 - n..].copy_from_slice(&key[..n]);
            timeuuid_of(u64::from_be_bytes(tick) & ((1 << 60) - 1), u64::from_be_bytes(tick))
        }
        CqlType::Udt(_) => {
            let index = fields::index_of_key(key).unwrap_or(0) as i16;
            Bytes::copy_from_slice(&index.to_be_bytes())
        }
        _ => key.clone(),
    }
}

/// The highest timestamp in a write (a replaced collection's tombstone
/// sits one below the write's own).
fn write_timestamp(update: &Partition) -> i64 {
    let mut most = i64::MIN;
    let mut row = |r: &Row| {
        most = most.max(r.marker.map_or(i64::MIN, |m| m.timestamp));
        most = most.max(r.deletion.map_or(i64::MIN, |d| d.timestamp));
        for data in r.columns.values() {
            match data {
                ColumnData::Atomic(c) => most = most.max(c.timestamp),
                ColumnData::Collection(c) => {
                    most = most.max(c.tombstone.map_or(i64::MIN, |t| t.timestamp));
                    c.cells.values().for_each(|e| most = most.max(e.cell.timestamp));
                }
            }
        }
    };
    row(&update.static_row);
    update.rows.values().for_each(|r| row(&r.row));
    most = most.max(update.tombstone.map_or(i64::MIN, |t| t.timestamp));
    update.range_tombstones.iter().for_each(|r| most = most.max(r.tombstone.timestamp));
    if most == i64::MIN {
        shoal_runtime::clock::now_us()
    } else {
        most
    }
}

/// A version 1 UUID of `ticks` (100 ns since 1582-10-15) with the given
/// clock sequence and node bits.
fn timeuuid_of(ticks: u64, low: u64) -> Bytes {
    let mut out = [0u8; 16];
    out[0..4].copy_from_slice(&((ticks & 0xffff_ffff) as u32).to_be_bytes());
    out[4..6].copy_from_slice(&(((ticks >> 32) & 0xffff) as u16).to_be_bytes());
    out[6..8].copy_from_slice(&((((ticks >> 48) & 0x0fff) as u16) | 0x1000).to_be_bytes());
    out[8..16].copy_from_slice(&low.to_be_bytes());
    out[8] = (out[8] & 0x3f) | 0x80;
    Bytes::copy_from_slice(&out)
}

/// The `cdc$time` of a write at `timestamp_us`: its time, random low bits.
fn log_time(timestamp_us: i64) -> Bytes {
    const UUID_EPOCH_OFFSET: i64 = 0x01B2_1DD2_1381_4000;
    let ticks = timestamp_us.saturating_mul(10).saturating_add(UUID_EPOCH_OFFSET).max(0) as u64;
    timeuuid_of(ticks, rand::random::<u64>())
}

/// The log table's mutation holding `rows`, in stream `stream` at
/// `cdc$time` `time`, numbered from `first_seq`; the last ends the batch
/// when `ends_batch`.
#[allow(clippy::too_many_arguments)]
fn log_mutation(
    logged: &Logged<'_>,
    stream: Bytes,
    time: &Bytes,
    first_seq: usize,
    rows: &[LogRow],
    ends_batch: bool,
    timestamp: i64,
    now_s: i64,
) -> CqlResult<Mutation> {
    let log = logged.log;
    let ttl = logged.options.ttl_s;
    let expiry = (ttl > 0).then(|| Expiry { ttl_s: ttl, expires_at_s: now_s + i64::from(ttl) });
    let position: PartitionPosition = position_of(&[stream])?;
    let mut update = Partition::default();
    let id_of = |name: &str| log.columns.iter().find(|c| c.name == name && c.kind == ColumnKind::Regular).map(|c| c.id);
    for (seq, row) in rows.iter().enumerate() {
        let mut cells: Vec<(&str, Bytes)> =
            vec![("cdc$operation", Bytes::copy_from_slice(&row.operation.to_be_bytes()))];
        if let Some(ttl_s) = row.ttl_s {
            cells.push(("cdc$ttl", Bytes::copy_from_slice(&ttl_s.to_be_bytes())));
        }
        if ends_batch && seq + 1 == rows.len() {
            cells.push(("cdc$end_of_batch", Bytes::from_static(&[1])));
        }
        cells.extend(row.cells.iter().map(|(n, v)| (n.as_str(), v.clone())));
        let mut log_row = Row { marker: Some(RowMarker { timestamp, expiry }), ..Row::default() };
        for (name, value) in cells {
            if let Some(id) = id_of(name) {
                log_row.columns.insert(id, ColumnData::Atomic(Cell::live(timestamp, value, expiry)));
            }
        }
        let seq_no = (first_seq + seq) as i32;
        let clustering = vec![time.clone(), Bytes::copy_from_slice(&seq_no.to_be_bytes())];
        update.rows.insert(log.encode_clustering(&clustering), ClusteredRow { clustering, row: log_row });
    }
    Ok(Mutation { table: log.id, position, update, list_ops: Vec::new() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::Statement;
    use crate::modification::{self, WriteContext};
    use crate::values::Bindings;

    fn schema_of(statements: &[&str]) -> Schema {
        statements.iter().fold(Schema::empty(), |schema, text| {
            let parsed = crate::parser::parse_statement(text).expect("parses");
            crate::ddl::apply(&schema, &parsed.statement, None).expect("applies").expect("not a no-op").0
        })
    }

    fn mutations(schema: &Schema, text: &str) -> Vec<Mutation> {
        let parsed = crate::parser::parse_statement(text).expect("parses");
        let ctx = WriteContext { bindings: Bindings::NONE, timestamp: 5_000, now_s: 100 };
        let table = schema.table("ks", "t").expect("table");
        match &parsed.statement {
            Statement::Insert(s) => vec![modification::insert(table, s, ctx).expect("insert")],
            Statement::Update(s) => modification::update(table, s, ctx).expect("update"),
            Statement::Delete(s) => modification::delete(table, s, ctx).expect("delete"),
            _ => panic!("not a write: {text}"),
        }
    }

    fn ops(schema: &Schema, text: &str) -> Vec<(i8, Vec<String>)> {
        let writes = mutations(schema, text);
        let logged = Logged::of(schema, writes[0].table).expect("logged");
        delta_rows(&logged, &writes[0])
            .into_iter()
            .map(|row| (row.operation, row.cells.into_iter().map(|(name, _)| name).collect()))
            .collect()
    }

    const SCHEMA: [&str; 2] = [
        "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
        "CREATE TABLE ks.t (p int, c int, v int, s int static, st set<int>, PRIMARY KEY (p, c)) \
         WITH cdc = {'enabled': true}",
    ];

    #[test]
    fn each_kind_of_write_gets_scylladbs_operation() {
        let schema = schema_of(&SCHEMA);
        let names = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        assert_eq!(ops(&schema, "INSERT INTO ks.t (p, c, v) VALUES (1, 2, 3)"), [(2, names(&["p", "c", "v"]))]);
        assert_eq!(
            ops(&schema, "UPDATE ks.t SET v = null WHERE p = 1 AND c = 2"),
            [(1, names(&["p", "c", "cdc$deleted_v"]))]
        );
        assert_eq!(ops(&schema, "UPDATE ks.t SET s = 1 WHERE p = 1"), [(1, names(&["p", "s"]))]);
        assert_eq!(
            ops(&schema, "UPDATE ks.t SET st = st - {4} WHERE p = 1 AND c = 2"),
            [(1, names(&["p", "c", "cdc$deleted_elements_st"]))]
        );
        assert_eq!(
            ops(&schema, "UPDATE ks.t SET st = {4} WHERE p = 1 AND c = 2"),
            [(1, names(&["p", "c", "cdc$deleted_st", "st"]))]
        );
        assert_eq!(ops(&schema, "DELETE FROM ks.t WHERE p = 1 AND c = 2"), [(3, names(&["p", "c"]))]);
        assert_eq!(ops(&schema, "DELETE FROM ks.t WHERE p = 1"), [(4, names(&["p"]))]);
        assert_eq!(ops(&schema, "DELETE FROM ks.t WHERE p = 1 AND c >= 2"), [(5, names(&["p"])), (7, names(&["p"]))]);
        // `c > 2` is stored as from the key after 2, inclusive.
        assert_eq!(
            ops(&schema, "DELETE FROM ks.t WHERE p = 1 AND c > 2 AND c < 4"),
            [(5, names(&["p"])), (8, names(&["p"]))]
        );
    }

    #[test]
    fn log_rows_are_numbered_and_the_last_ends_the_batch() {
        let schema = schema_of(&SCHEMA);
        let writes = mutations(&schema, "DELETE FROM ks.t WHERE p = 1 AND c >= 2");
        let logged = Logged::of(&schema, writes[0].table).expect("logged");
        let rows = delta_rows(&logged, &writes[0]);
        let time = log_time(5_000);
        let log = log_mutation(&logged, Bytes::from_static(&[7; 16]), &time, 0, &rows, true, 5_000, 100).expect("log");
        assert_eq!(log.table, logged.log.id);
        let end = logged.log.column("cdc$end_of_batch").expect("column").id;
        let seqs: Vec<(Bytes, bool)> =
            log.update.rows.values().map(|r| (r.clustering[1].clone(), r.row.columns.contains_key(&end))).collect();
        assert_eq!(seqs, [(Bytes::from_static(&[0, 0, 0, 0]), false), (Bytes::from_static(&[0, 0, 0, 1]), true)]);
        let expiry = log.update.rows.values().next().and_then(|r| r.row.marker).and_then(|m| m.expiry).expect("ttl");
        assert_eq!((expiry.ttl_s, expiry.expires_at_s), (86_400, 86_500));
        // The time is the write's timestamp (µs) in 100 ns ticks from 1582.
        let ticks = u64::from_be_bytes([time[6] & 0x0f, time[7], time[4], time[5], time[0], time[1], time[2], time[3]]);
        assert_eq!(ticks, 5_000 * 10 + 0x01B2_1DD2_1381_4000);
        assert_eq!(time[6] >> 4, 1, "version 1");
    }
}
