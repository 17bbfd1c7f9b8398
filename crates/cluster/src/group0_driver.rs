//! Group 0's Raft driver: the one owner of a node's raft-rs node and its
//! log. raft-rs does no I/O, so the driver does it: it steps what is
//! queued for it (peers' messages, joins, proposals, whether a snapshot
//! sent arrived), and handles each `Ready` — sends what may go at once,
//! takes a snapshot the leader sent, applies what is committed (membership
//! entries through `group0_membership`, schema entries through the
//! [`SchemaApplier`]), persists to its [`RaftStore`] in one write and one
//! fdatasync, then sends what waited on the persist — and snapshots what
//! it applied when due.
//!
//! Its seams are the caller's, so the same driver runs on shard 0 of a
//! node (`group0::run`) and in the Raft simulation
//! (`tests/raft_simulation.rs`): the clock ([`Driver::tick`], called every
//! 100 ms on a node), the network (a [`RaftNetwork`] carries its messages
//! out; [`Driver::receive`] takes those that came in), and the disk (the
//! [`RaftStore`] in the configured directory; a crash is the driver
//! dropped and opened again on it).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;

use bytes::Bytes;
use futures_channel::{mpsc, oneshot};
use futures_util::future::LocalBoxFuture;
use futures_util::StreamExt;
use raft::eraftpb::{ConfChange, ConfChangeType, Entry, EntryType, Message, MessageType, Snapshot, SnapshotMetadata};
use raft::{RawNode, SnapshotStatus, StateRole, Storage};
use uuid::Uuid;

use crate::group0_entry::{Entry as Group0Entry, Member, NodeState};
use crate::group0_join::NOT_LEADER;
use crate::group0_membership::{raft_id, Effect, Membership, MAX_TOKENS};
use crate::group0_snapshot::Group0State;
use crate::messaging::MessagingError;
use crate::raft_codec;
use crate::raft_store::{RaftStore, StoredLog};
use crate::replication::Placement;
use crate::token_allocation::{allocate_tokens, balancing_group};

/// Elections after 10 ticks without a leader; heartbeats every 2.
const ELECTION_TICKS: usize = 10;
const HEARTBEAT_TICKS: usize = 2;
/// A log this large is snapshotted whatever its entry count (ScyllaDB's
/// `snapshot_threshold_log_size`).
const SNAPSHOT_LOG_BYTES: u64 = 2 << 20;

/// Carries one encoded Raft message to the member answering at an
/// address, and answers whether it was taken: the `Raft` verb on a node,
/// a simulated network in tests.
pub type RaftNetwork = Rc<dyn Fn(SocketAddr, Vec<u8>) -> LocalBoxFuture<'static, Result<(), MessagingError>>>;

/// One node's group 0: its raft-rs node, its log and what it applied.
pub struct Driver {
    raft: RawNode<StoredLog>,
    store: RaftStore,
    group: Rc<Group0>,
    queue: mpsc::UnboundedReceiver<Input>,
    /// Joins this node proposed as leader and has not applied.
    pending: Pending,
    me: Member,
    /// Whether this node forms the group: its log was empty, and it
    /// bootstraps.
    forms: bool,
}

impl Driver {
    /// Opens the log in `config.dir`; on an empty one, a node that
    /// bootstraps makes itself the group's one voter. Call
    /// [`Driver::start`] next.
    pub async fn open(config: Group0Config, network: RaftNetwork) -> Result<Driver, String> {
        assert!(config.snapshot_threshold_entries > 0, "a snapshot follows at least one entry");
        let store = RaftStore::open(&config.dir).await.map_err(|e| e.to_string())?;
        let my_id = raft_id(config.me.host_id);
        let fresh = store.storage().initial_state().map_err(|e| e.to_string())?.conf_state.voters.is_empty()
            && store.storage().last_index().unwrap_or(0) == 0;
        let forms = fresh && config.bootstrap;
        if forms {
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
        let raft = RawNode::new(&raft_config, store.storage(), &logger).map_err(|e| e.to_string())?;
        let (inputs, queue) = mpsc::unbounded();
        let group = Rc::new(Group0 {
            id: my_id,
            membership: RefCell::new(Membership::new(my_id)),
            addresses: RefCell::default(),
            inputs,
            network,
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
        Ok(Driver { raft, store, group, queue, pending: Pending::new(), me: config.me, forms })
    }

    /// What the driver shares with the node's API and handlers.
    pub(crate) fn group(&self) -> &Rc<Group0> {
        &self.group
    }

    /// Takes the state of the log's snapshot, if it has one, and campaigns
    /// if this node forms the group.
    pub async fn start(&mut self) -> Result<(), String> {
        let snapshot = self.store.snapshot();
        if snapshot.get_metadata().index > 0 {
            restore(&self.group, snapshot.get_metadata().index, Group0State::decode(&snapshot.data)?).await;
        }
        if self.forms {
            self.raft.campaign().map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// The next input, once one is queued.
    pub(crate) async fn next_input(&mut self) -> Option<Input> {
        self.queue.next().await
    }

    /// Steps everything queued; [`Driver::advance`] then handles it all
    /// in one `Ready`.
    pub fn step_queued(&mut self) {
        while let Ok(input) = self.queue.try_recv() {
            self.step(input);
        }
    }

    pub(crate) fn step(&mut self, input: Input) {
        match input {
            Input::Step(message) => {
                let _ = self.raft.step(message);
            }
            Input::Join { member, num_tokens, replaces, done } => {
                let join = JoinRequest { member, num_tokens, replaces };
                propose_join(&mut self.raft, &self.group, &mut self.pending, join, done)
            }
            Input::Propose { data, done } => propose(&mut self.raft, &self.group, data, done),
            Input::SnapshotSent { to, delivered } => {
                let status = if delivered { SnapshotStatus::Finish } else { SnapshotStatus::Failure };
                self.raft.report_snapshot(to, status);
            }
        }
    }

    /// One tick of raft-rs's logical clock.
    pub fn tick(&mut self) {
        self.raft.tick();
    }

    /// Handles what the inputs and ticks so far made ready: sends,
    /// applies, persists, snapshots when due, and updates the status.
    pub async fn advance(&mut self) -> Result<(), String> {
        let (raft, group, pending) = (&mut self.raft, &self.group, &mut self.pending);
        let is_member = group.membership.borrow().members().contains_key(&group.id);
        if raft.raft.state == StateRole::Leader && !is_member && !pending.contains_key(&self.me.host_id) {
            // Refused until the log is applied: tried again next round.
            let (done, _) = oneshot::channel();
            let join = JoinRequest { member: self.me.clone(), num_tokens: self.me.tokens.len(), replaces: None };
            propose_join(raft, group, pending, join, done);
        }
        handle_ready(raft, &self.store, group, pending).await?;
        take_snapshot_when_due(raft, &self.store, group).await?;
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
        update_status(raft, group);
        Ok(())
    }

    /// Takes a Raft message a peer at `from` sent (the `Raft` verb).
    pub fn receive(&self, from: SocketAddr, payload: &[u8]) -> Result<(), String> {
        receive(&self.group, from, payload)
    }

    /// Asks this node, as leader, to add `member` with `num_tokens` tokens
    /// it chooses: answered with the member once applied.
    pub fn join(&self, member: Member, num_tokens: usize) -> Result<oneshot::Receiver<Result<Member, String>>, String> {
        ask_to_join(&self.group, member, num_tokens, None)
    }

    /// Asks this node, as leader, to propose `data` (an encoded entry):
    /// answered with its index and whether it took effect once applied.
    pub fn propose(&self, data: Vec<u8>) -> Result<ProposalOutcome, String> {
        ask_to_propose(&self.group, data)
    }

    /// What this node knows of the group.
    pub fn status(&self) -> Status {
        self.group.status.borrow().clone()
    }

    /// The index of the latest entry applied.
    pub fn applied_index(&self) -> u64 {
        self.group.applied.get()
    }

    /// The index of the latest schema entry that took effect (0: none).
    pub fn schema_index(&self) -> u64 {
        self.group.schema_index.get()
    }
}

/// Takes a Raft message a peer at `from` sent: refused when it is not for
/// this node, or its sender left the group (which tells it so).
pub(crate) fn receive(group: &Group0, from: SocketAddr, payload: &[u8]) -> Result<(), String> {
    let message = raft_codec::decode_message(payload).map_err(|e| e.to_string())?;
    if message.to != group.id {
        return Err(format!("a raft message for {} reached {}", message.to, group.id));
    }
    if group.membership.borrow().has_departed(message.from) {
        return Err(format!("{YOU_LEFT}group 0 no longer counts it a member"));
    }
    group.addresses.borrow_mut().insert(message.from, from);
    group.inputs.unbounded_send(Input::Step(message)).map_err(|_| "group 0 stopped".to_string())
}

/// Queues a join for the driver: answered with the member once applied,
/// or why not.
pub(crate) fn ask_to_join(
    group: &Group0,
    member: Member,
    num_tokens: usize,
    replaces: Option<Uuid>,
) -> Result<oneshot::Receiver<Result<Member, String>>, String> {
    let (done, joined) = oneshot::channel();
    let join = Input::Join { member, num_tokens, replaces, done };
    group.inputs.unbounded_send(join).map_err(|_| "group 0 stopped".to_string())?;
    Ok(joined)
}

/// Queues a proposal of `data` for the driver: answered with its index
/// and whether it took effect once applied here, or why not.
pub(crate) fn ask_to_propose(group: &Group0, data: Vec<u8>) -> Result<ProposalOutcome, String> {
    let (done, outcome) = oneshot::channel();
    group.inputs.unbounded_send(Input::Propose { data, done }).map_err(|_| "group 0 stopped".to_string())?;
    Ok(outcome)
}

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

/// Answers a join: the member as applied.
type Joined = oneshot::Sender<Result<Member, String>>;

/// What the driver steps, in the order it was queued.
pub(crate) enum Input {
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

/// Where the answer to a proposal comes: its log index and whether it
/// took effect, once applied here.
pub type ProposalOutcome = oneshot::Receiver<Result<(u64, bool), String>>;

/// What a node's group 0 shares with whoever asks it (the API, the
/// handlers of peers' requests): all but the raft-rs node and its log,
/// which only the [`Driver`] touches.
pub(crate) struct Group0 {
    /// This node's raft id.
    pub(crate) id: u64,
    pub(crate) membership: RefCell<Membership>,
    /// Where each raft id answers: members, and callers heard from.
    addresses: RefCell<HashMap<u64, SocketAddr>>,
    inputs: mpsc::UnboundedSender<Input>,
    network: RaftNetwork,
    pub(crate) status: RefCell<Status>,
    apply_schema: SchemaApplier,
    token_allocation_rf: usize,
    /// The index of the latest schema entry that took effect (0: none).
    pub(crate) schema_index: Cell<u64>,
    /// Its payload: the schema, for snapshots.
    latest_schema: RefCell<Bytes>,
    snapshot_threshold_entries: u64,
    /// The index of the latest entry applied.
    pub(crate) applied: Cell<u64>,
    /// Who waits for an index to be applied.
    pub(crate) applied_waiters: RefCell<Vec<(u64, oneshot::Sender<()>)>>,
    /// Schema entries this leader proposed, by index: their term and who
    /// waits.
    proposals: RefCell<HashMap<u64, (u64, Proposed)>>,
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
    if let Some(existing) = group.membership.borrow().members().get(&raft_id(member.host_id)) {
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
        let membership = group.membership.borrow();
        if let Some(reason) = membership.topology_change_in_progress(member.host_id) {
            let _ = done.send(Err(format!("{reason}; ask again")));
            return;
        }
        // Others join a ring the leader is part of: tokens chosen against
        // an empty ring would overlap the leader's own.
        if raft_id(member.host_id) != group.id && !membership.members().contains_key(&group.id) {
            let _ = done.send(Err("the cluster is still forming; ask again".to_string()));
            return;
        }
        if let Some(replaced) = replaces {
            let up = |address| crate::failure_detector::statuses().iter().any(|s| s.address == address && s.up);
            match membership.replaceable(replaced, up) {
                Ok(tokens) => member.tokens = tokens,
                Err(reason) => {
                    let _ = done.send(Err(reason));
                    return;
                }
            }
        }
        let members = membership.members();
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

/// The answer's prefix that names the leader's address.
const NO_LEADER: &str = "group 0 has no leader yet";
pub(crate) const LEADERSHIP_CHANGED: &str = "group 0 leadership changed; ask again";
/// How a member answers the group 0 messages of a node that left the
/// group (removed or replaced while it was down): the node learns it left.
pub(crate) const YOU_LEFT: &str = "this node left the cluster: ";

async fn handle_ready(
    raft: &mut RawNode<StoredLog>,
    store: &RaftStore,
    group: &Rc<Group0>,
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
                    apply_join(raft, store, group, pending, entry.index, &member, None).await?
                }
                Ok(Group0Entry::Replace { replaced, member }) => {
                    apply_join(raft, store, group, pending, entry.index, &member, Some(replaced)).await?
                }
                Ok(Group0Entry::Schema { base_index, payload }) => {
                    apply_schema(group, &entry, base_index, payload).await
                }
                Ok(Group0Entry::State { host_id, state }) => {
                    let applied = group.membership.borrow_mut().apply_state(entry.index, host_id, state);
                    match applied {
                        Ok(effects) => carry_out(raft, store, group, effects).await.map(|()| true)?,
                        Err(_) => false,
                    }
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

/// Takes `state`, a snapshot's at entry `index`, in place of what this
/// node applied: at start, from its own snapshot, or one the leader sent.
async fn restore(group: &Group0, index: u64, state: Group0State) {
    let effects = group.membership.borrow_mut().restore(&state);
    for effect in effects {
        match effect {
            Effect::Reach(id, address) => reach(group, id, address),
            Effect::Unwatch(address) => crate::failure_detector::unwatch(address),
            // A snapshot's voters come with its metadata, into the store.
            Effect::AddVoter(_) | Effect::RemoveVoter(_) => {}
        }
    }
    let schema = Bytes::from(state.schema);
    if state.schema_index > 0 {
        (group.apply_schema)(state.schema_index, schema.clone()).await;
    }
    group.schema_index.set(state.schema_index);
    *group.latest_schema.borrow_mut() = schema;
    set_applied(group, index);
    tracing::info!(
        "group 0: state restored from a snapshot at entry {index} ({} members, schema entry {})",
        group.membership.borrow().members().len(),
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
    let state = group.membership.borrow().snapshot(group.schema_index.get(), group.latest_schema.borrow().to_vec());
    let mut snapshot = Snapshot { data: Bytes::from(state.encode()), ..Default::default() };
    snapshot.set_metadata(metadata);
    let bytes = snapshot.data.len();
    store.compact(snapshot).await.map_err(|e| e.to_string())?;
    tracing::info!("group 0: snapshot at entry {applied} ({bytes} bytes); the log before it is dropped");
    Ok(())
}

/// Applies a `Join` or `Replace` entry and answers who waits on it:
/// whether it took effect.
async fn apply_join(
    raft: &mut RawNode<StoredLog>,
    store: &RaftStore,
    group: &Group0,
    pending: &mut Pending,
    index: u64,
    member: &Member,
    replaces: Option<Uuid>,
) -> Result<bool, String> {
    let applied = group.membership.borrow_mut().apply_join(index, member, replaces);
    let answer = match applied {
        Ok(effects) => {
            carry_out(raft, store, group, effects).await?;
            Ok(member.clone())
        }
        Err(reason) => Err(reason),
    };
    let took_effect = answer.is_ok();
    for done in pending.remove(&member.host_id).map(|(_, joined)| joined).unwrap_or_default() {
        let _ = done.send(answer.clone());
    }
    Ok(took_effect)
}

/// Carries out what applying a membership entry asks, in order.
async fn carry_out(
    raft: &mut RawNode<StoredLog>,
    store: &RaftStore,
    group: &Group0,
    effects: Vec<Effect>,
) -> Result<(), String> {
    for effect in effects {
        let (id, add) = match effect {
            Effect::Reach(id, address) => {
                reach(group, id, address);
                continue;
            }
            Effect::Unwatch(address) => {
                crate::failure_detector::unwatch(address);
                continue;
            }
            Effect::AddVoter(id) => (id, true),
            Effect::RemoveVoter(id) => (id, false),
        };
        let voters = store.storage().initial_state().map_err(|e| e.to_string())?.conf_state.voters;
        if voters.contains(&id) == add {
            continue;
        }
        let change_type = if add { ConfChangeType::AddNode } else { ConfChangeType::RemoveNode };
        let change = ConfChange { change_type, node_id: id, ..Default::default() };
        let conf = raft.apply_conf_change(&change).map_err(|e| e.to_string())?;
        store.persist(&[], None, Some(&conf)).await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Member `id` answers at `address`: group 0 sends it there, and the
/// failure detector pings it (this node aside).
fn reach(group: &Group0, id: u64, address: SocketAddr) {
    group.addresses.borrow_mut().insert(id, address);
    if id != group.id {
        crate::failure_detector::watch(address);
    }
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

/// Sends raft-rs's messages through the group's network, each on its
/// own; a snapshot's sender learns whether it arrived.
fn send(group: &Rc<Group0>, messages: Vec<Message>) {
    for message in messages {
        let snapshot_to = (message.msg_type == MessageType::MsgSnapshot).then_some(message.to);
        let Some(address) = group.addresses.borrow().get(&message.to).copied() else {
            tracing::debug!("group 0: no address for raft id {}; message dropped", message.to);
            if let Some(to) = snapshot_to {
                let _ = group.inputs.unbounded_send(Input::SnapshotSent { to, delivered: false });
            }
            continue;
        };
        let mut payload = Vec::new();
        raft_codec::encode_message(&message, &mut payload);
        let (group, sent) = (Rc::clone(group), (group.network)(address, payload));
        shoal_runtime::spawn(async move {
            let answer = sent.await;
            if let Some(to) = snapshot_to {
                let _ = group.inputs.unbounded_send(Input::SnapshotSent { to, delivered: answer.is_ok() });
            }
            match answer {
                Err(MessagingError::Failed { message, .. }) if message.starts_with(YOU_LEFT) => {
                    learn_left(&group, &message)
                }
                Err(e) => tracing::debug!("group 0: message to {address}: {e}"),
                Ok(()) => {}
            }
        });
    }
}

/// A member answered that this node left the group while it was down:
/// from now on it has left, as if it had applied that.
fn learn_left(group: &Group0, answer: &str) {
    if group.membership.borrow_mut().learn_left() {
        tracing::info!("group 0: a member answered: {answer}");
    }
}

fn update_status(raft: &RawNode<StoredLog>, group: &Group0) {
    let membership = group.membership.borrow();
    let leader = membership.members().get(&raft.raft.leader_id).map(|m| m.host_id);
    let members = membership.with_states();
    *group.status.borrow_mut() = Status { term: raft.raft.term, leader, members };
}
