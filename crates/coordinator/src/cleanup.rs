//! `nodetool cleanup`: drops from this node the partitions of token
//! ranges it no longer replicates. After a node joins, the old replicas of
//! the ranges it took keep their copies (streaming copies, it never moves);
//! cleanup reclaims that space, as Cassandra's and ScyllaDB's do.
//!
//! It runs per keyspace, from the ring as this node sees it: each shard
//! compacts each table whole, keeping the partitions of the vnode ranges
//! this node is a replica of. Refused while a member joins or leaves,
//! since the ranges this node will hold are not settled then.

use std::sync::Arc;

use shoal_schema::SYSTEM_KEYSPACES;
use uuid::Uuid;

use crate::schema::schema;
use crate::shards::on_every_shard;
use crate::topology::topology;
use crate::CoordinatorError;

/// Which tokens a keyspace keeps here: per vnode range `(previous, end]`,
/// in ring order, whether this node replicates it.
struct Owned {
    ends: Vec<i64>,
    replicated: Vec<bool>,
}

impl Owned {
    fn keeps(&self, token: i64) -> bool {
        // The range holding `token` ends at the first end at or past it,
        // or, past the last, wraps to the first.
        let at = self.ends.partition_point(|end| *end < token);
        self.replicated.get(at).or(self.replicated.first()).copied().unwrap_or(true)
    }
}

/// Cleans every keyspace (`None`) or one; returns how many tables, summed
/// over shards, it compacted.
pub async fn cleanup(keyspace: Option<&str>) -> Result<usize, CoordinatorError> {
    let topology = topology();
    if topology.is_changing() {
        return Err(CoordinatorError::NodeOperation(
            "a node is joining or leaving: cleanup now could drop ranges this node is about to hold; \
             run it once the change is done"
                .to_string(),
        ));
    }
    let schema = schema();
    let mut cleaned = 0;
    let keyspaces = schema.keyspaces.values().filter(|k| !SYSTEM_KEYSPACES.contains(&k.name.as_str()));
    for meta in keyspaces.filter(|k| keyspace.is_none_or(|name| k.name == name)) {
        let map = topology.replica_map(meta);
        let ranges = topology.vnode_ranges();
        let owned = Owned {
            ends: ranges.iter().map(|(_, end)| *end).collect(),
            replicated: ranges.iter().map(|(_, end)| map.replicas(*end).contains(&topology.me)).collect(),
        };
        if owned.replicated.iter().all(|r| *r) {
            continue;
        }
        let owned = Arc::new(owned);
        let tables: Arc<Vec<Uuid>> = Arc::new(meta.tables.values().map(|t| t.id).collect());
        let answers = on_every_shard(move |_| {
            let (owned, tables) = (Arc::clone(&owned), Arc::clone(&tables));
            async move { shoal_replica::local().cleanup(&tables, &|token| owned.keeps(token)).await }
        })
        .await?;
        for answer in answers {
            cleaned += answer?;
        }
        tracing::info!("cleanup of keyspace {}: dropped the ranges this node no longer replicates", meta.name);
    }
    Ok(cleaned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_belongs_to_the_range_ending_at_or_after_it_wrapping_past_the_last() {
        let owned = Owned { ends: vec![-100, 0, 100], replicated: vec![true, false, true] };
        // (100, -100] wraps: kept; (-100, 0]: dropped; (0, 100]: kept.
        for (token, kept) in [(i64::MIN, true), (-100, true), (-99, false), (0, false), (1, true), (100, true)] {
            assert_eq!(owned.keeps(token), kept, "{token}");
        }
        assert!(owned.keeps(101) && owned.keeps(i64::MAX), "past the last end wraps to the first range");
    }
}
