//! The memcached listener: connections placed on the shards in turn, like
//! CQL's regular port, by `runtime::net`'s generic listener.

use std::sync::Arc;

use shoal_runtime::net::{Placement, TcpListener};

use crate::execute::Config;

/// Accepts memcached connections forever, placing each on a shard.
pub async fn serve(listener: TcpListener, config: Arc<Config>) {
    crate::stats_reply::mark_start();
    shoal_runtime::net::serve(listener, Placement::RoundRobin, move |stream| {
        crate::connection::run(stream, Arc::clone(&config))
    })
    .await
}
