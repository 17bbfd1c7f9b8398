//! A shard-local event: tasks wait for it, one call wakes them all. For
//! "the commitlog has new entries", "the log is durable up to here",
//! "a flush finished" — conditions a waiter re-checks after waking.

use std::cell::RefCell;

use futures_channel::oneshot;

#[derive(Default)]
pub struct Event {
    waiters: RefCell<Vec<oneshot::Sender<()>>>,
}

impl Event {
    /// Resolves at the next [`Event::notify_all`] after this call.
    pub fn wait(&self) -> impl std::future::Future<Output = ()> {
        let (tx, rx) = oneshot::channel();
        self.waiters.borrow_mut().push(tx);
        async move {
            let _ = rx.await;
        }
    }

    pub fn notify_all(&self) {
        for waiter in self.waiters.borrow_mut().drain(..) {
            let _ = waiter.send(());
        }
    }
}
