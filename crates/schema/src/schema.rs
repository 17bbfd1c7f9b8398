//! Keyspace and table metadata, and the immutable schema snapshot.
//!
//! Invariants:
//! - a `Schema` is never changed in place: a DDL statement builds a new one
//!   with a fresh `version`, and shards swap their `Arc<Schema>`;
//! - a table's columns are ordered as `SELECT *` shows them: partition key
//!   columns, clustering columns, then static and regular columns by name;
//! - a column's `id` is never given to another column name within a
//!   table; a column added again under a dropped column's name takes the
//!   dropped column's id, and its cells written at or before the drop
//!   (`TableMeta::dropped_columns`) are never read again (Cassandra's and
//!   ScyllaDB's rule: cells written after the drop time come back);
//! - a schema's table index ([`Schema::indexed`]) is built once its
//!   keyspaces are final: a clone drops it, so a schema being changed
//!   (built from a clone) finds tables by walking them.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;

use uuid::Uuid;

use crate::index::IndexMeta;
use crate::types::{CqlType, UserType};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnKind {
    PartitionKey,
    Clustering,
    Static,
    Regular,
}

impl ColumnKind {
    /// The name `system_schema.columns.kind` uses.
    pub fn as_str(self) -> &'static str {
        match self {
            ColumnKind::PartitionKey => "partition_key",
            ColumnKind::Clustering => "clustering",
            ColumnKind::Static => "static",
            ColumnKind::Regular => "regular",
        }
    }

    pub fn is_primary_key(self) -> bool {
        matches!(self, ColumnKind::PartitionKey | ColumnKind::Clustering)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusteringOrder {
    Asc,
    Desc,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ColumnMeta {
    /// Stable within the table; cells are stored under it.
    pub id: u32,
    pub name: String,
    pub ty: CqlType,
    pub kind: ColumnKind,
    /// Position within the partition or clustering key; -1 otherwise.
    pub position: i32,
    pub order: ClusteringOrder,
}

/// Table options, as stored and shown (`system_schema.tables`, DESCRIBE).
/// Map-valued options keep their entries as text, as Cassandra does.
#[derive(Debug, Clone, PartialEq)]
pub struct TableOptions {
    pub comment: String,
    pub default_time_to_live_s: i32,
    pub gc_grace_seconds: i32,
    pub bloom_filter_fp_chance: f64,
    pub crc_check_chance: f64,
    pub memtable_flush_period_in_ms: i32,
    pub min_index_interval: i32,
    pub max_index_interval: i32,
    pub speculative_retry: String,
    pub caching: BTreeMap<String, String>,
    pub compaction: BTreeMap<String, String>,
    pub compression: BTreeMap<String, String>,
    /// ScyllaDB's `in_memory`: all data held in the row cache, never evicted.
    pub in_memory: bool,
    /// `WITH COMPACT STORAGE`: rows carry no row marker, so a row lives
    /// only while one of its cells does. With clustering columns the table
    /// is "dense" (at most one regular column); without, "static compact".
    /// Set at creation only.
    pub compact_storage: bool,
    /// ScyllaDB's `paxos_grace_seconds`, `tombstone_gc` and (for views)
    /// `synchronous_updates` when set: kept and shown so DESCRIBE
    /// recreates the table, not acted on (Paxos state and tombstones here
    /// expire by `gc_grace_seconds`, view updates are always synchronous).
    pub paxos_grace_seconds: Option<i32>,
    pub tombstone_gc: Option<BTreeMap<String, String>>,
    pub synchronous_updates: Option<bool>,
    /// ScyllaDB's `cdc` options when set (`enabled`, `preimage`,
    /// `postimage`, `delta`, `ttl`, normalized as ScyllaDB shows them); a
    /// table with `enabled` true has a CDC log table beside it.
    pub cdc: Option<BTreeMap<String, String>>,
    /// The table is a CDC log table (ScyllaDB marks one by its CDC
    /// partitioner): it stays one, even after its base disables CDC,
    /// until it is dropped.
    pub cdc_log: bool,
}

impl Default for TableOptions {
    fn default() -> Self {
        let map = |entries: &[(&str, &str)]| entries.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        TableOptions {
            comment: String::new(),
            default_time_to_live_s: 0,
            gc_grace_seconds: 864_000,
            bloom_filter_fp_chance: 0.01,
            crc_check_chance: 1.0,
            memtable_flush_period_in_ms: 0,
            min_index_interval: 128,
            max_index_interval: 2048,
            speculative_retry: "99PERCENTILE".to_string(),
            caching: map(&[("keys", "ALL"), ("rows_per_partition", "ALL")]),
            compaction: map(&[("class", "org.apache.cassandra.db.compaction.SizeTieredCompactionStrategy")]),
            compression: map(&[
                ("chunk_length_in_kb", "16"),
                ("class", "org.apache.cassandra.io.compress.LZ4Compressor"),
            ]),
            in_memory: false,
            compact_storage: false,
            paxos_grace_seconds: None,
            tombstone_gc: None,
            synchronous_updates: None,
            cdc: None,
            cdc_log: false,
        }
    }
}

/// A column dropped from a table, as `system_schema.dropped_columns` shows
/// it: the cells of column `id` written at or before `dropped_at_us` are
/// gone for good, even after a column of the same name is added again
/// (which takes this id back). Kept for the table's life.
#[derive(Debug, Clone, PartialEq)]
pub struct DroppedColumn {
    pub id: u32,
    /// The type it had, with user types written out as tuples (as
    /// Cassandra keeps it), so the record outlives the user type.
    pub ty: CqlType,
    /// `Static` or `Regular`.
    pub kind: ColumnKind,
    /// The drop's timestamp (µs, the clock of write timestamps).
    pub dropped_at_us: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TableMeta {
    pub id: Uuid,
    pub keyspace: String,
    pub name: String,
    pub columns: Vec<ColumnMeta>,
    pub options: TableOptions,
    /// The id the next added column gets.
    pub next_column_id: u32,
    /// The table's secondary indexes, by name.
    pub indexes: Vec<IndexMeta>,
    /// For a view (an index's hidden table or a materialized view): its
    /// base table's name.
    pub view_of: Option<String>,
    /// For a materialized view: its definition.
    pub materialized: Option<crate::view::MaterializedView>,
    /// Columns dropped from the table, by name (the latest drop of each).
    pub dropped_columns: BTreeMap<String, DroppedColumn>,
}

impl TableMeta {
    /// The timestamp at or below which the cells of column `id` are
    /// dropped (the column, or an earlier one of its name, was dropped).
    pub fn dropped_at_us(&self, id: u32) -> Option<i64> {
        if self.dropped_columns.is_empty() {
            return None;
        }
        self.dropped_columns.values().find(|d| d.id == id).map(|d| d.dropped_at_us)
    }

    pub fn column(&self, name: &str) -> Option<&ColumnMeta> {
        self.columns.iter().find(|c| c.name == name)
    }

    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    pub fn partition_key(&self) -> impl Iterator<Item = &ColumnMeta> {
        self.columns.iter().filter(|c| c.kind == ColumnKind::PartitionKey)
    }

    pub fn clustering_key(&self) -> impl Iterator<Item = &ColumnMeta> {
        self.columns.iter().filter(|c| c.kind == ColumnKind::Clustering)
    }

    pub fn partition_key_len(&self) -> usize {
        self.partition_key().count()
    }

    pub fn clustering_key_len(&self) -> usize {
        self.clustering_key().count()
    }

    /// A COMPACT STORAGE table with clustering columns (Cassandra's
    /// "dense"): each row is its key and at most one value.
    pub fn is_dense(&self) -> bool {
        self.options.compact_storage && self.clustering_key_len() > 0
    }

    /// Whether an INSERT writes a row marker: yes but in COMPACT STORAGE
    /// tables with a regular column, whose rows exist only by their cells.
    /// A dense table without one keeps its rows by their key alone
    /// (ScyllaDB writes an empty value where this writes the marker).
    pub fn insert_writes_marker(&self) -> bool {
        !self.options.compact_storage || !self.columns.iter().any(|c| c.kind == ColumnKind::Regular)
    }

    /// The order-preserving encoding of a clustering key, or of a prefix of
    /// it (`values` for the first clustering columns, in order): how rows
    /// are keyed in storage.
    pub fn encode_clustering(&self, values: &[Bytes]) -> Bytes {
        let columns = self.clustering_key().zip(values);
        Bytes::from(crate::comparable::encode_key(
            columns.map(|(c, v)| (c.ty.unfrozen(), &v[..], c.order == ClusteringOrder::Desc)),
        ))
    }

    /// Orders columns as `SELECT *` shows them (Cassandra's and ScyllaDB's
    /// order: partition key, clustering key, static columns, then regular
    /// ones, each by name) and renumbers key positions. Call after adding,
    /// removing or renaming columns.
    pub fn normalize_columns(&mut self) {
        self.columns.sort_by(|a, b| {
            let rank = |c: &ColumnMeta| match c.kind {
                ColumnKind::PartitionKey => 0,
                ColumnKind::Clustering => 1,
                ColumnKind::Static => 2,
                ColumnKind::Regular => 3,
            };
            let key = |c: &ColumnMeta| if c.kind.is_primary_key() { c.position } else { 0 };
            rank(a).cmp(&rank(b)).then(key(a).cmp(&key(b))).then_with(|| a.name.cmp(&b.name))
        });
        debug_assert!(self.partition_key().enumerate().all(|(i, c)| c.position == i as i32));
        debug_assert!(self.clustering_key().enumerate().all(|(i, c)| c.position == i as i32));
    }
}

/// Keyspaces that belong to the node, not to users (their tables are
/// virtual: made from the schema and node state when read).
pub const SYSTEM_KEYSPACES: [&str; 5] =
    ["system", "system_auth", "system_distributed", "system_schema", "system_traces"];

#[derive(Debug, Clone, PartialEq)]
pub struct KeyspaceMeta {
    pub name: String,
    /// Includes the `class` entry, with the full Java class name.
    pub replication: BTreeMap<String, String>,
    pub durable_writes: bool,
    pub tables: BTreeMap<String, Arc<TableMeta>>,
    /// User-defined types, resolved: nested user types carry their fields.
    pub types: BTreeMap<String, Arc<UserType>>,
    /// User-defined functions and aggregates.
    pub functions: crate::Functions,
}

/// The high half of the versions of schemas agreed through group 0.
const GROUP0_VERSION_TAG: u64 = 0x5348_4f41_4c00_0000;

/// One immutable version of the whole schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Schema {
    pub version: Uuid,
    pub keyspaces: BTreeMap<String, Arc<KeyspaceMeta>>,
    /// Roles and permissions (`system_auth`), agreed with the schema.
    pub roles: Arc<crate::roles::Roles>,
    /// The tables by id, in the snapshot a shard installs; empty elsewhere.
    pub table_index: TableIndex,
}

/// The tables of a [`Schema`] by id: every request a peer sends names
/// its table by id, and a walk of all keyspaces' tables (the system ones
/// included) per request costs more than the request's own work. Neither
/// compared nor cloned: it is derived from the keyspaces, and a clone may
/// be changed.
#[derive(Default)]
pub struct TableIndex(Option<hashbrown::HashMap<Uuid, Arc<TableMeta>>>);

impl Clone for TableIndex {
    fn clone(&self) -> Self {
        TableIndex(None)
    }
}

impl PartialEq for TableIndex {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for TableIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "TableIndex" } else { "TableIndex(none)" })
    }
}

impl Schema {
    pub fn empty() -> Schema {
        Schema {
            version: Uuid::nil(),
            keyspaces: BTreeMap::new(),
            roles: Arc::default(),
            table_index: TableIndex(None),
        }
    }

    /// The version of the schema that group 0's schema entry `index`
    /// installs: the same on every node, and the index can be read back
    /// from it ([`Schema::group0_index`]).
    pub fn version_at(index: u64) -> Uuid {
        Uuid::from_u64_pair(GROUP0_VERSION_TAG, index)
    }

    /// The group 0 schema entry this schema came from, if it came from one.
    pub fn group0_index(&self) -> Option<u64> {
        let (tag, index) = self.version.as_u64_pair();
        (tag == GROUP0_VERSION_TAG).then_some(index)
    }

    pub fn keyspace(&self, name: &str) -> Option<&Arc<KeyspaceMeta>> {
        self.keyspaces.get(name)
    }

    pub fn table(&self, keyspace: &str, table: &str) -> Option<&Arc<TableMeta>> {
        self.keyspaces.get(keyspace)?.tables.get(table)
    }

    pub fn tables(&self) -> impl Iterator<Item = &Arc<TableMeta>> {
        self.keyspaces.values().flat_map(|ks| ks.tables.values())
    }

    pub fn table_by_id(&self, id: Uuid) -> Option<&Arc<TableMeta>> {
        match &self.table_index.0 {
            Some(index) => index.get(&id),
            None => self.tables().find(|t| t.id == id),
        }
    }

    /// This schema with its tables indexed by id, for
    /// [`Schema::table_by_id`]: the snapshot a shard installs, whose
    /// keyspaces no longer change.
    pub fn indexed(mut self) -> Schema {
        self.table_index = TableIndex(Some(self.tables().map(|t| (t.id, Arc::clone(t))).collect()));
        self
    }

    /// A copy whose keyspaces, tables and types share no reference count
    /// with `self`. Each shard keeps its own: every request clones the
    /// schema's `Arc`s, and an `Arc` shared by shards would have all their
    /// cores write one cache line. (User types nested in column types stay
    /// shared.)
    pub fn unshared(&self) -> Schema {
        let keyspaces = self
            .keyspaces
            .iter()
            .map(|(name, ks)| {
                let tables = ks.tables.iter().map(|(name, t)| (name.clone(), Arc::new(TableMeta::clone(t)))).collect();
                let types = ks.types.iter().map(|(name, t)| (name.clone(), Arc::new(UserType::clone(t)))).collect();
                let functions = ks.functions.unshared();
                (name.clone(), Arc::new(KeyspaceMeta { tables, types, functions, ..KeyspaceMeta::clone(ks) }))
            })
            .collect();
        let roles = Arc::new(crate::roles::Roles::clone(&self.roles));
        Schema { version: self.version, keyspaces, roles, table_index: TableIndex(None) }
    }
}

/// What a DDL statement changed, as told to clients in SCHEMA_CHANGE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaChange {
    pub kind: SchemaChangeKind,
    pub target: SchemaChangeTarget,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaChangeKind {
    Created,
    Updated,
    Dropped,
}

impl SchemaChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SchemaChangeKind::Created => "CREATED",
            SchemaChangeKind::Updated => "UPDATED",
            SchemaChangeKind::Dropped => "DROPPED",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaChangeTarget {
    Keyspace(String),
    Table {
        keyspace: String,
        table: String,
    },
    Type {
        keyspace: String,
        name: String,
    },
    /// A user-defined function: its name and argument types (as CQL text).
    Function {
        keyspace: String,
        name: String,
        arg_types: Vec<String>,
    },
    Aggregate {
        keyspace: String,
        name: String,
        arg_types: Vec<String>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unshared_copy_is_equal_but_shares_no_arc() {
        let table = TableMeta {
            id: Uuid::from_u128(7),
            keyspace: "ks".into(),
            name: "t".into(),
            columns: Vec::new(),
            options: TableOptions::default(),
            next_column_id: 0,
            indexes: Vec::new(),
            view_of: None,
            materialized: None,
            dropped_columns: BTreeMap::new(),
        };
        let keyspace = KeyspaceMeta {
            name: "ks".into(),
            replication: BTreeMap::new(),
            durable_writes: true,
            tables: BTreeMap::from([("t".to_string(), Arc::new(table))]),
            types: BTreeMap::new(),
            functions: Default::default(),
        };
        let schema = Schema {
            version: Uuid::from_u128(1),
            keyspaces: BTreeMap::from([("ks".to_string(), Arc::new(keyspace))]),
            roles: Arc::default(),
            table_index: TableIndex::default(),
        };

        let copy = schema.unshared();
        assert_eq!(copy, schema);
        assert!(!Arc::ptr_eq(&copy.keyspaces["ks"], &schema.keyspaces["ks"]));
        let (copied, original) = (&copy.keyspaces["ks"].tables["t"], &schema.keyspaces["ks"].tables["t"]);
        assert!(!Arc::ptr_eq(copied, original));
        assert_eq!(Arc::strong_count(original), 1);

        // Indexed, a table is found by id as by a walk; a clone (a schema
        // about to change) drops the index and still finds it.
        let indexed = copy.indexed();
        let id = Uuid::from_u128(7);
        assert!(Arc::ptr_eq(indexed.table_by_id(id).expect("indexed"), &indexed.keyspaces["ks"].tables["t"]));
        assert!(indexed.table_by_id(Uuid::from_u128(8)).is_none());
        let mut next = indexed.clone();
        assert_eq!(next, indexed);
        next.keyspaces.clear();
        assert!(next.table_by_id(id).is_none());
        assert!(indexed.table_by_id(id).is_some());
    }
}
