//! The operations the API runs, each answered when done: flush,
//! compaction, snapshot (on every shard, by message), drain (shard 0),
//! decommission, remove_node, repair, rebuild and cleanup (the
//! coordinator's node operations), and the run-time log levels and trace
//! probability.

use serde_json::json;
use shoal_coordinator::StorageOp;
use shoal_http::{Request, Response, Status};
use shoal_runtime::submit_to;

use super::json_or_500;

/// A `POST /storage_service/...` operation, named by its path; its
/// arguments in the query are read when it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operation {
    /// `keyspace_flush[/<keyspace>][?cf=t1,t2]`
    Flush(Option<String>),
    /// `keyspace_compaction[/<keyspace>][?cf=t1,t2]`
    Compact(Option<String>),
    /// `snapshots?tag=<tag>[&kn=<keyspace>]`
    Snapshot,
    /// `drain`: stops serving clients, flushes, leaves the commitlog clean.
    Drain,
    /// `decommission`: streams this node's data away and leaves; the node
    /// then stops.
    Decommission,
    /// `remove_node?host_id=<uuid>`: removes a dead member.
    RemoveNode,
    /// `repair[/<keyspace>]`
    Repair(Option<String>),
    /// `rebuild`: this node takes from the other replicas what it lacks of
    /// every range it replicates (repair's exchange; no `source_dc`).
    Rebuild,
    /// `keyspace_cleanup[/<keyspace>]`
    Cleanup(Option<String>),
}

impl Operation {
    pub fn by_path(path: &str) -> Option<Operation> {
        let keyspace = |prefix: &str| {
            let rest = path.strip_prefix(prefix)?;
            match rest {
                "" => Some(None),
                _ => Some(rest.strip_prefix('/').filter(|k| !k.is_empty() && !k.contains('/')).map(str::to_string)),
            }
        };
        let fixed = match path {
            "/storage_service/snapshots" => Some(Operation::Snapshot),
            "/storage_service/drain" => Some(Operation::Drain),
            "/storage_service/decommission" => Some(Operation::Decommission),
            "/storage_service/remove_node" => Some(Operation::RemoveNode),
            "/storage_service/rebuild" => Some(Operation::Rebuild),
            _ => None,
        };
        fixed
            .or_else(|| keyspace("/storage_service/keyspace_flush").map(Operation::Flush))
            .or_else(|| keyspace("/storage_service/keyspace_compaction").map(Operation::Compact))
            .or_else(|| keyspace("/storage_service/repair").map(Operation::Repair))
            .or_else(|| keyspace("/storage_service/keyspace_cleanup").map(Operation::Cleanup))
    }

    pub async fn run(self, request: &Request) -> Response {
        let tables = || -> Vec<String> {
            request.param("cf").map(|cf| cf.split(',').map(str::to_string).collect()).unwrap_or_default()
        };
        match self {
            Operation::Flush(keyspace) => storage_op(StorageOp::Flush { keyspace, tables: tables() }).await,
            Operation::Compact(keyspace) => storage_op(StorageOp::Compact { keyspace, tables: tables() }).await,
            Operation::Snapshot => match request.param("tag").filter(|t| !t.is_empty() && !t.contains(['/', '.'])) {
                Some(tag) => {
                    let keyspace = request.param("kn").map(str::to_string);
                    storage_op(StorageOp::Snapshot { keyspace, tag: tag.to_string() }).await
                }
                None => Response::error(Status::BadRequest, "snapshots needs ?tag=<name without / or .>"),
            },
            Operation::Drain => drain().await,
            Operation::Decommission => decommission().await,
            Operation::RemoveNode => remove_node(request).await,
            Operation::Repair(keyspace) => repair(keyspace.as_deref()).await,
            Operation::Rebuild if request.param("source_dc").is_some() => {
                Response::error(Status::BadRequest, "rebuild takes from every replica; no source_dc")
            }
            Operation::Rebuild => repair(None).await,
            Operation::Cleanup(keyspace) => json_or_500(shoal_coordinator::cleanup::cleanup(keyspace.as_deref()).await),
        }
    }
}

/// A flush, compaction or snapshot on every shard: the number of tables
/// (SSTables for a snapshot) it touched.
async fn storage_op(op: StorageOp) -> Response {
    json_or_500(shoal_coordinator::storage_op(op).await)
}

/// Drains this node (see `shutdown`); answered once drained.
async fn drain() -> Response {
    let drained = match submit_to(0, || async { crate::shutdown::drain().await }).await {
        Ok(Ok(drained)) => drained,
        Ok(Err(e)) => return Response::error(Status::InternalError, e),
        Err(e) => return Response::error(Status::InternalError, e),
    };
    Response::json(&json!({
        "took_ms": drained.took.as_millis(),
        "peers_told": drained.peers_told,
        "connections_closed": drained.connections_closed,
        "busy_left": drained.busy_left,
        "tables_flushed": drained.tables_flushed,
    }))
}

/// Decommissions this node; once answered, the node stops as a drain
/// does: its grace lets the answer reach the caller and drivers hear
/// REMOVED_NODE from the other nodes and finish what they sent here, and
/// the requests read are answered (one cut off unanswered would be retried
/// elsewhere by the driver, and a counter increment counted twice).
async fn decommission() -> Response {
    match shoal_coordinator::node_ops::decommission().await {
        Ok(()) => {
            shoal_runtime::spawn(async {
                let _ = submit_to(0, || crate::shutdown::stop("decommissioned: this node left the cluster")).await;
            });
            Response::json(&json!("decommissioned"))
        }
        Err(e) => Response::error(Status::InternalError, e),
    }
}

async fn remove_node(request: &Request) -> Response {
    let Some(host) = request.param("host_id").and_then(|h| uuid::Uuid::parse_str(h).ok()) else {
        return Response::error(Status::BadRequest, "remove_node needs ?host_id=<the dead node's host id>");
    };
    match shoal_coordinator::node_ops::remove_node(host).await {
        Ok(()) => Response::json(&json!(host.to_string())),
        Err(e) => Response::error(Status::InternalError, e),
    }
}

/// Repairs the ranges this node replicates: what was compared and sent.
async fn repair(keyspace: Option<&str>) -> Response {
    match shoal_coordinator::repair::repair(keyspace).await {
        Ok(r) => Response::json(&json!({
            "ranges": r.ranges,
            "partitions": r.partitions,
            "differing": r.differing,
            "whole": r.whole,
            "rows": r.rows,
            "written": r.written,
        })),
        Err(e) => Response::error(Status::InternalError, e),
    }
}

/// The log levels in force: `{"default": directives, "modules":
/// {module: level, ...}}`.
pub fn logger_levels() -> Response {
    match crate::logging::levels() {
        Ok((base, modules)) => {
            let modules: serde_json::Map<String, serde_json::Value> =
                modules.into_iter().map(|(m, l)| (m, json!(l))).collect();
            Response::json(&json!({"default": base, "modules": modules}))
        }
        Err(e) => Response::error(Status::InternalError, e),
    }
}

/// `logger/<module>?level=<level>`: a module's log level from now on;
/// `logger?reset`: the levels of the start.
pub fn set_logger_level(module: &str, request: &Request) -> Response {
    let result = match (module, request.param("level"), request.param("reset")) {
        ("", None, Some(_)) => crate::logging::reset(),
        (module, Some(level), None) if !module.is_empty() => crate::logging::set_level(module, level),
        _ => {
            let usage = "use /system/logger/<module>?level=<level> or /system/logger?reset";
            return Response::error(Status::BadRequest, usage);
        }
    };
    match result {
        Ok(()) => Response::json(&json!("ok")),
        Err(e) => Response::error(Status::BadRequest, e),
    }
}

/// `GET /storage_service/trace_probability`: the chance that a request
/// sent without the TRACING flag is traced (this shard's; every shard has
/// the same).
pub fn trace_probability() -> Response {
    Response::json(&json!(shoal_cql::traces::probability()))
}

/// `POST /storage_service/trace_probability?probability=<0..1>`: sets it on
/// every shard.
pub async fn set_trace_probability(request: &Request) -> Response {
    let probability = request.param("probability").and_then(|p| p.parse::<f64>().ok());
    let Some(probability) = probability.filter(|p| (0.0..=1.0).contains(p)) else {
        return Response::error(Status::BadRequest, "trace_probability needs ?probability= a number from 0 to 1");
    };
    let set =
        shoal_coordinator::on_every_shard(move |_| async move { shoal_cql::traces::set_probability(probability) });
    json_or_500(set.await.map(|_| probability))
}
