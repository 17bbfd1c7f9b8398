//! The fair queue: which waiting request goes to the disk next (Seastar's
//! `fair_queue`, DESIGN.md §6). Pure bookkeeping with time passed in
//! (`now_ns`), so tests drive it with a fake clock and a fake disk.
//!
//! - Each class has a FIFO of waiting requests, bounded by
//!   `queue_capacity`, and an accumulated cost: every request dispatched
//!   adds `cost_ns * SHARE_SCALE / shares`. The class with the least
//!   accumulated cost goes next, so saturated classes get disk time in
//!   proportion to their shares.
//! - A class that was idle does not bank credit: when it becomes active
//!   its accumulated cost is raised to the least among active classes (or
//!   to the last dispatched class's, when none is active).
//! - A token bucket refilled at one nanosecond of disk time per
//!   nanosecond (costs are in the shard's disk time, see `cost.rs`) and
//!   capped at the latency goal paces dispatch to the disk's rate, and so
//!   bounds what a disk that keeps that rate has in flight (Seastar's
//!   model). Completions release nothing: a shard notices one only when
//!   the request's task next runs, which under load is a reactor turn
//!   later, and a cap on the cost in flight made that delay, not the
//!   disk, set the rate (half the disk-bound reads,
//!   bench/results/2026-11-29-disk-reads.md). A request larger than the
//!   bucket waits for a full one and drives it negative.
//! - No request waits forever: a head that has waited `max_wait_ns` is
//!   dispatched before any fairness choice (oldest first).

use std::collections::VecDeque;

use crate::class::IoClass;

/// Accumulated cost is `cost_ns * SHARE_SCALE / shares`.
const SHARE_SCALE: u64 = 1_000;

#[derive(Debug, Clone, Copy)]
pub struct FairQueueConfig {
    /// The bucket's capacity: the most disk time dispatched at once.
    pub latency_goal_ns: u64,
    /// The longest a request may wait before it jumps the fair order.
    pub max_wait_ns: u64,
    /// Waiting requests per class.
    pub queue_capacity: usize,
}

/// One waiting request.
struct Waiting<T> {
    item: T,
    cost_ns: u64,
    enqueued_ns: u64,
}

struct ClassQueue<T> {
    waiting: VecDeque<Waiting<T>>,
    shares: u32,
    accumulated: u64,
}

/// A request the queue let go: the caller runs it, then calls
/// [`FairQueue::complete`] with `cost_ns`.
pub struct Dispatched<T> {
    pub item: T,
    pub class: IoClass,
    pub cost_ns: u64,
    pub waited_ns: u64,
}

/// Why a request was not queued.
#[derive(Debug, PartialEq, Eq)]
pub struct QueueFull;

pub struct FairQueue<T> {
    config: FairQueueConfig,
    classes: Vec<ClassQueue<T>>,
    tokens_ns: i64,
    refilled_at_ns: u64,
    in_flight_cost_ns: u64,
    in_flight_requests: usize,
    last_dispatched_accumulated: u64,
    /// Requests waiting in all classes: none, and there is no choice to make.
    waiting: usize,
}

impl<T> FairQueue<T> {
    pub fn new(config: FairQueueConfig, now_ns: u64) -> FairQueue<T> {
        assert!(config.latency_goal_ns > 0, "a latency goal lets something through");
        assert!(config.queue_capacity > 0, "a queue holds at least one request");
        let classes = IoClass::ALL
            .iter()
            .map(|class| ClassQueue { waiting: VecDeque::new(), shares: class.default_shares(), accumulated: 0 })
            .collect();
        FairQueue {
            config,
            classes,
            tokens_ns: config.latency_goal_ns as i64,
            refilled_at_ns: now_ns,
            in_flight_cost_ns: 0,
            in_flight_requests: 0,
            last_dispatched_accumulated: 0,
            waiting: 0,
        }
    }

    /// Changes a class's shares (the flush and compaction controllers).
    pub fn set_shares(&mut self, class: IoClass, shares: u32) {
        assert!(shares > 0, "a class with no shares would never run");
        self.classes[class as usize].shares = shares;
    }

    pub fn shares(&self, class: IoClass) -> u32 {
        self.classes[class as usize].shares
    }

    pub fn queued(&self, class: IoClass) -> usize {
        self.classes[class as usize].waiting.len()
    }

    #[cfg(test)]
    pub fn in_flight_cost_ns(&self) -> u64 {
        self.in_flight_cost_ns
    }

    /// Queues `item` of `class`, costing `cost_ns`.
    pub fn enqueue(&mut self, class: IoClass, cost_ns: u64, item: T, now_ns: u64) -> Result<(), QueueFull> {
        assert!(cost_ns > 0, "every request costs something");
        if self.classes[class as usize].waiting.len() >= self.config.queue_capacity {
            return Err(QueueFull);
        }
        if self.classes[class as usize].waiting.is_empty() {
            // Becoming active: no credit for the time spent idle.
            let floor = self
                .classes
                .iter()
                .filter(|c| !c.waiting.is_empty())
                .map(|c| c.accumulated)
                .min()
                .unwrap_or(self.last_dispatched_accumulated);
            let queue = &mut self.classes[class as usize];
            queue.accumulated = queue.accumulated.max(floor);
        }
        self.classes[class as usize].waiting.push_back(Waiting { item, cost_ns, enqueued_ns: now_ns });
        self.waiting += 1;
        Ok(())
    }

    /// Whether any request waits.
    pub fn has_waiting(&self) -> bool {
        self.waiting > 0
    }

    /// Lets a request of `class` costing `cost_ns` go at once where nothing
    /// waits and the bucket holds its cost: what [`FairQueue::enqueue`]
    /// then [`FairQueue::dispatch`] would do, without queueing it (the
    /// common case of a shard whose disk keeps up). `false`: queue it.
    pub fn dispatch_now(&mut self, class: IoClass, cost_ns: u64, now_ns: u64) -> bool {
        assert!(cost_ns > 0, "every request costs something");
        if self.waiting > 0 {
            return false;
        }
        self.refill(now_ns);
        if !self.fits(cost_ns) {
            return false;
        }
        // Becoming active while no class is: `enqueue`'s floor.
        let queue = &mut self.classes[class as usize];
        queue.accumulated = queue.accumulated.max(self.last_dispatched_accumulated);
        self.charge(class as usize, cost_ns);
        true
    }

    /// The next request allowed to go now, if any.
    pub fn dispatch(&mut self, now_ns: u64) -> Option<Dispatched<T>> {
        self.refill(now_ns);
        let index = self.next_class(now_ns)?;
        let cost_ns = self.classes[index].waiting.front()?.cost_ns;
        if !self.fits(cost_ns) {
            return None;
        }
        let waiting = self.classes[index].waiting.pop_front()?;
        self.waiting -= 1;
        self.charge(index, cost_ns);
        Some(Dispatched {
            item: waiting.item,
            class: IoClass::ALL[index],
            cost_ns,
            waited_ns: now_ns.saturating_sub(waiting.enqueued_ns),
        })
    }

    /// Charges class `index` for a request of `cost_ns` let go.
    fn charge(&mut self, index: usize, cost_ns: u64) {
        let queue = &mut self.classes[index];
        queue.accumulated =
            queue.accumulated.saturating_add(cost_ns.saturating_mul(SHARE_SCALE) / u64::from(queue.shares));
        self.last_dispatched_accumulated = queue.accumulated;
        self.tokens_ns -= cost_ns as i64;
        self.in_flight_cost_ns += cost_ns;
        self.in_flight_requests += 1;
    }

    /// A dispatched request of `cost_ns` finished (or was abandoned).
    pub fn complete(&mut self, cost_ns: u64) {
        assert!(self.in_flight_requests > 0, "completing a request never dispatched");
        assert!(self.in_flight_cost_ns >= cost_ns, "completing more cost than is in flight");
        self.in_flight_requests -= 1;
        self.in_flight_cost_ns -= cost_ns;
    }

    /// When the bucket will hold enough for the next request, if tokens
    /// hold it back.
    pub fn ready_at_ns(&mut self, now_ns: u64) -> Option<u64> {
        self.refill(now_ns);
        let index = self.next_class(now_ns)?;
        let needed = self.tokens_needed(self.classes[index].waiting.front()?.cost_ns);
        (self.tokens_ns < needed).then(|| now_ns + (needed - self.tokens_ns) as u64)
    }

    fn refill(&mut self, now_ns: u64) {
        let elapsed_ns = now_ns.saturating_sub(self.refilled_at_ns);
        self.refilled_at_ns = self.refilled_at_ns.max(now_ns);
        let cap = self.config.latency_goal_ns as i64;
        self.tokens_ns = self.tokens_ns.saturating_add(elapsed_ns.min(i64::MAX as u64) as i64).min(cap);
    }

    /// A request larger than the bucket needs a full bucket, then drives
    /// it negative: the rate stays the disk's.
    fn tokens_needed(&self, cost_ns: u64) -> i64 {
        cost_ns.min(self.config.latency_goal_ns) as i64
    }

    fn fits(&self, cost_ns: u64) -> bool {
        self.tokens_ns >= self.tokens_needed(cost_ns)
    }

    /// The class whose head goes next: a head past `max_wait_ns` (the
    /// oldest), else the least accumulated cost.
    fn next_class(&self, now_ns: u64) -> Option<usize> {
        if self.waiting == 0 {
            return None;
        }
        // One pass: the oldest overdue head, and the least accumulated
        // cost (class index and its enqueue time or accumulated cost).
        let mut overdue: Option<(usize, u64)> = None;
        let mut least: Option<(usize, u64)> = None;
        for (i, c) in self.classes.iter().enumerate() {
            let Some(w) = c.waiting.front() else { continue };
            if now_ns.saturating_sub(w.enqueued_ns) >= self.config.max_wait_ns
                && overdue.is_none_or(|(_, at)| w.enqueued_ns < at)
            {
                overdue = Some((i, w.enqueued_ns));
            }
            if least.is_none_or(|(_, acc)| c.accumulated < acc) {
                least = Some((i, c.accumulated));
            }
        }
        overdue.or(least).map(|(i, _)| i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOAL_NS: u64 = 750_000;

    fn config() -> FairQueueConfig {
        FairQueueConfig { latency_goal_ns: GOAL_NS, max_wait_ns: 100_000_000, queue_capacity: 64 }
    }

    /// A fake disk: each request takes its cost in time to complete, and
    /// the clock advances 10 µs per step.
    struct FakeDisk {
        queue: FairQueue<()>,
        now_ns: u64,
        running: Vec<(u64, u64)>,
        dispatched_cost_ns: [u64; 6],
        max_in_flight_ns: u64,
    }

    impl FakeDisk {
        fn new(config: FairQueueConfig) -> FakeDisk {
            FakeDisk {
                queue: FairQueue::new(config, 0),
                now_ns: 0,
                running: Vec::new(),
                dispatched_cost_ns: [0; 6],
                max_in_flight_ns: 0,
            }
        }

        fn step(&mut self) -> Vec<Dispatched<()>> {
            self.now_ns += 10_000;
            let now = self.now_ns;
            let done: Vec<u64> = self.running.iter().filter(|(end, _)| *end <= now).map(|(_, c)| *c).collect();
            self.running.retain(|(end, _)| *end > now);
            for cost in done {
                self.queue.complete(cost);
            }
            let mut dispatched = Vec::new();
            while let Some(d) = self.queue.dispatch(now) {
                self.running.push((now + d.cost_ns, d.cost_ns));
                self.dispatched_cost_ns[d.class as usize] += d.cost_ns;
                dispatched.push(d);
            }
            self.max_in_flight_ns = self.max_in_flight_ns.max(self.queue.in_flight_cost_ns());
            dispatched
        }

        /// Keeps `class` saturated: refills its queue to `depth`.
        fn saturate(&mut self, class: IoClass, cost_ns: u64, depth: usize) {
            while self.queue.queued(class) < depth {
                self.queue.enqueue(class, cost_ns, (), self.now_ns).expect("room");
            }
        }
    }

    #[test]
    fn saturated_classes_share_the_disk_by_shares() {
        let mut disk = FakeDisk::new(config());
        for _ in 0..20_000 {
            disk.saturate(IoClass::Compaction, 50_000, 8);
            disk.saturate(IoClass::Streaming, 50_000, 8);
            disk.step();
        }
        let compaction = disk.dispatched_cost_ns[IoClass::Compaction as usize] as f64;
        let streaming = disk.dispatched_cost_ns[IoClass::Streaming as usize] as f64;
        let ratio = compaction / streaming;
        assert!((4.5..=5.5).contains(&ratio), "1000:200 shares gave {ratio}:1");
        // And the disk was kept busy at its rate: ~all of the 200 ms.
        let total = compaction + streaming;
        assert!(total >= 0.95 * disk.now_ns as f64, "dispatched {total} ns of work in {} ns", disk.now_ns);
    }

    #[test]
    fn the_bucket_bounds_what_is_in_flight() {
        // On a disk that keeps its rate: at most a full bucket's burst
        // beside what is still running of the requests before it.
        const LARGEST_NS: u64 = 200_000;
        let mut disk = FakeDisk::new(config());
        for round in 0..5_000 {
            disk.saturate(IoClass::Query, 30_000 + (round % 7) * 20_000, 16);
            disk.saturate(IoClass::Flush, LARGEST_NS, 16);
            disk.step();
            assert!(disk.queue.in_flight_cost_ns() <= GOAL_NS + LARGEST_NS);
        }
        assert!(disk.max_in_flight_ns > GOAL_NS / 2, "the queue used its room: {}", disk.max_in_flight_ns);
        // Requests that complete at once are still paced at the disk's rate.
        let mut queue: FairQueue<()> = FairQueue::new(config(), 0);
        let mut dispatched_ns = 0;
        for now in (0..10_000_000).step_by(1_000) {
            while queue.queued(IoClass::Query) < 4 {
                queue.enqueue(IoClass::Query, 10_000, (), now).expect("room");
            }
            while let Some(d) = queue.dispatch(now) {
                dispatched_ns += d.cost_ns;
                queue.complete(d.cost_ns);
            }
        }
        assert!(dispatched_ns <= 10_000_000 + GOAL_NS, "dispatched {dispatched_ns} ns of work in 10 ms");
    }

    #[test]
    fn an_oversized_request_goes_alone_and_the_rate_holds() {
        let mut queue: FairQueue<()> = FairQueue::new(config(), 0);
        queue.enqueue(IoClass::Flush, 3 * GOAL_NS, (), 0).expect("room");
        queue.enqueue(IoClass::Flush, 1_000, (), 0).expect("room");
        let big = queue.dispatch(0).expect("a full bucket lets it go");
        assert!(queue.dispatch(0).is_none(), "nothing beside an oversized request");
        queue.complete(big.cost_ns);
        // The bucket is 2 goals in debt: the next waits for the refill.
        assert!(queue.dispatch(GOAL_NS).is_none());
        assert_eq!(queue.ready_at_ns(GOAL_NS), Some(2 * GOAL_NS + 1_000));
        assert!(queue.dispatch(2 * GOAL_NS + 1_000).is_some());
    }

    #[test]
    fn an_idle_class_does_not_bank_credit() {
        let mut disk = FakeDisk::new(config());
        // The query class runs alone for a long while; compaction idles.
        for _ in 0..2_000 {
            disk.saturate(IoClass::Query, 50_000, 8);
            disk.step();
        }
        // Compaction wakes up: it must share from now on, not run alone
        // until it has caught up with the query class's past.
        let before = disk.dispatched_cost_ns;
        for _ in 0..1_000 {
            disk.saturate(IoClass::Query, 50_000, 8);
            disk.saturate(IoClass::Compaction, 50_000, 8);
            disk.step();
        }
        let query = (disk.dispatched_cost_ns[IoClass::Query as usize] - before[IoClass::Query as usize]) as f64;
        let compaction =
            (disk.dispatched_cost_ns[IoClass::Compaction as usize] - before[IoClass::Compaction as usize]) as f64;
        let ratio = compaction / query;
        assert!((0.9..=1.1).contains(&ratio), "equal shares after idling gave {ratio}:1");
    }

    /// How long a one-share class's second request waits beside two
    /// saturated 1000-share classes (its first is charged 1000× its cost).
    fn one_share_wait_ns(max_wait_ns: u64) -> u64 {
        let mut disk = FakeDisk::new(FairQueueConfig { max_wait_ns, ..config() });
        disk.queue.set_shares(IoClass::Maintenance, 1);
        let mut waits = Vec::new();
        for _ in 0..100_000 {
            disk.saturate(IoClass::Query, 50_000, 8);
            disk.saturate(IoClass::Compaction, 50_000, 8);
            if disk.queue.queued(IoClass::Maintenance) == 0 && waits.len() < 2 {
                disk.queue.enqueue(IoClass::Maintenance, 50_000, (), disk.now_ns).expect("room");
            }
            waits.extend(disk.step().into_iter().filter(|d| d.class == IoClass::Maintenance).map(|d| d.waited_ns));
            if waits.len() == 2 {
                return waits[1];
            }
        }
        panic!("the one-share class ran {} times in 1 s", waits.len());
    }

    #[test]
    fn no_request_waits_forever() {
        let max_wait_ns = 5_000_000;
        let bounded = one_share_wait_ns(max_wait_ns);
        assert!(bounded <= max_wait_ns + 20_000, "waited {bounded} ns past a {max_wait_ns} ns bound");
        // Without the bound, fairness alone would have kept it waiting
        // for the others to catch up with its charge (~100 ms).
        let unbounded = one_share_wait_ns(u64::MAX);
        assert!(unbounded > 10 * max_wait_ns, "fairness alone made it wait only {unbounded} ns");
    }

    #[test]
    fn a_request_let_go_at_once_is_charged_as_a_queued_one() {
        let mut at_once: FairQueue<()> = FairQueue::new(config(), 0);
        let mut queued: FairQueue<()> = FairQueue::new(config(), 0);
        for (i, class) in [IoClass::Query, IoClass::Compaction, IoClass::Query, IoClass::Flush].into_iter().enumerate()
        {
            let now = i as u64 * 1_000;
            assert!(at_once.dispatch_now(class, 100_000, now), "nothing waits and the bucket holds it");
            queued.enqueue(class, 100_000, (), now).expect("room");
            queued.dispatch(now).expect("it goes");
        }
        let state = |q: &FairQueue<()>| {
            let accumulated: Vec<u64> = q.classes.iter().map(|c| c.accumulated).collect();
            (accumulated, q.tokens_ns, q.in_flight_cost_ns, q.in_flight_requests, q.last_dispatched_accumulated)
        };
        assert_eq!(state(&at_once), state(&queued));
        // Not past a waiting request, nor beyond the bucket.
        at_once.enqueue(IoClass::Query, 1_000, (), 4_000).expect("room");
        assert!(!at_once.dispatch_now(IoClass::Flush, 1_000, 4_000));
        let mut full: FairQueue<()> = FairQueue::new(config(), 0);
        assert!(full.dispatch_now(IoClass::Query, GOAL_NS, 0));
        assert!(!full.dispatch_now(IoClass::Query, 1, 0), "the bucket is empty");
        assert!(full.dispatch_now(IoClass::Query, 1, 1), "refilled by a nanosecond");
    }

    #[test]
    fn queues_are_bounded() {
        let mut queue: FairQueue<u32> = FairQueue::new(FairQueueConfig { queue_capacity: 2, ..config() }, 0);
        queue.enqueue(IoClass::Query, 1, 1, 0).expect("room");
        queue.enqueue(IoClass::Query, 1, 2, 0).expect("room");
        assert_eq!(queue.enqueue(IoClass::Query, 1, 3, 0), Err(QueueFull));
        queue.enqueue(IoClass::Commitlog, 1, 3, 0).expect("another class has its own room");
    }
}
