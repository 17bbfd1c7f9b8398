//! Group 0: the one Raft group of all nodes (ScyllaDB's name for it),
//! through which membership changes are agreed. It runs on shard 0 of every
//! node: raft-rs (sans-I/O) driven by one task that alone touches it — it
//! ticks on a timer, steps the messages and proposals queued for it, and
//! handles each `Ready` (apply what is committed, persist to the
//! [`RaftStore`] under `<workdir>/raft`, then send). Messages travel as the
//! `Raft` verb to shard 0 of the member, in `raft_codec`'s encoding.
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
//! [`SNAPSHOT_LOG_BYTES`] of log were applied since the last snapshot, the
//! node snapshots what they built ([`Group0State`]: members, their
//! states, the latest schema) and drops the entries up to it, so the log
//! stays bounded however many changes the cluster sees. No entries are
//! kept behind it: the state is small, so a follower a little behind
//! takes the snapshot as cheaply as the entries. A restart starts from
//! the snapshot; a follower that needs entries the leader dropped — one
//! down for long, or a new node — is sent the snapshot instead and takes
//! its state whole ([`restore`]): a snapshot that does not name it as a
//! member it would refuse, so the leader takes a newer one when raft asks
//! for it. The schema applier then sees the latest schema entry only.
//!
//! Members are known to Raft by a raft id: the first 8 bytes of the host id
//! (never 0).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use futures_channel::{mpsc, oneshot};
use futures_util::future::LocalBoxFuture;
use futures_util::{FutureExt, StreamExt};
use raft::eraftpb::{ConfChange, ConfChangeType, Entry, EntryType, Message, MessageType, Snapshot, SnapshotMetadata};
use raft::{RawNode, SnapshotStatus, StateRole, Storage};
use uuid::Uuid;

use crate::group0_entry::{encode_member, Entry as Group0Entry};
pub use crate::group0_entry::{Member, NodeState};
pub use crate::group0_join::join_through_seeds;
use crate::group0_join::{decode_join, NOT_LEADER};
use crate::group0_snapshot::Group0State;
use crate::messaging::{self, Caller, MessagingError};
use crate::raft_codec;
use crate::raft_store::{RaftStore, StoredLog};
use crate::replication::Placement;
use crate::token_allocation::{allocate_tokens, balancing_group};
use crate::verb::Verb;

/// How often raft-rs is ticked; elections after 10 ticks without a leader.
const TICK: Duration = Duration::from_millis(100);
const ELECTION_TICKS: usize = 10;
const HEARTBEAT_TICKS: usize = 2;
/// How long a proposal may take to be agreed and applied here.
const PROPOSE_TIMEOUT: Duration = Duration::from_secs(10);
/// A log this large is snapshotted whatever its entry count (ScyllaDB's
/// `snapshot_threshold_log_size`).
const SNAPSHOT_LOG_BYTES: u64 = 2 << 20;
/// Between tries of a schema proposal while there is no leader.
const PROPOSE_RETRY: Duration = Duration::from_millis(200);

/// What a node knows of group 0, for the REST API.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    pub term: u64,
    /// The leader's host id, if one is known.
    pub leader: Option<Uuid>,
    pub members: Vec<(Member, NodeState)>,
}

/// How this node takes part.
pub struct Group0Config {
    /// Where the log lives.
    pub dir: PathBuf,
    pub me: Member,
    /// Whether this node forms the group if its log is empty.
    pub bootstrap: bool,
    pub apply_schema: SchemaApplier,
    /// The replication factor whose replicated shares a joiner's tokens
    /// balance, when this node leads (scylla.yaml's
    /// `allocate_tokens_for_local_replication_factor`).
    pub token_allocation_rf: usize,
    /// Entries applied after which a snapshot is taken and the log before
    /// it dropped (at least 1).
    pub snapshot_threshold_entries: u64,
}

/// Applies a schema entry that took effect: its log index and payload.
/// Called on shard 0, in log order, on every node (again for the entries
/// a restart replays: it skips what it already holds); after a snapshot
/// is restored, with its latest schema entry alone, those before it
/// skipped.
pub type SchemaApplier = Rc<dyn Fn(u64, Bytes) -> LocalBoxFuture<'static, ()>>;

/// The raft id of a host: its first 8 bytes, never 0 (raft-rs's "none").
pub fn raft_id(host_id: Uuid) -> u64 {
    let id = host_id.as_u64_pair().0;
    if id == 0 {
        1
    } else {
        id
    }
}

/// Answers a join: the member as applied.
type Joined = oneshot::Sender<Result<Member, String>>;

enum Input {
    Step(Message),
    /// A member to add; with no tokens, `num_tokens` chosen by the leader
    /// (or, replacing a dead member, that member's).
    Join {
        member: Member,
        num_tokens: usize,
        replaces: Option<Uuid>,
        done: Joined,
    },
    /// A schema entry to propose (the leader only).
    Propose {
        data: Vec<u8>,
        done: Proposed,
    },
    /// Whether a snapshot sent to raft id `to` reached it: raft sends
    /// that follower nothing more until it knows.
    SnapshotSent {
        to: u64,
        delivered: bool,
    },
}

/// Joins the leader proposed and has not applied, with who waits on each.
type Pending = HashMap<Uuid, (Member, Vec<Joined>)>;

/// Answers a schema proposal: its log index and whether it took effect.
type Proposed = oneshot::Sender<Result<(u64, bool), String>>;

struct Group0 {
    /// This node's raft id.
    id: u64,
    members: RefCell<BTreeMap<u64, Member>>,
    /// Each member's state.
    states: RefCell<HashMap<u64, NodeState>>,
    /// Joining members that replace a member, and the member they replace.
    replacing: RefCell<HashMap<u64, u64>>,
    /// Members that left (decommissioned or removed), by raft id.
    departed: RefCell<HashSet<u64>>,
    /// Where each raft id answers: members, and callers heard from.
    addresses: RefCell<HashMap<u64, SocketAddr>>,
    inputs: mpsc::UnboundedSender<Input>,
    status: RefCell<Status>,
    apply_schema: SchemaApplier,
    token_allocation_rf: usize,
    /// The index of the latest schema entry that took effect (0: none).
    schema_index: Cell<u64>,
    /// Its payload: the schema, for snapshots.
    latest_schema: RefCell<Bytes>,
    snapshot_threshold_entries: u64,
    /// The index of the latest entry applied.
    applied: Cell<u64>,
    /// Who waits for an index to be applied.
    applied_waiters: RefCell<Vec<(u64, oneshot::Sender<()>)>>,
    /// Schema entries this leader proposed, by index: their term and who
    /// waits.
    proposals: RefCell<HashMap<u64, (u64, Proposed)>>,
}

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

async fn drive(config: Group0Config) -> Result<(), String> {
    assert!(config.snapshot_threshold_entries > 0, "a snapshot follows at least one entry");
    let store = RaftStore::open(&config.dir).await.map_err(|e| e.to_string())?;
    let my_id = raft_id(config.me.host_id);
    let fresh = store.storage().initial_state().map_err(|e| e.to_string())?.conf_state.voters.is_empty()
        && store.storage().last_index().unwrap_or(0) == 0;
    if fresh && config.bootstrap {
        let voters = raft::eraftpb::ConfState { voters: vec![my_id], ..Default::default() };
        store.persist(&[], None, Some(&voters)).await.map_err(|e| e.to_string())?;
        tracing::info!("group 0: bootstrapping a new cluster with this node as its first member");
    }
    let raft_config = raft::Config {
        id: my_id,
        election_tick: ELECTION_TICKS,
        heartbeat_tick: HEARTBEAT_TICKS,
        pre_vote: true,
        check_quorum: true,
        ..Default::default()
    };
    let logger = slog::Logger::root(slog::Discard, slog::o!());
    let mut raft = RawNode::new(&raft_config, store.storage(), &logger).map_err(|e| e.to_string())?;
    let (inputs, mut queue) = mpsc::unbounded();
    let group = Rc::new(Group0 {
        id: my_id,
        members: RefCell::default(),
        states: RefCell::default(),
        replacing: RefCell::default(),
        departed: RefCell::default(),
        addresses: RefCell::default(),
        inputs,
        status: RefCell::default(),
        apply_schema: config.apply_schema,
        token_allocation_rf: config.token_allocation_rf,
        schema_index: Cell::new(0),
        latest_schema: RefCell::default(),
        snapshot_threshold_entries: config.snapshot_threshold_entries,
        applied: Cell::new(0),
        applied_waiters: RefCell::default(),
        proposals: RefCell::default(),
    });
    GROUP0.with(|g| *g.borrow_mut() = Some(Rc::clone(&group)));
    let snapshot = store.snapshot();
    if snapshot.get_metadata().index > 0 {
        restore(&group, snapshot.get_metadata().index, Group0State::decode(&snapshot.data)?).await;
    }
    register_handlers();
    if fresh && config.bootstrap {
        raft.campaign().map_err(|e| e.to_string())?;
    }
    let mut pending = Pending::new();
    let mut next_tick = std::time::Instant::now() + TICK;
    loop {
        let wait = next_tick.saturating_duration_since(std::time::Instant::now());
        if let Ok(input) = shoal_runtime::time::timeout(wait, queue.next()).await {
            let Some(input) = input else { return Ok(()) };
            let mut next = Some(input);
            // Everything queued, then one Ready for all of it.
            while let Some(input) = next.take().or_else(|| queue.try_recv().ok()) {
                match input {
                    Input::Step(message) => {
                        let _ = raft.step(message);
                    }
                    Input::Join { member, num_tokens, replaces, done } => {
                        let join = JoinRequest { member, num_tokens, replaces };
                        propose_join(&mut raft, &group, &mut pending, join, done)
                    }
                    Input::Propose { data, done } => propose(&mut raft, &group, data, done),
                    Input::SnapshotSent { to, delivered } => {
                        let status = if delivered { SnapshotStatus::Finish } else { SnapshotStatus::Failure };
                        raft.report_snapshot(to, status);
                    }
                }
            }
        }
        if std::time::Instant::now() >= next_tick {
            raft.tick();
            next_tick += TICK;
        }
        let is_member = group.members.borrow().contains_key(&my_id);
        if raft.raft.state == StateRole::Leader && !is_member && !pending.contains_key(&config.me.host_id) {
            // Refused until the log is applied: tried again next round.
            let (done, _) = oneshot::channel();
            let join = JoinRequest { member: config.me.clone(), num_tokens: config.me.tokens.len(), replaces: None };
            propose_join(&mut raft, &group, &mut pending, join, done);
        }
        handle_ready(&mut raft, &store, &group, &mut pending).await?;
        take_snapshot_when_due(&raft, &store, &group).await?;
        if raft.raft.state != StateRole::Leader {
            // Proposals of a leader that is no more may never apply: their
            // joiners ask again, the new leader proposes them anew.
            for (_, (_, joined)) in pending.drain() {
                joined.into_iter().for_each(|done| drop(done.send(Err(LEADERSHIP_CHANGED.to_string()))));
            }
            for (_, (_, done)) in group.proposals.borrow_mut().drain() {
                let _ = done.send(Err(LEADERSHIP_CHANGED.to_string()));
            }
        }
        update_status(&raft, &group);
    }
}

/// A node asking to join: its record, how many tokens it wants, and the
/// dead member it replaces, if any.
struct JoinRequest {
    member: Member,
    num_tokens: usize,
    replaces: Option<Uuid>,
}

fn propose_join(raft: &mut RawNode<StoredLog>, group: &Group0, pending: &mut Pending, join: JoinRequest, done: Joined) {
    let JoinRequest { mut member, num_tokens, replaces } = join;
    if let Some(existing) = group.members.borrow().get(&raft_id(member.host_id)) {
        let _ = done.send(Ok(existing.clone()));
        return;
    }
    if raft.raft.state != StateRole::Leader {
        let _ = done.send(Err(not_leader(raft, group)));
        return;
    }
    if num_tokens > MAX_TOKENS || member.tokens.len() > MAX_TOKENS {
        let _ = done.send(Err(format!("at most {MAX_TOKENS} tokens per node")));
        return;
    }
    if let Some((proposed, _)) = pending.get(&member.host_id) {
        member = proposed.clone();
    } else {
        // One membership change at a time (Raft's single-server changes):
        // none may be pending, and everything in the log must be applied,
        // which a new leader reaches once its first entry is.
        let log = &raft.raft.raft_log;
        if !pending.is_empty() || log.applied < log.last_index() {
            let _ = done.send(Err("another membership change is in progress; ask again".to_string()));
            return;
        }
        if let Some(reason) = topology_change_in_progress(group, member.host_id) {
            let _ = done.send(Err(format!("{reason}; ask again")));
            return;
        }
        // Others join a ring the leader is part of: tokens chosen against
        // an empty ring would overlap the leader's own.
        if raft_id(member.host_id) != group.id && !group.members.borrow().contains_key(&group.id) {
            let _ = done.send(Err("the cluster is still forming; ask again".to_string()));
            return;
        }
        if let Some(replaced) = replaces {
            match replaceable(group, replaced) {
                Ok(tokens) => member.tokens = tokens,
                Err(reason) => {
                    let _ = done.send(Err(reason));
                    return;
                }
            }
        }
        let members = group.members.borrow();
        let holders = members.values().chain(pending.values().map(|(m, _)| m));
        let ring = match crate::ring::TokenRing::new(holders.map(|m| (m.host_id, m.tokens.as_slice()))) {
            Ok(ring) => ring,
            Err(e) => {
                let _ = done.send(Err(e.to_string()));
                return;
            }
        };
        if member.tokens.is_empty() {
            let place = |m: &Member| Placement { data_center: m.data_center.clone(), rack: m.rack.clone() };
            let others: Vec<(Uuid, Placement)> = members
                .values()
                .chain(pending.values().map(|(m, _)| m))
                .filter(|m| m.host_id != member.host_id)
                .map(|m| (m.host_id, place(m)))
                .collect();
            let (local, rf) =
                balancing_group(&place(&member), others.iter().map(|(h, p)| (*h, p)), group.token_allocation_rf);
            member.tokens = allocate_tokens(&ring, &local, member.host_id, num_tokens.max(1), rf);
        } else if replaces.is_none() && member.tokens.iter().any(|t| ring.holds(*t)) {
            let _ = done.send(Err(format!("node {} holds tokens another member holds", member.host_id)));
            return;
        }
    }
    let entry = match replaces {
        Some(replaced) => Group0Entry::Replace { replaced, member: member.clone() },
        None => Group0Entry::Join(member.clone()),
    };
    match raft.propose(Vec::new(), entry.encode()) {
        Ok(()) => pending.entry(member.host_id).or_insert_with(|| (member, Vec::new())).1.push(done),
        Err(e) => {
            let _ = done.send(Err(e.to_string()));
        }
    }
}

/// Why this node cannot take a proposal: where the leader is, if known.
fn not_leader(raft: &RawNode<StoredLog>, group: &Group0) -> String {
    match group.addresses.borrow().get(&raft.raft.leader_id) {
        Some(address) => format!("{NOT_LEADER}{address}"),
        None => NO_LEADER.to_string(),
    }
}

/// Proposes a schema entry if this node leads; it is answered when applied.
fn propose(raft: &mut RawNode<StoredLog>, group: &Group0, data: Vec<u8>, done: Proposed) {
    if raft.raft.state != StateRole::Leader {
        let _ = done.send(Err(not_leader(raft, group)));
        return;
    }
    match raft.propose(Vec::new(), data) {
        Ok(()) => {
            let index = raft.raft.raft_log.last_index();
            group.proposals.borrow_mut().insert(index, (raft.raft.term, done));
        }
        Err(e) => drop(done.send(Err(e.to_string()))),
    }
}

/// The tokens of `replaced` if a new node may take its place: it is a
/// normal member that this node's failure detector finds down.
fn replaceable(group: &Group0, replaced: Uuid) -> Result<Vec<i64>, String> {
    let id = raft_id(replaced);
    let Some(member) = group.members.borrow().get(&id).cloned() else {
        return Err(format!("node {replaced} is not a member: there is nothing to replace"));
    };
    if group.states.borrow().get(&id) != Some(&NodeState::Normal) {
        return Err(format!("node {replaced} is not a normal member: it cannot be replaced now"));
    }
    let up = crate::failure_detector::statuses().into_iter().any(|s| s.address == member.address && s.up);
    if up {
        return Err(format!("node {replaced} is up: stop it before replacing it"));
    }
    Ok(member.tokens)
}

/// The member other than `host_id` that is joining or leaving, if one is:
/// a topology change runs alone.
fn topology_change_in_progress(group: &Group0, host_id: Uuid) -> Option<String> {
    let states = group.states.borrow();
    let (id, state) = states
        .iter()
        .find(|(id, state)| **id != raft_id(host_id) && matches!(state, NodeState::Joining | NodeState::Leaving))?;
    let host = group.members.borrow().get(id).map_or_else(|| format!("raft id {id}"), |m| m.host_id.to_string());
    Some(format!("node {host} is {} the cluster", if *state == NodeState::Joining { "joining" } else { "leaving" }))
}

/// Why a `Replace` entry cannot be applied, if it cannot.
fn void_replace(group: &Group0, member: &Member, replaced: Uuid) -> Option<String> {
    let members = group.members.borrow();
    if let Some(existing) = members.get(&raft_id(member.host_id)) {
        return (existing != member).then(|| format!("node {} is already a member", member.host_id));
    }
    let Some(old) = members.get(&raft_id(replaced)) else {
        return Some(format!("node {replaced} is not a member"));
    };
    if group.states.borrow().get(&raft_id(replaced)) != Some(&NodeState::Normal) {
        return Some(format!("node {replaced} is not a normal member"));
    }
    if old.tokens != member.tokens {
        return Some(format!("node {} does not hold the tokens of node {replaced}", member.host_id));
    }
    topology_change_in_progress(group, member.host_id)
}

/// Why a `Join` entry cannot be applied, if it cannot.
fn void_join(members: &BTreeMap<u64, Member>, member: &Member) -> Option<String> {
    if let Some(existing) = members.get(&raft_id(member.host_id)) {
        return (existing != member).then(|| format!("node {} is already a member", member.host_id));
    }
    if member.tokens.is_empty() || member.tokens.len() > MAX_TOKENS {
        return Some(format!("node {} joins with {} tokens", member.host_id, member.tokens.len()));
    }
    let mut tokens = member.tokens.clone();
    tokens.sort_unstable();
    if tokens.windows(2).any(|pair| pair[0] == pair[1]) {
        return Some(format!("node {} lists a token twice", member.host_id));
    }
    let held = members.values().any(|m| m.tokens.iter().any(|t| tokens.binary_search(t).is_ok()));
    held.then(|| format!("node {} holds tokens another member holds", member.host_id))
}

/// The most tokens a node may hold (ScyllaDB's `num_tokens` is 256).
const MAX_TOKENS: usize = 4096;

/// The answer's prefix that names the leader's address.
const NO_LEADER: &str = "group 0 has no leader yet";
const LEADERSHIP_CHANGED: &str = "group 0 leadership changed; ask again";
/// How a member answers the group 0 messages of a node that left the
/// group (removed or replaced while it was down): the node learns it left.
const YOU_LEFT: &str = "this node left the cluster: ";

async fn handle_ready(
    raft: &mut RawNode<StoredLog>,
    store: &RaftStore,
    group: &Group0,
    pending: &mut Pending,
) -> Result<(), String> {
    if !raft.has_ready() {
        return Ok(());
    }
    let mut ready = raft.ready();
    send(group, ready.take_messages());
    if !ready.snapshot().is_empty() {
        // Decoded before it is kept: one this node cannot read (a newer
        // format) must not replace the log it can.
        let state = Group0State::decode(&ready.snapshot().data)?;
        store.install(ready.snapshot()).await.map_err(|e| e.to_string())?;
        restore(group, ready.snapshot().get_metadata().index, state).await;
    }
    apply(raft, store, group, pending, ready.take_committed_entries()).await?;
    store.persist(ready.entries(), ready.hs(), None).await.map_err(|e| e.to_string())?;
    send(group, ready.take_persisted_messages());
    let mut light = raft.advance(ready);
    if let Some(commit) = light.commit_index() {
        let mut state = store.storage().initial_state().map_err(|e| e.to_string())?.hard_state;
        state.commit = commit;
        store.persist(&[], Some(&state), None).await.map_err(|e| e.to_string())?;
    }
    send(group, light.take_messages());
    apply(raft, store, group, pending, light.take_committed_entries()).await?;
    raft.advance_apply();
    Ok(())
}

async fn apply(
    raft: &mut RawNode<StoredLog>,
    store: &RaftStore,
    group: &Group0,
    pending: &mut Pending,
    entries: Vec<Entry>,
) -> Result<(), String> {
    for entry in entries {
        if entry.entry_type == EntryType::EntryNormal && !entry.data.is_empty() {
            let took_effect = match Group0Entry::decode(&entry.data) {
                Ok(Group0Entry::Join(member)) => {
                    apply_join(raft, store, group, pending, entry.index, member, None).await?
                }
                Ok(Group0Entry::Replace { replaced, member }) => {
                    apply_join(raft, store, group, pending, entry.index, member, Some(replaced)).await?
                }
                Ok(Group0Entry::Schema { base_index, payload }) => {
                    apply_schema(group, &entry, base_index, payload).await
                }
                Ok(Group0Entry::State { host_id, state }) => {
                    apply_state(raft, store, group, entry.index, host_id, state).await?
                }
                Err(e) => {
                    tracing::error!("group 0: entry {} does not decode ({e}); skipped", entry.index);
                    false
                }
            };
            if let Some((term, done)) = group.proposals.borrow_mut().remove(&entry.index) {
                let answer = if term == entry.term {
                    Ok((entry.index, took_effect))
                } else {
                    Err(LEADERSHIP_CHANGED.to_string())
                };
                let _ = done.send(answer);
            }
        }
        set_applied(group, entry.index);
    }
    Ok(())
}

/// Entry `index` and those before it are applied: who waited for them
/// goes on.
fn set_applied(group: &Group0, index: u64) {
    group.applied.set(index);
    let waiters = std::mem::take(&mut *group.applied_waiters.borrow_mut());
    let (reached, waiting): (Vec<_>, Vec<_>) = waiters.into_iter().partition(|(at, _)| *at <= index);
    *group.applied_waiters.borrow_mut() = waiting;
    for (_, done) in reached {
        let _ = done.send(());
    }
}

/// What the entries applied so far built, as a snapshot holds it.
fn state_of(group: &Group0) -> Group0State {
    let states = group.states.borrow();
    let members = group.members.borrow();
    let mut replacing: Vec<(u64, u64)> = group.replacing.borrow().iter().map(|(a, b)| (*a, *b)).collect();
    replacing.sort_unstable();
    let mut departed: Vec<u64> = group.departed.borrow().iter().copied().collect();
    departed.sort_unstable();
    Group0State {
        members: members
            .iter()
            .map(|(id, m)| (m.clone(), states.get(id).copied().unwrap_or(NodeState::Normal)))
            .collect(),
        replacing,
        departed,
        schema_index: group.schema_index.get(),
        schema: group.latest_schema.borrow().to_vec(),
    }
}

/// Takes `state`, a snapshot's at entry `index`, in place of what this
/// node applied: at start, from its own snapshot, or one the leader sent.
async fn restore(group: &Group0, index: u64, state: Group0State) {
    let members: BTreeMap<u64, Member> = state.members.iter().map(|(m, _)| (raft_id(m.host_id), m.clone())).collect();
    for (id, old) in group.members.borrow().iter() {
        if !members.contains_key(id) {
            crate::failure_detector::unwatch(old.address);
        }
    }
    for (id, member) in &members {
        reach(group, *id, member.address);
    }
    *group.states.borrow_mut() = state.members.iter().map(|(m, s)| (raft_id(m.host_id), *s)).collect();
    *group.members.borrow_mut() = members;
    *group.replacing.borrow_mut() = state.replacing.into_iter().collect();
    // That this node left may be known from a member's answer alone.
    let left = group.departed.borrow().contains(&group.id);
    *group.departed.borrow_mut() = state.departed.into_iter().chain(left.then_some(group.id)).collect();
    let schema = Bytes::from(state.schema);
    if state.schema_index > 0 {
        (group.apply_schema)(state.schema_index, schema.clone()).await;
    }
    group.schema_index.set(state.schema_index);
    *group.latest_schema.borrow_mut() = schema;
    set_applied(group, index);
    tracing::info!(
        "group 0: state restored from a snapshot at entry {index} ({} members, schema entry {})",
        group.members.borrow().len(),
        state.schema_index
    );
}

/// Snapshots what was applied and drops the log before it, once
/// `snapshot_threshold_entries` entries were applied since the last snapshot or
/// the log holds `SNAPSHOT_LOG_BYTES` (schema entries grow with the
/// schema), or when raft wants a newer one to send.
async fn take_snapshot_when_due(raft: &RawNode<StoredLog>, store: &RaftStore, group: &Group0) -> Result<(), String> {
    let applied = raft.raft.raft_log.applied;
    let compacted = store.compacted();
    let wanted = store.take_snapshot_wanted();
    let due = applied.saturating_sub(compacted) >= group.snapshot_threshold_entries
        || store.log_bytes() >= SNAPSHOT_LOG_BYTES;
    if applied <= compacted || !(due || wanted) {
        return Ok(());
    }
    assert_eq!(applied, group.applied.get(), "group 0 applied what raft-rs counts applied");
    let term = raft.store().term(applied).map_err(|e| e.to_string())?;
    let conf_state = raft.store().initial_state().map_err(|e| e.to_string())?.conf_state;
    let mut metadata = SnapshotMetadata { index: applied, term, ..Default::default() };
    metadata.set_conf_state(conf_state);
    let mut snapshot = Snapshot { data: Bytes::from(state_of(group).encode()), ..Default::default() };
    snapshot.set_metadata(metadata);
    let bytes = snapshot.data.len();
    store.compact(snapshot).await.map_err(|e| e.to_string())?;
    tracing::info!("group 0: snapshot at entry {applied} ({bytes} bytes); the log before it is dropped");
    Ok(())
}

async fn apply_join(
    raft: &mut RawNode<StoredLog>,
    store: &RaftStore,
    group: &Group0,
    pending: &mut Pending,
    index: u64,
    member: Member,
    replaces: Option<Uuid>,
) -> Result<bool, String> {
    let id = raft_id(member.host_id);
    // Checked here, the same on every node: the first record of a host
    // wins, and tokens that repeat or another member holds make the entry
    // void (the joiner asks again); a replacement holds exactly the
    // tokens of a normal member, while nothing else joins or leaves.
    let void = match replaces {
        None => void_join(&group.members.borrow(), &member),
        Some(replaced) => void_replace(group, &member, replaced),
    };
    if let Some(reason) = void {
        tracing::error!("group 0: entry {index} ignored: {reason}");
        for done in pending.remove(&member.host_id).map(|(_, joined)| joined).unwrap_or_default() {
            let _ = done.send(Err(reason.clone()));
        }
        return Ok(false);
    }
    if !group.members.borrow().contains_key(&id) {
        // The first member has nothing to stream: it serves at once.
        let first = !group.states.borrow().values().any(|s| *s == NodeState::Normal);
        let state = if first { NodeState::Normal } else { NodeState::Joining };
        group.states.borrow_mut().insert(id, state);
        if let Some(replaced) = replaces {
            tracing::info!("group 0: node {} replaces node {replaced}, which is leaving", member.host_id);
            group.states.borrow_mut().insert(raft_id(replaced), NodeState::Leaving);
            group.replacing.borrow_mut().insert(id, raft_id(replaced));
        }
        tracing::info!(
            "group 0: node {} ({}) is a member (dc {}, rack {}, {} tokens)",
            member.address,
            member.host_id,
            member.data_center,
            member.rack,
            member.tokens.len()
        );
    }
    reach(group, id, member.address);
    group.members.borrow_mut().insert(id, member.clone());
    let voters = store.storage().initial_state().map_err(|e| e.to_string())?.conf_state.voters;
    if !voters.contains(&id) {
        let change = ConfChange { change_type: ConfChangeType::AddNode, node_id: id, ..Default::default() };
        let conf = raft.apply_conf_change(&change).map_err(|e| e.to_string())?;
        store.persist(&[], None, Some(&conf)).await.map_err(|e| e.to_string())?;
    }
    for done in pending.remove(&member.host_id).map(|(_, joined)| joined).unwrap_or_default() {
        let _ = done.send(Ok(member.clone()));
    }
    Ok(true)
}

/// Member `id` answers at `address`: group 0 sends it there, and the
/// failure detector pings it (this node aside).
fn reach(group: &Group0, id: u64, address: SocketAddr) {
    group.addresses.borrow_mut().insert(id, address);
    if id != group.id {
        crate::failure_detector::watch(address);
    }
}

/// Applies a member's move to `state` if it may move there now (the same
/// decision on every node: it depends on the log alone); `Left` removes it
/// from the members and the voters.
async fn apply_state(
    raft: &mut RawNode<StoredLog>,
    store: &RaftStore,
    group: &Group0,
    index: u64,
    host_id: Uuid,
    state: NodeState,
) -> Result<bool, String> {
    let id = raft_id(host_id);
    if let Some(reason) = state_refusal(group, host_id, state) {
        tracing::info!("group 0: entry {index} ignored: node {host_id} cannot become {state:?}: {reason}");
        return Ok(false);
    }
    tracing::info!("group 0: node {host_id} is {state:?}");
    // A replacement that is done takes its place for good; one given up
    // gives it back.
    let replaced = group.replacing.borrow_mut().remove(&id);
    if state != NodeState::Left {
        group.states.borrow_mut().insert(id, state);
        if let Some(replaced) = replaced {
            remove_member(raft, store, group, replaced).await?;
        }
        return Ok(true);
    }
    if let Some(replaced) = replaced {
        group.states.borrow_mut().insert(replaced, NodeState::Normal);
    }
    remove_member(raft, store, group, id).await?;
    Ok(true)
}

/// Why member `host_id` may not move to `state` now, if it may not.
fn state_refusal(group: &Group0, host_id: Uuid, state: NodeState) -> Option<String> {
    let current = group.states.borrow().get(&raft_id(host_id)).copied();
    let normal = group.states.borrow().values().filter(|s| **s == NodeState::Normal).count();
    match (current, state) {
        (None, _) => Some("it is not a member".to_string()),
        (Some(NodeState::Joining), NodeState::Normal) => None,
        (Some(NodeState::Normal), NodeState::Leaving) if normal < 2 => Some("it is the last normal member".to_string()),
        (Some(NodeState::Normal), NodeState::Leaving) => topology_change_in_progress(group, host_id),
        // A join given up (removenode of a joiner that died) or a leave done.
        (Some(NodeState::Joining | NodeState::Leaving), NodeState::Left) => None,
        (Some(current), _) => Some(format!("it is {current:?}")),
    }
}

/// Removes raft id `id` from the members and the voters.
async fn remove_member(
    raft: &mut RawNode<StoredLog>,
    store: &RaftStore,
    group: &Group0,
    id: u64,
) -> Result<(), String> {
    group.states.borrow_mut().remove(&id);
    group.departed.borrow_mut().insert(id);
    if let Some(member) = group.members.borrow_mut().remove(&id) {
        tracing::info!("group 0: node {} ({}) left the cluster", member.address, member.host_id);
        crate::failure_detector::unwatch(member.address);
    }
    let voters = store.storage().initial_state().map_err(|e| e.to_string())?.conf_state.voters;
    if voters.contains(&id) {
        let change = ConfChange { change_type: ConfChangeType::RemoveNode, node_id: id, ..Default::default() };
        let conf = raft.apply_conf_change(&change).map_err(|e| e.to_string())?;
        store.persist(&[], None, Some(&conf)).await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Applies a schema entry if it is built on the latest schema entry (the
/// same on every node: it depends on the log alone): whether it did.
async fn apply_schema(group: &Group0, entry: &Entry, base_index: u64, payload: Vec<u8>) -> bool {
    let latest = group.schema_index.get();
    let took_effect = base_index == latest;
    if took_effect {
        let payload = Bytes::from(payload);
        (group.apply_schema)(entry.index, payload.clone()).await;
        group.schema_index.set(entry.index);
        *group.latest_schema.borrow_mut() = payload;
    } else {
        tracing::info!(
            "group 0: schema change {} is void: it was built on schema entry {base_index}, the latest is {latest}",
            entry.index
        );
    }
    took_effect
}

fn send(group: &Group0, messages: Vec<Message>) {
    for message in messages {
        let snapshot_to = (message.msg_type == MessageType::MsgSnapshot).then_some(message.to);
        let inputs = group.inputs.clone();
        let Some(address) = group.addresses.borrow().get(&message.to).copied() else {
            tracing::debug!("group 0: no address for raft id {}; message dropped", message.to);
            if let Some(to) = snapshot_to {
                let _ = inputs.unbounded_send(Input::SnapshotSent { to, delivered: false });
            }
            continue;
        };
        let mut payload = Vec::new();
        raft_codec::encode_message(&message, &mut payload);
        shoal_runtime::spawn(async move {
            let answer = messaging::request(address, 0, Verb::Raft, &payload).await;
            if let Some(to) = snapshot_to {
                let _ = inputs.unbounded_send(Input::SnapshotSent { to, delivered: answer.is_ok() });
            }
            match answer {
                Err(MessagingError::Failed { message, .. }) if message.starts_with(YOU_LEFT) => learn_left(&message),
                Err(e) => tracing::debug!("group 0: message to {address}: {e}"),
                Ok(_) => {}
            }
        });
    }
}

/// A member answered that this node left the group while it was down:
/// from now on it has left ([`has_left`]), as if it had applied that.
fn learn_left(answer: &str) {
    let Ok(group) = running() else { return };
    if group.departed.borrow_mut().insert(group.id) {
        tracing::info!("group 0: a member answered: {answer}");
    }
}

fn update_status(raft: &RawNode<StoredLog>, group: &Group0) {
    let (members, states) = (group.members.borrow(), group.states.borrow());
    let leader = members.get(&raft.raft.leader_id).map(|m| m.host_id);
    let members =
        members.iter().map(|(id, m)| (m.clone(), states.get(id).copied().unwrap_or(NodeState::Normal))).collect();
    *group.status.borrow_mut() = Status { term: raft.raft.term, leader, members };
}

fn register_handlers() {
    messaging::register(
        Verb::Raft,
        Rc::new(|caller: Caller, payload: Bytes| {
            let answer = raft_codec::decode_message(&payload).map_err(|e| e.to_string()).and_then(|message| {
                let group = running()?;
                if message.to != group.id {
                    return Err(format!("a raft message for {} reached {}", message.to, group.id));
                }
                if group.departed.borrow().contains(&message.from) {
                    return Err(format!("{YOU_LEFT}group 0 no longer counts it a member"));
                }
                group.addresses.borrow_mut().insert(message.from, caller.address);
                group.inputs.unbounded_send(Input::Step(message)).map_err(|_| "group 0 stopped".to_string())?;
                Ok(Bytes::new())
            });
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
                let group = running()?;
                let (done, joined) = oneshot::channel();
                let join = Input::Join { member, num_tokens, replaces, done };
                group.inputs.unbounded_send(join).map_err(|_| "group 0 stopped".to_string())?;
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
                let deadline = std::time::Instant::now() + PROPOSE_TIMEOUT;
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
            let reason = state_refusal(&*running()?, host_id, state).unwrap_or_else(|| "refused".to_string());
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
    GROUP0.with(|g| g.borrow().clone()).is_some_and(|group| group.departed.borrow().contains(&raft_id(host_id)))
}

/// This node's record of member `host_id` and its state, if it is one.
pub fn member(host_id: Uuid) -> Option<(Member, NodeState)> {
    let group = GROUP0.with(|g| g.borrow().clone())?;
    let id = raft_id(host_id);
    let member = group.members.borrow().get(&id).cloned()?;
    let state = group.states.borrow().get(&id).copied()?;
    Some((member, state))
}

/// Waits until every member the failure detector finds up has applied
/// group 0's entry `index` (down ones apply it before they serve again)
/// and, with `seen_up`, finds that member up. Call on shard 0.
pub async fn barrier(index: u64, seen_up: Option<Uuid>) -> Result<(), String> {
    let group = running()?;
    let deadline = std::time::Instant::now() + PROPOSE_TIMEOUT;
    wait_applied(&group, index, deadline).await?;
    let up: Vec<SocketAddr> =
        crate::failure_detector::statuses().into_iter().filter(|s| s.up).map(|s| s.address).collect();
    let others: Vec<SocketAddr> = group
        .members
        .borrow()
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
async fn wait_seen_up(group: &Group0, host: Uuid, deadline: std::time::Instant) -> Result<(), String> {
    loop {
        let address = group.members.borrow().get(&raft_id(host)).map(|m| m.address);
        let up = crate::failure_detector::statuses().into_iter().any(|s| Some(s.address) == address && s.up);
        if up {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
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
    let deadline = std::time::Instant::now() + PROPOSE_TIMEOUT;
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
            Err(message) if std::time::Instant::now() + PROPOSE_RETRY < deadline => {
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
    let (done, outcome) = oneshot::channel();
    group.inputs.unbounded_send(Input::Propose { data, done }).map_err(|_| "group 0 stopped".to_string())?;
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
async fn wait_applied(group: &Group0, index: u64, deadline: std::time::Instant) -> Result<(), String> {
    if group.applied.get() >= index {
        return Ok(());
    }
    let (done, reached) = oneshot::channel();
    group.applied_waiters.borrow_mut().push((index, done));
    let wait = deadline.saturating_duration_since(std::time::Instant::now());
    match shoal_runtime::time::timeout(wait, reached).await {
        Ok(Ok(())) => Ok(()),
        _ => Err(format!("entry {index} was committed but not applied here within {} ms", PROPOSE_TIMEOUT.as_millis())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raft_ids_are_never_zero() {
        assert_eq!(raft_id(Uuid::nil()), 1);
    }
}
