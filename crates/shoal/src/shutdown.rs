//! Stopping a node cleanly: `nodetool drain`, SIGTERM and SIGINT
//! (ScyllaDB's drain and its signal handling).
//!
//! Draining, on shard 0, in order:
//! 1. tell the other nodes this node is going down
//!    (`failure_detector::announce_shutdown`): they mark it down at once,
//!    their coordinators stop sending it requests and the drivers connected
//!    to them hear `STATUS_CHANGE DOWN`; pings are refused from now on;
//! 2. stop accepting client connections (CQL, memcached) on every shard;
//! 3. keep serving the open ones for `shutdown_announce_in_ms` (Cassandra's
//!    and ScyllaDB's name, 2 s by default), so that requests drivers sent
//!    before they heard of it are answered rather than cut off;
//! 4. stop reading client connections: each answers what it read, then
//!    closes; wait for that, at most [`REQUESTS_WAIT_MAX`];
//! 5. on every shard, close the commitlog, flush every memtable and delete
//!    the commitlog's segments (`replica::Database::drain`): the next start
//!    replays nothing.
//!
//! A drained node keeps running (its HTTP API and internode messaging
//! answer) until it is stopped, as in ScyllaDB; a drain asked for again, or
//! while one runs, waits for that one. The internode port stays open to
//! the end: a peer's request already sent is answered.
//!
//! Signals are caught by a thread of their own (`signal-hook`'s self-pipe,
//! so nothing runs in a signal handler), which sends each to shard 0 by
//! channel: no shard's reactor waits on a signal. The first SIGTERM or
//! SIGINT drains, logs, and exits with status 0; a second one exits at
//! once with status 1.

use std::cell::{Cell, RefCell};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use futures_channel::mpsc;
use futures_util::future::{FutureExt, LocalBoxFuture, Shared};
use futures_util::StreamExt;
use shoal_coordinator::on_every_shard;
use signal_hook::consts::{SIGINT, SIGTERM};

/// The longest a drain waits for open client connections to answer what
/// they read and close.
pub const REQUESTS_WAIT_MAX: Duration = Duration::from_secs(10);

/// How often the drain looks whether client connections are done.
const CLIENTS_POLL: Duration = Duration::from_millis(20);

/// How long a stopping node keeps serving its open connections after it
/// told its peers (`shutdown_announce_in_ms`); set at start.
static ANNOUNCE_GRACE: OnceLock<Duration> = OnceLock::new();

pub fn set_announce_grace(grace: Duration) {
    // A second call (tests) keeps the first.
    let _ = ANNOUNCE_GRACE.set(grace);
}

/// Where the node stands, as `GET /storage_service/operation_mode`
/// answers it (ScyllaDB's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Normal,
    Draining,
    Drained,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Normal => "NORMAL",
            Mode::Draining => "DRAINING",
            Mode::Drained => "DRAINED",
        }
    }
}

/// What a drain did, for its log line and nodetool.
#[derive(Debug, Clone)]
pub struct Drained {
    pub peers_told: usize,
    pub connections_closed: usize,
    /// Client connections and CQL requests still busy at
    /// [`REQUESTS_WAIT_MAX`], cut off.
    pub busy_left: usize,
    pub tables_flushed: usize,
    pub took: Duration,
}

type Draining = Shared<LocalBoxFuture<'static, Result<Drained, String>>>;

thread_local! {
    /// On shard 0: the drain, once one started.
    static DRAIN: RefCell<Option<Draining>> = const { RefCell::new(None) };
    static MODE: Cell<Mode> = const { Cell::new(Mode::Normal) };
}

/// This node's mode; call on shard 0.
pub fn mode() -> Mode {
    MODE.with(Cell::get)
}

/// Drains this node (see the module's doc), or waits for the drain already
/// started; call on shard 0.
pub async fn drain() -> Result<Drained, String> {
    let draining = DRAIN.with(|d| d.borrow_mut().get_or_insert_with(|| run_drain().boxed_local().shared()).clone());
    draining.await
}

async fn run_drain() -> Result<Drained, String> {
    let started = Instant::now();
    MODE.with(|m| m.set(Mode::Draining));
    let grace = ANNOUNCE_GRACE.get().copied().unwrap_or_default();
    tracing::info!("draining: telling the other nodes that this node is going down");
    let peers_told = shoal_cluster::failure_detector::announce_shutdown().await;
    on_every_shard(|_| async { shoal_runtime::net::stop_accepting() }).await.map_err(|e| e.to_string())?;
    tracing::info!(
        "drain: {peers_told} node(s) told; client connections refused from now on; serving the open ones {} ms more",
        grace.as_millis()
    );
    shoal_runtime::time::sleep(grace).await;
    let stopped = on_every_shard(|_| async { shoal_runtime::net::stop_reading() }).await.map_err(|e| e.to_string())?;
    let connections_closed = stopped.iter().sum();
    let busy_left = wait_for_clients(REQUESTS_WAIT_MAX).await;
    if busy_left > 0 {
        tracing::warn!(
            "drain: {busy_left} client connection(s) or request(s) still busy after {} s; cutting them off",
            REQUESTS_WAIT_MAX.as_secs()
        );
    }
    let flushed = on_every_shard(|_| async { shoal_replica::local().drain().await.map_err(|e| e.to_string()) })
        .await
        .map_err(|e| e.to_string())?;
    let tables_flushed = flushed.into_iter().collect::<Result<Vec<_>, _>>()?.into_iter().sum();
    MODE.with(|m| m.set(Mode::Drained));
    let drained = Drained { peers_told, connections_closed, busy_left, tables_flushed, took: started.elapsed() };
    tracing::info!(
        "drained in {} ms: {} client connection(s) closed, {} table(s) flushed on every shard, commitlog clean",
        drained.took.as_millis(),
        drained.connections_closed,
        drained.tables_flushed
    );
    Ok(drained)
}

/// Waits until every shard's client connections closed and no CQL request
/// is in flight, at most `limit`; returns the connections and requests
/// still busy then.
async fn wait_for_clients(limit: Duration) -> usize {
    let give_up = Instant::now() + limit;
    loop {
        let busy = on_every_shard(|_| async {
            let requests = usize::try_from(shoal_transport::metrics::requests_in_flight()).unwrap_or(0);
            (shoal_runtime::net::client_connections(), requests)
        })
        .await
        .unwrap_or_default();
        let (connections, requests) = busy.iter().fold((0, 0), |(c, r), (dc, dr)| (c + dc, r + dr));
        if (connections == 0 && requests == 0) || Instant::now() >= give_up {
            return connections + requests;
        }
        shoal_runtime::time::sleep(CLIENTS_POLL).await;
    }
}

/// Drains, then ends the process (this never returns): status 0 when the
/// drain finished, 1 when it failed (the next start then replays the
/// commitlog). Call on shard 0.
pub async fn stop(why: &str) {
    let started = Instant::now();
    tracing::info!("stopping ({why})");
    match drain().await {
        Ok(_) => {
            tracing::info!("stopped cleanly in {} ms ({why})", started.elapsed().as_millis());
            std::process::exit(0);
        }
        Err(e) => {
            tracing::error!("stopping ({why}): the drain failed, the next start replays the commitlog: {e}");
            std::process::exit(1);
        }
    }
}

/// SIGTERM and SIGINT as they arrive, on shard 0.
pub struct Signals(mpsc::UnboundedReceiver<i32>);

/// Catches SIGTERM and SIGINT from now on, on a thread of its own; call
/// before the shards start, and hand the result to [`on_signals`].
pub fn catch_signals() -> Result<Signals, String> {
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT])
        .map_err(|e| format!("cannot catch SIGTERM and SIGINT: {e}"))?;
    let (tx, rx) = mpsc::unbounded();
    std::thread::Builder::new()
        .name("signals".to_string())
        .spawn(move || {
            for signal in signals.forever() {
                if tx.unbounded_send(signal).is_err() {
                    return;
                }
            }
        })
        .map_err(|e| format!("cannot start the signal thread: {e}"))?;
    Ok(Signals(rx))
}

/// Holds the signals until shard 0 takes them (`start_shards` wants a
/// shareable start-up closure).
pub struct SignalsSlot(Mutex<Option<Signals>>);

impl SignalsSlot {
    pub fn new(signals: Signals) -> SignalsSlot {
        SignalsSlot(Mutex::new(Some(signals)))
    }

    /// The signals, to the first caller.
    pub fn take(&self) -> Option<Signals> {
        self.0.lock().ok().and_then(|mut slot| slot.take())
    }
}

/// Stops the node at the first signal (see the module's doc); at a second,
/// exits at once. Runs on shard 0.
pub async fn on_signals(Signals(mut signals): Signals) {
    let Some(first) = signals.next().await else { return };
    shoal_runtime::spawn(async move {
        if let Some(second) = signals.next().await {
            tracing::warn!("{} again: exiting without finishing the drain", signal_name(second));
            std::process::exit(1);
        }
    });
    stop(&format!("{} received", signal_name(first))).await;
}

fn signal_name(signal: i32) -> &'static str {
    signal_hook::low_level::signal_name(signal).unwrap_or("a signal")
}
