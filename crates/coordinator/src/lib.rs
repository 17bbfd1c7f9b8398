//! The coordinator: given a request for data, decides which shards (later:
//! which replicas on which nodes, at which consistency level) serve it, sends
//! it there by message, and combines the answers.
//!
//! Invariants:
//! - a partition lives on exactly one shard, chosen by ScyllaDB's sharding of
//!   its token, so single-partition work goes to one shard and results of
//!   several shards merge by partition position without reordering rows
//!   inside a partition;
//! - every shard sees the same sequence of schema snapshots: only shard 0
//!   changes the schema, and it pushes each snapshot to all shards before the
//!   DDL statement is answered.

mod metrics;

use std::sync::Arc;

use futures_util::future::join_all;
use shoal_replica::{ListOp, PartitionSelection, ReadCommand, ReadResult, ReplicaError};
use shoal_runtime::{nr_shards, submit_to, this_shard, ShardError};
use shoal_schema::sharder::Sharder;
use shoal_schema::{Schema, SchemaChange};
use shoal_storage::{PartitionPosition, PartitionUpdate};
use thiserror::Error;
use uuid::Uuid;

pub use metrics::register_metrics;

/// ScyllaDB's default: the 12 most significant bits of a token are ignored
/// when choosing its shard.
pub const SHARDING_IGNORE_MSB: u32 = 12;

#[derive(Debug, Error)]
pub enum CoordinatorError {
    #[error(transparent)]
    Replica(#[from] ReplicaError),
    #[error(transparent)]
    Shard(#[from] ShardError),
}

/// The sharder for this node's shard count.
pub fn sharder() -> Sharder {
    Sharder { nr_shards: nr_shards(), ignore_msb: SHARDING_IGNORE_MSB }
}

pub fn shard_of(token: i64) -> usize {
    sharder().shard_of(token)
}

/// Applies a partition update (and list operations that read the current
/// list) on the shard that owns it.
pub async fn mutate(
    table: Uuid,
    position: PartitionPosition,
    update: PartitionUpdate,
    list_ops: Vec<ListOp>,
) -> Result<(), CoordinatorError> {
    let shard = shard_of(position.token);
    metrics::note_target(shard);
    let result =
        submit_to(shard, move || async move { shoal_replica::local().apply(table, position, update, &list_ops).await })
            .await?;
    Ok(result?)
}

/// Runs `f` on the shard that owns `token` (a conditional write's
/// read-check-write, which must run where the partition's data is).
pub async fn on_owner<F, Fut, T>(token: i64, f: F) -> Result<T, CoordinatorError>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = T> + 'static,
    T: Send + 'static,
{
    let shard = shard_of(token);
    metrics::note_target(shard);
    Ok(submit_to(shard, f).await?)
}

/// Runs a read on every shard that may hold its rows and merges the answers
/// in ring order, keeping at most the command's row limit.
pub async fn read(command: ReadCommand) -> Result<ReadResult, CoordinatorError> {
    let per_shard: Vec<(usize, ReadCommand)> = match &command.partitions {
        PartitionSelection::Keys(keys) => {
            let mut by_shard: Vec<Vec<PartitionPosition>> = vec![Vec::new(); nr_shards()];
            for key in keys {
                by_shard[shard_of(key.token)].push(key.clone());
            }
            let commands = by_shard.into_iter().enumerate().filter(|(_, keys)| !keys.is_empty());
            commands
                .map(|(shard, keys)| {
                    (shard, ReadCommand { partitions: PartitionSelection::Keys(keys), ..command.clone() })
                })
                .collect()
        }
        PartitionSelection::Range { .. } => (0..nr_shards()).map(|shard| (shard, command.clone())).collect(),
    };
    if let [(shard, _)] = per_shard.as_slice() {
        metrics::note_target(*shard);
    }
    let answers =
        join_all(per_shard.into_iter().map(|(shard, command)| {
            submit_to(shard, move || async move { shoal_replica::local().query(&command).await })
        }))
        .await;
    let mut merged = ReadResult::default();
    for answer in answers {
        let answer = answer??;
        merged.limit_reached |= answer.limit_reached;
        merged.rows.extend(answer.rows);
    }
    // Stable: rows of one partition come from one shard, already in order.
    merged.rows.sort_by(|a, b| a.position.partition.cmp(&b.position.partition));
    if merged.rows.len() > command.row_limit {
        merged.rows.truncate(command.row_limit);
        merged.limit_reached = true;
    }
    Ok(merged)
}

/// Removes every row of `table` on every shard.
pub async fn truncate(table: Uuid) -> Result<(), CoordinatorError> {
    let answers = join_all(
        (0..nr_shards())
            .map(|shard| submit_to(shard, move || async move { shoal_replica::local().truncate(table).await })),
    )
    .await;
    for answer in answers {
        answer??;
    }
    Ok(())
}

/// A storage operation run on every shard (nodetool flush, compact,
/// snapshot), naming a keyspace and tables or (`None`) everything.
#[derive(Debug, Clone)]
pub enum StorageOp {
    Flush { keyspace: Option<String>, tables: Vec<String> },
    Compact { keyspace: Option<String>, tables: Vec<String> },
    Snapshot { keyspace: Option<String>, tag: String },
}

/// Runs `op` on every shard; returns the tables (or, for a snapshot, the
/// SSTables) it touched, summed over shards.
pub async fn storage_op(op: StorageOp) -> Result<usize, CoordinatorError> {
    let answers = join_all((0..nr_shards()).map(|shard| {
        let op = op.clone();
        submit_to(shard, move || async move {
            let db = shoal_replica::local();
            match &op {
                StorageOp::Flush { keyspace, tables } => db.flush(keyspace.as_deref(), tables).await,
                StorageOp::Compact { keyspace, tables } => db.compact(keyspace.as_deref(), tables).await,
                StorageOp::Snapshot { keyspace, tag } => db.snapshot(keyspace.as_deref(), tag).await,
            }
        })
    }))
    .await;
    let mut total = 0;
    for answer in answers {
        total += answer??;
    }
    Ok(total)
}

/// Installs `schema` on every shard, then returns. Called on shard 0 only.
pub async fn set_schema_everywhere(schema: Arc<Schema>, change: Option<SchemaChange>) -> Result<(), CoordinatorError> {
    assert_eq!(this_shard(), 0, "only shard 0 changes the schema");
    let answers = join_all((0..nr_shards()).map(|shard| {
        let schema = Arc::clone(&schema);
        let change = change.clone();
        submit_to(shard, move || async move { shoal_replica::local().set_schema(schema, change.as_ref()) })
    }))
    .await;
    for answer in answers {
        answer?;
    }
    Ok(())
}
