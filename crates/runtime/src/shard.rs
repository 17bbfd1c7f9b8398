//! Starting the shards and talking between them.
//!
//! Invariants:
//! - shard `i` runs on its own thread with its own executor, pinned to a core
//!   when pinning is asked for, and never migrates;
//! - a closure given to [`submit_to`] runs on the target shard's thread, so
//!   shard-local state (thread-locals of the layers above) is reached only by
//!   its owner;
//! - a job that panics fails that one call (`ShardError::Failed`), not the
//!   process.

use std::cell::Cell;
use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use futures_channel::oneshot;
use futures_util::FutureExt;
use std::panic::AssertUnwindSafe;
use thiserror::Error;

use crate::inbox::Inbox;

#[derive(Debug, Error)]
pub enum ShardError {
    #[error("shard {shard} failed to run the request (it panicked or shut down)")]
    Failed { shard: usize },
    #[error("cannot start shard {shard}: {source}")]
    Start { shard: usize, source: std::io::Error },
    #[error("no shard {shard}: there are {nr_shards}")]
    NoSuchShard { shard: usize, nr_shards: usize },
}

/// What every shard thread knows about the set of shards.
#[derive(Clone)]
struct Smp {
    inboxes: Arc<[Inbox]>,
}

thread_local! {
    static SMP: std::cell::RefCell<Option<Smp>> = const { std::cell::RefCell::new(None) };
    static SHARD_ID: Cell<Option<usize>> = const { Cell::new(None) };
}

/// The running shards; `join` waits for their threads (they run until the
/// process exits).
pub struct Shards {
    threads: Vec<thread::JoinHandle<()>>,
}

impl Shards {
    pub fn join(self) {
        for thread in self.threads {
            // A shard thread only ends by panicking outside any task; the
            // process is going down either way.
            let _ = thread.join();
        }
    }
}

/// Starts `nr_shards` threads; on each, `init(shard)` runs as the first task
/// and the shard then serves its inbox forever. With `pin_cpus`, shard `i`
/// is pinned to `pin_cpus[i % len]`.
pub fn start_shards<F, Fut>(nr_shards: usize, pin_cpus: Option<Vec<usize>>, init: F) -> Result<Shards, ShardError>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + 'static,
{
    assert!(nr_shards > 0, "at least one shard");
    let inboxes: Arc<[Inbox]> = (0..nr_shards).map(|_| Inbox::new(nr_shards + 1)).collect();
    let smp = Smp { inboxes };
    let init = Arc::new(init);
    let mut threads = Vec::with_capacity(nr_shards);
    for shard in 0..nr_shards {
        let smp = smp.clone();
        let init = Arc::clone(&init);
        let cpus: HashSet<usize> = pin_cpus.as_ref().map(|c| [c[shard % c.len()]].into()).unwrap_or_default();
        let thread = thread::Builder::new()
            .name(format!("shard-{shard}"))
            .spawn(move || run_shard(shard, smp, cpus, init))
            .map_err(|source| ShardError::Start { shard, source })?;
        threads.push(thread);
    }
    Ok(Shards { threads })
}

/// Runs `task` on a shard of its own and gives back its output, or `None`
/// when it has not ended within `timeout`: how a test gets onto a shard
/// (its timers, thread-locals and I/O). The shard's thread is left behind.
pub fn run_on_a_shard<T, Fut>(timeout: Duration, task: impl Fn() -> Fut + Send + Sync + 'static) -> Option<T>
where
    T: Send + 'static,
    Fut: Future<Output = T> + 'static,
{
    let (done, result) = std::sync::mpsc::channel();
    let _shards = start_shards(1, None, move |_| {
        let (task, done) = (task(), done.clone());
        async move {
            let _ = done.send(task.await);
        }
    })
    .ok()?;
    result.recv_timeout(timeout).ok()
}

fn run_shard<F, Fut>(shard: usize, smp: Smp, cpus: HashSet<usize>, init: Arc<F>)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = ()> + 'static,
{
    let runtime = match compio::runtime::RuntimeBuilder::new().thread_affinity(cpus).build() {
        Ok(runtime) => runtime,
        Err(e) => {
            tracing::error!("shard {shard}: cannot build its executor: {e}{}", executor_error_hint(&e));
            std::process::exit(1);
        }
    };
    SHARD_ID.with(|id| id.set(Some(shard)));
    SMP.with(|s| *s.borrow_mut() = Some(smp.clone()));
    runtime.block_on(async move {
        spawn(init(shard));
        // A task, so that it is polled only when a job arrives: compio polls
        // the future given to block_on on every turn of its loop, and each
        // poll of `serve` writes the inbox's waker.
        spawn(async move { smp.inboxes[shard].serve().await });
        std::future::pending::<()>().await
    });
}

/// What an operator can do when the shard's io_uring cannot be set up: the
/// two causes seen in practice are a seccomp profile that refuses the
/// io_uring system calls (Docker's default since 25.0) and, on kernels
/// before 5.12, a locked-memory limit too small for the rings.
fn executor_error_hint(e: &std::io::Error) -> &'static str {
    use rustix::io::Errno;
    match Errno::from_io_error(e) {
        Some(Errno::PERM | Errno::NOSYS) => {
            " (io_uring is not permitted: in a container, run with a seccomp profile that allows \
             io_uring_setup, io_uring_enter and io_uring_register, e.g. --security-opt seccomp=unconfined)"
        }
        Some(Errno::NOMEM) => " (raise the locked-memory limit: ulimit -l unlimited, or LimitMEMLOCK=infinity)",
        _ => "",
    }
}

/// The shard this code runs on. Panics off a shard thread: calling it there
/// is a wiring bug, not a runtime condition.
pub fn this_shard() -> usize {
    SHARD_ID.with(|id| id.get()).expect("this_shard() called off a shard thread")
}

/// The number of shards (0 before they start, on outside threads).
pub fn nr_shards() -> usize {
    SMP.with(|s| s.borrow().as_ref().map_or(0, |smp| smp.inboxes.len()))
}

/// Runs `future` as a task of this shard, in the background.
pub fn spawn<Fut: Future<Output = ()> + 'static>(future: Fut) {
    compio::runtime::spawn(future).detach();
}

/// Runs `f` on `shard` and returns its result here. On the current shard the
/// closure runs inline, with no message.
pub async fn submit_to<F, Fut, T>(shard: usize, f: F) -> Result<T, ShardError>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T> + 'static,
    T: Send + 'static,
{
    let here = SHARD_ID.with(|id| id.get());
    if here == Some(shard) {
        return Ok(f().await);
    }
    let smp = SMP.with(|s| s.borrow().clone()).expect("submit_to called off a shard thread");
    let nr_shards = smp.inboxes.len();
    let Some(inbox) = smp.inboxes.get(shard) else {
        return Err(ShardError::NoSuchShard { shard, nr_shards });
    };
    let (reply, answer) = oneshot::channel();
    // The work runs in the caller's scheduling group on the target shard,
    // as Seastar's smp messages do: a request handled across shards counts
    // as a statement there, and a compaction there yields to it.
    let group = crate::sched::current_group();
    let job = Box::new(move || {
        spawn(async move {
            // Catch the panic here so `reply` is dropped after unwinding ends:
            // the executor aborts if a cross-thread wake fires mid-unwind.
            let result = AssertUnwindSafe(crate::sched::in_group_if(group, f())).catch_unwind().await;
            if let Ok(value) = result {
                // The caller may have given up; nobody to tell then.
                let _ = reply.send(value);
            }
        })
    });
    inbox.push(here.unwrap_or(nr_shards), job);
    answer.await.map_err(|_| ShardError::Failed { shard })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// Starts `nr_shards` shards, runs `work` on shard 0 and returns its
    /// result.
    fn on_shard_zero<T, F, Fut>(nr_shards: usize, work: F) -> T
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = T> + 'static,
        T: Send + 'static,
    {
        let (done, results) = mpsc::channel();
        let shards = start_shards(nr_shards, None, move |shard| {
            let (done, work) = (done.clone(), (shard == 0).then(&work));
            async move {
                if let Some(work) = work {
                    let _ = done.send(work.await);
                }
            }
        });
        assert!(shards.is_ok());
        results.recv_timeout(std::time::Duration::from_secs(10)).expect("shard 0 answers")
    }

    #[test]
    fn submit_to_runs_on_the_target_shard() {
        let (seen, missing_failed, n) = on_shard_zero(3, || async {
            let mut seen = Vec::new();
            for target in 0..3 {
                let ran_on = submit_to(target, || async { this_shard() }).await;
                seen.push(ran_on.ok());
            }
            let missing = submit_to(7, || async {}).await;
            (seen, missing.is_err(), nr_shards())
        });
        assert_eq!(seen, vec![Some(0), Some(1), Some(2)]);
        assert!(missing_failed);
        assert_eq!(n, 3);
    }

    #[test]
    fn work_sent_to_another_shard_runs_in_the_senders_group() {
        use crate::sched::{current_group, in_group};
        use crate::Group;
        let answers = on_shard_zero(2, || async {
            let grouped = in_group(Group::Compaction, submit_to(1, || async { current_group() })).await;
            let ungrouped = submit_to(1, || async { current_group() }).await;
            (grouped.ok().flatten(), ungrouped.ok().flatten())
        });
        assert_eq!(answers, (Some(Group::Compaction), None));
    }

    #[test]
    fn a_panicking_job_fails_only_its_call() {
        let (failed, after) = on_shard_zero(2, || async {
            let failed = submit_to(1, || async { panic!("boom") }).await;
            let after: Result<usize, _> = submit_to(1, || async { 41 + 1 }).await;
            (failed.is_err(), after.ok())
        });
        assert!(failed);
        assert_eq!(after, Some(42));
    }
}
