//! The commitlog: one shard's write-ahead log, so a write acknowledged
//! before its memtable is flushed survives a crash.
//!
//! The log is a sequence of segment files `CommitLog-<shard>-<id>.log` of at
//! most `segment_size_bytes`, each a [`SEGMENT_HEADER_BYTES`] header then
//! entries `[u32 payload length][u32 crc32c of payload][payload]`. Ids grow
//! forever (across restarts too), so a [`Position`] — segment id and offset —
//! orders every entry ever written by this shard.
//!
//! Appending is synchronous: the entry is placed at the log's end in memory
//! and gets its position at once, so the caller applies it to the memtable
//! in the same step and memtables and positions stay in order. A writer task
//! moves pending bytes to disk in the background; entries appended while a
//! round is on disk share the next round (group commit). Woken by an
//! append, the writer first lets the tasks that are ready in the same
//! reactor turn run, so the appends of one turn go out in one round
//! rather than the first alone and the rest after it. With `batch` sync,
//! the writer fdatasyncs after each round and the appender waits for that
//! before acknowledging. With `periodic` sync, a timer syncs and the
//! appender waits only until its entry is written to the file
//! ([`CommitLog::wait_durable`]): kill -9 loses nothing acknowledged, a
//! machine crash at most the last period. A periodic log's writer does not
//! wait for the fdatasync of a segment it has filled either: that
//! segment is synced by the next periodic sync (or at close), before the
//! current one, while writes go on into the next segment — an fdatasync
//! behind a busy disk used to hold every write for its length.
//!
//! Segments are direct files (O_DIRECT, `shoal_io::File::open_direct_rw`),
//! sized to `segment_size_bytes` when created, written in whole aligned
//! blocks: each round writes its bytes after the segment's last partial
//! block, that block included, padded with zeros to the block's end. The
//! next round writes that block again, longer. An entry is encoded in
//! place, once, into the buffer its round sends: a pending chunk begins at
//! an aligned address with the bytes of its first block that earlier
//! rounds took (`State::tail`, kept when the writer takes a chunk), so the
//! writer sends it as it is, with no copy. Zeros after
//! the last entry are where replay stops. (Rewriting the tail block is safe
//! against kill -9, whose writes the kernel finishes; a machine crash
//! tearing that block's write could lose its earlier, synced entries on a
//! disk whose block writes are not atomic.)
//!
//! A write error (disk full) keeps the unwritten bytes queued in order and
//! the writer retries them, so the log never has a hole. While writes fail,
//! each new append wakes the writer for another try (else it retries every
//! [`RETRY_AFTER_ERROR_MS`]), so a write's error says what the disk does now,
//! not what it did before space came back; a waiter fails only when a round
//! holding its entry failed. Appends keep joining the queue until
//! [`CommitLog::max_backlog_bytes`] more have piled up during the failure,
//! then fail fast: memory stays bounded however long the disk stays full.
//!
//! A failed fdatasync is different: the kernel may already have dropped
//! the pages it could not write, so a later sync that succeeds proves
//! nothing about them. It fails the log for good: every append and waiter
//! fails from then on, with a message asking for a restart (whose replay
//! reads what really reached the disk).
//!
//! Segments are deleted when every entry in them is in an SSTable: the
//! owner tells the log the oldest position any memtable still needs
//! ([`CommitLog::discard_before`]). A periodic log's filled segments that
//! are not synced yet are let go of first: a discarded segment is neither
//! synced (its entries are in synced SSTables) nor closed after its unlink
//! (the last close of an unlinked file frees its blocks, synchronously, on
//! the closing thread: the shard's, where appends wait behind it), and
//! the unlink itself runs on io_uring's workers.
//!
//! The log reports how long bytes wait for the writer and how long its
//! writes take ([`CommitLog::report_latency`]: the shard's data log does,
//! as `shoal_commitlog_write_seconds`), so a stall shows where it is.
//!
//! A clean stop (drain) closes the log ([`CommitLog::close`]: appends fail
//! from then on, and what was appended is written and synced), flushes
//! every memtable, then deletes every segment, the current one too
//! ([`CommitLog::discard_all`]): the next start has nothing to replay.

mod mutation;
mod replay;

pub use mutation::{
    decode_mutation, encode_mutation, encode_received_mutation, encode_row_mutation, encode_tombstone_mutation,
};
pub use replay::{read_segment, replay_segment, segment_ids, ReplayEntry, SegmentReport};

use shoal_io::IoClass;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use shoal_io::aligned::{align_down, align_up, AlignedBuf, ALIGN_BYTES};
use shoal_io::File;
use shoal_metrics::Histogram;
use shoal_runtime::sched::in_group;
use shoal_runtime::Group;

use crate::error::{StorageError, StorageResult};
use crate::event::Event;

pub const SEGMENT_MAGIC: &[u8; 8] = b"SHOALCLG";
pub const SEGMENT_VERSION: u16 = 1;
/// Magic, version, shard (u16), segment id (u64), crc32c of those.
pub const SEGMENT_HEADER_BYTES: u32 = 8 + 2 + 2 + 8 + 4;
pub const ENTRY_HEADER_BYTES: u32 = 8;

/// How long a failed write waits before it is retried.
const RETRY_AFTER_ERROR_MS: u64 = 500;

/// A place in the log: entries are ordered by (segment, offset).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Position {
    pub segment: u64,
    pub offset: u32,
}

impl Position {
    pub const ZERO: Position = Position { segment: 0, offset: 0 };
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.segment, self.offset)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    /// Acknowledge at once; fsync every `period_ms`.
    Periodic { period_ms: u64 },
    /// Acknowledge only once the entry is on disk.
    Batch,
}

#[derive(Debug, Clone)]
pub struct CommitLogConfig {
    pub dir: PathBuf,
    pub shard: usize,
    pub segment_size_bytes: u32,
    pub sync: SyncMode,
}

pub fn segment_path(dir: &Path, shard: usize, segment: u64) -> PathBuf {
    dir.join(format!("CommitLog-{shard}-{segment}.log"))
}

pub fn segment_header(shard: usize, segment: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(SEGMENT_HEADER_BYTES as usize);
    out.extend_from_slice(SEGMENT_MAGIC);
    out.extend_from_slice(&SEGMENT_VERSION.to_le_bytes());
    out.extend_from_slice(&(shard as u16).to_le_bytes());
    out.extend_from_slice(&segment.to_le_bytes());
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Bytes waiting to be written at `offset` of `segment`, in the buffer
/// their write sends.
struct Pending {
    segment: u64,
    /// Where its entries begin in the segment.
    offset: u32,
    /// `pad` bytes (up to the first aligned address), then the segment's
    /// bytes from the start of the block holding `offset`: `lead` bytes
    /// earlier rounds took, then its entries.
    buf: Vec<u8>,
    pad: usize,
    lead: usize,
    /// When its first bytes were appended: how long they waited for the writer.
    since: Instant,
}

/// Where a log reports the latency of its writes (histograms the owner
/// registered; a log without them measures nothing).
#[derive(Debug, Clone)]
pub struct WriteLatency {
    /// From a chunk's first append to its write's start.
    pub queued: Rc<Histogram>,
    /// Opening (and sizing) a new segment.
    pub open: Rc<Histogram>,
    /// A chunk's write, its turn in the I/O queue included.
    pub write: Rc<Histogram>,
}

struct State {
    /// Where the next entry goes.
    next: Position,
    pending: VecDeque<Pending>,
    /// Everything before it is written (not necessarily synced).
    written: Position,
    /// The bytes of the last chunk the writer took from the aligned block
    /// holding its end up to `tail_end`: the lead of the chunk after it
    /// (a direct file is written in whole blocks).
    tail: Vec<u8>,
    tail_end: Position,
    /// Everything before it is on disk.
    durable: Position,
    /// Segment files that exist (or are about to), oldest first.
    segments: Vec<u64>,
    /// Set while writes fail.
    failure: Option<Failure>,
    open_file: Option<(u64, Rc<File>)>,
    /// Filled segments of a periodic log not synced yet, oldest first, by id.
    unsynced: Vec<(u64, Rc<File>)>,
    /// The last round's buffer, used again by the next chunk: a fresh one
    /// per round cost a sizeable part of a small write.
    spare: Option<Vec<u8>>,
}

/// A write round failed and none has succeeded since.
struct Failure {
    /// The last round's error.
    message: String,
    /// Entries before it were in the last failed round: their waiters fail.
    covers: Position,
    /// Bytes appended since the first failed round, bounded by
    /// [`CommitLog::max_backlog_bytes`].
    appended_bytes: usize,
}

pub struct CommitLog {
    config: CommitLogConfig,
    state: RefCell<State>,
    has_pending: Event,
    durable_advanced: Event,
    /// Told after each write round, done or failed.
    round_ended: Event,
    /// Told after each sync, done or failed.
    sync_ended: Event,
    /// Closed by [`CommitLog::close`]: appends fail.
    closed: Cell<bool>,
    /// Bytes appended since start, for metrics.
    appended_bytes: Cell<u64>,
    syncs: Cell<u64>,
    /// Segment writes since start: appended entries over writes is how
    /// many entries a write groups.
    writes: Cell<u64>,
    /// An fdatasync failed: the log fails until restart.
    sync_failed: Cell<bool>,
    latency: RefCell<Option<WriteLatency>>,
}

/// A new pending chunk's room: entries join it without regrowing (and
/// copying) it until the writer takes it.
const PENDING_CHUNK_BYTES: usize = 64 * 1024;

impl Pending {
    /// An empty chunk at `at`, after `lead` (the bytes of `at`'s block
    /// before it), in `spare` if given.
    fn new(at: Position, lead: &[u8], spare: Option<Vec<u8>>) -> Pending {
        assert_eq!(lead.len() as u64, u64::from(at.offset) - align_down(u64::from(at.offset)), "a lead is its block's");
        let mut buf = spare.unwrap_or_default();
        buf.clear();
        // Room for the alignment, the lead and the padding of the last
        // block too: entries join it without regrowing (and moving) it
        // until the writer takes it.
        buf.reserve(PENDING_CHUNK_BYTES + 3 * ALIGN_BYTES);
        let pad = buf.as_ptr().align_offset(ALIGN_BYTES);
        buf.resize(pad, 0);
        buf.extend_from_slice(lead);
        Pending { segment: at.segment, offset: at.offset, buf, pad, lead: lead.len(), since: Instant::now() }
    }

    /// The chunk that opens `segment`: its header.
    fn opening(segment: u64, shard: usize) -> Pending {
        let mut chunk = Pending::new(Position { segment, offset: 0 }, &[], None);
        chunk.buf.extend_from_slice(&segment_header(shard, segment));
        chunk
    }

    fn entries_len(&self) -> usize {
        self.buf.len() - self.pad - self.lead
    }

    /// Where its last entry ends.
    fn end(&self) -> u32 {
        self.offset + self.entries_len() as u32
    }
}

impl CommitLog {
    /// Starts a log whose first segment is `first_segment` (greater than any
    /// segment or SSTable commitlog position seen so far) and its writer
    /// (and periodic sync) tasks on this shard.
    pub fn start(config: CommitLogConfig, first_segment: u64) -> Rc<CommitLog> {
        assert!(config.segment_size_bytes > SEGMENT_HEADER_BYTES + ENTRY_HEADER_BYTES);
        let start = Position { segment: first_segment, offset: SEGMENT_HEADER_BYTES };
        let log = Rc::new(CommitLog {
            state: RefCell::new(State {
                next: start,
                pending: VecDeque::from([Pending::opening(first_segment, config.shard)]),
                written: Position { segment: first_segment, offset: 0 },
                tail: Vec::new(),
                tail_end: Position { segment: first_segment, offset: 0 },
                durable: Position { segment: first_segment, offset: 0 },
                segments: vec![first_segment],
                failure: None,
                open_file: None,
                unsynced: Vec::new(),
                spare: None,
            }),
            config,
            has_pending: Event::default(),
            durable_advanced: Event::default(),
            round_ended: Event::default(),
            sync_ended: Event::default(),
            closed: Cell::new(false),
            appended_bytes: Cell::new(0),
            syncs: Cell::new(0),
            writes: Cell::new(0),
            sync_failed: Cell::new(false),
            latency: RefCell::default(),
        });
        shoal_runtime::spawn(write_loop(Rc::clone(&log)));
        if let SyncMode::Periodic { period_ms } = log.config.sync {
            shoal_runtime::spawn(periodic_sync(Rc::downgrade(&log), period_ms));
        }
        log
    }

    /// Reports the latency of the writes from now on into `latency`.
    pub fn report_latency(&self, latency: WriteLatency) {
        *self.latency.borrow_mut() = Some(latency);
    }

    fn record(&self, which: fn(&WriteLatency) -> &Histogram, elapsed: Duration) {
        if let Some(latency) = self.latency.borrow().as_ref() {
            which(latency).record(elapsed);
        }
    }

    /// The largest entry the log takes (Cassandra's rule: half a segment).
    pub fn max_entry_bytes(&self) -> usize {
        (self.config.segment_size_bytes / 2) as usize
    }

    /// How many bytes appends may queue while writes fail: one segment.
    pub fn max_backlog_bytes(&self) -> usize {
        self.config.segment_size_bytes as usize
    }

    /// Appends the entry `encode` writes; returns its position and the
    /// position just past it. Fails at once once writes have been failing
    /// for [`CommitLog::max_backlog_bytes`].
    pub fn append(&self, encode: impl FnOnce(&mut Vec<u8>)) -> StorageResult<(Position, Position)> {
        self.append_repeating(0, encode)
    }

    /// [`CommitLog::append`] of an entry of which `repeated_bytes` repeat
    /// others of it ([`crate::Partition::repeated_key_bytes`]): the limit
    /// counts what the mutation holds once, and the entry as written has
    /// still to fit in one segment.
    pub fn append_repeating(
        &self,
        repeated_bytes: usize,
        encode: impl FnOnce(&mut Vec<u8>),
    ) -> StorageResult<(Position, Position)> {
        if self.closed.get() {
            return Err(StorageError::CommitlogClosed);
        }
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        let mut at = state.next;
        // Encoded in place, at the end of the chunk it joins.
        if !matches!(state.pending.back(), Some(p) if p.segment == at.segment && p.end() == at.offset) {
            assert_eq!(state.tail_end, at, "a new chunk continues the bytes the writer took");
            state.pending.push_back(Pending::new(at, &state.tail, state.spare.take()));
        }
        // Invariant: a chunk ending at `at` is last, or was just pushed.
        let chunk = state.pending.back_mut().expect("a chunk ends where the next entry goes");
        let entry_start = chunk.buf.len();
        chunk.buf.resize(entry_start + ENTRY_HEADER_BYTES as usize, 0);
        encode(&mut chunk.buf);
        let entry_len = chunk.buf.len() - entry_start;
        let refused = self.refusal(entry_len, repeated_bytes, state.failure.as_mut());
        let chunk = state.pending.back_mut().expect("the entry's chunk");
        if let Some(refused) = refused {
            chunk.buf.truncate(entry_start);
            if chunk.entries_len() == 0 {
                let empty = state.pending.pop_back().expect("the entry's chunk");
                state.spare = Some(empty.buf);
            }
            return Err(refused);
        }
        let entry = &mut chunk.buf[entry_start..];
        let crc = crc32c::crc32c(&entry[ENTRY_HEADER_BYTES as usize..]);
        entry[..4].copy_from_slice(&((entry_len - ENTRY_HEADER_BYTES as usize) as u32).to_le_bytes());
        entry[4..8].copy_from_slice(&crc.to_le_bytes());
        if at.offset as usize + entry_len > self.config.segment_size_bytes as usize {
            // The entry opens the next segment: moved there (once a segment).
            let entry = chunk.buf.split_off(entry_start);
            if chunk.entries_len() == 0 {
                state.pending.pop_back();
            }
            let segment = at.segment + 1;
            state.segments.push(segment);
            let mut opening = Pending::opening(segment, self.config.shard);
            opening.buf.extend_from_slice(&entry);
            state.pending.push_back(opening);
            at = Position { segment, offset: SEGMENT_HEADER_BYTES };
        }
        let len = entry_len as u32;
        state.next = Position { segment: at.segment, offset: at.offset + len };
        let end = state.next;
        self.appended_bytes.set(self.appended_bytes.get() + u64::from(len));
        self.has_pending.notify_all();
        Ok((at, end))
    }

    /// Why an entry of `entry_bytes` (of which `repeated_bytes` repeat
    /// others of it) is refused, if it is; counts it toward the backlog of
    /// a log whose writes fail.
    fn refusal(
        &self,
        entry_bytes: usize,
        repeated_bytes: usize,
        failure: Option<&mut Failure>,
    ) -> Option<StorageError> {
        let counted_bytes = entry_bytes.saturating_sub(repeated_bytes);
        if counted_bytes > self.max_entry_bytes() {
            return Some(StorageError::TooLarge { bytes: counted_bytes, max_bytes: self.max_entry_bytes() });
        }
        let segment_room_bytes = (self.config.segment_size_bytes - SEGMENT_HEADER_BYTES) as usize;
        if entry_bytes > segment_room_bytes {
            return Some(StorageError::TooLarge { bytes: entry_bytes, max_bytes: segment_room_bytes });
        }
        let failure = failure?;
        if self.sync_failed.get() || failure.appended_bytes + entry_bytes > self.max_backlog_bytes() {
            return Some(StorageError::WriteFailing(failure.message.clone()));
        }
        failure.appended_bytes += entry_bytes;
        None
    }

    /// Waits until everything before `end` is as safe as the sync mode
    /// promises before a write is acknowledged: on disk (fdatasynced) under
    /// `batch`; written to the file (a direct write: out of this process,
    /// not yet synced) under `periodic`.
    pub async fn wait_durable(&self, end: Position) -> StorageResult<()> {
        let batch = self.config.sync == SyncMode::Batch;
        loop {
            let waiting = {
                let state = self.state.borrow();
                if (if batch { state.durable } else { state.written }) >= end {
                    return Ok(());
                }
                match &state.failure {
                    Some(failure) if end <= failure.covers || self.sync_failed.get() => {
                        return Err(StorageError::WriteFailing(failure.message.clone()))
                    }
                    _ if batch => self.durable_advanced.wait(),
                    _ => self.round_ended.wait(),
                }
            };
            waiting.await;
        }
    }

    /// Where the next entry will go: every entry appended so far is before it.
    pub fn current_position(&self) -> Position {
        self.state.borrow().next
    }

    /// Deletes the segments wholly before `position` (never the current one).
    pub async fn discard_before(&self, position: Position) {
        let (doomed, files) = {
            let mut state = self.state.borrow_mut();
            let current = state.next.segment;
            let (doomed, kept): (Vec<u64>, _) =
                state.segments.iter().partition(|s| **s < position.segment && **s < current);
            state.segments = kept;
            let (files, unsynced): (Vec<_>, Vec<_>) =
                std::mem::take(&mut state.unsynced).into_iter().partition(|(s, _)| doomed.contains(s));
            state.unsynced = unsynced;
            (doomed, files)
        };
        // Closed before they are unlinked (see the module doc): a sync under
        // way holds them until it ends.
        while files.iter().any(|(_, file)| Rc::strong_count(file) > 1) {
            self.sync_ended.wait().await;
        }
        drop(files);
        for segment in doomed {
            let path = segment_path(&self.config.dir, self.config.shard, segment);
            if let Err(e) = shoal_io::remove_file_if_exists(&path, IoClass::Commitlog).await {
                tracing::warn!("cannot delete flushed commitlog segment: {e}");
            }
        }
    }

    /// Refuses appends from now on, then waits until everything appended
    /// is written and synced: the first step of a clean stop.
    pub async fn close(&self) -> StorageResult<()> {
        self.closed.set(true);
        loop {
            let round_ended = {
                let state = self.state.borrow();
                if state.written >= state.next {
                    break;
                }
                if let Some(failure) = &state.failure {
                    return Err(StorageError::WriteFailing(failure.message.clone()));
                }
                self.round_ended.wait()
            };
            round_ended.await;
        }
        self.sync().await
    }

    /// Deletes every segment, the current one too: the owner flushed
    /// everything the log holds after [`CommitLog::close`].
    pub async fn discard_all(&self) -> StorageResult<()> {
        assert!(self.closed.get(), "only a closed log is discarded whole: appends would go to deleted files");
        let doomed = std::mem::take(&mut self.state.borrow_mut().segments);
        self.state.borrow_mut().open_file = None;
        self.state.borrow_mut().unsynced.clear();
        for segment in doomed {
            let path = segment_path(&self.config.dir, self.config.shard, segment);
            shoal_io::remove_file_if_exists(&path, IoClass::Commitlog).await?;
        }
        Ok(())
    }

    /// The oldest segment still on disk.
    pub fn oldest_segment(&self) -> u64 {
        // Invariant: the current segment is always listed (until the log
        // is discarded whole, when nothing appends any more).
        self.state.borrow().segments.first().copied().unwrap_or_default()
    }

    /// Disk space the segments take, at most.
    pub fn disk_bytes(&self) -> u64 {
        self.state.borrow().segments.len() as u64 * u64::from(self.config.segment_size_bytes)
    }

    pub fn appended_bytes(&self) -> u64 {
        self.appended_bytes.get()
    }

    /// fdatasyncs of segment files since start.
    pub fn syncs(&self) -> u64 {
        self.syncs.get()
    }

    /// Segment writes since start (each of the bytes pending when it
    /// began, within one segment).
    pub fn writes(&self) -> u64 {
        self.writes.get()
    }

    async fn sync_file(&self, file: &File) -> StorageResult<()> {
        if let Err(e) = file.sync_data(IoClass::Commitlog).await {
            self.sync_failed.set(true);
            return Err(e.into());
        }
        self.syncs.set(self.syncs.get() + 1);
        Ok(())
    }

    async fn file_for(&self, segment: u64) -> StorageResult<Rc<File>> {
        let open = self.state.borrow().open_file.clone();
        if let Some((s, file)) = open {
            if s == segment {
                return Ok(file);
            }
            // A segment is complete once the log moves past it: under batch,
            // make all of it durable before writing to the next; a periodic
            // log leaves it to the next sync (which syncs it first), so no
            // write waits for it.
            match self.config.sync {
                SyncMode::Batch => self.sync_file(&file).await?,
                SyncMode::Periodic { .. } => self.state.borrow_mut().unsynced.push((s, file)),
            }
        }
        let started = Instant::now();
        let path = segment_path(&self.config.dir, self.config.shard, segment);
        let file = Rc::new(File::open_direct_rw(&path, IoClass::Commitlog).await?);
        file.set_len(u64::from(self.config.segment_size_bytes), IoClass::Commitlog).await?;
        self.record(|l| &l.open, started.elapsed());
        self.state.borrow_mut().open_file = Some((segment, Rc::clone(&file)));
        Ok(file)
    }

    /// Writes `chunk` (its lead included) in whole aligned blocks, the
    /// last padded with zeros; then advances `written`. Its buffer is sent
    /// as it is unless it grew past its room (and moved off its alignment).
    async fn write_chunk(&self, file: &File, chunk: &mut Pending) -> StorageResult<()> {
        {
            let state = self.state.borrow();
            if state.written.segment == chunk.segment {
                assert_eq!(state.written.offset, chunk.offset, "chunks are written in order, without a hole");
            } else {
                assert_eq!(chunk.offset, 0, "a segment is written from its start");
            }
        }
        let block_start = align_down(u64::from(chunk.offset));
        let (len, end) = (chunk.buf.len(), chunk.end());
        let blocks_len = align_up((len - chunk.pad) as u64) as usize;
        let mut buf = std::mem::take(&mut chunk.buf);
        buf.resize(chunk.pad + blocks_len, 0);
        let (blocks, moved) = match AlignedBuf::from_vec(buf, chunk.pad) {
            Ok(blocks) => (blocks, None),
            Err(buf) => {
                let mut blocks = AlignedBuf::zeroed(blocks_len);
                blocks.as_mut_slice().copy_from_slice(&buf[chunk.pad..]);
                (blocks, Some(buf))
            }
        };
        self.writes.set(self.writes.get() + 1);
        let started = Instant::now();
        let (result, blocks) = file.write_aligned_at(block_start, blocks, IoClass::Commitlog).await;
        self.record(|l| &l.write, started.elapsed());
        let mut state = self.state.borrow_mut();
        if let Err(e) = result {
            // For the retry: the chunk's bytes as they were.
            let mut buf = moved.unwrap_or_else(|| blocks.into_vec());
            buf.truncate(len);
            chunk.buf = buf;
            return Err(e.into());
        }
        state.spare = Some(moved.unwrap_or_else(|| blocks.into_vec()));
        state.written = Position { segment: chunk.segment, offset: end };
        Ok(())
    }

    /// Writes what is pending; in batch mode, syncs. One round.
    async fn write_round(&self) -> StorageResult<()> {
        while let Some(mut chunk) = self.take_chunk() {
            self.record(|l| &l.queued, chunk.since.elapsed());
            let written = match self.file_for(chunk.segment).await {
                Ok(file) => self.write_chunk(&file, &mut chunk).await,
                Err(e) => Err(e),
            };
            if let Err(e) = written {
                // Keep the bytes, in order, for the retry: the log must not
                // get a hole (rewriting a partly written chunk is harmless).
                self.state.borrow_mut().pending.push_front(chunk);
                return Err(e);
            }
        }
        if self.config.sync == SyncMode::Batch {
            self.sync().await?;
        }
        Ok(())
    }

    /// The oldest pending chunk, its last block's bytes kept as the lead
    /// of the next chunk appended.
    fn take_chunk(&self) -> Option<Pending> {
        let mut state = self.state.borrow_mut();
        let chunk = state.pending.pop_front()?;
        let end = chunk.end();
        // Where the chunk's last (partial) block starts in its buffer.
        let last_block = chunk.pad + (align_down(u64::from(end)) - align_down(u64::from(chunk.offset))) as usize;
        let state = &mut *state;
        if state.pending.is_empty() {
            state.tail.clear();
            state.tail.extend_from_slice(&chunk.buf[last_block..]);
            state.tail_end = Position { segment: chunk.segment, offset: end };
        }
        Some(chunk)
    }

    async fn sync(&self) -> StorageResult<()> {
        let synced = self.sync_written().await;
        self.sync_ended.notify_all();
        synced
    }

    async fn sync_written(&self) -> StorageResult<()> {
        let (written, filled, file) = {
            let state = self.state.borrow();
            (state.written, state.unsynced.clone(), state.open_file.as_ref().map(|(_, f)| Rc::clone(f)))
        };
        // Oldest first: `durable` covers everything before `written`. Each
        // leaves the list once synced; one discarded meanwhile is gone already.
        for (segment, file) in filled {
            self.sync_file(&file).await?;
            self.state.borrow_mut().unsynced.retain(|(s, _)| *s != segment);
        }
        if let Some(file) = file {
            self.sync_file(&file).await?;
        }
        let mut state = self.state.borrow_mut();
        if written > state.durable {
            state.durable = written;
            drop(state);
            self.durable_advanced.notify_all();
        }
        Ok(())
    }
}

async fn write_loop(log: Rc<CommitLog>) {
    loop {
        let idle = {
            let state = log.state.borrow();
            state.pending.is_empty().then(|| log.has_pending.wait())
        };
        if let Some(idle) = idle {
            idle.await;
            continue;
        }
        // The tasks ready in this reactor turn run first: their appends
        // join this round.
        shoal_runtime::yield_now().await;
        // Charged to the commitlog's scheduling group, active only while a
        // round is under way: an idle log is no group for others to wait on.
        let round = in_group(Group::Commitlog, log.write_round()).await;
        log.round_ended.notify_all();
        if let Err(e) = round {
            let appended = {
                let mut state = log.state.borrow_mut();
                let covers = state.next;
                let first = state.failure.is_none();
                let appended_bytes = state.failure.as_ref().map_or(0, |f| f.appended_bytes);
                let message = match log.sync_failed.get() {
                    true => format!("{e}; an fdatasync failed, so the log is not known durable: restart the node"),
                    false => e.to_string(),
                };
                state.failure = Some(Failure { message, covers, appended_bytes });
                if first {
                    tracing::error!("commitlog write failed, retrying: {e}");
                }
                log.has_pending.wait()
            };
            log.durable_advanced.notify_all();
            if log.sync_failed.get() {
                tracing::error!("commitlog fdatasync failed: writes fail until the node restarts");
                return;
            }
            // The next append, or the timer, starts the next try.
            let _ = shoal_runtime::time::timeout(Duration::from_millis(RETRY_AFTER_ERROR_MS), appended).await;
            continue;
        }
        if log.sync_failed.get() {
            return;
        }
        let recovered = log.state.borrow_mut().failure.take().is_some();
        if recovered {
            tracing::info!("commitlog writes succeed again");
        }
    }
}

async fn periodic_sync(log: std::rc::Weak<CommitLog>, period_ms: u64) {
    loop {
        shoal_runtime::time::sleep(Duration::from_millis(period_ms)).await;
        let Some(log) = log.upgrade() else { return };
        if let Err(e) = in_group(Group::Commitlog, log.sync()).await {
            tracing::error!("commitlog fdatasync failed: writes fail until the node restarts: {e}");
            let mut state = log.state.borrow_mut();
            let covers = state.next;
            let message = format!("{e}; an fdatasync failed, so the log is not known durable: restart the node");
            state.failure = Some(Failure { message, covers, appended_bytes: 0 });
            drop(state);
            log.durable_advanced.notify_all();
            log.round_ended.notify_all();
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_periodic_write_is_in_the_file_once_waited_for() {
        let dir = std::env::temp_dir().join(format!("shoal-commitlog-periodic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok();
        shoal_io::block_on(async {
            let segment_size_bytes = 3 * 4096 + 100;
            let config = CommitLogConfig {
                dir: dir.clone(),
                shard: 0,
                segment_size_bytes,
                sync: SyncMode::Periodic { period_ms: 60_000 },
            };
            let log = CommitLog::start(config, 3);
            let mut appended = Vec::new();
            for i in 0..40u32 {
                // Entries of odd sizes: every round ends inside a block.
                let payload = vec![i as u8; 100 + 37 * i as usize];
                let (_, end) = log.append(|out| out.extend_from_slice(&payload)).expect("append");
                if i % 3 == 0 {
                    log.wait_durable(end).await.expect("written");
                }
                appended.push(payload);
            }
            let (_, end) = log.append(|out| out.push(0xee)).expect("append");
            log.wait_durable(end).await.expect("written");
            appended.push(vec![0xee]);
            // Read back while the log runs: no close, and no periodic sync yet.
            let mut read = Vec::new();
            for segment in segment_ids(&dir, 0).await.expect("list") {
                let path = segment_path(&dir, 0, segment);
                assert!(
                    std::fs::metadata(&path).expect("stat").len() >= u64::from(segment_size_bytes),
                    "sized up front"
                );
                let report =
                    replay_segment(&dir, 0, segment, &mut |e| read.push(e.payload.to_vec())).await.expect("replay");
                assert_eq!(report.corruption, None);
            }
            assert_eq!(read, appended, "every entry waited for (and those before it) is in the file");
            let segments = segment_ids(&dir, 0).await.map(|s| s.len() as u64).unwrap_or_default();
            assert!(segments > 2, "the entries fill segments: {segments}");
            assert_eq!(log.syncs(), 0, "no write waited for a filled segment's fdatasync");
            assert!(log.close().await.is_ok());
            assert_eq!(log.syncs(), segments, "the sync at close syncs every segment, the filled ones too");
        });
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn entries_past_a_chunk_s_room_and_refused_ones_leave_the_log_as_appended() {
        let dir = std::env::temp_dir().join(format!("shoal-commitlog-room-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok();
        shoal_io::block_on(async {
            let config =
                CommitLogConfig { dir: dir.clone(), shard: 0, segment_size_bytes: 1 << 20, sync: SyncMode::Batch };
            let log = CommitLog::start(config, 1);
            let mut appended = Vec::new();
            for i in 0..60u32 {
                // Small entries, a few larger than a chunk's room (the
                // chunk grows and moves: written from a copy), and entries
                // too large for the log, refused between them.
                let len = match i % 10 {
                    3 => PENDING_CHUNK_BYTES + 5000,
                    7 => (1 << 19) + 1,
                    _ => 1 + 311 * i as usize,
                };
                let payload = vec![i as u8; len];
                match log.append(|out| out.extend_from_slice(&payload)) {
                    Ok((_, end)) => {
                        appended.push(payload);
                        if i % 4 == 0 {
                            log.wait_durable(end).await.expect("durable");
                        }
                    }
                    Err(StorageError::TooLarge { .. }) if i % 10 == 7 => {}
                    Err(e) => panic!("entry {i}: {e}"),
                }
            }
            assert!(log.close().await.is_ok());
            let mut read = Vec::new();
            for segment in segment_ids(&dir, 0).await.expect("list") {
                let report =
                    replay_segment(&dir, 0, segment, &mut |e| read.push(e.payload.to_vec())).await.expect("replay");
                assert_eq!(report.corruption, None);
            }
            assert_eq!(read.len(), appended.len());
            assert!(read == appended, "every entry, in order, none of the refused ones");
        });
        std::fs::remove_dir_all(&dir).ok();
    }

    /// This process's open files under `dir` that are unlinked already.
    fn open_but_deleted(dir: &Path) -> Vec<String> {
        let fds = std::fs::read_dir("/proc/self/fd").map(|d| d.flatten().collect::<Vec<_>>()).unwrap_or_default();
        fds.iter()
            .filter_map(|fd| std::fs::read_link(fd.path()).ok())
            .map(|target| target.to_string_lossy().into_owned())
            .filter(|target| target.starts_with(&*dir.to_string_lossy()) && target.ends_with("(deleted)"))
            .collect()
    }

    #[test]
    fn discarded_segments_are_not_synced_and_are_closed_before_their_unlink() {
        let dir = std::env::temp_dir().join(format!("shoal-commitlog-discard-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok();
        shoal_io::block_on(async {
            let config = CommitLogConfig {
                dir: dir.clone(),
                shard: 0,
                segment_size_bytes: 3 * 4096 + 100,
                sync: SyncMode::Periodic { period_ms: 60_000 },
            };
            let log = CommitLog::start(config, 1);
            let fill = |log: &CommitLog, n: u32| {
                (0..n).map(|i| log.append(|out| out.extend_from_slice(&[i as u8; 1000])).expect("append").1).last()
            };
            let end = fill(&log, 40).expect("appended");
            log.wait_durable(end).await.expect("written");
            let filled = log.state.borrow().unsynced.len();
            assert!(filled >= 3, "filled segments wait for the periodic sync: {filled}");
            // Everything so far flushed: the filled segments go, unsynced.
            log.discard_before(log.current_position()).await;
            assert!(log.state.borrow().unsynced.is_empty(), "a discarded segment is not synced");
            assert_eq!(open_but_deleted(&dir), Vec::<String>::new(), "closed before the unlink");
            assert_eq!(segment_ids(&dir, 0).await.expect("list").len(), 1, "the current segment stays");

            // A discard while a sync holds the filled segments waits for it:
            // the files are closed, then unlinked.
            let end = fill(&log, 40).expect("appended");
            log.wait_durable(end).await.expect("written");
            let syncs = log.syncs();
            let filled = log.state.borrow().unsynced.len() as u64;
            let position = log.current_position();
            let discard = async {
                log.discard_before(position).await;
                open_but_deleted(&dir)
            };
            let (synced, deleted_but_open) = futures_util::future::join(log.sync(), discard).await;
            assert!(synced.is_ok());
            assert!(log.syncs() - syncs >= 1 && log.syncs() - syncs <= filled + 1, "the sync ran beside the discard");
            assert_eq!(deleted_but_open, Vec::<String>::new(), "closed before the unlink");
            assert_eq!(segment_ids(&dir, 0).await.expect("list").len(), 1);

            // Appends go on, into the current segment.
            let end = fill(&log, 5).expect("appended");
            log.wait_durable(end).await.expect("written");
            let syncs = log.syncs();
            let filled_since = log.state.borrow().unsynced.len() as u64;
            assert!(log.close().await.is_ok());
            assert_eq!(log.syncs() - syncs, filled_since + 1, "only segments filled since the discard are synced");
        });
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn the_appends_of_one_reactor_turn_share_one_write() {
        let dir = std::env::temp_dir().join(format!("shoal-commitlog-turn-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok();
        shoal_io::block_on(async {
            let config =
                CommitLogConfig { dir: dir.clone(), shard: 0, segment_size_bytes: 1 << 20, sync: SyncMode::Batch };
            let log = CommitLog::start(config, 1);
            let (_, end) = log.append(|out| out.push(1)).expect("append");
            log.wait_durable(end).await.expect("durable");
            let writes = log.writes();
            // Writers woken one by another in one turn (as a memcached run
            // wakes its pipeline's waiters): the first append wakes the log
            // writer before the others are ready.
            let woken = Rc::new(Event::default());
            let mut ends = Vec::new();
            let (done_tx, done_rx) = futures_channel::oneshot::channel();
            let waiters: Vec<_> = (0..8).map(|_| woken.wait()).collect();
            {
                let log = Rc::clone(&log);
                shoal_runtime::spawn(async move {
                    let mut ends = Vec::new();
                    for waiter in waiters {
                        waiter.await;
                        ends.push(log.append(|out| out.extend_from_slice(&[2; 100])).expect("append").1);
                    }
                    let _ = done_tx.send(ends);
                });
            }
            shoal_runtime::yield_now().await;
            ends.push(log.append(|out| out.extend_from_slice(&[3; 100])).expect("append").1);
            woken.notify_all();
            ends.extend(done_rx.await.expect("the appends ran"));
            for end in ends {
                log.wait_durable(end).await.expect("durable");
            }
            assert_eq!(log.writes() - writes, 1, "nine appends of one turn, one write");
        });
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_closed_log_refuses_appends_and_is_discarded_whole() {
        let dir = std::env::temp_dir().join(format!("shoal-commitlog-close-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok();
        shoal_io::block_on(async {
            let config = CommitLogConfig {
                dir: dir.clone(),
                shard: 0,
                segment_size_bytes: 4096,
                sync: SyncMode::Periodic { period_ms: 60_000 },
            };
            let log = CommitLog::start(config, 7);
            // Entries of 1 KiB: three segments' worth.
            for _ in 0..10 {
                assert!(log.append(|out| out.extend_from_slice(&[7u8; 1024])).is_ok());
            }
            assert!(log.close().await.is_ok());
            assert!(matches!(log.append(|out| out.push(1)), Err(StorageError::CommitlogClosed)));
            let on_disk = segment_ids(&dir, 0).await.unwrap_or_default();
            assert_eq!(on_disk.len(), 4, "everything appended is written at close: {on_disk:?}");
            assert!(log.syncs() > 0, "and synced");
            assert!(log.discard_all().await.is_ok());
            assert_eq!(segment_ids(&dir, 0).await.ok(), Some(Vec::new()), "no segment left to replay");
        });
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn repeated_bytes_do_not_count_toward_the_entry_limit() {
        let dir = std::env::temp_dir().join(format!("shoal-commitlog-repeated-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok();
        shoal_io::block_on(async {
            let segment_size_bytes = 4 * 4096;
            let config = CommitLogConfig { dir: dir.clone(), shard: 0, segment_size_bytes, sync: SyncMode::Batch };
            let log = CommitLog::start(config, 3);
            let half = log.max_entry_bytes();
            // Twice the limit, half of it repeated: counted once, it fits.
            let twice = vec![7u8; 2 * half - 64];
            assert!(matches!(log.append(|out| out.extend_from_slice(&twice)), Err(StorageError::TooLarge { .. })));
            assert!(log.append_repeating(half, |out| out.extend_from_slice(&twice)).is_ok());
            // Still bounded by what a segment holds, whatever repeats.
            let over = vec![7u8; segment_size_bytes as usize];
            let refused = log.append_repeating(over.len(), |out| out.extend_from_slice(&over));
            assert!(matches!(refused, Err(StorageError::TooLarge { max_bytes, .. }) if max_bytes < over.len()));
            assert!(log.close().await.is_ok());
        });
        std::fs::remove_dir_all(&dir).ok();
    }
}
