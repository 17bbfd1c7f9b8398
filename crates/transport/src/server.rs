//! The CQL listeners: the regular port places connections on the shards in
//! turn, the shard-aware port by the client's source port (how ScyllaDB's
//! drivers open one connection per shard and then send each request to
//! the shard owning its token). Accepting and placing is `runtime::net`'s,
//! shared with every protocol; this module only names the CQL connection.
//! A listener with an acceptor speaks TLS (`client_encryption_options`):
//! every connection's handshake runs on the shard it was placed on.

use std::sync::Arc;

use shoal_runtime::net::TcpListener;
pub use shoal_runtime::net::{bind, Placement};

use crate::connection::{self, ServerConfig};

/// Accepts CQL connections forever, placing each on its shard.
pub async fn serve(
    listener: TcpListener,
    placement: Placement,
    config: Arc<ServerConfig>,
    tls: Option<shoal_tls::Acceptor>,
) {
    shoal_runtime::net::serve(listener, placement, move |stream| {
        connection::run(stream, Arc::clone(&config), tls.clone())
    })
    .await
}
