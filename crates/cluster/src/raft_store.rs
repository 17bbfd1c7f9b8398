//! A Raft group's durable state: its latest snapshot, its log entries
//! after it, hard state (term, vote, commit) and configuration, served to
//! raft-rs from memory ([`StoredLog`]: raft-rs's `MemStorage` for the
//! entries, read on the one shard that drives the group, so its lock is
//! never contended, and the snapshot with its data).
//!
//! One file, `raft.log`: a sequence of records `[u32 length][u32
//! crc32c][u8 kind][payload]` (lengths and checksums over kind and
//! payload): a snapshot, entries, a hard state, a configuration, each as
//! `raft_codec` encodes it. What raft asks to persist from one `Ready` is
//! written as one write and one fdatasync ([`RaftStore::persist`]) before
//! anything that depends on it is sent.
//!
//! At start the records are replayed in order into memory, so the log ends
//! as it was: a later append that overwrote a suffix overwrites it again.
//! A torn or damaged tail (a crash mid-write) ends the replay and is cut
//! off; the log before it stands. A record that contradicts the log
//! (entries not following on from it) is corruption and an error, never a
//! panic.
//!
//! Compaction ([`RaftStore::compact`], with a snapshot the group took of
//! what it applied) and a snapshot from the leader ([`RaftStore::install`])
//! replace the whole file, all or nothing (written aside, synced, renamed
//! over it): the snapshot first, then the entries after it, the hard state
//! and the configuration. A crash leaves the old file or the new one,
//! never a snapshot beside a log that predates it.

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use raft::eraftpb::{ConfState, Entry, HardState, Snapshot};
use raft::storage::MemStorage;
use raft::{GetEntriesContext, RaftState, Storage, StorageError};
use shoal_buf::Reader;
use shoal_io::{File, IoClass};
use thiserror::Error;

use crate::raft_codec::{self, RaftCodecError};

const RECORD_HEADER_BYTES: usize = 8;
const ENTRIES: u8 = 1;
const HARD_STATE: u8 = 2;
const CONF_STATE: u8 = 3;
const SNAPSHOT: u8 = 4;
/// A record larger than this is damage, not data.
const MAX_RECORD_BYTES: usize = 64 << 20;

#[derive(Debug, Error)]
pub enum RaftStoreError {
    #[error("raft log {path}: {source}")]
    Io { path: PathBuf, source: shoal_io::IoError },
    #[error("raft log {path} is corrupt at offset {offset}: {reason}")]
    Corrupt { path: PathBuf, offset: usize, reason: String },
}

/// What raft-rs reads: the entries after the latest snapshot, the hard
/// state and configuration (in `memory`), and that snapshot with its data,
/// which a leader sends a follower that needs entries it dropped.
#[derive(Clone)]
pub struct StoredLog {
    memory: MemStorage,
    snapshot: Rc<RefCell<Snapshot>>,
    /// Whether raft asked for a snapshot newer than the latest: for a
    /// follower that joined after it was taken (a snapshot that does not
    /// name a node as a member is refused by it).
    wanted: Rc<Cell<bool>>,
}

impl StoredLog {
    /// The index of the latest snapshot (0: none): the last entry dropped.
    fn compacted(&self) -> u64 {
        self.memory.first_index().unwrap_or(1) - 1
    }
}

impl Storage for StoredLog {
    fn initial_state(&self) -> raft::Result<RaftState> {
        self.memory.initial_state()
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        self.memory.entries(low, high, max_size, context)
    }

    fn term(&self, index: u64) -> raft::Result<u64> {
        self.memory.term(index)
    }

    fn first_index(&self) -> raft::Result<u64> {
        self.memory.first_index()
    }

    fn last_index(&self) -> raft::Result<u64> {
        self.memory.last_index()
    }

    fn snapshot(&self, request_index: u64, to: u64) -> raft::Result<Snapshot> {
        let snapshot = self.snapshot.borrow();
        let metadata = snapshot.get_metadata();
        let conf = metadata.get_conf_state();
        let names_to = conf.voters.iter().chain(&conf.learners).chain(&conf.voters_outgoing).any(|id| *id == to);
        if metadata.index < request_index.max(1) || !names_to {
            // Raft asks again later; the group takes a new one meanwhile.
            self.wanted.set(true);
            return Err(raft::Error::Store(StorageError::SnapshotTemporarilyUnavailable));
        }
        Ok(snapshot.clone())
    }
}

pub struct RaftStore {
    log: StoredLog,
    path: PathBuf,
    /// The log file, replaced whole by compaction.
    file: RefCell<Rc<File>>,
    /// Where the next record goes.
    end: Cell<u64>,
    /// The bytes of the snapshot record at the file's start (0: none).
    snapshot_bytes: Cell<u64>,
}

impl RaftStore {
    /// Opens (or creates) the log in `dir` and replays it into memory.
    pub async fn open(dir: &Path) -> Result<RaftStore, RaftStoreError> {
        let path = dir.join("raft.log");
        let io = |source| RaftStoreError::Io { path: path.clone(), source };
        shoal_io::create_dir_all(dir, IoClass::Maintenance).await.map_err(io)?;
        let file = File::open_rw(&path, IoClass::Maintenance).await.map_err(io)?;
        let bytes = file.read_all(IoClass::Maintenance).await.map_err(io)?;
        let memory = MemStorage::new();
        let replayed = replay(&bytes, &memory).map_err(|(offset, reason)| RaftStoreError::Corrupt {
            path: path.clone(),
            offset,
            reason,
        })?;
        let good = replayed.bytes;
        if good < bytes.len() {
            tracing::warn!(
                "raft log {}: {} bytes after offset {good} are a torn write; dropped",
                path.display(),
                bytes.len() - good
            );
            // Cut them off for good: records written later must not line
            // up with stale bytes behind them. Start-up only, so the
            // blocking call is on no request's path.
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_len(good as u64))
                .map_err(|source| io(shoal_io::IoError { path: path.clone(), source }))?;
            file.sync_data(IoClass::Maintenance).await.map_err(io)?;
        }
        let snapshot = Rc::new(RefCell::new(replayed.snapshot.unwrap_or_default()));
        Ok(RaftStore {
            log: StoredLog { memory, snapshot, wanted: Rc::default() },
            path,
            file: RefCell::new(Rc::new(file)),
            end: Cell::new(good as u64),
            snapshot_bytes: Cell::new(replayed.snapshot_bytes as u64),
        })
    }

    /// The state raft-rs reads (a handle on the same memory).
    pub fn storage(&self) -> StoredLog {
        self.log.clone()
    }

    /// The latest snapshot (empty if none was taken or received).
    pub fn snapshot(&self) -> Snapshot {
        self.log.snapshot.borrow().clone()
    }

    /// How many bytes the log file holds after its snapshot.
    pub fn log_bytes(&self) -> u64 {
        self.end.get() - self.snapshot_bytes.get()
    }

    /// The index of the latest snapshot (0: none): the last entry dropped.
    pub fn compacted(&self) -> u64 {
        self.log.compacted()
    }

    /// Whether raft asked for a snapshot newer than the latest since the
    /// last call.
    pub fn take_snapshot_wanted(&self) -> bool {
        self.log.wanted.replace(false)
    }

    /// Makes `entries`, `hard_state` and `conf_state` durable, then serves
    /// them: one write and one fdatasync for all of them.
    pub async fn persist(
        &self,
        entries: &[Entry],
        hard_state: Option<&HardState>,
        conf_state: Option<&ConfState>,
    ) -> Result<(), RaftStoreError> {
        let out = encode_records(entries, hard_state, conf_state);
        if out.is_empty() {
            return Ok(());
        }
        if out.len() > MAX_RECORD_BYTES {
            let reason = format!("{} bytes to persist at once, over {MAX_RECORD_BYTES}", out.len());
            return Err(RaftStoreError::Corrupt { path: self.path.clone(), offset: self.end.get() as usize, reason });
        }
        let io = |source| RaftStoreError::Io { path: self.path.clone(), source };
        let at = self.end.get();
        let written = out.len() as u64;
        let file = Rc::clone(&self.file.borrow());
        let (result, _) = file.write_all_at(at, out, IoClass::Maintenance).await;
        result.map_err(io)?;
        file.sync_data(IoClass::Maintenance).await.map_err(io)?;
        self.end.set(at + written);
        let corrupt = |reason: String| RaftStoreError::Corrupt { path: self.path.clone(), offset: at as usize, reason };
        apply_entries(&self.log.memory, entries).map_err(corrupt)?;
        let mut core = self.log.memory.wl();
        if let Some(state) = hard_state {
            core.set_hardstate(state.clone());
        }
        if let Some(state) = conf_state {
            core.set_conf_state(state.clone());
        }
        Ok(())
    }

    /// Drops the entries up to `snapshot`'s index, which the group applied
    /// and whose state `snapshot` holds; the entries after it stay.
    pub async fn compact(&self, snapshot: Snapshot) -> Result<(), RaftStoreError> {
        let index = snapshot.get_metadata().index;
        let memory = &self.log.memory;
        let (first, last) = (memory.first_index().unwrap_or(1), memory.last_index().unwrap_or(0));
        assert!(first <= index && index <= last, "compacting at {index} a log of {first}..={last}");
        let storage_error = |e: raft::Error| self.corrupt(e.to_string());
        let kept = memory.entries(index + 1, last + 1, None, GetEntriesContext::empty(false)).map_err(storage_error)?;
        let state = memory.initial_state().map_err(storage_error)?;
        self.rewrite(&snapshot, &kept, &state.hard_state, &state.conf_state).await?;
        let mut core = memory.wl();
        // apply_snapshot drops every entry and sets the commit to the
        // snapshot's index: the later entries and the commit go back.
        core.apply_snapshot(snapshot.clone()).map_err(storage_error)?;
        core.append(&kept).map_err(storage_error)?;
        core.set_hardstate(state.hard_state);
        drop(core);
        *self.log.snapshot.borrow_mut() = snapshot;
        Ok(())
    }

    /// Takes `snapshot`, sent by the leader, in place of the whole log.
    pub async fn install(&self, snapshot: &Snapshot) -> Result<(), RaftStoreError> {
        let storage_error = |e: raft::Error| self.corrupt(e.to_string());
        let state = self.log.memory.initial_state().map_err(storage_error)?;
        let metadata = snapshot.get_metadata();
        let mut hard_state = state.hard_state;
        if metadata.term > hard_state.term {
            // A vote belongs to its term.
            hard_state.term = metadata.term;
            hard_state.vote = 0;
        }
        hard_state.commit = hard_state.commit.max(metadata.index);
        self.rewrite(snapshot, &[], &hard_state, metadata.get_conf_state()).await?;
        let mut core = self.log.memory.wl();
        core.apply_snapshot(snapshot.clone()).map_err(storage_error)?;
        core.set_hardstate(hard_state);
        drop(core);
        *self.log.snapshot.borrow_mut() = snapshot.clone();
        Ok(())
    }

    /// Replaces the log file by one holding `snapshot`, the `entries` after
    /// it, `hard_state` and `conf_state`, all or nothing.
    async fn rewrite(
        &self,
        snapshot: &Snapshot,
        entries: &[Entry],
        hard_state: &HardState,
        conf_state: &ConfState,
    ) -> Result<(), RaftStoreError> {
        let mut bytes = encode_snapshot_record(snapshot);
        let snapshot_bytes = bytes.len();
        if snapshot_bytes > MAX_RECORD_BYTES {
            return Err(self.corrupt(format!("a snapshot of {snapshot_bytes} bytes, over {MAX_RECORD_BYTES}")));
        }
        for chunk in record_sized_chunks(entries) {
            bytes.extend(encode_records(chunk, None, None));
        }
        bytes.extend(encode_records(&[], Some(hard_state), Some(conf_state)));
        let io = |source| RaftStoreError::Io { path: self.path.clone(), source };
        let written = bytes.len() as u64;
        let tmp = self.path.with_extension("log.tmp");
        shoal_io::replace_durably(&self.path, &tmp, bytes, IoClass::Maintenance).await.map_err(io)?;
        let file = File::open_rw(&self.path, IoClass::Maintenance).await.map_err(io)?;
        *self.file.borrow_mut() = Rc::new(file);
        self.end.set(written);
        self.snapshot_bytes.set(snapshot_bytes as u64);
        Ok(())
    }

    fn corrupt(&self, reason: String) -> RaftStoreError {
        RaftStoreError::Corrupt { path: self.path.clone(), offset: self.end.get() as usize, reason }
    }
}

/// The records that persist `entries`, `hard_state` and `conf_state`, as
/// the log file holds them (empty when there is nothing).
pub fn encode_records(entries: &[Entry], hard_state: Option<&HardState>, conf_state: Option<&ConfState>) -> Vec<u8> {
    let mut out = Vec::new();
    if !entries.is_empty() {
        record(&mut out, ENTRIES, |payload| entries.iter().for_each(|e| raft_codec::encode_entry(e, payload)));
    }
    if let Some(state) = hard_state {
        record(&mut out, HARD_STATE, |payload| raft_codec::encode_hard_state(state, payload));
    }
    if let Some(state) = conf_state {
        record(&mut out, CONF_STATE, |payload| raft_codec::encode_conf_state(state, payload));
    }
    out
}

fn record(out: &mut Vec<u8>, kind: u8, payload: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend_from_slice(&[0; RECORD_HEADER_BYTES]);
    out.push(kind);
    payload(out);
    let body = &out[start + RECORD_HEADER_BYTES..];
    let (len, crc) = (body.len() as u32, crc32c::crc32c(body));
    out[start..start + 4].copy_from_slice(&len.to_be_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_be_bytes());
}

/// The whole record at the start of `bytes`: its kind and payload, or
/// `None` if there is none whole (too short, or a bad checksum).
fn record_at(bytes: &[u8]) -> Option<(u8, &[u8])> {
    let (header, rest) = bytes.split_first_chunk::<RECORD_HEADER_BYTES>()?;
    let len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
    let crc = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
    if len == 0 || len > MAX_RECORD_BYTES || rest.len() < len {
        return None;
    }
    let body = &rest[..len];
    (crc32c::crc32c(body) == crc).then(|| (body[0], &body[1..]))
}

/// The record of `snapshot`, which opens a log file.
pub fn encode_snapshot_record(snapshot: &Snapshot) -> Vec<u8> {
    let mut out = Vec::new();
    record(&mut out, SNAPSHOT, |payload| raft_codec::encode_snapshot(snapshot, payload));
    out
}

/// `entries` in runs whose record stays under [`MAX_RECORD_BYTES`] (each
/// entry was persisted in one, so each fits).
fn record_sized_chunks(entries: &[Entry]) -> impl Iterator<Item = &[Entry]> {
    let budget = MAX_RECORD_BYTES / 2;
    let mut rest = entries;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let (mut bytes, mut n) = (0, 0);
        while n < rest.len() && (n == 0 || bytes + rest[n].data.len() + rest[n].context.len() < budget) {
            bytes += rest[n].data.len() + rest[n].context.len();
            n += 1;
        }
        let (chunk, later) = rest.split_at(n);
        rest = later;
        Some(chunk)
    })
}

/// What a replay found: the whole records' bytes, and the snapshot the log
/// starts with, if it does, and its record's bytes.
#[derive(Debug, Default)]
pub struct Replayed {
    pub bytes: usize,
    pub snapshot: Option<Snapshot>,
    pub snapshot_bytes: usize,
}

/// Replays a log file's `bytes` into `memory`: what it found, or where and
/// why a whole record contradicts the log. A snapshot may only open the
/// file. Total: any bytes give an answer, never a panic (fuzzed by
/// `fuzz/fuzz_targets/raft_log.rs`).
pub fn replay(bytes: &[u8], memory: &MemStorage) -> Result<Replayed, (usize, String)> {
    let mut replayed = Replayed::default();
    let mut at = 0;
    while let Some((kind, payload)) = record_at(&bytes[at..]) {
        let applied = match kind {
            SNAPSHOT if at == 0 => raft_codec::decode_snapshot(payload).map_err(|e| e.to_string()).and_then(|s| {
                memory.wl().apply_snapshot(s.clone()).map_err(|e| e.to_string())?;
                replayed.snapshot = Some(s);
                replayed.snapshot_bytes = RECORD_HEADER_BYTES + 1 + payload.len();
                Ok(())
            }),
            SNAPSHOT => Err("a snapshot after the log's start".to_string()),
            ENTRIES => decode_entries(payload).map_err(|e| e.to_string()).and_then(|e| apply_entries(memory, &e)),
            HARD_STATE => raft_codec::decode_hard_state(payload)
                .map(|state| memory.wl().set_hardstate(state))
                .map_err(|e| e.to_string()),
            CONF_STATE => raft_codec::decode_conf_state(payload)
                .map(|state| memory.wl().set_conf_state(state))
                .map_err(|e| e.to_string()),
            kind => Err(format!("unknown record kind {kind}")),
        };
        applied.map_err(|reason| (at, reason))?;
        at += RECORD_HEADER_BYTES + 1 + payload.len();
    }
    replayed.bytes = at;
    if let Some(snapshot) = &replayed.snapshot {
        // raft-rs panics on a commit below its snapshot; none is written,
        // but a damaged file must not crash the node.
        let (index, commit) = (snapshot.get_metadata().index, memory.rl().hard_state().commit);
        if commit < index {
            return Err((0, format!("a commit of {commit} below the snapshot at {index}")));
        }
    }
    Ok(replayed)
}

fn decode_entries(mut payload: &[u8]) -> Result<Vec<Entry>, RaftCodecError> {
    let mut entries = Vec::new();
    while !payload.is_empty() {
        let mut r = Reader::new(payload);
        let entry = raft_codec::decode_entry_prefix(&mut r)?;
        payload = r.rest();
        entries.push(entry);
    }
    Ok(entries)
}

/// Appends `entries` after checking they follow on from the log (raft-rs
/// panics on a gap, and a damaged file must not crash the node).
fn apply_entries(memory: &MemStorage, entries: &[Entry]) -> Result<(), String> {
    let Some(first) = entries.first() else { return Ok(()) };
    let (first_index, last_index) = (memory.first_index().unwrap_or(1), memory.last_index().unwrap_or(0));
    if first.index < first_index || first.index > last_index + 1 {
        return Err(format!("entries from index {} do not follow a log of {first_index}..={last_index}", first.index));
    }
    if entries.windows(2).any(|pair| pair[1].index != pair[0].index + 1) {
        return Err("entries are not consecutive".to_string());
    }
    memory.wl().append(entries).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use raft::eraftpb::EntryType;

    fn entry(term: u64, index: u64) -> Entry {
        let data = Bytes::from(format!("e{index}t{term}"));
        Entry { entry_type: EntryType::EntryNormal, term, index, data, ..Entry::default() }
    }

    fn dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("shoal-raft-store-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn log_of(store: &RaftStore) -> Vec<(u64, u64)> {
        let storage = store.storage();
        let (first, last) = (storage.first_index().unwrap_or(1), storage.last_index().unwrap_or(0));
        if first > last {
            return Vec::new();
        }
        let entries = storage.entries(first, last + 1, None, raft::GetEntriesContext::empty(false)).unwrap_or_default();
        entries.iter().map(|e| (e.term, e.index)).collect()
    }

    #[test]
    fn the_log_survives_reopening_with_overwrites_and_a_torn_tail() {
        let dir = dir("reopen");
        shoal_io::block_on(async {
            let store = RaftStore::open(&dir).await.expect("a new log");
            let hs = HardState { term: 2, vote: 1, commit: 2, ..Default::default() };
            let cs = ConfState { voters: vec![1, 2, 3], ..Default::default() };
            store.persist(&[entry(1, 1), entry(1, 2), entry(1, 3)], Some(&hs), Some(&cs)).await.expect("persist");
            // A new leader overwrites the uncommitted suffix from index 3.
            store.persist(&[entry(2, 3), entry(2, 4)], None, None).await.expect("persist");
            let expected = vec![(1, 1), (1, 2), (2, 3), (2, 4)];
            assert_eq!(log_of(&store), expected);
            drop(store);

            // A torn write after the last whole record.
            let path = dir.join("raft.log");
            let mut bytes = std::fs::read(&path).expect("the log");
            bytes.extend_from_slice(&[0, 0, 0, 40, 1, 2, 3]);
            std::fs::write(&path, &bytes).expect("write");

            let store = RaftStore::open(&dir).await.expect("reopened");
            assert_eq!(log_of(&store), expected);
            let state = store.storage().initial_state().expect("state");
            assert_eq!(state.hard_state, hs);
            assert_eq!(state.conf_state, cs);
            // Appends go after the last whole record, over the torn bytes.
            store.persist(&[entry(2, 5)], None, None).await.expect("persist");
            drop(store);
            let store = RaftStore::open(&dir).await.expect("reopened");
            assert_eq!(log_of(&store).last(), Some(&(2, 5)));
        });
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn snapshot_at(index: u64, term: u64, data: &'static [u8]) -> Snapshot {
        let mut metadata = raft::eraftpb::SnapshotMetadata { index, term, ..Default::default() };
        metadata.set_conf_state(ConfState { voters: vec![1, 2, 3], ..Default::default() });
        let mut snapshot = Snapshot { data: Bytes::from_static(data), ..Default::default() };
        snapshot.set_metadata(metadata);
        snapshot
    }

    #[test]
    fn compaction_keeps_what_follows_the_snapshot_in_one_file_replaced_whole() {
        let dir = dir("compact");
        shoal_io::block_on(async {
            let store = RaftStore::open(&dir).await.expect("a new log");
            let hs = HardState { term: 1, vote: 1, commit: 5, ..Default::default() };
            let cs = ConfState { voters: vec![1, 2, 3], ..Default::default() };
            let entries: Vec<Entry> = (1..=5).map(|i| entry(1, i)).collect();
            store.persist(&entries, Some(&hs), Some(&cs)).await.expect("persist");
            let before = store.log_bytes();

            store.compact(snapshot_at(3, 1, b"state at 3")).await.expect("compact");
            let expected = vec![(1, 4), (1, 5)];
            assert_eq!(log_of(&store), expected);
            assert_eq!(store.storage().term(3).expect("the snapshot's term"), 1);
            assert!(store.log_bytes() < before, "{} of {before}", store.log_bytes());
            drop(store);

            // A crash while the next file was being written leaves it
            // aside, unread.
            std::fs::write(dir.join("raft.log.tmp"), b"half a file").expect("write");
            let store = RaftStore::open(&dir).await.expect("reopened");
            assert_eq!(log_of(&store), expected);
            assert_eq!(store.compacted(), 3);
            assert_eq!(store.snapshot().data, Bytes::from_static(b"state at 3"));
            assert_eq!(store.storage().initial_state().expect("state").hard_state, hs);
            assert_eq!(store.storage().initial_state().expect("state").conf_state, cs);
            // Appends follow on after reopening.
            store.persist(&[entry(1, 6)], None, None).await.expect("persist");
            drop(store);
            let store = RaftStore::open(&dir).await.expect("reopened");
            assert_eq!(log_of(&store), vec![(1, 4), (1, 5), (1, 6)]);
        });
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_installed_snapshot_replaces_the_log_and_serves_followers_it_names() {
        let dir = dir("install");
        shoal_io::block_on(async {
            let store = RaftStore::open(&dir).await.expect("a new log");
            let hs = HardState { term: 1, vote: 2, commit: 1, ..Default::default() };
            let old_voters = ConfState { voters: vec![1, 2], ..Default::default() };
            store.persist(&[entry(1, 1), entry(1, 2)], Some(&hs), Some(&old_voters)).await.expect("persist");
            store.install(&snapshot_at(10, 2, b"state at 10")).await.expect("install");
            assert_eq!(log_of(&store), vec![]);
            assert_eq!(store.storage().first_index().expect("first"), 11);
            store.persist(&[entry(2, 11)], None, None).await.expect("persist after the snapshot");
            drop(store);
            let store = RaftStore::open(&dir).await.expect("reopened");
            assert_eq!(log_of(&store), vec![(2, 11)]);
            let state = store.storage().initial_state().expect("state");
            // The snapshot's term, with no vote in it; its configuration,
            // not the one the old log held.
            assert_eq!(state.hard_state, HardState { term: 2, vote: 0, commit: 10, ..Default::default() });
            assert_eq!(state.conf_state.voters, vec![1, 2, 3]);
            let storage = store.storage();
            assert_eq!(storage.snapshot(0, 2).expect("a member is sent it").data, Bytes::from_static(b"state at 10"));
            // Not a member in it: raft is told to ask again, and a newer
            // one is wanted.
            assert!(storage.snapshot(0, 7).is_err());
            assert!(store.take_snapshot_wanted() && !store.take_snapshot_wanted());
        });
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_snapshot_only_opens_a_log() {
        let mut bytes = Vec::new();
        record(&mut bytes, ENTRIES, |p| raft_codec::encode_entry(&entry(1, 1), p));
        bytes.extend(encode_snapshot_record(&snapshot_at(3, 1, b"s")));
        let replayed = replay(&bytes, &MemStorage::new());
        assert!(matches!(replayed, Err((_, ref reason)) if reason.contains("after the log's start")), "{replayed:?}");
    }

    #[test]
    fn a_record_that_contradicts_the_log_is_an_error_not_a_panic() {
        let dir = dir("corrupt");
        std::fs::create_dir_all(&dir).expect("dir");
        let mut bytes = Vec::new();
        record(&mut bytes, ENTRIES, |p| raft_codec::encode_entry(&entry(1, 5), p));
        std::fs::write(dir.join("raft.log"), &bytes).expect("write");
        let opened = shoal_io::block_on(RaftStore::open(&dir));
        assert!(matches!(opened, Err(RaftStoreError::Corrupt { offset: 0, .. })), "{:?}", opened.err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
