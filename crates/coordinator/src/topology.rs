//! The cluster as this shard's coordinator sees it: the members group 0
//! agreed on (address, shard count, data center and rack, tokens), the
//! token ring they make, and which of them are up.
//!
//! Each shard keeps its own snapshot. Shard 0, where group 0 and the
//! failure detector run, compares what they say with the last snapshot
//! every [`REFRESH_INTERVAL`] and sends a new one to every shard when it
//! changed ([`maintain`]): by message, never shared. Until group 0 has more
//! than one member the snapshot is this node alone, and every request
//! takes the single-node path.
//!
//! A request asks it for a keyspace's replicas of a token (the
//! replication options parsed once per distinct options and kept,
//! [`Topology::replica_map`]) and splits them by liveness against its
//! consistency level ([`Topology::plan`]: Unavailable here, once, for
//! reads and writes alike).
//!
//! While a member joins or leaves, two rings are kept: the natural one
//! (normal and leaving members), whose replicas serve reads and count for
//! writes, and the next one (normal and joining members), whose replicas
//! that are not natural ones are the token's pending replicas: writes go
//! to them too, and each one raises what the level needs by one
//! (Cassandra's rule), so that once the change is done the next replicas
//! hold every acknowledged write at the level ([`KeyspaceReplicas::write_targets`],
//! [`Topology::range_moves`]).
//!
//! Installing a snapshot tells the shard's listeners what changed, as
//! drivers' TOPOLOGY_CHANGE and STATUS_CHANGE events name it: a member
//! new or gone, a member up or down (by its CQL address).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::ops::Bound;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use shoal_cluster::failure_detector;
use shoal_cluster::group0::{self, Member, NodeState};
use shoal_cluster::replication::{Placement, ReplicaMap, Strategy, VnodeReplicas};
use shoal_cluster::ring::{range_width, TokenRing, RING_TOKENS};
use shoal_schema::sharder::Sharder;
use shoal_schema::KeyspaceMeta;
use shoal_storage::PartitionPosition;
use uuid::Uuid;

use crate::consistency::Tally;
use crate::schema::schema;
use crate::shards::{first_token, on_every_shard, SHARDING_IGNORE_MSB};
use crate::{ConsistencyLevel, CoordinatorError};

/// How often shard 0 looks for membership and liveness changes.
const REFRESH_INTERVAL: Duration = Duration::from_millis(100);

/// What shard 0 sends every shard: plain data, built into a [`Topology`]
/// there.
#[derive(Debug, Clone, PartialEq, Default)]
struct Snapshot {
    members: Vec<(Member, NodeState)>,
    up: Vec<Uuid>,
}

/// Where a member answers and how its data is placed.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub address: SocketAddr,
    pub shard_count: u16,
    pub placement: Placement,
}

/// A member other than this node, as drivers see it (`system.peers`).
#[derive(Debug, Clone)]
pub struct Peer {
    pub host_id: Uuid,
    pub address: IpAddr,
    pub native_port: u16,
    pub data_center: String,
    pub rack: String,
    pub tokens: Vec<i64>,
}

/// A change of the cluster a driver hears of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopologyEvent {
    NewNode(SocketAddr),
    RemovedNode(SocketAddr),
    Up(SocketAddr),
    Down(SocketAddr),
}

/// Told of every topology change this shard installs.
pub type TopologyListener = Box<dyn Fn(&TopologyEvent)>;

pub struct Topology {
    pub me: Uuid,
    /// This node's data center.
    pub local_dc: String,
    snapshot: Snapshot,
    /// Looked up per replica of every request, as `up` is: foldhash.
    endpoints: hashbrown::HashMap<Uuid, Endpoint>,
    placements: HashMap<Uuid, Placement>,
    /// The natural ring: normal and leaving members.
    ring: TokenRing,
    /// The ring once the change in progress is done (normal and joining
    /// members), while a member joins or leaves.
    next_ring: Option<TokenRing>,
    up: hashbrown::HashSet<Uuid>,
}

/// A range of tokens `(start, end]` (wrapping when `start >= end`) whose
/// replicas change: who holds it now and who gains it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeMove {
    pub start: i64,
    pub end: i64,
    /// Its natural replicas, primary first.
    pub holders: Vec<Uuid>,
    /// Its next replicas that are not natural ones.
    pub gainers: Vec<Uuid>,
    /// Its natural replicas that are not next ones.
    pub losers: Vec<Uuid>,
}

thread_local! {
    static TOPOLOGY: RefCell<Option<Rc<Topology>>> = const { RefCell::new(None) };
    static LISTENERS: RefCell<BTreeMap<u64, TopologyListener>> = const { RefCell::new(BTreeMap::new()) };
    static NEXT_LISTENER: Cell<u64> = const { Cell::new(0) };
    /// Replication options this shard's requests used, each with the
    /// strategy they name, parsed once (a few hundred instructions each
    /// time, for every request). Found by the options' contents, so a
    /// changed keyspace finds its own; at most [`STRATEGIES_KEPT_MAX`].
    static STRATEGIES: RefCell<Vec<KeptStrategy>> = const { RefCell::new(Vec::new()) };
}

/// Replication options and the strategy they name.
type KeptStrategy = (BTreeMap<String, String>, Rc<Strategy>);

/// The distinct replication options whose strategies a shard keeps
/// parsed; past it, the kept ones are forgotten and parsed again as used.
const STRATEGIES_KEPT_MAX: usize = 64;

/// The strategy `replication` (a keyspace's options) names, parsed once.
fn strategy_of(replication: &BTreeMap<String, String>) -> Rc<Strategy> {
    STRATEGIES.with(|kept| {
        let mut kept = kept.borrow_mut();
        if let Some((_, strategy)) = kept.iter().find(|(options, _)| options == replication) {
            return Rc::clone(strategy);
        }
        let strategy = Rc::new(match Strategy::from_options(replication) {
            Ok(strategy) => strategy,
            // Checked when the keyspace was made: only system keyspaces
            // (LocalStrategy, or none) get here.
            Err(_) => Strategy::Local,
        });
        if kept.len() == STRATEGIES_KEPT_MAX {
            kept.clear();
        }
        kept.push((replication.clone(), Rc::clone(&strategy)));
        strategy
    })
}

/// Subscribes `listener` to this shard's topology changes; the id
/// unsubscribes it.
pub fn subscribe_topology_changes(listener: TopologyListener) -> u64 {
    let id = NEXT_LISTENER.with(|next| next.replace(next.get() + 1));
    LISTENERS.with(|l| l.borrow_mut().insert(id, listener));
    id
}

pub fn unsubscribe_topology_changes(id: u64) {
    LISTENERS.with(|l| l.borrow_mut().remove(&id));
}

/// Installs `snapshot` on this shard and tells the listeners what changed.
fn install(snapshot: Snapshot) {
    let next = Rc::new(Topology::build(snapshot));
    let previous = TOPOLOGY.with(|t| t.borrow_mut().replace(Rc::clone(&next)));
    let events = match previous {
        Some(previous) => changes(&previous, &next),
        None => Vec::new(),
    };
    LISTENERS.with(|listeners| {
        for event in &events {
            listeners.borrow().values().for_each(|listener| listener(event));
        }
    });
}

/// What changed from `old` to `new`, other nodes only: a node is new to
/// drivers once it is normal (its CQL port opens then).
fn changes(old: &Topology, new: &Topology) -> Vec<TopologyEvent> {
    let native = |m: &Member| SocketAddr::new(m.address.ip(), m.native_port);
    let others = |t: &Topology| -> Vec<Member> { t.serving().filter(|m| m.host_id != t.me).cloned().collect() };
    let (before, after) = (others(old), others(new));
    let mut events = Vec::new();
    for m in &after {
        match before.iter().find(|b| b.host_id == m.host_id) {
            None => events.push(TopologyEvent::NewNode(native(m))),
            Some(_) if new.is_up(m.host_id) && !old.is_up(m.host_id) => events.push(TopologyEvent::Up(native(m))),
            Some(_) if !new.is_up(m.host_id) && old.is_up(m.host_id) => events.push(TopologyEvent::Down(native(m))),
            Some(_) => {}
        }
    }
    for m in before.iter().filter(|b| after.iter().all(|a| a.host_id != b.host_id)) {
        events.push(TopologyEvent::RemovedNode(native(m)));
    }
    events
}

/// This shard's snapshot of the cluster.
pub fn topology() -> Rc<Topology> {
    TOPOLOGY.with(|t| Rc::clone(t.borrow_mut().get_or_insert_with(|| Rc::new(Topology::build(Snapshot::default())))))
}

/// Where a request on `table` runs when other nodes hold some of it: the
/// cluster and the table's keyspace. `None`: on this node alone.
pub(crate) fn placement(table: Uuid) -> Option<(Rc<Topology>, Arc<KeyspaceMeta>)> {
    let topology = topology();
    if !topology.is_cluster() {
        return None;
    }
    let schema = schema();
    let meta = schema.table_by_id(table)?;
    Some((topology, Arc::clone(schema.keyspace(&meta.keyspace)?)))
}

impl Topology {
    fn build(snapshot: Snapshot) -> Topology {
        let node = crate::identity::node();
        let (me, local_dc) = (node.host_id, node.data_center);
        let placement = |m: &Member| Placement { data_center: m.data_center.clone(), rack: m.rack.clone() };
        let endpoints: hashbrown::HashMap<Uuid, Endpoint> = snapshot
            .members
            .iter()
            .map(|(m, _)| {
                (m.host_id, Endpoint { address: m.address, shard_count: m.shard_count, placement: placement(m) })
            })
            .collect();
        let placements = endpoints.iter().map(|(host, e)| (*host, e.placement.clone())).collect();
        // Group 0 refuses a join whose tokens another member holds, so the
        // members' tokens are distinct; an empty ring is the single node.
        let ring_of = |keep: &dyn Fn(NodeState) -> bool| {
            let holders = snapshot.members.iter().filter(|(_, state)| keep(*state));
            TokenRing::new(holders.map(|(m, _)| (m.host_id, m.tokens.as_slice()))).unwrap_or_default()
        };
        let ring = ring_of(&|state| matches!(state, NodeState::Normal | NodeState::Leaving));
        let changing = snapshot.members.iter().any(|(_, s)| matches!(s, NodeState::Joining | NodeState::Leaving));
        let next_ring = changing.then(|| ring_of(&|state| matches!(state, NodeState::Normal | NodeState::Joining)));
        let up = snapshot.up.iter().copied().chain([me]).collect();
        Topology { me, local_dc, snapshot, endpoints, placements, ring, next_ring, up }
    }

    /// Where the member whose storage port is `address` is, if it is one.
    pub fn placement_at(&self, address: SocketAddr) -> Option<Placement> {
        self.endpoints.values().find(|e| e.address == address).map(|e| e.placement.clone())
    }

    /// The members that serve clients: normal and leaving ones.
    fn serving(&self) -> impl Iterator<Item = &Member> {
        let serving = |state: &NodeState| matches!(state, NodeState::Normal | NodeState::Leaving);
        self.snapshot.members.iter().filter(move |(_, state)| serving(state)).map(|(m, _)| m)
    }

    /// Whether a member is joining or leaving.
    pub fn is_changing(&self) -> bool {
        self.next_ring.is_some()
    }

    /// Whether `host` is a member on its way out.
    pub fn is_leaving(&self, host: Uuid) -> bool {
        self.snapshot.members.iter().any(|(m, state)| m.host_id == host && *state == NodeState::Leaving)
    }

    /// The natural ring's vnode ranges `(start, end]`, in ring order, the
    /// first one wrapping (`start >= end`).
    pub fn vnode_ranges(&self) -> Vec<(i64, i64)> {
        ranges_between(&self.ring.tokens().collect::<Vec<i64>>())
    }

    /// The share of the ring each member replicates for `keyspace`
    /// (`nodetool status <keyspace>`'s "Owns (effective)"); a node alone,
    /// or before it knows the ring, replicates all of it.
    pub fn effective_ownership(&self, keyspace: &KeyspaceMeta) -> BTreeMap<Uuid, f64> {
        let map = self.replica_map(keyspace);
        let mut shares = BTreeMap::new();
        for (start, end) in self.vnode_ranges() {
            let share = range_width(start, end) as f64 / RING_TOKENS;
            for host in map.replicas(end) {
                *shares.entry(host).or_insert(0.0) += share;
            }
        }
        if shares.is_empty() {
            shares.insert(self.me, 1.0);
        }
        shares
    }

    /// Each natural vnode range of `keyspace`, by its end token, with its
    /// replicas (primary first), in ring order (`DESCRIBE CLUSTER`).
    pub fn range_replicas(&self, keyspace: &KeyspaceMeta) -> Vec<(i64, Vec<Uuid>)> {
        let map = self.replica_map(keyspace);
        self.vnode_ranges().into_iter().map(|(_, end)| (end, map.replicas(end))).collect()
    }

    /// The ranges of `keyspace` whose replicas the change in progress
    /// moves, in ring order; empty when none is in progress.
    pub fn range_moves(&self, keyspace: &KeyspaceMeta) -> Vec<RangeMove> {
        let Some(next_ring) = &self.next_ring else { return Vec::new() };
        let map = self.replica_map(keyspace);
        let mut boundaries: Vec<i64> = self.ring.tokens().chain(next_ring.tokens()).collect();
        boundaries.sort_unstable();
        boundaries.dedup();
        let mut moves = Vec::new();
        for (start, end) in ranges_between(&boundaries) {
            let (holders, next) = (map.replicas(end), map.next_replicas(end));
            let gainers: Vec<Uuid> = next.iter().filter(|h| !holders.contains(h)).copied().collect();
            if !gainers.is_empty() {
                let losers = holders.iter().filter(|h| !next.contains(h)).copied().collect();
                moves.push(RangeMove { start, end, holders, gainers, losers });
            }
        }
        moves
    }

    /// Whether other nodes hold data: until then, everything is local.
    pub fn is_cluster(&self) -> bool {
        self.endpoints.len() > 1
    }

    /// The other members, for drivers.
    pub fn peers(&self) -> Vec<Peer> {
        let members = self.serving().filter(|m| m.host_id != self.me);
        members
            .map(|m| Peer {
                host_id: m.host_id,
                address: m.address.ip(),
                native_port: m.native_port,
                data_center: m.data_center.clone(),
                rack: m.rack.clone(),
                tokens: m.tokens.clone(),
            })
            .collect()
    }

    /// Every member, this node too.
    pub fn members(&self) -> impl Iterator<Item = Uuid> + '_ {
        self.endpoints.keys().copied()
    }

    pub fn is_up(&self, host: Uuid) -> bool {
        self.up.contains(&host)
    }

    pub fn endpoint(&self, host: Uuid) -> Option<&Endpoint> {
        self.endpoints.get(&host)
    }

    /// A member's data center (this node's for a host not in the ring).
    pub fn data_center(&self, host: Uuid) -> &str {
        self.endpoints.get(&host).map_or(&self.local_dc, |endpoint| &endpoint.placement.data_center)
    }

    /// Where a write of `token` in `keyspace` goes.
    pub fn write_targets(&self, keyspace: &KeyspaceMeta, token: i64) -> WriteTargets {
        self.replica_map(keyspace).write_targets(token)
    }

    /// Where `keyspace`'s tokens live: its replication options read once,
    /// for a request that looks up many tokens.
    pub fn replica_map(&self, keyspace: &KeyspaceMeta) -> KeyspaceReplicas<'_> {
        KeyspaceReplicas { topology: self, strategy: strategy_of(&keyspace.replication) }
    }

    /// `replicas` and `pending` ones split by liveness, with what
    /// `consistency` needs of them (one more per live pending replica: a
    /// pending replica that is down gets a hint, and the data it missed
    /// before it streams comes with the stream — a joining node streams
    /// only once every node sees it up); Unavailable when the live ones
    /// cannot meet it. With `hints_count` (writes at ANY), a hint meets
    /// it: never Unavailable.
    pub fn plan(
        &self,
        replicas: &[Uuid],
        pending: &[Uuid],
        consistency: ConsistencyLevel,
        hints_count: bool,
    ) -> Result<ReplicaPlan<'_>, CoordinatorError> {
        // Each replica's data center looked up once, for the tally and
        // the plan alike.
        let mut live: Vec<Replica<'_>> =
            replicas.iter().chain(pending).map(|host| (*host, self.data_center(*host))).collect();
        let (natural, pending) = live.split_at(replicas.len());
        let mut tally = Tally::new(consistency, natural.iter().map(|(_, dc)| *dc), &self.local_dc);
        if consistency != ConsistencyLevel::Any {
            let live_pending = pending.iter().filter(|(host, _)| self.is_up(*host));
            live_pending.for_each(|(_, dc)| tally.add_pending(dc));
        }
        // In order, both: the caller prefers the first of each.
        let down: Vec<Replica<'_>> = live.extract_if(.., |(host, _)| !self.is_up(*host)).collect();
        match tally.unmet_by(live.iter().map(|(_, dc)| *dc)) {
            Some((required, alive)) if !hints_count => {
                Err(CoordinatorError::Unavailable { consistency, required, alive })
            }
            _ => Ok(ReplicaPlan { tally, live, down }),
        }
    }

    /// The shard of `host` that owns `token` (ScyllaDB's sharding with the
    /// host's shard count).
    pub fn shard_on(&self, host: Uuid, token: i64) -> u16 {
        let shards = self.endpoints.get(&host).map_or(1, |e| e.shard_count);
        Sharder { nr_shards: usize::from(shards), ignore_msb: SHARDING_IGNORE_MSB }.shard_of(token) as u16
    }

    /// Splits the partition range `from..to` at the ring's tokens: each
    /// piece lies within one vnode range, in ring order, with a token of
    /// that range (its start's) to find its replicas by. A vnode range is
    /// `(previous token, token]`; a piece ends before the first position of
    /// `token + 1`.
    pub fn split_range(
        &self,
        from: &Bound<PartitionPosition>,
        to: &Bound<PartitionPosition>,
    ) -> Vec<(Bound<PartitionPosition>, Bound<PartitionPosition>, i64)> {
        let first_of = |token: i64| PartitionPosition { token, key: Bytes::new() };
        let mut pieces = Vec::new();
        let mut start = from.clone();
        for token in self.ring.tokens() {
            let Some(next) = token.checked_add(1) else { break };
            let boundary = first_of(next);
            let after_start = match &start {
                Bound::Unbounded => true,
                Bound::Included(p) => *p < boundary,
                Bound::Excluded(p) => *p < boundary,
            };
            let before_end = match to {
                Bound::Unbounded => true,
                Bound::Included(p) => boundary <= *p,
                Bound::Excluded(p) => boundary < *p,
            };
            if !before_end {
                break;
            }
            if after_start {
                let token = first_token(&start);
                pieces.push((start, Bound::Excluded(boundary.clone()), token));
                start = Bound::Included(boundary);
            }
        }
        let token = first_token(&start);
        pieces.push((start, to.clone(), token));
        pieces
    }
}

/// A write's replicas: the natural ones, primary first, and the pending
/// ones (gaining the token by a change in progress).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteTargets {
    pub natural: Vec<Uuid>,
    pub pending: Vec<Uuid>,
}

impl WriteTargets {
    /// Whether this node alone holds the token: the single-node path.
    pub fn only(&self, me: Uuid) -> bool {
        self.natural == [me] && self.pending.is_empty()
    }
}

/// The ranges `(previous, token]` that sorted, distinct `tokens` make,
/// the first wrapping from the last token.
fn ranges_between(tokens: &[i64]) -> Vec<(i64, i64)> {
    let Some(last) = tokens.last() else { return Vec::new() };
    std::iter::once(*last).chain(tokens.iter().copied()).zip(tokens.iter().copied()).collect()
}

/// A replica and its data center.
pub type Replica<'a> = (Uuid, &'a str);

/// A request's replicas by liveness, and the answers its level needs.
pub struct ReplicaPlan<'a> {
    pub tally: Tally<'a>,
    pub live: Vec<Replica<'a>>,
    pub down: Vec<Replica<'a>>,
}

/// One keyspace's replica placement ([`Topology::replica_map`]).
pub struct KeyspaceReplicas<'a> {
    topology: &'a Topology,
    strategy: Rc<Strategy>,
}

impl KeyspaceReplicas<'_> {
    /// `token`'s natural replicas, its primary first.
    pub fn replicas(&self, token: i64) -> Vec<Uuid> {
        let t = self.topology;
        let map = VnodeReplicas { ring: &t.ring, placements: &t.placements, strategy: &self.strategy, local: t.me };
        map.replicas(token)
    }

    /// `token`'s natural replicas and its pending ones: those that gain it
    /// by the change in progress (none when none is).
    pub fn write_targets(&self, token: i64) -> WriteTargets {
        let natural = self.replicas(token);
        let pending = match self.topology.next_ring {
            None => Vec::new(),
            Some(_) => self.next_replicas(token).into_iter().filter(|host| !natural.contains(host)).collect(),
        };
        WriteTargets { natural, pending }
    }

    /// `token`'s replicas once the change in progress is done (its
    /// natural ones when none is).
    fn next_replicas(&self, token: i64) -> Vec<Uuid> {
        let t = self.topology;
        let ring = t.next_ring.as_ref().unwrap_or(&t.ring);
        VnodeReplicas { ring, placements: &t.placements, strategy: &self.strategy, local: t.me }.replicas(token)
    }
}

/// Keeps every shard's snapshot current; runs on shard 0 forever.
pub async fn maintain() {
    let mut last = Snapshot::default();
    let mut ticks = shoal_runtime::time::interval(REFRESH_INTERVAL);
    loop {
        ticks.tick().await;
        let Some(status) = group0::status() else { continue };
        let live: HashSet<SocketAddr> =
            failure_detector::statuses().into_iter().filter(|s| s.up).map(|s| s.address).collect();
        let up = status.members.iter().filter(|(m, _)| live.contains(&m.address)).map(|(m, _)| m.host_id).collect();
        let snapshot = Snapshot { members: status.members, up };
        if snapshot == last {
            continue;
        }
        let installed = on_every_shard({
            let snapshot = snapshot.clone();
            move |_| {
                let snapshot = snapshot.clone();
                async move { install(snapshot) }
            }
        })
        .await;
        if installed.is_ok() {
            last = snapshot;
        }
    }
}
