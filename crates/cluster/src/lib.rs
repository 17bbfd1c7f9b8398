//! The cluster layer: how nodes talk and know of each other (ScyllaDB's
//! `message/` and `gms/`).
//!
//! - [`frame`]: internode frames (length, checksum, kind, verb, id);
//!   [`hello`]: the handshake that opens a connection; [`verb`]: the
//!   messages and their timeouts. Every decoder is total and fuzzed
//!   (`fuzz/fuzz_targets/internode_frame.rs`).
//! - [`messaging`]: shard-to-shard connections, requests and their
//!   answers, the storage ports' listeners; `outbox`: a connection's
//!   frames on their way out, batched into one write per reactor turn;
//!   `requests`: the requests waiting for their answers, in slots (no
//!   channel) timed out by one sweep per shard (no timer each); [`encryption`]: which of
//!   those connections speak TLS (`internode_encryption`).
//! - [`failure_detector`]: direct pings from shard 0 to every known peer;
//!   liveness changes routing, never membership.
//! - [`ring`]: tokens and their owners (vnodes); [`token_allocation`]: a
//!   joiner's tokens, chosen so that what each node replicates is even;
//!   [`replication`]: SimpleStrategy, NetworkTopologyStrategy with
//!   racks, Local, Everywhere, behind one [`replication::ReplicaMap`].
//!
//! - [`group0`]: the Raft group of all nodes on shard 0 (raft-rs, its
//!   messages in [`raft_codec`], its log in [`raft_store`]): bootstrap,
//!   a joiner's admission, membership and schema changes agreed in log
//!   order; [`group0_driver`]: the one owner of the raft-rs node, its
//!   clock, network and disk the caller's (so the simulation runs it);
//!   `group0_membership`: membership as a pure state machine, entries in
//!   and effects out; `group0_join`: the joiner's side, asking the seeds;
//!   [`group0_entry`]: what its log holds; [`group0_snapshot`]:
//!   what its snapshots hold, so the log before them can be dropped.
//!
//! The coordinator's use of replicas builds on these (docs/design.md §8).

pub mod encryption;
pub mod failure_detector;
pub mod frame;
pub mod group0;
pub mod group0_driver;
pub mod group0_entry;
mod group0_join;
mod group0_membership;
pub mod group0_snapshot;
pub mod hello;
pub mod messaging;
mod outbox;
pub mod raft_codec;
pub mod raft_store;
pub mod replication;
mod requests;
pub mod ring;
pub mod token_allocation;
pub mod verb;
mod wire;

/// Registers this crate's own handlers on the calling shard; call on
/// every shard at start.
pub fn start_shard() {
    failure_detector::register_ping();
}
