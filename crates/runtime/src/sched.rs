//! The shard's CPU scheduler: scheduling groups on top of compio's
//! executor, which runs ready tasks in FIFO order and knows nothing of
//! groups (docs/scheduling.md says why it is built this way).
//!
//! - Work runs in a group with [`in_group`]: each poll of the wrapped
//!   future is timed and charged to the group (its virtual runtime
//!   advances by `elapsed * 1000 / shares`, `cpu_fair.rs`), and the group
//!   is active while the future is alive. Client requests run in
//!   `Statements`, flushes in `Flush`, compactions in `Compaction`, ...
//! - Background loops call [`maybe_yield`] at their yield points (where
//!   they called `yield_now` before): when another active group is behind
//!   them by more than a task quota, they sleep on the reactor for as long
//!   as the others need to catch up, so the core goes to the requests.
//!   Foreground work never waits here.
//! - Service levels get statement groups of their own
//!   ([`set_service_levels`], on every schema change). A connection
//!   whose role has one runs its requests there and, before it starts
//!   the next, asks [`statement_ahead`] (a thread-local flag read when no
//!   level exists) and, when its group is ahead of the other statement
//!   groups, [`give_way`]s as a background loop does: the one place a
//!   request waits, and only for other requests.
//! - The core never idles for fairness: no wait starts when nothing else
//!   ran during the yield, and a wait is slept in slices of [`WAIT_SLICE`]
//!   and ends after a slice in which the other groups used no CPU. Their work is then blocked, perhaps on this group's own (writes
//!   waiting for memtable room wait for the flush that gave way to them).
//! - Everything is this thread's state: no locks, no sharing between
//!   shards but the on/off switch written once at start.
//!
//! With the scheduler off ([`set_enabled`], contrast runs only) time is
//! still accounted, and `maybe_yield` only yields.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::cpu_fair::{
    CpuFair, Group, GroupStats, Wait, WaitEnd, GROUPS, STATEMENT_MAX_WAIT_NS, STATEMENT_WAIT_SLICE_NS,
};

static ENABLED: AtomicBool = AtomicBool::new(true);

thread_local! {
    static FAIR: RefCell<Option<CpuFair>> = const { RefCell::new(None) };
    /// The group of the poll running now (innermost).
    static CURRENT: Cell<Option<Group>> = const { Cell::new(None) };
    /// CPU time of nested group polls inside the running one, so the outer
    /// group is not charged for them too.
    static NESTED_NS: Cell<u64> = const { Cell::new(0) };
    /// When the outermost group poll running now began ([`need_preempt`]).
    static POLL_STARTED: Cell<Option<Instant>> = const { Cell::new(None) };
    /// Whether a service level has a group on this shard: the check a
    /// connection makes before each request when none has.
    static LEVELS: Cell<bool> = const { Cell::new(false) };
    /// Per group, where its connections wait while one sleeps ([`give_way`]).
    static GATES: RefCell<[Gate; GROUPS]> = RefCell::new(Default::default());
}

/// Turns the throttling on (the default) or off, for every shard; set once
/// at start (`--cpu-scheduler off`, contrast runs only).
pub fn set_enabled(enabled: bool) {
    ENABLED.store(enabled, Ordering::Relaxed);
}

pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

fn with_fair<R>(f: impl FnOnce(&mut CpuFair) -> R) -> R {
    FAIR.with(|fair| {
        let mut fair = fair.borrow_mut();
        let fair = fair.get_or_insert_with(|| {
            crate::sched_metrics::register(snapshot);
            CpuFair::default()
        });
        f(fair)
    })
}

/// The group the calling code runs in (`None` outside any).
pub fn current_group() -> Option<Group> {
    CURRENT.with(Cell::get)
}

/// Sets `group`'s shares on this shard (controllers).
pub fn set_shares(group: Group, shares: u32) {
    with_fair(|fair| fair.set_shares(group, shares));
}

/// `group`'s figures on this shard.
pub fn stats(group: Group) -> GroupStats {
    with_fair(|fair| fair.stats(group))
}

/// The service levels (name, shares) this shard gives statement groups,
/// all of them each time (the schema's, as it changes): groups of levels
/// gone are freed, new levels get one ([`CpuFair::set_service_levels`]).
pub fn set_service_levels<'a>(levels: impl IntoIterator<Item = (&'a str, u32)> + Clone) {
    let any = levels.clone().into_iter().next().is_some();
    if !any && !LEVELS.with(Cell::get) {
        // Nothing was defined and nothing is: the scheduler stays as it was
        // (a shard that never had a level never sets one up for it).
        return;
    }
    with_fair(|fair| fair.set_service_levels(levels));
    LEVELS.with(|l| l.set(any));
}

/// The group of service level `name` on this shard, if it has one.
pub fn service_level_group(name: &str) -> Option<Group> {
    if !LEVELS.with(Cell::get) {
        return None;
    }
    with_fair(|fair| fair.service_level(name))
}

/// Whether any service level has a group on this shard (a thread-local
/// flag: the whole cost of service levels for a node that defines none).
pub fn service_levels_defined() -> bool {
    LEVELS.with(Cell::get)
}

/// Whether a connection of statement group `group` should [`give_way`]
/// before it starts its next request: its group is ahead of another
/// contending statement group by more than the slack. False at once when
/// no service level exists or the scheduler is off.
pub fn statement_ahead(group: Group) -> bool {
    debug_assert!(group.is_statement(), "{group} runs no requests");
    LEVELS.with(Cell::get) && enabled() && with_fair(|fair| fair.lag_behind(group).is_some())
}

/// A connection of statement group `group` holds its next request back
/// until the statement groups behind it have caught up at their shares,
/// as a background loop gives way at [`maybe_yield`]: bounded by
/// `STATEMENT_MAX_WAIT_NS`, ended early by a slice in which they used no
/// CPU.
/// Requests already under way go on. One connection of the group sleeps
/// the wait; the group's others that arrive meanwhile wait for it to end
/// (a level with a thousand connections sets one timer, not a thousand).
pub async fn give_way(group: Group) {
    if GATES.with(|gates| gates.borrow()[group.index()].closed) {
        return behind_gate(group).await;
    }
    let others_ns = with_fair(|fair| fair.others_runtime_ns(group));
    let Some(wait) = start_wait(group) else { return };
    let _open = Gate::close(group);
    wait_for_others(group, wait, others_ns).await;
}

/// Where a statement group's connections wait while one of them sleeps
/// the group's wait ([`give_way`]). Bounded: a connection waits at one
/// gate at a time, so the wakers are at most the group's connections.
#[derive(Default)]
struct Gate {
    closed: bool,
    /// Counts the waits that ended, so a woken follower knows its own did.
    opened: u64,
    wakers: Vec<std::task::Waker>,
}

impl Gate {
    /// Closes `group`'s gate until the returned guard drops (the wait
    /// ended, or the connection that slept it went away).
    fn close(group: Group) -> impl Drop {
        GATES.with(|gates| gates.borrow_mut()[group.index()].closed = true);
        OpenOnDrop(group)
    }
}

struct OpenOnDrop(Group);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        // At thread exit the gates may be gone; nobody waits then.
        let wakers = GATES.try_with(|gates| {
            let mut gates = gates.borrow_mut();
            let gate = &mut gates[self.0.index()];
            gate.closed = false;
            gate.opened += 1;
            std::mem::take(&mut gate.wakers)
        });
        wakers.into_iter().flatten().for_each(std::task::Waker::wake);
    }
}

/// Waits until `group`'s gate opens.
async fn behind_gate(group: Group) {
    let opened = GATES.with(|gates| gates.borrow()[group.index()].opened);
    std::future::poll_fn(|cx| {
        GATES.with(|gates| {
            let mut gates = gates.borrow_mut();
            let gate = &mut gates[group.index()];
            if gate.opened != opened {
                return Poll::Ready(());
            }
            if !gate.wakers.iter().any(|w| w.will_wake(cx.waker())) {
                gate.wakers.push(cx.waker().clone());
            }
            Poll::Pending
        })
    })
    .await;
}

/// Runs `future` in `group`: its CPU time is charged to the group, and the
/// group is active while it lives.
pub fn in_group<F: Future>(group: Group, future: F) -> InGroup<F> {
    with_fair(|fair| fair.activate(group));
    InGroup { group, future }
}

/// Runs `future` in `group` when there is one, else as it is (work handed
/// from a caller that ran outside any group).
pub async fn in_group_if<F: Future>(group: Option<Group>, future: F) -> F::Output {
    match group {
        Some(group) => in_group(group, future).await,
        None => future.await,
    }
}

pin_project_lite::pin_project! {
    /// A future running in a group ([`in_group`]).
    pub struct InGroup<F> {
        group: Group,
        #[pin]
        future: F,
    }

    impl<F> PinnedDrop for InGroup<F> {
        fn drop(this: Pin<&mut Self>) {
            let group = this.group;
            // A shard's thread-locals may be gone when a task is dropped at
            // thread exit; there is nothing left to account then.
            let _ = FAIR.try_with(|fair| {
                if let Some(fair) = fair.try_borrow_mut().ok().as_mut().and_then(|f| f.as_mut()) {
                    fair.deactivate(group);
                }
            });
        }
    }
}

impl<F: Future> Future for InGroup<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let group = *this.group;
        let outer = CURRENT.with(|c| c.replace(Some(group)));
        let outer_nested = NESTED_NS.with(|n| n.replace(0));
        let started = Instant::now();
        if outer.is_none() {
            POLL_STARTED.with(|s| s.set(Some(started)));
        }
        let result = this.future.poll(cx);
        if outer.is_none() {
            POLL_STARTED.with(|s| s.set(None));
        }
        let elapsed = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let nested = NESTED_NS.with(|n| n.replace(outer_nested.saturating_add(elapsed)));
        CURRENT.with(|c| c.set(outer));
        with_fair(|fair| fair.charge(group, elapsed.saturating_sub(nested)));
        result
    }
}

/// Whether the task running now, in a group, has held the core for a
/// [`TASK_QUOTA`] in this poll (Seastar's `need_preempt`): a long loop's
/// cue to call [`maybe_yield`]. Yielding by time rather than every so
/// many items keeps each step within the quota whatever an item costs
/// (flushing 1 KiB items took ~20 µs each, cache merge included: over a
/// millisecond per 64-partition step). Outside any group: false.
pub fn need_preempt() -> bool {
    POLL_STARTED.with(Cell::get).is_some_and(|started| started.elapsed() >= TASK_QUOTA)
}

/// A background loop's yield point: lets the shard's other ready tasks
/// run, and, when the calling group has had more than its share of the
/// core while another group has work under way, gives the core back until
/// it is fair again. Outside any group it only yields.
pub async fn maybe_yield() {
    let group = current_group();
    let others_before_ns = group.map(|g| with_fair(|fair| fair.others_runtime_ns(g)));
    crate::task::yield_now().await;
    let (Some(group), Some(others_before_ns)) = (group, others_before_ns) else { return };
    if !enabled() {
        return;
    }
    let others_ns = with_fair(|fair| fair.others_runtime_ns(group));
    if others_ns == others_before_ns {
        // Nothing else ran while this stood aside: the core is not wanted.
        with_fair(|fair| fair.offer_unused(group));
        return;
    }
    let Some(wait) = start_wait(group) else { return };
    wait_for_others(group, wait, others_ns).await;
}

/// How long `group` is to give the core back, its wait counted as begun;
/// `None` when it may go on.
fn start_wait(group: Group) -> Option<(u64, Wait)> {
    with_fair(|fair| {
        let wait_ns = fair.lag_behind(group)?;
        Some((wait_ns, fair.wait_started(group)))
    })
}

/// Sleeps in slices while the groups `group` gives way to use the core
/// (`others_ns`: their CPU time when the wait began), then counts the
/// wait. A background group sleeps `wait_ns` (the time they need at their
/// shares); a statement group until they have caught up (its other
/// connections' requests under way may run meanwhile), at most
/// `STATEMENT_MAX_WAIT_NS`. Either ends after a slice in which they used
/// no CPU.
async fn wait_for_others(group: Group, (wait_ns, wait): (u64, Wait), mut others_ns: u64) {
    let until_caught_up = group.is_statement();
    let mut counted = Counted { wait: Some(wait), started: Instant::now(), end: None };
    let deadline =
        counted.started + Duration::from_nanos(if until_caught_up { STATEMENT_MAX_WAIT_NS } else { wait_ns });
    let slice = if until_caught_up { Duration::from_nanos(STATEMENT_WAIT_SLICE_NS) } else { WAIT_SLICE };
    // Bounded: each slice ends nearer the deadline, at most a cap away.
    counted.end = Some(loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            // A background wait lasted what the others needed; a statement
            // wait at its cap keeps the lead (the next request waits again).
            break if until_caught_up { WaitEnd::CaughtUp } else { WaitEnd::Served };
        }
        let asleep = Instant::now();
        crate::time::sleep(left.min(slice)).await;
        let now_ns = with_fair(|fair| fair.others_runtime_ns(group));
        // A statement group's slice that ended late says nothing: the OS
        // had the thread (a busy machine), and the others had no chance.
        let on_time = !until_caught_up || asleep.elapsed() <= slice + slice / 2;
        if now_ns == others_ns && on_time {
            break WaitEnd::Served; // They had the core and did not use it.
        }
        others_ns = now_ns;
        if until_caught_up && with_fair(|fair| fair.lag_behind(group).is_none()) {
            break WaitEnd::CaughtUp;
        }
    });
}

/// Counts a wait as it ends, however it ends: a waiting task may be
/// dropped (its connection closed, its compaction stopped), and its wait
/// must not stay counted as under way. One that was dropped counts as
/// caught up: it raises nobody.
struct Counted {
    wait: Option<Wait>,
    started: Instant,
    /// How it ended; `None` while under way.
    end: Option<WaitEnd>,
}

impl Drop for Counted {
    fn drop(&mut self) {
        let Some(wait) = self.wait.take() else { return };
        let end = self.end.unwrap_or(WaitEnd::CaughtUp);
        let waited = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        // At thread exit the scheduler may be gone; nothing to count then.
        let _ = FAIR.try_with(|fair| {
            if let Some(fair) = fair.try_borrow_mut().ok().as_mut().and_then(|f| f.as_mut()) {
                fair.waited(wait, waited, end);
            }
        });
    }
}

/// How long background work may hold the shard between two polls of the
/// reactor (Seastar's task quota).
pub const TASK_QUOTA: Duration = Duration::from_micros(500);

/// The slice a wait is slept in ([`maybe_yield`]): half Seastar's task
/// quota, so an idle core is noticed within a fraction of a task's run.
pub const WAIT_SLICE: Duration = Duration::from_micros(250);

/// Every group's figures on this shard (metrics); `None` before the
/// scheduler was first used here.
pub(crate) fn snapshot() -> Option<Vec<(String, GroupStats)>> {
    FAIR.with(|fair| {
        let fair = fair.borrow();
        let fair = fair.as_ref()?;
        Some(fair.groups().filter_map(|g| Some((fair.label(g)?, fair.stats(g)))).collect())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_is_active_while_its_future_lives_and_charged_for_its_polls() {
        compio::runtime::Runtime::new().expect("a runtime").block_on(async {
            let before = stats(Group::Maintenance);
            let work = in_group(Group::Maintenance, async {
                assert_eq!(current_group(), Some(Group::Maintenance));
                std::thread::sleep(Duration::from_millis(2));
                maybe_yield().await;
            });
            assert_eq!(stats(Group::Maintenance).active, before.active + 1);
            work.await;
            let after = stats(Group::Maintenance);
            assert_eq!(after.active, before.active);
            assert!(after.runtime_ns >= before.runtime_ns + 2_000_000);
            assert!(after.tasks >= before.tasks + 2, "two polls: before and after the yield");
            assert_eq!(current_group(), None);
        });
    }

    /// A compaction that ran far past its share beside `statements`, then
    /// reached a yield point: how long it gave the core back.
    fn wait_beside(statements: impl Future<Output = ()> + 'static) -> Duration {
        compio::runtime::Runtime::new().expect("a runtime").block_on(async {
            set_shares(Group::Compaction, 50);
            let statements = compio::runtime::spawn(in_group(Group::Statements, statements));
            let waited = in_group(Group::Compaction, async {
                std::thread::sleep(Duration::from_millis(5));
                let started = Instant::now();
                maybe_yield().await;
                started.elapsed()
            })
            .await;
            drop(statements);
            waited
        })
    }

    #[test]
    fn a_wait_lasts_while_the_others_use_the_core_and_ends_when_they_stop() {
        // Requests that keep running: the compaction waits for them (its
        // 5 ms at 50 shares is 100 ms of theirs, capped at MAX_WAIT_NS).
        let busy = wait_beside(async {
            loop {
                std::thread::sleep(Duration::from_micros(200));
                crate::task::yield_now().await;
            }
        });
        assert!(busy >= Duration::from_millis(10), "waited only {busy:?} beside running requests");
        // Requests that wait on something (the flush, the disk): the core
        // would idle, so the wait ends after a slice (bounded loosely: on a
        // loaded machine the reactor's wake-up itself can take a while).
        let blocked = wait_beside(std::future::pending());
        assert!(blocked < Duration::from_millis(5), "waited {blocked:?} beside blocked requests");
    }

    #[test]
    fn need_preempt_once_a_poll_has_held_the_core_for_a_task_quota() {
        compio::runtime::Runtime::new().expect("a runtime").block_on(async {
            assert!(!need_preempt(), "outside any group");
            in_group(Group::Flush, async {
                assert!(!need_preempt(), "a poll that just began");
                std::thread::sleep(TASK_QUOTA);
                assert!(in_group(Group::Compaction, async { need_preempt() }).await, "nested: the outer poll counts");
                assert!(need_preempt());
                maybe_yield().await;
                assert!(!need_preempt(), "a new poll after the yield");
            })
            .await;
            assert!(!need_preempt());
        });
    }

    #[test]
    fn every_group_shows_in_the_metrics() {
        compio::runtime::Runtime::new().expect("a runtime").block_on(async {
            in_group(Group::Compaction, async {}).await;
            let families = shoal_metrics::gather();
            for name in ["scylla_scheduler_runtime_ms", "scylla_scheduler_tasks_processed", "scylla_scheduler_shares"] {
                let family = families.iter().find(|f| f.name == name);
                assert_eq!(family.map(|f| f.samples.len()), Some(Group::ALL.len()), "{name}");
            }
        });
    }

    #[test]
    fn a_nested_group_is_not_charged_to_the_outer_one() {
        compio::runtime::Runtime::new().expect("a runtime").block_on(async {
            let (streaming, flush) = (stats(Group::Streaming).runtime_ns, stats(Group::Flush).runtime_ns);
            in_group(Group::Streaming, async {
                in_group(Group::Flush, async { std::thread::sleep(Duration::from_millis(5)) }).await;
            })
            .await;
            assert!(stats(Group::Flush).runtime_ns >= flush + 5_000_000);
            assert!(stats(Group::Streaming).runtime_ns < streaming + 2_000_000);
        });
    }

    #[test]
    fn a_level_ahead_of_another_waits_for_it_once_per_group() {
        compio::runtime::Runtime::new().expect("a runtime").block_on(async {
            assert!(!service_levels_defined());
            assert!(!statement_ahead(Group::Statements), "no level: the check is a flag");
            set_service_levels([("high", 1000), ("low", 200)]);
            let (high, low) = (service_level_group("high").expect("high"), service_level_group("low").expect("low"));
            // The high level's clients keep sending requests.
            let busy = compio::runtime::spawn(async move {
                loop {
                    in_group(high, async { std::thread::sleep(Duration::from_micros(100)) }).await;
                    crate::task::yield_now().await;
                }
            });
            crate::task::yield_now().await;
            // A low request takes 4 ms: 20 ms of its virtual time; then a
            // high one runs.
            in_group(low, async { std::thread::sleep(Duration::from_millis(4)) }).await;
            crate::task::yield_now().await;
            assert!(statement_ahead(low), "{:?} {:?}", stats(low), stats(high));
            assert!(!statement_ahead(high), "the level behind never waits");
            // Two connections of the low level: one sleeps the wait, the
            // other waits for it at the gate; both go on once high caught up.
            let started = Instant::now();
            let sleeper = give_way(low);
            let follower = give_way(low);
            futures_util::future::join(sleeper, follower).await;
            let waited = started.elapsed();
            assert!(waited >= Duration::from_millis(4), "waited only {waited:?}");
            assert!(!statement_ahead(low));
            let stats = stats(low);
            assert_eq!(stats.waiting, 0);
            assert!(stats.wait_ns >= 4_000_000 && stats.wait_ns < 2 * waited.as_nanos() as u64, "{stats:?}");
            drop(busy);
            set_service_levels(std::iter::empty());
            assert!(!service_levels_defined());
            assert_eq!(service_level_group("low"), None);
        });
    }

    #[test]
    fn service_levels_show_in_the_metrics_by_name() {
        compio::runtime::Runtime::new().expect("a runtime").block_on(async {
            set_service_levels([("gold", 700)]);
            let gold = service_level_group("gold").expect("gold");
            in_group(gold, async {}).await;
            let families = shoal_metrics::gather();
            let shares = families.iter().find(|f| f.name == "scylla_scheduler_shares").expect("shares");
            assert_eq!(shares.samples.len(), Group::ALL.len() + 1);
            let gold_sample = shares.samples.iter().find(|s| s.labels.iter().any(|(_, v)| v.as_str() == "sl:gold"));
            assert!(gold_sample.is_some(), "{:?}", shares.samples.iter().map(|s| &s.labels).collect::<Vec<_>>());
        });
    }
}
