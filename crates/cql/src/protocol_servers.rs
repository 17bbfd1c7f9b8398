//! The client protocols this node serves and where: the rows of ScyllaDB's
//! `system.protocol_servers`, which its tools read to find a node's ports.
//! `main` sets them once, when the listeners are bound; they are
//! read-only afterwards, so no shard ever writes shared state here.

use std::sync::OnceLock;

use crate::system_cells::{text, text_set, Values};

/// One protocol's listeners.
#[derive(Debug, Clone)]
pub struct ProtocolServer {
    /// ScyllaDB's name for it (`native transport` for CQL).
    pub name: &'static str,
    pub protocol: &'static str,
    pub protocol_version: &'static str,
    /// `address:port` of each listener.
    pub listen_addresses: Vec<String>,
}

static SERVERS: OnceLock<Vec<ProtocolServer>> = OnceLock::new();

/// Records the node's protocol servers; call once, after binding.
pub fn set(servers: Vec<ProtocolServer>) {
    // A second call (tests starting several nodes in one process) keeps the first.
    let _ = SERVERS.set(servers);
}

/// The rows of `system.protocol_servers`: name, listen_addresses,
/// protocol, protocol_version.
pub(crate) fn rows() -> Vec<Values> {
    let servers = SERVERS.get().map(Vec::as_slice).unwrap_or_default();
    servers
        .iter()
        .map(|server| {
            vec![
                text(server.name),
                // A list of text has the bytes a set of it has.
                text_set(server.listen_addresses.iter().map(String::as_str)),
                text(server.protocol),
                text(server.protocol_version),
            ]
        })
        .collect()
}
