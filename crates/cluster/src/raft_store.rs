//! A Raft group's durable state: its latest snapshot, its log entries
//! after it, hard state (term, vote, commit) and configuration, served to
//! raft-rs from memory ([`StoredLog`]: raft-rs's `MemStorage` for the
//! entries, read on the one shard that drives the group, so its lock is
//! never contended, and the snapshot with its data).
//!
//! Two files. `raft.log` is a sequence of records `[u32 length][u32
//! crc32c][u8 kind][payload]` (lengths and checksums over kind and
//! payload): entries, a hard state, a configuration, each as `raft_codec`
//! encodes it. What raft asks to persist from one `Ready` is written as one
//! write and one fdatasync ([`RaftStore::persist`]) before anything that
//! depends on it is sent. `raft.snapshot` is one such record holding the
//! latest snapshot, replaced whole (written aside, synced, renamed).
//!
//! At start the snapshot is loaded and the log's records replayed in order
//! into memory, so the log ends as it was: a later append that overwrote a
//! suffix overwrites it again. A torn or damaged tail (a crash mid-write)
//! ends the replay and is cut off; the log before it stands. A record that
//! contradicts the log (entries not following on from it) is corruption and
//! an error, never a panic.
//!
//! Compaction ([`RaftStore::compact`], with a snapshot the group took of
//! what it applied) and a snapshot from the leader ([`RaftStore::install`])
//! both write the snapshot file first, then replace the log file by one
//! holding only what follows the snapshot. A crash between the two leaves
//! the old log beside the new snapshot: its entries up to the snapshot are
//! skipped at replay, so either file order reads the same.

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
        self.snapshot.borrow().get_metadata().index
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
    snapshot_path: PathBuf,
    /// The log file, replaced whole by compaction.
    file: RefCell<Rc<File>>,
    /// Where the next record goes.
    end: Cell<u64>,
}

impl RaftStore {
    /// Opens (or creates) the log in `dir` and replays it into memory.
    pub async fn open(dir: &Path) -> Result<RaftStore, RaftStoreError> {
        let path = dir.join("raft.log");
        let snapshot_path = dir.join("raft.snapshot");
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| RaftStoreError::Io { path, source }
        };
        shoal_io::create_dir_all(dir, IoClass::Maintenance).await.map_err(io(dir))?;
        let memory = MemStorage::new();
        let mut snapshot = Snapshot::default();
        if shoal_io::exists(&snapshot_path, IoClass::Maintenance).await.map_err(io(&snapshot_path))? {
            let file = File::open(&snapshot_path, IoClass::Maintenance).await.map_err(io(&snapshot_path))?;
            let bytes = file.read_all(IoClass::Maintenance).await.map_err(io(&snapshot_path))?;
            snapshot = decode_snapshot_file(&bytes).map_err(|reason| RaftStoreError::Corrupt {
                path: snapshot_path.clone(),
                offset: 0,
                reason,
            })?;
            memory.wl().apply_snapshot(snapshot.clone()).map_err(|e| RaftStoreError::Corrupt {
                path: snapshot_path.clone(),
                offset: 0,
                reason: e.to_string(),
            })?;
        }
        let file = File::open_rw(&path, IoClass::Maintenance).await.map_err(io(&path))?;
        let bytes = file.read_all(IoClass::Maintenance).await.map_err(io(&path))?;
        let compacted = snapshot.get_metadata().index;
        let good = replay(&bytes, &memory, compacted).map_err(|(offset, reason)| RaftStoreError::Corrupt {
            path: path.clone(),
            offset,
            reason,
        })?;
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
                .map_err(|source| io(&path)(shoal_io::IoError { path: path.clone(), source }))?;
            file.sync_data(IoClass::Maintenance).await.map_err(io(&path))?;
        }
        let log = StoredLog { memory, snapshot: Rc::new(RefCell::new(snapshot)), wanted: Rc::default() };
        Ok(RaftStore { log, path, snapshot_path, file: RefCell::new(Rc::new(file)), end: Cell::new(good as u64) })
    }

    /// The state raft-rs reads (a handle on the same memory).
    pub fn storage(&self) -> StoredLog {
        self.log.clone()
    }

    /// The latest snapshot (empty if none was taken or received).
    pub fn snapshot(&self) -> Snapshot {
        self.log.snapshot.borrow().clone()
    }

    /// How many bytes the log file holds.
    pub fn log_bytes(&self) -> u64 {
        self.end.get()
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
        apply_entries(&self.log.memory, entries, self.log.compacted()).map_err(corrupt)?;
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
        self.write_snapshot(&snapshot).await?;
        let kept = memory.entries(index + 1, last + 1, None, GetEntriesContext::empty(false)).unwrap_or_default();
        let hard_state = memory.initial_state().map(|s| s.hard_state).unwrap_or_default();
        {
            let mut core = memory.wl();
            // apply_snapshot drops every entry and sets the commit to the
            // snapshot's index: the later entries and the commit go back.
            core.apply_snapshot(snapshot).map_err(|e| self.corrupt(e.to_string()))?;
            core.append(&kept).map_err(|e| self.corrupt(e.to_string()))?;
            core.set_hardstate(hard_state);
        }
        self.rewrite_log(&kept).await
    }

    /// Takes `snapshot`, sent by the leader, in place of the whole log.
    pub async fn install(&self, snapshot: &Snapshot) -> Result<(), RaftStoreError> {
        self.write_snapshot(snapshot).await?;
        self.log.memory.wl().apply_snapshot(snapshot.clone()).map_err(|e| self.corrupt(e.to_string()))?;
        self.rewrite_log(&[]).await
    }

    async fn write_snapshot(&self, snapshot: &Snapshot) -> Result<(), RaftStoreError> {
        let bytes = encode_snapshot_file(snapshot);
        let tmp = self.snapshot_path.with_extension("snapshot.tmp");
        shoal_io::replace_durably(&self.snapshot_path, &tmp, bytes, IoClass::Maintenance)
            .await
            .map_err(|source| RaftStoreError::Io { path: self.snapshot_path.clone(), source })?;
        *self.log.snapshot.borrow_mut() = snapshot.clone();
        Ok(())
    }

    /// Replaces the log file by one holding `entries` and the current hard
    /// state and configuration.
    async fn rewrite_log(&self, entries: &[Entry]) -> Result<(), RaftStoreError> {
        let state = self.log.memory.initial_state().map_err(|e| self.corrupt(e.to_string()))?;
        let bytes = encode_records(entries, Some(&state.hard_state), Some(&state.conf_state));
        let io = |source| RaftStoreError::Io { path: self.path.clone(), source };
        let written = bytes.len() as u64;
        let tmp = self.path.with_extension("log.tmp");
        shoal_io::replace_durably(&self.path, &tmp, bytes, IoClass::Maintenance).await.map_err(io)?;
        let file = File::open_rw(&self.path, IoClass::Maintenance).await.map_err(io)?;
        *self.file.borrow_mut() = Rc::new(file);
        self.end.set(written);
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

/// A snapshot file: one record holding `snapshot`.
pub fn encode_snapshot_file(snapshot: &Snapshot) -> Vec<u8> {
    let mut bytes = Vec::new();
    record(&mut bytes, SNAPSHOT, |payload| raft_codec::encode_snapshot(snapshot, payload));
    bytes
}

/// The snapshot a snapshot file holds: exactly one whole record. Total
/// (fuzzed by `fuzz/fuzz_targets/raft_log.rs`).
pub fn decode_snapshot_file(bytes: &[u8]) -> Result<Snapshot, String> {
    match record_at(bytes) {
        Some((SNAPSHOT, payload)) if RECORD_HEADER_BYTES + 1 + payload.len() == bytes.len() => {
            raft_codec::decode_snapshot(payload).map_err(|e| e.to_string())
        }
        _ => Err("not one whole snapshot record".to_string()),
    }
}

/// Replays a log file's `bytes` into `memory`, which holds the snapshot at
/// index `compacted` (0: none) — entries up to it are skipped; returns how
/// many bytes were whole records, or where and why a whole record
/// contradicts the log. Total: any bytes give an answer, never a panic
/// (fuzzed by `fuzz/fuzz_targets/raft_log.rs`).
pub fn replay(bytes: &[u8], memory: &MemStorage, compacted: u64) -> Result<usize, (usize, String)> {
    let mut at = 0;
    while let Some((kind, payload)) = record_at(&bytes[at..]) {
        let applied = match kind {
            ENTRIES => {
                decode_entries(payload).map_err(|e| e.to_string()).and_then(|e| apply_entries(memory, &e, compacted))
            }
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
    // A log written before its snapshot was taken or received (a crash
    // between the two files) may name an older commit or term: the
    // snapshot's are the least raft may start from.
    let (index, term) = (compacted, memory.term(compacted).unwrap_or(0));
    let mut core = memory.wl();
    let state = core.mut_hard_state();
    state.commit = state.commit.max(index);
    state.term = state.term.max(term);
    Ok(at)
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
/// panics on a gap, and a damaged file must not crash the node); those up
/// to `compacted`, the snapshot's index, are in the snapshot already.
fn apply_entries(memory: &MemStorage, entries: &[Entry], compacted: u64) -> Result<(), String> {
    let entries = &entries[entries.iter().take_while(|e| e.index <= compacted).count()..];
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
    fn compaction_keeps_what_follows_the_snapshot_even_across_a_crash_between_the_files() {
        let dir = dir("compact");
        shoal_io::block_on(async {
            let store = RaftStore::open(&dir).await.expect("a new log");
            let hs = HardState { term: 1, vote: 1, commit: 5, ..Default::default() };
            let cs = ConfState { voters: vec![1, 2, 3], ..Default::default() };
            let entries: Vec<Entry> = (1..=5).map(|i| entry(1, i)).collect();
            store.persist(&entries, Some(&hs), Some(&cs)).await.expect("persist");
            let before = std::fs::read(dir.join("raft.log")).expect("the log");

            store.compact(snapshot_at(3, 1, b"state at 3")).await.expect("compact");
            let expected = vec![(1, 4), (1, 5)];
            assert_eq!(log_of(&store), expected);
            assert_eq!(store.storage().term(3).expect("the snapshot's term"), 1);
            assert!(std::fs::metadata(dir.join("raft.log")).expect("the log").len() < before.len() as u64);
            drop(store);

            let reopened = |store: &RaftStore| {
                assert_eq!(log_of(store), expected);
                assert_eq!(store.compacted(), 3);
                assert_eq!(store.snapshot().data, Bytes::from_static(b"state at 3"));
                assert_eq!(store.storage().initial_state().expect("state").hard_state, hs);
            };
            reopened(&RaftStore::open(&dir).await.expect("reopened"));
            // A crash after the snapshot file was written and before the
            // log was replaced: the old log's entries up to 3 are skipped.
            std::fs::write(dir.join("raft.log"), &before).expect("write");
            reopened(&RaftStore::open(&dir).await.expect("reopened"));
        });
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_installed_snapshot_replaces_the_log_and_serves_followers_it_names() {
        let dir = dir("install");
        shoal_io::block_on(async {
            let store = RaftStore::open(&dir).await.expect("a new log");
            store.persist(&[entry(1, 1), entry(1, 2)], None, None).await.expect("persist");
            store.install(&snapshot_at(10, 2, b"state at 10")).await.expect("install");
            assert_eq!(log_of(&store), vec![]);
            assert_eq!(store.storage().first_index().expect("first"), 11);
            store.persist(&[entry(2, 11)], None, None).await.expect("persist after the snapshot");
            drop(store);
            let store = RaftStore::open(&dir).await.expect("reopened");
            assert_eq!(log_of(&store), vec![(2, 11)]);
            assert_eq!(store.storage().initial_state().expect("state").hard_state.commit, 10);
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
