//! TLS for every port of a node, with rustls (no OpenSSL): CQL's native
//! transport, memcached, and connections between nodes.
//!
//! - [`credentials`]: PEM files (certificate chain, key, truststore) to
//!   rustls configurations, read off the shards.
//! - [`reload`]: those configurations (and any other value built from
//!   files, such as memcached's password table) swapped in when their
//!   files change, by a thread of their own; shards load the current one
//!   at each connection's start without a lock.
//! - [`session`]: one TLS session as a pure state machine, bytes in and
//!   bytes out, total on any input (fuzzed: `tls_records`).
//! - [`socket`]: a connection's socket, plain or TLS, over the shard's TCP
//!   stream: handshake within a timeout, reads, writes, split halves, and
//!   the hand-off of a connection, session and all, to another shard.
//!
//! Why not `compio-tls`: its rustls flavour runs `futures-rustls` through
//! a compatibility stream with buffers of its own, zero-fills every read
//! buffer it is handed, and hides the session; wrapping rustls's
//! connection here costs about as many lines, keeps one ciphertext buffer
//! per connection half, gives the handshake timeout and the hand-off
//! between shards, and leaves a session the fuzzer can drive without a
//! socket.

pub mod credentials;
pub mod reload;
pub mod session;
pub mod socket;
#[cfg(test)]
mod test_certificates;

pub use credentials::{ClientAuth, TlsFiles};
pub use reload::{Reloadable, Watcher};
pub use socket::{accept, Acceptor, Connector, DetachedSocket, Socket};

/// Why a TLS configuration or connection failed.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read { path: std::path::PathBuf, source: std::io::Error },
    #[error("{path}: {message}")]
    Pem { path: std::path::PathBuf, message: String },
    #[error("{0}")]
    Config(String),
    #[error("TLS: {0}")]
    Protocol(rustls::Error),
    #[error(transparent)]
    Io(std::io::Error),
    #[error("no TLS handshake within {0} ms")]
    HandshakeTimeout(u128),
    #[error("the connection closed during the TLS handshake")]
    ClosedInHandshake,
    #[error("a split TLS socket cannot move to another shard")]
    Split,
}

impl From<TlsError> for std::io::Error {
    fn from(error: TlsError) -> std::io::Error {
        match error {
            TlsError::Io(e) => e,
            other => std::io::Error::new(std::io::ErrorKind::InvalidData, other),
        }
    }
}
