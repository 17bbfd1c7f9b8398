//! The native transport's metrics on this shard.

use std::rc::Rc;

use shoal_metrics::Gauge;

thread_local! {
    static CONNECTIONS: Rc<Gauge> =
        shoal_metrics::gauge("shoal_cql_connections", "Open CQL client connections.", &[]);
}

/// Registers the metrics on the calling shard, so they read 0 before the
/// first connection rather than being absent.
pub fn register_metrics() {
    CONNECTIONS.with(|_| ());
}

/// Counts a connection as open for as long as it lives.
pub(crate) struct OpenConnection(());

impl OpenConnection {
    pub(crate) fn new() -> OpenConnection {
        CONNECTIONS.with(|c| c.add(1));
        OpenConnection(())
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        CONNECTIONS.with(|c| c.add(-1));
    }
}
