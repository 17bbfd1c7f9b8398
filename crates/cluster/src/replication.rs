//! Which nodes hold a token's data: a keyspace's replication strategy read
//! against the ring and the nodes' data centers and racks.
//!
//! - SimpleStrategy: the token's owner and the next distinct nodes
//!   clockwise, `replication_factor` in all, whatever their place.
//! - NetworkTopologyStrategy: per data center its own factor; walking
//!   clockwise, a node on a rack not yet used is taken at once, a node on a
//!   used rack is kept aside and taken, in ring order, once every rack of
//!   the data center has a replica (Cassandra's rule: replicas spread over
//!   racks first).
//! - Local and Everywhere (system keyspaces): this node; every node.
//!
//! [`ReplicaMap`] is the one interface the coordinator asks, so per-table
//! tablets can replace vnodes behind it.

use std::collections::{BTreeMap, HashMap, HashSet};

use thiserror::Error;
use uuid::Uuid;

use crate::ring::TokenRing;

/// Where a node is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub data_center: String,
    pub rack: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Strategy {
    Simple { replication_factor: usize },
    NetworkTopology { factors: BTreeMap<String, usize> },
    Local,
    Everywhere,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StrategyError {
    #[error("unknown replication strategy class '{0}'")]
    UnknownClass(String),
    #[error("replication factor '{value}' of '{option}' is not a number")]
    Factor { option: String, value: String },
    #[error("SimpleStrategy requires a replication_factor strategy option")]
    MissingFactor,
}

impl Strategy {
    /// The strategy a keyspace's stored `replication` map names.
    pub fn from_options(options: &BTreeMap<String, String>) -> Result<Strategy, StrategyError> {
        let class = options.get("class").map_or("", String::as_str);
        let factor = |option: &str, value: &str| {
            value
                .trim()
                .parse::<usize>()
                .map_err(|_| StrategyError::Factor { option: option.to_string(), value: value.to_string() })
        };
        match class.rsplit('.').next().unwrap_or_default() {
            "SimpleStrategy" => {
                let value = options.get("replication_factor").ok_or(StrategyError::MissingFactor)?;
                Ok(Strategy::Simple { replication_factor: factor("replication_factor", value)? })
            }
            "NetworkTopologyStrategy" => {
                let factors = options
                    .iter()
                    .filter(|(option, _)| option.as_str() != "class")
                    .map(|(dc, value)| Ok((dc.clone(), factor(dc, value)?)))
                    .collect::<Result<_, StrategyError>>()?;
                Ok(Strategy::NetworkTopology { factors })
            }
            "LocalStrategy" => Ok(Strategy::Local),
            "EverywhereStrategy" => Ok(Strategy::Everywhere),
            _ => Err(StrategyError::UnknownClass(class.to_string())),
        }
    }
}

/// The nodes that hold a token's data, the first the token's owner (for
/// SimpleStrategy and NetworkTopologyStrategy).
pub trait ReplicaMap {
    fn replicas(&self, token: i64) -> Vec<Uuid>;
}

/// Replicas from vnodes: the ring, the nodes' places and a strategy.
pub struct VnodeReplicas<'a> {
    pub ring: &'a TokenRing,
    pub placements: &'a HashMap<Uuid, Placement>,
    pub strategy: &'a Strategy,
    /// This node, for LocalStrategy.
    pub local: Uuid,
}

impl ReplicaMap for VnodeReplicas<'_> {
    fn replicas(&self, token: i64) -> Vec<Uuid> {
        match self.strategy {
            Strategy::Local => vec![self.local],
            Strategy::Everywhere => {
                let mut all = Vec::new();
                for (_, host) in self.ring.walk_from(token) {
                    if !all.contains(&host) {
                        all.push(host);
                    }
                }
                all
            }
            Strategy::Simple { replication_factor } => {
                let mut chosen = Vec::new();
                for (_, host) in self.ring.walk_from(token) {
                    if chosen.len() == *replication_factor {
                        break;
                    }
                    if !chosen.contains(&host) {
                        chosen.push(host);
                    }
                }
                chosen
            }
            Strategy::NetworkTopology { factors } => {
                let mut chosen = Vec::new();
                for (dc, factor) in factors {
                    chosen.extend(self.in_data_center(token, dc, *factor));
                }
                chosen
            }
        }
    }
}

impl VnodeReplicas<'_> {
    /// `factor` replicas of `dc`, racks spread first.
    fn in_data_center(&self, token: i64, dc: &str, factor: usize) -> Vec<Uuid> {
        let place = |host: &Uuid| self.placements.get(host);
        let racks: HashSet<&str> =
            self.placements.values().filter(|p| p.data_center == dc).map(|p| p.rack.as_str()).collect();
        let mut chosen: Vec<Uuid> = Vec::new();
        let mut racks_used: HashSet<&str> = HashSet::new();
        let mut kept_aside: Vec<Uuid> = Vec::new();
        for (_, host) in self.ring.walk_from(token) {
            if chosen.len() == factor {
                break;
            }
            let Some(placement) = place(&host).filter(|p| p.data_center == dc) else { continue };
            if chosen.contains(&host) || kept_aside.contains(&host) {
                continue;
            }
            if racks_used.len() < racks.len() && racks_used.contains(placement.rack.as_str()) {
                kept_aside.push(host);
                continue;
            }
            chosen.push(host);
            racks_used.insert(placement.rack.as_str());
            if racks_used.len() == racks.len() {
                // Every rack has one: the nodes kept aside come next.
                let room = factor - chosen.len();
                chosen.extend(kept_aside.drain(..).take(room));
            }
        }
        chosen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    fn place(dc: &str, rack: &str) -> Placement {
        Placement { data_center: dc.to_string(), rack: rack.to_string() }
    }

    /// Hosts 1..=n, host i holding token i * 100.
    fn ring(n: u128) -> TokenRing {
        let tokens: Vec<(Uuid, Vec<i64>)> = (1..=n).map(|i| (host(i), vec![i as i64 * 100])).collect();
        TokenRing::new(tokens.iter().map(|(h, t)| (*h, t.as_slice()))).expect("distinct tokens")
    }

    fn options(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn simple_strategy_walks_clockwise_over_distinct_nodes() {
        let ring = ring(4);
        let placements = HashMap::new();
        let strategy = Strategy::Simple { replication_factor: 3 };
        let map = VnodeReplicas { ring: &ring, placements: &placements, strategy: &strategy, local: host(1) };
        assert_eq!(map.replicas(150), vec![host(2), host(3), host(4)]);
        assert_eq!(map.replicas(350), vec![host(4), host(1), host(2)]);
        let strategy = Strategy::Simple { replication_factor: 9 };
        let map = VnodeReplicas { strategy: &strategy, ..map };
        assert_eq!(map.replicas(0).len(), 4, "no more replicas than nodes");
    }

    #[test]
    fn network_topology_spreads_over_racks_then_fills() {
        // dc1: hosts 1 (r1), 2 (r1), 3 (r2), 4 (r1); dc2: hosts 5, 6 (r1).
        let ring = ring(6);
        let placements: HashMap<Uuid, Placement> = [
            (1, place("dc1", "r1")),
            (2, place("dc1", "r1")),
            (3, place("dc1", "r2")),
            (4, place("dc1", "r1")),
            (5, place("dc2", "r1")),
            (6, place("dc2", "r1")),
        ]
        .into_iter()
        .map(|(i, p)| (host(i), p))
        .collect();
        let strategy =
            Strategy::from_options(&options(&[("class", "NetworkTopologyStrategy"), ("dc1", "3"), ("dc2", "1")]))
                .expect("valid options");
        let map = VnodeReplicas { ring: &ring, placements: &placements, strategy: &strategy, local: host(1) };
        // From host 1: r1 taken by 1, host 2 (r1) kept aside, 3 takes r2,
        // then 2 from the side; dc2: its first node clockwise, 5.
        assert_eq!(map.replicas(50), vec![host(1), host(3), host(2), host(5)]);
        // From host 4: 4 (r1), 1 and 2 aside (r1), 3 (r2), then 1.
        assert_eq!(map.replicas(350), vec![host(4), host(3), host(1), host(5)]);
    }

    #[test]
    fn options_are_read_as_cassandra_stores_them() {
        let simple = options(&[("class", "org.apache.cassandra.locator.SimpleStrategy"), ("replication_factor", "2")]);
        assert_eq!(Strategy::from_options(&simple), Ok(Strategy::Simple { replication_factor: 2 }));
        let local = options(&[("class", "org.apache.cassandra.locator.LocalStrategy")]);
        assert_eq!(Strategy::from_options(&local), Ok(Strategy::Local));
        assert_eq!(Strategy::from_options(&options(&[("class", "SimpleStrategy")])), Err(StrategyError::MissingFactor));
        assert!(matches!(
            Strategy::from_options(&options(&[("class", "NetworkTopologyStrategy"), ("dc1", "x")])),
            Err(StrategyError::Factor { .. })
        ));
        assert!(matches!(Strategy::from_options(&options(&[("class", "Nope")])), Err(StrategyError::UnknownClass(_))));
    }
}
