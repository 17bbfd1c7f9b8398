//! memcached item operations, sent to the replicas of their keys.
//!
//! On one node (or for a key only this node replicates), a run of
//! operations (a multi-key `get`, a pipeline of `mg`) costs one message per
//! owning shard, none for keys the calling shard owns. In a cluster, each
//! key's operations are led by one replica, its first live natural one in
//! ring order (the primary while it is up), so any node answers any key
//! and no client needs to know the ring: the coordinator sends each
//! leader its keys' operations in one `ItemRun` message. The leader runs
//! them on its own shards (`replica::item`: read, decide, write, under the
//! partition's lock) and sends what each wrote to the other replicas as a
//! plain write, answering each operation once `memcache_write_consistency`
//! replicas (itself counted) applied it; a replica that misses it gets a
//! hint, and read repair, repair, streaming and cleanup see items as the
//! rows they are. One leader per key keeps `incr`, `cas`, `add` and
//! `append` atomic across nodes, as on one shard: replicas that each ran
//! the operation on their own copy would lose concurrent increments.
//! With `memcache_read_consistency` above ONE, the leader first reads the
//! keys of its operations that read at that level (digests, read repair),
//! so it runs them on an up-to-date copy.
//!
//! Eviction on a replicated table: only the leader's LRU list sees a key's
//! use (every operation on the key runs there), so the leader evicts, and
//! sends its deletion to the other replicas like any write: read repair
//! cannot bring an evicted item back (the deletion is newer than the item),
//! and no replica deletes a copy on its own, so none deletes what another
//! replica's clients still use.
//!
//! Operations on one key keep their order: they go to one leader and one
//! shard, in one message, and run there in order. Operations on different
//! keys may run in any order, as memcached promises nothing across keys.

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use shoal_replica::{
    ItemLruStats, ItemOp, ItemOutcome, ItemRun, ItemTable, ItemWrite, Mutation, ReadCommand, ReplicaError, Tokens,
};
use shoal_runtime::{clock, nr_shards, submit_to, this_shard};
use shoal_schema::token::murmur3_token;
use shoal_schema::KeyspaceMeta;
use shoal_storage::{ClusteringRange, PartitionPosition};
use uuid::Uuid;

use crate::shards::{on_every_shard, shard_of};
use crate::target::{error_kind, malformed, remote_error, Target};
use crate::timeouts::deadline;
use crate::topology::{placement, Topology};
use crate::wire::items::{decode_item_answers, decode_item_run, encode_item_answers, encode_item_run};
use crate::wire::items::{ItemAnswer, ItemRunRequest};
use crate::write_handler::{self, Delivery};
use crate::{metrics, read_executor, ConsistencyLevel, CoordinatorError, ItemLevels, WriteType};

/// Bounds the items table's items at `max_bytes` over the node (`None`:
/// no bound), each shard its share: past it the least recently used are
/// evicted (memcached's `-m`).
pub async fn track_items(table: ItemTable, max_bytes: Option<u64>) -> Result<(), CoordinatorError> {
    let shards = nr_shards() as u64;
    on_every_shard(
        move |_| async move { shoal_replica::local().track_items(table, max_bytes.map(|bytes| bytes / shards)) },
    )
    .await?;
    Ok(())
}

/// The items' count, bytes and evictions over every shard (what
/// memcached's `stats` reports as `curr_items`, `bytes`, `evictions` and
/// `reclaimed`).
pub async fn items_stats(table: ItemTable) -> Result<ItemLruStats, CoordinatorError> {
    let per_shard = on_every_shard(move |_| async move { shoal_replica::local().items_stats(table) }).await?;
    Ok(per_shard.into_iter().fold(ItemLruStats::default(), |sum, shard| sum + shard))
}

/// The position of an item's partition: its key is the whole partition
/// key (one blob column), so the key bytes are the partition key bytes.
pub fn item_position(key: bytes::Bytes) -> PartitionPosition {
    PartitionPosition { token: murmur3_token(&key), key }
}

type Ops = Vec<(PartitionPosition, ItemOp)>;

/// An operation's outcome, or its failure: its own, or that of the run it
/// was part of (shared by that run's operations).
pub type ItemResult = Result<ItemOutcome, Arc<CoordinatorError>>;

/// Who runs a group of operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leader {
    /// This node, the keys' only replica: nothing to send anywhere.
    Alone,
    /// This node, leading keys other replicas also hold.
    Here,
    Peer(Uuid),
}

/// Runs `ops` and returns their outcomes in the same order, each its own:
/// an operation that fails leaves the others to run and answer. A leader
/// or shard that fails or misses the deadline fails only its own
/// operations.
pub async fn run_items(table: ItemTable, ops: Ops, levels: ItemLevels, timeout: Duration) -> Vec<ItemResult> {
    let deadline = deadline(timeout);
    let Some((topology, keyspace)) = placement(table.id) else {
        return run_on_shards(table, ops, levels, deadline, false, Tokens::Hashed).await.0;
    };
    let count = ops.len();
    let map = topology.replica_map(&keyspace);
    let mut groups: Vec<(Leader, Vec<usize>, Ops)> = Vec::new();
    let mut unavailable = Vec::new();
    for (index, (position, op)) in ops.into_iter().enumerate() {
        let targets = map.write_targets(position.token);
        let leader = match targets.natural.iter().copied().find(|host| topology.is_up(*host)) {
            _ if targets.only(topology.me) => Leader::Alone,
            Some(host) if host == topology.me => Leader::Here,
            Some(host) => Leader::Peer(host),
            None => {
                let consistency = if op.writes() { levels.write } else { levels.read };
                let e = CoordinatorError::Unavailable { consistency, required: 1, alive: 0 };
                unavailable.push((vec![index], vec![Err(Arc::new(e))]));
                continue;
            }
        };
        match groups.iter_mut().find(|(l, ..)| *l == leader) {
            Some((_, indexes, group)) => {
                indexes.push(index);
                group.push((position, op));
            }
            None => groups.push((leader, vec![index], vec![(position, op)])),
        }
    }
    let topology = &topology;
    let keyspace = &keyspace;
    let runs = groups.into_iter().map(|(leader, indexes, ops)| async move {
        let outcomes = match leader {
            Leader::Alone => run_on_shards(table, ops, levels, deadline, false, Tokens::Hashed).await.0,
            Leader::Here => lead(topology, keyspace, table, ops, levels, deadline, Tokens::Hashed).await,
            Leader::Peer(host) => ask(topology, host, table, ops, levels, deadline).await,
        };
        (indexes, outcomes)
    });
    let answered = join_all(runs).await;
    gather(count, answered.into_iter().chain(unavailable))
}

/// Places each group's outcomes, in order, at its operations' indexes.
fn gather(count: usize, groups: impl IntoIterator<Item = (Vec<usize>, Vec<ItemResult>)>) -> Vec<ItemResult> {
    let mut outcomes: Vec<Option<ItemResult>> = (0..count).map(|_| None).collect();
    for (indexes, answers) in groups {
        assert_eq!(answers.len(), indexes.len(), "a group answers each of its operations");
        for (index, outcome) in indexes.into_iter().zip(answers) {
            outcomes[index] = Some(outcome);
        }
    }
    // Every index went to exactly one group, which answered it.
    outcomes.into_iter().map(|o| o.expect("every operation answered")).collect()
}

/// Runs `ops` on this node's shards that own their keys: one message per
/// shard, none for the calling shard's. With `for_replicas`, also what
/// they wrote, each write naming its operation's index in `ops`. `tokens`:
/// whether this node hashed their tokens ([`item_position`]).
async fn run_on_shards(
    table: ItemTable,
    ops: Ops,
    levels: ItemLevels,
    deadline: Instant,
    for_replicas: bool,
    tokens: Tokens,
) -> (Vec<ItemResult>, Vec<ItemWrite>) {
    let count = ops.len();
    let first = ops.first().map_or(this_shard(), |(position, _)| shard_of(position.token));
    if ops.iter().all(|(position, _)| shard_of(position.token) == first) {
        // One shard owns every key (always, on one shard): its answers are
        // in the operations' order already, nothing to split or gather.
        return match run_on(first, table, ops, levels, deadline, for_replicas, tokens).await {
            Ok(run) => (run.outcomes.into_iter().map(shared_error).collect(), run.writes),
            Err(e) => (all_failed(count, e), Vec::new()),
        };
    }
    // Per shard: the operations' places in `ops`, and the operations.
    let mut by_shard: Vec<(Vec<usize>, Ops)> = (0..nr_shards()).map(|_| (Vec::new(), Vec::new())).collect();
    for (index, (position, op)) in ops.into_iter().enumerate() {
        let (indexes, shard_ops) = &mut by_shard[shard_of(position.token)];
        indexes.push(index);
        shard_ops.push((position, op));
    }
    let runs = by_shard.into_iter().enumerate().filter(|(_, (indexes, _))| !indexes.is_empty()).map(
        |(shard, (indexes, shard_ops))| async move {
            (indexes, run_on(shard, table, shard_ops, levels, deadline, for_replicas, tokens).await)
        },
    );
    let mut writes = Vec::new();
    let mut groups = Vec::new();
    for (indexes, answer) in join_all(runs).await {
        let outcomes = match answer {
            Ok(run) => {
                writes.extend(run.writes.into_iter().map(|w| ItemWrite { op: w.op.map(|i| indexes[i]), ..w }));
                run.outcomes.into_iter().map(shared_error).collect()
            }
            Err(e) => all_failed(indexes.len(), e),
        };
        groups.push((indexes, outcomes));
    }
    (gather(count, groups), writes)
}

/// A shard's outcome as the run answers it: its error, if any, shared.
fn shared_error(outcome: Result<ItemOutcome, ReplicaError>) -> ItemResult {
    outcome.map_err(|e| Arc::new(CoordinatorError::from(e)))
}

/// Runs `ops` on `shard`, which owns their keys: here, or in a message to
/// it (`for_replicas`, `tokens`: [`run_on_shards`]'s).
async fn run_on(
    shard: usize,
    table: ItemTable,
    ops: Ops,
    levels: ItemLevels,
    deadline: Instant,
    for_replicas: bool,
    tokens: Tokens,
) -> Result<ItemRun, CoordinatorError> {
    metrics::note_target(shard);
    let run = move || async move {
        if Instant::now() > deadline {
            return Err(timed_out(&ops, levels));
        }
        Ok(shoal_replica::local().run_items(table, ops, for_replicas, tokens).await)
    };
    if shard == this_shard() {
        run().await
    } else {
        submit_to(shard, run).await.unwrap_or_else(|e| Err(e.into()))
    }
}

/// Every one of `count` operations failed with `e`.
fn all_failed(count: usize, e: CoordinatorError) -> Vec<ItemResult> {
    let e = Arc::new(e);
    (0..count).map(|_| Err(Arc::clone(&e))).collect()
}

/// The timeout of a run that got no answer: a write's if any of `ops`
/// writes.
fn timed_out(ops: &[(PartitionPosition, ItemOp)], levels: ItemLevels) -> CoordinatorError {
    match ops.iter().any(|(_, op)| op.writes()) {
        true => CoordinatorError::WriteTimeout {
            consistency: levels.write,
            write_type: WriteType::Simple,
            received: 0,
            block_for: 1,
        },
        false => {
            CoordinatorError::ReadTimeout { consistency: levels.read, received: 0, block_for: 1, data_present: false }
        }
    }
}

/// Leads `ops` on this node, a live natural replica of each of their keys:
/// runs them here, then has the other replicas apply what they wrote,
/// each operation answered once its write meets `levels.write`.
/// Evictions go to the other replicas without holding up any answer.
/// `tokens`: whether this node hashed their tokens ([`item_position`]).
async fn lead(
    topology: &Rc<Topology>,
    keyspace: &Arc<KeyspaceMeta>,
    table: ItemTable,
    ops: Ops,
    levels: ItemLevels,
    deadline: Instant,
    tokens: Tokens,
) -> Vec<ItemResult> {
    // Unavailable before anything is written.
    let map = topology.replica_map(keyspace);
    let (mut indexes, mut available, mut unavailable) = (Vec::new(), Vec::new(), Vec::new());
    for (index, (position, op)) in ops.into_iter().enumerate() {
        let checked = match op.writes() {
            true => write_handler::check_available(topology, &map.write_targets(position.token), levels.write),
            false => Ok(()),
        };
        match checked {
            Ok(()) => {
                indexes.push(index);
                available.push((position, op));
            }
            Err(e) => unavailable.push((vec![index], vec![Err(Arc::new(e))])),
        }
    }
    let count = indexes.len() + unavailable.len();
    let outcomes = lead_available(topology, keyspace, table, available, levels, deadline, tokens).await;
    gather(count, std::iter::once((indexes, outcomes)).chain(unavailable))
}

/// [`lead`]s `ops`, whose writes have enough live replicas.
async fn lead_available(
    topology: &Rc<Topology>,
    keyspace: &Arc<KeyspaceMeta>,
    table: ItemTable,
    ops: Ops,
    levels: ItemLevels,
    deadline: Instant,
    tokens: Tokens,
) -> Vec<ItemResult> {
    if levels.read != ConsistencyLevel::One {
        let keys: Vec<PartitionPosition> = ops.iter().filter(|(_, op)| op.reads()).map(|(p, _)| p.clone()).collect();
        if !keys.is_empty() {
            // This node reads first, so read repair brings its copies up.
            let command = ReadCommand::of_partitions(table.id, keys, vec![ClusteringRange::all()], clock::now_s());
            let read = read_executor::read(Rc::clone(topology), Arc::clone(keyspace), command, levels.read, deadline);
            if let Err(e) = Box::pin(read).await {
                let e = Arc::new(e);
                return ops.iter().map(|_| Err(Arc::clone(&e))).collect();
            }
        }
    }
    let (mut outcomes, writes) = run_on_shards(table, ops, levels, deadline, true, tokens).await;
    let map = topology.replica_map(keyspace);
    let mut sends = Vec::new();
    for ItemWrite { op, position, update } in writes {
        let targets = map.write_targets(position.token);
        let mutation = Mutation { table: table.id, position, update, list_ops: Vec::new() };
        let consistency = if op.is_some() { levels.write } else { ConsistencyLevel::One };
        let topology = Rc::clone(topology);
        let sent = write_handler::write(
            topology,
            targets,
            mutation,
            consistency,
            WriteType::Simple,
            deadline,
            Delivery::LedHere,
        );
        match op {
            Some(index) => sends.push(async move { (index, sent.await) }),
            None => shoal_runtime::spawn(async move {
                if let Err(e) = sent.await {
                    tracing::debug!("an eviction did not reach every replica of its item (a hint may): {e}");
                }
            }),
        }
    }
    for (index, sent) in join_all(sends).await {
        if let Err(e) = sent {
            // Applied here already: the write may stand.
            outcomes[index] = Err(Arc::new(e));
        }
    }
    outcomes
}

/// Asks `host` to lead `ops` (`Verb::ItemRun`), each answered as it ran there.
async fn ask(
    topology: &Topology,
    host: Uuid,
    table: ItemTable,
    ops: Ops,
    levels: ItemLevels,
    deadline: Instant,
) -> Vec<ItemResult> {
    let count = ops.len();
    let token = ops.first().map_or(0, |(position, _)| position.token);
    let timeout = timed_out(&ops, levels);
    let timeout_ms = deadline.saturating_duration_since(Instant::now()).as_millis() as u64;
    let payload = encode_item_run(&ItemRunRequest { table, levels, timeout_ms, ops });
    let target = Target { topology, host };
    let asked = async {
        let address = target.address()?;
        let answer = target.lead_items(token, &payload).await?;
        let answers = decode_item_answers(&answer)
            .map_err(|e| CoordinatorError::Remote(format!("{address}'s item answers: {e}")))?;
        if answers.len() != count {
            return Err(CoordinatorError::Remote(format!(
                "{address}: {} answers to {count} operations",
                answers.len()
            )));
        }
        Ok(answers
            .into_iter()
            .map(|answer| match answer {
                ItemAnswer::Done(outcome) => Ok(outcome),
                ItemAnswer::Failed { kind, message } => Err(Arc::new(remote_error(address, kind, message))),
            })
            .collect())
    };
    let failed = match shoal_runtime::lowres::timeout_at(deadline, asked).await {
        Ok(Ok(outcomes)) => return outcomes,
        Ok(Err(e)) => {
            tracing::debug!("item leader {host} failed a run: {e}");
            e
        }
        Err(_) => timeout,
    };
    all_failed(count, failed)
}

/// Serves a run of item operations another node asks this one to lead
/// (`Verb::ItemRun`). An operation on a key this node does not replicate
/// is refused: its write would live where no read looks for it.
pub(crate) async fn serve(payload: bytes::Bytes) -> Result<Vec<u8>, CoordinatorError> {
    let ItemRunRequest { table, levels, timeout_ms, ops } = decode_item_run(&payload).map_err(malformed)?;
    let deadline = Instant::now() + Duration::from_millis(timeout_ms);
    let Some((topology, keyspace)) = placement(table.id) else {
        return Err(CoordinatorError::Remote("asked to lead item operations without a cluster".into()));
    };
    let count = ops.len();
    let map = topology.replica_map(&keyspace);
    let (mut indexes, mut led, mut refused) = (Vec::new(), Vec::new(), Vec::new());
    for (index, (position, op)) in ops.into_iter().enumerate() {
        if map.replicas(position.token).contains(&topology.me) {
            indexes.push(index);
            led.push((position, op));
        } else {
            let e = CoordinatorError::Remote("asked to lead an item operation on a key it does not replicate".into());
            refused.push((vec![index], vec![Err(Arc::new(e))]));
        }
    }
    // The sender's tokens: each write checks its own.
    let outcomes = lead(&topology, &keyspace, table, led, levels, deadline, Tokens::Received).await;
    let answers: Vec<ItemAnswer> = gather(count, std::iter::once((indexes, outcomes)).chain(refused))
        .into_iter()
        .map(|outcome| match outcome {
            Ok(outcome) => ItemAnswer::Done(outcome),
            Err(e) => ItemAnswer::Failed { kind: error_kind(&e), message: e.to_string() },
        })
        .collect();
    Ok(encode_item_answers(&answers))
}
