//! The coordinator: the one door through which front ends (CQL, memcached)
//! reach data. Given a request, it decides which shards (later: which
//! replicas on which nodes, at which consistency level) serve it, sends it
//! there by message, waits at most the request's timeout, and combines the
//! answers. It owns everything that decides where and how a request runs:
//! consistency levels, timeouts, write timestamps' clock (`runtime::clock`),
//! the schema service (one writer, persisted, installed on every shard),
//! this node's identity and replication rules ([`cluster`]) — as ScyllaDB's `service/` does for its CQL and
//! Redis front ends alike.
//!
//! Its modules form layers, each naming only modules beneath it
//! (`crates/shoal/tests/module_cycles.rs` fails on a cycle), bottom up:
//! the foundation (`topology`, `identity`, `shards`, `schema`, `wire`,
//! `consistency`, `timeouts`, ...); the local halves of the data verbs
//! (`local`, `held_batches`); the client of a replica (`target::Target`,
//! this node or another); the executors (`write_handler`, `forwarding`,
//! `read_executor`, `counter_write`, `paxos`, `hints`, `batchlog`,
//! `streaming`, `repair`, `views`, `node_ops`, `cleanup`, `items`); the
//! proxy; and the registration of other nodes' requests (`handlers`).
//!
//! Invariants:
//! - a partition lives on exactly one shard, chosen by ScyllaDB's sharding
//!   of its token ([`shard_of`]);
//! - every shard sees the same sequence of schema snapshots ([`schema`]);
//! - front ends name the data only through [`data`]: they never depend on
//!   `replica` or `storage` (a test in `shoal` checks the crate graph).

mod batchlog;
pub mod cleanup;
pub mod cluster;
mod consistency;
mod counter_write;
pub mod data;
mod error;
mod forwarding;
mod handlers;
mod held_batches;
mod hints;
mod identity;
mod items;
mod local;
mod metrics;
pub mod node_ops;
mod paxos;
mod proxy;
mod read_executor;
pub mod repair;
mod schema;
pub mod schema_entry;
mod schema_service;
mod shards;
mod side_log;
mod size_estimates;
mod storage_ops;
mod streaming;
mod target;
mod timeouts;
mod topology;
mod views;
pub mod wire;
mod write_handler;

pub use batchlog::mutate_logged;
pub use consistency::{ConsistencyLevel, ItemLevels};
pub use error::{CoordinatorError, WriteType};
pub use forwarding::set_cross_dc_forwarding;
pub use held_batches::{decode_batch, open as open_batchlog};
pub use hints::{decode_hint_entry, encode_hint_entry, open as open_hints, set_hint_window, HintEntry};
pub use items::{item_position, items_stats, run_items, track_items, ItemResult};
pub use proxy::{cas, mutate, read, truncate};
pub use schema::{schema, set_schema_everywhere, subscribe_schema_changes, unsubscribe_schema_changes, SchemaListener};
pub use schema_service::{
    announce_schema_change, announce_schema_change_everywhere, schema_applier, set_schema_file, Transition,
};
pub use shards::{on_every_shard, shard_of, sharder, SHARDING_IGNORE_MSB};
pub use size_estimates::{runtime_stats, size_estimates, SizeEstimate};
pub use storage_ops::{storage_op, StorageOp};
pub use timeouts::{set_timeouts, timeouts, Timeouts};
pub use topology::{
    maintain as maintain_topology, subscribe_topology_changes, unsubscribe_topology_changes, Peer, TopologyEvent,
    TopologyListener,
};
pub use views::{is_building as view_is_building, resume_builds as resume_view_builds};

/// Registers the coordinator's handlers of other nodes' requests on the
/// calling shard, the delivery of index view updates and the building of
/// new indexes, and starts its hint and batchlog replays there; call on
/// every shard at start, once the starting schema is installed.
pub fn start_shard() {
    handlers::register();
    views::install();
    // `internode_encryption: dc | rack` asks where a peer is.
    shoal_cluster::encryption::set_locator(std::rc::Rc::new(|peer| topology::topology().placement_at(peer)));
    shoal_runtime::spawn(hints::replay());
    shoal_runtime::spawn(batchlog::replay());
}

/// Registers the coordinator's metrics on the calling shard, so they read
/// 0 before the first request rather than being absent.
pub fn register_metrics() {
    metrics::register_metrics();
    hints::register_metrics();
}
