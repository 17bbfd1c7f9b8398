//! Failure detection by direct pings, as ScyllaDB's direct failure
//! detector does it: shard 0 pings shard 0 of every known peer every
//! [`PING_INTERVAL`]. A peer is up from its first answer and down once no
//! answer came for the failure detector's timeout
//! (`failure_detector_timeout_in_ms`). Liveness changes where requests go,
//! never who is a member.
//!
//! The peers are the seeds, and every member group 0 adds ([`watch`]). The
//! state lives on shard 0, the only shard that pings; [`statuses`] reads it
//! there. At most one ping per peer is outstanding.
//!
//! A node that stops cleanly tells its peers first ([`announce_shutdown`],
//! the `Shutdown` verb, ScyllaDB's gossip shutdown): each marks it down at
//! once, ignores answers to pings sent before the notice, and from then on
//! the stopping node refuses pings, so it stays down until a new process
//! answers one.
//!
//! A ping's answer carries the node's load (`[u64 bytes]`, set with
//! [`set_load_bytes`]; empty before it is known), as ScyllaDB's gossip
//! does, for `nodetool status`.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::FutureExt;
use uuid::Uuid;

use crate::messaging;
use crate::verb::Verb;

/// How often each peer is pinged.
pub const PING_INTERVAL: Duration = Duration::from_millis(500);

/// What this node knows of a peer's liveness.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerStatus {
    /// The peer's storage port.
    pub address: SocketAddr,
    pub up: bool,
    /// From its handshake, once it answered.
    pub host_id: Option<Uuid>,
    pub shard_count: Option<u16>,
    /// Its load, from its last answer, once it told it.
    pub load_bytes: Option<u64>,
}

struct Peer {
    status: PeerStatus,
    last_answer: Option<Instant>,
    probing: bool,
    /// When it said it was going down: answers to pings sent before then
    /// do not bring it back up.
    shut_down_at: Option<Instant>,
}

#[derive(Default)]
struct Detector {
    peers: Vec<Peer>,
}

thread_local! {
    static DETECTOR: RefCell<Detector> = RefCell::default();
    /// This node's load, on the shard that answers pings (shard 0).
    static LOAD_BYTES: Cell<Option<u64>> = const { Cell::new(None) };
    /// This node told its peers it is going down: pings are refused.
    static GOING_DOWN: Cell<bool> = const { Cell::new(false) };
}

/// Answers pings with this node's load, and peers' shutdown notices;
/// registered on every shard.
pub(crate) fn register_ping() {
    messaging::register(
        Verb::Ping,
        Rc::new(|_, _| {
            let answer = if GOING_DOWN.with(Cell::get) {
                Err("this node is shutting down".to_string())
            } else {
                let load = LOAD_BYTES.with(Cell::get);
                Ok(load.map_or_else(Bytes::new, |b| Bytes::copy_from_slice(&b.to_be_bytes())))
            };
            std::future::ready(answer).boxed_local()
        }),
    );
    messaging::register(
        Verb::Shutdown,
        Rc::new(|caller, _| {
            mark_shut_down(caller.address);
            std::future::ready(Ok(Bytes::new())).boxed_local()
        }),
    );
}

/// Tells every peer that is up that this node is going down, and refuses
/// pings from now on; answers once each has answered or timed out (the
/// verb's 2 s). Returns how many acknowledged. Call on the shard that runs
/// [`run`].
pub async fn announce_shutdown() -> usize {
    GOING_DOWN.with(|going| going.set(true));
    let up: Vec<SocketAddr> =
        DETECTOR.with(|d| d.borrow().peers.iter().filter(|p| p.status.up).map(|p| p.status.address).collect());
    let told = up.into_iter().map(|address| async move {
        let answer = messaging::request(address, 0, Verb::Shutdown, &[]).await;
        if let Err(e) = &answer {
            tracing::warn!("could not tell {address} that this node is going down: {e}");
        }
        answer.is_ok()
    });
    futures_util::future::join_all(told).await.into_iter().filter(|told| *told).count()
}

/// A peer said it is going down: down now, until a ping sent after this
/// is answered (by its next process).
fn mark_shut_down(address: SocketAddr) {
    DETECTOR.with(|d| {
        let mut d = d.borrow_mut();
        let Some(peer) = d.peers.iter_mut().find(|p| p.status.address == address) else { return };
        peer.shut_down_at = Some(Instant::now());
        if peer.status.up {
            peer.status.up = false;
            tracing::info!("node {address} is DOWN: it is shutting down");
        }
    });
}

/// Sets the load this node's ping answers carry; call on shard 0.
pub fn set_load_bytes(bytes: u64) {
    LOAD_BYTES.with(|load| load.set(Some(bytes)));
}

/// Pings `peers` from this shard forever, marking each up or down.
pub async fn run(peers: Vec<SocketAddr>, timeout: Duration) {
    peers.into_iter().for_each(watch);
    let mut ticks = shoal_runtime::time::interval(PING_INTERVAL);
    loop {
        ticks.tick().await;
        let now = Instant::now();
        let to_probe: Vec<SocketAddr> = DETECTOR.with(|d| {
            let mut d = d.borrow_mut();
            for peer in d.peers.iter_mut().filter(|p| p.status.up) {
                let silent = peer.last_answer.is_none_or(|at| now.duration_since(at) > timeout);
                if silent {
                    peer.status.up = false;
                    tracing::warn!("node {} is DOWN: no answer for {} ms", peer.status.address, timeout.as_millis());
                }
            }
            d.peers
                .iter_mut()
                .filter(|p| !p.probing)
                .map(|p| {
                    p.probing = true;
                    p.status.address
                })
                .collect()
        });
        for address in to_probe {
            shoal_runtime::spawn(probe(address));
        }
    }
}

async fn probe(address: SocketAddr) {
    let sent_at = Instant::now();
    let answered = messaging::request(address, 0, Verb::Ping, &[]).await;
    if let Err(e) = &answered {
        tracing::debug!("ping of {address}: {e}");
    }
    let welcome = messaging::welcome_of(address, 0);
    DETECTOR.with(|d| {
        let mut d = d.borrow_mut();
        let Some(peer) = d.peers.iter_mut().find(|p| p.status.address == address) else { return };
        peer.probing = false;
        if answered.is_err() || peer.shut_down_at.is_some_and(|at| at >= sent_at) {
            return;
        }
        peer.shut_down_at = None;
        peer.last_answer = Some(Instant::now());
        if let Ok(Ok(load)) = answered.as_deref().map(<[u8; 8]>::try_from) {
            peer.status.load_bytes = Some(u64::from_be_bytes(load));
        }
        if let Some(welcome) = welcome {
            peer.status.host_id = Some(welcome.host_id);
            peer.status.shard_count = Some(welcome.shard_count);
        }
        if !peer.status.up {
            peer.status.up = true;
            tracing::info!(
                "node {address} is UP (host id {}, {} shard(s))",
                peer.status.host_id.map_or_else(|| "unknown".to_string(), |h| h.to_string()),
                peer.status.shard_count.unwrap_or(0)
            );
        }
    });
}

/// Pings `address` too from now on (no-op if it already is); call on the
/// shard that runs [`run`].
pub fn watch(address: SocketAddr) {
    DETECTOR.with(|d| {
        let mut d = d.borrow_mut();
        if d.peers.iter().all(|p| p.status.address != address) {
            d.peers.push(Peer {
                status: PeerStatus { address, up: false, host_id: None, shard_count: None, load_bytes: None },
                last_answer: None,
                probing: false,
                shut_down_at: None,
            });
        }
    });
}

/// Stops pinging `address` (a member that left); call on the shard that
/// runs [`run`].
pub fn unwatch(address: SocketAddr) {
    DETECTOR.with(|d| d.borrow_mut().peers.retain(|p| p.status.address != address));
}

/// Every known peer's liveness; call on the shard that runs [`run`].
pub fn statuses() -> Vec<PeerStatus> {
    DETECTOR.with(|d| d.borrow().peers.iter().map(|p| p.status.clone()).collect())
}
