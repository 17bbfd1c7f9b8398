//! Cooperative scheduling helpers for long work on a shard.
//!
//! A shard runs every task on one thread, so a loop that never awaits holds
//! up every request on that shard. Long loops (compaction, freeing a flushed
//! memtable) call [`yield_now`] every bounded step.

/// Lets the shard's other ready tasks run, then continues.
pub async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            std::task::Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
    .await;
}
