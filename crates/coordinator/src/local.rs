//! The local halves of the data verbs: what this node does as a replica
//! of a request, on the shards that own its partitions — apply a
//! mutation, a conditional write, a read (merged across shards in ring
//! order), raw stored partitions and their row hashes, a read's digest,
//! truncate, and a Paxos replica's prepare, accept and commit.
//!
//! The bottom of the coordinator's request path: a [`crate::target::Target`]
//! that is this node calls these directly, and the handlers of other
//! nodes' requests ([`crate::handlers`]) call them for a peer. Nothing
//! here sends a message to another node.
//!
//! On one node a partition lives on exactly one shard, chosen by
//! ScyllaDB's sharding of its token, so a single-partition request goes to
//! one shard and the rows of several shards merge by partition position
//! without reordering rows inside a partition.

use std::future::Future;
use std::time::Instant;

use bytes::Bytes;
use futures_util::future::{join_all, Either, LocalBoxFuture};
use futures_util::FutureExt;
use shoal_replica::{
    Ballot, CasRequest, CasResult, Mutation, PartitionSelection, Promise, Proposal, ReadCommand, ReadResult, ShortStop,
};
use shoal_runtime::{nr_shards, submit_to, this_shard};
use shoal_schema::sharder::Sharder;
use shoal_storage::{ClusteringRange, Partition, PartitionPosition};
use uuid::Uuid;

use crate::shards::{on_every_shard, range_tokens, shard_of, sharder, shards_of_range};
use crate::wire::PaxosPrepare;
use crate::{metrics, wire, ConsistencyLevel, CoordinatorError, WriteType};

/// Applies `mutation` on this node, on the shard that owns its partition.
pub(crate) fn mutate_local(
    mutation: Mutation,
    consistency: ConsistencyLevel,
    write_type: WriteType,
    deadline: Instant,
) -> impl Future<Output = Result<(), CoordinatorError>> {
    apply_on_owner(mutation, None, consistency, write_type, deadline)
}

/// [`mutate_local`] of a mutation another node sent, `partition` its
/// partition's encoding as it came: the replica logs those bytes, not the
/// partition encoded again.
pub(crate) fn mutate_received(
    mutation: Mutation,
    partition: Bytes,
    deadline: Instant,
) -> impl Future<Output = Result<(), CoordinatorError>> {
    apply_on_owner(mutation, Some(partition), ConsistencyLevel::One, WriteType::Simple, deadline)
}

/// Applies `mutation` on the shard that owns its partition, logging
/// `encoded` as its partition's encoding where given.
///
/// Plain functions down to the apply on this shard, not `async` ones: an
/// `async fn` keeps its arguments in its future beside the future it
/// awaits, so every layer would carry the mutation again, and a
/// replica's handler boxes (copies) the whole future per write. Another
/// shard's apply, rare where drivers and peers send each request to its
/// owning shard, is boxed.
fn apply_on_owner(
    mutation: Mutation,
    encoded: Option<Bytes>,
    consistency: ConsistencyLevel,
    write_type: WriteType,
    deadline: Instant,
) -> Either<impl Future<Output = Result<(), CoordinatorError>>, LocalBoxFuture<'static, Result<(), CoordinatorError>>> {
    let shard = shard_of(mutation.position.token);
    metrics::note_target(shard);
    if shard == this_shard() {
        return Either::Left(apply_here(mutation, encoded, consistency, write_type, deadline));
    }
    let apply = move || apply_here(mutation, encoded, consistency, write_type, deadline);
    Either::Right(
        async move {
            match submit_to(shard, apply).await {
                Ok(applied) => applied,
                Err(e) => Err(e.into()),
            }
        }
        .boxed_local(),
    )
}

/// [`apply_on_owner`] on this shard, the owner.
async fn apply_here(
    mutation: Mutation,
    encoded: Option<Bytes>,
    consistency: ConsistencyLevel,
    write_type: WriteType,
    deadline: Instant,
) -> Result<(), CoordinatorError> {
    if Instant::now() > deadline {
        return Err(CoordinatorError::WriteTimeout { consistency, write_type, received: 0, block_for: 1 });
    }
    let replica = shoal_replica::local();
    let (table, list_ops) = (mutation.table, &mutation.list_ops);
    match &encoded {
        Some(encoded) => {
            Ok(replica.apply_received(table, mutation.position, mutation.update, list_ops, encoded).await?)
        }
        None => Ok(replica.apply(table, mutation.position, mutation.update, list_ops).await?),
    }
}

/// Runs a read on every shard of this node that may hold its rows (the
/// shards owning its keys, or a token of its range) and merges the
/// answers in ring order, keeping at most the command's row limit.
pub(crate) async fn read_local(
    command: &ReadCommand,
    consistency: ConsistencyLevel,
    deadline: Instant,
) -> Result<ReadResult, CoordinatorError> {
    if let Some(shard) = keys_shard(command, sharder()) {
        metrics::note_target(shard);
        if shard == this_shard() {
            // This shard's own keys: read where the command lies, not a
            // copy of it sent.
            check_read_deadline(consistency, deadline)?;
            return Ok(shoal_replica::local().query(command).await?);
        }
        // Boxed, as the split below: another shard's read holds a copy of
        // the command and its own read's state, and inline they would make
        // every read's future (boxed by a replica's handler) that much larger.
        return Box::pin(read_on(shard, command.clone(), consistency, deadline)).await;
    }
    let per_shard = split_by_shard(command.clone(), sharder());
    let row_limit = per_shard.first().map_or(0, |(_, c)| c.row_limit);
    let answers =
        join_all(per_shard.into_iter().map(|(shard, command)| read_on(shard, command, consistency, deadline))).await;
    merge_answers(answers, row_limit)
}

/// Merges answers for disjoint sets of partitions in ring order, keeping
/// at most `row_limit` rows. An answer that stopped before its end (at its
/// row limit, or cut short by its tombstone limit) ends the merge at the
/// same partition: rows of later partitions are read again by the next
/// page. The earliest such stop wins.
pub(crate) fn merge_answers(
    answers: Vec<Result<ReadResult, CoordinatorError>>,
    row_limit: usize,
) -> Result<ReadResult, CoordinatorError> {
    let mut merged = ReadResult::default();
    let mut stop: Option<(PartitionPosition, Option<Box<ShortStop>>)> = None;
    for answer in answers {
        let answer = answer?;
        let stopped = match (answer.short, answer.rows.last()) {
            (Some(short), _) => Some((short.position.partition.clone(), Some(short))),
            (None, Some(last)) if answer.limit_reached => Some((last.position.partition.clone(), None)),
            _ => None,
        };
        if let Some((at, short)) = stopped {
            if stop.as_ref().is_none_or(|(earliest, _)| at < *earliest) {
                stop = Some((at, short));
            }
        }
        merged.limit_reached |= answer.limit_reached;
        merged.rows.extend(answer.rows);
    }
    // Stable: rows of one partition come from one shard, already in order.
    merged.rows.sort_by(|a, b| a.position.partition.cmp(&b.position.partition));
    if let Some((at, short)) = stop {
        let kept = merged.rows.partition_point(|r| r.position.partition <= at);
        merged.rows.truncate(kept);
        merged.short = short;
    }
    if merged.rows.len() > row_limit {
        merged.rows.truncate(row_limit);
        merged.limit_reached = true;
        // The last row now comes before any short stop: the page ends there.
        merged.short = None;
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
    if let Some(shard) = keys_shard(&command, sharder) {
        return vec![(shard, command)];
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

/// The one shard owning every key `command` names (the common case, one
/// partition); `None` for a range, or keys on several shards.
fn keys_shard(command: &ReadCommand, sharder: Sharder) -> Option<usize> {
    let PartitionSelection::Keys(keys) = &command.partitions else { return None };
    let shard = sharder.shard_of(keys.first()?.token);
    keys.iter().all(|key| sharder.shard_of(key.token) == shard).then_some(shard)
}

/// A read that reaches its shard past its deadline is not run.
fn check_read_deadline(consistency: ConsistencyLevel, deadline: Instant) -> Result<(), CoordinatorError> {
    match Instant::now() > deadline {
        true => Err(CoordinatorError::ReadTimeout { consistency, received: 0, block_for: 1, data_present: false }),
        false => Ok(()),
    }
}

async fn read_on(
    shard: usize,
    command: ReadCommand,
    consistency: ConsistencyLevel,
    deadline: Instant,
) -> Result<ReadResult, CoordinatorError> {
    submit_to(shard, move || async move {
        check_read_deadline(consistency, deadline)?;
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

/// The [`wire::RowHashes`] of this node's stored copies of `keys`.
pub(crate) async fn row_hashes_local(
    table: Uuid,
    keys: Vec<PartitionPosition>,
) -> Result<Vec<Option<wire::RowHashes>>, CoordinatorError> {
    let partitions = read_raw_local(table, keys, vec![ClusteringRange::all()]).await?;
    Ok(partitions.iter().map(|p| p.as_ref().map(wire::RowHashes::of)).collect())
}

/// A digest of a read's rows: equal rows give equal digests on every node
/// ([`wire::digest_of`] the rows' encoding).
pub(crate) fn digest(result: &ReadResult) -> u128 {
    wire::read_result_digest(result)
}

/// A replica's prepare on this node, on the shard owning the partition.
pub(crate) async fn prepare_local(prepare: PaxosPrepare) -> Result<Promise, CoordinatorError> {
    submit_to(shard_of(prepare.position.token), move || async move {
        let PaxosPrepare { table, position, ballot, read } = prepare;
        Ok(shoal_replica::local().paxos_prepare(table, &position, ballot, read.as_deref()).await?)
    })
    .await?
}

/// A replica's accept on this node: whether it accepted.
pub(crate) async fn accept_local(mutation: Mutation, ballot: Ballot) -> Result<bool, CoordinatorError> {
    submit_to(shard_of(mutation.position.token), move || async move {
        let Mutation { table, position, update, .. } = mutation;
        Ok(shoal_replica::local().paxos_accept(table, &position, Proposal { ballot, update }).await?)
    })
    .await?
}

/// A replica's commit on this node.
pub(crate) async fn commit_local(mutation: Mutation, ballot: Ballot) -> Result<(), CoordinatorError> {
    submit_to(shard_of(mutation.position.token), move || async move {
        Ok(shoal_replica::local().paxos_commit(mutation, ballot).await?)
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

    #[test]
    fn the_earliest_stop_of_any_shard_ends_the_merge() {
        use shoal_replica::{ResultRow, RowPosition};
        let at = |token| PartitionPosition { token, key: bytes::Bytes::new() };
        let row = |token| ResultRow {
            position: RowPosition { partition: at(token), clustering: None },
            clustering: Vec::new(),
            cells: Vec::new(),
        };
        let short = |token| {
            Box::new(ShortStop { position: RowPosition { partition: at(token), clustering: None }, at_key: false })
        };
        let full = ReadResult { rows: vec![row(1), row(5)], limit_reached: true, short: None };
        let cut = ReadResult { rows: vec![row(2)], limit_reached: true, short: Some(short(3)) };
        let merged = merge_answers(vec![Ok(full.clone()), Ok(cut)], 2).expect("merges");
        let tokens = |r: &ReadResult| r.rows.iter().map(|r| r.position.partition.token).collect::<Vec<_>>();
        // Partition 5 lies past the stop at 3: the next page reads it again.
        assert_eq!((tokens(&merged), merged.short), (vec![1, 2], Some(short(3))));
        // A shard that filled its rows at 5 ends a merge past a stop at 7.
        let later = ReadResult { rows: Vec::new(), limit_reached: true, short: Some(short(7)) };
        let merged = merge_answers(vec![Ok(full), Ok(later)], 2).expect("merges");
        assert_eq!((tokens(&merged), merged.short, merged.limit_reached), (vec![1, 5], None, true));
    }
}
