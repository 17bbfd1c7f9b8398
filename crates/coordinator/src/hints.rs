//! Hinted handoff: a write a replica missed (it was down, or did not
//! answer) is kept by the coordinating shard as a hint and sent to the
//! replica once it is up again, in the order written.
//!
//! Hints are kept in memory, per shard and per target, at most
//! [`HINTS_BYTES_MAX`] per shard: past that, or once a target's oldest
//! hint is older than `max_hint_window_in_ms` (3 h, ScyllaDB's default:
//! the target has been down that long; 0 keeps none), new hints for it
//! are dropped and counted — repair must bring such a replica back. Each
//! kept hint is also appended to the shard's hint log (a
//! [`crate::side_log`] in `hints_directory`, synced every 10 s), read back
//! when the node starts ([`open`]); its segments go once their hints are
//! delivered or dropped. An entry is `[16 target host id][i64 token][i64
//! written, ms since the epoch][the mutation, as sent]` (fuzzed:
//! `fuzz/fuzz_targets/data_messages.rs`).
//!
//! [`replay`] runs on every shard: every [`REPLAY_INTERVAL`] it sends each
//! live target its hints, oldest first, stopping at the first that fails.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::rc::Rc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bytes::Bytes;
use shoal_metrics::Counter;
use shoal_storage::codec::{DecodeError, Decoder};
use shoal_storage::commitlog::Position;
use uuid::Uuid;

use crate::side_log::{self, SideLog};
use crate::target::Target;
use crate::topology::{topology, Topology};

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
    payload: Bytes,
    /// Its entry in the hint log, when it is on one.
    logged: Option<Position>,
}

#[derive(Default)]
struct Hints {
    by_target: HashMap<Uuid, VecDeque<Hint>>,
    bytes: usize,
    /// `None` until [`open`] ran (or if it failed): hints in memory only.
    log: Option<Rc<SideLog>>,
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
pub(crate) fn store(target: Uuid, token: i64, payload: Bytes) -> bool {
    let written_ms = shoal_runtime::clock::now_ms();
    HINTS.with(|hints| keep(&mut hints.borrow_mut(), target, token, written_ms, payload))
}

/// Keeps a hint written at `written_ms` (wall clock) if the window and the
/// memory bound allow, logging it when there is a log; counts it.
fn keep(hints: &mut Hints, target: Uuid, token: i64, written_ms: i64, payload: Bytes) -> bool {
    let window = hint_window();
    let age = Duration::from_millis(u64::try_from(shoal_runtime::clock::now_ms() - written_ms).unwrap_or(0));
    let expired = window.is_zero()
        || age > window
        || hints.by_target.get(&target).and_then(|queue| queue.front()).is_some_and(|o| o.written.elapsed() > window);
    if expired || hints.bytes + payload.len() > HINTS_BYTES_MAX {
        DROPPED.with(|c| c.inc());
        return false;
    }
    let entry = |out: &mut Vec<u8>| encode_hint_entry(out, target, token, written_ms, &payload);
    let logged = hints.log.as_ref().and_then(|log| match log.append(entry) {
        Ok(at) => Some(at),
        Err(e) => {
            tracing::warn!("a hint for {target} is kept in memory only: {e}");
            None
        }
    });
    hints.bytes += payload.len();
    let written = Instant::now().checked_sub(age).unwrap_or_else(Instant::now);
    hints.by_target.entry(target).or_default().push_back(Hint { written, token, payload, logged });
    STORED.with(|c| c.inc());
    true
}

/// Opens this shard's hint log in `dir` and takes back the hints it held
/// (those still inside the hint window); call once per shard at start.
/// Without it (or if it fails: logged) hints are kept in memory only.
pub async fn open(dir: &Path) {
    let install = |log| HINTS.with(|hints| hints.borrow_mut().log = Some(log));
    let keep_again = |entry: &[u8]| match decode_hint_entry(entry) {
        Ok(hint) => {
            let payload = hint.payload.into();
            HINTS.with(|hints| keep(&mut hints.borrow_mut(), hint.target, hint.token, hint.written_ms, payload));
        }
        Err(e) => tracing::error!("a hint in {} with a valid checksum does not decode: {e}", dir.display()),
    };
    if let Err(e) = side_log::open(dir, install, keep_again).await {
        tracing::error!("the hint log in {}: {e}; hints it held may be lost", dir.display());
    }
}

/// A hint as the log keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HintEntry {
    pub target: Uuid,
    pub token: i64,
    pub written_ms: i64,
    pub payload: Vec<u8>,
}

pub fn encode_hint_entry(out: &mut Vec<u8>, target: Uuid, token: i64, written_ms: i64, payload: &[u8]) {
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(&token.to_be_bytes());
    out.extend_from_slice(&written_ms.to_be_bytes());
    out.extend_from_slice(payload);
}

pub fn decode_hint_entry(bytes: &[u8]) -> Result<HintEntry, DecodeError> {
    let mut d = Decoder::new(bytes);
    let target = Uuid::from_slice(d.slice(16)?).map_err(|_| d.error("bad target host id"))?;
    let token = d.fixed_i64()?;
    let written_ms = d.fixed_i64()?;
    let payload = d.slice(d.remaining())?.to_vec();
    Ok(HintEntry { target, token, written_ms, payload })
}

/// Deletes the hint log's segments no kept hint needs.
async fn discard_delivered() {
    let Some((log, oldest)) = HINTS.with(|hints| {
        let hints = hints.borrow();
        let log = hints.log.clone()?;
        let oldest = hints.by_target.values().filter_map(|q| q.front()).filter_map(|hint| hint.logged).min();
        Some((log, oldest))
    }) else {
        return;
    };
    log.discard_before(oldest).await;
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
        discard_delivered().await;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_short_ones_are_errors() {
        let mut bytes = Vec::new();
        encode_hint_entry(&mut bytes, Uuid::from_u128(7), -42, 1_700_000_000_000, b"mutation");
        let entry = decode_hint_entry(&bytes).expect("decodes");
        let expected = HintEntry {
            target: Uuid::from_u128(7),
            token: -42,
            written_ms: 1_700_000_000_000,
            payload: b"mutation".to_vec(),
        };
        assert_eq!(entry, expected);
        for cut in 0..32 {
            assert!(decode_hint_entry(&bytes[..cut]).is_err(), "{cut} bytes");
        }
    }
}
