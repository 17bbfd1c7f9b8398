//! A shard's low-resolution deadlines (ScyllaDB's `lowres_clock`, on which
//! its request and RPC timeouts run): one sweep per shard every [`TICK`],
//! while anything waits, wakes the waits whose deadline passed, instead of
//! a runtime timer per wait.
//!
//! A coordinator waits on its request's deadline while replicas answer,
//! and an internode request on its verb's timeout while its peer answers;
//! nearly always the answer comes first. A runtime timer is inserted into
//! and removed from the reactor's timer heap for each wait and reads the
//! clock each time; here a wait that ends before its deadline costs a slot
//! taken and given back. A deadline so fires up to one tick late; one
//! already past is ready at once.
//!
//! A [`Deadline`] is a slot: its instant, whether the sweep saw it pass,
//! and the waker of the task that waits on it. The slot is also where an
//! answer that comes first wakes its waiter ([`Deadline::take_waker`]),
//! so a request keeps one waker, not one for its answer and one for its
//! timeout. [`expiry`] is the future for a wait that may end at once (its
//! slot taken on its first pending poll); [`timeout_at`] bounds a future.
//!
//! Shard-local: the slots and the sweep belong to the shard whose tasks
//! wait (plain cells, no locks; a [`Deadline`] is not `Send`). The sweep
//! ends when nothing waits, so an idle shard has no timer; a tick wakes
//! each passed wait outside the table's borrow, one at a time, with no
//! list built.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// How often the sweep looks for deadlines that passed: how late one may
/// fire.
pub const TICK: Duration = Duration::from_millis(10);

/// A deadline's slot in its shard's sweep, held until dropped.
pub struct Deadline {
    index: usize,
    /// A slot belongs to the shard that took it.
    _shard_local: PhantomData<*const ()>,
}

struct Slot {
    at: Instant,
    waker: Option<Waker>,
    passed: bool,
}

#[derive(Default)]
struct Sweep {
    /// Slots by index; `None` is free (and in `free`).
    slots: RefCell<Vec<Option<Slot>>>,
    free: RefCell<Vec<usize>>,
    /// Slots taken, and whether the sweep task runs.
    taken: Cell<usize>,
    running: Cell<bool>,
    /// The instant of the running sweep's last tick (or of a deadline
    /// taken before its first): a clock read about a tick old at most.
    now: Cell<Option<Instant>>,
}

thread_local! {
    static SWEEP: Sweep = Sweep::default();
}

impl Deadline {
    /// A slot for `at`, whether or not it has passed.
    pub fn at(at: Instant) -> Deadline {
        SWEEP.with(|sweep| Deadline { index: sweep.take(at), _shard_local: PhantomData })
    }

    /// A slot for `timeout` from now, on the clock the sweep last read
    /// (no clock read while it runs; ScyllaDB's `lowres_clock::now()`
    /// too): it passes up to two ticks after `timeout`, and on a shard
    /// too busy to tick on time, by as much as its tick is late, early.
    pub fn after(timeout: Duration) -> Deadline {
        let now = SWEEP.with(|sweep| match (sweep.running.get(), sweep.now.get()) {
            // The sweep's clock is under a tick old: a tick more makes up
            // for it.
            (true, Some(tick)) => tick + TICK,
            _ => {
                let now = Instant::now();
                sweep.now.set(Some(now));
                now
            }
        });
        Deadline::at(now.checked_add(timeout).unwrap_or(now + Duration::from_secs(86_400 * 365)))
    }

    /// Ready once the sweep saw the deadline pass; until then `cx`'s task
    /// is the one woken, when it passes or by [`Deadline::take_waker`].
    pub fn poll_passed(&self, cx: &mut Context<'_>) -> Poll<()> {
        SWEEP.with(|sweep| {
            let mut slots = sweep.slots.borrow_mut();
            let slot = slot_mut(&mut slots, self.index);
            if slot.passed {
                return Poll::Ready(());
            }
            match &slot.waker {
                Some(waker) if waker.will_wake(cx.waker()) => {}
                _ => slot.waker = Some(cx.waker().clone()),
            }
            Poll::Pending
        })
    }

    /// The waker of the task waiting on this deadline, taken: for what it
    /// waits on besides (an answer) to wake it, outside any borrow.
    pub fn take_waker(&self) -> Option<Waker> {
        SWEEP.with(|sweep| slot_mut(&mut sweep.slots.borrow_mut(), self.index).waker.take())
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        // A shard's thread-locals go before its tasks at thread exit:
        // nothing to give back to then.
        let _ = SWEEP.try_with(|sweep| sweep.release(self.index));
    }
}

/// Invariant: a taken slot is held until its [`Deadline`] is dropped.
fn slot_mut(slots: &mut [Option<Slot>], index: usize) -> &mut Slot {
    slots[index].as_mut().expect("a deadline's slot is held until it is dropped")
}

impl Sweep {
    fn take(&self, at: Instant) -> usize {
        let slot = Slot { at, waker: None, passed: false };
        let mut slots = self.slots.borrow_mut();
        let index = match self.free.borrow_mut().pop() {
            Some(index) => {
                slots[index] = Some(slot);
                index
            }
            None => {
                slots.push(Some(slot));
                slots.len() - 1
            }
        };
        self.taken.set(self.taken.get() + 1);
        if !self.running.replace(true) {
            crate::spawn(run_sweep());
        }
        index
    }

    fn release(&self, index: usize) {
        self.slots.borrow_mut()[index] = None;
        self.free.borrow_mut().push(index);
        self.taken.set(self.taken.get() - 1);
    }

    /// Marks the slots whose deadline is `now` or before as passed and
    /// wakes their tasks, each outside the borrow (a waker may run its
    /// task's code, which may take or give back a slot).
    fn pass(&self, now: Instant) {
        let mut index = 0;
        loop {
            let waker = {
                let mut slots = self.slots.borrow_mut();
                let Some(slot) = slots.get_mut(index) else { return };
                match slot {
                    Some(slot) if !slot.passed && slot.at <= now => {
                        slot.passed = true;
                        slot.waker.take()
                    }
                    _ => None,
                }
            };
            if let Some(waker) = waker {
                waker.wake();
            }
            index += 1;
        }
    }
}

/// Every tick, wakes the waits that passed their deadline; ends once
/// nothing waits.
async fn run_sweep() {
    // However the sweep ends (nothing waits, or the shard's executor drops
    // it), the next deadline starts another.
    let _running = Running;
    loop {
        crate::time::sleep(TICK).await;
        let now = Instant::now();
        let idle = SWEEP.with(|sweep| {
            sweep.now.set(Some(now));
            sweep.pass(now);
            if sweep.taken.get() > 0 {
                return false;
            }
            // All slots are free: the table shrinks back.
            sweep.slots.borrow_mut().clear();
            sweep.free.borrow_mut().clear();
            true
        });
        if idle {
            return;
        }
    }
}

/// Marks the sweep stopped when dropped.
struct Running;

impl Drop for Running {
    fn drop(&mut self) {
        let _ = SWEEP.try_with(|sweep| {
            sweep.running.set(false);
            // Its clock is read afresh by the next sweep's first deadline.
            sweep.now.set(None);
        });
    }
}

/// Ready once `at` has passed (up to a [`TICK`] later).
pub fn expiry(at: Instant) -> Expiry {
    Expiry { at, deadline: None }
}

/// The future of [`expiry`]: takes its slot on its first pending poll
/// (none for a deadline already past), gives it back when it ends or is
/// dropped.
pub struct Expiry {
    at: Instant,
    deadline: Option<Deadline>,
}

impl Future for Expiry {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.deadline.is_none() {
            if Instant::now() >= self.at {
                return Poll::Ready(());
            }
            self.deadline = Some(Deadline::at(self.at));
        }
        if self.deadline.as_ref().is_some_and(|deadline| deadline.poll_passed(cx).is_pending()) {
            return Poll::Pending;
        }
        self.deadline = None;
        Poll::Ready(())
    }
}

/// Why [`timeout_at`] ended without its future's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the deadline passed")]
pub struct Passed;

/// `future`'s output, or [`Passed`] if `at` passes first (up to a
/// [`TICK`] later); `future` is dropped then.
pub async fn timeout_at<F: Future>(at: Instant, future: F) -> Result<F::Output, Passed> {
    let mut future = std::pin::pin!(future);
    let mut expiry = expiry(at);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(output) = future.as_mut().poll(cx) {
            return Poll::Ready(Ok(output));
        }
        Pin::new(&mut expiry).poll(cx).map(|()| Err(Passed))
    })
    .await
}

#[cfg(test)]
mod tests {
    use futures_util::future::{select, Either};

    use super::*;

    /// Runs `test` on a shard of its own and returns what it returns.
    fn on_a_shard<T: Send + 'static, Fut: Future<Output = T> + 'static>(
        test: impl Fn() -> Fut + Send + Sync + 'static,
    ) -> T {
        crate::run_on_a_shard(Duration::from_secs(20), test).expect("the test ends")
    }

    fn taken() -> usize {
        SWEEP.with(|sweep| sweep.taken.get())
    }

    #[test]
    fn a_deadline_fires_no_sooner_and_at_most_a_few_ticks_late() {
        let (late, taken) = on_a_shard(|| async {
            let at = Instant::now() + Duration::from_millis(30);
            expiry(at).await;
            (Instant::now().checked_duration_since(at), taken())
        });
        let late = late.expect("not fired before its deadline");
        // A tick late, and room for a loaded machine.
        assert!(late < Duration::from_secs(1), "fired {late:?} late");
        assert_eq!(taken, 0, "the slot was given back");
    }

    #[test]
    fn a_deadline_after_a_timeout_waits_at_least_that_long() {
        let waited = on_a_shard(|| async {
            // A running sweep, whose clock the second deadline reads.
            let _first = Deadline::after(Duration::from_secs(60));
            crate::time::sleep(TICK * 3).await;
            let started = Instant::now();
            let deadline = Deadline::after(Duration::from_millis(50));
            std::future::poll_fn(|cx| deadline.poll_passed(cx)).await;
            started.elapsed()
        });
        assert!(waited >= Duration::from_millis(50), "{waited:?}");
        assert!(waited < Duration::from_secs(2), "{waited:?}");
    }

    #[test]
    fn a_past_deadline_is_ready_at_once_and_takes_no_slot() {
        let (ready, slot) = on_a_shard(|| async {
            let mut past = expiry(Instant::now() - Duration::from_millis(1));
            let ready = futures_util::poll!(&mut past).is_ready();
            (ready, past.deadline.is_some())
        });
        assert!(ready);
        assert!(!slot);
    }

    #[test]
    fn a_wait_that_ends_first_gives_its_slot_back_and_the_sweep_stops() {
        let (taken, running, slots) = on_a_shard(|| async {
            let far = expiry(Instant::now() + Duration::from_secs(60));
            let near = crate::time::sleep(Duration::from_millis(5));
            match select(Box::pin(far), Box::pin(near)).await {
                Either::Left(_) => panic!("a minute's deadline fired"),
                Either::Right((_, far)) => drop(far),
            }
            let taken = taken();
            // The sweep notices at its next tick that nothing waits.
            crate::time::sleep(TICK * 5).await;
            SWEEP.with(|sweep| (taken, sweep.running.get(), sweep.slots.borrow().len()))
        });
        assert_eq!(taken, 0, "the dropped wait gave its slot back");
        assert!(!running, "an idle shard's sweep ended");
        assert_eq!(slots, 0);
    }

    #[test]
    fn a_taken_waker_wakes_its_task_before_the_deadline() {
        let (woken_early, taken) = on_a_shard(|| async {
            let deadline = std::rc::Rc::new(Deadline::after(Duration::from_secs(60)));
            let waker_of = std::rc::Rc::clone(&deadline);
            let woken = std::rc::Rc::new(Cell::new(false));
            let answered = std::rc::Rc::clone(&woken);
            crate::spawn(async move {
                crate::time::sleep(Duration::from_millis(5)).await;
                answered.set(true);
                waker_of.take_waker().expect("the waiter registered").wake();
            });
            std::future::poll_fn(|cx| match woken.get() {
                true => Poll::Ready(()),
                false => deadline.poll_passed(cx),
            })
            .await;
            let woken_early = woken.get();
            drop(deadline);
            (woken_early, taken())
        });
        assert!(woken_early);
        assert_eq!(taken, 0);
    }

    #[test]
    fn timeout_at_gives_the_output_or_passed() {
        let (quick, slow) = on_a_shard(|| async {
            let soon = Instant::now() + Duration::from_millis(30);
            let quick = timeout_at(soon, async { 7 }).await;
            let slow = timeout_at(soon, crate::time::sleep(Duration::from_secs(60))).await;
            (quick, slow)
        });
        assert_eq!(quick, Ok(7));
        assert_eq!(slow, Err(Passed));
    }
}
