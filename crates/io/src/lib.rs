//! Disk I/O for a shard: files read and written asynchronously through the
//! shard's io_uring (compio), never with a blocking syscall on the shard.
//!
//! Buffers are owned and travel with each request (completion-based I/O):
//! a read takes a buffer and gives it back filled. Every error names the
//! file it concerns, so the layers above can say which file failed.
//!
//! Every call names its I/O class ([`IoClass`]): what the request is for.
//! Every read and write waits its turn in the shard's I/O queue
//! (`io_queue.rs`, a fair queue with Seastar's cost model, DESIGN.md §6
//! and docs/scheduling.md), which shares the disk between classes by
//! their shares and keeps no more than the latency goal's worth of work
//! in flight.
//!
//! Direct I/O (glommio's `DmaFile`, Seastar's files): files opened for
//! reading ([`File::open`]), the commitlog's segments
//! ([`File::open_direct_rw`]) and files written front to back
//! ([`Appender`]: SSTables, [`write_durably`]) bypass the page cache
//! (O_DIRECT), so what the disk does is what the scheduler sees, and a
//! completed write is in the file, not in a buffer of this process.
//! O_DIRECT wants aligned memory, offsets and lengths ([`aligned`]): a read
//! fetches the aligned blocks around the wanted bytes; a direct file is
//! written only in whole aligned blocks ([`File::write_aligned_at`]). Where
//! the filesystem refuses O_DIRECT the file goes through the page cache,
//! with one warning; [`set_direct_io`] turns direct I/O off for contrast
//! runs. Files rewritten in place ([`File::open_rw`]: the Raft log) go
//! through the page cache.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::{Bytes, BytesMut};
use compio::buf::{IntoInner, IoBuf};
use compio::io::{AsyncReadAt, AsyncReadAtExt, AsyncWriteAtExt};

pub mod aligned;
mod appender;
mod class;
mod cost;
mod fair_queue;
mod io_queue;
pub mod iotune;
mod metrics;

pub use appender::{Appender, APPEND_BUFFER_BYTES};
use class::record;
pub use class::{counted, IoClass};
use cost::Direction;
pub use cost::{IoProperties, PropertiesError};
pub use io_queue::{configure, set_shares, SchedulerConfig, DEFAULT_LATENCY_GOAL_US};

use aligned::{align_down, align_up, is_aligned, AlignedBuf};

/// Whether files that can be direct are opened with O_DIRECT: set once at
/// start, before the shards run ([`set_direct_io`]).
static DIRECT_IO: AtomicBool = AtomicBool::new(true);
/// Whether the warning that a filesystem refuses O_DIRECT was logged.
static DIRECT_REFUSED_WARNED: AtomicBool = AtomicBool::new(false);

/// Turns direct I/O on (the default) or off: off only for runs that
/// contrast it with the page cache. Call before the shards start.
pub fn set_direct_io(enabled: bool) {
    DIRECT_IO.store(enabled, Ordering::Relaxed);
}

/// Reads and writes larger than this go to the disk in pieces, each
/// waiting its turn (Seastar splits at 128 KiB too): one large request
/// would otherwise hold the disk, and the token bucket, for long.
pub const MAX_REQUEST_BYTES: usize = 128 << 10;

/// An I/O error with the path it concerns.
#[derive(Debug)]
pub struct IoError {
    pub path: PathBuf,
    pub source: io::Error,
}

impl std::fmt::Display for IoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.source)
    }
}

impl std::error::Error for IoError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

pub type IoResult<T> = Result<T, IoError>;

fn at<T>(path: &Path, result: io::Result<T>) -> IoResult<T> {
    result.map_err(|source| IoError { path: path.to_path_buf(), source })
}

/// The aligned blocks a direct read of `len` bytes at `offset` reads.
struct Blocks {
    offset: u64,
    len: usize,
    /// The file offset of the first block.
    first: u64,
    /// The blocks' length.
    span: usize,
}

impl Blocks {
    fn around(offset: u64, len: usize) -> Blocks {
        let first = align_down(offset);
        let span = align_up(offset + len as u64 - first) as usize;
        Blocks { offset, len, first, span }
    }

    /// Where the wanted bytes are among the blocks.
    fn wanted(&self) -> std::ops::Range<usize> {
        let start = (self.offset - self.first) as usize;
        start..start + self.len
    }
}

/// An open file: direct (O_DIRECT) or through the page cache.
pub struct File {
    file: compio::fs::File,
    path: PathBuf,
    direct: bool,
}

impl File {
    /// Opens `path` for reading, direct where the filesystem allows it:
    /// reads of any range go through aligned buffers.
    pub async fn open(path: &Path, class: IoClass) -> IoResult<File> {
        record(class, 0);
        let mut options = compio::fs::OpenOptions::new();
        options.read(true);
        File::open_with(path, options, true).await
    }

    /// Opens `path` for reading and writing through the page cache,
    /// creating it if missing.
    pub async fn open_rw(path: &Path, class: IoClass) -> IoResult<File> {
        record(class, 0);
        let mut options = compio::fs::OpenOptions::new();
        options.read(true).write(true).create(true);
        File::open_with(path, options, false).await
    }

    /// Opens `path` for direct reading and writing, creating it if
    /// missing: it is written with [`File::write_aligned_at`] only.
    pub async fn open_direct_rw(path: &Path, class: IoClass) -> IoResult<File> {
        record(class, 0);
        let mut options = compio::fs::OpenOptions::new();
        options.read(true).write(true).create(true);
        File::open_with(path, options, true).await
    }

    pub(crate) async fn open_with(path: &Path, options: compio::fs::OpenOptions, direct: bool) -> IoResult<File> {
        if direct && DIRECT_IO.load(Ordering::Relaxed) {
            let mut direct_options = options.clone();
            direct_options.custom_flags(libc::O_DIRECT);
            match direct_options.open(path).await {
                Ok(file) => return Ok(File { file, path: path.to_path_buf(), direct: true }),
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    if !DIRECT_REFUSED_WARNED.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            "{}: the filesystem refuses O_DIRECT; files go through the page cache",
                            path.display()
                        );
                    }
                }
                Err(e) => return at(path, Err(e)),
            }
        }
        let file = at(path, options.open(path).await)?;
        Ok(File { file, path: path.to_path_buf(), direct: false })
    }

    /// Whether the file bypasses the page cache.
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub async fn len(&self) -> IoResult<u64> {
        Ok(at(&self.path, self.file.metadata().await)?.len())
    }

    /// Reads exactly `len` bytes at `offset`; a short file is an error.
    /// Each piece of at most [`MAX_REQUEST_BYTES`] waits its turn. A direct
    /// file reads the aligned blocks holding the wanted bytes into
    /// uninitialised memory ([`aligned::read_buffer`]), and the result is a
    /// view of the wanted bytes in that buffer: nothing is zeroed or copied.
    pub async fn read_exact_at(&self, offset: u64, len: usize, class: IoClass) -> IoResult<Bytes> {
        record(class, len);
        if !self.direct {
            return self.read_buffered(offset, len, class).await.map(Bytes::from);
        }
        if len == 0 {
            return Ok(Bytes::new());
        }
        let blocks = Blocks::around(offset, len);
        let buf = self.read_blocks(aligned::read_buffer(blocks.span), &blocks, class).await?;
        Ok(Bytes::slice(&buf.freeze(), blocks.wanted()))
    }

    /// Reads exactly `len` bytes at `offset` and hands them to `f`,
    /// returning what it returns: [`File::read_exact_at`] for bytes used
    /// before the caller goes on (an index page copied out, a row
    /// decoded). A direct file reads into a buffer of the thread's pool
    /// ([`aligned::pooled_read_buffer`]), given back after `f`: a point
    /// read allocates no buffer.
    pub async fn read_with<R>(
        &self,
        offset: u64,
        len: usize,
        class: IoClass,
        f: impl FnOnce(&[u8]) -> R,
    ) -> IoResult<R> {
        if !self.direct || len == 0 {
            return self.read_exact_at(offset, len, class).await.map(|bytes| f(&bytes));
        }
        record(class, len);
        let blocks = Blocks::around(offset, len);
        let buf = self.read_blocks(aligned::pooled_read_buffer(blocks.span), &blocks, class).await?;
        let result = f(&buf[blocks.wanted()]);
        aligned::recycle(buf);
        Ok(result)
    }

    /// Reads `blocks` of a direct file into `buf` (empty, aligned, with
    /// room for their span), in pieces that each wait their turn.
    async fn read_blocks(&self, mut buf: BytesMut, blocks: &Blocks, class: IoClass) -> IoResult<BytesMut> {
        let (span, wanted) = (blocks.span, blocks.wanted().end);
        // `buf.len()` grows as pieces are read.
        while buf.len() < wanted {
            let filled = buf.len();
            let end = span.min(filled + MAX_REQUEST_BYTES);
            let _turn = io_queue::admit(class, Direction::Read, end - filled).await;
            let piece = buf.slice(filled..end);
            let compio::BufResult(result, piece) = self.file.read_at(piece, blocks.first + filled as u64).await;
            buf = piece.into_inner();
            let read = at(&self.path, result)?;
            assert_eq!(buf.len(), filled + read, "a read sets its buffer's length");
            if read < end - filled {
                break; // The end of the file.
            }
        }
        if buf.len() < wanted {
            let (offset, len) = (blocks.offset, blocks.len);
            let short = io::Error::new(io::ErrorKind::UnexpectedEof, format!("{len} bytes at {offset}: past the end"));
            return at(&self.path, Err(short));
        }
        Ok(buf)
    }

    async fn read_buffered(&self, offset: u64, len: usize, class: IoClass) -> IoResult<Vec<u8>> {
        let mut buf = Vec::with_capacity(len);
        while buf.len() < len {
            let start = buf.len();
            let end = len.min(start + MAX_REQUEST_BYTES);
            let _turn = io_queue::admit(class, Direction::Read, end - start).await;
            let compio::BufResult(result, piece) =
                self.file.read_exact_at(buf.slice(start..end), offset + start as u64).await;
            buf = piece.into_inner();
            at(&self.path, result)?;
            assert_eq!(buf.len(), end, "a read that succeeded filled its piece");
        }
        Ok(buf)
    }

    /// Reads the whole file.
    pub async fn read_all(&self, class: IoClass) -> IoResult<Bytes> {
        let len = self.len().await?;
        let len = at(&self.path, usize::try_from(len).map_err(|_| io::Error::other("file too large")))?;
        self.read_exact_at(0, len, class).await
    }

    /// Writes all of `buf` at `offset`. The buffer comes back whatever the
    /// outcome, so a failed write can be retried with the same bytes. Each
    /// piece of at most [`MAX_REQUEST_BYTES`] waits its turn.
    /// A direct file takes only [`File::write_aligned_at`].
    pub async fn write_all_at(&self, offset: u64, mut buf: Vec<u8>, class: IoClass) -> (IoResult<()>, Vec<u8>) {
        if self.direct {
            let unaligned = io::Error::new(io::ErrorKind::InvalidInput, "a direct file is written in aligned blocks");
            return (at(&self.path, Err(unaligned)), buf);
        }
        record(class, buf.len());
        let mut start = 0;
        while start < buf.len() {
            let end = buf.len().min(start + MAX_REQUEST_BYTES);
            let _turn = io_queue::admit(class, Direction::Write, end - start).await;
            let compio::BufResult(result, piece) =
                (&self.file).write_all_at(buf.slice(start..end), offset + start as u64).await;
            buf = piece.into_inner();
            if let Err(e) = result {
                return (at(&self.path, Err(e)), buf);
            }
            start = end;
        }
        (Ok(()), buf)
    }

    /// Writes all of `buf` at `offset`, both multiples of
    /// [`aligned::ALIGN_BYTES`]: the one write a direct file takes (a
    /// buffered one takes it too). The buffer comes back whatever the
    /// outcome. Each piece of at most [`MAX_REQUEST_BYTES`] waits its turn.
    pub async fn write_aligned_at(
        &self,
        offset: u64,
        mut buf: AlignedBuf,
        class: IoClass,
    ) -> (IoResult<()>, AlignedBuf) {
        assert!(is_aligned(offset), "{}: a write at {offset} is not aligned", self.path.display());
        assert!(is_aligned(buf.len() as u64), "{}: a write of {} bytes is not aligned", self.path.display(), buf.len());
        record(class, buf.len());
        let mut start = 0;
        while start < buf.len() {
            let end = buf.len().min(start + MAX_REQUEST_BYTES);
            let _turn = io_queue::admit(class, Direction::Write, end - start).await;
            let (piece, buf_start, buf_len) = buf.piece(start..end);
            let compio::BufResult(result, piece) = (&self.file).write_all_at(piece, offset + start as u64).await;
            buf = AlignedBuf::back(piece, buf_start, buf_len);
            if let Err(e) = result {
                return (at(&self.path, Err(e)), buf);
            }
            start = end;
        }
        (Ok(()), buf)
    }

    /// Sets the file's size to `len_bytes` (ftruncate through io_uring):
    /// a file sized up front keeps its size while it is written, so an
    /// fdatasync has no size to record.
    pub async fn set_len(&self, len_bytes: u64, class: IoClass) -> IoResult<()> {
        record(class, 0);
        at(&self.path, self.file.set_len(len_bytes).await)
    }

    /// fdatasync: the data written so far (and the size) is on disk.
    pub async fn sync_data(&self, class: IoClass) -> IoResult<()> {
        record(class, 0);
        at(&self.path, self.file.sync_data().await)
    }
}

pub async fn rename(from: &Path, to: &Path, class: IoClass) -> IoResult<()> {
    record(class, 0);
    at(to, compio::fs::rename(from, to).await)
}

/// Removes `path`; a file already gone is not an error.
pub async fn remove_file_if_exists(path: &Path, class: IoClass) -> IoResult<()> {
    record(class, 0);
    match compio::fs::remove_file(path).await {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => at(path, other),
    }
}

pub async fn hard_link(original: &Path, link: &Path, class: IoClass) -> IoResult<()> {
    record(class, 0);
    at(link, compio::fs::hard_link(original, link).await)
}

pub async fn create_dir_all(path: &Path, class: IoClass) -> IoResult<()> {
    record(class, 0);
    at(path, compio::fs::create_dir_all(path).await)
}

/// Creates `path` holding `bytes`, written direct ([`Appender`]) and made
/// durable (fdatasync).
pub async fn write_durably(path: &Path, bytes: Vec<u8>, class: IoClass) -> IoResult<()> {
    let mut file = Appender::create(path, class).await?;
    file.append(&bytes).await?;
    file.finish().await
}

/// Replaces `path` with a file holding `bytes`, all or nothing: written
/// durably under `tmp`, renamed over `path`, the rename made durable.
pub async fn replace_durably(path: &Path, tmp: &Path, bytes: Vec<u8>, class: IoClass) -> IoResult<()> {
    write_durably(tmp, bytes, class).await?;
    rename(tmp, path, class).await?;
    match path.parent() {
        Some(dir) => sync_dir(dir, class).await,
        None => Ok(()),
    }
}

/// The names of the entries in directory `path`, in no particular order;
/// a missing directory has none.
///
/// io_uring has no opcode for listing a directory, so this is a blocking
/// `getdents` on the calling shard: call it only where a shard may block,
/// while it opens its storage before serving. (A helper thread would keep
/// the shard free, but its completion wakes the ring through an eventfd
/// that valgrind cannot follow, and callgrind is how hot paths are counted.)
pub async fn list_dir(path: &Path, class: IoClass) -> IoResult<Vec<String>> {
    record(class, 0);
    let listed = match std::fs::read_dir(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
        Ok(entries) => entries.map(|entry| entry.map(|e| e.file_name().to_string_lossy().into_owned())).collect(),
    };
    at(path, listed)
}

/// Whether `path` exists (a file or a directory).
pub async fn exists(path: &Path, class: IoClass) -> IoResult<bool> {
    record(class, 0);
    match compio::fs::metadata(path).await {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => at(path, Err(e)),
    }
}

/// Makes the directory's entries (files created, renamed or removed in
/// it) durable.
pub async fn sync_dir(path: &Path, class: IoClass) -> IoResult<()> {
    record(class, 0);
    let mut options = compio::fs::OpenOptions::new();
    options.read(true);
    let dir = File::open_with(path, options, false).await?;
    at(path, dir.file.sync_all().await)
}

/// Runs `future` to completion on a fresh single-thread runtime: for tests
/// and tools outside the shards.
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    // Invariant: building a runtime only fails when io_uring and every
    // fallback are unavailable, which no supported host is.
    #[allow(clippy::expect_used)]
    let runtime = compio::runtime::Runtime::new().expect("an I/O runtime");
    runtime.block_on(future)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_call_is_counted_under_its_class() {
        let dir = std::env::temp_dir().join(format!("shoal-io-class-{}", std::process::id()));
        let runtime = compio::runtime::Runtime::new().expect("a compio runtime");
        runtime.block_on(async {
            create_dir_all(&dir, IoClass::Maintenance).await.expect("create dir");
            let path = dir.join("data");
            let (flush_ops, flush_bytes) = counted(IoClass::Flush);
            let file = File::open_rw(&path, IoClass::Flush).await.expect("create");
            let (written, _) = file.write_all_at(0, vec![7; 100], IoClass::Flush).await;
            written.expect("write");
            file.sync_data(IoClass::Flush).await.expect("sync");
            assert_eq!(counted(IoClass::Flush), (flush_ops + 3, flush_bytes + 100));

            let (query_ops, query_bytes) = counted(IoClass::Query);
            let reader = File::open(&path, IoClass::Query).await.expect("open");
            let read = reader.read_exact_at(10, 50, IoClass::Query).await.expect("read");
            assert_eq!(read, vec![7; 50]);
            assert_eq!(counted(IoClass::Query), (query_ops + 2, query_bytes + 50));

            assert_eq!(list_dir(&dir, IoClass::Maintenance).await.expect("list"), ["data"]);
            assert!(exists(&path, IoClass::Maintenance).await.expect("stat"));
            remove_file_if_exists(&path, IoClass::Maintenance).await.expect("remove");
            assert!(!exists(&path, IoClass::Maintenance).await.expect("stat"));
            assert!(list_dir(&dir.join("missing"), IoClass::Maintenance).await.expect("list").is_empty());
        });
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn reads_and_writes_wait_their_turn_and_are_counted() {
        // 1,000 writes/s on one shard: each 4 KiB write costs ~1 ms of
        // disk time, more than the 0.75 ms goal, so they go one by one.
        let slow = IoProperties {
            read_iops: 1_000,
            read_bandwidth_bytes_per_s: 100 << 20,
            write_iops: 1_000,
            write_bandwidth_bytes_per_s: 100 << 20,
        };
        configure(SchedulerConfig {
            enabled: true,
            properties: slow,
            shard_count: 1,
            latency_goal_us: DEFAULT_LATENCY_GOAL_US,
        });
        let dir = std::env::temp_dir().join(format!("shoal-io-queue-{}", std::process::id()));
        block_on(async {
            create_dir_all(&dir, IoClass::Maintenance).await.expect("create dir");
            let file = File::open_rw(&dir.join("data"), IoClass::Compaction).await.expect("create");
            let started = std::time::Instant::now();
            let writes = (0..20u64).map(|i| {
                let file = &file;
                async move { file.write_all_at(i * 4096, vec![1; 4096], IoClass::Compaction).await.0 }
            });
            for written in futures_util::future::join_all(writes).await {
                written.expect("write");
            }
            assert!(started.elapsed() >= std::time::Duration::from_millis(15), "paced at the disk's rate");
            let stats = io_queue::snapshot().expect("the shard's queue exists");
            let (_, compaction, queued, shares) = stats[IoClass::Compaction as usize];
            assert_eq!((compaction.ops_dispatched, compaction.bytes_dispatched), (20, 20 * 4096));
            assert_eq!((compaction.in_flight, queued, shares), (0, 0, 1000));
            assert!(compaction.queue_delay_ns > 0);
            let families = shoal_metrics::gather();
            assert!(families.iter().any(|f| f.name == "shoal_io_queue_dispatched_bytes_total"));
        });
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn direct_files_read_any_range_and_take_aligned_writes() {
        let dir = std::env::temp_dir().join(format!("shoal-io-direct-{}", std::process::id()));
        block_on(async {
            create_dir_all(&dir, IoClass::Maintenance).await.expect("create dir");
            let path = dir.join("data");
            let file = File::open_direct_rw(&path, IoClass::Commitlog).await.expect("open");
            assert!(file.is_direct(), "the test directory is on a disk that takes O_DIRECT");
            let mut block = AlignedBuf::zeroed(3 * aligned::ALIGN_BYTES + MAX_REQUEST_BYTES);
            block.as_mut_slice().iter_mut().enumerate().for_each(|(i, b)| *b = (i % 251) as u8);
            let expected = block.as_slice().to_vec();
            let (written, _) = file.write_aligned_at(4096, block, IoClass::Commitlog).await;
            written.expect("aligned write");
            let (refused, _) = file.write_all_at(1, vec![1], IoClass::Commitlog).await;
            assert!(refused.is_err(), "a direct file takes aligned writes only");
            file.sync_data(IoClass::Commitlog).await.expect("sync");

            let reader = File::open(&path, IoClass::Query).await.expect("open");
            assert!(reader.is_direct());
            for (offset, len) in [(4096, 10), (4100, 5000), (8190, 5), (4096 + 9000, MAX_REQUEST_BYTES + 77)] {
                let read = reader.read_exact_at(offset, len, IoClass::Query).await.expect("read");
                let at = offset as usize - 4096;
                assert_eq!(read, expected[at..at + len], "{len} bytes at {offset}");
            }
            assert!(reader.read_exact_at(0, 4096, IoClass::Query).await.expect("a hole").iter().all(|b| *b == 0));
            let end = 4096 + expected.len() as u64;
            assert!(reader.read_exact_at(end - 3, 4, IoClass::Query).await.is_err(), "past the end is an error");

            file.set_len(end - 100, IoClass::Commitlog).await.expect("set len");
            assert_eq!(reader.len().await.expect("len"), end - 100);
            let tail = reader.read_exact_at(end - 150, 50, IoClass::Query).await.expect("an unaligned tail");
            assert_eq!(tail, expected[expected.len() - 150..expected.len() - 100]);
            assert_eq!(reader.read_all(IoClass::Query).await.expect("all").len() as u64, end - 100);
        });
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn large_requests_go_in_pieces_and_come_back_whole() {
        let dir = std::env::temp_dir().join(format!("shoal-io-pieces-{}", std::process::id()));
        block_on(async {
            create_dir_all(&dir, IoClass::Maintenance).await.expect("create dir");
            let file = File::open_rw(&dir.join("data"), IoClass::Flush).await.expect("create");
            let bytes: Vec<u8> = (0..3 * MAX_REQUEST_BYTES + 17).map(|i| (i % 251) as u8).collect();
            let (written, back) = file.write_all_at(5, bytes.clone(), IoClass::Flush).await;
            written.expect("write");
            assert_eq!(back, bytes, "the buffer comes back as it went");
            let reader = File::open(&dir.join("data"), IoClass::Query).await.expect("open");
            assert_eq!(reader.read_exact_at(5, bytes.len(), IoClass::Query).await.expect("read"), bytes);
            assert!(reader.read_exact_at(6, bytes.len(), IoClass::Query).await.is_err(), "a short file is an error");
            assert!(reader.read_exact_at(0, 0, IoClass::Query).await.expect("empty read").is_empty());
        });
        let _ = std::fs::remove_dir_all(&dir);
    }
}
