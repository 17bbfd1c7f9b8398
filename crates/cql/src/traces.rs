//! Query tracing: a request sent with the TRACING frame flag gets a trace
//! session (its id goes back in the response header), with timed events, and
//! drivers then read it from `system_traces.sessions` and
//! `system_traces.events` (Python `ResultSet.get_query_trace()`, the Rust
//! driver's `Session::get_tracing_info`).
//!
//! A session is kept on the shard that served its request; reading either
//! table gathers the sessions of every shard, so a driver may ask any shard.
//!
//! Requests sent without the flag are traced too, at random, with the
//! probability `nodetool settraceprobability` sets on every shard
//! ([`set_probability`]); their session id is not sent back (drivers did
//! not ask), and an operator finds them in `system_traces`.
//!
//! Invariants: a shard keeps at most `SESSIONS_PER_SHARD_MAX` sessions (the
//! oldest go first, where Cassandra lets them expire after a day) and a
//! session at most `EVENTS_PER_SESSION_MAX` events, so tracing every request
//! cannot grow memory without bound; a session becomes visible only once
//! finished, with its `duration` set, which is what drivers wait for.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;
use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use shoal_runtime::this_shard;
use uuid::Uuid;

use crate::error::{CqlError, CqlResult};
use crate::functions;
use crate::system_cells::{self as cells, Values};

const SESSIONS_PER_SHARD_MAX: usize = 1024;
const EVENTS_PER_SESSION_MAX: usize = 64;

/// A finished trace session, as `system_traces` shows it.
#[derive(Debug, Clone)]
struct Session {
    id: [u8; 16],
    client: IpAddr,
    command: &'static str,
    request: &'static str,
    parameters: BTreeMap<String, String>,
    started_at_ms: i64,
    duration_us: i32,
    events: Vec<Event>,
}

#[derive(Debug, Clone)]
struct Event {
    id: [u8; 16],
    activity: String,
    elapsed_us: i32,
    thread: String,
}

thread_local! {
    static SESSIONS: RefCell<VecDeque<Session>> = const { RefCell::new(VecDeque::new()) };
    /// The chance that a request sent without the TRACING flag is traced.
    static PROBABILITY: Cell<f64> = const { Cell::new(0.0) };
}

/// Sets this shard's chance, in `[0, 1]`, of tracing a request sent
/// without the TRACING flag (call it on every shard).
pub fn set_probability(probability: f64) {
    assert!((0.0..=1.0).contains(&probability), "trace probability {probability} outside [0, 1]");
    PROBABILITY.with(|p| p.set(probability));
}

/// This shard's chance of tracing a request sent without the flag.
pub fn probability() -> f64 {
    PROBABILITY.with(Cell::get)
}

/// Whether to trace a request sent without the TRACING flag: a draw
/// against [`probability`] (no draw at all while it is 0).
pub fn sampled() -> bool {
    let probability = probability();
    probability > 0.0 && rand::random::<f64>() < probability
}

/// A request being traced. Dropped without [`Trace::finish`], it leaves no
/// session behind.
#[derive(Debug)]
pub struct Trace {
    session: Session,
    started: Instant,
}

/// A request's trace, shared with the statement it runs, whose execution
/// adds events of its own (the index a SELECT reads, as ScyllaDB traces
/// it). Only on the request's shard, and never borrowed across an await.
pub type SharedTrace = Rc<RefCell<Trace>>;

impl Trace {
    /// Starts tracing a request. `command` is the request kind as
    /// `system_traces.sessions.command` shows it (`QUERY`), `request` the
    /// description drivers show (`Execute CQL3 query`).
    pub fn begin(
        client: IpAddr,
        command: &'static str,
        request: &'static str,
        parameters: BTreeMap<String, String>,
    ) -> Trace {
        let session = Session {
            id: functions::timeuuid_now(),
            client,
            command,
            request,
            parameters,
            started_at_ms: shoal_runtime::clock::now_ms(),
            duration_us: 0,
            events: Vec::new(),
        };
        Trace { session, started: Instant::now() }
    }

    /// The session id, a timeuuid, sent back in the response header.
    pub fn id(&self) -> [u8; 16] {
        self.session.id
    }

    /// Records that `activity` happened now.
    pub fn event(&mut self, activity: impl Into<String>) {
        if self.session.events.len() >= EVENTS_PER_SESSION_MAX {
            return;
        }
        self.session.events.push(Event {
            id: functions::timeuuid_now(),
            activity: activity.into(),
            elapsed_us: self.elapsed_us(),
            thread: format!("shard {}", this_shard()),
        });
    }

    /// Ends the session and keeps it on this shard, readable from any.
    pub fn finish(mut self) {
        self.session.duration_us = self.elapsed_us().max(1);
        SESSIONS.with(|sessions| {
            let mut sessions = sessions.borrow_mut();
            if sessions.len() == SESSIONS_PER_SHARD_MAX {
                sessions.pop_front();
            }
            sessions.push_back(self.session);
        });
    }

    fn elapsed_us(&self) -> i32 {
        i32::try_from(self.started.elapsed().as_micros()).unwrap_or(i32::MAX)
    }
}

/// The rows of `system_traces.<table>` (`sessions` or `events`) now, in the
/// table's column order, gathered from every shard.
pub(crate) async fn rows(table: &str) -> CqlResult<Vec<Values>> {
    let answers = shoal_coordinator::on_every_shard(|_| async { SESSIONS.with(|s| s.borrow().clone()) })
        .await
        .map_err(|e| CqlError::Server(format!("reading traces: {e}")))?;
    let mut rows = Vec::new();
    for sessions in answers {
        for session in &sessions {
            match table {
                "sessions" => rows.push(session_row(session)),
                _ => rows.extend(session.events.iter().map(|e| event_row(session, e))),
            }
        }
    }
    Ok(rows)
}

fn session_row(s: &Session) -> Values {
    let node = shoal_coordinator::cluster::node();
    vec![
        cells::uuid(Uuid::from_bytes(s.id)),
        cells::inet(s.client),
        cells::text(s.command),
        cells::inet(node.address),
        cells::int(s.duration_us),
        cells::text_map(&s.parameters),
        cells::text(s.request),
        Some(Bytes::copy_from_slice(&s.started_at_ms.to_be_bytes())),
    ]
}

fn event_row(s: &Session, e: &Event) -> Values {
    vec![
        cells::uuid(Uuid::from_bytes(s.id)),
        cells::uuid(Uuid::from_bytes(e.id)),
        cells::text(&e.activity),
        cells::inet(shoal_coordinator::cluster::node().address),
        cells::int(e.elapsed_us),
        cells::text(&e.thread),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept_ids() -> Vec<[u8; 16]> {
        SESSIONS.with(|s| s.borrow().iter().map(|s| s.id).collect())
    }

    #[test]
    fn a_shard_keeps_only_the_newest_sessions() {
        let client = IpAddr::from([127, 0, 0, 1]);
        let mut ids = Vec::new();
        for _ in 0..SESSIONS_PER_SHARD_MAX + 5 {
            let trace = Trace::begin(client, "QUERY", "Execute CQL3 query", BTreeMap::new());
            ids.push(trace.id());
            trace.finish();
        }
        assert_eq!(kept_ids(), ids[5..]);
        // An unfinished trace leaves nothing behind.
        drop(Trace::begin(client, "QUERY", "Execute CQL3 query", BTreeMap::new()));
        assert_eq!(kept_ids().len(), SESSIONS_PER_SHARD_MAX);
        assert!(SESSIONS.with(|s| s.borrow().iter().all(|s| s.duration_us >= 1)));
    }
}
