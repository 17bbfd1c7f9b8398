//! `shoal stress`: a load generator for CQL (Shoal, Cassandra, ScyllaDB) and
//! memcached-protocol servers. The interface (options, output lines, JSON) is
//! a contract with the benchmark harness in `bench/`, written down in
//! `crates/stress/README.md`.
//!
//! A run: validate the options ([`args`]), start a tokio runtime with
//! `--threads` workers, connect and prepare ([`cql`] or [`memcache`]; a
//! failure there is the only fatal error), then let the workers claim
//! operations from the shared [`schedule`] (intended start times, warm-up,
//! stop condition), turn each index into an operation ([`workload`],
//! [`population`]), run it with a timeout and record it ([`stats`]). This
//! module prints a progress line per second and, at the end, the summary
//! ([`report`]) with the loader's own CPU use ([`cpu`]).
//!
//! Invariants: the run always ends by itself (every operation has a timeout,
//! no operation starts after the deadline, and a run where nothing succeeds
//! for [`STALL_LIMIT`] gives up); operation failures are counted, never
//! fatal; latencies are measured from intended start times under `--rate`.

mod args;
mod cpu;
mod cql;
mod error;
mod memcache;
mod population;
mod report;
mod schedule;
mod stats;
mod workload;

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::RngCore;
use tokio::task::JoinSet;

pub use args::StressArgs;
use args::{value_name, Config, Protocol};
use cpu::CpuClock;
use error::StressError;
use report::{progress_line, Summary};
use schedule::{Claim, Schedule};
use stats::Recorders;
use workload::Workload;

/// Longest an operation may take; slower ones count as errors.
const OP_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// A run in which no operation succeeds for this long gives up (a server
/// that hangs or is gone would otherwise keep a `--count` run alive).
const STALL_LIMIT: Duration = Duration::from_secs(30);
/// How early a rate-limited operation may start. tokio's timer rounds a
/// deadline up to the next millisecond and the wait in `epoll_wait` up to a
/// millisecond again, so a sleep ends anywhere up to 2 ms after its deadline.
const TIMER_SLACK: Duration = Duration::from_millis(2);
/// The shortest final partial interval that still gets a progress line.
const LAST_LINE_MIN: Duration = Duration::from_millis(500);
/// How long the runtime may take to stop the driver's background tasks.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(2);

/// Runs a stress session; the error is a message for the user.
pub fn run(args: StressArgs) -> Result<(), String> {
    let config = Config::from_args(args).map_err(|e| e.to_string())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.threads)
        .enable_all()
        .build()
        .map_err(|e| StressError::Runtime(e).to_string())?;
    let result = runtime.block_on(session(config));
    runtime.shutdown_timeout(SHUTDOWN_TIMEOUT);
    result.map_err(|e| e.to_string())
}

/// What every worker shares.
pub(crate) struct Run {
    schedule: Schedule,
    workload: Workload,
    recorders: Recorders,
}

impl Run {
    /// Waits until `claim` is due and returns where its latency starts.
    ///
    /// Unthrottled: now. Under a rate: tokio's timer fires on whole
    /// milliseconds, so waiting for the intended start itself would make most
    /// operations up to 2 ms late and add that to their latency; instead the
    /// wait ends up to [`TIMER_SLACK`] early, and the latency starts at the earlier
    /// of the intended start and the actual one. A late start (client or
    /// server behind) still counts from the intended start: no coordinated
    /// omission.
    async fn wait_for(&self, claim: &Claim) -> Instant {
        if !self.schedule.is_rate_limited() {
            return Instant::now();
        }
        let wake = claim.intended.checked_sub(TIMER_SLACK).unwrap_or(claim.intended);
        if wake > Instant::now() {
            tokio::time::sleep_until(wake.into()).await;
        }
        latency_start(claim, Instant::now())
    }
}

/// Where the latency of `claim`, starting at `now`, is measured from (see
/// [`Run::wait_for`]).
fn latency_start(claim: &Claim, now: Instant) -> Instant {
    claim.intended.min(now)
}

enum Target {
    Cql(cql::Target),
    Memcache(memcache::Target),
}

async fn session(config: Config) -> Result<(), StressError> {
    let value = if config.numeric_values {
        vec![b'0'; config.value_size]
    } else {
        let mut value = vec![0u8; config.value_size];
        rand::thread_rng().fill_bytes(&mut value);
        value
    };
    let (target, rows) = match config.protocol {
        Protocol::Cql => (Target::Cql(cql::Target::connect(&config, value).await?), config.rows_per_partition),
        Protocol::Memcache => (Target::Memcache(memcache::Target::connect(&config, value).await?), 1),
    };
    let workload = Workload::new(config.workload, config.ratio, config.pop, config.keys, rows);
    let kinds = workload.kinds();
    println!("{}", header(&config, &target));
    let cpu_clock = CpuClock::start();
    let start = Instant::now();
    let schedule = Schedule::new(start, config.rate, config.warmup(), config.stop_after());
    let run = Arc::new(Run { schedule, workload, recorders: Recorders::new(2 * config.threads) });
    let mut workers = JoinSet::new();
    match target {
        Target::Cql(t) => t.spawn(&run, &mut workers),
        Target::Memcache(t) => t.spawn(&run, &mut workers),
    }
    let end = watch(&config, &run, start, &mut workers).await;
    let loader_cpu = cpu_clock.stop();
    let totals = run.recorders.totals();
    let measured = end.saturating_duration_since(run.schedule.measure_from());
    let summary = Summary::new(&config, kinds, &totals, measured, run.schedule.not_started(), loader_cpu);
    print!("{}", summary.to_text());
    if let Some(first) = &totals.first_error {
        eprintln!("first error: {first}");
    }
    if let Some(path) = &config.json {
        std::fs::write(path, summary.to_json() + "\n")
            .map_err(|e| StressError::Report { path: path.display().to_string(), reason: e.to_string() })?;
    }
    Ok(())
}

/// The first line of output: what is about to run.
fn header(config: &Config, target: &Target) -> String {
    let (protocol, connections) = match target {
        Target::Cql(t) => ("cql".to_string(), t.describe()),
        Target::Memcache(t) => (format!("memcache ({})", value_name(config.memcache_protocol)), t.describe()),
    };
    let pace = config.rate.map_or("unthrottled".to_string(), |r| format!("{r} ops/s"));
    let mut stop = match (config.count, config.duration) {
        (Some(n), _) => format!("{n} ops"),
        (None, d) => format!("{} s", d.unwrap_or_default()),
    };
    if config.warmup > 0.0 {
        stop.push_str(&format!(" after {} s of warm-up", config.warmup));
    }
    format!(
        "shoal stress: {protocol} {} on {}, {} keys 0..{}, {}-byte values, {connections}, {pace}, {stop}",
        value_name(config.workload),
        config.address(),
        value_name(config.pop),
        config.keys,
        config.value_size,
    )
}

/// Prints a progress line per second until every worker has finished, and
/// gives the run up when nothing succeeds for [`STALL_LIMIT`]. Returns when
/// the last worker finished.
async fn watch(config: &Config, run: &Run, start: Instant, workers: &mut JoinSet<()>) -> Instant {
    let second = Duration::from_secs(1);
    let mut ticker = tokio::time::interval_at((start + second).into(), second);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_tick = start;
    let mut last_success = start;
    // A stall only means something if operations were due in the meantime.
    let stall_matters = config.rate.is_none_or(|r| r * STALL_LIMIT.as_secs_f64() >= 2.0);
    let print = |now: Instant, last_tick: Instant, interval: &stats::OpStats| {
        if !config.quiet {
            let t_s = (now - start).as_secs_f64().round() as u64;
            let warming_up = last_tick + (now - last_tick) / 2 < run.schedule.measure_from();
            println!("{}", progress_line(t_s, interval, now - last_tick, warming_up));
        }
    };
    loop {
        tokio::select! {
            joined = workers.join_next() => match joined {
                None => {
                    let end = Instant::now();
                    // The last, partial second, unless it is too short to mean much.
                    if end - last_tick >= LAST_LINE_MIN {
                        print(end, last_tick, &run.recorders.take_interval());
                    }
                    return end;
                }
                Some(Ok(())) => {}
                Some(Err(e)) => eprintln!("a worker failed: {e}"),
            },
            _ = ticker.tick() => {
                let now = Instant::now();
                let interval = run.recorders.take_interval();
                if interval.ops() > 0 {
                    last_success = now;
                } else if stall_matters && now - last_success >= STALL_LIMIT && !run.schedule.is_over(now) {
                    eprintln!("giving up: no operation succeeded in {} s", STALL_LIMIT.as_secs());
                    run.schedule.stop();
                }
                print(now, last_tick, &interval);
                last_tick = now;
            }
        }
    }
}
