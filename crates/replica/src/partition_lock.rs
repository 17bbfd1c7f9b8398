//! Per-partition serialization of conditional writes (LWT) on this shard.
//!
//! A conditional write reads the partition, checks its condition and writes;
//! the read may await SSTable I/O, so another task could run in between. Each
//! conditional write to a partition holds this shard's lock on it from before
//! the read to after the write. The table is shard-local (no cross-thread
//! locking) and bounded: past [`WAITERS_MAX`] waiting writes, new ones are
//! refused rather than queued without limit.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use shoal_storage::{Event, PartitionPosition};
use uuid::Uuid;

use crate::database::ReplicaError;

/// Conditional writes of this shard waiting for a partition lock, at most.
const WAITERS_MAX: usize = 10_000;

type Key = (Uuid, PartitionPosition);

/// The partitions with a conditional write under way, each with the event
/// its waiters wake on when it ends.
#[derive(Default)]
pub(crate) struct PartitionLocks {
    held: RefCell<HashMap<Key, Rc<Event>>>,
    waiting: Cell<usize>,
}

/// Holds a partition's lock; dropping it lets the next write in.
pub struct PartitionGuard {
    locks: Rc<PartitionLocks>,
    key: Key,
}

impl PartitionLocks {
    pub(crate) async fn lock(
        self: &Rc<Self>,
        table: Uuid,
        position: PartitionPosition,
    ) -> Result<PartitionGuard, ReplicaError> {
        let key = (table, position);
        loop {
            let held = self.held.borrow().get(&key).cloned();
            let Some(event) = held else {
                self.held.borrow_mut().insert(key.clone(), Rc::new(Event::default()));
                return Ok(PartitionGuard { locks: Rc::clone(self), key });
            };
            if self.waiting.get() >= WAITERS_MAX {
                return Err(ReplicaError::Overloaded(format!(
                    "too many conditional writes waiting on this shard ({WAITERS_MAX})"
                )));
            }
            self.waiting.set(self.waiting.get() + 1);
            event.wait().await;
            self.waiting.set(self.waiting.get() - 1);
        }
    }
}

impl Drop for PartitionGuard {
    fn drop(&mut self) {
        if let Some(event) = self.locks.held.borrow_mut().remove(&self.key) {
            event.notify_all();
        }
    }
}
