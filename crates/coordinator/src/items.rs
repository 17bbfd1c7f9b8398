//! memcached item operations, sent to the shards that own their keys: one
//! message per shard for a whole run of operations (a multi-key `get`, a
//! pipeline of `mg`), none for keys the calling shard owns.
//!
//! Operations on one key keep their order: they go to one shard, in one
//! message, and run there in order. Operations on different keys may run
//! in any order, as memcached promises nothing across keys.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use shoal_replica::{ItemLruStats, ItemOp, ItemOutcome, ItemTable};
use shoal_runtime::{nr_shards, submit_to, this_shard};
use shoal_schema::token::murmur3_token;
use shoal_storage::PartitionPosition;

use crate::shards::{on_every_shard, shard_of};
use crate::timeouts::deadline;
use crate::{metrics, ConsistencyLevel, CoordinatorError, WriteType};

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
pub fn item_position(key: &[u8]) -> PartitionPosition {
    let key = bytes::Bytes::copy_from_slice(key);
    PartitionPosition { token: murmur3_token(&key), key }
}

type ShardOps = Vec<(PartitionPosition, ItemOp)>;

/// An operation's outcome, or its failure: its own, or that of the shard
/// run it was part of (shared by that run's operations).
pub type ItemResult = Result<ItemOutcome, Arc<CoordinatorError>>;

/// Runs `ops` and returns their outcomes in the same order, each its own:
/// an operation that fails leaves the others to run and answer. A shard
/// that fails or misses the deadline fails only its own operations.
pub async fn run_items(table: ItemTable, ops: Vec<(PartitionPosition, ItemOp)>, timeout: Duration) -> Vec<ItemResult> {
    let deadline = deadline(timeout);
    let count = ops.len();
    // Per shard: the operations' places in `ops`, and the operations.
    let mut by_shard: Vec<(Vec<usize>, ShardOps)> = (0..nr_shards()).map(|_| (Vec::new(), Vec::new())).collect();
    for (index, (position, op)) in ops.into_iter().enumerate() {
        let (indexes, shard_ops) = &mut by_shard[shard_of(position.token)];
        indexes.push(index);
        shard_ops.push((position, op));
    }
    let here = this_shard();
    let runs = by_shard.into_iter().enumerate().filter(|(_, (indexes, _))| !indexes.is_empty()).map(
        |(shard, (indexes, shard_ops))| async move {
            metrics::note_target(shard);
            let answer = if shard == here {
                run_here(table, shard_ops, deadline).await
            } else {
                submit_to(shard, move || run_here(table, shard_ops, deadline)).await.unwrap_or_else(|e| Err(e.into()))
            };
            (indexes, answer)
        },
    );
    let mut outcomes: Vec<Option<ItemResult>> = (0..count).map(|_| None).collect();
    for (indexes, answer) in join_all(runs).await {
        match answer {
            Ok(answers) => {
                assert_eq!(answers.len(), indexes.len(), "a shard answers each of its operations");
                for (index, outcome) in indexes.into_iter().zip(answers) {
                    outcomes[index] = Some(outcome.map_err(Arc::new));
                }
            }
            Err(e) => {
                let e = Arc::new(e);
                indexes.into_iter().for_each(|index| outcomes[index] = Some(Err(Arc::clone(&e))));
            }
        }
    }
    // Every index went to exactly one shard, which answered it.
    outcomes.into_iter().map(|o| o.expect("every operation answered")).collect()
}

async fn run_here(
    table: ItemTable,
    ops: Vec<(PartitionPosition, ItemOp)>,
    deadline: Instant,
) -> Result<Vec<Result<ItemOutcome, CoordinatorError>>, CoordinatorError> {
    if Instant::now() > deadline {
        let writes = ops.iter().any(|(_, op)| op.writes());
        return Err(if writes {
            CoordinatorError::WriteTimeout {
                consistency: ConsistencyLevel::One,
                write_type: WriteType::Simple,
                received: 0,
                block_for: 1,
            }
        } else {
            CoordinatorError::ReadTimeout {
                consistency: ConsistencyLevel::One,
                received: 0,
                block_for: 1,
                data_present: false,
            }
        });
    }
    let outcomes = shoal_replica::local().run_items(table, ops).await;
    Ok(outcomes.into_iter().map(|outcome| outcome.map_err(CoordinatorError::from)).collect())
}
