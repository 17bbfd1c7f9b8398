//! What a snapshot of group 0 holds: the state its log's entries built, up
//! to the snapshot's index, so the entries before it can be dropped. A node
//! restarts from it, and a node too far behind (or new) is sent it by the
//! leader instead of entries the leader no longer has.
//!
//! The state is small: the members with their states, the replacements
//! in flight, the raft ids that left, and the latest schema entry that
//! took effect (its index and payload — each schema entry carries the whole
//! schema, so the latest one is the schema). Encoded as
//! `[u8 version][u32 count]([u32 length][member][u8 state])*
//! [u32 count]([u64 joiner][u64 replaced])*[u32 count][u64 left]*
//! [u64 schema index][u32 length][schema payload]`, big-endian.
//!
//! Decoding is total: snapshots come from disk and from the network
//! (fuzzed by `fuzz/fuzz_targets/raft_log.rs`).

use shoal_buf::Reader;

use crate::group0_entry::{decode_member, encode_member, Member, NodeState};

const VERSION: u8 = 1;
/// The least bytes a member takes: its length and state, a host id, an
/// IPv4 address, ports, shard count, empty dc and rack, no tokens.
const MIN_MEMBER_BYTES: usize = 4 + 1 + 16 + 5 + 2 + 2 + 2 + 2 + 2 + 4;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Group0State {
    /// Members by raft id order, each with its state.
    pub members: Vec<(Member, NodeState)>,
    /// Joining members that replace a member: (joiner, replaced) raft ids.
    pub replacing: Vec<(u64, u64)>,
    /// Raft ids of the members that left.
    pub departed: Vec<u64>,
    /// The index of the latest schema entry that took effect (0: none).
    pub schema_index: u64,
    /// That entry's payload (empty with none).
    pub schema: Vec<u8>,
}

impl Group0State {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![VERSION];
        put_u32(&mut out, self.members.len());
        for (member, state) in &self.members {
            let mut bytes = Vec::new();
            encode_member(member, &mut bytes);
            put_u32(&mut out, bytes.len());
            out.extend_from_slice(&bytes);
            out.push(*state as u8);
        }
        put_u32(&mut out, self.replacing.len());
        for (joiner, replaced) in &self.replacing {
            out.extend_from_slice(&joiner.to_be_bytes());
            out.extend_from_slice(&replaced.to_be_bytes());
        }
        put_u32(&mut out, self.departed.len());
        for id in &self.departed {
            out.extend_from_slice(&id.to_be_bytes());
        }
        out.extend_from_slice(&self.schema_index.to_be_bytes());
        put_u32(&mut out, self.schema.len());
        out.extend_from_slice(&self.schema);
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Group0State, String> {
        let mut r = Reader::new(bytes);
        let short = |e: shoal_buf::Short| format!("group 0 snapshot: {e}");
        let version = r.u8("version").map_err(short)?;
        if version != VERSION {
            return Err(format!("group 0 snapshot: unknown version {version}"));
        }
        let count = u32_of(&mut r, "member count").map_err(short)?;
        let mut members = Vec::with_capacity(r.capacity_for(count, MIN_MEMBER_BYTES));
        for _ in 0..count {
            let len = u32_of(&mut r, "member length").map_err(short)?;
            let member = decode_member(r.take(len, "member").map_err(short)?)?;
            let byte = r.u8("node state").map_err(short)?;
            let state =
                NodeState::from_u8(byte).ok_or_else(|| format!("group 0 snapshot: unknown node state {byte}"))?;
            members.push((member, state));
        }
        let count = u32_of(&mut r, "replacement count").map_err(short)?;
        let mut replacing = Vec::with_capacity(r.capacity_for(count, 16));
        for _ in 0..count {
            replacing.push((u64_of(&mut r).map_err(short)?, u64_of(&mut r).map_err(short)?));
        }
        let count = u32_of(&mut r, "departed count").map_err(short)?;
        let mut departed = Vec::with_capacity(r.capacity_for(count, 8));
        for _ in 0..count {
            departed.push(u64_of(&mut r).map_err(short)?);
        }
        let schema_index = u64_of(&mut r).map_err(short)?;
        let len = u32_of(&mut r, "schema length").map_err(short)?;
        let schema = r.take(len, "schema").map_err(short)?.to_vec();
        if !r.is_empty() {
            return Err("group 0 snapshot: trailing bytes".to_string());
        }
        Ok(Group0State { members, replacing, departed, schema_index, schema })
    }
}

fn put_u32(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&(n as u32).to_be_bytes());
}

fn u32_of(r: &mut Reader<'_>, what: &'static str) -> Result<usize, shoal_buf::Short> {
    Ok(u32::from_be_bytes(r.array(what)?) as usize)
}

fn u64_of(r: &mut Reader<'_>) -> Result<u64, shoal_buf::Short> {
    Ok(u64::from_be_bytes(r.array("raft id or index")?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group0_entry::sample_member;

    #[test]
    fn a_state_round_trips_and_damage_is_an_error() {
        let mut other = sample_member();
        other.host_id = uuid::Uuid::from_u128(9);
        other.tokens = vec![-5, 17];
        let state = Group0State {
            members: vec![(sample_member(), NodeState::Normal), (other, NodeState::Joining)],
            replacing: vec![(9, 3)],
            departed: vec![3, 11],
            schema_index: 42,
            schema: b"schema".to_vec(),
        };
        let bytes = state.encode();
        assert_eq!(Group0State::decode(&bytes), Ok(state));
        assert_eq!(Group0State::decode(&Group0State::default().encode()), Ok(Group0State::default()));
        for cut in 0..bytes.len() {
            assert!(Group0State::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(Group0State::decode(&longer).is_err());
        let mut bad_version = bytes;
        bad_version[0] = 9;
        assert!(Group0State::decode(&bad_version).expect_err("bad version").contains("version 9"));
    }
}
