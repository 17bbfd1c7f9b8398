//! The schema's single writer: shard 0 applies DDL one statement at a time,
//! writes the new schema to disk, installs it on every shard, and only then
//! answers — so a client that sees SCHEMA_CHANGE can use the new schema on
//! any connection, and a restart finds every acknowledged DDL.
//!
//! The schema file is CQL: one CREATE KEYSPACE / CREATE TABLE per line, with
//! table ids kept in `WITH id = ...`, re-read through the parser at start.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use futures_util::lock::Mutex;
use shoal_schema::{ClusteringOrder, ColumnKind, KeyspaceMeta, Schema, SchemaChange, TableMeta};

use crate::ast::Statement;
use crate::error::{CqlError, CqlResult};
use crate::{ddl, system};

static SCHEMA_FILE: OnceLock<PathBuf> = OnceLock::new();

thread_local! {
    /// Serializes DDL on shard 0: each statement builds on the last one's result.
    static DDL_LOCK: Arc<Mutex<()>> = Arc::new(Mutex::new(()));
}

/// Reads the schema file (if any) and returns the node's starting schema,
/// system keyspaces included. Call once at start, before shards serve.
pub fn load(path: &Path) -> CqlResult<Schema> {
    let _ = SCHEMA_FILE.set(path.to_path_buf());
    let mut schema = Schema::empty();
    for keyspace in system::system_keyspaces() {
        schema.keyspaces.insert(keyspace.name.clone(), Arc::new(keyspace));
    }
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(CqlError::Server(format!("cannot read schema file {}: {e}", path.display()))),
    };
    for (number, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let at = || format!("{}:{}", path.display(), number + 1);
        let parsed =
            crate::parser::parse_statement(line).map_err(|e| CqlError::Server(format!("schema file {}: {e}", at())))?;
        if let Some((next, _)) = ddl::apply(&schema, &parsed.statement, None)
            .map_err(|e| CqlError::Server(format!("schema file {}: {e}", at())))?
        {
            schema = next;
        }
    }
    schema.version = uuid::Uuid::new_v4();
    Ok(schema)
}

/// Runs a schema statement; on shard 0 only.
pub async fn announce(statement: Statement, keyspace: Option<String>) -> CqlResult<Option<SchemaChange>> {
    let lock = DDL_LOCK.with(Arc::clone);
    let _guard = lock.lock().await;
    let current = shoal_replica::local().schema();
    let Some((next, change)) = ddl::apply(&current, &statement, keyspace.as_deref())? else { return Ok(None) };
    if let Some(path) = SCHEMA_FILE.get() {
        save(path, &next)?;
    }
    shoal_coordinator::set_schema_everywhere(Arc::new(next), Some(change.clone())).await?;
    Ok(Some(change))
}

/// Writes the schema durably: a temporary file, fsynced, renamed over the
/// old one. Blocking, but only on DDL, which is rare and already serialized.
fn save(path: &Path, schema: &Schema) -> CqlResult<()> {
    use std::io::Write;
    let failed = |e: std::io::Error| CqlError::Server(format!("cannot write schema file {}: {e}", path.display()));
    let tmp = path.with_extension("cql.tmp");
    let mut file = std::fs::File::create(&tmp).map_err(failed)?;
    file.write_all(render(schema).as_bytes()).map_err(failed)?;
    file.sync_all().map_err(failed)?;
    std::fs::rename(&tmp, path).map_err(failed)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(failed)?;
    }
    Ok(())
}

/// The user keyspaces and tables as CQL, one statement per line.
pub fn render(schema: &Schema) -> String {
    let mut out = String::new();
    for keyspace in schema.keyspaces.values().filter(|k| !system::is_system_keyspace(&k.name)) {
        let _ = writeln!(out, "{}", create_keyspace(keyspace));
        for table in keyspace.tables.values() {
            let _ = writeln!(out, "{}", create_table(table));
        }
    }
    out
}

fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

fn map_literal(map: &std::collections::BTreeMap<String, String>) -> String {
    let entries: Vec<String> = map.iter().map(|(k, v)| format!("{}: {}", literal(k), literal(v))).collect();
    format!("{{{}}}", entries.join(", "))
}

fn create_keyspace(keyspace: &KeyspaceMeta) -> String {
    format!(
        "CREATE KEYSPACE {} WITH replication = {} AND durable_writes = {}",
        quote(&keyspace.name),
        map_literal(&keyspace.replication),
        keyspace.durable_writes
    )
}

fn create_table(table: &TableMeta) -> String {
    let mut columns: Vec<String> = table
        .columns
        .iter()
        .map(|c| format!("{} {}{}", quote(&c.name), c.ty, if c.kind == ColumnKind::Static { " static" } else { "" }))
        .collect();
    let pk: Vec<String> = table.partition_key().map(|c| quote(&c.name)).collect();
    let ck: Vec<String> = table.clustering_key().map(|c| quote(&c.name)).collect();
    let mut key = format!("({})", pk.join(", "));
    for c in &ck {
        key.push_str(", ");
        key.push_str(c);
    }
    columns.push(format!("PRIMARY KEY ({key})"));
    let o = &table.options;
    let mut with = vec![format!("id = {}", table.id)];
    if !ck.is_empty() {
        let orders: Vec<String> = table
            .clustering_key()
            .map(|c| format!("{} {}", quote(&c.name), if c.order == ClusteringOrder::Desc { "DESC" } else { "ASC" }))
            .collect();
        with.push(format!("CLUSTERING ORDER BY ({})", orders.join(", ")));
    }
    with.extend([
        format!("comment = {}", literal(&o.comment)),
        format!("default_time_to_live = {}", o.default_time_to_live_s),
        format!("gc_grace_seconds = {}", o.gc_grace_seconds),
        format!("bloom_filter_fp_chance = {}", o.bloom_filter_fp_chance),
        format!("crc_check_chance = {}", o.crc_check_chance),
        format!("memtable_flush_period_in_ms = {}", o.memtable_flush_period_in_ms),
        format!("min_index_interval = {}", o.min_index_interval),
        format!("max_index_interval = {}", o.max_index_interval),
        format!("speculative_retry = {}", literal(&o.speculative_retry)),
        format!("caching = {}", map_literal(&o.caching)),
        format!("compaction = {}", map_literal(&o.compaction)),
        format!("compression = {}", map_literal(&o.compression)),
    ]);
    format!(
        "CREATE TABLE {}.{} ({}) WITH {}",
        quote(&table.keyspace),
        quote(&table.name),
        columns.join(", "),
        with.join(" AND ")
    )
}
