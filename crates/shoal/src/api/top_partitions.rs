//! `GET /storage_service/toppartitions/?table_filters=ks:t,...
//! [&keyspace_filters=ks,...]&duration=<ms>[&capacity=][&list_size=]`
//! (ScyllaDB's): every shard counts the partitions read and written of
//! those tables for `duration` (`shoal_replica`'s space-saving sampler),
//! then the counts are gathered and the most seen answered, keys written
//! as CQL values (a composite key's components joined by `:`).
//!
//! One sampling at a time: the API's tasks all run on one shard, so a
//! `Cell` tells whether one is under way.

use std::cell::Cell;
use std::collections::HashSet;
use std::time::Duration;

use serde_json::{json, Value};
use shoal_coordinator::on_every_shard;
use shoal_http::{Request, Response, Status};
use shoal_replica::{TopPartition, TopPartitions, TOP_PARTITIONS_CAPACITY_MAX};
use shoal_schema::{Schema, Value as CqlValue};
use uuid::Uuid;

/// The longest sampling asked for.
const DURATION_MAX: Duration = Duration::from_secs(600);
const CAPACITY_DEFAULT: usize = 256;
const LIST_SIZE_DEFAULT: usize = 10;

thread_local! {
    static SAMPLING: Cell<bool> = const { Cell::new(false) };
}

/// What a request asks to sample.
struct Sampling {
    tables: HashSet<Uuid>,
    duration: Duration,
    capacity: usize,
    list_size: usize,
}

pub async fn sample(request: &Request) -> Response {
    let schema = shoal_coordinator::schema();
    let sampling = match parse(request, &schema) {
        Ok(sampling) => sampling,
        Err(e) => return Response::error(Status::BadRequest, e),
    };
    if SAMPLING.with(|s| s.replace(true)) {
        return Response::error(Status::BadRequest, "a toppartitions sampling is already under way");
    }
    let found = run(&sampling).await;
    SAMPLING.with(|s| s.set(false));
    let found = match found {
        Ok(found) => found,
        Err(e) => return Response::error(Status::InternalError, e),
    };
    let shown = |top: Vec<TopPartition>| -> Vec<Value> {
        let named = top.into_iter().take(sampling.list_size).map(|t| {
            json!({"partition": key_text(&schema, t.table, &t.key, sampling.tables.len() != 1), "count": t.count, "error": t.error})
        });
        named.collect()
    };
    Response::json(&json!({
        "read_cardinality": found.read_cardinality,
        "write_cardinality": found.write_cardinality,
        "capacity": sampling.capacity,
        "read": shown(found.reads),
        "write": shown(found.writes),
    }))
}

fn parse(request: &Request, schema: &Schema) -> Result<Sampling, String> {
    let mut tables = HashSet::new();
    for filter in request.param("table_filters").unwrap_or_default().split(',').filter(|f| !f.is_empty()) {
        let (keyspace, table) =
            filter.split_once(':').ok_or_else(|| format!("table filter {filter} is not ks:table"))?;
        let meta = schema.table(keyspace, table).ok_or_else(|| format!("no table {keyspace}.{table}"))?;
        tables.insert(meta.id);
    }
    for keyspace in request.param("keyspace_filters").unwrap_or_default().split(',').filter(|k| !k.is_empty()) {
        let meta = schema.keyspaces.get(keyspace).ok_or_else(|| format!("no keyspace {keyspace}"))?;
        tables.extend(meta.tables.values().map(|t| t.id));
    }
    let number = |name: &str, default: u64| -> Result<u64, String> {
        request.param(name).map_or(Ok(default), |v| v.parse().map_err(|_| format!("{name}={v} is not a number")))
    };
    let duration = Duration::from_millis(number("duration", 5000)?);
    if duration > DURATION_MAX {
        return Err(format!("duration is at most {} ms", DURATION_MAX.as_millis()));
    }
    let capacity = number("capacity", CAPACITY_DEFAULT as u64)? as usize;
    if !(1..=TOP_PARTITIONS_CAPACITY_MAX).contains(&capacity) {
        return Err(format!("capacity is between 1 and {TOP_PARTITIONS_CAPACITY_MAX}"));
    }
    let list_size = (number("list_size", LIST_SIZE_DEFAULT as u64)? as usize).min(capacity);
    Ok(Sampling { tables, duration, capacity, list_size })
}

/// Samples on every shard and gathers the counts, most seen first.
async fn run(sampling: &Sampling) -> Result<TopPartitions, shoal_runtime::ShardError> {
    let (tables, capacity) = (sampling.tables.clone(), sampling.capacity);
    on_every_shard(move |_| {
        let tables = tables.clone();
        async move { shoal_replica::local().start_top_partitions(tables, capacity) }
    })
    .await?;
    shoal_runtime::time::sleep(sampling.duration).await;
    let shards = on_every_shard(|_| async { shoal_replica::local().finish_top_partitions() }).await?;
    // A partition lives on one shard: the shards' counts add up, and each
    // shard's distinct partitions are its own.
    let mut all = TopPartitions::default();
    for shard in shards {
        all.reads.extend(shard.reads);
        all.writes.extend(shard.writes);
        all.read_cardinality += shard.read_cardinality;
        all.write_cardinality += shard.write_cardinality;
    }
    for top in [&mut all.reads, &mut all.writes] {
        top.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
    }
    Ok(all)
}

/// A partition key as CQL values, `:` between a composite key's
/// components; prefixed with `keyspace.table:` when several tables were
/// sampled. The bytes in hex when they do not decode.
fn key_text(schema: &Schema, table: Uuid, key: &[u8], with_table: bool) -> String {
    let Some(meta) = schema.table_by_id(table) else { return hex(key) };
    let types: Vec<_> = meta.partition_key().map(|c| &c.ty).collect();
    let decoded = shoal_schema::token::split_partition_key(types.len(), key).ok().and_then(|parts| {
        let values = types.iter().zip(parts).map(|(ty, part)| CqlValue::deserialize(ty, part).ok());
        values.map(|v| v.map(|v| v.to_string())).collect::<Option<Vec<_>>>()
    });
    let text = decoded.map_or_else(|| hex(key), |parts| parts.join(":"));
    match with_table {
        true => format!("{}.{}:{text}", meta.keyspace, meta.name),
        false => text,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
