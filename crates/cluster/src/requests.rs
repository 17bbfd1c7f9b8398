//! The requests a shard sent on one of its connections and waits for the
//! answers of, and their timeouts.
//!
//! Each request has a slot in its connection's table ([`Requests`]),
//! keyed by its id: the answer is put there and the request's [`Answer`]
//! future takes it, so a request allocates no channel. Timeouts are not a
//! timer per request (ScyllaDB's RPC keeps them on a low-resolution clock
//! too): while any request of a shard waits, one sweep per shard runs
//! every [`SWEEP_INTERVAL`], counts a tick and fails the requests whose
//! verb's timeout has passed in ticks. A timeout so fires at most one
//! interval late, and a request's cost is a table insert and a removal.
//!
//! Shard-local: the tables, the tick and the sweep belong to the shard
//! that owns the connections (plain cells, no locks).

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use hashbrown::hash_map::Entry;
use hashbrown::HashMap;

/// How often the sweep looks for requests past their timeout, while any
/// wait: how late a timeout may fire.
pub(crate) const SWEEP_INTERVAL: Duration = Duration::from_millis(100);

/// Why a request got no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The peer answered with a failure: its message.
    Failed(String),
    /// The connection closed first.
    Closed,
    /// Its verb's timeout passed first.
    TimedOut,
}

/// What a request ends with: the answer's payload, or why there is none.
pub(crate) type Outcome = Result<Bytes, Failure>;

/// One connection's waiting requests, by id.
pub(crate) struct Requests {
    slots: RefCell<HashMap<u64, Slot>>,
    next_id: Cell<u64>,
}

struct Slot {
    /// The tick at which it times out.
    expires: u64,
    state: State,
}

enum State {
    /// No outcome yet; the task to wake when it comes.
    Waiting(Option<Waker>),
    /// The outcome, for its [`Answer`] to take.
    Done(Outcome),
}

impl Requests {
    /// A new, empty table, swept by this shard's sweep.
    pub(crate) fn new() -> Rc<Requests> {
        let requests = Rc::new(Requests { slots: RefCell::default(), next_id: Cell::new(1) });
        SWEEP.with(|sweep| sweep.tables.borrow_mut().push(Rc::downgrade(&requests)));
        requests
    }

    /// Starts a request: `send` queues its frame under the id it is
    /// given; once it has, the request waits (at most `timeout`) for its
    /// answer. If `send` fails, nothing waits.
    pub(crate) fn start<E>(
        self: &Rc<Self>,
        timeout: Duration,
        send: impl FnOnce(u64) -> Result<(), E>,
    ) -> Result<Answer, E> {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        send(id)?;
        // The answer comes from the connection's reader, a task that runs
        // after this one yields: the slot is there before it can.
        let expires = expiry(timeout);
        self.slots.borrow_mut().insert(id, Slot { expires, state: State::Waiting(None) });
        Ok(Answer { requests: Rc::clone(self), id })
    }

    /// Hands request `id` its outcome, if it is still there (it may have
    /// been dropped by its caller).
    pub(crate) fn complete(&self, id: u64, outcome: Outcome) {
        let waker = match self.slots.borrow_mut().get_mut(&id) {
            Some(slot) => match std::mem::replace(&mut slot.state, State::Done(outcome)) {
                State::Waiting(waker) => waker,
                State::Done(_) => None,
            },
            None => None,
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Fails every waiting request: the connection closed.
    pub(crate) fn close_all(&self) {
        self.fail_where(|_| true, Failure::Closed);
    }

    /// Fails the waiting requests that expire by `tick`; whether any
    /// still wait.
    fn expire(&self, tick: u64) -> bool {
        self.fail_where(|slot| slot.expires <= tick, Failure::TimedOut);
        self.slots.borrow().values().any(|slot| matches!(slot.state, State::Waiting(_)))
    }

    fn fail_where(&self, fails: impl Fn(&Slot) -> bool, failure: Failure) {
        let mut wakers = Vec::new();
        for slot in self.slots.borrow_mut().values_mut() {
            if matches!(slot.state, State::Waiting(_)) && fails(slot) {
                if let State::Waiting(Some(waker)) =
                    std::mem::replace(&mut slot.state, State::Done(Err(failure.clone())))
                {
                    wakers.push(waker);
                }
            }
        }
        wakers.into_iter().for_each(Waker::wake);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.slots.borrow().len()
    }
}

/// A request's answer, once it comes. Dropping it forgets the request
/// (a late answer is then dropped).
pub(crate) struct Answer {
    requests: Rc<Requests>,
    id: u64,
}

impl Future for Answer {
    type Output = Outcome;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Outcome> {
        let mut slots = self.requests.slots.borrow_mut();
        let Entry::Occupied(mut slot) = slots.entry(self.id) else {
            // Taken already: polled after it was ready.
            return Poll::Ready(Err(Failure::Closed));
        };
        match &mut slot.get_mut().state {
            State::Waiting(waker) => {
                match waker {
                    Some(waker) if waker.will_wake(cx.waker()) => {}
                    _ => *waker = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
            State::Done(_) => match slot.remove().state {
                State::Done(outcome) => Poll::Ready(outcome),
                State::Waiting(_) => unreachable!("matched as done above"),
            },
        }
    }
}

impl Drop for Answer {
    fn drop(&mut self) {
        self.requests.slots.borrow_mut().remove(&self.id);
    }
}

/// This shard's sweep: its tick, whether it runs, and the tables it
/// sweeps.
#[derive(Default)]
struct Sweep {
    tick: Cell<u64>,
    running: Cell<bool>,
    tables: RefCell<Vec<Weak<Requests>>>,
}

thread_local! {
    static SWEEP: Sweep = Sweep::default();
}

/// The tick by which a request sent now with `timeout` has waited at
/// least that long; starts the sweep if it is not running.
fn expiry(timeout: Duration) -> u64 {
    let ticks = u64::try_from(timeout.as_nanos().div_ceil(SWEEP_INTERVAL.as_nanos())).unwrap_or(u64::MAX / 2);
    SWEEP.with(|sweep| {
        if !sweep.running.replace(true) {
            shoal_runtime::spawn(sweep_while_waiting());
        }
        // The tick under way has partly passed: one more.
        sweep.tick.get() + ticks + 1
    })
}

/// Ticks and fails the requests past their timeout, every interval,
/// until none waits.
async fn sweep_while_waiting() {
    // However the sweep ends (none waits, or the shard's executor drops
    // it), the next request starts another.
    let _running = Running;
    loop {
        shoal_runtime::time::sleep(SWEEP_INTERVAL).await;
        let (tick, tables) = SWEEP.with(|sweep| {
            sweep.tick.set(sweep.tick.get() + 1);
            let mut tables = sweep.tables.borrow_mut();
            tables.retain(|table| table.strong_count() > 0);
            (sweep.tick.get(), tables.iter().filter_map(Weak::upgrade).collect::<Vec<_>>())
        });
        let mut waiting = false;
        for table in tables {
            waiting |= table.expire(tick);
        }
        if !waiting {
            return;
        }
    }
}

/// Marks the sweep stopped when dropped.
struct Running;

impl Drop for Running {
    fn drop(&mut self) {
        SWEEP.with(|sweep| sweep.running.set(false));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    /// Runs `test` on a shard of its own and returns what it returns.
    fn on_a_shard<T: Send + 'static, Fut: Future<Output = T> + 'static>(
        test: impl Fn() -> Fut + Send + Sync + 'static,
    ) -> T {
        shoal_runtime::run_on_a_shard(Duration::from_secs(20), test).expect("the test ends")
    }

    #[test]
    fn an_answer_reaches_its_request_and_frees_its_slot() {
        let (outcome, left) = on_a_shard(|| async {
            let requests = Requests::new();
            let answer = requests.start(Duration::from_secs(60), |_| Ok::<_, ()>(())).expect("sent");
            let other = requests.start(Duration::from_secs(60), |_| Ok::<_, ()>(())).expect("sent");
            requests.complete(1, Ok(Bytes::from_static(b"yes")));
            let outcome = answer.await;
            drop(other);
            (outcome, requests.len())
        });
        assert_eq!(outcome, Ok(Bytes::from_static(b"yes")));
        assert_eq!(left, 0, "an answered and a dropped request leave no slot");
    }

    #[test]
    fn a_request_that_is_not_sent_does_not_wait() {
        let left = on_a_shard(|| async {
            let requests = Requests::new();
            assert!(requests.start(Duration::from_secs(60), |_| Err("closed")).is_err());
            requests.len()
        });
        assert_eq!(left, 0);
    }

    #[test]
    fn a_closed_connection_fails_its_requests() {
        let outcome = on_a_shard(|| async {
            let requests = Requests::new();
            let answer = requests.start(Duration::from_secs(60), |_| Ok::<_, ()>(())).expect("sent");
            requests.close_all();
            answer.await
        });
        assert_eq!(outcome, Err(Failure::Closed));
    }

    /// A request unanswered past its timeout fails, no sooner than the
    /// timeout; a late answer is dropped.
    #[test]
    fn an_unanswered_request_times_out() {
        let (outcome, waited, left) = on_a_shard(|| async {
            let requests = Requests::new();
            let started = Instant::now();
            let answer = requests.start(Duration::from_millis(250), |_| Ok::<_, ()>(())).expect("sent");
            let outcome = answer.await;
            let waited = started.elapsed();
            requests.complete(1, Ok(Bytes::new()));
            (outcome, waited, requests.len())
        });
        assert_eq!(outcome, Err(Failure::TimedOut));
        assert!(waited >= Duration::from_millis(250), "{waited:?}");
        // A sweep late, and room for a loaded machine.
        assert!(waited < Duration::from_secs(2), "{waited:?}");
        assert_eq!(left, 0);
    }
}
