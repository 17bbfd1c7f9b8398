//! The load model: a shared counter hands out operation indexes, and the
//! schedule says when each one is meant to start and whether it is recorded.
//!
//! With `--rate R`, operation `i` is intended at `t0 + i / R`, whatever
//! happened to the operations before it; a worker sleeps until then, and the
//! latency is measured from that intended start, so when the server falls
//! behind the queueing shows up in the latencies instead of silently lowering
//! the offered load (no coordinated omission). Without a rate an operation's
//! intended start is the moment it is claimed.
//!
//! Operations intended before `t0 + warmup` run but are not recorded. The run
//! ends at `t0 + warmup + duration` (no operation is started after it, even
//! one whose intended start was earlier: a server that cannot keep up must not
//! make the run last forever; [`Schedule::not_started`] counts those) or after
//! `count` recorded operations.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::args::StopAfter;

/// One operation handed out by the schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    pub index: u64,
    /// When the operation should start; latency is measured from here.
    pub intended: Instant,
    /// False during the warm-up.
    pub measured: bool,
}

/// The shared operation schedule of a run.
#[derive(Debug)]
pub struct Schedule {
    start: Instant,
    measure_from: Instant,
    /// Ops per second; `None` = back to back.
    rate: Option<f64>,
    deadline: Option<Instant>,
    count: Option<u64>,
    next_index: AtomicU64,
    measured_claims: AtomicU64,
    started: AtomicU64,
    stopped: AtomicBool,
}

impl Schedule {
    pub fn new(start: Instant, rate: Option<f64>, warmup: Duration, stop: StopAfter) -> Schedule {
        assert!(rate.is_none_or(|r| r > 0.0 && r.is_finite()), "rate must be positive");
        let measure_from = start + warmup;
        let (deadline, count) = match stop {
            StopAfter::Duration(d) => (Some(measure_from + d), None),
            StopAfter::Count(n) => (None, Some(n)),
        };
        Schedule {
            start,
            measure_from,
            rate,
            deadline,
            count,
            next_index: AtomicU64::new(0),
            measured_claims: AtomicU64::new(0),
            started: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
        }
    }

    /// Where the recorded part of the run begins.
    pub fn measure_from(&self) -> Instant {
        self.measure_from
    }

    pub fn is_rate_limited(&self) -> bool {
        self.rate.is_some()
    }

    /// The intended start of operation `index` under a rate.
    fn intended_at(&self, rate: f64, index: u64) -> Instant {
        self.start + Duration::from_secs_f64(index as f64 / rate)
    }

    /// The next operation, or `None` once the run is over. Under a rate its
    /// intended start may be in the future: the caller waits for it.
    pub fn claim(&self, now: Instant) -> Option<Claim> {
        self.claim_due(now, None)
    }

    /// Like [`Schedule::claim`] but only an operation intended no later than
    /// `due_by` (to fill a memcache pipeline with operations that are already
    /// due); without a rate every operation is due.
    pub fn claim_if_due(&self, now: Instant, due_by: Instant) -> Option<Claim> {
        self.claim_due(now, Some(due_by))
    }

    fn claim_due(&self, now: Instant, due_by: Option<Instant>) -> Option<Claim> {
        if self.is_over(now) {
            return None;
        }
        let index = self.take_index(due_by)?;
        let intended = self.rate.map_or(now, |rate| self.intended_at(rate, index));
        if self.deadline.is_some_and(|d| intended >= d) {
            self.stopped.store(true, Ordering::Relaxed);
            return None;
        }
        let measured = intended >= self.measure_from;
        if let (true, Some(count)) = (measured, self.count) {
            if self.measured_claims.fetch_add(1, Ordering::Relaxed) >= count {
                self.stopped.store(true, Ordering::Relaxed);
                return None;
            }
        }
        self.started.fetch_add(1, Ordering::Relaxed);
        Some(Claim { index, intended, measured })
    }

    fn take_index(&self, due_by: Option<Instant>) -> Option<u64> {
        let (Some(rate), Some(limit)) = (self.rate, due_by) else {
            return Some(self.next_index.fetch_add(1, Ordering::Relaxed));
        };
        let mut index = self.next_index.load(Ordering::Relaxed);
        loop {
            if self.intended_at(rate, index) > limit {
                return None;
            }
            match self.next_index.compare_exchange_weak(index, index + 1, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Some(index),
                Err(current) => index = current,
            }
        }
    }

    /// Ends the run early: no more operations are handed out.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
    }

    /// True once no more operations will be handed out.
    pub fn is_over(&self, now: Instant) -> bool {
        if self.stopped.load(Ordering::Relaxed) {
            return true;
        }
        if self.deadline.is_some_and(|d| now >= d) {
            self.stopped.store(true, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// Under a rate with a duration: operations intended before the end that
    /// were never started because the run ended first (the server or the
    /// client could not keep up). Zero otherwise.
    pub fn not_started(&self) -> u64 {
        let (Some(rate), Some(deadline)) = (self.rate, self.deadline) else {
            return 0;
        };
        let due = ((deadline - self.start).as_secs_f64() * rate).ceil() as u64;
        due.saturating_sub(self.started.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_rate_spaces_intended_starts_evenly() {
        let t0 = Instant::now();
        let s = Schedule::new(t0, Some(1000.0), Duration::ZERO, StopAfter::Duration(ms(1000)));
        // Claiming early does not change the intended start.
        let claims: Vec<Claim> = (0..5).filter_map(|_| s.claim(t0)).collect();
        let offsets: Vec<Duration> = claims.iter().map(|c| c.intended - t0).collect();
        assert_eq!(offsets, [ms(0), ms(1), ms(2), ms(3), ms(4)]);
        assert_eq!(claims.iter().map(|c| c.index).collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
        // Claiming late does not either: the latency will include the delay.
        let late = s.claim(t0 + ms(500)).map(|c| c.intended - t0);
        assert_eq!(late, Some(ms(5)));
    }

    #[test]
    fn without_a_rate_an_op_is_intended_when_claimed() {
        let t0 = Instant::now();
        let s = Schedule::new(t0, None, Duration::ZERO, StopAfter::Count(10));
        assert_eq!(s.claim(t0 + ms(7)).map(|c| c.intended), Some(t0 + ms(7)));
        assert_eq!(s.not_started(), 0);
    }

    #[test]
    fn only_due_ops_fill_a_pipeline() {
        let t0 = Instant::now();
        let s = Schedule::new(t0, Some(100.0), Duration::ZERO, StopAfter::Duration(ms(1000)));
        // At t0 + 25 ms, ops 0, 1, 2 (0, 10, 20 ms) are due and op 3 (30 ms) is not.
        let now = t0 + ms(25);
        let due: Vec<u64> = std::iter::from_fn(|| s.claim_if_due(now, now)).map(|c| c.index).collect();
        assert_eq!(due, [0, 1, 2]);
        assert_eq!(s.claim(now).map(|c| c.index), Some(3));
    }

    #[test]
    fn the_duration_ends_the_run_and_counts_what_was_left() {
        let t0 = Instant::now();
        let s = Schedule::new(t0, Some(100.0), Duration::ZERO, StopAfter::Duration(ms(100)));
        // Ten ops are intended in the first 100 ms; a slow client starts four.
        for _ in 0..4 {
            assert!(s.claim(t0).is_some());
        }
        assert!(s.claim(t0 + ms(100)).is_none());
        assert!(s.is_over(t0));
        assert_eq!(s.not_started(), 6);
        // A fast client runs out of ops at the deadline by their intended time.
        let s = Schedule::new(t0, Some(100.0), Duration::ZERO, StopAfter::Duration(ms(100)));
        assert_eq!(std::iter::from_fn(|| s.claim(t0)).count(), 10);
        assert_eq!(s.not_started(), 0);
    }

    #[test]
    fn warmup_ops_are_not_measured_and_count_only_measured_ones() {
        let t0 = Instant::now();
        let s = Schedule::new(t0, Some(1000.0), ms(3), StopAfter::Count(2));
        let measured: Vec<bool> = std::iter::from_fn(|| s.claim(t0)).map(|c| c.measured).collect();
        assert_eq!(measured, [false, false, false, true, true]);
        assert_eq!(s.measure_from(), t0 + ms(3));
    }

    #[test]
    fn count_without_rate_stops_exactly() {
        let t0 = Instant::now();
        let s = Schedule::new(t0, None, Duration::ZERO, StopAfter::Count(3));
        assert_eq!(std::iter::from_fn(|| s.claim(t0)).count(), 3);
        assert!(s.claim(t0).is_none());
    }
}
