//! The binary encoding of partitions, shared by the commitlog and SSTables.
//!
//! Integers are LEB128 varints (signed ones zig-zagged), byte strings are a
//! varint length then the bytes. A partition is a header (deletion, static
//! row, range tombstones) followed by its rows in clustering order, each
//! introduced by a ROW byte, and an END byte: rows are self-delimiting, so a
//! reader can start at any row boundary an SSTable's clustering index names.
//!
//! Decoding never trusts its input: every length is checked against what is
//! left, and malformed bytes give [`DecodeError`], never a panic.

use std::collections::BTreeMap;
use std::ops::Bound;

use bytes::Bytes;

use crate::counter::{self, CounterShard};
use crate::partition::{
    Cell, CellValue, ClusteredRow, ClusteringRange, Collection, CollectionCell, ColumnData, Expiry, Partition,
    RangeTombstone, Row, RowMarker, Tombstone,
};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed data at byte {offset}: {what}")]
pub struct DecodeError {
    pub offset: usize,
    pub what: &'static str,
}

/// The unsigned value [`Encoder::var_i64`] writes for `v` (small
/// magnitudes, either sign, stay small).
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// The bytes [`Encoder::var_u64`] writes for `v`.
pub fn var_len(v: u64) -> usize {
    (64 - v.max(1).leading_zeros() as usize).div_ceil(7)
}

/// Appends encodings to a byte vector.
pub struct Encoder<'a> {
    pub out: &'a mut Vec<u8>,
}

impl Encoder<'_> {
    #[inline]
    pub fn u8(&mut self, v: u8) {
        self.out.push(v);
    }

    // Inlined where a one-byte varint (a length, a count, a column id) is
    // most of what is written: the call cost more than the byte.
    #[inline]
    pub fn var_u64(&mut self, v: u64) {
        if v < 0x80 {
            self.out.push(v as u8);
            return;
        }
        self.long_var_u64(v);
    }

    fn long_var_u64(&mut self, v: u64) {
        // Gathered, then appended at once: one capacity check, not one
        // per byte (a timestamp takes 8, a limit of "none" 10).
        let mut gathered = [0u8; 10];
        let n = var_u64_into(&mut gathered, v);
        self.out.extend_from_slice(&gathered[..n]);
    }

    #[inline]
    pub fn var_i64(&mut self, v: i64) {
        self.var_u64(zigzag(v));
    }

    #[inline]
    pub fn bytes(&mut self, b: &[u8]) {
        self.var_u64(b.len() as u64);
        self.out.extend_from_slice(b);
    }
}

/// Writes `v`'s varint at the start of `out`; its length.
fn var_u64_into(out: &mut [u8], mut v: u64) -> usize {
    let mut n = 0;
    while v >= 0x80 {
        out[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    out[n] = v as u8;
    n + 1
}

/// Reads encodings from a byte slice: varints and length-prefixed bytes on
/// top of the one bounds-checked byte reader (`shoal_buf`).
pub struct Decoder<'a> {
    bytes: shoal_buf::Reader<'a>,
    /// The input as a `Bytes`, where the caller has one
    /// ([`Decoder::shared`]): byte strings are slices of it, not copies.
    shared: Option<&'a Bytes>,
}

impl From<shoal_buf::Short> for DecodeError {
    fn from(short: shoal_buf::Short) -> DecodeError {
        DecodeError { offset: short.offset, what: short.what }
    }
}

impl<'a> Decoder<'a> {
    pub fn new(data: &'a [u8]) -> Decoder<'a> {
        Decoder { bytes: shoal_buf::Reader::new(data), shared: None }
    }

    /// A decoder of `data` whose byte strings ([`Decoder::bytes`]) are
    /// slices of it, with no allocation each. Each keeps all of `data`
    /// alive: give it bytes of the size of what they decode to (a copy of
    /// one message), never a buffer that holds others too.
    pub fn shared(data: &'a Bytes) -> Decoder<'a> {
        Decoder { bytes: shoal_buf::Reader::new(data), shared: Some(data) }
    }

    pub fn position(&self) -> usize {
        self.bytes.position()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub fn remaining(&self) -> usize {
        self.bytes.remaining()
    }

    /// The bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        self.bytes.rest()
    }

    pub fn error(&self, what: &'static str) -> DecodeError {
        DecodeError { offset: self.position(), what }
    }

    // Inline (here, `len`, `slice`, `fixed_i64`): called per byte or
    // field by the decoders, also in other crates.
    #[inline]
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.bytes.u8("unexpected end")?)
    }

    // Inlined into the readers of compact rows, in the crates that read
    // them (a memcached hit reads a few per item).
    //
    // A one-byte varint (lengths, counts, column ids, flags' zeros) is a
    // compare and a step, inlined everywhere (a call cost several times
    // that); a longer one is read by `var_u64_word`.
    #[inline(always)]
    pub fn var_u64(&mut self) -> Result<u64, DecodeError> {
        match self.bytes.rest().first() {
            Some(&b) if b < 0x80 => {
                self.bytes.take(1, "unexpected end")?;
                Ok(u64::from(b))
            }
            _ => self.var_u64_word(),
        }
    }

    /// A varint of up to 9 bytes (timestamps, offsets; an 8-byte value
    /// held as its word, whose top bits make it 9) read as one
    /// little-endian word: its end found by the first byte without the
    /// continuation bit and its 7-bit groups packed by three shifts, with
    /// no loop, a ninth byte's 7 bits put above them. Longer ones, and
    /// those in the input's last 8 bytes, take the byte loop
    /// (`var_u64_bytes`): the same value or error either way.
    #[inline(never)]
    fn var_u64_word(&mut self) -> Result<u64, DecodeError> {
        let rest = self.bytes.rest();
        let Some(word) = rest.first_chunk::<8>() else { return self.var_u64_bytes() };
        let word = u64::from_le_bytes(*word);
        let ends = !word & 0x8080_8080_8080_8080;
        // The varint's bytes (up to and including the first that ends it)
        // and its ninth byte, if it has one.
        let (n, ninth) = match ends {
            0 => match rest.get(8) {
                Some(&last) if last < 0x80 => (9, u64::from(last)),
                _ => return self.var_u64_bytes(),
            },
            _ => ((ends.trailing_zeros() / 8 + 1) as usize, 0),
        };
        let mut v = word & (u64::MAX >> (64 - 8 * n.min(8))) & 0x7f7f_7f7f_7f7f_7f7f;
        v = (v & 0x007f_007f_007f_007f) | ((v & 0x7f00_7f00_7f00_7f00) >> 1);
        v = (v & 0x0000_3fff_0000_3fff) | ((v & 0x3fff_0000_3fff_0000) >> 2);
        v = (v & 0x0000_0000_0fff_ffff) | ((v & 0x0fff_ffff_0000_0000) >> 4);
        self.bytes.take(n, "unexpected end")?;
        Ok(v | ninth << 56)
    }

    /// [`Decoder::var_u64`] a byte at a time: varints of 10 bytes and
    /// those within the input's last 8 bytes.
    #[cold]
    fn var_u64_bytes(&mut self) -> Result<u64, DecodeError> {
        let rest = self.bytes.rest();
        let mut v = 0u64;
        for (i, &b) in rest.iter().take(10).enumerate() {
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                self.bytes.take(i + 1, "unexpected end")?;
                return Ok(v);
            }
        }
        let offset = self.position() + rest.len().min(10);
        Err(match rest.len() < 10 {
            true => DecodeError { offset, what: "unexpected end" },
            false => DecodeError { offset, what: "varint longer than 10 bytes" },
        })
    }

    #[inline]
    pub fn var_i64(&mut self) -> Result<i64, DecodeError> {
        let v = self.var_u64()?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    pub fn var_u32(&mut self) -> Result<u32, DecodeError> {
        u32::try_from(self.var_u64()?).map_err(|_| self.error("value exceeds 32 bits"))
    }

    pub fn var_i32(&mut self) -> Result<i32, DecodeError> {
        i32::try_from(self.var_i64()?).map_err(|_| self.error("value exceeds 32 bits"))
    }

    /// A length, checked against the bytes left.
    #[inline]
    pub fn len(&mut self) -> Result<usize, DecodeError> {
        let len = self.var_u64()?;
        if len > self.bytes.remaining() as u64 {
            return Err(self.error("length runs past the end"));
        }
        Ok(len as usize)
    }

    #[inline]
    pub fn slice(&mut self, len: usize) -> Result<&'a [u8], DecodeError> {
        Ok(self.bytes.take(len, "short")?)
    }

    pub fn bytes(&mut self) -> Result<Bytes, DecodeError> {
        let len = self.len()?;
        let start = self.position();
        let bytes = self.slice(len)?;
        Ok(match self.shared {
            Some(shared) => shared.slice(start..start + len),
            None => Bytes::copy_from_slice(bytes),
        })
    }

    #[inline]
    pub fn fixed_i64(&mut self) -> Result<i64, DecodeError> {
        Ok(self.bytes.be_i64("short")?)
    }
}

const ROW: u8 = 1;
const END: u8 = 0;

const HAS_TOMBSTONE: u8 = 1;

const CELL_DEAD: u8 = 1;
const CELL_EXPIRES: u8 = 2;
/// A counter delta (a zig-zag varint): a counter cell of one delta shard.
/// Added in a later version without changing any earlier encoding, so
/// older files still read; a cell written before counter shards existed
/// reads as the delta it was.
const CELL_COUNTER: u8 = 4;
/// A counter cell's shards: their count, then each one's id (16 bytes, big
/// endian), clock and value (zig-zag varints), sorted by id.
const CELL_COUNTER_SHARDS: u8 = 8;
/// The bytes a counter shard takes at the least: its id and two one-byte
/// varints. Bounds a shard count against the bytes left before allocating.
const COUNTER_SHARD_MIN_BYTES: usize = 18;

const ROW_MARKER: u8 = 1;
const ROW_MARKER_EXPIRES: u8 = 2;
const ROW_DELETION: u8 = 4;

const COLUMN_ATOMIC: u8 = 0;
const COLUMN_COLLECTION: u8 = 1;

const BOUND_UNBOUNDED: u8 = 0;
const BOUND_INCLUDED: u8 = 1;
const BOUND_EXCLUDED: u8 = 2;

/// Encodes the partition header: everything but the clustered rows.
pub fn encode_header(e: &mut Encoder, p: &Partition) {
    encode_tombstone(e, p.tombstone);
    encode_row(e, &p.static_row);
    e.var_u64(p.range_tombstones.len() as u64);
    for rt in &p.range_tombstones {
        encode_bound(e, &rt.range.start);
        encode_bound(e, &rt.range.end);
        encode_tombstone(e, Some(rt.tombstone));
    }
}

/// Encodes one clustered row, with its ROW introducer.
pub fn encode_clustered_row(e: &mut Encoder, key: &[u8], row: &ClusteredRow) {
    e.u8(ROW);
    e.bytes(key);
    e.var_u64(row.clustering.len() as u64);
    for value in &row.clustering {
        e.bytes(value);
    }
    encode_row(e, &row.row);
}

pub fn encode_end(e: &mut Encoder) {
    e.u8(END);
}

/// Encodes a whole partition: header, rows, END.
pub fn encode_partition(e: &mut Encoder, p: &Partition) {
    encode_header(e, p);
    for (key, row) in &p.rows {
        encode_clustered_row(e, key, row);
    }
    encode_end(e);
}

/// Encodes, as [`encode_partition`] does, the partition of one row without
/// clustering whose live cells (sorted by column id) share `timestamp`
/// and `expiry`, from the cells as they lie: a memcached `set`'s commitlog
/// entry, written without building the `Partition` first.
pub fn encode_single_row_partition(e: &mut Encoder, timestamp: i64, expiry: Option<Expiry>, cells: &[(u32, &[u8])]) {
    // Constant: the header (no tombstone, an empty static row, no range
    // tombstones), then ROW, an empty key, no clustering values, no
    // marker or deletion.
    e.out.extend_from_slice(&[0, 0, 0, 0, ROW, 0, 0, 0]);
    e.var_u64(cells.len() as u64);
    // What comes before and after each cell's value is the same for
    // every cell: encoded once.
    let mut head = [0u8; 12];
    head[0] = COLUMN_ATOMIC;
    head[1] = if expiry.is_some() { CELL_EXPIRES } else { 0 };
    let head_len = 2 + var_u64_into(&mut head[2..], zigzag(timestamp));
    let head = &head[..head_len];
    let mut tail = [0u8; 20];
    let tail_len = match expiry {
        Some(x) => {
            let n = var_u64_into(&mut tail, zigzag(i64::from(x.ttl_s)));
            n + var_u64_into(&mut tail[n..], zigzag(x.expires_at_s))
        }
        None => 0,
    };
    let tail = &tail[..tail_len];
    for (id, value) in cells {
        e.var_u64(u64::from(*id));
        e.out.extend_from_slice(head);
        e.bytes(value);
        e.out.extend_from_slice(tail);
    }
    encode_end(e);
}

/// Encodes, as [`encode_partition`] does, a partition holding `tombstone`
/// and nothing else (a memcached `delete`'s commitlog entry).
pub fn encode_tombstone_partition(e: &mut Encoder, tombstone: Tombstone) {
    // [`encode_header`] of a partition with no static row and no range
    // tombstones, then [`encode_end`]: written as constants, gathered on
    // the stack and appended at once (one capacity check, not seven).
    let mut gathered = [0u8; 25];
    gathered[0] = HAS_TOMBSTONE;
    let mut n = 1;
    n += var_u64_into(&mut gathered[n..], zigzag(tombstone.timestamp));
    n += var_u64_into(&mut gathered[n..], zigzag(tombstone.deletion_time_s));
    // No static row flags or columns, no range tombstones, the end.
    gathered[n..n + 4].copy_from_slice(&[0, 0, 0, END]);
    e.out.extend_from_slice(&gathered[..n + 4]);
}

/// Passes over a row's clustering key, its encoding and values (as
/// [`encode_clustered_row`] writes them after ROW, and the compact layout
/// of `single_row` stores them), checking their lengths: the bytes passed,
/// or none for an empty key without values (a row without clustering).
pub(crate) fn skip_clustering<'a>(d: &mut Decoder<'a>) -> Result<&'a [u8], DecodeError> {
    let (rest, start) = (d.rest(), d.position());
    let len = d.len()?;
    d.slice(len)?;
    // Each value takes a byte at least: bounds the count.
    let count = d.var_u64()?;
    if count > d.remaining() as u64 {
        return Err(d.error("more clustering values than bytes"));
    }
    for _ in 0..count {
        let len = d.len()?;
        d.slice(len)?;
    }
    if len == 0 && count == 0 {
        return Ok(&[]);
    }
    Ok(&rest[..d.position() - start])
}

/// The one row of a partition's encoding, borrowed from the bytes: its
/// clustering key as stored ([`skip_clustering`]; none for a table without
/// clustering columns), its marker and its cells (column id, value,
/// timestamp, expiry), live and atomic, in column order.
pub(crate) struct PlainRow<'a> {
    pub(crate) clustering: &'a [u8],
    pub(crate) marker: Option<RowMarker>,
    pub(crate) cells: Vec<(u32, &'a [u8], i64, Option<Expiry>)>,
}

/// The partition encoded in `raw` (as [`encode_partition`] writes it) when
/// it is one row without deletion, static row or range tombstones, of
/// live atomic cells only, read without building a
/// [`Partition`]; `None` for anything else, malformed bytes included (the
/// general decoder then says what is wrong with them).
pub(crate) fn plain_row(raw: &[u8]) -> Option<PlainRow<'_>> {
    let mut d = Decoder::new(raw);
    // No tombstone, an empty static row (no flags, no column), no range
    // tombstones; one ROW. Flags are bytes, counts and lengths varints (a
    // varint's zero may take more than a byte: `decode_partition` reads
    // it as zero).
    let plain = d.u8().ok()? == 0
        && d.u8().ok()? == 0
        && d.var_u64().ok()? == 0
        && d.var_u64().ok()? == 0
        && d.u8().ok()? == ROW;
    if !plain {
        return None;
    }
    let clustering = skip_clustering(&mut d).ok()?;
    let flags = d.u8().ok()?;
    if flags & !(ROW_MARKER | ROW_MARKER_EXPIRES) != 0 {
        return None;
    }
    let marker = match flags & ROW_MARKER {
        0 => None,
        _ => {
            let timestamp = d.var_i64().ok()?;
            let expiry = if flags & ROW_MARKER_EXPIRES != 0 { Some(decode_expiry(&mut d).ok()?) } else { None };
            Some(RowMarker { timestamp, expiry })
        }
    };
    let n = d.var_u64().ok()?;
    // Each cell takes at least 5 bytes: bounds the allocation.
    if n > (d.remaining() / 5) as u64 {
        return None;
    }
    let mut cells: Vec<(u32, &[u8], i64, Option<Expiry>)> = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let id = d.var_u32().ok()?;
        if d.u8().ok()? != COLUMN_ATOMIC || cells.last().is_some_and(|(last, ..)| *last >= id) {
            return None;
        }
        let flags = d.u8().ok()?;
        let timestamp = d.var_i64().ok()?;
        let len = d.len().ok()?;
        let value = d.slice(len).ok()?;
        let expiry = match flags {
            0 => None,
            CELL_EXPIRES => Some(decode_expiry(&mut d).ok()?),
            _ => return None,
        };
        cells.push((id, value, timestamp, expiry));
    }
    (d.u8().ok()? == END).then_some(PlainRow { clustering, marker, cells })
}

pub fn decode_partition(d: &mut Decoder) -> Result<Partition, DecodeError> {
    let mut p = decode_header(d)?;
    while let Some((key, row)) = decode_next_row(d)? {
        p.rows.insert(key, row);
    }
    Ok(p)
}

/// Decodes the header; the rows follow.
pub fn decode_header(d: &mut Decoder) -> Result<Partition, DecodeError> {
    let tombstone = decode_tombstone(d)?;
    let static_row = decode_row(d)?;
    let count = d.var_u64()?;
    let mut range_tombstones = Vec::new();
    for _ in 0..count {
        let start = decode_bound(d)?;
        let end = decode_bound(d)?;
        let tombstone = decode_tombstone(d)?.ok_or_else(|| d.error("range tombstone without a deletion"))?;
        range_tombstones.push(RangeTombstone { range: ClusteringRange { start, end }, tombstone });
    }
    Ok(Partition { tombstone, static_row, rows: BTreeMap::new(), range_tombstones })
}

/// The next row, or `None` at the partition's END.
pub fn decode_next_row(d: &mut Decoder) -> Result<Option<(Bytes, ClusteredRow)>, DecodeError> {
    match d.u8()? {
        END => Ok(None),
        ROW => {
            let key = d.bytes()?;
            let n = d.var_u64()?;
            let mut clustering = Vec::new();
            for _ in 0..n {
                clustering.push(d.bytes()?);
            }
            let row = decode_row(d)?;
            Ok(Some((key, ClusteredRow { clustering, row })))
        }
        _ => Err(d.error("expected a row or the end of the partition")),
    }
}

fn encode_tombstone(e: &mut Encoder, t: Option<Tombstone>) {
    match t {
        None => e.u8(0),
        Some(t) => {
            e.u8(HAS_TOMBSTONE);
            e.var_i64(t.timestamp);
            e.var_i64(t.deletion_time_s);
        }
    }
}

fn decode_tombstone(d: &mut Decoder) -> Result<Option<Tombstone>, DecodeError> {
    match d.u8()? {
        0 => Ok(None),
        HAS_TOMBSTONE => Ok(Some(Tombstone { timestamp: d.var_i64()?, deletion_time_s: d.var_i64()? })),
        _ => Err(d.error("bad tombstone flag")),
    }
}

pub fn encode_bound(e: &mut Encoder, b: &Bound<Bytes>) {
    match b {
        Bound::Unbounded => e.u8(BOUND_UNBOUNDED),
        Bound::Included(k) => {
            e.u8(BOUND_INCLUDED);
            e.bytes(k);
        }
        Bound::Excluded(k) => {
            e.u8(BOUND_EXCLUDED);
            e.bytes(k);
        }
    }
}

pub fn decode_bound(d: &mut Decoder) -> Result<Bound<Bytes>, DecodeError> {
    match d.u8()? {
        BOUND_UNBOUNDED => Ok(Bound::Unbounded),
        BOUND_INCLUDED => Ok(Bound::Included(d.bytes()?)),
        BOUND_EXCLUDED => Ok(Bound::Excluded(d.bytes()?)),
        _ => Err(d.error("bad bound kind")),
    }
}

pub fn encode_expiry(e: &mut Encoder, x: Expiry) {
    e.var_i64(i64::from(x.ttl_s));
    e.var_i64(x.expires_at_s);
}

pub fn decode_expiry(d: &mut Decoder) -> Result<Expiry, DecodeError> {
    Ok(Expiry { ttl_s: d.var_i32()?, expires_at_s: d.var_i64()? })
}

fn encode_row(e: &mut Encoder, row: &Row) {
    let mut flags = 0;
    if let Some(m) = &row.marker {
        flags |= ROW_MARKER;
        if m.expiry.is_some() {
            flags |= ROW_MARKER_EXPIRES;
        }
    }
    if row.deletion.is_some() {
        flags |= ROW_DELETION;
    }
    e.u8(flags);
    if let Some(m) = &row.marker {
        e.var_i64(m.timestamp);
        if let Some(x) = m.expiry {
            encode_expiry(e, x);
        }
    }
    if let Some(t) = row.deletion {
        e.var_i64(t.timestamp);
        e.var_i64(t.deletion_time_s);
    }
    e.var_u64(row.columns.len() as u64);
    for (id, data) in &row.columns {
        e.var_u64(u64::from(*id));
        match data {
            ColumnData::Atomic(cell) => {
                e.u8(COLUMN_ATOMIC);
                encode_cell(e, cell);
            }
            ColumnData::Collection(c) => {
                e.u8(COLUMN_COLLECTION);
                encode_tombstone(e, c.tombstone);
                e.var_u64(c.cells.len() as u64);
                for (sort_key, cc) in &c.cells {
                    e.bytes(sort_key);
                    e.bytes(&cc.key);
                    encode_cell(e, &cc.cell);
                }
            }
        }
    }
}

fn decode_row(d: &mut Decoder) -> Result<Row, DecodeError> {
    let flags = d.u8()?;
    if flags & !(ROW_MARKER | ROW_MARKER_EXPIRES | ROW_DELETION) != 0 {
        return Err(d.error("bad row flags"));
    }
    let marker = if flags & ROW_MARKER != 0 {
        let timestamp = d.var_i64()?;
        let expiry = if flags & ROW_MARKER_EXPIRES != 0 { Some(decode_expiry(d)?) } else { None };
        Some(RowMarker { timestamp, expiry })
    } else {
        None
    };
    let deletion = if flags & ROW_DELETION != 0 {
        Some(Tombstone { timestamp: d.var_i64()?, deletion_time_s: d.var_i64()? })
    } else {
        None
    };
    let n = d.var_u64()?;
    let mut columns = BTreeMap::new();
    for _ in 0..n {
        let id = d.var_u32()?;
        let data = match d.u8()? {
            COLUMN_ATOMIC => ColumnData::Atomic(decode_cell(d)?),
            COLUMN_COLLECTION => {
                let tombstone = decode_tombstone(d)?;
                let count = d.var_u64()?;
                let mut cells = BTreeMap::new();
                for _ in 0..count {
                    let sort_key = d.bytes()?;
                    let key = d.bytes()?;
                    let cell = decode_cell(d)?;
                    cells.insert(sort_key, CollectionCell { key, cell });
                }
                ColumnData::Collection(Collection { tombstone, cells })
            }
            _ => return Err(d.error("bad column kind")),
        };
        columns.insert(id, data);
    }
    Ok(Row { marker, deletion, columns })
}

fn encode_cell(e: &mut Encoder, cell: &Cell) {
    match &cell.value {
        CellValue::Live { value, expiry } => {
            e.u8(if expiry.is_some() { CELL_EXPIRES } else { 0 });
            e.var_i64(cell.timestamp);
            e.bytes(value);
            if let Some(x) = expiry {
                encode_expiry(e, *x);
            }
        }
        CellValue::Dead { deletion_time_s } => {
            e.u8(CELL_DEAD);
            e.var_i64(cell.timestamp);
            e.var_i64(*deletion_time_s);
        }
        CellValue::Counter { shards } => match &**shards {
            [only] if only.id == CounterShard::DELTA_ID => {
                e.u8(CELL_COUNTER);
                e.var_i64(cell.timestamp);
                e.var_i64(only.value);
            }
            shards => {
                e.u8(CELL_COUNTER_SHARDS);
                e.var_i64(cell.timestamp);
                e.var_u64(shards.len() as u64);
                for shard in shards {
                    e.out.extend_from_slice(&shard.id.to_be_bytes());
                    e.var_i64(shard.clock);
                    e.var_i64(shard.value);
                }
            }
        },
    }
}

fn decode_cell(d: &mut Decoder) -> Result<Cell, DecodeError> {
    let flags = d.u8()?;
    let timestamp = d.var_i64()?;
    match flags {
        0 => Ok(Cell::live(timestamp, d.bytes()?, None)),
        CELL_EXPIRES => {
            let value = d.bytes()?;
            Ok(Cell::live(timestamp, value, Some(decode_expiry(d)?)))
        }
        CELL_DEAD => Ok(Cell::dead(timestamp, d.var_i64()?)),
        CELL_COUNTER => Ok(Cell::counter_delta(timestamp, d.var_i64()?)),
        CELL_COUNTER_SHARDS => Ok(Cell::counter(timestamp, decode_counter_shards(d)?)),
        _ => Err(d.error("bad cell flags")),
    }
}

fn decode_counter_shards(d: &mut Decoder) -> Result<Box<[CounterShard]>, DecodeError> {
    let count = d.var_u64()?;
    if count == 0 || count > (d.remaining() / COUNTER_SHARD_MIN_BYTES) as u64 {
        return Err(d.error("bad counter shard count"));
    }
    let mut shards = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let id = u128::from_be_bytes(d.slice(16)?.try_into().expect("16 bytes taken"));
        shards.push(CounterShard { id, clock: d.var_i64()?, value: d.var_i64()? });
    }
    if !counter::well_formed(&shards) {
        return Err(d.error("counter shards out of order, or a clock out of range"));
    }
    Ok(shards.into_boxed_slice())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn var_len_is_what_var_u64_writes() {
        for v in [0, 1, 127, 128, 16_383, 16_384, u64::from(u32::MAX), u64::MAX >> 1, u64::MAX] {
            let mut out = Vec::new();
            Encoder { out: &mut out }.var_u64(v);
            assert_eq!(var_len(v), out.len(), "{v}");
        }
    }

    #[test]
    fn varints_read_back_and_bad_ones_fail_where_they_end() {
        let values = [0, 1, 127, 128, 16_383, 16_384, u64::from(u32::MAX), u64::MAX >> 1, u64::MAX];
        let mut out = Vec::new();
        for v in values {
            Encoder { out: &mut out }.var_u64(v);
            Encoder { out: &mut out }.var_i64(v as i64);
        }
        let d = &mut Decoder::new(&out);
        for v in values {
            assert_eq!(d.var_u64(), Ok(v));
            assert_eq!(d.var_i64(), Ok(v as i64));
        }
        assert!(d.is_empty());
        let cut = [0x80, 0x80];
        assert_eq!(Decoder::new(&cut).var_u64(), Err(DecodeError { offset: 2, what: "unexpected end" }));
        let long = [0xff; 11];
        let error = DecodeError { offset: 10, what: "varint longer than 10 bytes" };
        assert_eq!(Decoder::new(&long).var_u64(), Err(error));
        // A value that ends at the tenth byte reads; the cursor stops there.
        let mut tenth = [0xffu8; 11];
        tenth[9] = 0x01;
        let d = &mut Decoder::new(&tenth);
        assert_eq!(d.var_u64(), Ok(u64::MAX));
        assert_eq!(d.position(), 10);
    }

    /// The word-at-a-time reader against the byte loop, on every input
    /// shape: varints of each length (non-canonical ones too, with zero
    /// groups and continuation bytes of 0x80), near the input's end or
    /// not, cut short, too long (seeded: `SHOAL_MODEL_SEED`).
    #[test]
    fn varints_read_a_word_at_a_time_as_a_byte_at_a_time() {
        use rand::{Rng, SeedableRng};
        let seed = std::env::var("SHOAL_MODEL_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(29);
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        for _ in 0..100_000 {
            let len = rng.gen_range(0..14);
            let ends_at = rng.gen_range(0..12);
            let bytes: Vec<u8> = (0..len)
                .map(|i| {
                    let low = match rng.gen_range(0..3) {
                        0 => 0,
                        1 => 0x7f,
                        _ => rng.gen::<u8>() & 0x7f,
                    };
                    if i < ends_at || rng.gen_bool(0.1) {
                        low | 0x80
                    } else {
                        low
                    }
                })
                .collect();
            let (mut fast, mut slow) = (Decoder::new(&bytes), Decoder::new(&bytes));
            assert_eq!(fast.var_u64(), slow.var_u64_bytes(), "seed {seed}: {bytes:02x?}");
            assert_eq!(fast.position(), slow.position(), "seed {seed}: {bytes:02x?}");
        }
    }

    #[test]
    fn a_delta_shard_with_a_clock_is_malformed() {
        // Found by the codec_partition fuzz target: it would encode back as
        // a plain delta, without its clock.
        let mut out = Vec::new();
        let e = &mut Encoder { out: &mut out };
        e.u8(CELL_COUNTER_SHARDS);
        e.var_i64(1);
        e.var_u64(1);
        e.out.extend_from_slice(&CounterShard::DELTA_ID.to_be_bytes());
        e.var_i64(300);
        e.var_i64(0);
        assert!(decode_cell(&mut Decoder::new(&out)).is_err());
    }

    pub(crate) fn sample_partition() -> Partition {
        let mut p =
            Partition { tombstone: Some(Tombstone { timestamp: -5, deletion_time_s: 7 }), ..Default::default() };
        p.static_row.columns.insert(9, ColumnData::Atomic(Cell::live(3, Bytes::from_static(b"s"), None)));
        let mut row = Row {
            marker: Some(RowMarker { timestamp: 10, expiry: Some(Expiry { ttl_s: 5, expires_at_s: 100 }) }),
            deletion: Some(Tombstone { timestamp: 2, deletion_time_s: 1 }),
            columns: BTreeMap::new(),
        };
        row.columns.insert(1, ColumnData::Atomic(Cell::dead(i64::MIN, i64::MAX)));
        row.columns.insert(2, ColumnData::Atomic(Cell::counter_delta(11, i64::MIN)));
        let shards = [CounterShard::delta(4), CounterShard { id: u128::MAX, clock: i64::MAX - 1, value: i64::MIN }];
        row.columns.insert(3, ColumnData::Atomic(Cell::counter(12, Box::new(shards))));
        let mut coll =
            Collection { tombstone: Some(Tombstone { timestamp: 4, deletion_time_s: 4 }), ..Default::default() };
        coll.cells.insert(
            Bytes::from_static(b"sk"),
            CollectionCell { key: Bytes::from_static(b"k"), cell: Cell::live(i64::MAX, Bytes::new(), None) },
        );
        row.columns.insert(u32::MAX, ColumnData::Collection(coll));
        p.rows.insert(
            Bytes::from_static(b"\x01\x02"),
            ClusteredRow { clustering: vec![Bytes::from_static(b"a"), Bytes::new()], row },
        );
        p.range_tombstones.push(RangeTombstone {
            range: ClusteringRange { start: Bound::Excluded(Bytes::from_static(b"a")), end: Bound::Unbounded },
            tombstone: Tombstone { timestamp: 1, deletion_time_s: 2 },
        });
        p
    }

    #[test]
    fn partitions_round_trip() {
        let p = sample_partition();
        let mut out = Vec::new();
        encode_partition(&mut Encoder { out: &mut out }, &p);
        let mut d = Decoder::new(&out);
        assert_eq!(decode_partition(&mut d), Ok(p));
        assert!(d.is_empty());
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let mut out = Vec::new();
        encode_partition(&mut Encoder { out: &mut out }, &sample_partition());
        for len in 0..out.len() {
            assert!(decode_partition(&mut Decoder::new(&out[..len])).is_err(), "prefix {len}");
        }
    }
}
