//! bcrypt, off the shards. Checking a password costs tens of milliseconds
//! of CPU by design, which on a shard's reactor would stall every request
//! it serves; so a few threads of their own hash and check, and a shard
//! hands them work through a bounded queue and awaits the answer. When the
//! queue is full the attempt is refused at once (Overloaded): a flood of
//! logins costs the attacker time, not the shards.

use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, OnceLock};

use futures_channel::oneshot;
use thiserror::Error;

/// bcrypt's cost (log2 rounds), Cassandra's default (`auth_bcrypt_gensalt_log2_rounds`).
pub const COST: u32 = 10;
/// Threads that hash and check passwords.
const HASHER_THREADS: usize = 2;
/// Attempts waiting for a hasher; past this, new ones are refused.
const QUEUED_MAX: usize = 256;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PasswordError {
    #[error("too many authentication attempts are in progress; try again")]
    Busy,
    #[error("password hashing failed: {0}")]
    Hashing(String),
}

enum Job {
    Hash { password: String, reply: oneshot::Sender<Result<String, PasswordError>> },
    Verify { password: String, hash: Option<String>, reply: oneshot::Sender<bool> },
}

static QUEUE: OnceLock<SyncSender<Job>> = OnceLock::new();

fn queue() -> &'static SyncSender<Job> {
    QUEUE.get_or_init(|| {
        let (sender, receiver) = mpsc::sync_channel(QUEUED_MAX);
        // The hashers share one receiver; the lock is theirs alone (a
        // shard only ever try_sends).
        let receiver = Arc::new(Mutex::new(receiver));
        for n in 0..HASHER_THREADS {
            let receiver = Arc::clone(&receiver);
            let spawned =
                std::thread::Builder::new().name(format!("shoal-bcrypt-{n}")).spawn(move || hasher(&receiver));
            if let Err(e) = spawned {
                tracing::error!("cannot start password hasher thread {n}: {e}");
            }
        }
        sender
    })
}

fn hasher(jobs: &Mutex<Receiver<Job>>) {
    loop {
        // A poisoned lock means another hasher panicked holding it; the
        // receiver itself is still sound.
        let job = match jobs.lock().unwrap_or_else(|p| p.into_inner()).recv() {
            Ok(job) => job,
            Err(_) => return,
        };
        // An asker that went away (connection closed) needs no answer.
        match job {
            Job::Hash { password, reply } => {
                let _ = reply.send(bcrypt::hash(password, COST).map_err(|e| PasswordError::Hashing(e.to_string())));
            }
            Job::Verify { password, hash: Some(hash), reply } => {
                let _ = reply.send(bcrypt::verify(password, &hash).unwrap_or(false));
            }
            // No hash to check against (an unknown user): the same work
            // all the same, so the answer's timing does not tell.
            Job::Verify { password, hash: None, reply } => {
                let _ = bcrypt::hash(password, COST);
                let _ = reply.send(false);
            }
        }
    }
}

fn submit(job: Job) -> Result<(), PasswordError> {
    match queue().try_send(job) {
        Ok(()) => Ok(()),
        Err(TrySendError::Full(_)) => Err(PasswordError::Busy),
        Err(TrySendError::Disconnected(_)) => Err(PasswordError::Hashing("no hasher thread runs".to_string())),
    }
}

/// `password` salted and hashed (bcrypt `$2b$` text).
pub async fn hash(password: String) -> Result<String, PasswordError> {
    let (reply, answer) = oneshot::channel();
    submit(Job::Hash { password, reply })?;
    answer.await.map_err(|_| PasswordError::Hashing("the hasher stopped".to_string()))?
}

/// Whether `password` is the one `hash` was made from; a malformed hash,
/// or none, matches nothing (after as long as a check takes).
pub async fn verify(password: String, hash: Option<String>) -> Result<bool, PasswordError> {
    let (reply, answer) = oneshot::channel();
    submit(Job::Verify { password, hash, reply })?;
    answer.await.map_err(|_| PasswordError::Hashing("the hasher stopped".to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    /// Polls `future` until the hasher thread answers it.
    fn wait<T>(future: impl std::future::Future<Output = T>) -> T {
        let mut future = std::pin::pin!(future);
        loop {
            if let Some(value) = future.as_mut().now_or_never() {
                return value;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    #[test]
    fn hashes_check_on_the_hasher_threads() {
        let hashed = wait(hash("secret".to_string())).expect("hashed");
        assert!(hashed.starts_with("$2"), "{hashed}");
        assert_eq!(wait(verify("secret".to_string(), Some(hashed.clone()))), Ok(true));
        assert_eq!(wait(verify("wrong".to_string(), Some(hashed))), Ok(false));
        assert_eq!(wait(verify("secret".to_string(), Some("not a hash".to_string()))), Ok(false));
        assert_eq!(wait(verify("secret".to_string(), None)), Ok(false));
    }
}
