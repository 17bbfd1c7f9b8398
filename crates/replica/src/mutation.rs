//! A mutation: everything one write does to one partition of one table —
//! the partition update, plus list operations that need the list's current
//! contents. The unit a shard logs, applies and recovers whole.

use shoal_storage::{PartitionPosition, PartitionUpdate};
use uuid::Uuid;

use crate::list_ops::ListOp;

#[derive(Debug, Clone)]
pub struct Mutation {
    pub table: Uuid,
    pub position: PartitionPosition,
    pub update: PartitionUpdate,
    /// List operations that need the list's current contents.
    pub list_ops: Vec<ListOp>,
}

impl Mutation {
    /// Folds `other`, a later write to the same partition, into this one,
    /// so the two apply as one mutation.
    pub fn absorb(&mut self, other: Mutation) {
        assert!(self.table == other.table, "absorbing a mutation of another table");
        assert!(self.position == other.position, "absorbing a mutation of another partition");
        self.update.merge(other.update);
        self.list_ops.extend(other.list_ops);
    }

    /// Moves every timestamp of the mutation by `delta_us` (a conditional
    /// write takes its timestamp on the owning shard, under the lock).
    pub fn shift_timestamps(&mut self, delta_us: i64) {
        self.update.shift_timestamps(delta_us);
        self.list_ops.iter_mut().for_each(|op| op.timestamp += delta_us);
    }
}
