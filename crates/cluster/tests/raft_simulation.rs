//! A simulated group 0 of three nodes, each the production driver
//! (`group0_driver::Driver`: raft-rs, Shoal's codec, the membership state
//! machine, the log on disk through `RaftStore`), over a simulated network
//! that drops and reorders messages, on a simulated clock (one tick a
//! step). The first node forms the group, the other two join through it
//! (their tokens chosen by the leader); then schema entries are proposed
//! while nodes crash (their memory lost, their log kept) and come back,
//! each node snapshotting what it applied every few entries, so a node back
//! from a crash catches up from the leader's snapshot. Seeded, so a
//! failure replays: `SHOAL_RAFT_SEED=<seed>`.
//!
//! Checked: safety (no two nodes apply different schemas at one index, and
//! each applies in index order) and liveness (the joins succeed; once the
//! network heals, every node has the same members, the same latest schema
//! and the same applied index, and most proposals made while a leader was
//! up took effect).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use bytes::Bytes;
use futures_channel::oneshot;
use futures_util::FutureExt;
use shoal_cluster::group0::{Driver, Group0Config, Member, NodeState, RaftNetwork};
use shoal_cluster::group0_driver::ProposalOutcome;
use shoal_cluster::group0_entry::Entry;
use shoal_cluster::messaging::MessagingError;
use uuid::Uuid;

const NODES: u64 = 3;
const STEPS: u64 = 3000;
const HEAL_STEPS: u64 = 600;
const DROP_PERCENT: u64 = 10;
const PROPOSE_EVERY: u64 = 7;
const TOKENS: usize = 4;
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

/// A message in flight, and where its sender waits for the answer.
struct Parcel {
    from: SocketAddr,
    to: SocketAddr,
    payload: Vec<u8>,
    answer: oneshot::Sender<Result<(), MessagingError>>,
}

type Network = Rc<RefCell<Vec<Parcel>>>;

/// Every schema entry applied, in order: (node, index, payload).
type Applied = Rc<RefCell<Vec<(u64, u64, Bytes)>>>;

fn address(id: u64) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 7000 + id as u16))
}

fn member(id: u64) -> Member {
    Member {
        host_id: Uuid::from_u64_pair(id, 0),
        address: address(id),
        native_port: 9042,
        shard_count: 1,
        data_center: "dc1".to_string(),
        rack: "rack1".to_string(),
        // The first node chose its own; the leader chooses a joiner's.
        tokens: if id == 1 { (0..TOKENS as i64).map(|t| t << 56).collect() } else { Vec::new() },
    }
}

/// A node's way out: its messages join the network's parcels.
fn network_of(id: u64, network: &Network) -> RaftNetwork {
    let network = Rc::clone(network);
    Rc::new(move |to: SocketAddr, payload: Vec<u8>| {
        let (answer, answered) = oneshot::channel();
        network.borrow_mut().push(Parcel { from: address(id), to, payload, answer });
        async move { answered.await.unwrap_or(Err(MessagingError::Closed { peer: to })) }.boxed_local()
    })
}

async fn start(id: u64, dir: &Path, network: &Network, applied: &Applied) -> Driver {
    let applied = Rc::clone(applied);
    let config = Group0Config {
        dir: dir.to_path_buf(),
        me: member(id),
        bootstrap: id == 1,
        apply_schema: Rc::new(move |index, payload| {
            applied.borrow_mut().push((id, index, payload));
            std::future::ready(()).boxed_local()
        }),
        token_allocation_rf: 3,
        snapshot_threshold_entries: SNAPSHOT_EVERY,
    };
    let mut driver = Driver::open(config, network_of(id, network)).await.expect("the node's log opens");
    driver.start().await.expect("the node starts");
    driver
}

fn is_leader(driver: &Driver, id: u64) -> bool {
    driver.status().leader == Some(member(id).host_id)
}

/// What the nodes applied, as checked so far.
#[derive(Default)]
struct Checked {
    /// The schema applied at each index, by whichever node first did.
    committed: BTreeMap<u64, Bytes>,
    /// Each node's latest index applied since it (re)started (0: none).
    last: [u64; NODES as usize],
    /// Jumps over more entries than a snapshot holds: a node that caught
    /// up from the leader's snapshot.
    caught_up: usize,
}

impl Checked {
    /// Checks what was applied since the last call: one payload per index
    /// across nodes, and each node's indices rising.
    fn check(&mut self, applied: &Applied, seed: u64) {
        for (id, index, payload) in applied.borrow_mut().drain(..) {
            let seen = self.committed.entry(index).or_insert_with(|| payload.clone());
            assert_eq!(*seen, payload, "two schemas applied at index {index} (seed {seed})");
            let last = &mut self.last[(id - 1) as usize];
            assert!(index > *last, "node {id} applied {index} after {last} (seed {seed})");
            if *last > 0 && index - *last > SNAPSHOT_EVERY {
                self.caught_up += 1;
            }
            *last = index;
        }
    }
}

#[test]
fn three_drivers_agree_through_drops_reorders_and_crashes() {
    let seed: u64 = std::env::var("SHOAL_RAFT_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x05ee_d0f5_a0a1);
    let root = std::env::temp_dir().join(format!("shoal-raft-sim-{}-{seed}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let mut rng = Rng(seed | 1);
    let dir = |id: u64| -> PathBuf { root.join(format!("n{id}")) };
    let (proposed, took_effect) = shoal_io::block_on(async {
        let network: Network = Rc::default();
        let applied: Applied = Rc::default();
        let mut nodes: Vec<Option<Driver>> = Vec::new();
        for id in 1..=NODES {
            nodes.push(Some(start(id, &dir(id), &network, &applied).await));
        }
        let mut checked = Checked::default();
        let mut admissions: Vec<Admission> = (0..NODES).map(|id| Admission::new(id == 0)).collect();
        let mut outcomes: Vec<ProposalOutcome> = Vec::new();
        // (step to restart at, id)
        let mut crashed: Vec<(u64, u64)> = Vec::new();
        for step in 0..STEPS + HEAL_STEPS {
            let healing = step >= STEPS;
            // Crash one node for a while, twice: a follower, then the
            // leader of the moment (memory lost, log kept).
            let crash = match step {
                500 => Some(2),
                1500 => (1..=NODES).find(|id| nodes[(id - 1) as usize].as_ref().is_some_and(|n| is_leader(n, *id))),
                _ => None,
            };
            if let Some(id) = crash {
                nodes[(id - 1) as usize] = None;
                network.borrow_mut().retain(|parcel| parcel.to != address(id));
                crashed.push((step + 200, id));
                // What it applied is gone with its memory.
                checked.last[(id - 1) as usize] = 0;
            }
            while let Some(at) = crashed.iter().position(|(when, _)| *when == step) {
                let (_, id) = crashed.remove(at);
                nodes[(id - 1) as usize] = Some(start(id, &dir(id), &network, &applied).await);
            }
            for node in nodes.iter_mut().flatten() {
                node.tick();
            }
            let leader = (1..=NODES).find(|id| nodes[(id - 1) as usize].as_ref().is_some_and(|n| is_leader(n, *id)));
            if let Some(leader) = leader.map(|id| nodes[(id - 1) as usize].as_ref().expect("up")) {
                for id in 2..=NODES {
                    admit(leader, id, &mut admissions[(id - 1) as usize], step);
                }
                if !healing && step.is_multiple_of(PROPOSE_EVERY) && admissions.iter().all(|a| a.normal) {
                    let payload = format!("op-{}", outcomes.len()).into_bytes();
                    let entry = Entry::Schema { base_index: leader.schema_index(), payload };
                    outcomes.push(leader.propose(entry.encode()).expect("the driver runs"));
                }
            }
            deliver(&network, &nodes, &mut rng, healing);
            // The senders' tasks take their answers (a snapshot's sender
            // learns whether it arrived).
            shoal_runtime::yield_now().await;
            for node in nodes.iter_mut().flatten() {
                node.step_queued();
                node.advance().await.expect("the driver handles its Ready");
            }
            checked.check(&applied, seed);
        }
        let nodes: Vec<Driver> = nodes.into_iter().map(|n| n.expect("all up")).collect();
        let statuses: Vec<_> =
            nodes.iter().map(|n| (n.applied_index(), n.schema_index(), n.status().members)).collect();
        for (id, (_, _, members)) in (1..).zip(&statuses) {
            assert_eq!(members.len(), NODES as usize, "node {id} knows {members:?} (seed {seed})");
            assert!(members.iter().all(|(_, state)| *state != NodeState::Left), "seed {seed}");
        }
        assert!(statuses.windows(2).all(|pair| pair[0] == pair[1]), "after healing the nodes differ (seed {seed})");
        let took_effect = outcomes
            .iter_mut()
            .filter_map(|outcome| outcome.try_recv().ok().flatten())
            .fold(0, |count, answer| count + usize::from(matches!(answer, Ok((_, true)))));
        assert!(checked.caught_up > 0, "no node caught up from a snapshot (seed {seed})");
        (outcomes.len(), took_effect)
    });
    assert!(proposed > 200, "only {proposed} proposals were made (seed {seed})");
    assert!(took_effect * 10 >= proposed * 9, "{took_effect} of {proposed} proposals took effect (seed {seed})");
    let _ = std::fs::remove_dir_all(&root);
}

/// A joiner's way in, as a node's start takes it: asks the leader to add
/// it, then (having nothing to stream) to make it normal.
struct Admission {
    joined: Option<oneshot::Receiver<Result<Member, String>>>,
    is_member: bool,
    made_normal: Option<ProposalOutcome>,
    normal: bool,
}

impl Admission {
    fn new(normal: bool) -> Admission {
        Admission { joined: None, is_member: normal, made_normal: None, normal }
    }
}

/// Takes joiner `id` a step further through `leader`, asking again every
/// few steps what was refused or lost.
fn admit(leader: &Driver, id: u64, admission: &mut Admission, step: u64) {
    if let Some(answer) = admission.joined.as_mut().map(|joined| joined.try_recv()) {
        match answer {
            Ok(None) => return,
            Ok(Some(Ok(_))) => admission.is_member = true,
            _ => {}
        }
        admission.joined = None;
    }
    if let Some(answer) = admission.made_normal.as_mut().map(|outcome| outcome.try_recv()) {
        match answer {
            Ok(None) => return,
            Ok(Some(Ok((_, true)))) => admission.normal = true,
            _ => {}
        }
        admission.made_normal = None;
    }
    if admission.normal || !step.is_multiple_of(5) {
        return;
    }
    if admission.is_member {
        let entry = Entry::State { host_id: member(id).host_id, state: NodeState::Normal };
        admission.made_normal = leader.propose(entry.encode()).ok();
    } else {
        admission.joined = leader.join(member(id), TOKENS).ok();
    }
}

/// Delivers what is in flight, in a random order, dropping some unless
/// the network heals; a message to a node that is down is lost.
fn deliver(network: &Network, nodes: &[Option<Driver>], rng: &mut Rng, healing: bool) {
    let mut in_flight = std::mem::take(&mut *network.borrow_mut());
    while !in_flight.is_empty() {
        let parcel = in_flight.swap_remove(rng.below(in_flight.len() as u64) as usize);
        let dropped = !healing && rng.below(100) < DROP_PERCENT;
        let target = (1..=NODES).find(|id| address(*id) == parcel.to).and_then(|id| nodes[(id - 1) as usize].as_ref());
        let answer = match target {
            Some(node) if !dropped => node
                .receive(parcel.from, &parcel.payload)
                .map_err(|message| MessagingError::Failed { peer: parcel.to, message }),
            _ => continue,
        };
        let _ = parcel.answer.send(answer);
    }
}
