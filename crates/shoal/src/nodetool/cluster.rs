//! `nodetool ring`, `describecluster`, `gossipinfo` and `getendpoints`,
//! printed as Cassandra's nodetool prints them (scripts parse these), from
//! the node's JSON answers.

use std::collections::BTreeMap;

use super::report::{bytes, AddressEntry, Group0};
use super::{encode, Api};

/// Every token of the ring in order, with its node's address, rack,
/// status (Up/Down), state, load and share of the ring (with a keyspace,
/// the share it replicates for it), under its data center.
pub(super) fn ring(api: &Api, keyspace: Option<&str>) -> Result<(), String> {
    let tokens: Vec<AddressEntry<String>> = api.json("/storage_service/tokens_endpoint")?;
    let live: Vec<String> = api.json("/gossiper/endpoint/live")?;
    let loads: Vec<AddressEntry<u64>> = api.json("/storage_service/load_map")?;
    let members = api.json::<Option<Group0>>("/raft/group0")?.map(|g| g.members).unwrap_or_default();
    let effective: Option<Vec<AddressEntry<f64>>> = match keyspace {
        Some(keyspace) => Some(api.json(&format!("/storage_service/ownership/{}", encode(keyspace)))?),
        None => None,
    };
    let (local_dc, local_rack) = (api.json::<String>("/snitch/datacenter")?, api.json::<String>("/snitch/rack")?);
    let mut by_dc: BTreeMap<String, Vec<(i64, &str)>> = BTreeMap::new();
    for entry in &tokens {
        let token: i64 = entry.key.parse().map_err(|e| format!("bad token {}: {e}", entry.key))?;
        let dc = members.iter().find(|m| m.ip() == entry.value).map_or(&local_dc, |m| &m.dc);
        by_dc.entry(dc.clone()).or_default().push((token, entry.value.as_str()));
    }
    for (dc, mut tokens) in by_dc {
        tokens.sort_unstable();
        println!();
        println!("Datacenter: {dc}");
        println!("==========");
        println!("{:<16}{:<12}{:<7}{:<8}{:<16}{:<20}Token", "Address", "Rack", "Status", "State", "Load", "Owns");
        if let Some((last, _)) = tokens.last() {
            println!("{:>79}{last}", "");
        }
        for (token, address) in tokens {
            let member = members.iter().find(|m| m.ip() == address);
            let rack = member.map_or(local_rack.as_str(), |m| m.rack.as_str());
            let status = if live.iter().any(|l| l == address) { "Up" } else { "Down" };
            let state = match member.map(|m| m.state.as_str()) {
                Some("J") => "Joining",
                Some("L") => "Leaving",
                _ => "Normal",
            };
            let load = loads.iter().find(|l| l.key == address).map_or("?".to_string(), |l| bytes(l.value as f64));
            let owns = match (&effective, member) {
                (Some(shares), _) => shares.iter().find(|s| s.key == address).map(|s| s.value),
                (None, Some(m)) => Some(m.owns),
                (None, None) => None,
            };
            let owns = owns.map_or("?".to_string(), |o| format!("{:.2}%", o * 100.0));
            println!("{address:<16}{rack:<12}{status:<7}{state:<8}{load:<16}{owns:<20}{token}");
        }
    }
    Ok(())
}

/// The cluster's name, snitch, partitioner and the schema versions known
/// (this node's: a node's API tells its own).
pub(super) fn describecluster(api: &Api) -> Result<(), String> {
    let name: String = api.json("/storage_service/cluster_name")?;
    let partitioner: String = api.json("/storage_service/partitioner_name")?;
    let version: String = api.json("/storage_service/schema_version")?;
    let live: Vec<String> = api.json("/gossiper/endpoint/live")?;
    let me = live.first().cloned().unwrap_or_default();
    println!("Cluster Information:");
    println!("\tName: {name}");
    println!("\tSnitch: org.apache.cassandra.locator.GossipingPropertyFileSnitch");
    println!("\tDynamicEndPointSnitch: disabled");
    println!("\tPartitioner: {partitioner}");
    println!("\tSchema versions:");
    println!("\t\t{version}: [{me}]");
    println!();
    Ok(())
}

/// A node as `/failure_detector/endpoints` lists it.
#[derive(serde::Deserialize)]
struct Endpoint {
    addrs: String,
    is_alive: bool,
    application_state: Vec<ApplicationState>,
}

#[derive(serde::Deserialize)]
struct ApplicationState {
    application_state: String,
    value: String,
}

/// Each node: `/address`, then its states as `  NAME:value` lines.
pub(super) fn gossipinfo(api: &Api) -> Result<(), String> {
    let endpoints: Vec<Endpoint> = api.json("/failure_detector/endpoints")?;
    for endpoint in endpoints {
        println!("/{}", endpoint.addrs);
        println!("  IS_ALIVE:{}", endpoint.is_alive);
        for state in endpoint.application_state {
            println!("  {}:{}", state.application_state, state.value);
        }
    }
    Ok(())
}

/// The replicas' addresses of a partition, one per line.
pub(super) fn getendpoints(api: &Api, keyspace: &str, table: &str, key: &str) -> Result<(), String> {
    let path =
        format!("/storage_service/natural_endpoints/{}?cf={}&key={}", encode(keyspace), encode(table), encode(key));
    let endpoints: Vec<String> = api.json(&path)?;
    for endpoint in endpoints {
        println!("{endpoint}");
    }
    Ok(())
}
