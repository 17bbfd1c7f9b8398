//! A simulated Raft group of three: raft-rs driven the way group 0 will
//! drive it, every message through Shoal's codec, every log on disk through
//! `RaftStore`, over a network that drops and reorders messages, with
//! nodes crashing (their memory lost, their file kept) and coming back,
//! each node snapshotting what it applied and dropping its log every few
//! entries, so a node back from a crash catches up from a snapshot.
//! Seeded, so a failure replays: `SHOAL_RAFT_SEED=<seed>`.
//!
//! Checked: safety (every node applies the same entries in the same order:
//! one node's sequence is a prefix of another's) and liveness (once the
//! network heals, every node applies everything committed, and most
//! proposals made while a leader was up are committed).

use std::collections::HashSet;
use std::path::PathBuf;

use bytes::Bytes;
use raft::eraftpb::{ConfState, EntryType, Message, MessageType, Snapshot, SnapshotMetadata};
use raft::{RawNode, SnapshotStatus, StateRole, Storage};
use shoal_cluster::raft_codec::{decode_message, encode_message};
use shoal_cluster::raft_store::{RaftStore, StoredLog};

const NODES: u64 = 3;
const STEPS: u64 = 3000;
const HEAL_STEPS: u64 = 600;
const DROP_PERCENT: u64 = 10;
const PROPOSE_EVERY: u64 = 7;
/// Entries applied between snapshots: a node down for 200 steps misses
/// more than this, so the leader has dropped what it needs.
const SNAPSHOT_EVERY: u64 = 16;

/// xorshift64*: small, seeded, good enough to pick drops and orders.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

struct Node {
    id: u64,
    dir: PathBuf,
    store: RaftStore,
    raft: RawNode<StoredLog>,
    /// Normal entries' data, in the order applied: the state machine.
    applied: Vec<Bytes>,
    /// Snapshots this node took from a leader.
    installed: u64,
}

/// The state machine as a snapshot holds it: `([u32 length][data])*`.
fn encode_state(applied: &[Bytes]) -> Bytes {
    let mut out = Vec::new();
    for data in applied {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        out.extend_from_slice(data);
    }
    Bytes::from(out)
}

fn decode_state(mut bytes: &[u8]) -> Vec<Bytes> {
    let mut applied = Vec::new();
    while let Some((len, rest)) = bytes.split_first_chunk::<4>() {
        let len = u32::from_be_bytes(*len) as usize;
        applied.push(Bytes::copy_from_slice(&rest[..len]));
        bytes = &rest[len..];
    }
    applied
}

fn config(id: u64) -> raft::Config {
    raft::Config { id, election_tick: 10, heartbeat_tick: 3, pre_vote: true, check_quorum: true, ..Default::default() }
}

async fn start(id: u64, dir: PathBuf) -> Node {
    let store = RaftStore::open(&dir).await.expect("the node's raft log opens");
    let state = raft::Storage::initial_state(&store.storage()).expect("state");
    if state.conf_state.voters.is_empty() {
        let voters = ConfState { voters: (1..=NODES).collect(), ..Default::default() };
        store.persist(&[], None, Some(&voters)).await.expect("bootstrap persisted");
    }
    let logger = slog::Logger::root(slog::Discard, slog::o!());
    let raft = RawNode::new(&config(id), store.storage(), &logger).expect("a raft node");
    // The state starts from the snapshot; the entries after it are applied
    // again after a restart.
    let applied = decode_state(&store.snapshot().data);
    Node { id, dir, store, raft, applied, installed: 0 }
}

/// Snapshots what `node` applied once `SNAPSHOT_EVERY` entries were applied
/// since its last snapshot, or when raft wants a newer one.
async fn take_snapshot_when_due(node: &mut Node) {
    let applied = node.raft.raft.raft_log.applied;
    let compacted = node.store.compacted();
    let wanted = node.store.take_snapshot_wanted();
    if applied <= compacted || (applied - compacted < SNAPSHOT_EVERY && !wanted) {
        return;
    }
    let mut metadata =
        SnapshotMetadata { index: applied, term: node.raft.store().term(applied).expect("term"), ..Default::default() };
    metadata.set_conf_state(node.raft.store().initial_state().expect("state").conf_state);
    let mut snapshot = Snapshot { data: encode_state(&node.applied), ..Default::default() };
    snapshot.set_metadata(metadata);
    node.store.compact(snapshot).await.expect("compacted");
}

fn apply(node: &mut Node, entries: Vec<raft::eraftpb::Entry>) {
    for entry in entries {
        if entry.entry_type == EntryType::EntryNormal && !entry.data.is_empty() {
            node.applied.push(entry.data);
        }
    }
}

fn send(network: &mut Vec<(u64, Vec<u8>)>, messages: Vec<Message>) {
    for message in messages {
        let mut wire = Vec::new();
        encode_message(&message, &mut wire);
        network.push((message.to, wire));
    }
}

/// One `Ready` handled as group 0 handles it: send what may go at once,
/// apply what is committed, persist, then send what waited on the persist.
async fn handle_ready(node: &mut Node, network: &mut Vec<(u64, Vec<u8>)>) {
    if !node.raft.has_ready() {
        return;
    }
    let mut ready = node.raft.ready();
    send(network, ready.take_messages());
    if !ready.snapshot().is_empty() {
        node.store.install(ready.snapshot()).await.expect("installed");
        node.applied = decode_state(&ready.snapshot().data);
        node.installed += 1;
    }
    apply(node, ready.take_committed_entries());
    node.store.persist(ready.entries(), ready.hs(), None).await.expect("persisted");
    send(network, ready.take_persisted_messages());
    let mut light = node.raft.advance(ready);
    if let Some(commit) = light.commit_index() {
        let mut state = raft::Storage::initial_state(&node.store.storage()).expect("state").hard_state;
        state.commit = commit;
        node.store.persist(&[], Some(&state), None).await.expect("persisted");
    }
    send(network, light.take_messages());
    apply(node, light.take_committed_entries());
    node.raft.advance_apply();
}

fn is_prefix(a: &[Bytes], b: &[Bytes]) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    long[..short.len()] == *short
}

#[test]
fn three_nodes_agree_through_drops_reorders_and_crashes() {
    let seed: u64 = std::env::var("SHOAL_RAFT_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x05ee_d0f5_a0a1);
    let root = std::env::temp_dir().join(format!("shoal-raft-sim-{}-{seed}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let mut rng = Rng(seed | 1);
    let outcome = shoal_io::block_on(async {
        let mut nodes: Vec<Option<Node>> = Vec::new();
        for id in 1..=NODES {
            nodes.push(Some(start(id, root.join(format!("n{id}"))).await));
        }
        let mut network: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut proposed = 0u64;
        // (step to restart at, id, its directory)
        let mut crashed: Vec<(u64, u64, PathBuf)> = Vec::new();
        for step in 0..STEPS + HEAL_STEPS {
            let healing = step >= STEPS;
            // Crash one node for a while, twice: a follower, then the
            // leader of the moment (memory lost, file kept).
            let crash = match step {
                500 => Some(2),
                1500 => nodes.iter().flatten().find(|n| n.raft.raft.state == StateRole::Leader).map(|n| n.id),
                _ => None,
            };
            if let Some(id) = crash {
                let dead = nodes[(id - 1) as usize].take().expect("up");
                let dir = dead.dir.clone();
                drop(dead);
                network.retain(|(to, _)| *to != id);
                // Back 200 steps later (handled below by the restart list).
                crashed.push((step + 200, id, dir));
            }
            while let Some(at) = crashed.iter().position(|(when, _, _)| *when == step) {
                let (_, id, dir) = crashed.remove(at);
                nodes[(id - 1) as usize] = Some(start(id, dir).await);
            }
            for node in nodes.iter_mut().flatten() {
                node.raft.tick();
            }
            if !healing && step % PROPOSE_EVERY == 0 {
                if let Some(leader) = nodes.iter_mut().flatten().find(|n| n.raft.raft.state == StateRole::Leader) {
                    let data = format!("op-{proposed}").into_bytes();
                    if leader.raft.propose(Vec::new(), data).is_ok() {
                        proposed += 1;
                    }
                }
            }
            // Deliver what is in flight, in a random order; drop some. A
            // snapshot's sender learns whether it arrived (as group 0's
            // does from the answer), or raft waits on it for ever.
            let mut in_flight = std::mem::take(&mut network);
            while !in_flight.is_empty() {
                let (to, wire) = in_flight.swap_remove(rng.below(in_flight.len() as u64) as usize);
                let message = decode_message(&wire).expect("our own encoding decodes");
                let (from, is_snapshot) = (message.from, message.msg_type == MessageType::MsgSnapshot);
                let dropped = !healing && rng.below(100) < DROP_PERCENT;
                let delivered = match nodes[(to - 1) as usize].as_mut() {
                    Some(node) if !dropped => {
                        let _ = node.raft.step(message);
                        true
                    }
                    _ => false,
                };
                if let (true, Some(sender)) = (is_snapshot, nodes[(from - 1) as usize].as_mut()) {
                    let status = if delivered { SnapshotStatus::Finish } else { SnapshotStatus::Failure };
                    sender.raft.report_snapshot(to, status);
                }
            }
            for node in nodes.iter_mut().flatten() {
                handle_ready(node, &mut network).await;
                take_snapshot_when_due(node).await;
            }
            let applied: Vec<&Vec<Bytes>> = nodes.iter().flatten().map(|n| &n.applied).collect();
            for pair in applied.windows(2) {
                assert!(is_prefix(pair[0], pair[1]), "step {step}: nodes applied different sequences (seed {seed})");
            }
        }
        let applied: Vec<Vec<Bytes>> = nodes.iter().map(|n| n.as_ref().expect("all up").applied.clone()).collect();
        let lens: Vec<(usize, u64, u64, u64)> = nodes
            .iter()
            .flatten()
            .map(|n| (n.applied.len(), n.raft.raft.raft_log.applied, n.store.compacted(), n.installed))
            .collect();
        assert!(
            applied.windows(2).all(|pair| pair[0] == pair[1]),
            "after healing every node applied the same: {lens:?}"
        );
        let distinct: HashSet<&Bytes> = applied[0].iter().collect();
        assert_eq!(distinct.len(), applied[0].len(), "an entry applied twice");
        let installed: u64 = nodes.iter().flatten().map(|n| n.installed).sum();
        (proposed, applied[0].len() as u64, installed)
    });
    let (proposed, committed, installed) = outcome;
    assert!(installed > 0, "no node caught up from a snapshot (seed {seed})");
    assert!(proposed > 200, "only {proposed} proposals were accepted (seed {seed})");
    assert!(committed * 10 >= proposed * 9, "{committed} of {proposed} proposals committed (seed {seed})");
    let _ = std::fs::remove_dir_all(&root);
}
