//! `shoal iotune`: measures the disk under a directory, as ScyllaDB's
//! iotune does, for the I/O scheduler's cost model (`cost.rs`): random
//! 4 KiB read and write IOPS at a high queue depth, sequential read and
//! write bandwidth in 1 MiB requests.
//!
//! Runs on its own compio runtime (one thread, io_uring), on a scratch
//! file removed afterwards. O_DIRECT with 4096-aligned buffers where the
//! filesystem allows it, so the page cache does not flatter the disk;
//! buffered I/O with a warning where it refuses (tmpfs).

use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use compio::buf::IntoInner;
use compio::io::{AsyncReadAtExt, AsyncWriteAtExt};
use thiserror::Error;

use crate::aligned::{AlignedBuf, ALIGN_BYTES};
use crate::cost::IoProperties;

const RANDOM_REQUEST_BYTES: usize = 4096;
const SEQUENTIAL_REQUEST_BYTES: usize = 1 << 20;
const RANDOM_QUEUE_DEPTH: usize = 64;
const SEQUENTIAL_QUEUE_DEPTH: usize = 4;

#[derive(Debug, Clone)]
pub struct IotuneOptions {
    pub dir: PathBuf,
    /// The whole run; each of the four measurements gets a quarter.
    pub duration: Duration,
    /// The scratch file's largest size.
    pub file_size_bytes: u64,
}

#[derive(Debug, Clone)]
pub struct IotuneReport {
    pub properties: IoProperties,
    pub mountpoint: String,
    /// Whether the measurements bypassed the page cache.
    pub direct: bool,
}

#[derive(Debug, Error)]
pub enum IotuneError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("the disk under {0} completed no request in the time given")]
    NothingMeasured(PathBuf),
}

fn at(path: &Path) -> impl Fn(std::io::Error) -> IotuneError + '_ {
    move |source| IotuneError::Io { path: path.to_path_buf(), source }
}

/// Measures the disk under `options.dir` (created if missing).
pub fn run(options: &IotuneOptions) -> Result<IotuneReport, IotuneError> {
    assert!(options.duration > Duration::ZERO, "iotune needs time to measure");
    assert!(options.file_size_bytes >= SEQUENTIAL_REQUEST_BYTES as u64, "the scratch file holds a request");
    std::fs::create_dir_all(&options.dir).map_err(at(&options.dir))?;
    let path = options.dir.join(format!("iotune-{}.tmp", std::process::id()));
    let measured = crate::block_on(measure(&path, options));
    let _ = std::fs::remove_file(&path);
    let (properties, direct) = measured?;
    Ok(IotuneReport { properties, mountpoint: mountpoint(&options.dir), direct })
}

async fn measure(path: &Path, options: &IotuneOptions) -> Result<(IoProperties, bool), IotuneError> {
    let (file, direct) = open(path).await?;
    if !direct {
        tracing::warn!("{}: the filesystem refuses O_DIRECT; measuring through the page cache", path.display());
    }
    let file = Rc::new(file);
    let phase = options.duration / 4;
    let blocks = options.file_size_bytes / SEQUENTIAL_REQUEST_BYTES as u64;
    let write_bandwidth = sequential(&file, path, phase, blocks, true).await?;
    file.sync_data().await.map_err(at(path))?;
    let written_bytes = file.metadata().await.map_err(at(path))?.len();
    let read_bandwidth = sequential(&file, path, phase, written_bytes / SEQUENTIAL_REQUEST_BYTES as u64, false).await?;
    let pages = written_bytes / RANDOM_REQUEST_BYTES as u64;
    let write_iops = random(&file, path, phase, pages, true).await?;
    let read_iops = random(&file, path, phase, pages, false).await?;
    let properties = IoProperties {
        read_iops,
        read_bandwidth_bytes_per_s: read_bandwidth,
        write_iops,
        write_bandwidth_bytes_per_s: write_bandwidth,
    };
    Ok((properties, direct))
}

/// Opens the scratch file with O_DIRECT if one aligned write succeeds.
async fn open(path: &Path) -> Result<(compio::fs::File, bool), IotuneError> {
    let mut options = compio::fs::OpenOptions::new();
    options.read(true).write(true).create(true).truncate(true);
    let direct = options.clone().custom_flags(libc::O_DIRECT).open(path).await;
    if let Ok(file) = direct {
        let compio::BufResult(written, _) = (&file).write_all_at(aligned_for_write(ALIGN_BYTES), 0).await;
        if written.is_ok() {
            return Ok((file, true));
        }
    }
    Ok((options.open(path).await.map_err(at(path))?, false))
}

/// A buffer of `len` bytes starting at an aligned address, full (for writes).
fn aligned_for_write(len: usize) -> compio::buf::Slice<Vec<u8>> {
    let mut buf = AlignedBuf::zeroed(len);
    buf.as_mut_slice().fill(0x5a);
    buf.piece(0..len).0
}

/// A buffer of `len` bytes starting at an aligned address (for reads).
fn aligned_for_read(len: usize) -> compio::buf::Slice<Vec<u8>> {
    AlignedBuf::zeroed(len).piece(0..len).0
}

/// Sequential 1 MiB requests over `blocks` blocks, a few in flight;
/// bytes per second.
async fn sequential(
    file: &Rc<compio::fs::File>,
    path: &Path,
    duration: Duration,
    blocks: u64,
    write: bool,
) -> Result<u64, IotuneError> {
    let started = Instant::now();
    let next = Rc::new(std::cell::Cell::new(0u64));
    let workers = (0..SEQUENTIAL_QUEUE_DEPTH).map(|_| {
        let (file, next) = (Rc::clone(file), Rc::clone(&next));
        async move {
            let mut done = 0u64;
            while started.elapsed() < duration && next.get() < blocks.max(1) {
                let offset = next.get() * SEQUENTIAL_REQUEST_BYTES as u64;
                next.set(next.get() + 1);
                transfer(&file, offset, SEQUENTIAL_REQUEST_BYTES, write).await?;
                done += 1;
            }
            Ok::<u64, std::io::Error>(done)
        }
    });
    let requests = finish(path, futures_util::future::join_all(workers).await)?;
    rate(path, requests * SEQUENTIAL_REQUEST_BYTES as u64, started.elapsed())
}

/// Random 4 KiB requests within the first `pages` pages, many in
/// flight; requests per second.
async fn random(
    file: &Rc<compio::fs::File>,
    path: &Path,
    duration: Duration,
    pages: u64,
    write: bool,
) -> Result<u64, IotuneError> {
    let started = Instant::now();
    let workers = (0..RANDOM_QUEUE_DEPTH as u64).map(|worker| {
        let file = Rc::clone(file);
        async move {
            let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ (worker + 1).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            let mut done = 0u64;
            while started.elapsed() < duration {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let offset = (state % pages.max(1)) * RANDOM_REQUEST_BYTES as u64;
                transfer(&file, offset, RANDOM_REQUEST_BYTES, write).await?;
                done += 1;
            }
            Ok::<u64, std::io::Error>(done)
        }
    });
    let requests = finish(path, futures_util::future::join_all(workers).await)?;
    rate(path, requests, started.elapsed())
}

async fn transfer(file: &compio::fs::File, offset: u64, len: usize, write: bool) -> std::io::Result<()> {
    if write {
        let compio::BufResult(result, _) = (&*file).write_all_at(aligned_for_write(len), offset).await;
        result
    } else {
        let compio::BufResult(result, buf) = file.read_exact_at(aligned_for_read(len), offset).await;
        drop(buf.into_inner());
        result
    }
}

fn finish(path: &Path, results: Vec<std::io::Result<u64>>) -> Result<u64, IotuneError> {
    results.into_iter().try_fold(0, |sum, done| Ok(sum + done.map_err(at(path))?))
}

fn rate(path: &Path, amount: u64, elapsed: Duration) -> Result<u64, IotuneError> {
    if amount == 0 {
        return Err(IotuneError::NothingMeasured(path.to_path_buf()));
    }
    let per_s = amount as f64 / elapsed.as_secs_f64().max(1e-9);
    Ok((per_s as u64).max(1))
}

/// The mount point holding `dir`: the longest mount prefix in
/// /proc/self/mounts (the directory itself where that cannot be read).
fn mountpoint(dir: &Path) -> String {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|line| line.split_whitespace().nth(1))
        .filter(|mount| dir.starts_with(mount))
        .max_by_key(|mount| mount.len())
        .map_or_else(|| dir.display().to_string(), str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iotune_measures_every_figure_and_cleans_up() {
        let dir = std::env::temp_dir().join(format!("shoal-iotune-{}", std::process::id()));
        let options =
            IotuneOptions { dir: dir.clone(), duration: Duration::from_millis(400), file_size_bytes: 8 << 20 };
        let report = run(&options).expect("iotune runs");
        let p = report.properties;
        assert!(p.read_iops > 0 && p.write_iops > 0);
        assert!(p.read_bandwidth_bytes_per_s > 0 && p.write_bandwidth_bytes_per_s > 0);
        assert!(!report.mountpoint.is_empty());
        let parsed = IoProperties::parse_yaml(&p.render_yaml(&report.mountpoint)).expect("its YAML parses");
        assert_eq!(parsed, p);
        assert_eq!(std::fs::read_dir(&dir).expect("dir").count(), 0, "the scratch file is gone");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
