//! Compactions, as ScyllaDB's compaction manager API shows and steers
//! them: those under way on every shard with their progress (`GET
//! /compaction_manager/compactions`), the tables with work waiting (`GET
//! /compaction_manager/metrics/pending_tasks_by_table`), stopping them
//! (`POST /compaction_manager/stop_compaction?type=`), and a table's
//! automatic compaction turned on and off (`POST` / `DELETE
//! /storage_service/auto_compaction/<keyspace>[?cf=]`). Each shard answers
//! for its own tables by message.

use serde_json::{json, Value};
use shoal_coordinator::on_every_shard;
use shoal_http::{Request, Response, Status};

/// The operation types `stop_compaction` knows (Cassandra's
/// `OperationType` names; ScyllaDB's API takes them in either case).
const STOPPABLE: [&str; 2] = ["COMPACTION", "CLEANUP"];

/// Every compaction under way: `[{"id", "ks", "cf", "task_type",
/// "completed", "total", "unit"}]`, progress in partitions ("keys").
pub async fn list() -> Response {
    let answers = on_every_shard(|_| async { shoal_replica::local().compactions().running }).await;
    super::json_or_500(answers.map(|shards| {
        let running = shards.into_iter().flatten().map(|c| {
            json!({
                "id": c.id.to_string(),
                "ks": c.keyspace,
                "cf": c.table,
                "task_type": c.kind.operation_type(),
                "completed": c.completed_partitions,
                "total": c.total_partitions,
                "unit": "keys",
            })
        });
        running.collect::<Vec<Value>>()
    }))
}

/// The tables whose strategy has compactions waiting: `[{"ks", "cf",
/// "task"}]`, `task` counting the shards with a job waiting.
pub async fn pending_by_table() -> Response {
    let answers = on_every_shard(|_| async { shoal_replica::local().compactions().pending }).await;
    super::json_or_500(answers.map(|shards| {
        let mut tasks: std::collections::BTreeMap<(String, String), usize> = Default::default();
        for table in shards.into_iter().flatten() {
            *tasks.entry(table).or_default() += 1;
        }
        tasks.into_iter().map(|((ks, cf), task)| json!({"ks": ks, "cf": cf, "task": task})).collect::<Vec<Value>>()
    }))
}

/// `stop_compaction?type=<COMPACTION|CLEANUP>`: stops them on every shard
/// at their next partition; answers how many were asked to stop.
pub async fn stop(request: &Request) -> Response {
    let Some(kind) = request.param("type").map(str::to_ascii_uppercase).filter(|t| STOPPABLE.contains(&t.as_str()))
    else {
        return Response::error(Status::BadRequest, format!("stop_compaction needs ?type= one of {STOPPABLE:?}"));
    };
    let answers = on_every_shard(move |_| {
        let kind = kind.clone();
        async move { shoal_replica::local().stop_compactions(&kind, None, &[]) }
    })
    .await;
    super::json_or_500(answers.map(|stopped| stopped.into_iter().sum::<usize>()))
}

/// `auto_compaction[/<keyspace>][?cf=t1,t2]` and
/// `/column_family/autocompaction/<keyspace>:<table>`: turns the tables'
/// automatic compaction on (`POST`) or off (`DELETE`) on every shard (all
/// the keyspace's without `tables`, all tables without a keyspace);
/// answers the tables changed.
pub async fn set_auto(keyspace: Option<String>, tables: Vec<String>, enabled: bool) -> Response {
    if let Some(keyspace) = keyspace.as_ref().filter(|k| !shoal_coordinator::schema().keyspaces.contains_key(*k)) {
        return Response::error(Status::BadRequest, format!("no keyspace {keyspace}"));
    }
    let answers = on_every_shard(move |_| {
        let (keyspace, tables) = (keyspace.clone(), tables.clone());
        async move { shoal_replica::local().set_auto_compaction(keyspace.as_deref(), &tables, enabled) }
    })
    .await;
    // Every shard has every table: one shard's count is the node's.
    super::json_or_500(answers.map(|changed| changed.first().copied().unwrap_or(0)))
}
