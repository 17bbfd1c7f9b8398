//! The memcache side of the load generator: its own small client (no
//! memcached crate), one task per TCP connection.
//!
//! In-flight model: `--concurrency` is spread over the connections (a
//! connection gets `concurrency / connections`, the first ones one more for
//! the remainder; at most `concurrency` connections are opened), and a
//! connection has one batch outstanding at a time: it claims up to
//! `min(pipeline, its share)` operations, writes them in one write, and reads
//! their replies in order before the next batch. So at most
//! `min(concurrency, connections x pipeline)` operations are in flight;
//! `--concurrency` caps, it never adds client-side queues. Under `--rate` a
//! batch holds the first operation (waited for until its intended start) plus
//! whatever is already due: when the server keeps up, batches are small;
//! when it falls behind, they fill up, like a real client's would.
//!
//! Each operation's latency runs from its intended start (or its claim, when
//! unthrottled) to the read that brought its reply in; a batch's results are
//! recorded together once it is over. A batch that gets no reply
//! within the operation timeout, a broken connection or a reply out of step
//! fails the batch's remaining operations and the connection is re-opened;
//! error replies (`ERROR`, `CLIENT_ERROR`, `SERVER_ERROR`) count as errors,
//! and the connection is re-opened after the batch too, because a refused
//! `set` may leave its data block to be read as a command.

mod connection;
mod protocol;

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::SeedableRng;
use tokio::task::JoinSet;

use self::connection::Connection;
use self::protocol::{encode_get, encode_write, Reply};
use crate::args::{Config, MemcacheDialect, MemcacheWrite};
use crate::error::{OpError, StressError};
use crate::schedule::Claim;
use crate::stats::{Finished, Outcome};
use crate::workload::{Op, OpKind};
use crate::{latency_start, Run, CONNECT_TIMEOUT, OP_TIMEOUT, TIMER_SLACK};

/// Pause between attempts to re-open a failed connection.
const RECONNECT_PAUSE: Duration = Duration::from_millis(100);

/// Open connections, ready to be driven.
pub struct Target {
    shared: Arc<Shared>,
    /// Each connection with its batch size limit.
    connections: Vec<(Connection, usize)>,
}

/// What the connection tasks share.
struct Shared {
    address: String,
    dialect: MemcacheDialect,
    write: MemcacheWrite,
    /// Keys asked for by one read (a multi-key text `get` when more than one).
    keys_per_get: usize,
    value: Vec<u8>,
}

/// A claimed operation waiting for its reply.
struct Pending {
    claim: Claim,
    op: Op,
    /// Where its latency starts.
    start: Instant,
}

impl Target {
    /// Opens the connections; failing to open any is fatal.
    pub async fn connect(config: &Config, value: Vec<u8>) -> Result<Target, StressError> {
        let address = config.address();
        let count = config.connections.min(config.concurrency);
        let mut connections = Vec::with_capacity(count);
        for i in 0..count {
            let share = config.concurrency / count + usize::from(i < config.concurrency % count);
            let connection = Connection::open(&address, CONNECT_TIMEOUT)
                .await
                .map_err(|reason| StressError::Connect { address: address.clone(), reason })?;
            connections.push((connection, share.min(config.pipeline)));
        }
        let shared = Shared {
            address,
            dialect: config.memcache_protocol,
            write: config.memcache_write,
            keys_per_get: config.keys_per_get,
            value,
        };
        Ok(Target { shared: Arc::new(shared), connections })
    }

    /// Operations in flight at most.
    pub fn in_flight(&self) -> usize {
        self.connections.iter().map(|(_, cap)| cap).sum()
    }

    pub fn describe(&self) -> String {
        let batch = self.connections.iter().map(|(_, cap)| *cap).max().unwrap_or_default();
        format!(
            "{} connections x batches of up to {batch}, {} ops in flight at most",
            self.connections.len(),
            self.in_flight()
        )
    }

    /// Starts one task per connection.
    pub fn spawn(self, run: &Arc<Run>, workers: &mut JoinSet<()>) {
        for (id, (connection, cap)) in self.connections.into_iter().enumerate() {
            workers.spawn(drive(id, connection, cap, self.shared.clone(), run.clone()));
        }
    }
}

/// Runs batches on one connection until the schedule ends, re-opening the
/// connection when it fails.
async fn drive(id: usize, connection: Connection, cap: usize, shared: Arc<Shared>, run: Arc<Run>) {
    let mut rng = StdRng::from_entropy();
    let mut batch = Vec::with_capacity(cap);
    let mut finished = Vec::with_capacity(cap);
    let mut request = Vec::new();
    let mut keys = Vec::with_capacity(shared.keys_per_get);
    let mut connection = Some(connection);
    loop {
        let conn = match connection.as_mut() {
            Some(conn) => conn,
            None => match reopen(&shared.address, &run).await {
                Some(conn) => connection.insert(conn),
                None => return,
            },
        };
        if !fill_batch(&run, cap, &mut rng, &mut batch).await {
            return;
        }
        request.clear();
        for p in &batch {
            match p.op.kind {
                OpKind::Write => encode_write(&mut request, shared.dialect, shared.write, p.op.pk, &shared.value),
                OpKind::Read => {
                    // A multi-key get's other keys are drawn as the first was.
                    keys.clear();
                    keys.push(p.op.pk);
                    keys.extend(
                        (1..shared.keys_per_get as u64).map(|j| run.workload.op(p.claim.index + j, &mut rng).pk),
                    );
                    encode_get(&mut request, shared.dialect, &keys);
                }
            }
        }
        let in_step = run_batch(conn, &request, &batch, &mut finished).await;
        run.recorders.record_all(id, finished.drain(..));
        if !in_step {
            connection = None;
        }
    }
}

/// Claims the next batch: one operation (waiting for its start), then those
/// already due, up to `cap`. False when the schedule has ended.
async fn fill_batch(run: &Run, cap: usize, rng: &mut StdRng, batch: &mut Vec<Pending>) -> bool {
    batch.clear();
    let Some(first) = run.schedule.claim(Instant::now()) else {
        return false;
    };
    let start = run.wait_for(&first).await;
    batch.push(Pending { claim: first, op: run.workload.op(first.index, rng), start });
    // One clock read for the batch: it is filled within microseconds. Due
    // within the timer's resolution counts as due (see `Run::wait_for`).
    let now = Instant::now();
    while batch.len() < cap {
        let Some(claim) = run.schedule.claim_if_due(now, now + TIMER_SLACK) else {
            break;
        };
        batch.push(Pending { claim, op: run.workload.op(claim.index, rng), start: latency_start(&claim, now) });
    }
    true
}

/// Sends the batch and puts each operation's result into `finished`; false
/// when the connection must be re-opened.
async fn run_batch(conn: &mut Connection, request: &[u8], batch: &[Pending], finished: &mut Vec<Finished>) -> bool {
    let mut in_step = true;
    let deadline = tokio::time::Instant::now() + OP_TIMEOUT;
    let outcome = conn
        .round_trip(request, batch.len(), deadline, OP_TIMEOUT, |reply, arrived| {
            let p = &batch[finished.len()];
            let result = interpret(p.op.kind, reply);
            in_step &= result.is_ok() || matches!(result, Err(OpError::NotStored));
            let latency = arrived.into_std().saturating_duration_since(p.start);
            finished.push(Finished { kind: p.op.kind, result, latency, measured: p.claim.measured });
        })
        .await;
    if let Err(e) = outcome {
        let now = Instant::now();
        for p in &batch[finished.len()..] {
            let latency = now.saturating_duration_since(p.start);
            finished.push(Finished { kind: p.op.kind, result: Err(e.clone()), latency, measured: p.claim.measured });
        }
        return false;
    }
    in_step
}

/// What a reply means for an operation of `kind`.
fn interpret(kind: OpKind, reply: Reply) -> Result<Outcome, OpError> {
    match (kind, reply) {
        (_, Reply::Error(line)) => Err(OpError::ServerError(line)),
        (OpKind::Write, Reply::Done) => Ok(Outcome::Done),
        (OpKind::Write, Reply::NotStored) => Err(OpError::NotStored),
        // An `incr` or `delete` of a key that is not there.
        (OpKind::Write, Reply::NotFound) => Ok(Outcome::Miss),
        (OpKind::Read, Reply::Hits(_)) => Ok(Outcome::Done),
        (OpKind::Read, Reply::Miss) => Ok(Outcome::Miss),
        (kind, reply) => Err(OpError::Connection(format!("reply {reply:?} to a {}", kind.name()))),
    }
}

/// Re-opens a connection, retrying until the schedule ends (`None`).
async fn reopen(address: &str, run: &Run) -> Option<Connection> {
    while !run.schedule.is_over(Instant::now()) {
        match Connection::open(address, CONNECT_TIMEOUT).await {
            Ok(conn) => return Some(conn),
            Err(_) => tokio::time::sleep(RECONNECT_PAUSE).await,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_map_to_outcomes() {
        assert!(matches!(interpret(OpKind::Write, Reply::Done), Ok(Outcome::Done)));
        assert!(matches!(interpret(OpKind::Write, Reply::NotFound), Ok(Outcome::Miss)));
        assert!(matches!(interpret(OpKind::Write, Reply::NotStored), Err(OpError::NotStored)));
        assert!(matches!(interpret(OpKind::Read, Reply::Hits(3)), Ok(Outcome::Done)));
        assert!(matches!(interpret(OpKind::Read, Reply::Miss), Ok(Outcome::Miss)));
        assert!(matches!(interpret(OpKind::Read, Reply::Error("ERROR".into())), Err(OpError::ServerError(_))));
        assert!(matches!(interpret(OpKind::Read, Reply::Done), Err(OpError::Connection(_))));
        assert!(matches!(interpret(OpKind::Write, Reply::Miss), Err(OpError::Connection(_))));
    }
}
