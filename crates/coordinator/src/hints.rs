//! Hinted handoff: a write a replica missed (it was down, or did not
//! answer) is kept by the coordinating shard as a hint and sent to the
//! replica once it is up again, in the order written.
//!
//! Hints are kept in memory, per shard and per target, at most
//! [`HINTS_BYTES_MAX`] per shard: past that, or once a target's oldest
//! hint is older than `max_hint_window_in_ms` (3 h, ScyllaDB's default:
//! the target has been down that long; 0 keeps none), new hints for it
//! are dropped and counted — repair must bring such a replica back. A
//! coordinator that restarts loses its hints (not yet written to disk).
//!
//! [`replay`] runs on every shard: every [`REPLAY_INTERVAL`] it sends each
//! live target its hints, oldest first, stopping at the first that fails.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use shoal_metrics::Counter;
use uuid::Uuid;

use crate::topology::{topology, Topology};
use crate::verbs::Target;

/// Hint bytes a shard keeps, all targets together.
pub const HINTS_BYTES_MAX: usize = 64 << 20;
static HINT_WINDOW: OnceLock<Duration> = OnceLock::new();

/// Sets `max_hint_window_in_ms`; call once at start (3 h without it).
pub fn set_hint_window(window: Duration) {
    // A second call (several nodes in one test process) keeps the first.
    let _ = HINT_WINDOW.set(window);
}

fn hint_window() -> Duration {
    HINT_WINDOW.get().copied().unwrap_or(Duration::from_secs(3 * 3600))
}
/// How often live targets are sent their hints.
const REPLAY_INTERVAL: Duration = Duration::from_secs(1);

struct Hint {
    written: Instant,
    token: i64,
    /// The mutation, encoded (`wire`).
    payload: Rc<[u8]>,
}

#[derive(Default)]
struct Hints {
    by_target: HashMap<Uuid, VecDeque<Hint>>,
    bytes: usize,
}

thread_local! {
    static HINTS: RefCell<Hints> = RefCell::default();
    static STORED: Rc<Counter> = shoal_metrics::counter(
        "shoal_hints_stored_total", "Writes kept as hints for a replica that missed them.", &[]);
    static REPLAYED: Rc<Counter> = shoal_metrics::counter(
        "shoal_hints_replayed_total", "Hints delivered to their replica.", &[]);
    static DROPPED: Rc<Counter> = shoal_metrics::counter(
        "shoal_hints_dropped_total",
        "Hints not kept: the shard's hint memory was full, or the replica was down past the hint window.",
        &[],
    );
}

pub(crate) fn register_metrics() {
    STORED.with(|_| ());
    REPLAYED.with(|_| ());
    DROPPED.with(|_| ());
}

/// Keeps a hint of `payload` (a mutation of `token`) for `target`;
/// whether it was kept.
pub(crate) fn store(target: Uuid, token: i64, payload: Rc<[u8]>) -> bool {
    let kept = HINTS.with(|hints| {
        let mut hints = hints.borrow_mut();
        let window = hint_window();
        let expired = window.is_zero()
            || hints
                .by_target
                .get(&target)
                .and_then(|queue| queue.front())
                .is_some_and(|o| o.written.elapsed() > window);
        if expired || hints.bytes + payload.len() > HINTS_BYTES_MAX {
            return false;
        }
        hints.bytes += payload.len();
        let hint = Hint { written: Instant::now(), token, payload };
        hints.by_target.entry(target).or_default().push_back(hint);
        true
    });
    match kept {
        true => STORED.with(|c| c.inc()),
        false => DROPPED.with(|c| c.inc()),
    }
    kept
}

/// Sends live targets their hints, forever; runs on every shard.
pub async fn replay() {
    let mut ticks = shoal_runtime::time::interval(REPLAY_INTERVAL);
    loop {
        ticks.tick().await;
        let topology = topology();
        forget_departed(&topology);
        let targets: Vec<Uuid> =
            HINTS.with(|h| h.borrow().by_target.keys().copied().filter(|t| topology.is_up(*t)).collect());
        for host in targets {
            deliver(&Target { topology: &topology, host }).await;
        }
    }
}

/// Drops the hints of nodes that left the cluster: their ranges have
/// other replicas now, which the leaving streamed to.
fn forget_departed(topology: &Topology) {
    HINTS.with(|h| {
        let mut hints = h.borrow_mut();
        let departed: Vec<Uuid> = hints.by_target.keys().copied().filter(|t| topology.endpoint(*t).is_none()).collect();
        for host in departed {
            let queue = hints.by_target.remove(&host).unwrap_or_default();
            hints.bytes -= queue.iter().map(|hint| hint.payload.len()).sum::<usize>();
            DROPPED.with(|c| c.add(queue.len() as u64));
        }
    });
}

/// Sends `target` its hints in order until one fails.
async fn deliver(target: &Target<'_>) {
    loop {
        let next = HINTS.with(|h| {
            h.borrow()
                .by_target
                .get(&target.host)
                .and_then(|q| q.front())
                .map(|hint| (hint.token, hint.payload.clone()))
        });
        let Some((token, payload)) = next else { return };
        if let Err(e) = target.send_mutation(token, &payload).await {
            tracing::debug!("hint replay to {}: {e}", target.host);
            return;
        }
        REPLAYED.with(|c| c.inc());
        HINTS.with(|h| {
            let mut hints = h.borrow_mut();
            let queue = hints.by_target.get_mut(&target.host);
            // Only this task removes hints, so the front is still the one sent.
            let sent = queue.and_then(|q| q.pop_front()).map_or(0, |hint| hint.payload.len());
            hints.bytes -= sent;
            if hints.by_target.get(&target.host).is_some_and(VecDeque::is_empty) {
                hints.by_target.remove(&target.host);
            }
        });
    }
}
