//! Logged batches across nodes (Cassandra's batchlog): before a batch's
//! mutations go to their replicas, the whole batch is stored on up to two
//! other live nodes (this node when it is alone) — of this data center
//! when it has any, on racks other than this node's and each other's
//! where it can, drawn at random so no node holds every batch
//! ([`choose_holders`]); once every mutation is
//! answered at the consistency level, those copies are removed. A copy
//! still held [`REPLAY_AFTER`] after it was stored means its coordinator
//! did not finish — it died, or a mutation failed — and the holder applies
//! the batch itself, at ONE, until every mutation took. So a logged batch
//! applies whole or, eventually, whole: never half.
//!
//! Copies are kept in memory and in the shard's batch log
//! ([`crate::held_batches`]), read back when the node starts. Removals
//! are not logged: a batch removed just before a
//! restart is replayed once more after it, which writes nothing new (its
//! mutations carry their timestamps; counter batches are never logged).
//! On one node, or when every mutation stays on this node, a batch is
//! applied without a log, as before.

use std::time::Duration;

use futures_util::future::join_all;
use shoal_replica::Mutation;
use uuid::Uuid;

use crate::held_batches::{self, encode_batch};
use crate::target::Target;
use crate::timeouts::{deadline, timeouts};
use crate::topology::{placement, topology};
use crate::write_handler::{self, check_available};
use crate::{ConsistencyLevel, CoordinatorError, WriteType};

/// How long a stored batch waits for its coordinator before its holder
/// replays it.
const REPLAY_AFTER: Duration = Duration::from_secs(10);
/// How often holders look for batches to replay.
const REPLAY_INTERVAL: Duration = Duration::from_secs(1);
/// How many other nodes hold each batch.
const HOLDERS: usize = 2;

/// Applies the mutations of a logged batch at `consistency`.
pub async fn mutate_logged(
    mutations: Vec<Mutation>,
    consistency: ConsistencyLevel,
    timeout: Duration,
) -> Result<(), CoordinatorError> {
    let topology = topology();
    if !topology.is_cluster() || mutations.len() < 2 {
        return mutate_all(mutations, consistency, timeout).await;
    }
    // Refused before anything is stored or sent: Unavailable means nothing
    // was done.
    for m in &mutations {
        if let Some((topology, keyspace)) = placement(m.table) {
            check_available(&topology, &topology.write_targets(&keyspace, m.position.token), consistency)?;
        }
    }
    let id = Uuid::new_v4();
    let payload = encode_batch(id, &mutations);
    let live: Vec<(Uuid, &str, &str)> = topology
        .members()
        .filter(|h| *h != topology.me && topology.is_up(*h))
        .filter_map(|h| topology.endpoint(h).map(|e| (h, e.placement.data_center.as_str(), e.placement.rack.as_str())))
        .collect();
    let me = crate::identity::node();
    let holders = choose_holders((topology.me, &me.data_center, &me.rack), &live, id.as_u64_pair().0);
    let stored = join_all(holders.iter().map(|host| {
        let target = Target { topology: &topology, host: *host };
        let payload = &payload;
        async move { target.store_batch(payload).await }
    }))
    .await;
    if let Some(Err(e)) = stored.into_iter().find(Result::is_err) {
        tracing::debug!("storing a batch: {e}");
        return Err(CoordinatorError::WriteTimeout {
            consistency,
            write_type: WriteType::Batch,
            received: 0,
            block_for: holders.len(),
        });
    }
    mutate_all(mutations, consistency, timeout).await?;
    for host in holders {
        let topology = topology.clone();
        shoal_runtime::spawn(async move {
            if let Err(e) = (Target { topology: &topology, host }).remove_batch(id).await {
                tracing::debug!("removing batch {id} from {host}: {e}; it will be replayed");
            }
        });
    }
    Ok(())
}

/// Who holds a batch `me` (host, data center, rack) coordinates: up to
/// [`HOLDERS`] of the `live` other nodes, of `me`'s data center if it has
/// any (a batch held across a data center link is slow to store), each on
/// a rack of its own and other than `me`'s where the racks allow —
/// Cassandra's choice — picked by `seed` so batches spread over the
/// nodes; `me` alone when no other node is up.
fn choose_holders(me: (Uuid, &str, &str), live: &[(Uuid, &str, &str)], seed: u64) -> Vec<Uuid> {
    let (my_host, my_dc, my_rack) = me;
    let local: Vec<&(Uuid, &str, &str)> = live.iter().filter(|(_, dc, _)| *dc == my_dc).collect();
    let mut pool: Vec<&(Uuid, &str, &str)> = if local.is_empty() { live.iter().collect() } else { local };
    if pool.is_empty() {
        return vec![my_host];
    }
    // A rotation of the pool by the seed; then, in turn, nodes on racks
    // not used yet, on other racks than this node's, on any.
    let start = (seed % pool.len() as u64) as usize;
    pool.rotate_left(start);
    let mut holders: Vec<Uuid> = Vec::with_capacity(HOLDERS);
    let mut racks: Vec<&str> = vec![my_rack];
    for pass in 0..3 {
        for &&(host, _, rack) in &pool {
            let take = match pass {
                0 => !racks.contains(&rack),
                1 => rack != my_rack,
                _ => true,
            };
            if holders.len() < HOLDERS && take && !holders.contains(&host) {
                holders.push(host);
                racks.push(rack);
            }
        }
    }
    holders
}

async fn mutate_all(
    mutations: Vec<Mutation>,
    consistency: ConsistencyLevel,
    timeout: Duration,
) -> Result<(), CoordinatorError> {
    let deadline = deadline(timeout);
    let results =
        join_all(mutations.into_iter().map(|m| write_handler::mutate(m, consistency, WriteType::Batch, deadline)))
            .await;
    results.into_iter().collect()
}

/// Replays the batches whose coordinator did not finish, forever; runs on
/// every shard.
pub async fn replay() {
    let mut ticks = shoal_runtime::time::interval(REPLAY_INTERVAL);
    loop {
        ticks.tick().await;
        let due = held_batches::due(REPLAY_AFTER);
        for (id, mutations) in due {
            match mutate_all(mutations, ConsistencyLevel::One, timeouts().write).await {
                Ok(()) => {
                    tracing::info!("replayed batch {id}: its coordinator did not finish it");
                    held_batches::forget(id);
                }
                Err(e) => tracing::debug!("replaying batch {id}: {e}; trying again"),
            }
        }
        held_batches::discard_finished().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    #[test]
    fn holders_are_local_on_other_racks_and_spread() {
        let me = (host(0), "dc1", "r1");
        let live = [
            (host(1), "dc1", "r1"),
            (host(2), "dc1", "r2"),
            (host(3), "dc1", "r2"),
            (host(4), "dc1", "r3"),
            (host(5), "dc2", "r4"),
        ];
        let mut chosen = std::collections::BTreeSet::new();
        for seed in 0..10 {
            let holders = choose_holders(me, &live, seed);
            assert_eq!(holders.len(), 2, "{holders:?}");
            // One on r2, one on r3: never this node's rack, never dc2.
            let racks: Vec<&str> =
                holders.iter().map(|h| live.iter().find(|(l, _, _)| l == h).expect("live").2).collect();
            assert!(racks.contains(&"r2") && racks.contains(&"r3"), "{racks:?}");
            chosen.extend(holders);
        }
        assert!(chosen.contains(&host(2)) && chosen.contains(&host(3)), "the seed spreads batches: {chosen:?}");
    }

    #[test]
    fn holders_fall_back_to_this_rack_another_data_center_or_this_node() {
        let me = (host(0), "dc1", "r1");
        let one_rack = [(host(1), "dc1", "r1"), (host(2), "dc1", "r1"), (host(5), "dc2", "r4")];
        assert_eq!(choose_holders(me, &one_rack, 0).len(), 2);
        assert!(!choose_holders(me, &one_rack, 0).contains(&host(5)));
        let elsewhere = [(host(5), "dc2", "r4")];
        assert_eq!(choose_holders(me, &elsewhere, 7), vec![host(5)]);
        assert_eq!(choose_holders(me, &[], 7), vec![host(0)]);
        // Two racks besides this one, one node each, plus this rack's.
        let few = [(host(1), "dc1", "r1"), (host(2), "dc1", "r2")];
        assert_eq!(choose_holders(me, &few, 3), vec![host(2), host(1)]);
    }
}
