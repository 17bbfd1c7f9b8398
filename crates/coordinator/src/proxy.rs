//! The storage proxy: where a write or read runs, and the gathering of its
//! answers (ScyllaDB's `service/storage_proxy`).
//!
//! A partition lives on exactly one shard, chosen by ScyllaDB's sharding of
//! its token, so a single-partition request goes to one shard and the rows
//! of several shards merge by partition position without reordering rows
//! inside a partition. Each call takes the consistency level and the
//! timeout its front end chose; with one copy of each partition every level
//! is met by the owning shard's answer.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use shoal_replica::{CasRequest, CasResult, Mutation, PartitionSelection, ReadCommand, ReadResult};
use shoal_runtime::{nr_shards, submit_to};
use shoal_storage::PartitionPosition;
use uuid::Uuid;

use crate::shards::{on_every_shard, shard_of};
use crate::timeouts::deadline;
use crate::{metrics, ConsistencyLevel, CoordinatorError, WriteType};

/// Applies `mutation` on the shard that owns its partition. With
/// `commitlog_sync: batch`, returns once it is on disk there.
pub async fn mutate(
    mutation: Mutation,
    consistency: ConsistencyLevel,
    write_type: WriteType,
    timeout: Duration,
) -> Result<(), CoordinatorError> {
    let deadline = deadline(timeout);
    let shard = shard_of(mutation.position.token);
    metrics::note_target(shard);
    submit_to(shard, move || async move {
        if Instant::now() > deadline {
            return Err(CoordinatorError::WriteTimeout { consistency, write_type });
        }
        let Mutation { table, position, update, list_ops } = mutation;
        Ok(shoal_replica::local().apply(table, position, update, &list_ops).await?)
    })
    .await?
}

/// Runs a read on every shard that may hold its rows and merges the answers
/// in ring order, keeping at most the command's row limit.
pub async fn read(
    command: ReadCommand,
    consistency: ConsistencyLevel,
    timeout: Duration,
) -> Result<ReadResult, CoordinatorError> {
    let deadline = deadline(timeout);
    let mut per_shard = split_by_shard(command);
    if let [(shard, _)] = per_shard.as_slice() {
        metrics::note_target(*shard);
        let (shard, command) = per_shard.remove(0);
        return read_on(shard, command, consistency, deadline).await;
    }
    let row_limit = per_shard.first().map_or(0, |(_, c)| c.row_limit);
    let answers =
        join_all(per_shard.into_iter().map(|(shard, command)| read_on(shard, command, consistency, deadline))).await;
    let mut merged = ReadResult::default();
    for answer in answers {
        let answer = answer?;
        merged.limit_reached |= answer.limit_reached;
        merged.rows.extend(answer.rows);
    }
    // Stable: rows of one partition come from one shard, already in order.
    merged.rows.sort_by(|a, b| a.position.partition.cmp(&b.position.partition));
    if merged.rows.len() > row_limit {
        merged.rows.truncate(row_limit);
        merged.limit_reached = true;
    }
    Ok(merged)
}

/// The command for each shard that may hold its rows: the keys it owns,
/// or the whole range on every shard.
fn split_by_shard(command: ReadCommand) -> Vec<(usize, ReadCommand)> {
    let keys = match &command.partitions {
        PartitionSelection::Keys(keys) => keys,
        PartitionSelection::Range { .. } => {
            return (0..nr_shards()).map(|shard| (shard, command.clone())).collect();
        }
    };
    if let Some(first) = keys.first() {
        let shard = shard_of(first.token);
        // The common case, one partition (or all on one shard): the
        // command goes as it is, without copying its keys.
        if keys.iter().all(|key| shard_of(key.token) == shard) {
            return vec![(shard, command)];
        }
    }
    let mut by_shard: Vec<Vec<PartitionPosition>> = vec![Vec::new(); nr_shards()];
    for key in keys {
        by_shard[shard_of(key.token)].push(key.clone());
    }
    by_shard
        .into_iter()
        .enumerate()
        .filter(|(_, keys)| !keys.is_empty())
        .map(|(shard, keys)| (shard, ReadCommand { partitions: PartitionSelection::Keys(keys), ..command.clone() }))
        .collect()
}

async fn read_on(
    shard: usize,
    command: ReadCommand,
    consistency: ConsistencyLevel,
    deadline: Instant,
) -> Result<ReadResult, CoordinatorError> {
    submit_to(shard, move || async move {
        if Instant::now() > deadline {
            return Err(CoordinatorError::ReadTimeout { consistency });
        }
        Ok(shoal_replica::local().query(&command).await?)
    })
    .await?
}

/// Removes every row of `table` on every shard.
pub async fn truncate(table: Uuid, timeout: Duration) -> Result<(), CoordinatorError> {
    let deadline = deadline(timeout);
    let answers = on_every_shard(move |_| async move {
        if Instant::now() > deadline {
            return Err(CoordinatorError::WriteTimeout {
                consistency: ConsistencyLevel::All,
                write_type: WriteType::Simple,
            });
        }
        Ok(shoal_replica::local().truncate(table).await?)
    })
    .await?;
    answers.into_iter().collect()
}

/// A conditional write (compare-and-set): on the shard owning the
/// partition, under its lock, the conditions are checked and the mutation
/// applied when all hold. `serial` is the consistency of the check (SERIAL
/// or LOCAL_SERIAL), `consistency` that of the commit.
pub async fn cas(
    request: CasRequest,
    consistency: ConsistencyLevel,
    serial: ConsistencyLevel,
    timeout: Duration,
) -> Result<CasResult, CoordinatorError> {
    assert!(serial.is_serial(), "a conditional write's serial consistency is SERIAL or LOCAL_SERIAL");
    let deadline = deadline(timeout);
    let shard = shard_of(request.position.token);
    metrics::note_target(shard);
    submit_to(shard, move || async move {
        if Instant::now() > deadline {
            return Err(CoordinatorError::WriteTimeout { consistency, write_type: WriteType::Cas });
        }
        Ok(shoal_replica::local().cas(request).await?)
    })
    .await?
}
