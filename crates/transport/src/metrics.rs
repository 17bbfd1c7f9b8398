//! The native transport's metrics on this shard.

use std::cell::Cell;
use std::rc::Rc;

use shoal_metrics::Gauge;

thread_local! {
    static CONNECTIONS: Rc<Gauge> =
        shoal_metrics::gauge("shoal_cql_connections", "Open CQL client connections.", &[]);
    static IN_FLIGHT: Rc<Gauge> = shoal_metrics::gauge(
        "shoal_cql_requests_in_flight",
        "CQL requests read and not yet answered on the wire.",
        &[],
    );
}

/// Registers the metrics on the calling shard, so they read 0 before the
/// first connection rather than being absent.
pub fn register_metrics() {
    CONNECTIONS.with(|_| ());
    IN_FLIGHT.with(|_| ());
}

/// CQL requests this shard read and has not yet written the answer of: a
/// node about to stop waits for none (a decommissioned node's drain).
pub fn requests_in_flight() -> i64 {
    IN_FLIGHT.with(|g| g.get())
}

/// A connection's requests read and not yet answered on the wire, counted
/// in the shard's gauge too; what is left when the connection is gone
/// (answers it could not write) leaves the gauge with it.
#[derive(Default)]
pub(crate) struct InFlight(Cell<usize>);

impl InFlight {
    pub(crate) fn get(&self) -> usize {
        self.0.get()
    }

    pub(crate) fn read_one(&self) {
        self.0.set(self.0.get() + 1);
        IN_FLIGHT.with(|g| g.add(1));
    }

    pub(crate) fn answered(&self, requests: usize) {
        self.0.set(self.0.get() - requests);
        IN_FLIGHT.with(|g| g.add(-(requests as i64)));
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        IN_FLIGHT.with(|g| g.add(-(self.0.get() as i64)));
    }
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
