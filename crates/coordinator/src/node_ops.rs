//! Node operations (ScyllaDB's `service/storage_service` topology
//! operations): bootstrap, decommission and removenode. Each moves a
//! member through group 0's states, and between them streams the ranges
//! whose replicas change:
//!
//! 1. group 0 agrees the member's intermediate state (`Joining`, by its
//!    `Join` entry; `Leaving`);
//! 2. a barrier: every live member has applied it, so every coordinator
//!    now also writes to the ranges' pending replicas; then [`settle`]
//!    lets the writes sent before that finish (or time out);
//! 3. every node that gains ranges streams them in ([`crate::streaming`]);
//! 4. group 0 agrees the end state (`Normal`; `Left`).
//!
//! A crash anywhere leaves the member in its intermediate state, where
//! writes still reach both the old and the new replicas: the operation is
//! run again from the start (a joining node resumes when it restarts;
//! decommission and removenode are asked again). Streaming twice is
//! harmless. Run on shard 0, where group 0 runs.
//!
//! A member removed or replaced while it was down learns it when it is
//! back: the members answer its group 0 messages that it left. Restarted,
//! it confirms its membership before it serves ([`bootstrap`]); one that
//! learns it later stops ([`until_removed`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use shoal_cluster::group0::{self, NodeState};
use uuid::Uuid;

use crate::identity::node;
use crate::schema::schema;
use crate::streaming::ask_to_stream;
use crate::timeouts::timeouts;
use crate::topology::topology;
use crate::CoordinatorError;

/// How often an operation looks whether group 0's change reached it.
const POLL: Duration = Duration::from_millis(100);

/// How long a restarted member waits to hear from group 0's leader (or
/// to learn it left) before it serves on the membership it last knew —
/// with most members down there may be no leader for a while. A removed
/// node learns it at its first election timeout (1-2 s).
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(10);

/// Set while this node decommissions itself: its leaving is expected.
static DECOMMISSIONING: AtomicBool = AtomicBool::new(false);

fn failed(message: String) -> CoordinatorError {
    CoordinatorError::NodeOperation(message)
}

/// Makes this node, joining, a normal member: streams its ranges in, then
/// has group 0 mark it normal. Returns at once for a node that is normal
/// (or leaving) already: the first member, or a restart. Call before the
/// node serves clients.
pub async fn bootstrap() -> Result<(), CoordinatorError> {
    let me = node().host_id;
    let state = loop {
        // The join was applied by the leader before this node started
        // group 0; it is here once this node's log caught up.
        if let Some((_, state)) = group0::member(me) {
            break state;
        }
        if group0::has_left(me) {
            return Err(failed(left(me)));
        }
        shoal_runtime::time::sleep(POLL).await;
    };
    confirm_membership(me).await?;
    if state != NodeState::Joining {
        return Ok(());
    }
    let retry = |e: CoordinatorError| failed(format!("{e}; start the node again to retry"));
    tracing::info!("bootstrap: this node joins the ring; streaming its ranges from their replicas");
    // Every node sees this one up before data moves: until then its
    // writes as a pending replica are hints, and what it missed that way
    // comes with the stream.
    group0::barrier(group0::applied_index(), Some(me)).await.map_err(failed).map_err(retry)?;
    settle().await;
    crate::streaming::stream_in().await.map_err(retry)?;
    group0::propose_state(me, NodeState::Normal).await.map_err(failed).map_err(retry)?;
    tracing::info!("bootstrap: done; this node is a normal member");
    Ok(())
}

/// Why a node that left may not serve.
fn left(me: Uuid) -> String {
    format!(
        "this node ({me}) left the cluster (decommissioned, removed or replaced): its data and identity are no \
         longer the cluster's; to join again as a new node, start it on an empty workdir"
    )
}

/// A member (restarted, or joining) makes sure it still is one before it
/// streams or serves: it waits until it hears from group 0's leader, or
/// learns it left, for at most [`CONFIRM_TIMEOUT`]. A member alone has
/// nothing to wait for.
async fn confirm_membership(me: Uuid) -> Result<(), CoordinatorError> {
    if group0::status().is_none_or(|status| status.members.len() < 2) {
        return Ok(());
    }
    let deadline = Instant::now() + CONFIRM_TIMEOUT;
    loop {
        if group0::has_left(me) {
            return Err(failed(left(me)));
        }
        if group0::status().is_some_and(|status| status.leader.is_some()) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            tracing::warn!(
                "group 0 has no leader this node can reach after {} s; serving on the membership it last knew",
                CONFIRM_TIMEOUT.as_secs()
            );
            return Ok(());
        }
        shoal_runtime::time::sleep(POLL).await;
    }
}

/// Returns once this node, serving, learns it left the cluster — removed
/// or replaced while it was down — and must stop (its caller stops it).
/// Its own decommission does not count: it stops after that anyway.
pub async fn until_removed() -> String {
    let me = node().host_id;
    loop {
        shoal_runtime::time::sleep(Duration::from_secs(1)).await;
        if group0::has_left(me) && !DECOMMISSIONING.load(Ordering::Relaxed) {
            return left(me);
        }
    }
}

/// Moves this node's ranges to their next replicas and removes it from
/// the cluster. The node stops serving afterwards (its caller stops it).
pub async fn decommission() -> Result<(), CoordinatorError> {
    let me = node().host_id;
    DECOMMISSIONING.store(true, Ordering::Relaxed);
    let result = leave(me).await;
    // Failed before it left, it serves on as a member; once it left, its
    // stop is the decommission's, whatever failed after.
    if result.is_err() && !group0::has_left(me) {
        DECOMMISSIONING.store(false, Ordering::Relaxed);
    }
    result
}

/// Removes `host`, a member that is down for good, from the cluster: the
/// ranges it held are streamed to their next replicas from the others.
pub async fn remove_node(host: Uuid) -> Result<(), CoordinatorError> {
    if host == node().host_id {
        return Err(failed("this node cannot remove itself; run decommission on it instead".to_string()));
    }
    if topology().is_up(host) {
        return Err(failed(format!("node {host} is up: decommission it from itself, or stop it before removing it")));
    }
    leave(host).await
}

/// Takes `host` through leaving to left.
async fn leave(host: Uuid) -> Result<(), CoordinatorError> {
    let Some((_, state)) = group0::member(host) else {
        return Err(failed(format!("node {host} is not a member of the cluster")));
    };
    let index = match state {
        NodeState::Normal => group0::propose_state(host, NodeState::Leaving).await.map_err(failed)?,
        // An operation interrupted: run again from its start.
        NodeState::Leaving => group0::applied_index(),
        // A join that never finished: nothing of its own to move.
        NodeState::Joining => {
            group0::propose_state(host, NodeState::Left).await.map_err(failed)?;
            return Ok(());
        }
        NodeState::Left => return Ok(()),
    };
    tracing::info!("node {host} is leaving the ring; streaming its ranges to their next replicas");
    group0::barrier(index, None).await.map_err(failed)?;
    settle().await;
    let changing = topology();
    let schema = schema();
    let mut gainers: Vec<Uuid> = schema
        .keyspaces
        .values()
        .flat_map(|keyspace| changing.range_moves(keyspace))
        .flat_map(|range| range.gainers)
        .collect();
    gainers.sort_unstable();
    gainers.dedup();
    for streamed in join_all(gainers.iter().map(|gainer| ask_to_stream(&changing, *gainer))).await {
        streamed?;
    }
    let index = group0::propose_state(host, NodeState::Left).await.map_err(failed)?;
    // Answered once every live member knows, and this shard's topology
    // shows it: none routes to it any more.
    group0::barrier(index, None).await.map_err(failed)?;
    while topology().endpoint(host).is_some() {
        shoal_runtime::time::sleep(POLL).await;
    }
    tracing::info!("node {host} left the cluster");
    Ok(())
}

/// Waits until every shard of every node has installed the topology the
/// barrier guaranteed (they look every 100 ms) and every write sent before
/// it has been applied or has timed out, so none of them misses a range's
/// pending replica unseen.
async fn settle() {
    shoal_runtime::time::sleep(timeouts().write + Duration::from_millis(300)).await;
}
