//! The CQL native protocol, version 4, as a pure codec: bytes in, typed
//! messages out, and back. Nothing here does I/O or keeps connection state;
//! the server's socket handling builds on it.
//!
//! - [`wire`]: the spec's primitive notation (`[int]`, `[string]`, `[value]`…);
//! - [`frame`]: frame headers, splitting frames off a byte stream, version
//!   checks, and building response frames in place;
//! - [`compression`]: LZ4 and Snappy frame bodies;
//! - [`request`]: decoding request bodies into [`request::Request`];
//! - [`response`]: encoding response bodies (errors, results, rows, events).
//!
//! - [`connection`] and [`server`]: the socket side — accepting, placing
//!   each connection on its shard, and serving its requests.
//!
//! Every decoder is total: any input gives a value or a typed error, never a
//! panic, and never an allocation sized by a length the input merely claims.
//! A cargo-fuzz target (`fuzz/fuzz_targets/cql_frame.rs`) checks this.

mod authentication;
pub mod compression;
pub mod connection;
pub mod frame;
pub mod metrics;
pub mod request;
mod request_trace;
pub mod response;
pub mod server;
pub mod wire;

pub use frame::Opcode;
