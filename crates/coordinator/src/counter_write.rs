//! A counter write (Cassandra's counter mutation): one replica leads it,
//! the others take what the leader wrote.
//!
//! A counter update carries deltas, which cannot be applied twice. So the
//! coordinator hands it to one live natural replica, the leader — this
//! node when it is one, else one in its data center, else any. The leader turns each
//! delta into its own grown counter shard (`shoal_replica`'s
//! `lead_counter_update`), applies that, and sends it to the other
//! replicas as a plain write, answering at the request's level with its
//! own write counted. A shard merges by clock, so that write is
//! idempotent: hints, read repair, repair and streaming may deliver it
//! again and it still counts once.
//!
//! The leader is asked once. If it does not answer in time, or fails once
//! it has applied its shard, the write may or may not have happened, and
//! the client gets a write timeout of type COUNTER, as from Cassandra:
//! counter updates are not retried. Increments of one counter led by one
//! replica queue on its partition lock, held until the leader's own write
//! is applied (and, with `commitlog_sync: batch`, synced).

use std::rc::Rc;
use std::time::Instant;

use shoal_replica::Mutation;
use shoal_runtime::submit_to;
use uuid::Uuid;

use crate::shards::shard_of;
use crate::target::Target;
use crate::topology::{placement, Topology, WriteTargets};
use crate::wire::{self, CounterWrite};
use crate::write_handler::{self, Delivery};
use crate::{metrics, ConsistencyLevel, CoordinatorError, WriteType};

/// Applies a counter update on its partition's replicas, led by one of
/// them, answered at `consistency`.
pub(crate) async fn write(
    mutation: Mutation,
    consistency: ConsistencyLevel,
    deadline: Instant,
) -> Result<(), CoordinatorError> {
    refuse_any(consistency)?;
    let Some((topology, keyspace)) = placement(mutation.table) else {
        return lead_here(mutation, consistency, 1, deadline, false).await.map(drop);
    };
    let targets = topology.write_targets(&keyspace, mutation.position.token);
    if targets.only(topology.me) {
        return lead_here(mutation, consistency, 1, deadline, false).await.map(drop);
    }
    // Unavailable before anything is sent; with too few live replicas for
    // the level there is no live natural one to lead either.
    let block_for = topology.plan(&targets.natural, &targets.pending, consistency, false)?.tally.block_for();
    let timeout = || timed_out(consistency, 0, block_for);
    let leader = leader_of(&topology, &targets.natural).ok_or_else(timeout)?;
    if leader == topology.me {
        return lead(topology, targets, mutation, consistency, block_for, deadline).await;
    }
    let token = mutation.position.token;
    let timeout_ms = deadline.saturating_duration_since(Instant::now()).as_millis() as u64;
    let payload = wire::encode_counter_write(&CounterWrite { consistency, timeout_ms, mutation });
    let target = Target { topology: &topology, host: leader };
    let asked = target.lead_counter_write(token, &payload);
    match shoal_runtime::lowres::timeout_at(deadline, asked).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e @ (CoordinatorError::Invalid(_) | CoordinatorError::Overloaded(_)))) => Err(e),
        Ok(Err(e)) => {
            tracing::debug!("counter leader {leader} failed a write: {e}");
            Err(timeout())
        }
        Err(_) => Err(timeout()),
    }
}

fn refuse_any(consistency: ConsistencyLevel) -> Result<(), CoordinatorError> {
    match consistency {
        ConsistencyLevel::Any => {
            Err(CoordinatorError::Invalid("Consistency level ANY is not yet supported for counter tables".into()))
        }
        _ => Ok(()),
    }
}

fn timed_out(consistency: ConsistencyLevel, received: usize, block_for: usize) -> CoordinatorError {
    CoordinatorError::WriteTimeout { consistency, write_type: WriteType::Counter, received, block_for }
}

/// The replica to lead a write of a token with `natural` replicas: this
/// node if it is one, else a live one in this data center, else any live
/// one. A pending replica never leads: it may not hold its shards yet.
fn leader_of(topology: &Topology, natural: &[Uuid]) -> Option<Uuid> {
    let live = || natural.iter().copied().filter(|host| topology.is_up(*host));
    live()
        .find(|host| *host == topology.me)
        .or_else(|| live().find(|host| topology.data_center(*host) == topology.local_dc))
        .or_else(|| live().next())
}

/// Leads a counter write on this node, a natural replica of it: applies
/// the grown shards here, then has the other replicas apply them. The
/// caller's plan of `targets` found enough of them live (else Unavailable
/// before anything is written) and needs `block_for` answers.
async fn lead(
    topology: Rc<Topology>,
    targets: WriteTargets,
    mutation: Mutation,
    consistency: ConsistencyLevel,
    block_for: usize,
    deadline: Instant,
) -> Result<(), CoordinatorError> {
    let led = lead_here(mutation, consistency, block_for, deadline, true)
        .await?
        .expect("a leader asked for the replicas' copy gets it");
    let sent =
        write_handler::write(topology, targets, led, consistency, WriteType::Counter, deadline, Delivery::LedHere);
    match sent.await {
        // Applied here already: whatever failed, the increment may count.
        Err(CoordinatorError::WriteTimeout { received, .. }) => Err(timed_out(consistency, received, block_for)),
        Err(e) => {
            tracing::debug!("a led counter write failed on its replicas: {e}");
            Err(timed_out(consistency, 1, block_for))
        }
        Ok(()) => Ok(()),
    }
}

/// Leads a counter write on the shard of this node that owns its
/// partition; with `for_replicas`, the write with its deltas turned into
/// this node's shards, for the other replicas.
async fn lead_here(
    mutation: Mutation,
    consistency: ConsistencyLevel,
    block_for: usize,
    deadline: Instant,
    for_replicas: bool,
) -> Result<Option<Mutation>, CoordinatorError> {
    let leader = crate::identity::node().host_id.as_u128();
    let shard = shard_of(mutation.position.token);
    metrics::note_target(shard);
    submit_to(shard, move || async move {
        if Instant::now() > deadline {
            return Err(timed_out(consistency, 0, block_for));
        }
        let Mutation { table, position, update, list_ops } = mutation;
        // Only from a malformed message: counter tables have no lists.
        if !list_ops.is_empty() {
            return Err(CoordinatorError::Invalid("a counter update has no list operations".into()));
        }
        let database = shoal_replica::local();
        let led = database.lead_counter_update(table, position.clone(), update, leader, for_replicas).await?;
        Ok(led.map(|update| Mutation { table, position, update, list_ops }))
    })
    .await?
}

/// Serves a counter write another node's coordinator asks this node to
/// lead (`Verb::CounterMutation`).
pub(crate) async fn serve(payload: bytes::Bytes) -> Result<Vec<u8>, CoordinatorError> {
    let CounterWrite { consistency, timeout_ms, mutation } = wire::decode_counter_write(&payload)
        .map_err(|e| CoordinatorError::Invalid(format!("malformed counter write: {e}")))?;
    refuse_any(consistency)?;
    let deadline = Instant::now() + std::time::Duration::from_millis(timeout_ms);
    let Some((topology, keyspace)) = placement(mutation.table) else {
        return Err(CoordinatorError::Remote("asked to lead a counter write without a cluster".into()));
    };
    let targets = topology.write_targets(&keyspace, mutation.position.token);
    // Its shard would live where no read looks for it.
    if !targets.natural.contains(&topology.me) {
        return Err(CoordinatorError::Remote("asked to lead a counter write of a token it does not replicate".into()));
    }
    // Unavailable before anything is written.
    let block_for = topology.plan(&targets.natural, &targets.pending, consistency, false)?.tally.block_for();
    lead(topology, targets, mutation, consistency, block_for, deadline).await?;
    Ok(Vec::new())
}
