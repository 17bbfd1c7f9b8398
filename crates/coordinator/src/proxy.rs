//! The storage proxy: where a write or read runs, and the gathering of its
//! answers (ScyllaDB's `service/storage_proxy`).
//!
//! A partition's replicas are the nodes its keyspace's replication puts
//! it on ([`crate::topology`]). Where this node is the only one — a single
//! node, or a partition only this node holds — a request runs on this
//! node's shards alone, with no message to another node. Otherwise the
//! write goes to every live replica ([`crate::write_handler`]) and the
//! read to as many as the consistency level needs
//! ([`crate::read_executor`]).
//!
//! The paths to other nodes are boxed where they are awaited: their state
//! machines are large, and inline they would make every request's future
//! (moved whole into its task) as large, single-node requests included.
//!
//! On one node a partition lives on exactly one shard, chosen by
//! ScyllaDB's sharding of its token, so a single-partition request goes to
//! one shard and the rows of several shards merge by partition position
//! without reordering rows inside a partition.

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use shoal_replica::{CasRequest, CasResult, Mutation, PartitionSelection, ReadCommand, ReadResult};
use shoal_runtime::{nr_shards, submit_to};
use shoal_schema::sharder::Sharder;
use shoal_schema::KeyspaceMeta;
use shoal_storage::{ClusteringRange, Partition, PartitionPosition};
use uuid::Uuid;

use crate::schema::schema;
use crate::shards::{on_every_shard, range_tokens, shard_of, sharder, shards_of_range};
use crate::timeouts::{deadline, timeouts};
use crate::topology::{topology, Topology};
use crate::verbs::Target;
use crate::write_handler::Delivery;
use crate::{
    counter_write, metrics, paxos, read_executor, write_handler, ConsistencyLevel, CoordinatorError, WriteType,
};

/// Where a request on `table` runs when other nodes hold some of it: the
/// cluster and the table's keyspace. `None`: on this node alone.
pub(crate) fn placement(table: Uuid) -> Option<(Rc<Topology>, Arc<KeyspaceMeta>)> {
    let topology = topology();
    if !topology.is_cluster() {
        return None;
    }
    let schema = schema();
    let meta = schema.table_by_id(table)?;
    Some((topology, Arc::clone(schema.keyspace(&meta.keyspace)?)))
}

/// Applies `mutation` on its partition's replicas, answered once the
/// consistency level's count of them applied it. With `commitlog_sync:
/// batch`, applied means on disk.
pub async fn mutate(
    mutation: Mutation,
    consistency: ConsistencyLevel,
    write_type: WriteType,
    timeout: Duration,
) -> Result<(), CoordinatorError> {
    let deadline = deadline(timeout);
    if write_type == WriteType::Counter {
        return Box::pin(counter_write::write(mutation, consistency, deadline)).await;
    }
    if let Some((topology, keyspace)) = placement(mutation.table) {
        let targets = topology.write_targets(&keyspace, mutation.position.token);
        if !targets.only(topology.me) {
            let delivery = Delivery::Mutation;
            let write = write_handler::write(topology, targets, mutation, consistency, write_type, deadline, delivery);
            return Box::pin(write).await;
        }
    }
    mutate_local(mutation, consistency, write_type, deadline).await
}

/// Applies `mutation` on this node, on the shard that owns its partition.
pub(crate) async fn mutate_local(
    mutation: Mutation,
    consistency: ConsistencyLevel,
    write_type: WriteType,
    deadline: Instant,
) -> Result<(), CoordinatorError> {
    let shard = shard_of(mutation.position.token);
    metrics::note_target(shard);
    submit_to(shard, move || async move {
        if Instant::now() > deadline {
            return Err(CoordinatorError::WriteTimeout { consistency, write_type, received: 0, block_for: 1 });
        }
        let Mutation { table, position, update, list_ops } = mutation;
        Ok(shoal_replica::local().apply(table, position, update, &list_ops).await?)
    })
    .await?
}

/// Reads from as many of the partitions' replicas as the consistency
/// level needs, repairing those that answered differently.
pub async fn read(
    command: ReadCommand,
    consistency: ConsistencyLevel,
    timeout: Duration,
) -> Result<ReadResult, CoordinatorError> {
    let deadline = deadline(timeout);
    if let Some((topology, keyspace)) = placement(command.table) {
        if consistency.is_serial() {
            Box::pin(settle_for_serial_read(&topology, &keyspace, &command, consistency)).await?;
        }
        return Box::pin(read_executor::read(topology, keyspace, command, consistency, deadline)).await;
    }
    read_local(command, consistency, deadline).await
}

/// Cassandra's refusal of a serial read of several partitions.
fn one_partition_serial() -> CoordinatorError {
    CoordinatorError::Invalid(
        "SERIAL/LOCAL_SERIAL consistency may only be requested for one partition at a time".into(),
    )
}

/// Before a read at SERIAL or LOCAL_SERIAL of a partition other nodes
/// hold: a Paxos round that settles what conditional writes left in
/// flight, so the read sees every write chosen before it.
async fn settle_for_serial_read(
    topology: &Rc<Topology>,
    keyspace: &Arc<KeyspaceMeta>,
    command: &ReadCommand,
    serial: ConsistencyLevel,
) -> Result<(), CoordinatorError> {
    let PartitionSelection::Keys(keys) = &command.partitions else {
        return Err(one_partition_serial());
    };
    let [position] = keys.as_slice() else {
        return Err(one_partition_serial());
    };
    if topology.write_targets(keyspace, position.token).only(topology.me) {
        return Ok(());
    }
    let cas_deadline = deadline(timeouts().cas);
    let round = paxos::Round::new(
        Rc::clone(topology),
        Arc::clone(keyspace),
        command.table,
        position.clone(),
        serial,
        true,
        cas_deadline,
    );
    round.settle().await
}

/// Runs a read on every shard of this node that may hold its rows (the
/// shards owning its keys, or a token of its range) and merges the
/// answers in ring order, keeping at most the command's row limit.
pub(crate) async fn read_local(
    command: ReadCommand,
    consistency: ConsistencyLevel,
    deadline: Instant,
) -> Result<ReadResult, CoordinatorError> {
    let mut per_shard = split_by_shard(command, sharder());
    if let [(shard, _)] = per_shard.as_slice() {
        metrics::note_target(*shard);
        let (shard, command) = per_shard.remove(0);
        return read_on(shard, command, consistency, deadline).await;
    }
    let row_limit = per_shard.first().map_or(0, |(_, c)| c.row_limit);
    let answers =
        join_all(per_shard.into_iter().map(|(shard, command)| read_on(shard, command, consistency, deadline))).await;
    merge_answers(answers, row_limit)
}

/// Merges answers for disjoint sets of partitions in ring order, keeping
/// at most `row_limit` rows.
pub(crate) fn merge_answers(
    answers: Vec<Result<ReadResult, CoordinatorError>>,
    row_limit: usize,
) -> Result<ReadResult, CoordinatorError> {
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
/// or the whole range on each shard owning a token of it.
fn split_by_shard(command: ReadCommand, sharder: Sharder) -> Vec<(usize, ReadCommand)> {
    let keys = match &command.partitions {
        PartitionSelection::Keys(keys) => keys,
        PartitionSelection::Range { from, to } => {
            let shards = range_tokens(from, to).map_or_else(Vec::new, |(f, l)| shards_of_range(sharder, f, l));
            return shards.into_iter().map(|shard| (shard, command.clone())).collect();
        }
    };
    if let Some(first) = keys.first() {
        let shard = sharder.shard_of(first.token);
        // The common case, one partition (or all on one shard): the
        // command goes as it is, without copying its keys.
        if keys.iter().all(|key| sharder.shard_of(key.token) == shard) {
            return vec![(shard, command)];
        }
    }
    let mut by_shard: Vec<Vec<PartitionPosition>> = vec![Vec::new(); sharder.nr_shards];
    for key in keys {
        by_shard[sharder.shard_of(key.token)].push(key.clone());
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
            return Err(CoordinatorError::ReadTimeout { consistency, received: 0, block_for: 1, data_present: false });
        }
        Ok(shoal_replica::local().query(&command).await?)
    })
    .await?
}

/// The stored partitions at `keys` on this node, in the order given.
pub(crate) async fn read_raw_local(
    table: Uuid,
    keys: Vec<PartitionPosition>,
    clustering: Vec<ClusteringRange>,
) -> Result<Vec<Option<Partition>>, CoordinatorError> {
    let shards: Vec<usize> = keys.iter().map(|key| shard_of(key.token)).collect();
    let mut per_shard: Vec<Vec<PartitionPosition>> = vec![Vec::new(); nr_shards()];
    for (key, shard) in keys.into_iter().zip(&shards) {
        per_shard[*shard].push(key);
    }
    let answers =
        join_all(per_shard.into_iter().enumerate().filter(|(_, keys)| !keys.is_empty()).map(|(shard, keys)| {
            let clustering = clustering.clone();
            async move {
                let answer = submit_to(shard, move || async move {
                    shoal_replica::local().read_raw(table, &keys, &clustering).await
                })
                .await;
                (shard, answer)
            }
        }))
        .await;
    let mut by_shard: Vec<std::vec::IntoIter<Option<Partition>>> = vec![Vec::new().into_iter(); nr_shards()];
    for (shard, answer) in answers {
        by_shard[shard] = answer??.into_iter();
    }
    // Back in the order asked: each shard answered its keys in order.
    Ok(shards.iter().map(|shard| by_shard[*shard].next().flatten()).collect())
}

/// Removes every row of `table` on every node of the cluster, all of
/// which must be up (as in Cassandra: TRUNCATE is at ALL).
pub async fn truncate(table: Uuid, timeout: Duration) -> Result<(), CoordinatorError> {
    let deadline = deadline(timeout);
    let topology = topology();
    if !topology.is_cluster() {
        return truncate_local(table, deadline).await;
    }
    Box::pin(truncate_everywhere(&topology, table, deadline)).await
}

async fn truncate_everywhere(topology: &Topology, table: Uuid, deadline: Instant) -> Result<(), CoordinatorError> {
    let members: Vec<Uuid> = topology.members().collect();
    let alive = members.iter().filter(|host| topology.is_up(**host)).count();
    if alive < members.len() {
        return Err(CoordinatorError::Unavailable {
            consistency: ConsistencyLevel::All,
            required: members.len(),
            alive,
        });
    }
    let wait = deadline.saturating_duration_since(Instant::now());
    let answers = join_all(members.iter().map(|host| {
        let target = Target { topology, host: *host };
        shoal_runtime::time::timeout(wait, async move { target.truncate(table, deadline).await })
    }))
    .await;
    let received = answers.iter().filter(|a| matches!(a, Ok(Ok(())))).count();
    for answer in answers {
        match answer {
            Ok(Ok(())) => {}
            Ok(Err(e @ CoordinatorError::Invalid(_))) => return Err(e),
            _ => {
                return Err(CoordinatorError::WriteTimeout {
                    consistency: ConsistencyLevel::All,
                    write_type: WriteType::Simple,
                    received,
                    block_for: members.len(),
                })
            }
        }
    }
    Ok(())
}

/// Removes every row of `table` on every shard of this node.
pub(crate) async fn truncate_local(table: Uuid, deadline: Instant) -> Result<(), CoordinatorError> {
    let answers = on_every_shard(move |_| async move {
        if Instant::now() > deadline {
            return Err(CoordinatorError::WriteTimeout {
                consistency: ConsistencyLevel::All,
                write_type: WriteType::Simple,
                received: 0,
                block_for: 1,
            });
        }
        Ok(shoal_replica::local().truncate(table).await?)
    })
    .await?;
    answers.into_iter().collect()
}

/// A conditional write (compare-and-set): on the shard owning the
/// partition, under its lock, the conditions are checked and the mutation
/// applied when all hold; with other replicas, by Paxos ([`crate::paxos`]).
/// `serial` is the consistency of the check (SERIAL or LOCAL_SERIAL),
/// `consistency` that of the commit.
pub async fn cas(
    request: CasRequest,
    consistency: ConsistencyLevel,
    serial: ConsistencyLevel,
    timeout: Duration,
) -> Result<CasResult, CoordinatorError> {
    assert!(serial.is_serial(), "a conditional write's serial consistency is SERIAL or LOCAL_SERIAL");
    let deadline = deadline(timeout);
    if let Some((topology, keyspace)) = placement(request.table) {
        if !topology.write_targets(&keyspace, request.position.token).only(topology.me) {
            let (table, position) = (request.table, request.position.clone());
            let round = paxos::Round::new(topology, keyspace, table, position, serial, false, deadline);
            return Box::pin(round.cas(paxos::Conditional { request, consistency, serial })).await;
        }
    }
    cas_local(request, consistency, deadline).await
}

/// A conditional write on this node, on the shard that owns its partition.
pub(crate) async fn cas_local(
    request: CasRequest,
    consistency: ConsistencyLevel,
    deadline: Instant,
) -> Result<CasResult, CoordinatorError> {
    let shard = shard_of(request.position.token);
    metrics::note_target(shard);
    submit_to(shard, move || async move {
        if Instant::now() > deadline {
            return Err(CoordinatorError::WriteTimeout {
                consistency,
                write_type: WriteType::Cas,
                received: 0,
                block_for: 1,
            });
        }
        Ok(shoal_replica::local().cas(request).await?)
    })
    .await?
}

#[cfg(test)]
pub(crate) mod tests {
    use std::ops::Bound;

    use super::*;
    use crate::SHARDING_IGNORE_MSB;

    /// A read of every partition of `first..=last`'s tokens.
    pub(crate) fn range_read(first: i64, last: i64) -> ReadCommand {
        let at = |token| Bound::Included(PartitionPosition { token, key: bytes::Bytes::new() });
        let partitions = PartitionSelection::Range { from: at(first), to: at(last) };
        ReadCommand {
            partitions,
            ..ReadCommand::of_partitions(Uuid::nil(), Vec::new(), vec![ClusteringRange::all()], 0)
        }
    }

    #[test]
    fn a_range_read_runs_on_the_shards_owning_its_tokens() {
        let sharder = Sharder { nr_shards: 4, ignore_msb: SHARDING_IGNORE_MSB };
        let shards = |command| split_by_shard(command, sharder).into_iter().map(|(shard, _)| shard).collect::<Vec<_>>();
        // Shard 2's first token: each shard owns a quarter of a round of
        // 2^52 tokens.
        let start = i64::MIN + (2 << 50);
        assert_eq!(shards(range_read(start, start + 10)), vec![2]);
        assert_eq!(shards(range_read(start - 1, start)), vec![1, 2]);
        assert_eq!(shards(range_read(i64::MIN, i64::MAX)), vec![0, 1, 2, 3]);
        assert_eq!(shards(range_read(5, 4)), Vec::<usize>::new());
    }
}
