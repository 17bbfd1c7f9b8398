//! This node's place in the cluster as the front ends and the API see it:
//! who it is (host id, address, cluster name, data center, rack, tokens:
//! [`crate::identity`], shown here), the ring's ownership and the peers as
//! this shard's topology knows them, its load as peers see it, and which
//! replication strategies a keyspace may use.

use std::collections::BTreeMap;
use std::net::IpAddr;

use thiserror::Error;
use uuid::Uuid;

pub use crate::identity::{node, set_node_info, set_tokens, tokens, NodeInfo, DEFAULT_DATA_CENTER, DEFAULT_RACK};

/// The share of the ring each member replicates for `keyspace`, by host
/// id, as this shard's topology sees the ring.
pub fn effective_ownership(keyspace: &str) -> Result<BTreeMap<Uuid, f64>, crate::CoordinatorError> {
    let schema = crate::schema();
    let meta = schema
        .keyspaces
        .get(keyspace)
        .ok_or_else(|| crate::CoordinatorError::Invalid(format!("no keyspace named {keyspace}")))?;
    Ok(crate::topology::topology().effective_ownership(meta))
}

/// Each vnode range of `keyspace` by its end token, with the addresses of
/// its replicas, as this shard's topology sees the ring.
pub fn range_ownership(keyspace: &str) -> Result<Vec<(i64, Vec<IpAddr>)>, crate::CoordinatorError> {
    let schema = crate::schema();
    let meta = schema
        .keyspaces
        .get(keyspace)
        .ok_or_else(|| crate::CoordinatorError::Invalid(format!("no keyspace named {keyspace}")))?;
    let topology = crate::topology::topology();
    let me = node();
    let address = |host: Uuid| match host == me.host_id {
        true => Some(me.address),
        false => topology.endpoint(host).map(|e| e.address.ip()),
    };
    let ranges = topology.range_replicas(meta);
    Ok(ranges.into_iter().map(|(end, hosts)| (end, hosts.into_iter().filter_map(address).collect())).collect())
}

/// The cluster's other members as this shard knows them (`system.peers`).
pub fn peers() -> Vec<crate::Peer> {
    crate::topology::topology().peers()
}

/// Whether requests on this shard count member `host` as up: the failure
/// detector's view once this shard's topology took it in (`None`: not a
/// member). What reports show, so a node shown up is one requests and
/// repair count up.
pub fn member_up(host: Uuid) -> Option<bool> {
    let topology = crate::topology::topology();
    topology.endpoint(host).map(|_| topology.is_up(host))
}

/// How often this node's load is measured for its ping answers.
const LOAD_PUBLISH_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// This node's load (nodetool status): its user tables' SSTable bytes on
/// every shard.
pub async fn load_bytes() -> u64 {
    let loads = crate::shards::on_every_shard(|_| async { shoal_replica::local().load_bytes() }).await;
    loads.map(|loads| loads.into_iter().sum()).unwrap_or(0)
}

/// Measures this node's load every few seconds, forever, for the failure
/// detector's ping answers (how peers learn it); run on shard 0.
pub async fn publish_load() {
    let mut ticks = shoal_runtime::time::interval(LOAD_PUBLISH_INTERVAL);
    loop {
        ticks.tick().await;
        shoal_cluster::failure_detector::set_load_bytes(load_bytes().await);
    }
}

/// A keyspace's replication options that cannot be used, in Cassandra's
/// words (a CQL ConfigError).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct ReplicationError(pub String);

/// Checks a keyspace's `replication` options and returns them as stored:
/// the strategy class by its full name, replication factors checked, and
/// for NetworkTopologyStrategy a plain `replication_factor` applied to this
/// node's data center (as Cassandra 4+ does for every data center).
pub fn replication_options(entries: &[(String, String)]) -> Result<BTreeMap<String, String>, ReplicationError> {
    let fail = |message: String| Err(ReplicationError(message));
    let mut map: BTreeMap<String, String> = entries.iter().cloned().collect();
    // Without a class, NetworkTopologyStrategy (ScyllaDB's and Cassandra
    // 5's default).
    let class = map.remove("class").unwrap_or_else(|| "NetworkTopologyStrategy".to_string());
    // Option names are case-sensitive: `Replication_factor` is neither the
    // factor nor a data center anyone means.
    if let Some(key) = map.keys().find(|k| k.eq_ignore_ascii_case("replication_factor") && *k != "replication_factor") {
        return fail(format!("Unrecognized strategy option {{{key}}} passed to {class}"));
    }
    let short = class.rsplit('.').next().unwrap_or(&class).to_string();
    let full = match short.as_str() {
        "SimpleStrategy" => {
            if !map.contains_key("replication_factor") {
                return fail("SimpleStrategy requires a replication_factor strategy option.".to_string());
            }
            "org.apache.cassandra.locator.SimpleStrategy"
        }
        "NetworkTopologyStrategy" => {
            if let Some(rf) = map.remove("replication_factor") {
                map.entry(node().data_center).or_insert(rf);
            }
            "org.apache.cassandra.locator.NetworkTopologyStrategy"
        }
        "LocalStrategy" | "EverywhereStrategy" => return fail(format!("{short} is for system keyspaces only")),
        _ => return fail(format!("Unable to find replication strategy class '{class}'")),
    };
    if let Some((key, value)) = map.iter().find(|(_, value)| value.parse::<u32>().is_err()) {
        return fail(format!("Replication factor must be a non-negative integer; found {value} for {key}"));
    }
    map.insert("class".to_string(), full.to_string());
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn strategies_are_checked_and_named_in_full() {
        let simple = replication_options(&options(&[("class", "SimpleStrategy"), ("replication_factor", "3")]));
        assert_eq!(simple.map(|m| m["class"].clone()), Ok("org.apache.cassandra.locator.SimpleStrategy".to_string()));
        let nts = replication_options(&options(&[("class", "NetworkTopologyStrategy"), ("replication_factor", "2")]))
            .expect("valid");
        assert_eq!(nts.get(DEFAULT_DATA_CENTER).map(String::as_str), Some("2"));
        assert!(replication_options(&options(&[("class", "SimpleStrategy")])).is_err());
        let default = replication_options(&options(&[("replication_factor", "1")])).expect("valid");
        assert_eq!(default["class"], "org.apache.cassandra.locator.NetworkTopologyStrategy");
        assert!(replication_options(&options(&[("Replication_factor", "1")])).is_err());
        assert!(replication_options(&options(&[("class", "LocalStrategy")])).is_err());
        assert!(replication_options(&options(&[("class", "SimpleStrategy"), ("replication_factor", "x")])).is_err());
    }
}
