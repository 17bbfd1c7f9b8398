//! Group 0: the one Raft group of all nodes (ScyllaDB's name for it),
//! through which membership changes are agreed. It runs on shard 0 of every
//! node: raft-rs (sans-I/O) driven by one task that alone touches it, the
//! [`Driver`] (`group0_driver`) — this module ticks it on a timer, hands
//! it what peers send and the proposals made here, and its `Ready`s apply
//! what is committed (membership through `group0_membership`, a pure state
//! machine), persist to its log under `<workdir>/raft`, then send. Messages
//! travel as the `Raft` verb to shard 0 of the member, in `raft_codec`'s
//! encoding. This module is the shard's face of it: the loop, the handlers
//! of peers' requests, and the calls the coordinator makes.
//!
//! Joining. A node that was never a member either bootstraps the group — it
//! has no seed but itself, or it is the first seed: a group of one whose
//! voter it is — or, before it serves, asks the seeds in turn to add it
//! ([`join_through_seeds`], `Group0Join`). A node that is not the leader
//! answers with the leader's address, and the joiner asks there. The leader
//! chooses the joiner's tokens against the ring of the members and of the
//! joins it has proposed (one task does both, so two joiners never get the
//! same ranges; `token_allocation`: what the joiner's data center
//! replicates comes out even at the leader's
//! `allocate_tokens_for_local_replication_factor`, rack by rack where the
//! data center has that many racks), proposes a `Join`
//! entry (host id, storage address, shard count, data center, rack,
//! tokens) and answers with it once it is applied. Asking again is safe: a member gets its
//! record back, a join in flight is proposed again with the same tokens.
//! Every node applies entries in log order: a `Join` records the member and
//! adds it as a voter, one voter per entry, so the configuration only ever
//! changes by one node at a time. A node with a log restarts from it and
//! never asks again.
//!
//! Schema changes. The coordinator proposes each one as a `Schema` entry
//! built on the latest schema entry it has applied ([`propose_schema`]; a
//! node that is not the leader forwards it, `Group0Propose`). Applying an
//! entry whose base is still the latest hands its payload to the
//! coordinator's [`SchemaApplier`] on every node, in log order; an entry
//! built on an older base is void — another change came first — and its
//! proposer builds the change again. The proposer returns once its own node
//! has applied the entry, so a client told of a change finds it there.
//!
//! Node states. The first member is `Normal` at once; every later one
//! joins `Joining` and becomes `Normal` by a `State` entry once it has
//! streamed its data; a member leaving (decommission, or removenode for a
//! dead one) goes `Leaving`, then `Left`, which removes it from the group
//! and from the voters. One topology change at a time: a join or a
//! `Leaving` is refused (void, decided in log order on every node) while a
//! member joins or leaves. [`propose_state`] proposes such an entry
//! through the leader; [`barrier`] waits until every live member applied
//! it, so every coordinator writes to the ranges' next replicas before
//! data moves.
//!
//! Replacing. A new node may join in a dead member's place
//! (`replace_node_first_boot`): the leader checks that the member is
//! normal and down, and proposes a `Replace` entry — the new node joining
//! with the dead one's tokens, the dead one leaving. The new node streams
//! its ranges like any joiner; once it is normal, the dead one has left.
//!
//! Snapshots. Once `snapshot_threshold_entries` entries or
//! 2 MiB of log were applied since the last snapshot, the
//! node snapshots what they built (`group0_snapshot::Group0State`: members, their
//! states, the latest schema) and drops the entries up to it, so the log
//! stays bounded however many changes the cluster sees. No entries are
//! kept behind it: the state is small, so a follower a little behind
//! takes the snapshot as cheaply as the entries. A restart starts from
//! the snapshot; a follower that needs entries the leader dropped — one
//! down for long, or a new node — is sent the snapshot instead and takes
//! its state whole: a snapshot that does not name it as a
//! member it would refuse, so the leader takes a newer one when raft asks
//! for it. The schema applier then sees the latest schema entry only.
//!
//! Members are known to Raft by a raft id: the first 8 bytes of the host id
//! (never 0).

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_channel::oneshot;
use futures_util::FutureExt;
use uuid::Uuid;

use crate::group0_driver::{ask_to_join, ask_to_propose, receive, Group0};
pub use crate::group0_driver::{Driver, Group0Config, RaftNetwork, SchemaApplier, Status};
use crate::group0_entry::{encode_member, Entry as Group0Entry};
pub use crate::group0_entry::{Member, NodeState};
pub use crate::group0_join::join_through_seeds;
use crate::group0_join::{decode_join, NOT_LEADER};
pub use crate::group0_membership::raft_id;
use crate::messaging::{self, Caller};
use crate::verb::Verb;

/// How often raft-rs is ticked: the driver's clock on a node.
const TICK: Duration = Duration::from_millis(100);
/// How long a proposal may take to be agreed and applied here.
const PROPOSE_TIMEOUT: Duration = Duration::from_secs(10);
/// Between tries of a schema proposal while there is no leader.
const PROPOSE_RETRY: Duration = Duration::from_millis(200);

thread_local! {
    static GROUP0: RefCell<Option<Rc<Group0>>> = const { RefCell::new(None) };
}

/// What this node knows of group 0; `None` before it started (shard 0).
pub fn status() -> Option<Status> {
    GROUP0.with(|g| g.borrow().as_ref().map(|g| g.status.borrow().clone()))
}

/// Runs group 0 on this shard (shard 0) forever.
pub async fn run(config: Group0Config) {
    if let Err(e) = drive(config).await {
        tracing::error!("group 0 stopped: {e}");
    }
}

/// The driver on this shard, over the `Raft` verb, ticked every [`TICK`]:
/// the driver steps everything queued, then handles one `Ready` for all
/// of it.
async fn drive(config: Group0Config) -> Result<(), String> {
    let mut driver = Driver::open(config, raft_verb()).await?;
    GROUP0.with(|g| *g.borrow_mut() = Some(Rc::clone(driver.group())));
    driver.start().await?;
    register_handlers();
    let mut next_tick = Instant::now() + TICK;
    loop {
        let wait = next_tick.saturating_duration_since(Instant::now());
        if let Ok(input) = shoal_runtime::time::timeout(wait, driver.next_input()).await {
            let Some(input) = input else { return Ok(()) };
            driver.step(input);
            driver.step_queued();
        }
        if Instant::now() >= next_tick {
            driver.tick();
            next_tick += TICK;
        }
        driver.advance().await?;
    }
}

/// Group 0's messages as the `Raft` verb, to shard 0 of the member.
fn raft_verb() -> RaftNetwork {
    Rc::new(|address: SocketAddr, payload: Vec<u8>| {
        async move { messaging::request(address, 0, Verb::Raft, &payload).await.map(drop) }.boxed_local()
    })
}

fn register_handlers() {
    messaging::register(
        Verb::Raft,
        Rc::new(|caller: Caller, payload: Bytes| {
            let answer = running().and_then(|group| receive(&group, caller.address, &payload)).map(|()| Bytes::new());
            std::future::ready(answer).boxed_local()
        }),
    );
    messaging::register(
        Verb::Group0Propose,
        Rc::new(|_caller: Caller, payload: Bytes| {
            async move {
                // Joins go through their own checks.
                let Ok(Group0Entry::Schema { .. } | Group0Entry::State { .. }) = Group0Entry::decode(&payload) else {
                    return Err("only schema changes and node states are proposed this way".to_string());
                };
                let (index, took_effect) = propose_here(&*running()?, payload.to_vec()).await?;
                let mut answer = index.to_be_bytes().to_vec();
                answer.push(u8::from(took_effect));
                Ok(Bytes::from(answer))
            }
            .boxed_local()
        }),
    );
    messaging::register(
        Verb::Group0Join,
        Rc::new(|_caller: Caller, payload: Bytes| {
            async move {
                let (num_tokens, replaces, member) = decode_join(&payload)?;
                let joined = ask_to_join(&*running()?, member, num_tokens, replaces)?;
                let member = joined.await.unwrap_or_else(|_| Err("group 0 stopped".to_string()))?;
                let mut answer = Vec::new();
                encode_member(&member, &mut answer);
                Ok(Bytes::from(answer))
            }
            .boxed_local()
        }),
    );
    messaging::register(
        Verb::Group0Barrier,
        Rc::new(|_caller: Caller, payload: Bytes| {
            async move {
                let Some((index, host)) = payload.split_first_chunk::<8>() else {
                    return Err("a barrier is [u64 index][16 host id]".to_string());
                };
                let host = Uuid::from_slice(host).map_err(|_| "a barrier is [u64 index][16 host id]".to_string())?;
                let deadline = Instant::now() + PROPOSE_TIMEOUT;
                let group = running()?;
                wait_applied(&group, u64::from_be_bytes(*index), deadline).await?;
                if !host.is_nil() {
                    wait_seen_up(&group, host, deadline).await?;
                }
                Ok(Bytes::new())
            }
            .boxed_local()
        }),
    );
}

fn running() -> Result<Rc<Group0>, String> {
    GROUP0.with(|g| g.borrow().clone()).ok_or_else(|| "group 0 is not running".to_string())
}

/// The index of the latest schema entry that took effect here (0: none);
/// `None` while group 0 does not run on this shard.
pub fn schema_index() -> Option<u64> {
    GROUP0.with(|g| g.borrow().as_ref().map(|g| g.schema_index.get()))
}

/// Proposes a schema change built on schema entry `base_index` and returns
/// once this node has applied it: whether it took effect (`false`: another
/// change came first; build it again on the new schema). Call on shard 0.
pub async fn propose_schema(base_index: u64, payload: Vec<u8>) -> Result<bool, String> {
    let entry = Group0Entry::Schema { base_index, payload };
    propose_entry(&entry).await.map(|(_, took_effect)| took_effect)
}

/// Proposes that member `host_id` moves to `state` and returns once this
/// node has applied it: its log index, or why it did not take effect (the
/// move is not allowed now). Call on shard 0.
pub async fn propose_state(host_id: Uuid, state: NodeState) -> Result<u64, String> {
    match propose_entry(&Group0Entry::State { host_id, state }).await? {
        (index, true) => Ok(index),
        (index, false) => {
            // The entry changed nothing, so the refusal reads the same now.
            let refusal = running()?.membership.borrow().state_refusal(host_id, state);
            let reason = refusal.unwrap_or_else(|| "refused".to_string());
            Err(format!("node {host_id} cannot become {state:?} (entry {index}): {reason}"))
        }
    }
}

/// The index of the latest entry this node applied (0: none, or group 0
/// does not run on this shard).
pub fn applied_index() -> u64 {
    GROUP0.with(|g| g.borrow().as_ref().map_or(0, |g| g.applied.get()))
}

/// Whether `host_id` was a member and left (decommissioned, removed or
/// replaced), as far as this node's log goes — or, for this node itself,
/// as a member answered it.
pub fn has_left(host_id: Uuid) -> bool {
    GROUP0.with(|g| g.borrow().clone()).is_some_and(|group| group.membership.borrow().has_departed(raft_id(host_id)))
}

/// This node's record of member `host_id` and its state, if it is one.
pub fn member(host_id: Uuid) -> Option<(Member, NodeState)> {
    let group = GROUP0.with(|g| g.borrow().clone())?;
    let id = raft_id(host_id);
    let membership = group.membership.borrow();
    let member = membership.members().get(&id).cloned()?;
    let state = membership.state(id)?;
    Some((member, state))
}

/// Waits until every member the failure detector finds up has applied
/// group 0's entry `index` (down ones apply it before they serve again)
/// and, with `seen_up`, finds that member up. Call on shard 0.
pub async fn barrier(index: u64, seen_up: Option<Uuid>) -> Result<(), String> {
    let group = running()?;
    let deadline = Instant::now() + PROPOSE_TIMEOUT;
    wait_applied(&group, index, deadline).await?;
    let up: Vec<SocketAddr> =
        crate::failure_detector::statuses().into_iter().filter(|s| s.up).map(|s| s.address).collect();
    let others: Vec<SocketAddr> = group
        .membership
        .borrow()
        .members()
        .iter()
        .filter(|(id, m)| **id != group.id && up.contains(&m.address))
        .map(|(_, m)| m.address)
        .collect();
    let mut payload = index.to_be_bytes().to_vec();
    payload.extend_from_slice(seen_up.unwrap_or_default().as_bytes());
    let asks = others.iter().map(|address| messaging::request(*address, 0, Verb::Group0Barrier, &payload));
    for (address, answer) in others.iter().zip(futures_util::future::join_all(asks).await) {
        answer.map_err(|e| format!("{address} did not apply group 0 entry {index}: {e}"))?;
    }
    Ok(())
}

/// Waits until this node's failure detector finds member `host` up.
async fn wait_seen_up(group: &Group0, host: Uuid, deadline: Instant) -> Result<(), String> {
    loop {
        let address = group.membership.borrow().members().get(&raft_id(host)).map(|m| m.address);
        let up = crate::failure_detector::statuses().into_iter().any(|s| Some(s.address) == address && s.up);
        if up {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("node {host} is not seen up"));
        }
        shoal_runtime::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Proposes `entry` through the leader (forwarded if this node is not it)
/// and returns once this node applied it: its index and whether it took
/// effect.
async fn propose_entry(entry: &Group0Entry) -> Result<(u64, bool), String> {
    let data = entry.encode();
    let deadline = Instant::now() + PROPOSE_TIMEOUT;
    loop {
        let group = running()?;
        let outcome = match propose_here(&group, data.clone()).await {
            Err(message) if message.starts_with(NOT_LEADER) => match message[NOT_LEADER.len()..].parse() {
                Ok(leader) => forward(leader, &data).await,
                Err(_) => Err(message),
            },
            outcome => outcome,
        };
        match outcome {
            Ok((index, took_effect)) => {
                wait_applied(&group, index, deadline).await?;
                return Ok((index, took_effect));
            }
            Err(message) if Instant::now() + PROPOSE_RETRY < deadline => {
                tracing::debug!("group 0: schema proposal: {message}; trying again");
                shoal_runtime::time::sleep(PROPOSE_RETRY).await;
            }
            Err(message) => return Err(format!("group 0 did not agree: {message}")),
        }
    }
}

/// Proposes `data` through this node's raft: its index and whether it
/// took effect once applied here, or why not (not the leader).
async fn propose_here(group: &Group0, data: Vec<u8>) -> Result<(u64, bool), String> {
    let outcome = ask_to_propose(group, data)?;
    outcome.await.unwrap_or_else(|_| Err("group 0 stopped".to_string()))
}

/// Has the leader propose `data`: `[u64 index][u8 took effect]` back.
async fn forward(leader: SocketAddr, data: &[u8]) -> Result<(u64, bool), String> {
    let answer = messaging::request(leader, 0, Verb::Group0Propose, data).await.map_err(|e| e.to_string())?;
    match answer.split_first_chunk::<8>() {
        Some((index, [took_effect])) => Ok((u64::from_be_bytes(*index), *took_effect != 0)),
        _ => Err(format!("{leader} answered a schema proposal with {} bytes", answer.len())),
    }
}

/// Waits until this node applied entry `index`, at most until `deadline`.
async fn wait_applied(group: &Group0, index: u64, deadline: Instant) -> Result<(), String> {
    if group.applied.get() >= index {
        return Ok(());
    }
    let (done, reached) = oneshot::channel();
    group.applied_waiters.borrow_mut().push((index, done));
    let wait = deadline.saturating_duration_since(Instant::now());
    match shoal_runtime::time::timeout(wait, reached).await {
        Ok(Ok(())) => Ok(()),
        _ => Err(format!("entry {index} was committed but not applied here within {} ms", PROPOSE_TIMEOUT.as_millis())),
    }
}
