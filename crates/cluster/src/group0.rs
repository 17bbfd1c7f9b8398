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
//! same ranges; `ring::allocate_tokens`), proposes a `Join` entry (host id,
//! storage address, shard count, data center, rack, tokens) and answers
//! with it once it is applied. Asking again is safe: a member gets its
//! record back, a join in flight is proposed again with the same tokens.
//! Every node applies entries in log order: a `Join` records the member and
//! adds it as a voter, one voter per entry, so the configuration only ever
//! changes by one node at a time. A node with a log restarts from it and
//! never asks again.
//!
//! Members are known to Raft by a raft id: the first 8 bytes of the host id
//! (never 0). Not yet: leaving, removing and replacing nodes, schema changes
//! through the group, snapshots.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use futures_channel::{mpsc, oneshot};
use futures_util::{FutureExt, StreamExt};
use raft::eraftpb::{ConfChange, ConfChangeType, Entry, EntryType, Message};
use raft::storage::MemStorage;
use raft::{RawNode, StateRole, Storage};
use shoal_buf::Reader;
use uuid::Uuid;

use crate::messaging::{self, Caller, MessagingError};
use crate::raft_codec;
use crate::raft_store::RaftStore;
use crate::verb::Verb;
use crate::wire::{ip_of, put_ip, put_text, text_of};

/// How often raft-rs is ticked; elections after 10 ticks without a leader.
const TICK: Duration = Duration::from_millis(100);
const ELECTION_TICKS: usize = 10;
const HEARTBEAT_TICKS: usize = 2;
/// Between rounds of asking the seeds to be added.
const JOIN_RETRY: Duration = Duration::from_secs(1);

/// A member of the cluster as group 0 records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub host_id: Uuid,
    /// Its storage port's address.
    pub address: SocketAddr,
    pub shard_count: u16,
    pub data_center: String,
    pub rack: String,
    pub tokens: Vec<i64>,
}

/// What a node knows of group 0, for the REST API.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    pub term: u64,
    /// The leader's host id, if one is known.
    pub leader: Option<Uuid>,
    pub members: Vec<Member>,
}

/// How this node takes part.
pub struct Group0Config {
    /// Where the log lives.
    pub dir: PathBuf,
    pub me: Member,
    /// Whether this node forms the group if its log is empty.
    pub bootstrap: bool,
}

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
    /// A member to add; with no tokens, `num_tokens` chosen by the leader.
    Join {
        member: Member,
        num_tokens: usize,
        done: Joined,
    },
}

/// Joins the leader proposed and has not applied, with who waits on each.
type Pending = HashMap<Uuid, (Member, Vec<Joined>)>;

struct Group0 {
    /// This node's raft id.
    id: u64,
    members: RefCell<BTreeMap<u64, Member>>,
    /// Where each raft id answers: members, and callers heard from.
    addresses: RefCell<HashMap<u64, SocketAddr>>,
    inputs: mpsc::UnboundedSender<Input>,
    status: RefCell<Status>,
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
        addresses: RefCell::default(),
        inputs,
        status: RefCell::default(),
    });
    GROUP0.with(|g| *g.borrow_mut() = Some(Rc::clone(&group)));
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
                    Input::Join { member, num_tokens, done } => {
                        propose_join(&mut raft, &group, &mut pending, member, num_tokens, done)
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
            let num_tokens = config.me.tokens.len();
            propose_join(&mut raft, &group, &mut pending, config.me.clone(), num_tokens, done);
        }
        handle_ready(&mut raft, &store, &group, &mut pending).await?;
        if raft.raft.state != StateRole::Leader && !pending.is_empty() {
            // Proposals of a leader that is no more may never apply: their
            // joiners ask again, the new leader proposes them anew.
            for (_, (_, joined)) in pending.drain() {
                joined.into_iter().for_each(|done| drop(done.send(Err("leadership changed; ask again".to_string()))));
            }
        }
        update_status(&raft, &group);
    }
}

fn propose_join(
    raft: &mut RawNode<MemStorage>,
    group: &Group0,
    pending: &mut Pending,
    mut member: Member,
    num_tokens: usize,
    done: Joined,
) {
    if let Some(existing) = group.members.borrow().get(&raft_id(member.host_id)) {
        let _ = done.send(Ok(existing.clone()));
        return;
    }
    if raft.raft.state != StateRole::Leader {
        let leader = group.addresses.borrow().get(&raft.raft.leader_id).copied();
        let _ = done.send(Err(match leader {
            Some(address) => format!("{NOT_LEADER}{address}"),
            None => "no leader yet".to_string(),
        }));
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
        // Others join a ring the leader is part of: tokens chosen against
        // an empty ring would overlap the leader's own.
        if raft_id(member.host_id) != group.id && !group.members.borrow().contains_key(&group.id) {
            let _ = done.send(Err("the cluster is still forming; ask again".to_string()));
            return;
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
            member.tokens = crate::ring::allocate_tokens(&ring, member.host_id, num_tokens.max(1));
        } else if member.tokens.iter().any(|t| ring.holds(*t)) {
            let _ = done.send(Err(format!("node {} holds tokens another member holds", member.host_id)));
            return;
        }
    }
    let mut data = Vec::new();
    encode_member(&member, &mut data);
    match raft.propose(Vec::new(), data) {
        Ok(()) => pending.entry(member.host_id).or_insert_with(|| (member, Vec::new())).1.push(done),
        Err(e) => {
            let _ = done.send(Err(e.to_string()));
        }
    }
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
const NOT_LEADER: &str = "not the group 0 leader; the leader is at ";

async fn handle_ready(
    raft: &mut RawNode<MemStorage>,
    store: &RaftStore,
    group: &Group0,
    pending: &mut Pending,
) -> Result<(), String> {
    if !raft.has_ready() {
        return Ok(());
    }
    let mut ready = raft.ready();
    send(group, ready.take_messages());
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
    raft: &mut RawNode<MemStorage>,
    store: &RaftStore,
    group: &Group0,
    pending: &mut Pending,
    entries: Vec<Entry>,
) -> Result<(), String> {
    for entry in entries {
        if entry.entry_type != EntryType::EntryNormal || entry.data.is_empty() {
            continue;
        }
        let member = match decode_member(&entry.data) {
            Ok(member) => member,
            Err(e) => {
                tracing::error!("group 0: entry {} is not a join ({e}); skipped", entry.index);
                continue;
            }
        };
        let id = raft_id(member.host_id);
        // Checked here, the same on every node: the first record of a
        // host wins, and tokens that repeat or another member holds make
        // the entry void (the joiner asks again).
        if let Some(reason) = void_join(&group.members.borrow(), &member) {
            tracing::error!("group 0: entry {} ignored: {reason}", entry.index);
            for done in pending.remove(&member.host_id).map(|(_, joined)| joined).unwrap_or_default() {
                let _ = done.send(Err(reason.clone()));
            }
            continue;
        }
        if !group.members.borrow().contains_key(&id) {
            tracing::info!(
                "group 0: node {} ({}) is a member (dc {}, rack {}, {} tokens)",
                member.address,
                member.host_id,
                member.data_center,
                member.rack,
                member.tokens.len()
            );
        }
        group.addresses.borrow_mut().insert(id, member.address);
        if id != raft.raft.id {
            crate::failure_detector::watch(member.address);
        }
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
    }
    Ok(())
}

fn send(group: &Group0, messages: Vec<Message>) {
    for message in messages {
        let Some(address) = group.addresses.borrow().get(&message.to).copied() else {
            tracing::debug!("group 0: no address for raft id {}; message dropped", message.to);
            continue;
        };
        let mut payload = Vec::new();
        raft_codec::encode_message(&message, &mut payload);
        shoal_runtime::spawn(async move {
            if let Err(e) = messaging::request(address, 0, Verb::Raft, &payload).await {
                tracing::debug!("group 0: message to {address}: {e}");
            }
        });
    }
}

fn update_status(raft: &RawNode<MemStorage>, group: &Group0) {
    let members = group.members.borrow();
    let leader = members.get(&raft.raft.leader_id).map(|m| m.host_id);
    *group.status.borrow_mut() = Status { term: raft.raft.term, leader, members: members.values().cloned().collect() };
}

fn register_handlers() {
    messaging::register(
        Verb::Raft,
        Rc::new(|caller: Caller, payload: Bytes| {
            let answer = raft_codec::decode_message(&payload).map_err(|e| e.to_string()).and_then(|message| {
                let group = GROUP0.with(|g| g.borrow().clone()).ok_or("group 0 is not running")?;
                if message.to != group.id {
                    return Err(format!("a raft message for {} reached {}", message.to, group.id));
                }
                group.addresses.borrow_mut().insert(message.from, caller.address);
                group.inputs.unbounded_send(Input::Step(message)).map_err(|_| "group 0 stopped".to_string())?;
                Ok(Bytes::new())
            });
            std::future::ready(answer).boxed_local()
        }),
    );
    messaging::register(
        Verb::Group0Join,
        Rc::new(|_caller: Caller, payload: Bytes| {
            async move {
                let (num_tokens, member) = decode_join(&payload)?;
                let group = GROUP0.with(|g| g.borrow().clone()).ok_or("group 0 is not running")?;
                let (done, joined) = oneshot::channel();
                let join = Input::Join { member, num_tokens, done };
                group.inputs.unbounded_send(join).map_err(|_| "group 0 stopped".to_string())?;
                let member = joined.await.unwrap_or_else(|_| Err("group 0 stopped".to_string()))?;
                let mut answer = Vec::new();
                encode_member(&member, &mut answer);
                Ok(Bytes::from(answer))
            }
            .boxed_local()
        }),
    );
}

/// Asks the seeds, in turn and again until one succeeds, to add `me`
/// with `num_tokens` tokens the leader chooses; returns the member record
/// as group 0 applied it (its tokens among it).
pub async fn join_through_seeds(me: &Member, num_tokens: usize, seeds: &[SocketAddr]) -> Member {
    let mut payload = (num_tokens as u32).to_be_bytes().to_vec();
    encode_member(me, &mut payload);
    let mut ask: Vec<SocketAddr> = seeds.to_vec();
    loop {
        let mut next_round = Vec::new();
        for seed in ask {
            tracing::info!("group 0: asking {seed} to add this node");
            match messaging::request(seed, 0, Verb::Group0Join, &payload).await {
                Ok(answer) => match decode_member(&answer) {
                    Ok(member) => {
                        tracing::info!("group 0: joined through {seed} with {} tokens", member.tokens.len());
                        return member;
                    }
                    Err(e) => tracing::warn!("group 0: {seed} answered a bad member record: {e}"),
                },
                Err(MessagingError::Failed { message, .. }) if message.starts_with(NOT_LEADER) => {
                    match message[NOT_LEADER.len()..].parse::<SocketAddr>() {
                        Ok(leader) => next_round.insert(0, leader),
                        Err(_) => tracing::warn!("group 0: {seed} answered {message}"),
                    }
                }
                Err(e) => tracing::info!("group 0: {seed}: {e}"),
            }
        }
        shoal_runtime::time::sleep(JOIN_RETRY).await;
        next_round.extend(seeds.iter().copied());
        ask = next_round;
    }
}

/// A join request: `[u32 tokens wanted][member]`.
fn decode_join(payload: &[u8]) -> Result<(usize, Member), String> {
    let Some((count, member)) = payload.split_first_chunk::<4>() else { return Err("short join".to_string()) };
    Ok((u32::from_be_bytes(*count) as usize, decode_member(member)?))
}

/// `[16 host id][u8 4|16][ip][u16 port][u16 shards][u16+dc][u16+rack]
/// [u32 count][i64 tokens]`, big-endian.
fn encode_member(m: &Member, out: &mut Vec<u8>) {
    out.extend_from_slice(m.host_id.as_bytes());
    put_ip(out, m.address.ip());
    out.extend_from_slice(&m.address.port().to_be_bytes());
    out.extend_from_slice(&m.shard_count.to_be_bytes());
    put_text(out, &m.data_center);
    put_text(out, &m.rack);
    out.extend_from_slice(&(m.tokens.len() as u32).to_be_bytes());
    for token in &m.tokens {
        out.extend_from_slice(&token.to_be_bytes());
    }
}

/// The member a join carries; total, like every decoder of network bytes.
pub fn decode_member(bytes: &[u8]) -> Result<Member, String> {
    let mut r = Reader::new(bytes);
    let short = |e: shoal_buf::Short| e.to_string();
    let host_id = Uuid::from_bytes(r.array("host id").map_err(short)?);
    let ip = ip_of(&mut r).map_err(|e| e.to_string())?;
    let port = r.be_u16("port").map_err(short)?;
    let shard_count = r.be_u16("shard count").map_err(short)?;
    let data_center = text_of(&mut r).map_err(|e| e.to_string())?;
    let rack = text_of(&mut r).map_err(|e| e.to_string())?;
    let count = r.be_i32("token count").map_err(short)? as u32 as usize;
    let mut tokens = Vec::with_capacity(r.capacity_for(count, 8));
    for _ in 0..count {
        tokens.push(r.be_i64("token").map_err(short)?);
    }
    if !r.is_empty() {
        return Err("trailing bytes".to_string());
    }
    Ok(Member { host_id, address: SocketAddr::new(ip, port), shard_count, data_center, rack, tokens })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_round_trip_and_truncations_fail() {
        let member = Member {
            host_id: Uuid::from_u128(7),
            address: SocketAddr::from(([127, 0, 0, 3], 7000)),
            shard_count: 2,
            data_center: "dc1".to_string(),
            rack: "r1".to_string(),
            tokens: vec![-5, 0, 9],
        };
        let mut out = Vec::new();
        encode_member(&member, &mut out);
        assert_eq!(decode_member(&out), Ok(member.clone()));
        let mut join = 16u32.to_be_bytes().to_vec();
        join.extend_from_slice(&out);
        assert_eq!(decode_join(&join), Ok((16, member)));
        for len in 0..out.len() {
            assert!(decode_member(&out[..len]).is_err(), "{len}");
        }
        assert_eq!(raft_id(Uuid::nil()), 1);
    }
}
