//! Which shard owns a token, and running one piece of work on every shard.

use std::future::Future;

use futures_util::future::join_all;
use shoal_runtime::{nr_shards, submit_to, ShardError};
use shoal_schema::sharder::Sharder;

/// ScyllaDB's default: the 12 most significant bits of a token are ignored
/// when choosing its shard.
pub const SHARDING_IGNORE_MSB: u32 = 12;

/// The sharder for this node's shard count.
pub fn sharder() -> Sharder {
    Sharder { nr_shards: nr_shards(), ignore_msb: SHARDING_IGNORE_MSB }
}

pub fn shard_of(token: i64) -> usize {
    sharder().shard_of(token)
}

/// Runs `work(shard)` on every shard at once and returns the answers in
/// shard order (Seastar's `invoke_on_all` / `map_reduce`): storage
/// operations, schema distribution, trace gathering.
pub async fn on_every_shard<W, Fut, T>(work: W) -> Result<Vec<T>, ShardError>
where
    W: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = T> + 'static,
    T: Send + 'static,
{
    let answers = join_all((0..nr_shards()).map(|shard| {
        let work = work.clone();
        submit_to(shard, move || work(shard))
    }))
    .await;
    let answers: Vec<T> = answers.into_iter().collect::<Result<_, _>>()?;
    assert_eq!(answers.len(), nr_shards(), "an answer from every shard");
    Ok(answers)
}
