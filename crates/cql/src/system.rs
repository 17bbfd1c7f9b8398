//! The system tables drivers read to learn the node and the schema:
//! `system.local`, `system.peers`, `system.peers_v2` and `system_schema.*`;
//! `system_traces.*`, whose rows come from `traces`; and `system.clients`,
//! from `clients`.
//!
//! They are virtual: their definitions are CQL (parsed at start), and their
//! rows are generated from the node's identity and the current schema
//! snapshot when read, into a throwaway storage table, so the ordinary read
//! path (restrictions, filtering, limits, paging) serves them unchanged.
//! `docs/drivers.md` lists what each driver reads.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use bytes::Bytes;
use shoal_coordinator::data::{
    Cell, ClusteredRow, ColumnData, Partition, PartitionPosition, Row, RowMarker, VirtualTable,
};
use shoal_schema::{ColumnKind, KeyspaceMeta, Schema, TableMeta, UserType};
use uuid::Uuid;

use crate::ast::Statement;
use crate::ddl;
use crate::error::{CqlError, CqlResult};
use crate::restrictions::position_of_any;
use crate::system_cells::{bigint, boolean, double, inet, int, text, text_map, text_set, uuid, Values};
use crate::values::serialize_items;

/// The Cassandra release Shoal answers as. ScyllaDB reports 3.0.8, but
/// Apache cqlsh 6 then refuses DESCRIBE (it is server-side from 4.0 on,
/// and Shoal answers it); from 4.0 on, drivers also query
/// `system_virtual_schema`, whose absence they accept (InvalidRequest).
pub const RELEASE_VERSION: &str = "5.0.0";
pub const CQL_VERSION: &str = "3.3.1";

static TABLES: OnceLock<BTreeMap<(&'static str, &'static str), Arc<TableMeta>>> = OnceLock::new();

const DEFINITIONS: &[(&str, &str, &str)] = &[
    ("system", "local", "key text PRIMARY KEY, bootstrapped text, broadcast_address inet, cluster_name text, cql_version text, data_center text, gossip_generation int, host_id uuid, listen_address inet, native_protocol_version text, partitioner text, rack text, release_version text, rpc_address inet, schema_version uuid, tokens set<text>, truncated_at map<uuid, blob>"),
    // The CQL connections of this node (ScyllaDB's), from `clients`.
    ("system", "clients", "address inet, port int, client_type text, client_options frozen<map<text, text>>, connection_stage text, driver_name text, driver_version text, hostname text, protocol_version int, shard_id int, ssl_cipher_suite text, ssl_enabled boolean, ssl_protocol text, username text, PRIMARY KEY (address, port, client_type)"),
    // Partitions per primary token range and table, for bulk readers
    // (Spark's connector) that split scans by them.
    ("system", "size_estimates", "keyspace_name text, table_name text, range_start text, range_end text, mean_partition_size bigint, partitions_count bigint, PRIMARY KEY (keyspace_name, table_name, range_start, range_end)"),
    ("system", "peers", "peer inet PRIMARY KEY, data_center text, host_id uuid, preferred_ip inet, rack text, release_version text, rpc_address inet, schema_version uuid, tokens set<text>"),
    // Cassandra's own view of built indexes ("IndexInfo": table_name is the
    // keyspace), and the indexes whose build is under way on some shard.
    ("system", "IndexInfo", "table_name text, index_name text, value blob, PRIMARY KEY (table_name, index_name)"),
    ("system", "built_indexes", "keyspace_name text, index_name text, PRIMARY KEY (keyspace_name, index_name)"),
    ("system", "index_builds_in_progress", "keyspace_name text, index_name text, shards_building int, PRIMARY KEY (keyspace_name, index_name)"),
    ("system", "built_views", "keyspace_name text, view_name text, PRIMARY KEY (keyspace_name, view_name)"),
    // ScyllaDB's per-node view build status, which its tools and tests poll
    // (`status` SUCCESS once built): here this node's row for each view.
    // ScyllaDB's CDC generation tables (`cdc_streams`).
    ("system_distributed", "cdc_generation_timestamps", "key text, time timestamp, expired timestamp, PRIMARY KEY (key, time)"),
    ("system_distributed", "cdc_streams_descriptions_v2", "time timestamp, range_end bigint, streams frozen<set<blob>>, PRIMARY KEY (time, range_end)"),
    ("system_distributed", "view_build_status", "keyspace_name text, view_name text, host_id uuid, status text, PRIMARY KEY ((keyspace_name, view_name), host_id)"),
    ("system", "views_builds_in_progress", "keyspace_name text, view_name text, cpu_id int, first_token text, generation_number int, last_token text, next_token text, PRIMARY KEY (keyspace_name, view_name, cpu_id)"),
    ("system", "peers_v2", "peer inet, peer_port int, data_center text, host_id uuid, native_address inet, native_port int, preferred_ip inet, preferred_port int, rack text, release_version text, schema_version uuid, tokens set<text>, PRIMARY KEY (peer, peer_port)"),
    ("system_schema", "keyspaces", "keyspace_name text PRIMARY KEY, durable_writes boolean, replication frozen<map<text, text>>"),
    ("system_schema", "tables", "keyspace_name text, table_name text, bloom_filter_fp_chance double, caching frozen<map<text, text>>, comment text, compaction frozen<map<text, text>>, compression frozen<map<text, text>>, crc_check_chance double, dclocal_read_repair_chance double, default_time_to_live int, extensions frozen<map<text, blob>>, flags frozen<set<text>>, gc_grace_seconds int, id uuid, max_index_interval int, memtable_flush_period_in_ms int, min_index_interval int, read_repair_chance double, speculative_retry text, PRIMARY KEY (keyspace_name, table_name)"),
    ("system_schema", "columns", "keyspace_name text, table_name text, column_name text, clustering_order text, column_name_bytes blob, kind text, position int, type text, PRIMARY KEY (keyspace_name, table_name, column_name)"),
    ("system_schema", "dropped_columns", "keyspace_name text, table_name text, column_name text, dropped_time timestamp, kind text, type text, PRIMARY KEY (keyspace_name, table_name, column_name)"),
    ("system_schema", "types", "keyspace_name text, type_name text, field_names frozen<list<text>>, field_types frozen<list<text>>, PRIMARY KEY (keyspace_name, type_name)"),
    ("system_schema", "functions", "keyspace_name text, function_name text, argument_types frozen<list<text>>, argument_names frozen<list<text>>, body text, called_on_null_input boolean, language text, return_type text, PRIMARY KEY (keyspace_name, function_name, argument_types)"),
    ("system_schema", "aggregates", "keyspace_name text, aggregate_name text, argument_types frozen<list<text>>, final_func text, initcond text, return_type text, state_func text, state_type text, PRIMARY KEY (keyspace_name, aggregate_name, argument_types)"),
    // ScyllaDB's: an aggregate's REDUCEFUNC (one row per aggregate that has one).
    ("system_schema", "scylla_aggregates", "keyspace_name text, aggregate_name text, argument_types frozen<list<text>>, reduce_func text, state_type text, PRIMARY KEY (keyspace_name, aggregate_name, argument_types)"),
    ("system_schema", "indexes", "keyspace_name text, table_name text, index_name text, kind text, options frozen<map<text, text>>, PRIMARY KEY (keyspace_name, table_name, index_name)"),
    ("system_schema", "views", "keyspace_name text, view_name text, base_table_id uuid, base_table_name text, bloom_filter_fp_chance double, caching frozen<map<text, text>>, comment text, compaction frozen<map<text, text>>, compression frozen<map<text, text>>, crc_check_chance double, dclocal_read_repair_chance double, default_time_to_live int, extensions frozen<map<text, blob>>, gc_grace_seconds int, id uuid, include_all_columns boolean, max_index_interval int, memtable_flush_period_in_ms int, min_index_interval int, read_repair_chance double, speculative_retry text, where_clause text, PRIMARY KEY (keyspace_name, view_name)"),
    // Roles and permissions (Cassandra's tables), made from `Schema::roles`.
    ("system_auth", "roles", "role text PRIMARY KEY, can_login boolean, is_superuser boolean, member_of set<text>, salted_hash text"),
    ("system_auth", "role_members", "role text, member text, PRIMARY KEY (role, member)"),
    ("system_auth", "role_permissions", "role text, resource text, permissions set<text>, PRIMARY KEY (role, resource)"),
    ("system_traces", "sessions", "session_id uuid PRIMARY KEY, client inet, command text, coordinator inet, duration int, parameters map<text, text>, request text, started_at timestamp"),
    ("system_traces", "events", "session_id uuid, event_id timeuuid, activity text, source inet, source_elapsed int, thread text, PRIMARY KEY (session_id, event_id)"),
    ("system_schema", "triggers", "keyspace_name text, table_name text, trigger_name text, options frozen<map<text, text>>, PRIMARY KEY (keyspace_name, table_name, trigger_name)"),
    // ScyllaDB's node-local key/value table (empty here). ScyllaDB's tools
    // and test suites tell ScyllaDB from Cassandra by a `system` table whose
    // name holds "scylla": Shoal follows ScyllaDB where the two differ.
    ("system", "scylla_local", "key text PRIMARY KEY, value text"),
    // ScyllaDB's configuration table: the settings clients ask about.
    ("system", "config", "name text PRIMARY KEY, source text, type text, value text"),
    // ScyllaDB's: this node's release (`version`), the Cassandra release it
    // answers as (`compatible_version`) and its build.
    ("system", "versions", "key text PRIMARY KEY, build_id text, build_mode text, compatible_version text, version text"),
    // ScyllaDB's: each keyspace's vnode ranges and their replicas, with
    // their data centers and racks (table `<ALL>`: no tablets here).
    ("system", "token_ring", "keyspace_name text, table_name text, start_token text, endpoint inet, dc text, end_token text, rack text, PRIMARY KEY (keyspace_name, table_name, start_token, endpoint)"),
    // ScyllaDB's: this node's load, memory, memtables and row cache, as
    // text items in groups.
    ("system", "runtime_info", "\"group\" text, item text, value text, PRIMARY KEY (\"group\", item)"),
    // ScyllaDB's table of one row, for statements that need a table to
    // select constants from.
    ("system", "one_row", "\"system$dummy\" text PRIMARY KEY"),
    // ScyllaDB's: the client protocols this node serves and their listeners.
    ("system", "protocol_servers", "name text PRIMARY KEY, listen_addresses frozen<list<text>>, protocol text, protocol_version text"),
    // ScyllaDB's own schema tables; always empty here (no CDC partitioner, no tablets).
    ("system_schema", "scylla_tables", "keyspace_name text, table_name text, cdc frozen<map<text, text>>, partitioner text, version uuid, PRIMARY KEY (keyspace_name, table_name)"),
    ("system_schema", "scylla_keyspaces", "keyspace_name text PRIMARY KEY, initial_tablets int, storage_options frozen<map<text, text>>, storage_type text"),
];

fn definitions() -> &'static BTreeMap<(&'static str, &'static str), Arc<TableMeta>> {
    TABLES.get_or_init(|| {
        STARTED.get_or_init(Instant::now);
        DEFINITIONS
            .iter()
            .map(|(ks, name, columns)| {
                // Quoted: "IndexInfo" keeps its case, as the name it is found by.
                let text = format!("CREATE TABLE {ks}.\"{name}\" ({columns})");
                let parsed = crate::parser::parse_statement(&text)
                    .unwrap_or_else(|e| panic!("system table {ks}.{name} definition: {e}"));
                let Statement::CreateTable(create) = parsed.statement else {
                    panic!("system table {ks}.{name} is not a CREATE TABLE")
                };
                let mut meta =
                    ddl::create_table(ks, &create).unwrap_or_else(|e| panic!("system table {ks}.{name}: {e}"));
                // Stable ids: derived from the names, identical on every start.
                meta.id = Uuid::new_v5(&Uuid::NAMESPACE_OID, format!("{ks}.{name}").as_bytes());
                ((*ks, *name), Arc::new(meta))
            })
            .collect()
    })
}

/// The system keyspaces, as they appear in the schema.
pub fn system_keyspaces() -> Vec<KeyspaceMeta> {
    ddl::SYSTEM_KEYSPACES
        .iter()
        .map(|ks| KeyspaceMeta {
            name: ks.to_string(),
            replication: [("class".to_string(), "org.apache.cassandra.locator.LocalStrategy".to_string())].into(),
            durable_writes: true,
            types: BTreeMap::new(),
            functions: Default::default(),
            tables: definitions()
                .iter()
                .filter(|((k, _), _)| k == ks)
                .map(|((_, n), t)| (n.to_string(), Arc::clone(t)))
                .collect(),
        })
        .collect()
}

pub fn is_system_keyspace(keyspace: &str) -> bool {
    ddl::SYSTEM_KEYSPACES.contains(&keyspace)
}

/// A virtual table filled with the rows of system table `meta` now.
pub async fn contents(meta: &Arc<TableMeta>, schema: &Schema) -> CqlResult<VirtualTable> {
    let table = VirtualTable::new(Arc::clone(meta));
    let rows: Vec<Values> = match (meta.keyspace.as_str(), meta.name.as_str()) {
        ("system_traces", name) => crate::traces::rows(name).await?,
        ("system_auth", name) => crate::auth::tables::rows(name, &schema.roles),
        ("system", "local") => vec![local_row(schema)],
        ("system", "clients") => crate::clients::rows().await?,
        ("system", "size_estimates") => size_estimate_rows().await?,
        ("system", "versions") => vec![version_row()],
        ("system", "token_ring") => token_ring_rows(schema)?,
        ("system_distributed", "cdc_generation_timestamps") => crate::cdc_streams::generation_timestamp_rows(),
        ("system_distributed", "cdc_streams_descriptions_v2") => crate::cdc_streams::stream_description_rows(),
        ("system", "protocol_servers") => crate::protocol_servers::rows(),
        ("system", "one_row") => vec![vec![text("")]],
        ("system", "runtime_info") => runtime_info_rows().await?,
        ("system", "config") => {
            crate::live_config::rows().iter().map(|row| row.iter().map(|cell| text(cell)).collect()).collect()
        }
        ("system", "peers") => shoal_coordinator::cluster::peers().iter().map(|p| peer_row(p, schema)).collect(),
        ("system", "peers_v2") => shoal_coordinator::cluster::peers().iter().map(|p| peer_v2_row(p, schema)).collect(),
        ("system_schema", "keyspaces") => schema.keyspaces.values().map(|ks| keyspace_row(ks)).collect(),
        ("system_schema", "tables") => user_tables(schema).map(|t| table_row(t)).collect(),
        ("system_schema", "columns") => {
            let views = schema.tables().filter(|t| t.materialized.is_some());
            user_tables(schema).chain(views).flat_map(|t| column_rows(t)).collect()
        }
        ("system_schema", "views") => schema.tables().filter_map(|t| view_row(t)).collect(),
        ("system_schema", "dropped_columns") => user_tables(schema).flat_map(|t| dropped_column_rows(t)).collect(),
        ("system_schema", "indexes") => schema.tables().flat_map(|t| index_rows(t)).collect(),
        ("system", "IndexInfo" | "built_indexes" | "index_builds_in_progress") => {
            index_build_rows(schema, &meta.name).await?
        }
        ("system", "built_views" | "views_builds_in_progress") | ("system_distributed", "view_build_status") => {
            view_build_rows(schema, &meta.name).await?
        }
        ("system_schema", "types") => {
            schema.keyspaces.values().flat_map(|ks| ks.types.values()).map(|t| type_row(t)).collect()
        }
        ("system_schema", "functions") => {
            schema.keyspaces.values().flat_map(|ks| &ks.functions.functions).map(|f| function_row(f)).collect()
        }
        ("system_schema", "aggregates") => {
            schema.keyspaces.values().flat_map(|ks| &ks.functions.aggregates).map(|a| aggregate_row(a)).collect()
        }
        ("system_schema", "scylla_aggregates") => schema
            .keyspaces
            .values()
            .flat_map(|ks| &ks.functions.aggregates)
            .filter_map(|a| scylla_aggregate_row(a))
            .collect(),
        _ => Vec::new(),
    };
    for row in rows {
        let (position, update) = to_update(meta, row)?;
        table.insert(position, update);
    }
    Ok(table)
}

fn local_row(schema: &Schema) -> Vec<Option<Bytes>> {
    let node = shoal_coordinator::cluster::node();
    let tokens: Vec<String> = shoal_coordinator::cluster::tokens().iter().map(i64::to_string).collect();
    vec![
        text("local"),
        text("COMPLETED"),
        inet(node.address),
        text(&node.cluster_name),
        text(CQL_VERSION),
        text(&node.data_center),
        int(0),
        uuid(node.host_id),
        inet(node.address),
        text("4"),
        text("org.apache.cassandra.dht.Murmur3Partitioner"),
        text(&node.rack),
        text(RELEASE_VERSION),
        inet(node.address),
        uuid(schema.version),
        text_set(tokens.iter().map(String::as_str)),
        None,
    ]
}

/// A peer's schema version is reported as this node's: group 0 applies
/// every schema change on every node in the same order, and a DDL is
/// answered once applied here.
fn version_row() -> Values {
    let build_mode = if cfg!(debug_assertions) { "debug" } else { "release" };
    vec![text("local"), None, text(build_mode), text(RELEASE_VERSION), text(env!("CARGO_PKG_VERSION"))]
}

/// `system.token_ring`: a row per vnode range and replica of every
/// replicated keyspace, the range starting after the previous one's end
/// (the first after the last's, around the ring).
fn token_ring_rows(schema: &Schema) -> CqlResult<Vec<Values>> {
    let node = shoal_coordinator::cluster::node();
    let peers = shoal_coordinator::cluster::peers();
    let place = |address: IpAddr| match address == node.address {
        true => Some((node.data_center.clone(), node.rack.clone())),
        false => peers.iter().find(|p| p.address == address).map(|p| (p.data_center.clone(), p.rack.clone())),
    };
    let mut rows = Vec::new();
    let local = |ks: &KeyspaceMeta| ks.replication.get("class").is_some_and(|c| c.ends_with("LocalStrategy"));
    let replicated = schema.keyspaces.values().filter(|ks| !local(ks));
    for keyspace in replicated {
        let ranges =
            shoal_coordinator::cluster::range_ownership(&keyspace.name).map_err(|e| CqlError::Server(e.to_string()))?;
        let Some(&(last_end, _)) = ranges.last() else { continue };
        let mut start = last_end;
        for (end, replicas) in &ranges {
            for address in replicas {
                let (dc, rack) = place(*address).unzip();
                rows.push(vec![
                    text(&keyspace.name),
                    text("<ALL>"),
                    text(&start.to_string()),
                    inet(*address),
                    dc.as_deref().and_then(text),
                    text(&end.to_string()),
                    rack.as_deref().and_then(text),
                ]);
            }
            start = *end;
        }
    }
    Ok(rows)
}

fn peer_row(peer: &shoal_coordinator::Peer, schema: &Schema) -> Vec<Option<Bytes>> {
    let tokens: Vec<String> = peer.tokens.iter().map(i64::to_string).collect();
    vec![
        inet(peer.address),
        text(&peer.data_center),
        uuid(peer.host_id),
        inet(peer.address),
        text(&peer.rack),
        text(RELEASE_VERSION),
        inet(peer.address),
        uuid(schema.version),
        text_set(tokens.iter().map(String::as_str)),
    ]
}

fn peer_v2_row(peer: &shoal_coordinator::Peer, schema: &Schema) -> Vec<Option<Bytes>> {
    let tokens: Vec<String> = peer.tokens.iter().map(i64::to_string).collect();
    vec![
        inet(peer.address),
        int(0),
        text(&peer.data_center),
        uuid(peer.host_id),
        inet(peer.address),
        int(i32::from(peer.native_port)),
        inet(peer.address),
        int(0),
        text(&peer.rack),
        text(RELEASE_VERSION),
        uuid(schema.version),
        text_set(tokens.iter().map(String::as_str)),
    ]
}

fn keyspace_row(ks: &KeyspaceMeta) -> Vec<Option<Bytes>> {
    vec![text(&ks.name), boolean(ks.durable_writes), text_map(&ks.replication)]
}

fn table_row(t: &TableMeta) -> Vec<Option<Bytes>> {
    let o = &t.options;
    vec![
        text(&t.keyspace),
        text(&t.name),
        double(o.bloom_filter_fp_chance),
        text_map(&o.caching),
        text(&o.comment),
        text_map(&o.compaction),
        text_map(&o.compression),
        double(o.crc_check_chance),
        double(0.0),
        int(o.default_time_to_live_s),
        Some(serialize_items(std::iter::empty(), 0)),
        text_set(table_flags(t).iter().copied()),
        int(o.gc_grace_seconds),
        uuid(t.id),
        int(o.max_index_interval),
        int(o.memtable_flush_period_in_ms),
        int(o.min_index_interval),
        double(0.0),
        text(&o.speculative_retry),
    ]
}

/// The tables users see: not views (those holding indexes, materialized
/// views, which `system_schema.views` lists).
fn user_tables(schema: &Schema) -> impl Iterator<Item = &Arc<TableMeta>> {
    schema.tables().filter(|t| t.view_of.is_none())
}

fn index_rows(t: &TableMeta) -> Vec<Values> {
    t.indexes
        .iter()
        .map(|index| {
            let options = BTreeMap::from([("target".to_string(), crate::describe::index_option_target(t, index))]);
            vec![text(&t.keyspace), text(&t.name), text(&index.name), text("COMPOSITES"), text_map(&options)]
        })
        .collect()
}

/// Rows of the index build tables (`table`): the indexes built on every
/// shard of this node, or those still building on some, with how many.
async fn index_build_rows(schema: &Schema, table: &str) -> CqlResult<Vec<Values>> {
    let indexes: Vec<(String, String, Uuid)> = schema
        .tables()
        .flat_map(|t| t.indexes.iter().map(|i| (t.keyspace.clone(), i.name.clone(), i.view_id)))
        .collect();
    let building = shards_building(indexes.iter().map(|(_, _, id)| *id).collect()).await?;
    let rows = indexes.iter().zip(building).filter_map(|((keyspace, name, _), shards)| match (table, shards.len()) {
        ("index_builds_in_progress", 0) => None,
        ("index_builds_in_progress", n) => Some(vec![text(keyspace), text(name), int(n as i32)]),
        (_, 0) if table == "IndexInfo" => Some(vec![text(keyspace), text(name), None]),
        (_, 0) => Some(vec![text(keyspace), text(name)]),
        _ => None,
    });
    Ok(rows.collect())
}

/// The names of the indexes of `keyspace.table` built on every shard of
/// this node (ScyllaDB's REST `/column_family/built_indexes/<ks>:<table>`);
/// `None` when there is no such table.
pub async fn built_indexes(schema: &Schema, keyspace: &str, table: &str) -> CqlResult<Option<Vec<String>>> {
    let Some(meta) = schema.keyspace(keyspace).and_then(|k| k.tables.get(table)) else { return Ok(None) };
    let building = shards_building(meta.indexes.iter().map(|i| i.view_id).collect()).await?;
    let built = meta.indexes.iter().zip(building).filter(|(_, shards)| shards.is_empty());
    Ok(Some(built.map(|(index, _)| index.name.clone()).collect()))
}

/// Rows of ScyllaDB's view build tables (`table`): every view (materialized
/// views and the tables holding indexes) built on every shard of this node,
/// or one row per shard still building it; `view_build_status` has this
/// node's row for each view, SUCCESS or STARTED.
async fn view_build_rows(schema: &Schema, table: &str) -> CqlResult<Vec<Values>> {
    let views: Vec<&Arc<TableMeta>> = schema.tables().filter(|t| t.view_of.is_some()).collect();
    let building = shards_building(views.iter().map(|v| v.id).collect()).await?;
    let host = shoal_coordinator::cluster::node().host_id;
    let mut rows = Vec::new();
    for (view, shards) in views.iter().zip(building) {
        let built = shards.is_empty();
        match (table, built) {
            ("view_build_status", _) => rows.push(vec![
                text(&view.keyspace),
                text(&view.name),
                uuid(host),
                text(if built { "SUCCESS" } else { "STARTED" }),
            ]),
            ("built_views", true) => rows.push(vec![text(&view.keyspace), text(&view.name)]),
            ("views_builds_in_progress", false) => {
                rows.extend(shards.iter().map(|shard| {
                    vec![text(&view.keyspace), text(&view.name), int(*shard as i32), None, None, None, None]
                }));
            }
            _ => {}
        }
    }
    Ok(rows)
}

/// For each view of `ids`, the shards of this node still building it.
async fn shards_building(ids: Vec<Uuid>) -> CqlResult<Vec<Vec<usize>>> {
    let count = ids.len();
    let building = shoal_coordinator::on_every_shard(move |_| {
        let ids = ids.clone();
        async move { ids.iter().map(|id| shoal_coordinator::view_is_building(*id)).collect::<Vec<bool>>() }
    })
    .await
    .map_err(|e| CqlError::Server(e.to_string()))?;
    Ok((0..count)
        .map(|i| building.iter().enumerate().filter(|(_, b)| b[i]).map(|(shard, _)| shard).collect())
        .collect())
}

async fn size_estimate_rows() -> CqlResult<Vec<Values>> {
    let estimates = shoal_coordinator::size_estimates().await.map_err(|e| CqlError::Server(e.to_string()))?;
    Ok(estimates
        .iter()
        .map(|e| {
            vec![
                text(&e.keyspace),
                text(&e.table),
                text(&e.start.to_string()),
                text(&e.end.to_string()),
                bigint(e.mean_partition_size),
                bigint(e.partitions_count),
            ]
        })
        .collect())
}

/// When this process started (set as the system tables are first defined,
/// at start), for `runtime_info`'s uptime.
static STARTED: OnceLock<Instant> = OnceLock::new();

/// ScyllaDB's groups and items, every value text: `generic` (load,
/// uptime, trace probability, ...), `memory`, `memtable` and `cache`.
async fn runtime_info_rows() -> CqlResult<Vec<Values>> {
    let stats = shoal_coordinator::runtime_stats().await.map_err(|e| CqlError::Server(e.to_string()))?;
    let uptime_s = STARTED.get().map_or(0, |s| s.elapsed().as_secs());
    let requests = stats.cache_hits + stats.cache_misses;
    let hit_rate = if requests == 0 { 0.0 } else { stats.cache_hits as f64 / requests as f64 };
    let memory_total = stats.memory_budget_bytes.unwrap_or(stats.memory_used_bytes);
    let items: Vec<(&str, &str, String)> = vec![
        ("generic", "gossip_active", "true".to_string()),
        ("generic", "load", stats.disk_bytes.to_string()),
        ("generic", "uptime", format!("{uptime_s} seconds")),
        ("generic", "trace_probability", format!("{:.2}", crate::traces::probability())),
        ("generic", "incremental_backup_enabled", "false".to_string()),
        ("memory", "total", memory_total.to_string()),
        ("memory", "used", stats.memory_used_bytes.to_string()),
        ("memory", "free", memory_total.saturating_sub(stats.memory_used_bytes).to_string()),
        // A memtable's memory is all in use: it grows by what it holds.
        ("memtable", "memory_total", stats.memtable_bytes.to_string()),
        ("memtable", "memory_used", stats.memtable_bytes.to_string()),
        ("memtable", "memory_free", "0".to_string()),
        ("memtable", "entries", stats.memtable_partitions.to_string()),
        ("cache", "memory_total", stats.cache_bytes.to_string()),
        ("cache", "memory_used", stats.cache_bytes.to_string()),
        ("cache", "memory_free", "0".to_string()),
        ("cache", "entries", stats.cache_partitions.to_string()),
        ("cache", "hits", stats.cache_hits.to_string()),
        ("cache", "misses", stats.cache_misses.to_string()),
        ("cache", "hit_rate_total", format!("{hit_rate:.2}")),
        ("cache", "requests_total", requests.to_string()),
    ];
    Ok(items.into_iter().map(|(group, item, value)| vec![text(group), text(item), text(&value)]).collect())
}

fn type_row(t: &UserType) -> Vec<Option<Bytes>> {
    let types: Vec<String> = t.fields.iter().map(|(_, ty)| ty.to_string()).collect();
    vec![
        text(&t.keyspace),
        text(&t.name),
        text_set(t.fields.iter().map(|(name, _)| name.as_str())),
        text_set(types.iter().map(String::as_str)),
    ]
}

fn function_row(f: &shoal_schema::UserFunction) -> Vec<Option<Bytes>> {
    let types: Vec<String> = f.arg_types.iter().map(ToString::to_string).collect();
    vec![
        text(&f.keyspace),
        text(&f.name),
        text_set(types.iter().map(String::as_str)),
        text_set(f.arg_names.iter().map(String::as_str)),
        text(&f.body),
        boolean(f.called_on_null_input),
        text(&f.language),
        text(&f.return_type.to_string()),
    ]
}

fn aggregate_row(a: &shoal_schema::UserAggregate) -> Vec<Option<Bytes>> {
    let types: Vec<String> = a.arg_types.iter().map(ToString::to_string).collect();
    vec![
        text(&a.keyspace),
        text(&a.name),
        text_set(types.iter().map(String::as_str)),
        a.final_func.as_deref().and_then(text),
        a.initcond.as_deref().and_then(text),
        text(&a.return_type.to_string()),
        text(&a.state_func),
        text(&a.state_type.to_string()),
    ]
}

/// An aggregate's row of `system_schema.scylla_aggregates`; `None` without
/// a REDUCEFUNC.
fn scylla_aggregate_row(a: &shoal_schema::UserAggregate) -> Option<Vec<Option<Bytes>>> {
    let reduce = a.reduce_func.as_deref()?;
    let types: Vec<String> = a.arg_types.iter().map(ToString::to_string).collect();
    Some(vec![
        text(&a.keyspace),
        text(&a.name),
        text_set(types.iter().map(String::as_str)),
        text(reduce),
        text(&a.state_type.to_string()),
    ])
}

/// A materialized view's row of `system_schema.views`; `None` for tables.
fn view_row(t: &TableMeta) -> Option<Values> {
    let (definition, base) = (t.materialized.as_ref()?, t.view_of.as_ref()?);
    let o = &t.options;
    Some(vec![
        text(&t.keyspace),
        text(&t.name),
        uuid(definition.base_id),
        text(base),
        double(o.bloom_filter_fp_chance),
        text_map(&o.caching),
        text(&o.comment),
        text_map(&o.compaction),
        text_map(&o.compression),
        double(o.crc_check_chance),
        double(0.0),
        int(0),
        Some(serialize_items(std::iter::empty(), 0)),
        int(o.gc_grace_seconds),
        uuid(t.id),
        boolean(definition.include_all_columns),
        int(o.max_index_interval),
        int(o.memtable_flush_period_in_ms),
        int(o.min_index_interval),
        double(0.0),
        text(&o.speculative_retry),
        text(&definition.where_clause),
    ])
}

/// `system_schema.tables.flags` as Cassandra 3 writes them: `compound`
/// for CQL tables; a COMPACT STORAGE table is `dense` with clustering
/// columns (`compound` too with several) and has no flag without (the
/// drivers read an empty set as "static compact").
fn table_flags(t: &TableMeta) -> &'static [&'static str] {
    match (t.options.compact_storage, t.clustering_key_len()) {
        (false, _) => &["compound"],
        (true, 0) => &[],
        (true, 1) => &["dense"],
        (true, _) => &["compound", "dense"],
    }
}

/// The table's dropped columns; the time in milliseconds, as Cassandra
/// shows it (the record keeps microseconds).
fn dropped_column_rows(t: &TableMeta) -> impl Iterator<Item = Values> + '_ {
    t.dropped_columns.iter().map(|(name, dropped)| {
        let millis = dropped.dropped_at_us.div_euclid(1000);
        vec![
            text(&t.keyspace),
            text(&t.name),
            text(name),
            Some(Bytes::copy_from_slice(&millis.to_be_bytes())),
            text(dropped.kind.as_str()),
            text(&dropped.ty.to_string()),
        ]
    })
}

fn column_rows(t: &TableMeta) -> Vec<Vec<Option<Bytes>>> {
    let static_compact = t.options.compact_storage && t.clustering_key_len() == 0;
    let mut columns: Vec<(String, &str, &str, i32, String)> = t
        .columns
        .iter()
        .filter(|c| !shoal_schema::view::is_hidden(t, &c.name))
        .map(|c| {
            let order = match (c.kind, c.order) {
                (ColumnKind::Clustering, shoal_schema::ClusteringOrder::Desc) => "desc",
                (ColumnKind::Clustering, _) => "asc",
                _ => "none",
            };
            // A static compact table's columns are its static row's.
            let kind = match c.kind {
                ColumnKind::Regular if static_compact => ColumnKind::Static,
                kind => kind,
            };
            (c.name.clone(), order, kind.as_str(), c.position, c.ty.to_string())
        })
        .collect();
    // The columns Cassandra 3 shows and its drivers hide: a static compact
    // table's clustering column and value, a dense table's empty value.
    if static_compact {
        columns.push((unused_name(t, "column"), "asc", ColumnKind::Clustering.as_str(), 0, "text".to_string()));
        columns.push((unused_name(t, "value"), "none", ColumnKind::Regular.as_str(), -1, "blob".to_string()));
    } else if t.is_dense() && !t.columns.iter().any(|c| c.kind == ColumnKind::Regular) {
        columns.push((String::new(), "none", ColumnKind::Regular.as_str(), -1, "empty".to_string()));
    }
    columns
        .into_iter()
        .map(|(name, order, kind, position, ty)| {
            vec![
                text(&t.keyspace),
                text(&t.name),
                text(&name),
                text(order),
                Some(Bytes::copy_from_slice(name.as_bytes())),
                text(kind),
                int(position),
                text(&ty),
            ]
        })
        .collect()
}

/// `base` (`column1`, `column2`, ... when `base` is "column"; `value`,
/// `value1`, ... otherwise), the first not already a column's name, as
/// Cassandra names a compact table's hidden columns.
fn unused_name(t: &TableMeta, base: &str) -> String {
    let first = if base == "column" { 1 } else { 0 };
    // One of the first columns + 1 candidates is free.
    (first..=first + t.columns.len())
        .map(|n| if n == 0 { base.to_string() } else { format!("{base}{n}") })
        .find(|name| t.column(name).is_none())
        .unwrap_or_default()
}

/// One row of values (in the table's column order) as a partition update.
fn to_update(meta: &TableMeta, values: Vec<Option<Bytes>>) -> CqlResult<(PartitionPosition, Partition)> {
    let mut pk = Vec::new();
    let mut ck = Vec::new();
    let mut row = Row { marker: Some(RowMarker { timestamp: 0, expiry: None }), ..Row::default() };
    for (column, value) in meta.columns.iter().zip(values) {
        match column.kind {
            shoal_schema::ColumnKind::PartitionKey => pk.push(value.unwrap_or_default()),
            shoal_schema::ColumnKind::Clustering => ck.push(value.unwrap_or_default()),
            _ => {
                if let Some(value) = value {
                    row.columns.insert(column.id, ColumnData::Atomic(Cell::live(0, value, None)));
                }
            }
        }
    }
    let position = position_of_any(&pk)?;
    let mut update = Partition::default();
    update.rows.insert(meta.encode_clustering(&ck), ClusteredRow { clustering: ck, row });
    Ok((position, update))
}
