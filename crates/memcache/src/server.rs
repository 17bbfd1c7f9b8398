//! The memcached listener: connections placed on the shards in turn, like
//! CQL's regular port, by `runtime::net`'s generic listener; before it
//! accepts, the items table gets its bound (`memcache_max_size`).

use std::sync::Arc;

use shoal_runtime::net::{Placement, TcpListener};

use crate::execute::{max_size, Config};
use crate::items_table::ItemsTable;

/// Bounds the items table at `memcache_max_size`, then accepts memcached
/// connections forever, placing each on a shard.
pub async fn serve(listener: TcpListener, config: Arc<Config>) {
    crate::stats_reply::mark_start();
    let table = ItemsTable::new(&config.keyspace, &config.table).get(&shoal_coordinator::schema());
    let tracked = match table {
        Ok(table) => {
            shoal_coordinator::track_items(table, max_size(config.max_size_bytes)).await.map_err(|e| e.to_string())
        }
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = tracked {
        tracing::warn!("memcached items will not be evicted: {e}");
    }
    shoal_runtime::net::serve(listener, Placement::RoundRobin, move |stream| {
        crate::connection::run(stream, Arc::clone(&config))
    })
    .await
}
