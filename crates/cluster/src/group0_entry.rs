//! What group 0's log holds: its entries, and the member record a join
//! carries. An entry is `[u8 kind][body]`:
//!
//! - `JOIN`: a [`Member`] — the node, its place and its tokens;
//! - `SCHEMA`: `[u64 base index][payload]` — a schema change the
//!   coordinator encodes, built on the schema entry at `base index` (it
//!   takes effect only if that is still the latest one when it applies);
//! - `STATE`: `[16 host id][u8 state]` — a member moves on in its life:
//!   joining → normal → leaving → left ([`NodeState`]);
//! - `REPLACE`: `[16 replaced host id][member]` — a new node joins with
//!   the tokens of a dead member, which leaves once the new one is normal.
//!
//! Decoding is total: log files and peers' messages are read with it.

use std::net::SocketAddr;

use shoal_buf::Reader;
use uuid::Uuid;

use crate::wire::{ip_of, put_ip, put_text, text_of};

const JOIN: u8 = 1;
const SCHEMA: u8 = 2;
const STATE: u8 = 3;
const REPLACE: u8 = 4;

/// Where a member is in its life. A member joins (its `Join` entry) as
/// `Joining` — or `Normal`, the first one, with no data to stream — and
/// holds its tokens as a replica once `Normal`; `Leaving` it still holds
/// them while its ranges move to their next replicas; `Left`, it is no
/// longer a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeState {
    Joining = 0,
    Normal = 1,
    Leaving = 2,
    Left = 3,
}

impl NodeState {
    pub(crate) fn from_u8(byte: u8) -> Option<NodeState> {
        [NodeState::Joining, NodeState::Normal, NodeState::Leaving, NodeState::Left]
            .into_iter()
            .find(|state| *state as u8 == byte)
    }

    /// The letter of nodetool status's state column.
    pub fn letter(self) -> char {
        match self {
            NodeState::Joining => 'J',
            NodeState::Normal => 'N',
            NodeState::Leaving | NodeState::Left => 'L',
        }
    }
}

/// A member of the cluster as group 0 records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub host_id: Uuid,
    /// Its storage port's address.
    pub address: SocketAddr,
    /// Its CQL port (at the same address), for drivers (`system.peers_v2`).
    pub native_port: u16,
    pub shard_count: u16,
    pub data_center: String,
    pub rack: String,
    pub tokens: Vec<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Join(Member),
    Schema { base_index: u64, payload: Vec<u8> },
    State { host_id: Uuid, state: NodeState },
    Replace { replaced: Uuid, member: Member },
}

impl Entry {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Entry::Join(member) => {
                out.push(JOIN);
                encode_member(member, &mut out);
            }
            Entry::Schema { base_index, payload } => {
                out.push(SCHEMA);
                out.extend_from_slice(&base_index.to_be_bytes());
                out.extend_from_slice(payload);
            }
            Entry::State { host_id, state } => {
                out.push(STATE);
                out.extend_from_slice(host_id.as_bytes());
                out.push(*state as u8);
            }
            Entry::Replace { replaced, member } => {
                out.push(REPLACE);
                out.extend_from_slice(replaced.as_bytes());
                encode_member(member, &mut out);
            }
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Entry, String> {
        match bytes.split_first() {
            Some((&JOIN, member)) => Ok(Entry::Join(decode_member(member)?)),
            Some((&SCHEMA, body)) => {
                let Some((base, payload)) = body.split_first_chunk::<8>() else {
                    return Err("short schema entry".to_string());
                };
                Ok(Entry::Schema { base_index: u64::from_be_bytes(*base), payload: payload.to_vec() })
            }
            Some((&STATE, body)) => match body.split_first_chunk::<16>() {
                Some((host_id, [state])) => match NodeState::from_u8(*state) {
                    Some(state) => Ok(Entry::State { host_id: Uuid::from_bytes(*host_id), state }),
                    None => Err(format!("unknown node state {state}")),
                },
                _ => Err(format!("a state entry of {} bytes", body.len())),
            },
            Some((&REPLACE, body)) => match body.split_first_chunk::<16>() {
                Some((replaced, member)) => {
                    Ok(Entry::Replace { replaced: Uuid::from_bytes(*replaced), member: decode_member(member)? })
                }
                None => Err("short replace entry".to_string()),
            },
            Some((kind, _)) => Err(format!("unknown entry kind {kind}")),
            None => Err("empty entry".to_string()),
        }
    }
}

/// `[16 host id][u8 4|16][ip][u16 port][u16 native port][u16 shards]
/// [u16+dc][u16+rack][u32 count][i64 tokens]`, big-endian.
pub fn encode_member(m: &Member, out: &mut Vec<u8>) {
    out.extend_from_slice(m.host_id.as_bytes());
    put_ip(out, m.address.ip());
    out.extend_from_slice(&m.address.port().to_be_bytes());
    out.extend_from_slice(&m.native_port.to_be_bytes());
    out.extend_from_slice(&m.shard_count.to_be_bytes());
    put_text(out, &m.data_center);
    put_text(out, &m.rack);
    out.extend_from_slice(&(m.tokens.len() as u32).to_be_bytes());
    for token in &m.tokens {
        out.extend_from_slice(&token.to_be_bytes());
    }
}

/// The member a join carries; total, like every decoder of network bytes.
pub fn decode_member(bytes: &[u8]) -> Result<Member, String> {
    let mut r = Reader::new(bytes);
    let short = |e: shoal_buf::Short| e.to_string();
    let host_id = Uuid::from_bytes(r.array("host id").map_err(short)?);
    let ip = ip_of(&mut r).map_err(|e| e.to_string())?;
    let port = r.be_u16("port").map_err(short)?;
    let native_port = r.be_u16("native port").map_err(short)?;
    let shard_count = r.be_u16("shard count").map_err(short)?;
    let data_center = text_of(&mut r).map_err(|e| e.to_string())?;
    let rack = text_of(&mut r).map_err(|e| e.to_string())?;
    let count = r.be_i32("token count").map_err(short)? as u32 as usize;
    let mut tokens = Vec::with_capacity(r.capacity_for(count, 8));
    for _ in 0..count {
        tokens.push(r.be_i64("token").map_err(short)?);
    }
    if !r.is_empty() {
        return Err("trailing bytes".to_string());
    }
    Ok(Member { host_id, address: SocketAddr::new(ip, port), native_port, shard_count, data_center, rack, tokens })
}

/// A member for tests.
#[cfg(test)]
pub(crate) fn sample_member() -> Member {
    Member {
        host_id: Uuid::from_u128(7),
        address: SocketAddr::from(([127, 0, 0, 3], 7000)),
        native_port: 9042,
        shard_count: 2,
        data_center: "dc1".to_string(),
        rack: "r1".to_string(),
        tokens: vec![-5, 0, 9],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_truncations_fail() {
        let member = sample_member();
        let mut out = Vec::new();
        encode_member(&member, &mut out);
        assert_eq!(decode_member(&out), Ok(member.clone()));
        for len in 0..out.len() {
            assert!(decode_member(&out[..len]).is_err(), "{len}");
        }
        let entries = [
            Entry::Join(member.clone()),
            Entry::Replace { replaced: Uuid::from_u128(8), member },
            Entry::Schema { base_index: 42, payload: b"schema".to_vec() },
            Entry::State { host_id: Uuid::from_u128(9), state: NodeState::Leaving },
        ];
        for entry in entries {
            let bytes = entry.encode();
            assert_eq!(Entry::decode(&bytes), Ok(entry));
        }
        assert!(Entry::decode(&[]).is_err());
        assert!(Entry::decode(&[SCHEMA, 0, 0, 0]).is_err());
        assert!(Entry::decode(&[9]).is_err());
        let mut state = Entry::State { host_id: Uuid::from_u128(9), state: NodeState::Left }.encode();
        assert!(Entry::decode(&state[..17]).is_err());
        state[17] = 4;
        assert!(Entry::decode(&state).is_err(), "no fifth state");
    }
}
