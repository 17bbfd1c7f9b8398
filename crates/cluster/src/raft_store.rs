//! A Raft group's durable state: its log entries, hard state (term, vote,
//! commit) and configuration, kept in one append-only file and served to
//! raft-rs from memory (`raft::storage::MemStorage`, read on the one shard
//! that drives the group, so its lock is never contended).
//!
//! The file is a sequence of records `[u32 length][u32 crc32c][u8 kind]
//! [payload]` (lengths and checksums over kind and payload): entries, a
//! hard state, a configuration, each as `raft_codec` encodes it. What raft
//! asks to persist from one `Ready` is written as one write and one
//! fdatasync ([`RaftStore::persist`]) before anything that depends on it is
//! sent. At start the records are replayed in order into memory, so the log
//! ends as it was: a later append that overwrote a suffix overwrites it
//! again. A torn or damaged tail (a crash mid-write) ends the replay and is
//! cut off; the log before it stands. A record that contradicts the log
//! (entries not following on from it) is corruption and an error, never a
//! panic.
//!
//! Not yet: snapshots and log compaction; the group's log grows with every
//! membership or schema change (small and rare).

use std::path::{Path, PathBuf};

use raft::eraftpb::{ConfState, Entry, HardState};
use raft::storage::MemStorage;
use raft::Storage;
use shoal_buf::Reader;
use shoal_io::{File, IoClass};
use thiserror::Error;

use crate::raft_codec::{self, RaftCodecError};

const RECORD_HEADER_BYTES: usize = 8;
const ENTRIES: u8 = 1;
const HARD_STATE: u8 = 2;
const CONF_STATE: u8 = 3;
/// A record larger than this is damage, not data.
const MAX_RECORD_BYTES: usize = 64 << 20;

#[derive(Debug, Error)]
pub enum RaftStoreError {
    #[error("raft log {path}: {source}")]
    Io { path: PathBuf, source: shoal_io::IoError },
    #[error("raft log {path} is corrupt at offset {offset}: {reason}")]
    Corrupt { path: PathBuf, offset: usize, reason: String },
}

pub struct RaftStore {
    memory: MemStorage,
    path: PathBuf,
    file: File,
    /// Where the next record goes.
    end: std::cell::Cell<u64>,
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
        let good = replay(&bytes, &memory).map_err(|(offset, reason)| RaftStoreError::Corrupt {
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
                .map_err(|source| io(shoal_io::IoError { path: path.clone(), source }))?;
            file.sync_data(IoClass::Maintenance).await.map_err(io)?;
        }
        Ok(RaftStore { memory, path, file, end: std::cell::Cell::new(good as u64) })
    }

    /// The state raft-rs reads (a handle on the same memory).
    pub fn storage(&self) -> MemStorage {
        self.memory.clone()
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
        let (result, _) = self.file.write_all_at(at, out, IoClass::Maintenance).await;
        result.map_err(io)?;
        self.file.sync_data(IoClass::Maintenance).await.map_err(io)?;
        self.end.set(at + written);
        let corrupt = |reason: String| RaftStoreError::Corrupt { path: self.path.clone(), offset: at as usize, reason };
        apply_entries(&self.memory, entries).map_err(corrupt)?;
        let mut core = self.memory.wl();
        if let Some(state) = hard_state {
            core.set_hardstate(state.clone());
        }
        if let Some(state) = conf_state {
            core.set_conf_state(state.clone());
        }
        Ok(())
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

/// Replays a log file's `bytes` into `memory`; returns how many bytes were
/// whole records, or where and why a whole record contradicts the log.
/// Total: any bytes give an answer, never a panic (fuzzed by
/// `fuzz/fuzz_targets/raft_log.rs`).
pub fn replay(bytes: &[u8], memory: &MemStorage) -> Result<usize, (usize, String)> {
    let mut at = 0;
    while bytes.len() - at >= RECORD_HEADER_BYTES {
        let len = u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]) as usize;
        let crc = u32::from_be_bytes([bytes[at + 4], bytes[at + 5], bytes[at + 6], bytes[at + 7]]);
        let body_at = at + RECORD_HEADER_BYTES;
        if len == 0 || len > MAX_RECORD_BYTES || bytes.len() - body_at < len {
            break;
        }
        let body = &bytes[body_at..body_at + len];
        if crc32c::crc32c(body) != crc {
            break;
        }
        let payload = &body[1..];
        let applied = match body[0] {
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
        at = body_at + len;
    }
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
