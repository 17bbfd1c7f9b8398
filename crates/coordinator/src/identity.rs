//! Who this node is, fixed at start: host id, address, cluster name, data
//! center, rack, and the tokens it took. Beneath the topology, which
//! places this node among the members, and everything that asks who "me"
//! is; [`crate::cluster`] shows it to the front ends.

use std::net::IpAddr;
use std::sync::OnceLock;

use uuid::Uuid;

/// The data center and rack of a node that names none (Cassandra's
/// SimpleSnitch names).
pub const DEFAULT_DATA_CENTER: &str = "datacenter1";
pub const DEFAULT_RACK: &str = "rack1";

/// Who this node is, fixed at start.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    pub cluster_name: String,
    pub host_id: Uuid,
    pub address: IpAddr,
    pub data_center: String,
    pub rack: String,
}

static NODE: OnceLock<NodeInfo> = OnceLock::new();

/// The node's tokens: chosen once it knows the ring it joins, after its
/// identity is set.
static TOKENS: OnceLock<Vec<i64>> = OnceLock::new();

/// Sets the node's tokens; call once at start, before serving CQL.
pub fn set_tokens(tokens: Vec<i64>) {
    let _ = TOKENS.set(tokens);
}

/// The node's tokens (`[0]` before [`set_tokens`]).
pub fn tokens() -> Vec<i64> {
    TOKENS.get().cloned().unwrap_or_else(|| vec![0])
}

/// Sets the node's identity; call once at start, before serving.
pub fn set_node_info(info: NodeInfo) {
    // A second call (tests starting several nodes in one process) keeps the first.
    let _ = NODE.set(info);
}

/// The node's identity (defaults before [`set_node_info`]).
pub fn node() -> NodeInfo {
    NODE.get().cloned().unwrap_or_else(|| NodeInfo {
        cluster_name: "Shoal Cluster".to_string(),
        host_id: Uuid::nil(),
        address: IpAddr::from([127, 0, 0, 1]),
        data_center: DEFAULT_DATA_CENTER.to_string(),
        rack: DEFAULT_RACK.to_string(),
    })
}
