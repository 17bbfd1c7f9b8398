//! Group 0's membership as a state machine: the members, their states,
//! the replacements in flight and the members that left, changed only by
//! applying the log's membership entries in order. An entry goes in; out
//! comes whether it took effect (or why it is void) and the effects the
//! driver must carry out ([`Effect`]: voters to add or remove, addresses
//! to reach or forget). No I/O, no raft-rs, no clock: whether an entry
//! takes effect depends on the log alone, so every node decides alike,
//! and the same code runs in the Raft simulation.
//!
//! The rules (one topology change at a time, one voter per entry):
//! a `Join` records a member — `Normal` if it is the first, else
//! `Joining` — and adds it as a voter; a `Replace` does the same with a
//! dead normal member's tokens, that member going `Leaving`; a `State`
//! entry moves a member `Joining → Normal`, `Normal → Leaving`, or
//! `Joining/Leaving → Left`, which removes it. A join whose tokens repeat
//! or another member holds, and a leave while another member joins or
//! leaves (or of the last normal member), are void.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;

use uuid::Uuid;

use crate::group0_entry::{Member, NodeState};
use crate::group0_snapshot::Group0State;

/// The most tokens a node may hold (ScyllaDB's `num_tokens` is 256).
pub(crate) const MAX_TOKENS: usize = 4096;

/// The raft id of a host: its first 8 bytes, never 0 (raft-rs's "none").
pub fn raft_id(host_id: Uuid) -> u64 {
    let id = host_id.as_u64_pair().0;
    if id == 0 {
        1
    } else {
        id
    }
}

/// What applying an entry asks of the driver, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Effect {
    /// Raft id `.0` answers at `.1`: send it Raft messages there, and
    /// have the failure detector ping it (unless it is this node).
    Reach(u64, SocketAddr),
    /// Stop pinging this address: its member left.
    Unwatch(SocketAddr),
    /// Make raft id a voter, if it is not one.
    AddVoter(u64),
    /// Remove raft id from the voters, if it is one.
    RemoveVoter(u64),
}

/// Group 0's membership as the entries applied so far built it.
#[derive(Debug)]
pub(crate) struct Membership {
    /// This node's raft id.
    me: u64,
    members: BTreeMap<u64, Member>,
    /// Each member's state.
    states: HashMap<u64, NodeState>,
    /// Joining members that replace a member, and the member they replace.
    replacing: HashMap<u64, u64>,
    /// Members that left (decommissioned or removed), by raft id.
    departed: HashSet<u64>,
}

impl Membership {
    pub(crate) fn new(me: u64) -> Membership {
        Membership {
            me,
            members: BTreeMap::new(),
            states: HashMap::new(),
            replacing: HashMap::new(),
            departed: HashSet::new(),
        }
    }

    pub(crate) fn members(&self) -> &BTreeMap<u64, Member> {
        &self.members
    }

    pub(crate) fn state(&self, id: u64) -> Option<NodeState> {
        self.states.get(&id).copied()
    }

    /// Every member with its state, by raft id.
    pub(crate) fn with_states(&self) -> Vec<(Member, NodeState)> {
        self.members.iter().map(|(id, m)| (m.clone(), self.state(*id).unwrap_or(NodeState::Normal))).collect()
    }

    /// Whether raft id `id` was a member and left.
    pub(crate) fn has_departed(&self, id: u64) -> bool {
        self.departed.contains(&id)
    }

    /// A member told this node it left the group while it was down:
    /// whether that is news.
    pub(crate) fn learn_left(&mut self) -> bool {
        self.departed.insert(self.me)
    }

    /// Applies a `Join` (`replaces: None`) or a `Replace` entry at `index`:
    /// its effects, or why it is void.
    pub(crate) fn apply_join(
        &mut self,
        index: u64,
        member: &Member,
        replaces: Option<Uuid>,
    ) -> Result<Vec<Effect>, String> {
        let id = raft_id(member.host_id);
        // The first record of a host wins, and tokens that repeat or
        // another member holds make the entry void (the joiner asks
        // again); a replacement holds exactly the tokens of a normal
        // member, while nothing else joins or leaves.
        let void = match replaces {
            None => void_join(&self.members, member),
            Some(replaced) => self.void_replace(member, replaced),
        };
        if let Some(reason) = void {
            tracing::error!("group 0: entry {index} ignored: {reason}");
            return Err(reason);
        }
        if !self.members.contains_key(&id) {
            // The first member has nothing to stream: it serves at once.
            let first = !self.states.values().any(|s| *s == NodeState::Normal);
            self.states.insert(id, if first { NodeState::Normal } else { NodeState::Joining });
            if let Some(replaced) = replaces {
                tracing::info!("group 0: node {} replaces node {replaced}, which is leaving", member.host_id);
                self.states.insert(raft_id(replaced), NodeState::Leaving);
                self.replacing.insert(id, raft_id(replaced));
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
        self.members.insert(id, member.clone());
        Ok(vec![Effect::Reach(id, member.address), Effect::AddVoter(id)])
    }

    /// Applies a `State` entry at `index`: its effects, or why it is void.
    pub(crate) fn apply_state(&mut self, index: u64, host_id: Uuid, state: NodeState) -> Result<Vec<Effect>, String> {
        let id = raft_id(host_id);
        if let Some(reason) = self.state_refusal(host_id, state) {
            tracing::info!("group 0: entry {index} ignored: node {host_id} cannot become {state:?}: {reason}");
            return Err(reason);
        }
        tracing::info!("group 0: node {host_id} is {state:?}");
        // A replacement that is done takes its place for good; one given up
        // gives it back.
        let replaced = self.replacing.remove(&id);
        if state != NodeState::Left {
            self.states.insert(id, state);
            return Ok(replaced.map(|replaced| self.remove(replaced)).unwrap_or_default());
        }
        if let Some(replaced) = replaced {
            self.states.insert(replaced, NodeState::Normal);
        }
        Ok(self.remove(id))
    }

    /// Removes raft id `id` from the members (and the voters).
    fn remove(&mut self, id: u64) -> Vec<Effect> {
        self.states.remove(&id);
        self.departed.insert(id);
        let mut effects = Vec::new();
        if let Some(member) = self.members.remove(&id) {
            tracing::info!("group 0: node {} ({}) left the cluster", member.address, member.host_id);
            effects.push(Effect::Unwatch(member.address));
        }
        effects.push(Effect::RemoveVoter(id));
        effects
    }

    /// Why member `host_id` may not move to `state` now, if it may not.
    pub(crate) fn state_refusal(&self, host_id: Uuid, state: NodeState) -> Option<String> {
        let current = self.state(raft_id(host_id));
        let normal = self.states.values().filter(|s| **s == NodeState::Normal).count();
        match (current, state) {
            (None, _) => Some("it is not a member".to_string()),
            (Some(NodeState::Joining), NodeState::Normal) => None,
            (Some(NodeState::Normal), NodeState::Leaving) if normal < 2 => {
                Some("it is the last normal member".to_string())
            }
            (Some(NodeState::Normal), NodeState::Leaving) => self.topology_change_in_progress(host_id),
            // A join given up (removenode of a joiner that died) or a leave done.
            (Some(NodeState::Joining | NodeState::Leaving), NodeState::Left) => None,
            (Some(current), _) => Some(format!("it is {current:?}")),
        }
    }

    /// The member other than `host_id` that is joining or leaving, if one
    /// is: a topology change runs alone.
    pub(crate) fn topology_change_in_progress(&self, host_id: Uuid) -> Option<String> {
        let (id, state) = self
            .states
            .iter()
            .find(|(id, state)| **id != raft_id(host_id) && matches!(state, NodeState::Joining | NodeState::Leaving))?;
        let host = self.members.get(id).map_or_else(|| format!("raft id {id}"), |m| m.host_id.to_string());
        Some(format!("node {host} is {} the cluster", if *state == NodeState::Joining { "joining" } else { "leaving" }))
    }

    /// The tokens of `replaced` if a new node may take its place: it is a
    /// normal member that is not `up` (as this node's failure detector
    /// finds it).
    pub(crate) fn replaceable(&self, replaced: Uuid, up: impl Fn(SocketAddr) -> bool) -> Result<Vec<i64>, String> {
        let id = raft_id(replaced);
        let Some(member) = self.members.get(&id) else {
            return Err(format!("node {replaced} is not a member: there is nothing to replace"));
        };
        if self.state(id) != Some(NodeState::Normal) {
            return Err(format!("node {replaced} is not a normal member: it cannot be replaced now"));
        }
        if up(member.address) {
            return Err(format!("node {replaced} is up: stop it before replacing it"));
        }
        Ok(member.tokens.clone())
    }

    /// Why a `Replace` entry cannot be applied, if it cannot.
    fn void_replace(&self, member: &Member, replaced: Uuid) -> Option<String> {
        if let Some(existing) = self.members.get(&raft_id(member.host_id)) {
            return (existing != member).then(|| format!("node {} is already a member", member.host_id));
        }
        let Some(old) = self.members.get(&raft_id(replaced)) else {
            return Some(format!("node {replaced} is not a member"));
        };
        if self.state(raft_id(replaced)) != Some(NodeState::Normal) {
            return Some(format!("node {replaced} is not a normal member"));
        }
        if old.tokens != member.tokens {
            return Some(format!("node {} does not hold the tokens of node {replaced}", member.host_id));
        }
        self.topology_change_in_progress(member.host_id)
    }

    /// What the entries applied so far built, as a snapshot holds it, with
    /// the latest schema entry (`schema_index`, `schema`).
    pub(crate) fn snapshot(&self, schema_index: u64, schema: Vec<u8>) -> Group0State {
        let mut replacing: Vec<(u64, u64)> = self.replacing.iter().map(|(a, b)| (*a, *b)).collect();
        replacing.sort_unstable();
        let mut departed: Vec<u64> = self.departed.iter().copied().collect();
        departed.sort_unstable();
        Group0State { members: self.with_states(), replacing, departed, schema_index, schema }
    }

    /// Takes a snapshot's membership in place of what was applied: the
    /// addresses to forget and to reach.
    pub(crate) fn restore(&mut self, state: &Group0State) -> Vec<Effect> {
        let members: BTreeMap<u64, Member> =
            state.members.iter().map(|(m, _)| (raft_id(m.host_id), m.clone())).collect();
        let gone =
            self.members.iter().filter(|(id, _)| !members.contains_key(id)).map(|(_, m)| Effect::Unwatch(m.address));
        let mut effects: Vec<Effect> = gone.collect();
        effects.extend(members.iter().map(|(id, m)| Effect::Reach(*id, m.address)));
        self.states = state.members.iter().map(|(m, s)| (raft_id(m.host_id), *s)).collect();
        self.members = members;
        self.replacing = state.replacing.iter().copied().collect();
        // That this node left may be known from a member's answer alone.
        let left = self.departed.contains(&self.me);
        self.departed = state.departed.iter().copied().chain(left.then_some(self.me)).collect();
        effects
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

#[cfg(test)]
mod tests {
    use super::*;

    fn member(n: u8, tokens: &[i64]) -> Member {
        Member {
            host_id: Uuid::from_bytes([n; 16]),
            address: SocketAddr::from(([127, 0, 0, n], 7000)),
            native_port: 9042,
            shard_count: 1,
            data_center: "dc1".to_string(),
            rack: "rack1".to_string(),
            tokens: tokens.to_vec(),
        }
    }

    #[test]
    fn raft_ids_are_never_zero() {
        assert_eq!(raft_id(Uuid::nil()), 1);
    }

    #[test]
    fn the_first_member_is_normal_and_later_ones_join_then_leave_one_at_a_time() {
        let (a, b, c) = (member(1, &[10]), member(2, &[20]), member(3, &[30]));
        let mut membership = Membership::new(raft_id(a.host_id));
        let effects = membership.apply_join(1, &a, None).expect("the first join applies");
        assert_eq!(effects, vec![Effect::Reach(raft_id(a.host_id), a.address), Effect::AddVoter(raft_id(a.host_id))]);
        assert_eq!(membership.state(raft_id(a.host_id)), Some(NodeState::Normal));
        membership.apply_join(2, &b, None).expect("a second join applies");
        assert_eq!(membership.state(raft_id(b.host_id)), Some(NodeState::Joining));
        assert!(membership.apply_join(3, &member(3, &[20]), None).is_err(), "tokens another member holds");
        assert!(membership.apply_state(4, a.host_id, NodeState::Leaving).is_err(), "b is joining");
        membership.apply_state(5, b.host_id, NodeState::Normal).expect("b is normal");
        membership.apply_join(6, &c, None).expect("c joins");
        membership.apply_state(7, c.host_id, NodeState::Normal).expect("c is normal");
        membership.apply_state(8, b.host_id, NodeState::Leaving).expect("b leaves");
        let effects = membership.apply_state(9, b.host_id, NodeState::Left).expect("b left");
        assert_eq!(effects, vec![Effect::Unwatch(b.address), Effect::RemoveVoter(raft_id(b.host_id))]);
        assert!(membership.has_departed(raft_id(b.host_id)));
        assert_eq!(membership.members().len(), 2);
    }

    #[test]
    fn a_replacement_takes_a_dead_members_tokens_and_it_leaves_once_the_new_one_is_normal() {
        let (a, b) = (member(1, &[10]), member(2, &[20]));
        let mut membership = Membership::new(raft_id(a.host_id));
        membership.apply_join(1, &a, None).expect("a");
        membership.apply_join(2, &b, None).expect("b");
        membership.apply_state(3, b.host_id, NodeState::Normal).expect("b normal");
        assert!(membership.replaceable(b.host_id, |_| true).is_err(), "b is up");
        let tokens = membership.replaceable(b.host_id, |_| false).expect("b is down");
        let new = member(3, &tokens);
        assert!(membership.apply_join(4, &member(3, &[30]), Some(b.host_id)).is_err(), "other tokens");
        membership.apply_join(5, &new, Some(b.host_id)).expect("the replacement joins");
        assert_eq!(membership.state(raft_id(b.host_id)), Some(NodeState::Leaving));
        let effects = membership.apply_state(6, new.host_id, NodeState::Normal).expect("normal");
        assert_eq!(effects, vec![Effect::Unwatch(b.address), Effect::RemoveVoter(raft_id(b.host_id))]);
        let state = membership.snapshot(0, Vec::new());
        let mut restored = Membership::new(raft_id(a.host_id));
        restored.restore(&state);
        assert_eq!(restored.snapshot(0, Vec::new()), state);
    }
}
