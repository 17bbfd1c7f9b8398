//! The shard's I/O queue: every read and write of this crate waits here
//! for its turn ([`admit`]), so the fair queue (`fair_queue.rs`) decides
//! what reaches the disk and when.
//!
//! The queue lives in the shard's thread-local state: no locks, nothing
//! shared between shards but the node's settings ([`configure`], written
//! once before the shards start). Each shard owns `1 / shard_count` of
//! the disk's capacity (`cost.rs`).
//!
//! Dispatch happens on three events: a request arrives, a request
//! completes (its [`Admission`] is dropped) and, when only the token
//! bucket holds the next request back, a timer set for the moment the
//! bucket holds enough. A request abandoned while it waits is skipped
//! when its turn comes. Syncs, opens and renames are not scheduled (they
//! move no data); reads and writes are.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::OnceLock;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::class::IoClass;
use crate::cost::{CostModel, Direction, IoProperties};
use crate::fair_queue::{FairQueue, FairQueueConfig};

/// The node's scheduler settings, the same on every shard.
#[derive(Debug, Clone, Copy)]
pub struct SchedulerConfig {
    /// Off only for contrast benchmarks (`--io-scheduler off`).
    pub enabled: bool,
    /// The whole disk's capacity (all shards).
    pub properties: IoProperties,
    pub shard_count: usize,
    /// Seastar's `io_latency_goal_ms`: the most disk time in flight.
    pub latency_goal_us: u64,
}

/// Seastar's default goal when the disk gives none (1.5 × its 0.5 ms task quota).
pub const DEFAULT_LATENCY_GOAL_US: u64 = 750;
/// A request that has waited this many latency goals jumps the fair order.
const MAX_WAIT_LATENCY_GOALS: u64 = 1_000;
/// Waiting requests per class and shard.
const QUEUE_CAPACITY: usize = 16_384;

static CONFIG: OnceLock<SchedulerConfig> = OnceLock::new();

/// Sets the node's scheduler settings; call once, before the shards start
/// (a shard reads them at its first request). Without it, requests are
/// not scheduled (tools and tests).
pub fn configure(config: SchedulerConfig) {
    assert!(config.shard_count > 0, "a node has at least one shard");
    assert!(config.latency_goal_us > 0, "a latency goal lets something through");
    if CONFIG.set(config).is_err() {
        tracing::warn!("the I/O scheduler was configured twice; the first settings stay");
    }
}

/// A waiting request's state, shared by its future and the queue.
#[derive(Default)]
struct Slot {
    dispatched: Cell<bool>,
    abandoned: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

/// One class's figures on this shard (metrics).
#[derive(Default, Clone, Copy)]
pub(crate) struct ClassStats {
    pub in_flight: u64,
    pub ops_dispatched: u64,
    pub bytes_dispatched: u64,
    pub queue_delay_ns: u64,
}

impl ClassStats {
    /// A request of `bytes` let go after waiting `waited_ns`.
    fn dispatched(&mut self, bytes: usize, waited_ns: u64) {
        self.in_flight += 1;
        self.ops_dispatched += 1;
        self.bytes_dispatched += bytes as u64;
        self.queue_delay_ns += waited_ns;
    }
}

struct ShardQueue {
    fair: FairQueue<(Rc<Slot>, usize)>,
    model: CostModel,
    started: Instant,
    timer_set_for_ns: Option<u64>,
    stats: [ClassStats; 6],
}

thread_local! {
    static QUEUE: RefCell<Option<ShardQueue>> = const { RefCell::new(None) };
}

impl ShardQueue {
    fn new(config: &SchedulerConfig) -> ShardQueue {
        let latency_goal_ns = config.latency_goal_us * 1_000;
        let fair_config = FairQueueConfig {
            latency_goal_ns,
            max_wait_ns: latency_goal_ns * MAX_WAIT_LATENCY_GOALS,
            queue_capacity: QUEUE_CAPACITY,
        };
        ShardQueue {
            fair: FairQueue::new(fair_config, 0),
            model: CostModel::new(config.properties.per_shard(config.shard_count)),
            started: Instant::now(),
            timer_set_for_ns: None,
            stats: [ClassStats::default(); 6],
        }
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Lets go what may go now; returns the wakers to call (outside the
    /// borrow) and whether a timer must be set, for when.
    fn pump(&mut self) -> (Vec<Waker>, Option<u64>) {
        let now_ns = self.now_ns();
        let mut wakers = Vec::new();
        while let Some(dispatched) = self.fair.dispatch(now_ns) {
            let (slot, bytes) = dispatched.item;
            if slot.abandoned.get() {
                self.fair.complete(dispatched.cost_ns);
                continue;
            }
            self.stats[dispatched.class as usize].dispatched(bytes, dispatched.waited_ns);
            slot.dispatched.set(true);
            let waker = slot.waker.borrow_mut().take();
            wakers.extend(waker);
        }
        let timer = match (self.fair.ready_at_ns(now_ns), self.timer_set_for_ns) {
            (Some(at_ns), None) => {
                self.timer_set_for_ns = Some(at_ns);
                Some(at_ns - now_ns)
            }
            _ => None,
        };
        (wakers, timer)
    }
}

/// Runs `f` on this shard's queue, if the scheduler is on.
fn with_queue<R>(f: impl FnOnce(&mut ShardQueue) -> R) -> Option<R> {
    let config = CONFIG.get().filter(|c| c.enabled)?;
    QUEUE.with(|queue| {
        let mut queue = queue.borrow_mut();
        if queue.is_none() {
            *queue = Some(ShardQueue::new(config));
            crate::metrics::register();
        }
        queue.as_mut().map(f)
    })
}

/// Dispatches what may go and wakes it; sets the refill timer if needed.
fn pump() {
    let Some((wakers, timer_in_ns)) = with_queue(ShardQueue::pump) else { return };
    for waker in wakers {
        waker.wake();
    }
    if let Some(in_ns) = timer_in_ns {
        compio::runtime::spawn(async move {
            compio::time::sleep(Duration::from_nanos(in_ns)).await;
            with_queue(|q| q.timer_set_for_ns = None);
            pump();
        })
        .detach();
    }
}

/// A request's place at the disk: held while it runs, released (and the
/// next requests let go) when dropped.
pub(crate) struct Admission {
    state: State,
    class: IoClass,
    cost_ns: u64,
}

enum State {
    /// Not paced: the scheduler is off, or the class's queue was full.
    Unpaced,
    /// Let go at once: nothing waited and the bucket held its cost.
    Running,
    /// Queued: running once the slot says it was dispatched.
    Queued(Rc<Slot>),
}

impl Drop for Admission {
    fn drop(&mut self) {
        match &self.state {
            State::Unpaced => return,
            State::Queued(slot) if !slot.dispatched.get() => {
                slot.abandoned.set(true);
                return;
            }
            State::Running | State::Queued(_) => {}
        }
        let (class, cost_ns) = (self.class, self.cost_ns);
        let waiting = with_queue(|q| {
            q.fair.complete(cost_ns);
            q.stats[class as usize].in_flight -= 1;
            q.fair.has_waiting()
        });
        // A completion releases no tokens, but time has passed: the
        // waiting may go (nothing to do, and no clock to read, if none).
        if waiting == Some(true) {
            pump();
        }
    }
}

/// Waits until the shard's queue lets a request of `class` moving `bytes`
/// in `direction` go; hold the result while the request runs. Immediate
/// when the scheduler is off, and when the class's queue is full (the
/// bound keeps the queue's memory finite; such a request is not paced).
/// A request that finds nothing waiting and the bucket holding its cost
/// goes at once, never queued (no slot, no pump).
pub(crate) async fn admit(class: IoClass, direction: Direction, bytes: usize) -> Admission {
    let class = crate::class::effective(class);
    let queued = with_queue(|q| {
        let cost_ns = q.model.cost_ns(direction, bytes);
        let now_ns = q.now_ns();
        if q.fair.dispatch_now(class, cost_ns, now_ns) {
            q.stats[class as usize].dispatched(bytes, 0);
            return Some((State::Running, cost_ns));
        }
        let slot = Rc::new(Slot::default());
        q.fair.enqueue(class, cost_ns, (Rc::clone(&slot), bytes), now_ns).ok().map(|()| (State::Queued(slot), cost_ns))
    })
    .flatten();
    let Some((state, cost_ns)) = queued else {
        return Admission { state: State::Unpaced, class, cost_ns: 0 };
    };
    let admission = Admission { state, class, cost_ns };
    if let State::Queued(slot) = &admission.state {
        pump();
        Turn { slot }.await;
    }
    admission
}

/// Resolves once the queue has dispatched the slot.
struct Turn<'a> {
    slot: &'a Slot,
}

impl Future for Turn<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.slot.dispatched.get() {
            return Poll::Ready(());
        }
        *self.slot.waker.borrow_mut() = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// Sets `class`'s shares on this shard's queue (the controllers); nothing
/// while the scheduler is off.
pub fn set_shares(class: IoClass, shares: u32) {
    with_queue(|q| q.fair.set_shares(class, shares.max(1)));
}

/// This shard's per-class figures and shares, for the metrics; `None`
/// while the scheduler is off or unused here.
pub(crate) fn snapshot() -> Option<Vec<(IoClass, ClassStats, usize, u32)>> {
    QUEUE.with(|queue| {
        let queue = queue.borrow();
        let queue = queue.as_ref()?;
        Some(
            IoClass::ALL
                .iter()
                .map(|&class| (class, queue.stats[class as usize], queue.fair.queued(class), queue.fair.shares(class)))
                .collect(),
        )
    })
}
