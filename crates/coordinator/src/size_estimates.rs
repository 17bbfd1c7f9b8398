//! `system.size_estimates`: for each user table, each token range this
//! node is the primary replica of, an estimate of the partitions the node
//! holds in it and their mean size. Spark's connector, Beam and other bulk
//! readers split a table scan by these.
//!
//! As in Cassandra and ScyllaDB, only flushed data counts (SSTables, not
//! memtables). The estimate spreads a table's partitions on this node
//! evenly over the token ranges the node replicates for its keyspace, so a
//! range's share is its width over theirs; the mean size is the SSTables'
//! bytes over their partitions. A wrapping range is split at the ring's
//! end, as Cassandra writes it, so every row's start is below its end.
//!
//! Also the figures of ScyllaDB's `system.runtime_info` (memtables, row
//! cache, SSTable bytes, memory), likewise gathered from every shard.

use shoal_cluster::ring::range_width;
use shoal_schema::SYSTEM_KEYSPACES;
use uuid::Uuid;

use crate::schema::schema;
use crate::shards::on_every_shard;
use crate::topology::topology;
use crate::CoordinatorError;

/// One row of `system.size_estimates`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeEstimate {
    pub keyspace: String,
    pub table: String,
    /// The range `(start, end]`; `end` is `i64::MIN` for the range that
    /// reaches the ring's end.
    pub start: i64,
    pub end: i64,
    pub mean_partition_size: i64,
    pub partitions_count: i64,
}

/// The estimates now, for every user table, over this node's primary ranges.
pub async fn size_estimates() -> Result<Vec<SizeEstimate>, CoordinatorError> {
    let schema = schema();
    let topology = topology();
    let tables: Vec<_> = schema
        .keyspaces
        .values()
        .filter(|k| !SYSTEM_KEYSPACES.contains(&k.name.as_str()))
        .flat_map(|k| k.tables.values().map(move |t| (k, t)))
        .collect();
    let ids: Vec<Uuid> = tables.iter().map(|(_, t)| t.id).collect();
    let per_shard = on_every_shard(move |_| {
        let ids = ids.clone();
        async move {
            let db = shoal_replica::local();
            ids.iter().map(|id| db.flushed_partitions(*id)).collect::<Vec<(u64, u64)>>()
        }
    })
    .await?;
    let ranges = topology.vnode_ranges();
    let mut rows = Vec::new();
    for (i, (keyspace, table)) in tables.iter().enumerate() {
        let (partitions, bytes) = per_shard.iter().fold((0u64, 0u64), |(p, b), shard| (p + shard[i].0, b + shard[i].1));
        let map = topology.replica_map(keyspace);
        let replicated: Vec<(i64, i64)> =
            ranges.iter().copied().filter(|(_, end)| map.replicas(*end).contains(&topology.me)).collect();
        let primary: Vec<(i64, i64)> =
            ranges.iter().copied().filter(|(_, end)| map.replicas(*end).first() == Some(&topology.me)).collect();
        // Before the node knows its ring it holds everything.
        let (replicated, primary) = match ranges.is_empty() {
            true => (vec![(i64::MIN, i64::MIN)], vec![(i64::MIN, i64::MIN)]),
            false => (replicated, primary),
        };
        let replicated_width: u128 = replicated.iter().map(|(s, e)| range_width(*s, *e)).sum();
        let mean_partition_size = i64::try_from(bytes.checked_div(partitions).unwrap_or(0)).unwrap_or(i64::MAX);
        for (start, end) in primary.into_iter().flat_map(|(start, end)| unwrapped(start, end)) {
            let share = range_width(start, end) as f64 / replicated_width.max(1) as f64;
            rows.push(SizeEstimate {
                keyspace: keyspace.name.clone(),
                table: table.name.clone(),
                start,
                end,
                mean_partition_size,
                partitions_count: (partitions as f64 * share).round() as i64,
            });
        }
    }
    Ok(rows)
}

/// `(start, end]` as ranges that do not wrap: a range past the ring's last
/// token becomes `(start, MIN]` (to the end) and `(MIN, end]`.
fn unwrapped(start: i64, end: i64) -> Vec<(i64, i64)> {
    match start < end || end == i64::MIN {
        true => vec![(start, end)],
        false if start == i64::MIN => vec![(i64::MIN, end)],
        false => vec![(start, i64::MIN), (i64::MIN, end)],
    }
}

/// ScyllaDB's `system.runtime_info` figures of this node: every shard's
/// summed.
pub async fn runtime_stats() -> Result<shoal_replica::RuntimeStats, CoordinatorError> {
    let per_shard = on_every_shard(|_| async { shoal_replica::local().runtime_stats() }).await?;
    Ok(per_shard.into_iter().fold(shoal_replica::RuntimeStats::default(), std::ops::Add::add))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrapping_range_is_split_at_the_ring_end_and_widths_add_up() {
        assert_eq!(unwrapped(-5, 7), vec![(-5, 7)]);
        assert_eq!(unwrapped(7, -5), vec![(7, i64::MIN), (i64::MIN, -5)]);
        assert_eq!(unwrapped(i64::MIN, -5), vec![(i64::MIN, -5)]);
        assert_eq!(unwrapped(3, i64::MIN), vec![(3, i64::MIN)]);
        // One token: the whole ring, in two pieces.
        let pieces = unwrapped(3, 3);
        assert_eq!(pieces, vec![(3, i64::MIN), (i64::MIN, 3)]);
        assert_eq!(pieces.iter().map(|(s, e)| range_width(*s, *e)).sum::<u128>(), range_width(3, 3));
        assert_eq!(range_width(7, i64::MIN) + range_width(i64::MIN, -5), range_width(7, -5));
    }
}
