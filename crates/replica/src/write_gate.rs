//! The writes under way on a shard, by the schema they started under, so
//! that a view build reads the base table only after every write that
//! chose its views without the new view has reached the memtable.
//!
//! A write decides whether it updates views (and which) when it starts,
//! then may await (a read before the write, memtable space) before it
//! lands in the memtable. A view created meanwhile is not among the views
//! it updates; if the view's build read the partition before the write
//! landed, the view would keep what the write replaced or deleted. And a
//! write that does update the view, reading the partition before such a
//! write landed, would compute its view updates from a state the partition
//! never ends up in. So each write holds a [`WriteTicket`] from before it
//! looks at the schema until it has landed; a build first awaits
//! [`WriteGate::settle`], and a write that updates views awaits
//! [`WriteTicket::settle`] before it reads: writes that start later see the
//! view and update it themselves.
//!
//! Writes are counted per schema epoch (one per schema this shard
//! installs), oldest first: entering and leaving are O(1) on the write
//! path, since epochs change rarely and writes of one epoch share a count.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use shoal_storage::Event;

/// Writes in flight by schema epoch.
#[derive(Default)]
pub(crate) struct WriteGate {
    epoch: Cell<u64>,
    inner: Rc<Inner>,
}

#[derive(Default)]
struct Inner {
    /// (epoch, writes of it in flight), epochs increasing, counts > 0.
    in_flight: RefCell<VecDeque<(u64, u64)>>,
    /// A write of the oldest epoch in flight left.
    oldest_left: Event,
}

/// A write in flight: it leaves the gate when dropped.
#[must_use = "a write is in flight while its ticket is held"]
pub(crate) struct WriteTicket {
    epoch: u64,
    inner: Rc<Inner>,
}

impl WriteGate {
    /// This shard installed a new schema: writes entering from now on see it.
    pub(crate) fn schema_changed(&self) {
        self.epoch.set(self.epoch.get() + 1);
    }

    /// Registers a write that is about to look at the schema.
    pub(crate) fn enter(&self) -> WriteTicket {
        let epoch = self.epoch.get();
        let mut in_flight = self.inner.in_flight.borrow_mut();
        match in_flight.back_mut() {
            Some((last, count)) if *last == epoch => *count += 1,
            _ => in_flight.push_back((epoch, 1)),
        }
        WriteTicket { epoch, inner: Rc::clone(&self.inner) }
    }

    /// Resolves once every write that entered under an earlier schema than
    /// the current one has left (a view build's first step).
    pub(crate) async fn settle(&self) {
        self.inner.settle(self.epoch.get()).await;
    }
}

impl WriteTicket {
    /// Resolves once every write that entered under an earlier schema than
    /// this one has left: a write that updates views reads its partition
    /// only after every write that may have landed there without updating
    /// them did.
    pub(crate) async fn settle(&self) {
        self.inner.settle(self.epoch).await;
    }
}

impl Inner {
    async fn settle(&self, epoch: u64) {
        loop {
            let oldest_left = self.oldest_left.wait();
            match self.in_flight.borrow().front() {
                Some((oldest, _)) if *oldest < epoch => {}
                _ => return,
            }
            oldest_left.await;
        }
    }
}

impl Drop for WriteTicket {
    fn drop(&mut self) {
        let mut in_flight = self.inner.in_flight.borrow_mut();
        // Entered at this epoch and not left yet, so its entry is there.
        let Some(at) = in_flight.iter().position(|(epoch, _)| *epoch == self.epoch) else { return };
        in_flight[at].1 -= 1;
        if in_flight[at].1 > 0 {
            return;
        }
        in_flight.remove(at);
        let was_oldest = at == 0;
        drop(in_flight);
        if was_oldest {
            self.inner.oldest_left.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use super::*;

    fn poll(future: &mut std::pin::Pin<&mut impl Future<Output = ()>>) -> Poll<()> {
        future.as_mut().poll(&mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn settle_waits_for_the_writes_of_earlier_schemas_only() {
        let gate = WriteGate::default();
        let first = gate.enter();
        gate.schema_changed();
        let second = gate.enter();
        gate.schema_changed();
        let current = gate.enter();
        {
            let mut settled = pin!(gate.settle());
            assert!(poll(&mut settled).is_pending());
            drop(first);
            assert!(poll(&mut settled).is_pending(), "the second write is still in flight");
            assert!(poll(&mut pin!(second.settle())).is_ready(), "the second write waits only for the first");
            drop(second);
            assert!(poll(&mut settled).is_ready(), "a write of the current schema must not hold it up");
        }
        assert!(poll(&mut pin!(current.settle())).is_ready());
        drop(current);
        assert!(gate.inner.in_flight.borrow().is_empty());
    }

    #[test]
    fn settle_without_writes_is_ready() {
        let gate = WriteGate::default();
        drop(gate.enter());
        assert!(poll(&mut pin!(gate.settle())).is_ready());
    }
}
