//! The node's and the cluster's state as JSON: identity, the failure
//! detector's view, group 0's members and the ring, the replicas of a key.
//! What runs on shard 0 (the failure detector, group 0, the drain state)
//! is asked of shard 0 by message; the schema and the topology are read
//! from this shard's copy.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde_json::{json, Value};
use shoal_coordinator::cluster::node;
use shoal_http::{Request, Response, Status};
use shoal_runtime::{nr_shards, submit_to};

/// The partitioner every node uses; nodetool describecluster names it.
const PARTITIONER: &str = "org.apache.cassandra.dht.Murmur3Partitioner";

/// A single value of the node's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    HostId,
    ClusterName,
    SchemaVersion,
    OperationMode,
    Tokens,
    DataCenter,
    Rack,
    UptimeMs,
    LeaderHost,
    Group0,
    Partitioner,
}

pub async fn state(state: State) -> Value {
    let me = node();
    match state {
        State::HostId => json!(me.host_id.to_string()),
        State::ClusterName => json!(me.cluster_name),
        State::SchemaVersion => json!(shoal_coordinator::schema().version.to_string()),
        State::OperationMode => {
            let mode = submit_to(0, || async { crate::shutdown::mode() }).await;
            json!(mode.map_or("UNKNOWN", crate::shutdown::Mode::name))
        }
        State::Tokens => json!(shoal_coordinator::cluster::tokens().iter().map(i64::to_string).collect::<Vec<_>>()),
        State::DataCenter => json!(me.data_center),
        State::Rack => json!(me.rack),
        State::UptimeMs => json!(super::STARTED.get().map_or(0, |s| s.elapsed().as_millis())),
        State::LeaderHost => json!(group0().await.and_then(|s| s.leader).map(|l| l.to_string())),
        State::Group0 => group0_json().await,
        State::Partitioner => json!(PARTITIONER),
    }
}

/// The names `/column_family/name[/keyspace]` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Names {
    /// Every keyspace, the system ones included (ScyllaDB's answer).
    Keyspaces,
    /// Every table, as `keyspace:table`.
    Tables,
}

/// The names asked for, from this shard's schema snapshot.
pub fn names(names: Names) -> Value {
    let schema = shoal_coordinator::schema();
    let list: Vec<String> = match names {
        Names::Keyspaces => schema.keyspaces.keys().cloned().collect(),
        Names::Tables => schema.tables().map(|t| format!("{}:{}", t.keyspace, t.name)).collect(),
    };
    json!(list)
}

/// `built_indexes/<keyspace>:<table>`: the names of the table's indexes
/// built on every shard, as ScyllaDB lists them.
pub async fn built_indexes(keyspace: &str, table: &str) -> Response {
    match shoal_cql::system::built_indexes(&shoal_coordinator::schema(), keyspace, table).await {
        Ok(Some(names)) => Response::json(&json!(names)),
        Ok(None) => Response::error(Status::BadRequest, format!("Column family {keyspace}:{table} not found")),
        Err(e) => Response::error(Status::InternalError, e),
    }
}

/// A map over the known nodes, as `[{"key": ..., "value": ...}]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerMap {
    /// Address → host id, this node's and each peer's its handshake told.
    HostIds,
    /// Address → load in bytes: this node's and each peer's its last ping
    /// answer told.
    Load,
    /// Token → address of the member holding it (`nodetool ring`).
    Tokens,
}

pub async fn peer_map(map: PeerMap) -> Value {
    let me = node();
    let entries: Vec<(String, Value)> = match map {
        PeerMap::HostIds => std::iter::once((me.address.to_string(), json!(me.host_id.to_string())))
            .chain(
                statuses()
                    .await
                    .into_iter()
                    .filter_map(|s| Some((s.address.ip().to_string(), json!(s.host_id?.to_string())))),
            )
            .collect(),
        PeerMap::Load => {
            let mine = shoal_coordinator::cluster::load_bytes().await;
            std::iter::once((me.address.to_string(), json!(mine)))
                .chain(
                    statuses()
                        .await
                        .into_iter()
                        .filter_map(|s| Some((s.address.ip().to_string(), json!(s.load_bytes?)))),
                )
                .collect()
        }
        PeerMap::Tokens => {
            let members = group0().await.map(|s| s.members).unwrap_or_default();
            let mut tokens: Vec<(i64, String)> =
                members.iter().flat_map(|(m, _)| m.tokens.iter().map(|t| (*t, m.address.ip().to_string()))).collect();
            if members.is_empty() {
                tokens =
                    shoal_coordinator::cluster::tokens().into_iter().map(|t| (t, me.address.to_string())).collect();
            }
            tokens.sort_unstable();
            tokens.into_iter().map(|(token, address)| (token.to_string(), json!(address))).collect()
        }
    };
    Value::Array(entries.into_iter().map(|(key, value)| json!({ "key": key, "value": value })).collect())
}

/// The failure detector's statuses of the peers (it runs on shard 0).
async fn statuses() -> Vec<shoal_cluster::failure_detector::PeerStatus> {
    submit_to(0, || async { shoal_cluster::failure_detector::statuses() }).await.unwrap_or_default()
}

/// Group 0 as shard 0 sees it (it runs there).
async fn group0() -> Option<shoal_cluster::group0::Status> {
    submit_to(0, || async { shoal_cluster::group0::status() }).await.ok().flatten()
}

/// The addresses of the nodes that are up (`live`; this node is) or down.
pub async fn endpoints(live: bool) -> Value {
    // The failure detector runs on shard 0; a member is up once shard 0's
    // topology (which this API's node operations read) has it up too.
    let statuses = submit_to(0, || async {
        let statuses = shoal_cluster::failure_detector::statuses();
        statuses
            .into_iter()
            .map(|s| {
                let counted = s.host_id.and_then(shoal_coordinator::cluster::member_up).unwrap_or(true);
                (s.address.ip(), s.up && counted)
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap_or_default();
    let mine = live.then(|| node().address);
    let others = statuses.into_iter().filter(|(_, up)| *up == live).map(|(address, _)| address);
    Value::Array(mine.into_iter().chain(others).map(|a| json!(a.to_string())).collect())
}

/// Each node's state as ScyllaDB's `/failure_detector/endpoints` gives it
/// (`addrs`, `is_alive`, `application_state` as name/value pairs).
pub async fn gossip() -> Value {
    let me = node();
    let members = group0().await.map(|s| s.members).unwrap_or_default();
    let up: BTreeMap<IpAddr, bool> = statuses().await.into_iter().map(|s| (s.address.ip(), s.up)).collect();
    let load = peer_map(PeerMap::Load).await;
    let load_of = |address: &str| {
        load.as_array().and_then(|entries| entries.iter().find(|e| e["key"] == address)).map(|e| e["value"].clone())
    };
    let schema = shoal_coordinator::schema().version.to_string();
    let mut nodes: Vec<Value> = members
        .iter()
        .map(|(m, state)| {
            let address = m.address.ip();
            let alive = address == me.address || up.get(&address).copied().unwrap_or(false);
            let status = match state.letter() {
                'J' => "BOOT",
                'L' => "LEAVING",
                _ => "NORMAL",
            };
            let mut states = vec![
                ("STATUS", json!(status)),
                ("DC", json!(m.data_center)),
                ("RACK", json!(m.rack)),
                ("HOST_ID", json!(m.host_id.to_string())),
                ("RPC_ADDRESS", json!(address.to_string())),
                ("NATIVE_TRANSPORT_PORT", json!(m.native_port.to_string())),
                ("SHARD_COUNT", json!(m.shard_count.to_string())),
                ("TOKENS", json!(m.tokens.len().to_string())),
            ];
            if address == me.address {
                states.push(("SCHEMA", json!(schema)));
            }
            if let Some(load) = load_of(&address.to_string()) {
                states.push(("LOAD", json!(load.to_string())));
            }
            let application_state: Vec<Value> =
                states.into_iter().map(|(name, value)| json!({"application_state": name, "value": value})).collect();
            json!({"addrs": address.to_string(), "is_alive": alive, "application_state": application_state})
        })
        .collect();
    if nodes.is_empty() {
        let states = [("STATUS", "NORMAL"), ("DC", &me.data_center), ("RACK", &me.rack)];
        let application_state: Vec<Value> =
            states.iter().map(|(name, value)| json!({"application_state": name, "value": value})).collect();
        nodes.push(json!({"addrs": me.address.to_string(), "is_alive": true, "application_state": application_state}));
    }
    Value::Array(nodes)
}

/// `ownership/<keyspace>`: the share of the ring each member replicates
/// for the keyspace, by address.
pub async fn ownership(keyspace: &str) -> Response {
    let shares = match shoal_coordinator::cluster::effective_ownership(keyspace) {
        Ok(shares) => shares,
        Err(e) => return Response::error(Status::BadRequest, e),
    };
    let members = group0().await.map(|s| s.members).unwrap_or_default();
    let me = node();
    let entries: Vec<Value> = shares
        .iter()
        .filter_map(|(host, share)| {
            let address = match members.iter().find(|(m, _)| m.host_id == *host) {
                Some((m, _)) => m.address.ip(),
                None if *host == me.host_id => me.address,
                None => return None,
            };
            Some(json!({"key": address.to_string(), "value": share}))
        })
        .collect();
    Response::json(&Value::Array(entries))
}

/// `describe_ring/<keyspace>`: each vnode range, `(previous end, end]`,
/// with its replicas' addresses.
pub fn describe_ring(keyspace: &str) -> Response {
    let ranges = match shoal_coordinator::cluster::range_ownership(keyspace) {
        Ok(ranges) => ranges,
        Err(e) => return Response::error(Status::BadRequest, e),
    };
    let ends: Vec<i64> = ranges.iter().map(|(end, _)| *end).collect();
    let entries: Vec<Value> = ranges
        .iter()
        .enumerate()
        .map(|(i, (end, replicas))| {
            let start = ends[(i + ends.len() - 1) % ends.len()];
            let endpoints: Vec<String> = replicas.iter().map(IpAddr::to_string).collect();
            json!({"start_token": start.to_string(), "end_token": end.to_string(), "endpoints": endpoints})
        })
        .collect();
    Response::json(&Value::Array(entries))
}

/// `natural_endpoints/<keyspace>?cf=<table>&key=<key>`: the addresses of
/// the replicas of the partition (`nodetool getendpoints`). A composite
/// partition key's components are separated by `:`, as Cassandra's.
pub fn natural_endpoints(keyspace: &str, request: &Request) -> Response {
    let (Some(table), Some(key)) = (request.param("cf"), request.param("key")) else {
        return Response::error(Status::BadRequest, "natural_endpoints needs ?cf=<table>&key=<partition key>");
    };
    let token = match partition_token(keyspace, table, key) {
        Ok(token) => token,
        Err(e) => return Response::error(Status::BadRequest, e),
    };
    let mut ranges = match shoal_coordinator::cluster::range_ownership(keyspace) {
        Ok(ranges) => ranges,
        Err(e) => return Response::error(Status::BadRequest, e),
    };
    ranges.sort_by_key(|(end, _)| *end);
    // The range that ends at or after the token holds it; past the last
    // end, the ring wraps to the first.
    let holder = ranges.iter().find(|(end, _)| token <= *end).or_else(|| ranges.first());
    let replicas = holder.map(|(_, replicas)| replicas.iter().map(IpAddr::to_string).collect::<Vec<_>>());
    Response::json(&json!(replicas.unwrap_or_default()))
}

/// The token of partition `key` (its text, `:`-separated components) of
/// `keyspace.table`.
fn partition_token(keyspace: &str, table: &str, key: &str) -> Result<i64, String> {
    let schema = shoal_coordinator::schema();
    let meta = schema.table(keyspace, table).ok_or_else(|| format!("no table {keyspace}.{table}"))?;
    let columns: Vec<_> = meta.partition_key().collect();
    let texts: Vec<&str> = if columns.len() == 1 { vec![key] } else { key.split(':').collect() };
    if texts.len() != columns.len() {
        return Err(format!("the partition key of {keyspace}.{table} has {} component(s)", columns.len()));
    }
    let components = columns
        .iter()
        .zip(texts)
        .map(|(column, text)| {
            let value = shoal_schema::parse_literal(&column.ty, literal_kind(&column.ty), text)
                .map_err(|e| format!("{}: {e}", column.name))?;
            Ok(value.to_bytes())
        })
        .collect::<Result<Vec<_>, String>>()?;
    let parts: Vec<&[u8]> = components.iter().map(Vec::as_slice).collect();
    let key = shoal_schema::token::serialize_partition_key(&parts).map_err(|e| e.to_string())?;
    Ok(shoal_schema::murmur3_token(&key))
}

/// How a key's text is read for a column of type `ty`: as the literal a
/// CQL statement would write for it, without quotes.
fn literal_kind(ty: &shoal_schema::CqlType) -> shoal_schema::LiteralKind {
    use shoal_schema::{CqlType as T, LiteralKind as K};
    match ty {
        T::Bigint | T::Int | T::Smallint | T::Tinyint | T::Varint | T::Counter => K::Integer,
        T::Float | T::Double | T::Decimal => K::Float,
        T::Boolean => K::Boolean,
        T::Uuid | T::Timeuuid => K::Uuid,
        T::Blob => K::Hex,
        T::Duration => K::Duration,
        T::Frozen(inner) => literal_kind(inner),
        _ => K::String,
    }
}

/// Every shard's metrics, in Prometheus text.
pub async fn metrics() -> String {
    let mut shards = Vec::with_capacity(nr_shards());
    for shard in 0..nr_shards() {
        // A shard that cannot answer (stopping) is left out of this scrape.
        if let Ok(families) = submit_to(shard, || async { shoal_metrics::gather() }).await {
            shards.push((shard, families));
        }
    }
    shoal_metrics::render_prometheus(&shards)
}

/// Group 0's term, leader and members (address, host id, dc, rack, token
/// count, share of the ring, state letter).
async fn group0_json() -> Value {
    let Some(status) = group0().await else { return Value::Null };
    // The natural ring: a node replacing another holds the same tokens
    // while it joins.
    let holders = status.members.iter().filter(|(_, state)| *state != shoal_cluster::group0::NodeState::Joining);
    let ring = shoal_cluster::ring::TokenRing::new(holders.map(|(m, _)| (m.host_id, m.tokens.as_slice())));
    let ownership = ring.map(|ring| ring.ownership()).unwrap_or_default();
    let members: Vec<Value> = status
        .members
        .iter()
        .map(|(m, state)| {
            json!({
                "host_id": m.host_id.to_string(),
                "address": m.address.to_string(),
                "dc": m.data_center,
                "rack": m.rack,
                "tokens": m.tokens.len(),
                "owns": ownership.get(&m.host_id).copied().unwrap_or(0.0),
                "state": state.letter().to_string(),
            })
        })
        .collect();
    json!({"term": status.term, "leader": status.leader.map(|l| l.to_string()), "members": members})
}
