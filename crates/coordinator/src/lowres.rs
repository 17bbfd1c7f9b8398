//! A shard's low-resolution deadlines (ScyllaDB's `lowres_clock`, on which
//! its request timeouts run): [`expiry`] is a future ready once an
//! `Instant` has passed, checked by one sweep per shard every [`TICK`]
//! while any is waited for, instead of a runtime timer per request.
//!
//! A coordinator waits on its request's deadline while replicas answer —
//! once per write, once per read — and nearly always the answers come
//! first. A runtime timer is inserted into and removed from the reactor's
//! timer heap for each wait, and reads the clock each time; here a wait
//! that ends before its deadline costs a slot taken and given back. A
//! deadline so fires up to one tick late (ScyllaDB's low-resolution clock
//! ticks every 10 ms too); one already past is ready at once.
//!
//! Shard-local: the slots and the sweep belong to the shard whose tasks
//! wait (plain cells, no locks). The sweep ends when nothing waits, so an
//! idle shard has no timer.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// How often the sweep looks for deadlines that passed: how late one may
/// fire.
pub(crate) const TICK: Duration = Duration::from_millis(10);

/// Ready once `deadline` has passed (up to a [`TICK`] later).
pub(crate) fn expiry(deadline: Instant) -> Expiry {
    Expiry { deadline, slot: None }
}

/// The future of [`expiry`]: takes a slot of its shard's sweep on its
/// first pending poll, gives it back when it ends or is dropped.
pub(crate) struct Expiry {
    deadline: Instant,
    slot: Option<usize>,
}

struct Slot {
    deadline: Instant,
    waker: Option<Waker>,
    passed: bool,
}

#[derive(Default)]
struct Sweep {
    /// Slots by index; `None` is free (and in `free`).
    slots: RefCell<Vec<Option<Slot>>>,
    free: RefCell<Vec<usize>>,
    /// Slots taken, and whether the sweep task runs.
    waiting: Cell<usize>,
    running: Cell<bool>,
}

thread_local! {
    static SWEEP: Sweep = Sweep::default();
}

impl Future for Expiry {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let deadline = self.deadline;
        let passed = SWEEP.with(|sweep| match self.slot {
            Some(index) => {
                let mut slots = sweep.slots.borrow_mut();
                // Invariant: a taken slot is held until this future gives
                // it back.
                let slot = slots[index].as_mut().expect("an expiry's slot is held until released");
                if !slot.passed {
                    match &slot.waker {
                        Some(waker) if waker.will_wake(cx.waker()) => {}
                        _ => slot.waker = Some(cx.waker().clone()),
                    }
                }
                slot.passed
            }
            None if Instant::now() >= deadline => true,
            None => {
                self.slot = Some(sweep.take(deadline, cx.waker().clone()));
                false
            }
        });
        if !passed {
            return Poll::Pending;
        }
        if let Some(index) = self.slot.take() {
            SWEEP.with(|sweep| sweep.release(index));
        }
        Poll::Ready(())
    }
}

impl Drop for Expiry {
    fn drop(&mut self) {
        if let Some(index) = self.slot.take() {
            // A shard's thread-locals go before its tasks at thread exit:
            // nothing to give back to then.
            let _ = SWEEP.try_with(|sweep| sweep.release(index));
        }
    }
}

impl Sweep {
    fn take(&self, deadline: Instant, waker: Waker) -> usize {
        let slot = Slot { deadline, waker: Some(waker), passed: false };
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
        self.waiting.set(self.waiting.get() + 1);
        if !self.running.replace(true) {
            shoal_runtime::spawn(run_sweep());
        }
        index
    }

    fn release(&self, index: usize) {
        self.slots.borrow_mut()[index] = None;
        self.free.borrow_mut().push(index);
        self.waiting.set(self.waiting.get() - 1);
    }

    /// Wakes the waits whose deadline is `now` or before.
    fn wake_passed(&self, now: Instant) {
        let mut wakers = Vec::new();
        for slot in self.slots.borrow_mut().iter_mut().flatten() {
            if !slot.passed && slot.deadline <= now {
                slot.passed = true;
                wakers.extend(slot.waker.take());
            }
        }
        // Woken outside the borrow: a waker may poll at once.
        wakers.into_iter().for_each(Waker::wake);
    }
}

/// Every tick, wakes the waits that passed their deadline; ends once
/// nothing waits.
async fn run_sweep() {
    loop {
        shoal_runtime::time::sleep(TICK).await;
        let idle = SWEEP.with(|sweep| {
            sweep.wake_passed(Instant::now());
            if sweep.waiting.get() == 0 {
                sweep.running.set(false);
                // All slots are free: the table shrinks back.
                sweep.slots.borrow_mut().clear();
                sweep.free.borrow_mut().clear();
                return true;
            }
            false
        });
        if idle {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::future::{select, Either};

    /// Runs `test` on a shard of its own and returns what it returns.
    fn on_a_shard<T: Send + 'static, Fut: Future<Output = T> + 'static>(
        test: impl Fn() -> Fut + Send + Sync + 'static,
    ) -> T {
        shoal_runtime::run_on_a_shard(Duration::from_secs(20), test).expect("the test ends")
    }

    #[test]
    fn a_deadline_fires_no_sooner_and_at_most_a_few_ticks_late() {
        let (late, waiting) = on_a_shard(|| async {
            let deadline = Instant::now() + Duration::from_millis(30);
            expiry(deadline).await;
            (Instant::now().checked_duration_since(deadline), SWEEP.with(|sweep| sweep.waiting.get()))
        });
        let late = late.expect("not fired before its deadline");
        // A tick late, and room for a loaded machine.
        assert!(late < Duration::from_secs(1), "fired {late:?} late");
        assert_eq!(waiting, 0, "the slot was given back");
    }

    #[test]
    fn a_past_deadline_is_ready_at_once_and_takes_no_slot() {
        let (ready, slot) = on_a_shard(|| async {
            let mut past = expiry(Instant::now() - Duration::from_millis(1));
            let ready = futures_util::poll!(&mut past).is_ready();
            (ready, past.slot)
        });
        assert!(ready);
        assert_eq!(slot, None);
    }

    #[test]
    fn a_wait_that_ends_first_gives_its_slot_back_and_the_sweep_stops() {
        let (waiting, running, slots) = on_a_shard(|| async {
            let far = expiry(Instant::now() + Duration::from_secs(60));
            let near = shoal_runtime::time::sleep(Duration::from_millis(5));
            match select(Box::pin(far), Box::pin(near)).await {
                Either::Left(_) => panic!("a minute's deadline fired"),
                Either::Right((_, far)) => drop(far),
            }
            let waiting = SWEEP.with(|sweep| sweep.waiting.get());
            // The sweep notices at its next tick that nothing waits.
            shoal_runtime::time::sleep(TICK * 5).await;
            SWEEP.with(|sweep| (waiting, sweep.running.get(), sweep.slots.borrow().len()))
        });
        assert_eq!(waiting, 0, "the dropped wait gave its slot back");
        assert!(!running, "an idle shard's sweep ended");
        assert_eq!(slots, 0);
    }
}
