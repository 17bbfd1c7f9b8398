//! Storage operations run on every shard (nodetool flush, compact,
//! snapshot).

use shoal_runtime::ShardError;

use crate::shards::on_every_shard;
use crate::CoordinatorError;

/// A storage operation naming a keyspace and tables or (`None`) everything.
#[derive(Debug, Clone)]
pub enum StorageOp {
    Flush { keyspace: Option<String>, tables: Vec<String> },
    Compact { keyspace: Option<String>, tables: Vec<String> },
    Snapshot { keyspace: Option<String>, tag: String },
}

/// Runs `op` on every shard; returns the tables (or, for a snapshot, the
/// SSTables) it touched, summed over shards.
pub async fn storage_op(op: StorageOp) -> Result<usize, CoordinatorError> {
    let answers = on_every_shard(move |_| {
        let op = op.clone();
        async move {
            let db = shoal_replica::local();
            match &op {
                StorageOp::Flush { keyspace, tables } => db.flush(keyspace.as_deref(), tables).await,
                StorageOp::Compact { keyspace, tables } => db.compact(keyspace.as_deref(), tables).await,
                StorageOp::Snapshot { keyspace, tag } => db.snapshot(keyspace.as_deref(), tag).await,
            }
        }
    })
    .await
    .map_err(|e: ShardError| CoordinatorError::from(e))?;
    let mut total = 0;
    for answer in answers {
        total += answer?;
    }
    Ok(total)
}
