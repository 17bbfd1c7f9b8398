//! memcached's protocols over Shoal's data: the text protocol (get, set,
//! cas, incr, ... as memcached 1.6 speaks them) and the meta protocol (mg,
//! ms, md, ma, mn, me), pipelined, on every shard.
//!
//! Items are rows of a CQL table (`memcache.items` unless configured:
//! [`items_table`]), so they are persisted by the commitlog, survive
//! restarts, and are read by CQL. This crate is a front end like `cql`: it
//! reaches data only through the coordinator (`coordinator::run_items`,
//! which sends each shard its keys' operations in one message, and in a
//! cluster each key's leading replica its operations, so any node answers
//! any key), and the semantics of an operation on an item run on the shard
//! that owns it on that replica (`replica::item`), so incr, cas, append are
//! atomic without locks.
//!
//! - [`parse`]: framing and the text commands; [`meta`]: the meta commands;
//!   [`words`]: a line's words, walked where they stand (no allocation per
//!   request).
//!   Every decoder is total: any bytes give a request, an error answered in
//!   memcached's words, "incomplete" or "close" (fuzzed by
//!   `fuzz/fuzz_targets/memcache_parser.rs`).
//! - [`execute`]: a batch of requests to item operations and answers;
//!   `meta_exec`: the meta commands' operations and return codes.
//! - [`auth`]: ASCII authentication, the auth file and the first `set`
//!   (fuzzed: `memcache_auth`).
//! - [`connection`], [`server`]: the socket side, plain or TLS
//!   (`shoal_tls`).

pub mod auth;
mod batch_bytes;
pub mod connection;
pub mod execute;
pub mod items_table;
pub mod meta;
mod meta_exec;
pub mod parse;
mod reply;
pub mod request;
mod scratch;
pub mod server;
pub mod stats;
mod stats_reply;
pub mod words;

/// The memcached version Shoal answers `version` with: the protocol it
/// speaks.
pub const VERSION: &str = "1.6.18";

pub use execute::Config;
pub use parse::Limits;
