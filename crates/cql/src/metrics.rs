//! CQL request metrics on this shard, by kind of statement — `read`
//! (SELECT), `write` (INSERT, UPDATE, DELETE, BATCH) and `other` (DDL, USE,
//! and requests that fail before their statement is known) — counted and
//! timed from parsing to the result, on the shard the request arrived on
//! (the coordinator's view, forwarding included).

use std::future::Future;
use std::rc::Rc;
use std::time::Instant;

use futures_util::FutureExt;
use shoal_metrics::{Counter, Histogram};

use crate::ast::Statement;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Read = 0,
    Write = 1,
    Other = 2,
}

impl Op {
    pub(crate) fn of(statement: &Statement) -> Op {
        match statement {
            Statement::Select(_) => Op::Read,
            Statement::Insert(_)
            | Statement::InsertJson(_)
            | Statement::Update(_)
            | Statement::Delete(_)
            | Statement::Batch(_) => Op::Write,
            _ => Op::Other,
        }
    }
}

struct OpMetrics {
    requests: Rc<Counter>,
    errors: Rc<Counter>,
    latency: Rc<Histogram>,
}

impl OpMetrics {
    fn register(op: &str) -> OpMetrics {
        let labels = [("op", op)];
        OpMetrics {
            requests: shoal_metrics::counter("shoal_cql_requests_total", "CQL statements executed.", &labels),
            errors: shoal_metrics::counter(
                "shoal_cql_request_errors_total",
                "CQL statements answered with an error.",
                &labels,
            ),
            latency: shoal_metrics::histogram(
                "shoal_cql_request_latency_seconds",
                "Time from a statement's parsing to its result, on the shard it arrived on.",
                &labels,
            ),
        }
    }
}

thread_local! {
    static METRICS: [OpMetrics; 3] =
        [OpMetrics::register("read"), OpMetrics::register("write"), OpMetrics::register("other")];
}

/// Registers the metrics on the calling shard, so they read 0 before the
/// first request rather than being absent.
pub fn register_metrics() {
    METRICS.with(|_| ());
}

/// Counts one request of kind `op` that started at `started`.
pub(crate) fn record(op: Op, started: Instant, ok: bool) {
    METRICS.with(|m| {
        let m = &m[op as usize];
        m.requests.inc();
        if !ok {
            m.errors.inc();
        }
        m.latency.record(started.elapsed());
    });
}

/// Runs `request` and counts it as `op`. A combinator, not an `async fn`:
/// an `async fn` would hold `request` twice (as its argument and as the
/// future it awaits), doubling the state every request's task carries.
pub(crate) fn timed<T, E>(
    op: Op,
    started: Instant,
    request: impl Future<Output = Result<T, E>>,
) -> impl Future<Output = Result<T, E>> {
    request.inspect(move |result| record(op, started, result.is_ok()))
}
