//! Credentials replaced without a restart: on a change of their files.
//!
//! A [`Reloadable`] holds the current value (a rustls configuration, the
//! memcached password table) for every shard to load at a connection's
//! start: one atomic pointer load, no lock (`arc-swap`). A [`Watcher`]
//! thread, outside the shards, looks at the files' modification time,
//! size and inode every [`CHECK_PERIOD`]; when any changed it builds the
//! value again from the files and swaps it in. A build that fails (a
//! certificate written before its key, a typo) is logged and the old value
//! stays; the next change tries again. Connections already open keep the
//! credentials they started with, as ScyllaDB's do.
//!
//! Why files and not SIGHUP: ScyllaDB watches its certificate files too,
//! and orchestrators (Kubernetes secrets, cert-manager) replace files
//! without signalling anyone. The thread reads files with `std::fs`, which
//! blocks, and that is why it is not a shard.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;

/// How often the watcher looks at the files.
pub const CHECK_PERIOD: Duration = Duration::from_secs(1);

/// A value every shard reads and the watcher replaces whole.
#[derive(Debug)]
pub struct Reloadable<T>(Arc<ArcSwap<T>>);

impl<T> Clone for Reloadable<T> {
    fn clone(&self) -> Self {
        Reloadable(Arc::clone(&self.0))
    }
}

impl<T> Reloadable<T> {
    pub fn new(value: Arc<T>) -> Reloadable<T> {
        Reloadable(Arc::new(ArcSwap::new(value)))
    }

    /// The current value.
    pub fn load(&self) -> Arc<T> {
        self.0.load_full()
    }

    fn store(&self, value: Arc<T>) {
        self.0.store(value);
    }
}

/// What identifies a file's content without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

fn stamp(path: &PathBuf) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    // Follows symbolic links: a Kubernetes secret swaps the link's target.
    let metadata = std::fs::metadata(path).ok()?;
    Some(Stamp { modified: metadata.modified().ok(), len: metadata.len(), inode: metadata.ino() })
}

type Rebuild = Box<dyn FnMut() -> Result<(), String> + Send>;

struct Watched {
    what: String,
    paths: Vec<PathBuf>,
    stamps: Vec<Option<Stamp>>,
    rebuild: Rebuild,
}

/// The files to watch and how to rebuild what each set feeds.
#[derive(Default)]
pub struct Watcher {
    watched: Vec<Watched>,
}

impl Watcher {
    pub fn new() -> Watcher {
        Watcher::default()
    }

    /// Rebuilds `target` with `build` whenever one of `paths` changes.
    /// `what` names it in the log.
    pub fn watch<T, E, F>(&mut self, what: &str, paths: Vec<PathBuf>, target: &Reloadable<T>, mut build: F)
    where
        T: Send + Sync + 'static,
        E: std::fmt::Display,
        F: FnMut() -> Result<Arc<T>, E> + Send + 'static,
    {
        let target = target.clone();
        let stamps = paths.iter().map(stamp).collect();
        let rebuild: Rebuild = Box::new(move || {
            target.store(build().map_err(|e| e.to_string())?);
            Ok(())
        });
        self.watched.push(Watched { what: what.to_string(), paths, stamps, rebuild });
    }

    /// Looks at every file once and rebuilds what changed; returns how
    /// many values were replaced.
    pub fn check(&mut self) -> usize {
        let mut replaced = 0;
        for watched in &mut self.watched {
            let stamps: Vec<_> = watched.paths.iter().map(stamp).collect();
            if stamps == watched.stamps {
                continue;
            }
            // Remembered even when the build fails: it is tried again on
            // the next change, not every period.
            watched.stamps = stamps;
            match (watched.rebuild)() {
                Ok(()) => {
                    tracing::info!("reloaded {} from {:?}", watched.what, watched.paths);
                    replaced += 1;
                }
                Err(e) => tracing::warn!("cannot reload {} (the previous one stays in use): {e}", watched.what),
            }
        }
        replaced
    }

    /// Checks every [`CHECK_PERIOD`] on a thread of its own, for the life
    /// of the process; no thread when nothing is watched.
    pub fn spawn(mut self) -> std::io::Result<()> {
        if self.watched.is_empty() {
            return Ok(());
        }
        std::thread::Builder::new().name("tls-reload".to_string()).spawn(move || loop {
            std::thread::sleep(CHECK_PERIOD);
            self.check();
        })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_certificates::TestCa;

    #[test]
    fn a_changed_file_is_reloaded_and_a_broken_one_keeps_the_old_value() {
        let ca = TestCa::new();
        let path = ca.write("users", "a:1\n");
        let current = Reloadable::new(Arc::new("a:1\n".to_string()));
        let mut watcher = Watcher::new();
        let read_from = path.clone();
        watcher.watch("the test file", vec![path.clone()], &current, move || {
            let text = std::fs::read_to_string(&read_from).map_err(|e| e.to_string())?;
            if text.contains("broken") {
                return Err("broken".to_string());
            }
            Ok(Arc::new(text))
        });
        assert_eq!(watcher.check(), 0, "nothing changed yet");
        std::fs::write(&path, "a:1\nb:22\n").ok();
        assert_eq!(watcher.check(), 1);
        assert_eq!(current.load().as_str(), "a:1\nb:22\n");
        std::fs::write(&path, "broken, longer").ok();
        assert_eq!(watcher.check(), 0);
        assert_eq!(current.load().as_str(), "a:1\nb:22\n");
        assert_eq!(watcher.check(), 0, "a failed build is not retried until the next change");
    }
}
