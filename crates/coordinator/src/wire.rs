//! The data messages between coordinators and replicas: mutations, read
//! commands, read results, raw partitions and Paxos's prepares, promises
//! and proposals, in the storage codec's varints and length-prefixed
//! bytes (`shoal_storage::codec`).
//!
//! Decoding is total — the bytes come from the network — and checks that
//! nothing trails the message (fuzzed: `fuzz/fuzz_targets/data_messages.rs`).

use std::cell::Cell;
use std::ops::Bound;

use bytes::Bytes;
pub use shoal_replica::{Ballot, Promise, Proposal};
use shoal_replica::{
    ElementStamp, FilterOp, ListOp, ListOpKind, Mutation, PartitionSelection, ReadCommand, ReadResult, ResultCell,
    ResultRow, RowFilter, RowPosition, ShortStop,
};
use shoal_storage::codec::{self, DecodeError, Decoder, Encoder};
use shoal_storage::{ClusteringRange, Partition, PartitionPosition};
use uuid::Uuid;

use crate::ConsistencyLevel;

pub mod items;

/// Most items a decoded list may claim before its bytes are read: each
/// item takes at least one byte, so a longer claim is cut by what is left.
fn capacity(d: &Decoder, claimed: u64) -> usize {
    usize::try_from(claimed).unwrap_or(usize::MAX).min(d.remaining())
}

fn encode_uuid(e: &mut Encoder, id: Uuid) {
    e.out.extend_from_slice(id.as_bytes());
}

fn decode_uuid(d: &mut Decoder) -> Result<Uuid, DecodeError> {
    Uuid::from_slice(d.slice(16)?).map_err(|_| d.error("bad uuid"))
}

fn encode_position(e: &mut Encoder, p: &PartitionPosition) {
    e.var_i64(p.token);
    e.bytes(&p.key);
}

fn decode_position(d: &mut Decoder) -> Result<PartitionPosition, DecodeError> {
    Ok(PartitionPosition { token: d.var_i64()?, key: d.bytes()? })
}

/// A value that may be absent: `[u8 0]`, or `[u8 1]` and the value.
fn encode_option<T: ?Sized>(e: &mut Encoder, value: Option<&T>, each: impl FnOnce(&mut Encoder, &T)) {
    match value {
        None => e.u8(0),
        Some(v) => {
            e.u8(1);
            each(e, v);
        }
    }
}

fn decode_option<T>(
    d: &mut Decoder,
    each: impl FnOnce(&mut Decoder) -> Result<T, DecodeError>,
) -> Result<Option<T>, DecodeError> {
    match decode_flag(d)? {
        false => Ok(None),
        true => Ok(Some(each(d)?)),
    }
}

fn encode_optional(e: &mut Encoder, value: Option<&[u8]>) {
    encode_option(e, value, |e, v| e.bytes(v));
}

fn decode_optional(d: &mut Decoder) -> Result<Option<Bytes>, DecodeError> {
    decode_option(d, |d| d.bytes())
}

fn decode_flag(d: &mut Decoder) -> Result<bool, DecodeError> {
    match d.u8()? {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(d.error("bad flag")),
    }
}

/// A count or index, which must fit a `usize`.
fn decode_size(d: &mut Decoder) -> Result<usize, DecodeError> {
    usize::try_from(d.var_u64()?).map_err(|_| d.error("size"))
}

fn encode_list<T>(e: &mut Encoder, items: &[T], mut each: impl FnMut(&mut Encoder, &T)) {
    e.var_u64(items.len() as u64);
    for item in items {
        each(e, item);
    }
}

fn decode_list<T>(
    d: &mut Decoder,
    mut each: impl FnMut(&mut Decoder) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    let count = d.var_u64()?;
    let mut items = Vec::with_capacity(capacity(d, count));
    for _ in 0..count {
        items.push(each(d)?);
    }
    Ok(items)
}

fn finish<T>(d: &Decoder, value: T) -> Result<T, DecodeError> {
    if !d.is_empty() {
        return Err(d.error("trailing bytes after the message"));
    }
    Ok(value)
}

pub fn encode_mutation(m: &Mutation) -> Vec<u8> {
    // The partition's in-memory estimate bounds its encoding: one
    // allocation, not a doubling per few bytes written.
    let mut out = Vec::with_capacity(MUTATION_HEADER_BYTES + m.position.key.len() + m.update.size_estimate_bytes());
    let e = &mut Encoder { out: &mut out };
    encode_uuid(e, m.table);
    encode_position(e, &m.position);
    codec::encode_partition(e, &m.update);
    encode_list(e, &m.list_ops, encode_list_op);
    out
}

/// A mutation's encoding beyond its key and partition: the table, the
/// token and the lengths, room for list operations.
const MUTATION_HEADER_BYTES: usize = 64;

pub fn decode_mutation(bytes: &[u8]) -> Result<Mutation, DecodeError> {
    let d = &mut Decoder::new(bytes);
    let table = decode_uuid(d)?;
    let position = decode_position(d)?;
    let update = codec::decode_partition(d)?;
    let list_ops = decode_list(d, decode_list_op)?;
    finish(d, Mutation { table, position, update, list_ops })
}

/// [`decode_mutation`] of a mutation a replica received, with one copy of
/// its bytes, and its partition's encoding ([`codec::encode_partition`]):
/// a replica logs those bytes as they came rather than encode the
/// partition again. The partition key is copied apart (a memtable keeps
/// it as long as it holds the partition); the rest is copied once, at its
/// size, and the partition's keys and values are slices of that copy,
/// not an allocation each, nor slices of the buffer the message was read
/// into (which holds other messages too).
pub fn decode_received_mutation(bytes: &[u8]) -> Result<(Mutation, Bytes), DecodeError> {
    let d = &mut Decoder::new(bytes);
    let table = decode_uuid(d)?;
    let position = decode_position(d)?;
    let start = d.position();
    let rest = Bytes::copy_from_slice(&bytes[start..]);
    let at_message_offset = |e: DecodeError| DecodeError { offset: start + e.offset, ..e };
    let d = &mut Decoder::shared(&rest);
    let update = codec::decode_partition(d).map_err(at_message_offset)?;
    let partition = rest.slice(..d.position());
    let list_ops = decode_list(d, decode_list_op).map_err(at_message_offset)?;
    finish(d, (Mutation { table, position, update, list_ops }, partition)).map_err(at_message_offset)
}

/// The header of a write sent across a data center link
/// ([`crate::forwarding`]): the coordinator (its host id and shard) and
/// the id its shard waits on, and the replicas the receiver relays the
/// write to (none in a relayed copy). The mutation's encoding follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forward {
    pub coordinator: Uuid,
    pub shard: u16,
    pub response_id: u64,
    pub relay_to: Vec<Uuid>,
}

/// `forward` followed by `mutation`, a mutation's encoding as it is.
pub fn encode_forward(forward: &Forward, mutation: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + 16 * forward.relay_to.len() + mutation.len());
    let e = &mut Encoder { out: &mut out };
    encode_uuid(e, forward.coordinator);
    e.var_u64(u64::from(forward.shard));
    e.var_u64(forward.response_id);
    encode_list(e, &forward.relay_to, |e, host| encode_uuid(e, *host));
    out.extend_from_slice(mutation);
    out
}

/// A forwarded write's header and its mutation's bytes (decoded apart,
/// so a forwarder relays them without encoding them again).
pub fn decode_forward(bytes: &[u8]) -> Result<(Forward, &[u8]), DecodeError> {
    let d = &mut Decoder::new(bytes);
    let coordinator = decode_uuid(d)?;
    let shard = u16::try_from(d.var_u64()?).map_err(|_| d.error("shard"))?;
    let response_id = d.var_u64()?;
    let relay_to = decode_list(d, decode_uuid)?;
    let mutation = &bytes[d.position()..];
    Ok((Forward { coordinator, shard, response_id, relay_to }, mutation))
}

/// A replica's answer to a forwarded write, sent to its coordinator:
/// the id the coordinator waits on, the replica, and the answer
/// (`target::encode_answer`'s bytes).
pub fn encode_write_done(response_id: u64, replica: Uuid, answer: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(26 + answer.len());
    let e = &mut Encoder { out: &mut out };
    e.var_u64(response_id);
    encode_uuid(e, replica);
    out.extend_from_slice(answer);
    out
}

pub fn decode_write_done(bytes: &[u8]) -> Result<(u64, Uuid, &[u8]), DecodeError> {
    let d = &mut Decoder::new(bytes);
    let response_id = d.var_u64()?;
    let replica = decode_uuid(d)?;
    Ok((response_id, replica, &bytes[d.position()..]))
}

/// A counter write asked of its leader: the level its replicas answer at,
/// the time left to answer in, and the write (its counter deltas).
#[derive(Debug, Clone)]
pub struct CounterWrite {
    pub consistency: ConsistencyLevel,
    pub timeout_ms: u64,
    pub mutation: Mutation,
}

pub fn encode_counter_write(write: &CounterWrite) -> Vec<u8> {
    let mut out = Vec::new();
    let e = &mut Encoder { out: &mut out };
    e.var_u64(u64::from(write.consistency.code()));
    e.var_u64(write.timeout_ms);
    out.extend_from_slice(&encode_mutation(&write.mutation));
    out
}

pub fn decode_counter_write(bytes: &[u8]) -> Result<CounterWrite, DecodeError> {
    let d = &mut Decoder::new(bytes);
    let code = u16::try_from(d.var_u64()?).map_err(|_| d.error("bad consistency level"))?;
    let consistency = ConsistencyLevel::from_code(code).ok_or_else(|| d.error("bad consistency level"))?;
    let timeout_ms = d.var_u64()?;
    let mutation = decode_mutation(&bytes[d.position()..])?;
    Ok(CounterWrite { consistency, timeout_ms, mutation })
}

fn encode_list_op(e: &mut Encoder, op: &ListOp) {
    e.var_u64(u64::from(op.column));
    encode_optional(e, op.row.as_deref());
    match &op.kind {
        ListOpKind::RemoveValues(values) => {
            e.u8(0);
            encode_list(e, values, |e, v| e.bytes(v));
        }
        ListOpKind::SetIndex { index, value } => {
            e.u8(1);
            e.var_i64(i64::from(*index));
            encode_optional(e, value.as_deref());
        }
        ListOpKind::DeleteIndex(index) => {
            e.u8(2);
            e.var_i64(i64::from(*index));
        }
    }
    e.var_i64(op.timestamp);
    e.var_i64(op.now_s);
    encode_option(e, op.expiry.as_ref(), |e, expiry| codec::encode_expiry(e, *expiry));
}

fn decode_list_op(d: &mut Decoder) -> Result<ListOp, DecodeError> {
    let column = d.var_u32()?;
    let row = decode_optional(d)?;
    let kind = match d.u8()? {
        0 => ListOpKind::RemoveValues(decode_list(d, |d| d.bytes())?),
        1 => ListOpKind::SetIndex { index: d.var_i32()?, value: decode_optional(d)? },
        2 => ListOpKind::DeleteIndex(d.var_i32()?),
        _ => return Err(d.error("bad list operation kind")),
    };
    let timestamp = d.var_i64()?;
    let now_s = d.var_i64()?;
    let expiry = decode_option(d, codec::decode_expiry)?;
    Ok(ListOp { column, row, kind, timestamp, now_s, expiry })
}

/// By wire code: new operators go at the end.
const FILTER_OPS: [FilterOp; 13] = [
    FilterOp::Eq,
    FilterOp::Ne,
    FilterOp::Lt,
    FilterOp::Le,
    FilterOp::Gt,
    FilterOp::Ge,
    FilterOp::In,
    FilterOp::Contains,
    FilterOp::ContainsKey,
    FilterOp::EntryEq,
    FilterOp::Like,
    FilterOp::NotIn,
    FilterOp::ElementEq,
];

fn encode_position_bound(e: &mut Encoder, bound: &Bound<PartitionPosition>) {
    match bound {
        Bound::Unbounded => e.u8(0),
        Bound::Included(p) => {
            e.u8(1);
            encode_position(e, p);
        }
        Bound::Excluded(p) => {
            e.u8(2);
            encode_position(e, p);
        }
    }
}

fn decode_position_bound(d: &mut Decoder) -> Result<Bound<PartitionPosition>, DecodeError> {
    match d.u8()? {
        0 => Ok(Bound::Unbounded),
        1 => Ok(Bound::Included(decode_position(d)?)),
        2 => Ok(Bound::Excluded(decode_position(d)?)),
        _ => Err(d.error("bad bound kind")),
    }
}

fn encode_row_position(e: &mut Encoder, p: &RowPosition) {
    encode_position(e, &p.partition);
    encode_optional(e, p.clustering.as_deref());
}

fn decode_row_position(d: &mut Decoder) -> Result<RowPosition, DecodeError> {
    Ok(RowPosition { partition: decode_position(d)?, clustering: decode_optional(d)? })
}

/// Room for a read command naming a few partitions: most are encoded
/// with one allocation.
const READ_COMMAND_BYTES: usize = 128;

pub fn encode_read_command(c: &ReadCommand) -> Vec<u8> {
    let mut out = Vec::with_capacity(READ_COMMAND_BYTES);
    let e = &mut Encoder { out: &mut out };
    encode_uuid(e, c.table);
    match &c.partitions {
        PartitionSelection::Keys(keys) => {
            e.u8(0);
            encode_list(e, keys, encode_position);
        }
        PartitionSelection::Range { from, to } => {
            e.u8(1);
            encode_position_bound(e, from);
            encode_position_bound(e, to);
        }
    }
    encode_clustering(e, &c.clustering);
    encode_list(e, &c.filters, |e, filter| {
        e.var_u64(filter.column as u64);
        // The position in FILTER_OPS: every op is listed there.
        e.u8(FILTER_OPS.iter().position(|op| *op == filter.op).unwrap_or(0) as u8);
        encode_list(e, &filter.values, |e, v| e.bytes(v));
    });
    e.u8(u8::from(c.reversed)
        | u8::from(c.distinct) << 1
        | u8::from(c.bypass_cache) << 2
        | u8::from(c.start_at_key) << 3);
    e.var_u64(c.row_limit as u64);
    e.var_u64(c.per_partition_limit as u64);
    encode_option(e, c.start_after.as_ref(), encode_row_position);
    e.var_u64(c.start_partition_rows as u64);
    e.var_i64(c.now_s);
    e.var_u64(c.tombstone_limit as u64);
    out
}

pub fn decode_read_command(bytes: &[u8]) -> Result<ReadCommand, DecodeError> {
    let d = &mut Decoder::new(bytes);
    let table = decode_uuid(d)?;
    let partitions = match d.u8()? {
        0 => PartitionSelection::Keys(decode_list(d, decode_position)?),
        1 => PartitionSelection::Range { from: decode_position_bound(d)?, to: decode_position_bound(d)? },
        _ => return Err(d.error("bad partition selection")),
    };
    let clustering = decode_clustering(d)?;
    let filters = decode_list(d, |d| {
        let column = decode_size(d)?;
        let op = *FILTER_OPS.get(usize::from(d.u8()?)).ok_or_else(|| d.error("bad filter op"))?;
        Ok(RowFilter { column, op, values: decode_list(d, |d| d.bytes())? })
    })?;
    let flags = d.u8()?;
    let row_limit = decode_size(d)?;
    let per_partition_limit = decode_size(d)?;
    let start_after = decode_option(d, decode_row_position)?;
    let start_partition_rows = decode_size(d)?;
    let now_s = d.var_i64()?;
    let tombstone_limit = decode_size(d)?;
    let command = ReadCommand {
        table,
        partitions,
        clustering,
        reversed: flags & 1 != 0,
        filters,
        distinct: flags & 2 != 0,
        row_limit,
        per_partition_limit,
        start_after,
        start_partition_rows,
        now_s,
        bypass_cache: flags & 4 != 0,
        start_at_key: flags & 8 != 0,
        tombstone_limit,
    };
    finish(d, command)
}

/// A read's rows, in one allocation of their encoding's size (encoded
/// first into the shard's scratch buffer, not grown by doubling).
pub fn encode_read_result(r: &ReadResult) -> Vec<u8> {
    with_scratch(|out| {
        encode_read_result_to(&mut Encoder { out }, r);
        out.to_vec()
    })
}

fn encode_read_result_to(e: &mut Encoder, r: &ReadResult) {
    let at_key = r.short.as_ref().is_some_and(|s| s.at_key);
    e.u8(u8::from(r.limit_reached) | u8::from(r.short.is_some()) << 1 | u8::from(at_key) << 2);
    if let Some(short) = &r.short {
        encode_row_position(e, &short.position);
    }
    encode_list(e, &r.rows, encode_result_row);
}

/// The digest of a read's rows that replicas compare ([`digest_of`] their
/// encoding).
pub fn read_result_digest(r: &ReadResult) -> u128 {
    hash_encoded(|e| encode_read_result_to(e, r))
}

fn encode_result_row(e: &mut Encoder, row: &ResultRow) {
    encode_row_position(e, &row.position);
    encode_list(e, &row.clustering, |e, v| e.bytes(v));
    encode_list(e, &row.cells, |e, cell| match cell {
        None => e.u8(0),
        Some(cell) => {
            // Bit 1: a TTL follows; bit 2: the collection's element stamps.
            let flag = (if cell.ttl_s.is_some() { 2 } else { 1 }) | (if cell.elements.is_empty() { 0 } else { 4 });
            e.u8(flag);
            e.bytes(&cell.value);
            e.var_i64(cell.timestamp);
            if let Some(ttl) = cell.ttl_s {
                e.var_i64(i64::from(ttl));
            }
            if !cell.elements.is_empty() {
                encode_list(e, &cell.elements, |e, stamp| {
                    e.bytes(&stamp.key);
                    e.var_i64(stamp.timestamp);
                    // TTL left plus one; 0 for none.
                    e.var_i64(stamp.ttl_s.map_or(0, |t| i64::from(t) + 1));
                });
            }
        }
    });
}

fn decode_result_row(d: &mut Decoder) -> Result<ResultRow, DecodeError> {
    let position = decode_row_position(d)?;
    let clustering = decode_list(d, |d| d.bytes())?;
    let cells = decode_list(d, |d| {
        let flag = d.u8()?;
        if flag == 0 {
            return Ok(None);
        }
        if !matches!(flag & 3, 1 | 2) || flag > 6 {
            return Err(d.error("bad cell flag"));
        }
        let value = d.bytes()?;
        let timestamp = d.var_i64()?;
        let ttl_s = if flag & 3 == 2 { Some(d.var_i32()?) } else { None };
        let elements = match flag & 4 {
            0 => Vec::new(),
            _ => decode_list(d, |d| {
                let key = d.bytes()?;
                let timestamp = d.var_i64()?;
                let ttl_s = match d.var_i64()? {
                    0 => None,
                    t => Some(i32::try_from(t - 1).map_err(|_| d.error("bad element ttl"))?),
                };
                Ok(ElementStamp { key, timestamp, ttl_s })
            })?,
        };
        Ok(Some(ResultCell { value, timestamp, ttl_s, elements }))
    })?;
    Ok(ResultRow { position, clustering, cells })
}

fn encode_clustering(e: &mut Encoder, ranges: &[ClusteringRange]) {
    encode_list(e, ranges, |e, range| {
        codec::encode_bound(e, &range.start);
        codec::encode_bound(e, &range.end);
    });
}

/// A list of clustering ranges, at least one.
fn decode_clustering(d: &mut Decoder) -> Result<Vec<ClusteringRange>, DecodeError> {
    let ranges =
        decode_list(d, |d| Ok(ClusteringRange { start: codec::decode_bound(d)?, end: codec::decode_bound(d)? }))?;
    if ranges.is_empty() {
        return Err(d.error("a read asks for at least one clustering range"));
    }
    Ok(ranges)
}

/// A Paxos prepare: the ballot a proposer asks replicas to promise for a
/// partition, and the rows a promise should carry as stored (a
/// conditional write's condition rows; `None`: none, a serial read).
#[derive(Debug, Clone, PartialEq)]
pub struct PaxosPrepare {
    pub table: Uuid,
    pub position: PartitionPosition,
    pub ballot: Ballot,
    pub read: Option<Vec<ClusteringRange>>,
}

pub fn encode_paxos_prepare(p: &PaxosPrepare) -> Vec<u8> {
    let mut out = Vec::new();
    p.ballot.encode(&mut out);
    let e = &mut Encoder { out: &mut out };
    encode_uuid(e, p.table);
    encode_position(e, &p.position);
    encode_option(e, p.read.as_deref(), encode_clustering);
    out
}

pub fn decode_paxos_prepare(bytes: &[u8]) -> Result<PaxosPrepare, DecodeError> {
    let d = &mut Decoder::new(bytes);
    let ballot = Ballot::decode(d)?;
    let table = decode_uuid(d)?;
    let position = decode_position(d)?;
    let read = decode_option(d, decode_clustering)?;
    finish(d, PaxosPrepare { table, position, ballot, read })
}

pub fn encode_promise(p: &Promise) -> Vec<u8> {
    let mut out = Vec::new();
    out.push(u8::from(p.promised));
    p.promised_ballot.encode(&mut out);
    p.committed.encode(&mut out);
    let e = &mut Encoder { out: &mut out };
    encode_option(e, p.accepted.as_ref(), |e, accepted| {
        accepted.ballot.encode(e.out);
        codec::encode_partition(e, &accepted.update);
    });
    encode_option(e, p.data.as_ref(), codec::encode_partition);
    out
}

pub fn decode_promise(bytes: &[u8]) -> Result<Promise, DecodeError> {
    let d = &mut Decoder::new(bytes);
    let promised = decode_flag(d)?;
    let promised_ballot = Ballot::decode(d)?;
    let committed = Ballot::decode(d)?;
    let accepted =
        decode_option(d, |d| Ok(Proposal { ballot: Ballot::decode(d)?, update: codec::decode_partition(d)? }))?;
    let data = decode_option(d, codec::decode_partition)?;
    finish(d, Promise { promised, promised_ballot, accepted, committed, data })
}

/// A proposal to accept, or a chosen one to commit: its ballot, then its
/// mutation, whose list operations are resolved already.
pub fn encode_paxos_proposal(ballot: Ballot, mutation: &Mutation) -> Vec<u8> {
    assert!(mutation.list_ops.is_empty(), "a proposal's list operations are resolved before it is proposed");
    let mut out = Vec::new();
    ballot.encode(&mut out);
    out.extend_from_slice(&encode_mutation(mutation));
    out
}

pub fn decode_paxos_proposal(bytes: &[u8]) -> Result<(Ballot, Mutation), DecodeError> {
    let d = &mut Decoder::new(bytes);
    let ballot = Ballot::decode(d)?;
    let mutation = decode_mutation(&bytes[Ballot::ENCODED_BYTES..])?;
    if !mutation.list_ops.is_empty() {
        return Err(d.error("a proposal with unresolved list operations"));
    }
    Ok((ballot, mutation))
}

pub fn decode_read_result(bytes: &[u8]) -> Result<ReadResult, DecodeError> {
    let d = &mut Decoder::new(bytes);
    let flags = d.u8()?;
    if flags > 7 {
        return Err(d.error("bad read result flags"));
    }
    let short = match flags & 2 != 0 {
        true => Some(Box::new(ShortStop { position: decode_row_position(d)?, at_key: flags & 4 != 0 })),
        false => None,
    };
    let rows = decode_list(d, decode_result_row)?;
    finish(d, ReadResult { rows, limit_reached: flags & 1 != 0, short })
}

/// Raw partitions (tombstones and timestamps kept), for reconciling
/// replicas: `None` for a partition a replica does not hold.
pub fn encode_partitions(partitions: &[Option<Partition>]) -> Vec<u8> {
    let mut out = Vec::new();
    let e = &mut Encoder { out: &mut out };
    encode_list(e, partitions, |e, partition| encode_option(e, partition.as_ref(), codec::encode_partition));
    out
}

pub fn decode_partitions(bytes: &[u8]) -> Result<Vec<Option<Partition>>, DecodeError> {
    let d = &mut Decoder::new(bytes);
    let partitions = decode_list(d, |d| decode_option(d, codec::decode_partition))?;
    finish(d, partitions)
}

/// A streaming read: a page of `table`'s stored partitions in a range,
/// on the shard asked.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamRead {
    pub table: Uuid,
    pub from: Bound<PartitionPosition>,
    pub to: Bound<PartitionPosition>,
}

pub fn encode_stream_read(r: &StreamRead) -> Vec<u8> {
    let mut out = Vec::new();
    let e = &mut Encoder { out: &mut out };
    encode_uuid(e, r.table);
    encode_position_bound(e, &r.from);
    encode_position_bound(e, &r.to);
    out
}

pub fn decode_stream_read(bytes: &[u8]) -> Result<StreamRead, DecodeError> {
    let d = &mut Decoder::new(bytes);
    let read = StreamRead { table: decode_uuid(d)?, from: decode_position_bound(d)?, to: decode_position_bound(d)? };
    finish(d, read)
}

/// A page of streamed partitions, in ring order, and whether more follow.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StreamPage {
    pub partitions: Vec<(PartitionPosition, Partition)>,
    pub more: bool,
}

pub fn encode_stream_page(page: &StreamPage) -> Vec<u8> {
    let mut out = Vec::new();
    let e = &mut Encoder { out: &mut out };
    e.u8(u8::from(page.more));
    encode_list(e, &page.partitions, |e, (position, partition)| {
        encode_position(e, position);
        codec::encode_partition(e, partition);
    });
    out
}

pub fn decode_stream_page(bytes: &[u8]) -> Result<StreamPage, DecodeError> {
    let d = &mut Decoder::new(bytes);
    let more = decode_flag(d)?;
    let partitions = decode_list(d, |d| Ok((decode_position(d)?, codec::decode_partition(d)?)))?;
    finish(d, StreamPage { partitions, more })
}

/// A page of partition hashes (repair), in ring order, and whether more
/// follow.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HashPage {
    pub hashes: Vec<(PartitionPosition, u128)>,
    pub more: bool,
}

pub fn encode_hash_page(page: &HashPage) -> Vec<u8> {
    let mut out = Vec::new();
    let e = &mut Encoder { out: &mut out };
    e.u8(u8::from(page.more));
    encode_list(e, &page.hashes, |e, (position, hash)| {
        encode_position(e, position);
        encode_hash(e, *hash);
    });
    out
}

pub fn decode_hash_page(bytes: &[u8]) -> Result<HashPage, DecodeError> {
    let d = &mut Decoder::new(bytes);
    let more = decode_flag(d)?;
    let hashes = decode_list(d, |d| {
        let position = decode_position(d)?;
        Ok((position, decode_hash(d)?))
    })?;
    finish(d, HashPage { hashes, more })
}

fn encode_hash(e: &mut Encoder, hash: u128) {
    e.out.extend_from_slice(&hash.to_be_bytes());
}

fn decode_hash(d: &mut Decoder) -> Result<u128, DecodeError> {
    d.slice(16)?.try_into().map(u128::from_be_bytes).map_err(|_| d.error("hash"))
}

/// A hash of a partition as stored: equal partitions hash alike on every
/// node ([`digest_of`] their encoding).
pub fn partition_hash(partition: &Partition) -> u128 {
    hash_encoded(|e| codec::encode_partition(e, partition))
}

/// The digest of encoded data that replicas compare (read digests,
/// repair hashes): xxh3-128, so copies that differ look alike with odds
/// of 2^-128. (Two CRC32Cs under different seeds, as before, collide
/// together for inputs of equal length: 2^-32.)
pub fn digest_of(bytes: &[u8]) -> u128 {
    xxhash_rust::xxh3::xxh3_128(bytes)
}

/// A buffer kept between hashes grows no bigger than this: one large
/// read does not keep its memory for good.
const KEPT_SCRATCH_BYTES_MAX: usize = 64 << 10;

thread_local! {
    /// The shard's buffer that what is hashed is encoded into, so that a
    /// digest (one per digest read, on each side) allocates nothing, and
    /// a read's answer is allocated once at its size.
    static SCRATCH: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// The [`digest_of`] what `encode` writes.
fn hash_encoded(encode: impl FnOnce(&mut Encoder)) -> u128 {
    with_scratch(|out| {
        encode(&mut Encoder { out });
        digest_of(out)
    })
}

/// What `with` makes of the shard's scratch buffer, emptied for it.
fn with_scratch<T>(with: impl FnOnce(&mut Vec<u8>) -> T) -> T {
    SCRATCH.with(|scratch| {
        // Taken out while in use: a use within another's (none today)
        // would start from an empty buffer of its own.
        let mut out = scratch.take();
        out.clear();
        let made = with(&mut out);
        if out.capacity() <= KEPT_SCRATCH_BYTES_MAX {
            scratch.set(out);
        }
        made
    })
}

/// A stored partition's hashes for row-level repair: one of everything
/// but its clustered rows (partition tombstone, static row, range
/// tombstones), and one per clustered row, by clustering key.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RowHashes {
    pub header: u128,
    pub rows: Vec<(Bytes, u128)>,
}

impl RowHashes {
    pub fn of(partition: &Partition) -> RowHashes {
        // Stored copies may list the same range tombstones in another order.
        let mut header = Partition {
            tombstone: partition.tombstone,
            static_row: partition.static_row.clone(),
            rows: Default::default(),
            range_tombstones: partition.range_tombstones.clone(),
        };
        header.canonicalize_range_tombstones();
        let rows = partition
            .rows
            .iter()
            .map(|(key, row)| (key.clone(), hash_encoded(|e| codec::encode_clustered_row(e, key, row))))
            .collect();
        RowHashes { header: hash_encoded(|e| codec::encode_header(e, &header)), rows }
    }
}

/// Each named partition's [`RowHashes`] (`None`: not stored).
pub fn encode_row_hashes(partitions: &[Option<RowHashes>]) -> Vec<u8> {
    let mut out = Vec::new();
    let e = &mut Encoder { out: &mut out };
    encode_list(e, partitions, |e, partition| {
        encode_option(e, partition.as_ref(), |e, hashes| {
            encode_hash(e, hashes.header);
            encode_list(e, &hashes.rows, |e, (key, hash)| {
                e.bytes(key);
                encode_hash(e, *hash);
            });
        })
    });
    out
}

pub fn decode_row_hashes(bytes: &[u8]) -> Result<Vec<Option<RowHashes>>, DecodeError> {
    let d = &mut Decoder::new(bytes);
    let partitions = decode_list(d, |d| {
        decode_option(d, |d| {
            let header = decode_hash(d)?;
            let rows = decode_list(d, |d| Ok((d.bytes()?, decode_hash(d)?)))?;
            Ok(RowHashes { header, rows })
        })
    })?;
    finish(d, partitions)
}

#[cfg(test)]
mod tests {
    use shoal_storage::{Cell, ClusteredRow, Row};

    use super::*;

    fn position(token: i64, key: &str) -> PartitionPosition {
        PartitionPosition { token, key: Bytes::copy_from_slice(key.as_bytes()) }
    }

    fn partition() -> Partition {
        let mut p = Partition::default();
        let mut row = Row::default();
        row.columns.insert(1, shoal_storage::ColumnData::Atomic(Cell::live(42, Bytes::from_static(b"v"), None)));
        p.rows.insert(Bytes::from_static(b"c"), ClusteredRow { row, ..Default::default() });
        p
    }

    /// Every prefix of a message is refused, never read as a shorter one.
    fn truncations_fail<T>(bytes: &[u8], decode: impl Fn(&[u8]) -> Result<T, DecodeError>) {
        for len in 0..bytes.len() {
            assert!(decode(&bytes[..len]).is_err(), "a prefix of {len} bytes decoded");
        }
        let mut longer = bytes.to_vec();
        longer.push(0);
        assert!(decode(&longer).is_err(), "trailing bytes accepted");
    }

    #[test]
    fn mutations_round_trip() {
        let mutation = Mutation {
            table: Uuid::from_u128(9),
            position: position(-7, "k"),
            update: partition(),
            list_ops: vec![
                ListOp {
                    column: 3,
                    row: Some(Bytes::from_static(b"c")),
                    kind: ListOpKind::SetIndex { index: 2, value: Some(Bytes::from_static(b"x")) },
                    timestamp: 5,
                    now_s: 6,
                    expiry: Some(shoal_storage::Expiry { ttl_s: 10, expires_at_s: 16 }),
                },
                ListOp {
                    column: 4,
                    row: None,
                    kind: ListOpKind::RemoveValues(vec![Bytes::from_static(b"y")]),
                    timestamp: 5,
                    now_s: 6,
                    expiry: None,
                },
            ],
        };
        let bytes = encode_mutation(&mutation);
        let decoded = decode_mutation(&bytes).expect("decodes");
        assert_eq!(
            (decoded.table, &decoded.position, &decoded.update),
            (mutation.table, &mutation.position, &mutation.update)
        );
        assert_eq!(format!("{:?}", decoded.list_ops), format!("{:?}", mutation.list_ops));
        truncations_fail(&bytes, decode_mutation);

        // As a replica receives it: the same mutation, its partition's
        // bytes as they came, its values in one copy apart from the
        // message's bytes and its key in one of its own.
        let (received, partition) = decode_received_mutation(&bytes).expect("decodes");
        assert_eq!((&received.position, &received.update), (&mutation.position, &mutation.update));
        assert_eq!(format!("{:?}", received.list_ops), format!("{:?}", mutation.list_ops));
        assert_eq!(codec::decode_partition(&mut Decoder::new(&partition)).as_ref(), Ok(&mutation.update));
        let (row_key, row) = received.update.rows.first_key_value().expect("a row");
        let shoal_storage::ColumnData::Atomic(Cell { value: shoal_storage::CellValue::Live { value, .. }, .. }) =
            &row.row.columns[&1]
        else {
            panic!("a live cell")
        };
        let within = |b: &Bytes| partition.as_ptr_range().contains(&b.as_ptr());
        assert!(within(row_key) && within(value), "the values are slices of the partition's copy");
        assert!(!bytes.as_ptr_range().contains(&value.as_ptr()), "not of the message's bytes");
        assert!(!within(&received.position.key), "the key is a copy of its own");
        truncations_fail(&bytes, |b| decode_received_mutation(b).map(drop));
        let mut bad = bytes.clone();
        let partition_start = bytes.windows(partition.len()).position(|w| *w == partition[..]).expect("in the message");
        bad[partition_start] = 9;
        let error = decode_received_mutation(&bad).map(drop).expect_err("a bad tombstone flag");
        assert_eq!(error, decode_mutation(&bad).map(drop).expect_err("the same error"), "at the message's offset");
    }

    #[test]
    fn read_commands_results_and_partitions_round_trip() {
        let command = ReadCommand {
            table: Uuid::from_u128(3),
            partitions: PartitionSelection::Range { from: Bound::Excluded(position(1, "a")), to: Bound::Unbounded },
            clustering: vec![ClusteringRange::all()],
            reversed: true,
            // Every op travels by its code.
            filters: FILTER_OPS
                .iter()
                .map(|op| RowFilter { column: 2, op: *op, values: vec![Bytes::from_static(b"z")] })
                .collect(),
            distinct: false,
            row_limit: 100,
            per_partition_limit: usize::MAX,
            start_after: Some(RowPosition { partition: position(1, "a"), clustering: None }),
            start_partition_rows: 3,
            now_s: 1_700_000_000,
            bypass_cache: true,
            start_at_key: true,
            tombstone_limit: 10,
        };
        let bytes = encode_read_command(&command);
        assert_eq!(format!("{:?}", decode_read_command(&bytes).expect("decodes")), format!("{command:?}"));
        truncations_fail(&bytes, decode_read_command);

        let result = ReadResult {
            rows: vec![ResultRow {
                position: RowPosition { partition: position(1, "a"), clustering: Some(Bytes::from_static(b"c")) },
                clustering: vec![Bytes::from_static(b"c")],
                cells: vec![
                    None,
                    Some(ResultCell {
                        value: Bytes::from_static(b"v"),
                        timestamp: 42,
                        ttl_s: Some(9),
                        elements: Vec::new(),
                    }),
                    Some(ResultCell {
                        value: Bytes::from_static(b"m"),
                        timestamp: 43,
                        ttl_s: None,
                        elements: vec![
                            ElementStamp { key: Bytes::from_static(b"k1"), timestamp: 41, ttl_s: None },
                            ElementStamp { key: Bytes::from_static(b"k2"), timestamp: 43, ttl_s: Some(7) },
                        ],
                    }),
                ],
            }],
            limit_reached: true,
            short: Some(Box::new(ShortStop {
                position: RowPosition { partition: position(2, "b"), clustering: Some(Bytes::from_static(b"d")) },
                at_key: true,
            })),
        };
        let bytes = encode_read_result(&result);
        let decoded = decode_read_result(&bytes).expect("decodes");
        assert_eq!((&decoded.rows, decoded.limit_reached, &decoded.short), (&result.rows, true, &result.short));
        truncations_fail(&bytes, decode_read_result);

        let partitions = vec![None, Some(partition())];
        let bytes = encode_partitions(&partitions);
        assert_eq!(decode_partitions(&bytes), Ok(partitions));
        truncations_fail(&bytes, decode_partitions);
    }

    #[test]
    fn paxos_messages_round_trip() {
        let ballot = Ballot { micros: 1_700_000_000_000_000, node: Uuid::from_u128(9) };
        for read in [None, Some(vec![ClusteringRange::all()])] {
            let prepare = PaxosPrepare { table: Uuid::from_u128(3), position: position(1, "a"), ballot, read };
            let bytes = encode_paxos_prepare(&prepare);
            assert_eq!(decode_paxos_prepare(&bytes), Ok(prepare));
            truncations_fail(&bytes, decode_paxos_prepare);
        }

        for (accepted, data) in [(None, Some(partition())), (Some(Proposal { ballot, update: partition() }), None)] {
            let promise = Promise { promised: false, promised_ballot: ballot, accepted, committed: Ballot::ZERO, data };
            let bytes = encode_promise(&promise);
            assert_eq!(decode_promise(&bytes), Ok(promise));
            truncations_fail(&bytes, decode_promise);
        }

        let mutation = Mutation {
            table: Uuid::from_u128(3),
            position: position(1, "a"),
            update: partition(),
            list_ops: Vec::new(),
        };
        let bytes = encode_paxos_proposal(ballot, &mutation);
        let (decoded_ballot, decoded) = decode_paxos_proposal(&bytes).expect("decodes");
        assert_eq!((decoded_ballot, format!("{decoded:?}")), (ballot, format!("{mutation:?}")));
        truncations_fail(&bytes, decode_paxos_proposal);
    }

    #[test]
    fn stream_reads_and_pages_round_trip() {
        let read = StreamRead {
            table: Uuid::from_u128(5),
            from: Bound::Included(position(-9, "")),
            to: Bound::Excluded(position(12, "")),
        };
        let bytes = encode_stream_read(&read);
        assert_eq!(decode_stream_read(&bytes), Ok(read));
        truncations_fail(&bytes, decode_stream_read);
        let page = StreamPage { partitions: vec![(position(3, "k"), partition())], more: true };
        let bytes = encode_stream_page(&page);
        assert_eq!(decode_stream_page(&bytes), Ok(page));
        truncations_fail(&bytes, decode_stream_page);
        let hashes = HashPage { hashes: vec![(position(3, "k"), partition_hash(&partition()))], more: false };
        let bytes = encode_hash_page(&hashes);
        assert_eq!(decode_hash_page(&bytes), Ok(hashes));
        truncations_fail(&bytes, decode_hash_page);
    }

    /// Partitions whose encodings differ only in a pattern that keeps
    /// their CRC32C under every seed (the CRC-32C polynomial, bit-reflected,
    /// XORed into a cell value) hash apart: two CRC32Cs, the hash before
    /// xxh3-128, hashed them alike.
    #[test]
    fn a_crc32c_collision_hashes_apart() {
        let with_value = |value: [u8; 8]| {
            let mut p = Partition::default();
            let mut row = Row::default();
            let cell = Cell::live(42, Bytes::copy_from_slice(&value), None);
            row.columns.insert(1, shoal_storage::ColumnData::Atomic(cell));
            p.rows.insert(Bytes::from_static(b"c"), ClusteredRow { row, ..Default::default() });
            p
        };
        let (a, b) = (with_value([0; 8]), with_value([0xF1, 0x76, 0xEC, 0x05, 0x01, 0, 0, 0]));
        assert_ne!(partition_hash(&a), partition_hash(&b));
        assert_ne!(RowHashes::of(&a).rows, RowHashes::of(&b).rows);
    }

    #[test]
    fn row_hashes_tell_rows_apart_from_the_rest() {
        let mut p = partition();
        let rows = RowHashes::of(&p);
        assert_eq!(rows.rows.len(), 1);
        // A partition tombstone changes the rest, not the row.
        p.tombstone = Some(shoal_storage::Tombstone { timestamp: 5, deletion_time_s: 1 });
        let tombstoned = RowHashes::of(&p);
        assert_ne!(tombstoned.header, rows.header);
        assert_eq!(tombstoned.rows, rows.rows);
        let bytes = encode_row_hashes(&[Some(rows), None, Some(tombstoned)]);
        assert_eq!(decode_row_hashes(&bytes).map(|h| h.len()), Ok(3));
        truncations_fail(&bytes, decode_row_hashes);
    }
}
