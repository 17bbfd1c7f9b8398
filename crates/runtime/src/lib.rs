//! Shards: one pinned OS thread per core, each running its own single-threaded
//! async executor, and the message passing between them.
//!
//! The vocabulary is Seastar's: a *shard* owns its data outright; other shards
//! reach it only with [`submit_to`], which ships a closure to the owner's
//! thread and brings the answer back. Nothing here is shared mutably between
//! threads except the lock-free inbox queues.
//!
//! This crate (with the `io` layer later) is the only place that names the
//! underlying executor (compio, io_uring based); everything above uses the
//! re-exports in [`net`] and [`time`] and the functions here.

pub mod clock;
pub mod controller;
mod cpu_fair;
mod cpus;
mod inbox;
pub mod lowres;
pub mod memory;
pub mod sched;
mod sched_metrics;
mod shard;
mod task;

pub mod net;
pub mod time;

pub use cpu_fair::{Group, GroupStats, Slot, MAX_SHARES, MIN_SHARES, SERVICE_LEVEL_GROUPS_MAX};
pub use cpus::allowed_cpus;
pub use shard::{nr_shards, run_on_a_shard, spawn, start_shards, submit_to, this_shard, ShardError, Shards};
pub use task::yield_now;
