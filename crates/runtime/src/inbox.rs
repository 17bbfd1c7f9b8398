//! A shard's inbox: one lock-free lane per sending shard (plus one for threads
//! that are not shards), and a waker so a sleeping shard notices new work.
//!
//! Per-sender lanes keep contention off the hot path: a lane is written by one
//! thread only and drained by the owner, as in Seastar's `smp_message_queue`.
//! The owner drains all lanes in one pass (batching), running each job, which
//! spawns the real work as a task on the owner's executor.

use std::future::poll_fn;
use std::task::Poll;

use crossbeam_queue::SegQueue;
use futures_util::task::AtomicWaker;

/// Work shipped to a shard: runs on the owner's thread, inside its executor.
pub(crate) type Job = Box<dyn FnOnce() + Send>;

/// Jobs run per pass before the drain loop lets other tasks of the shard run.
const JOBS_PER_PASS_MAX: usize = 256;

/// Aligned so that each shard's inbox has cache lines of its own: the inboxes
/// sit side by side in one allocation, and a shard writes its inbox's waker
/// each time it waits for jobs.
#[repr(align(128))]
pub(crate) struct Inbox {
    lanes: Box<[SegQueue<Job>]>,
    waker: AtomicWaker,
}

impl Inbox {
    /// `senders` lanes: one per shard and one for outside threads.
    pub(crate) fn new(senders: usize) -> Inbox {
        assert!(senders > 0);
        Inbox { lanes: (0..senders).map(|_| SegQueue::new()).collect(), waker: AtomicWaker::new() }
    }

    pub(crate) fn push(&self, lane: usize, job: Job) {
        self.lanes[lane].push(job);
        self.waker.wake();
    }

    /// Runs jobs as they arrive, forever. Must run on the owning shard.
    pub(crate) async fn serve(&self) {
        loop {
            let jobs = poll_fn(|cx| {
                let jobs = self.drain();
                if !jobs.is_empty() {
                    return Poll::Ready(jobs);
                }
                self.waker.register(cx.waker());
                // A push between the drain and the register would be missed
                // without this second look.
                let jobs = self.drain();
                if jobs.is_empty() {
                    Poll::Pending
                } else {
                    Poll::Ready(jobs)
                }
            })
            .await;
            for job in jobs {
                job();
            }
        }
    }

    fn drain(&self) -> Vec<Job> {
        let mut jobs = Vec::new();
        for lane in self.lanes.iter() {
            while jobs.len() < JOBS_PER_PASS_MAX {
                match lane.pop() {
                    Some(job) => jobs.push(job),
                    None => break,
                }
            }
        }
        jobs
    }
}
