//! Which connections between nodes are encrypted: scylla.yaml's
//! `server_encryption_options.internode_encryption`, as ScyllaDB's
//! messaging service applies it.
//!
//! With encryption on, a node also listens on `ssl_storage_port` (TLS,
//! the same port on every node) and opens a connection there when the
//! policy asks: `all`: always; `dc`: to a peer of another data center;
//! `rack`: to a peer of another data center or rack. A peer whose place
//! this shard does not know yet (a seed at first contact) gets TLS. The
//! plain `storage_port` is then closed (`all`) or serves only the callers
//! the policy lets talk in clear: for `dc` known members of this data
//! center, for `rack` of this rack too. Certificates are checked against
//! the truststore both ways when the options ask (`require_client_auth`
//! on the listening side; always on the connecting side).

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::OnceLock;

use crate::replication::Placement;

/// `internode_encryption`'s values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InternodeEncryption {
    None,
    All,
    Dc,
    Rack,
}

impl InternodeEncryption {
    pub fn parse(text: &str) -> Option<InternodeEncryption> {
        Some(match text.trim().to_ascii_lowercase().as_str() {
            "none" => InternodeEncryption::None,
            "all" => InternodeEncryption::All,
            "dc" => InternodeEncryption::Dc,
            "rack" => InternodeEncryption::Rack,
            _ => return None,
        })
    }
}

/// This node's internode TLS: the policy, its place, the TLS port and the
/// credentials both ways.
#[derive(Debug, Clone)]
pub struct InternodeTls {
    pub encryption: InternodeEncryption,
    /// Where this node is: what `dc` and `rack` compare peers with.
    pub placement: Placement,
    /// `ssl_storage_port`, on every node.
    pub ssl_port: u16,
    pub acceptor: shoal_tls::Acceptor,
    pub connector: shoal_tls::Connector,
}

static TLS: OnceLock<InternodeTls> = OnceLock::new();

/// Turns internode TLS on; call once at start, before any shard sends or
/// serves (never called: every connection is plain).
pub fn set_internode_tls(tls: InternodeTls) {
    assert!(tls.encryption != InternodeEncryption::None, "encryption none needs no TLS");
    // A second call (several nodes in one test process) keeps the first.
    let _ = TLS.set(tls);
}

pub(crate) fn internode_tls() -> Option<&'static InternodeTls> {
    TLS.get()
}

/// Where a peer (by its storage address) is, when this shard knows.
pub type Locator = Rc<dyn Fn(SocketAddr) -> Option<Placement>>;

thread_local! {
    static LOCATOR: RefCell<Option<Locator>> = const { RefCell::new(None) };
}

/// Tells this shard how to find a peer's data center and rack (the
/// coordinator's topology, which sits above this crate).
pub fn set_locator(locator: Locator) {
    LOCATOR.with(|l| *l.borrow_mut() = Some(locator));
}

fn placement_of(peer: SocketAddr) -> Option<Placement> {
    let locator = LOCATOR.with(|l| l.borrow().clone())?;
    locator(peer)
}

/// Whether the policy lets this node and `peer` talk in clear.
fn clear_allowed(tls: &InternodeTls, peer: SocketAddr) -> bool {
    let same = |peer: &Placement| match tls.encryption {
        InternodeEncryption::None => true,
        InternodeEncryption::All => false,
        InternodeEncryption::Dc => peer.data_center == tls.placement.data_center,
        InternodeEncryption::Rack => *peer == tls.placement,
    };
    match tls.encryption {
        InternodeEncryption::None => true,
        InternodeEncryption::All => false,
        _ => placement_of(peer).is_some_and(|peer| same(&peer)),
    }
}

/// The TLS port and credentials to reach `peer` with, or `None` for its
/// plain storage port.
pub(crate) fn must_encrypt(peer: SocketAddr) -> Option<&'static InternodeTls> {
    internode_tls().filter(|tls| !clear_allowed(tls, peer))
}

/// Whether a caller whose storage address is `caller` may use the plain
/// storage port.
pub(crate) fn plain_allowed(caller: SocketAddr) -> bool {
    internode_tls().is_none_or(|tls| clear_allowed(tls, caller))
}

/// Whether the plain storage port is open at all.
pub fn plain_port_open() -> bool {
    internode_tls().is_none_or(|tls| tls.encryption != InternodeEncryption::All)
}
