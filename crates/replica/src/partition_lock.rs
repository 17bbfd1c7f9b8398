//! Per-partition serialization of conditional writes (LWT), of writes that
//! read before they write (list index and user-type field updates, counter
//! updates this replica leads, every write to a table with secondary
//! indexes) and of memcached item writes on this shard.
//!
//! A conditional write reads the partition, checks its condition and writes;
//! the read may await SSTable I/O, so another task could run in between. Each
//! conditional write to a partition holds this shard's lock on it from before
//! the read to after the write. The table is shard-local (no cross-thread
//! locking) and bounded: past [`WAITERS_MAX`] waiting writes, new ones are
//! refused rather than queued without limit. Waiters queue in arrival order
//! and a release hands the lock to the next one, so a hot partition neither
//! starves a writer nor wakes every waiter at each release.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::hash::{Hash, Hasher};
use std::rc::Rc;

use shoal_storage::{Event, PartitionPosition};
use uuid::Uuid;

use crate::database::ReplicaError;
use crate::token_hash::TokenHashMap;

/// Writes of this shard waiting for a partition lock, at most.
const WAITERS_MAX: usize = 10_000;

/// A locked partition: its table and position.
#[derive(Clone, PartialEq, Eq)]
struct Key {
    table: Uuid,
    position: PartitionPosition,
}

/// The token (a hash already) mixed with the table id: no key bytes hashed
/// (see `token_hash`).
impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.position.token as u64 ^ self.table.as_u64_pair().0);
    }
}

/// The partitions with a conditional write under way, each with the queue
/// of writes waiting for it.
#[derive(Default)]
pub(crate) struct PartitionLocks {
    held: RefCell<TokenHashMap<Key, VecDeque<Rc<Ticket>>>>,
    waiting: Cell<usize>,
}

/// A waiter's place in a partition's queue.
#[derive(Default)]
struct Ticket {
    /// The lock was handed to this waiter.
    granted: Cell<bool>,
    event: Event,
}

/// Holds a partition's lock; dropping it lets the next write in.
pub struct PartitionGuard {
    locks: Rc<PartitionLocks>,
    key: Key,
}

/// A waiter in a queue. Dropped before it turns into a guard (its request
/// was dropped), it leaves the queue, or passes on the lock it was handed.
struct Waiter<'a> {
    locks: &'a PartitionLocks,
    key: &'a Key,
    ticket: Rc<Ticket>,
    done: bool,
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        self.locks.waiting.set(self.locks.waiting.get() - 1);
        if self.done {
            return;
        }
        if self.ticket.granted.get() {
            self.locks.release(self.key);
        } else if let Some(queue) = self.locks.held.borrow_mut().get_mut(self.key) {
            queue.retain(|t| !Rc::ptr_eq(t, &self.ticket));
        }
    }
}

impl PartitionLocks {
    pub(crate) async fn lock(
        self: &Rc<Self>,
        table: Uuid,
        position: PartitionPosition,
    ) -> Result<PartitionGuard, ReplicaError> {
        let key = Key { table, position };
        let ticket = {
            let mut held = self.held.borrow_mut();
            let Some(queue) = held.get_mut(&key) else {
                held.insert(key.clone(), VecDeque::new());
                return Ok(PartitionGuard { locks: Rc::clone(self), key });
            };
            if self.waiting.get() >= WAITERS_MAX {
                return Err(ReplicaError::Overloaded(format!(
                    "too many writes waiting for a partition lock on this shard ({WAITERS_MAX})"
                )));
            }
            let ticket = Rc::new(Ticket::default());
            queue.push_back(Rc::clone(&ticket));
            ticket
        };
        self.waiting.set(self.waiting.get() + 1);
        let mut waiter = Waiter { locks: self, key: &key, ticket, done: false };
        while !waiter.ticket.granted.get() {
            waiter.ticket.event.wait().await;
        }
        waiter.done = true;
        drop(waiter);
        Ok(PartitionGuard { locks: Rc::clone(self), key })
    }

    /// Whether the partition is locked (a waiter queues only behind a
    /// holder). Most of the time nothing is: no key is hashed then.
    pub(crate) fn is_held(&self, table: Uuid, position: &PartitionPosition) -> bool {
        let held = self.held.borrow();
        !held.is_empty() && held.contains_key(&Key { table, position: position.clone() })
    }

    /// Hands the lock on `key` to its first waiter, or frees it.
    fn release(&self, key: &Key) {
        let mut held = self.held.borrow_mut();
        let next = held.get_mut(key).and_then(VecDeque::pop_front);
        match next {
            Some(ticket) => {
                ticket.granted.set(true);
                ticket.event.notify_all();
            }
            None => {
                held.remove(key);
            }
        }
    }
}

impl Drop for PartitionGuard {
    fn drop(&mut self) {
        self.locks.release(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use shoal_runtime::yield_now;
    use std::future::Future;
    use std::task::{Context, Waker};

    fn position(key: &'static [u8]) -> PartitionPosition {
        PartitionPosition { token: 1, key: Bytes::from_static(key) }
    }

    async fn settle() {
        for _ in 0..20 {
            yield_now().await;
        }
    }

    #[test]
    fn waiters_get_the_lock_in_arrival_order_and_dropped_ones_are_skipped() {
        shoal_io::block_on(async {
            let locks = Rc::new(PartitionLocks::default());
            let table = Uuid::nil();
            let order = Rc::new(RefCell::new(Vec::new()));
            let first = locks.lock(table, position(b"p")).await;
            // Another partition is not held up.
            drop(locks.lock(table, position(b"q")).await);
            for i in 0..4 {
                if i == 1 {
                    // A request dropped while it waits: polled once (queued), then dropped.
                    let mut abandoned = Box::pin(locks.lock(table, position(b"p")));
                    assert!(abandoned.as_mut().poll(&mut Context::from_waker(Waker::noop())).is_pending());
                    assert_eq!(locks.waiting.get(), 1);
                    continue;
                }
                let (locks, order) = (Rc::clone(&locks), Rc::clone(&order));
                shoal_runtime::spawn(async move {
                    let _guard = locks.lock(table, position(b"p")).await;
                    order.borrow_mut().push(i);
                    settle().await;
                });
            }
            settle().await;
            assert_eq!(locks.waiting.get(), 3);
            assert!(order.borrow().is_empty());
            drop(first);
            for _ in 0..10 {
                settle().await;
            }
            assert_eq!(*order.borrow(), vec![0, 2, 3]);
            assert!(locks.held.borrow().is_empty());
            assert_eq!(locks.waiting.get(), 0);
        });
    }
}
