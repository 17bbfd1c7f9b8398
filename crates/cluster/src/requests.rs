//! The requests a shard sent on one of its connections and waits for the
//! answers of, and their timeouts.
//!
//! Each request has a slot in its connection's table ([`Requests`]),
//! keyed by its id: the answer is put there and the request's [`Answer`]
//! future takes it, so a request allocates no channel. Its timeout is a
//! low-resolution deadline of the shard's one sweep
//! ([`shoal_runtime::lowres`]; ScyllaDB's RPC keeps its timeouts on a
//! low-resolution clock too), not a timer per request: it fires at most a
//! couple of ticks late, and a request's cost is a table insert, a
//! deadline slot and their removal. The deadline's slot holds the waiting
//! task's waker, which an answer takes to wake it: one waker per request.
//!
//! Shard-local: the tables and the deadlines belong to the shard that owns
//! the connections (plain cells, no locks).

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use hashbrown::HashMap;
use shoal_runtime::lowres::Deadline;

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
    /// When it times out; holds the waiting task's waker.
    deadline: Deadline,
    /// Its outcome once it came, for its [`Answer`] to take.
    outcome: Option<Outcome>,
}

impl Requests {
    /// A new, empty table.
    pub(crate) fn new() -> Rc<Requests> {
        Rc::new(Requests { slots: RefCell::default(), next_id: Cell::new(1) })
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
        let slot = Slot { deadline: Deadline::after(timeout), outcome: None };
        self.slots.borrow_mut().insert(id, slot);
        Ok(Answer { requests: Rc::clone(self), id })
    }

    /// Hands request `id` its outcome, if it is still there (it may have
    /// been dropped by its caller).
    pub(crate) fn complete(&self, id: u64, outcome: Outcome) {
        let waker = self.slots.borrow_mut().get_mut(&id).and_then(|slot| slot.finish(outcome));
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Fails every waiting request: the connection closed.
    pub(crate) fn close_all(&self) {
        let wakers: Vec<Waker> =
            self.slots.borrow_mut().values_mut().filter_map(|slot| slot.finish(Err(Failure::Closed))).collect();
        wakers.into_iter().for_each(Waker::wake);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.slots.borrow().len()
    }
}

impl Slot {
    /// Sets the outcome unless one came already; the waiter's waker.
    fn finish(&mut self, outcome: Outcome) -> Option<Waker> {
        if self.outcome.is_some() {
            return None;
        }
        self.outcome = Some(outcome);
        self.deadline.take_waker()
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
        let Some(slot) = slots.get_mut(&self.id) else {
            // Taken already: polled after it was ready.
            return Poll::Ready(Err(Failure::Closed));
        };
        let outcome = match slot.outcome.take() {
            Some(outcome) => outcome,
            None if slot.deadline.poll_passed(cx).is_ready() => Err(Failure::TimedOut),
            None => return Poll::Pending,
        };
        slots.remove(&self.id);
        Poll::Ready(outcome)
    }
}

impl Drop for Answer {
    fn drop(&mut self) {
        self.requests.slots.borrow_mut().remove(&self.id);
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
        // A couple of ticks late, and room for a loaded machine.
        assert!(waited < Duration::from_secs(2), "{waited:?}");
        assert_eq!(left, 0);
    }
}
