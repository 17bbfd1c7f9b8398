//! Raft messages and log entries on the wire and on disk, in Shoal's own
//! format rather than raft-rs's protobuf: protobuf 2's parser may recurse
//! without bound on crafted input (RUSTSEC-2024-0437), and bytes from the
//! network or disk get a total decoder here (`buf::Reader`, fuzzed by
//! `fuzz/fuzz_targets/internode_frame.rs`).
//!
//! Integers are big-endian; `bytes` are `[u32 length][bytes]`; lists are
//! `[u32 count][items]`, a count never trusted to size an allocation.

use bytes::Bytes;
use raft::eraftpb::{ConfState, Entry, EntryType, HardState, Message, MessageType, Snapshot, SnapshotMetadata};
use shoal_buf::{Reader, Short};
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RaftCodecError {
    #[error("malformed raft message: {0}")]
    Short(#[from] Short),
    #[error("malformed raft message: unknown {what} {value}")]
    Unknown { what: &'static str, value: u8 },
    #[error("malformed raft message: trailing bytes")]
    Trailing,
}

const MESSAGE_TYPES: [MessageType; 19] = [
    MessageType::MsgHup,
    MessageType::MsgBeat,
    MessageType::MsgPropose,
    MessageType::MsgAppend,
    MessageType::MsgAppendResponse,
    MessageType::MsgRequestVote,
    MessageType::MsgRequestVoteResponse,
    MessageType::MsgSnapshot,
    MessageType::MsgHeartbeat,
    MessageType::MsgHeartbeatResponse,
    MessageType::MsgUnreachable,
    MessageType::MsgSnapStatus,
    MessageType::MsgCheckQuorum,
    MessageType::MsgTransferLeader,
    MessageType::MsgTimeoutNow,
    MessageType::MsgReadIndex,
    MessageType::MsgReadIndexResp,
    MessageType::MsgRequestPreVote,
    MessageType::MsgRequestPreVoteResponse,
];

const ENTRY_TYPES: [EntryType; 3] = [EntryType::EntryNormal, EntryType::EntryConfChange, EntryType::EntryConfChangeV2];

/// The least bytes an entry takes: type, term, index, two empty `bytes`.
const MIN_ENTRY_BYTES: usize = 1 + 8 + 8 + 4 + 4;

pub fn encode_message(m: &Message, out: &mut Vec<u8>) {
    out.push(m.msg_type as u8);
    for n in [m.to, m.from, m.term, m.log_term, m.index, m.commit, m.commit_term, m.request_snapshot, m.reject_hint] {
        put_u64(out, n);
    }
    put_u64(out, m.priority as u64);
    out.push(u8::from(m.reject));
    put_bytes(out, &m.context);
    put_u32(out, m.entries.len());
    for entry in m.entries.iter() {
        encode_entry(entry, out);
    }
    match m.snapshot.as_ref() {
        None => out.push(0),
        Some(snapshot) => {
            out.push(1);
            encode_snapshot(snapshot, out);
        }
    }
}

pub fn decode_message(bytes: &[u8]) -> Result<Message, RaftCodecError> {
    let mut r = Reader::new(bytes);
    let mut m = Message::default();
    let kind = r.u8("message type")?;
    m.msg_type =
        *MESSAGE_TYPES.get(usize::from(kind)).ok_or(RaftCodecError::Unknown { what: "message type", value: kind })?;
    m.to = u64_of(&mut r)?;
    m.from = u64_of(&mut r)?;
    m.term = u64_of(&mut r)?;
    m.log_term = u64_of(&mut r)?;
    m.index = u64_of(&mut r)?;
    m.commit = u64_of(&mut r)?;
    m.commit_term = u64_of(&mut r)?;
    m.request_snapshot = u64_of(&mut r)?;
    m.reject_hint = u64_of(&mut r)?;
    m.priority = u64_of(&mut r)? as i64;
    m.reject = bool_of(&mut r, "reject")?;
    m.context = bytes_of(&mut r, "context")?;
    let count = count_of(&mut r)?;
    let mut entries = Vec::with_capacity(r.capacity_for(count, MIN_ENTRY_BYTES));
    for _ in 0..count {
        entries.push(decode_entry_prefix(&mut r)?);
    }
    m.entries = entries.into();
    if bool_of(&mut r, "snapshot flag")? {
        m.set_snapshot(decode_snapshot_from(&mut r)?);
    }
    if !r.is_empty() {
        return Err(RaftCodecError::Trailing);
    }
    Ok(m)
}

/// `[bytes data][u64 index][u64 term][conf state]`: in a message, and as
/// a Raft log file opens with it.
pub fn encode_snapshot(snapshot: &Snapshot, out: &mut Vec<u8>) {
    put_bytes(out, &snapshot.data);
    let metadata = snapshot.metadata.as_ref().cloned().unwrap_or_default();
    put_u64(out, metadata.index);
    put_u64(out, metadata.term);
    encode_conf_state(metadata.conf_state.as_ref().unwrap_or(&ConfState::default()), out);
}

pub fn decode_snapshot(bytes: &[u8]) -> Result<Snapshot, RaftCodecError> {
    whole(bytes, decode_snapshot_from)
}

fn decode_snapshot_from(r: &mut Reader<'_>) -> Result<Snapshot, RaftCodecError> {
    let mut snapshot = Snapshot { data: bytes_of(r, "snapshot data")?, ..Snapshot::default() };
    let mut metadata = SnapshotMetadata { index: u64_of(r)?, term: u64_of(r)?, ..Default::default() };
    metadata.set_conf_state(decode_conf_state_from(r)?);
    snapshot.set_metadata(metadata);
    Ok(snapshot)
}

pub fn encode_entry(entry: &Entry, out: &mut Vec<u8>) {
    out.push(entry.entry_type as u8);
    put_u64(out, entry.term);
    put_u64(out, entry.index);
    put_bytes(out, &entry.data);
    put_bytes(out, &entry.context);
}

pub fn decode_entry(bytes: &[u8]) -> Result<Entry, RaftCodecError> {
    whole(bytes, decode_entry_prefix)
}

pub fn encode_hard_state(state: &HardState, out: &mut Vec<u8>) {
    for n in [state.term, state.vote, state.commit] {
        put_u64(out, n);
    }
}

pub fn decode_hard_state(bytes: &[u8]) -> Result<HardState, RaftCodecError> {
    whole(bytes, |r| Ok(HardState { term: u64_of(r)?, vote: u64_of(r)?, commit: u64_of(r)?, ..Default::default() }))
}

pub fn encode_conf_state(state: &ConfState, out: &mut Vec<u8>) {
    for ids in [&state.voters, &state.learners, &state.voters_outgoing, &state.learners_next] {
        put_u32(out, ids.len());
        for id in ids {
            put_u64(out, *id);
        }
    }
    out.push(u8::from(state.auto_leave));
}

pub fn decode_conf_state(bytes: &[u8]) -> Result<ConfState, RaftCodecError> {
    whole(bytes, decode_conf_state_from)
}

/// What `decode` reads from `bytes`, which it must read to the end.
fn whole<T>(
    bytes: &[u8],
    decode: impl FnOnce(&mut Reader<'_>) -> Result<T, RaftCodecError>,
) -> Result<T, RaftCodecError> {
    let mut r = Reader::new(bytes);
    let value = decode(&mut r)?;
    if !r.is_empty() {
        return Err(RaftCodecError::Trailing);
    }
    Ok(value)
}

/// Reads one entry off `r`, leaving the rest.
pub fn decode_entry_prefix(r: &mut Reader<'_>) -> Result<Entry, RaftCodecError> {
    let kind = r.u8("entry type")?;
    let entry_type =
        *ENTRY_TYPES.get(usize::from(kind)).ok_or(RaftCodecError::Unknown { what: "entry type", value: kind })?;
    Ok(Entry {
        entry_type,
        term: u64_of(r)?,
        index: u64_of(r)?,
        data: bytes_of(r, "entry data")?,
        context: bytes_of(r, "entry context")?,
        ..Entry::default()
    })
}

fn decode_conf_state_from(r: &mut Reader<'_>) -> Result<ConfState, RaftCodecError> {
    let mut lists: [Vec<u64>; 4] = Default::default();
    for list in &mut lists {
        let count = count_of(r)?;
        list.reserve(r.capacity_for(count, 8));
        for _ in 0..count {
            list.push(u64_of(r)?);
        }
    }
    let [voters, learners, voters_outgoing, learners_next] = lists;
    let auto_leave = bool_of(r, "auto leave")?;
    Ok(ConfState { voters, learners, voters_outgoing, learners_next, auto_leave, ..Default::default() })
}

fn put_u64(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(&n.to_be_bytes());
}

fn put_u32(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&u32::try_from(n).expect("fewer than 2^32 items in a raft message").to_be_bytes());
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_u32(out, bytes.len());
    out.extend_from_slice(bytes);
}

fn u64_of(r: &mut Reader<'_>) -> Result<u64, RaftCodecError> {
    Ok(r.be_i64("integer")? as u64)
}

fn count_of(r: &mut Reader<'_>) -> Result<usize, RaftCodecError> {
    Ok(r.be_i32("count")? as u32 as usize)
}

fn bool_of(r: &mut Reader<'_>, what: &'static str) -> Result<bool, RaftCodecError> {
    match r.u8(what)? {
        0 => Ok(false),
        1 => Ok(true),
        value => Err(RaftCodecError::Unknown { what, value }),
    }
}

fn bytes_of(r: &mut Reader<'_>, what: &'static str) -> Result<Bytes, RaftCodecError> {
    let len = count_of(r)?;
    Ok(Bytes::copy_from_slice(r.take(len, what)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u64, data: &'static [u8]) -> Entry {
        Entry { entry_type: EntryType::EntryNormal, term: 3, index, data: Bytes::from_static(data), ..Entry::default() }
    }

    fn sample() -> Message {
        let mut m = Message {
            msg_type: MessageType::MsgAppend,
            to: 2,
            from: 1,
            term: 3,
            log_term: 2,
            index: 9,
            commit: 8,
            commit_term: 2,
            reject: true,
            reject_hint: 7,
            priority: -5,
            context: Bytes::from_static(b"ctx"),
            ..Message::default()
        };
        m.entries = vec![entry(10, b"a"), entry(11, b"")].into();
        let conf = ConfState { voters: vec![1, 2, 3], learners: vec![4], auto_leave: true, ..Default::default() };
        let mut metadata = SnapshotMetadata { index: 5, term: 1, ..Default::default() };
        metadata.set_conf_state(conf);
        let mut snapshot = Snapshot { data: Bytes::from_static(b"state"), ..Default::default() };
        snapshot.set_metadata(metadata);
        m.set_snapshot(snapshot);
        m
    }

    #[test]
    fn messages_round_trip_and_every_truncation_fails() {
        for m in [sample(), Message::default()] {
            let mut out = Vec::new();
            encode_message(&m, &mut out);
            assert_eq!(decode_message(&out), Ok(m));
            for len in 0..out.len() {
                assert!(decode_message(&out[..len]).is_err(), "{len}");
            }
            out.push(0);
            assert_eq!(decode_message(&out), Err(RaftCodecError::Trailing));
        }
    }

    #[test]
    fn unknown_kinds_and_huge_counts_are_errors_not_allocations() {
        let mut out = Vec::new();
        encode_message(&Message::default(), &mut out);
        out[0] = 19;
        assert!(matches!(decode_message(&out), Err(RaftCodecError::Unknown { what: "message type", .. })));
        let mut entries = Vec::new();
        encode_message(&sample(), &mut entries);
        // The entry count sits after the type, ten integers, reject and
        // the 3-byte context: claim 2^32 - 1 entries.
        let at = 1 + 10 * 8 + 1 + 4 + 3;
        entries[at..at + 4].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(decode_message(&entries), Err(RaftCodecError::Short(_))));
    }

    #[test]
    fn entries_states_round_trip() {
        let e = entry(42, b"payload");
        let mut out = Vec::new();
        encode_entry(&e, &mut out);
        assert_eq!(decode_entry(&out), Ok(e));
        let hs = HardState { term: 1, vote: 2, commit: 3, ..Default::default() };
        let mut out = Vec::new();
        encode_hard_state(&hs, &mut out);
        assert_eq!(decode_hard_state(&out), Ok(hs));
        let cs = ConfState { voters: vec![9], voters_outgoing: vec![8], learners_next: vec![7], ..Default::default() };
        let mut out = Vec::new();
        encode_conf_state(&cs, &mut out);
        assert_eq!(decode_conf_state(&out), Ok(cs));
    }
}
