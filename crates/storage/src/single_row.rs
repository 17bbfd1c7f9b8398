//! The compact encoding of a single-row partition, shared by the row cache
//! (`cache::entry`) and the memtable: a partition that is one row (of a
//! table without clustering columns, as key-value tables and memcached
//! items have, or one clustered row, as a table read by key holds per
//! partition) whose cells share one timestamp and expiry, as a single
//! INSERT or memcached `set` writes them. One timestamp and expiry for
//! all, the row's clustering key where it has one, then each cell as
//! column id and value, no row or map machinery. An 8-byte value (bigint,
//! memcached's flags and CAS) is stored as a varint.
//!
//! Layout: flags (marker, expiry, clustered), timestamp (8 bytes), then
//! with an expiry its TTL and expiry time as varints, with a clustering
//! key its encoding and its values (each length-prefixed, the count
//! before the values, as an SSTable's row holds them), the cell count, and
//! per cell the column id (shifted, low bit: 8-byte value) and the value.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::codec::{self, var_len, zigzag, DecodeError, Decoder, Encoder};
use crate::partition::{Cell, CellValue, ClusteredRow, ColumnData, Expiry, Partition, Row, RowMarker};

const HAS_MARKER: u8 = 1;
const EXPIRES: u8 = 2;
/// The row has a clustering key (an empty key and no values: none).
const CLUSTERED: u8 = 4;

/// A partition the compact encoding can hold: its one row and the
/// timestamp and expiry all of the row's parts share.
pub(crate) struct SingleRow<'a> {
    key: &'a [u8],
    clustering: &'a [Bytes],
    row: &'a Row,
    timestamp: i64,
    expiry: Option<Expiry>,
}

impl<'a> SingleRow<'a> {
    /// `p` as a single row, if it is one.
    pub(crate) fn of(p: &'a Partition) -> Option<SingleRow<'a>> {
        if p.tombstone.is_some() || !p.static_row.is_empty() || !p.range_tombstones.is_empty() || p.rows.len() != 1 {
            return None;
        }
        let (key, clustered) = p.rows.iter().next()?;
        let row = &clustered.row;
        if row.deletion.is_some() {
            return None;
        }
        let mut parts =
            row.marker.iter().map(|m| (m.timestamp, m.expiry)).chain(row.columns.values().map(|c| match c {
                ColumnData::Atomic(Cell { timestamp, value: CellValue::Live { expiry, .. } }) => (*timestamp, *expiry),
                // Never equal to a real part: the row is not a single row.
                _ => (i64::MIN, None),
            }));
        let (timestamp, expiry) = parts.next()?;
        (timestamp != i64::MIN && parts.all(|part| part == (timestamp, expiry))).then_some(SingleRow {
            key,
            clustering: &clustered.clustering,
            row,
            timestamp,
            expiry,
        })
    }

    /// The encoding's length, to allocate it once at its size.
    pub(crate) fn encoded_len(&self) -> usize {
        encoded_len(self.expiry, self.clustering(), self.cells())
    }

    pub(crate) fn encode(&self, e: &mut Encoder) {
        encode(e, self.row.marker.is_some(), self.timestamp, self.expiry, self.clustering(), self.cells());
    }

    fn clustering(&self) -> Clustering<'_> {
        Clustering::Values { key: self.key, values: self.clustering }
    }

    fn cells(&self) -> impl ExactSizeIterator<Item = (u32, &[u8])> + '_ {
        self.row.columns.iter().map(|(id, data)| (*id, &atomic_value(data)[..]))
    }
}

/// A single row given as its cells, borrowed from where they are (a
/// memcached `set`'s value, its flags' and CAS's words): what
/// [`SingleRow`] holds, encoded for the memtable and the commitlog without
/// building a `Partition` first. No row marker; live cells sorted by
/// column id, all with the row's timestamp and expiry.
#[derive(Debug, Clone, Copy)]
pub struct RowCells<'a> {
    pub timestamp: i64,
    pub expiry: Option<Expiry>,
    pub cells: &'a [(u32, &'a [u8])],
}

impl RowCells<'_> {
    /// The compact encoding's length.
    pub(crate) fn encoded_len(&self) -> usize {
        encoded_len(self.expiry, Clustering::NONE, self.cells.iter().copied())
    }

    /// The compact encoding, what [`SingleRow::encode`] writes for
    /// [`RowCells::to_partition`].
    pub(crate) fn encode(&self, e: &mut Encoder) {
        debug_assert!(self.cells.windows(2).all(|w| w[0].0 < w[1].0), "cells sorted by column id, once each");
        encode(e, false, self.timestamp, self.expiry, Clustering::NONE, self.cells.iter().copied());
    }

    /// [`SingleRow::supersedes`] for these cells.
    pub(crate) fn supersedes(&self, encoded: &[u8]) -> Result<bool, DecodeError> {
        supersedes(encoded, self.timestamp, false, &[], |id| self.cells.iter().any(|(c, _)| *c == id))
    }

    /// The partition these cells make: one row, without clustering.
    pub fn to_partition(&self) -> Partition {
        let columns = self
            .cells
            .iter()
            .map(|(id, value)| {
                let cell = Cell::live(self.timestamp, Bytes::copy_from_slice(value), self.expiry);
                (*id, ColumnData::Atomic(cell))
            })
            .collect();
        let row = Row { marker: None, deletion: None, columns };
        let mut p = Partition::default();
        p.rows.insert(Bytes::new(), ClusteredRow { clustering: Vec::new(), row });
        p
    }
}

/// A row's clustering as the layout stores it.
#[derive(Clone, Copy)]
pub(crate) enum Clustering<'a> {
    /// The key's encoding and values (none: an empty key and no values).
    Values { key: &'a [u8], values: &'a [Bytes] },
    /// Already encoded as the layout stores it, taken from an SSTable's
    /// row (`codec::PlainRow::clustering`); empty for none.
    Encoded(&'a [u8]),
}

impl Clustering<'_> {
    const NONE: Clustering<'static> = Clustering::Encoded(&[]);

    fn is_none(&self) -> bool {
        match self {
            Clustering::Values { key, values } => key.is_empty() && values.is_empty(),
            Clustering::Encoded(encoded) => encoded.is_empty(),
        }
    }

    fn encoded_len(&self) -> usize {
        match self {
            _ if self.is_none() => 0,
            Clustering::Values { key, values } => {
                let bytes = |len: usize| var_len(len as u64) + len;
                bytes(key.len()) + var_len(values.len() as u64) + values.iter().map(|v| bytes(v.len())).sum::<usize>()
            }
            Clustering::Encoded(encoded) => encoded.len(),
        }
    }

    fn encode(&self, e: &mut Encoder) {
        match self {
            _ if self.is_none() => {}
            Clustering::Values { key, values } => {
                e.bytes(key);
                e.var_u64(values.len() as u64);
                for value in values.iter() {
                    e.bytes(value);
                }
            }
            Clustering::Encoded(encoded) => e.out.extend_from_slice(encoded),
        }
    }
}

fn encoded_len<'c>(
    expiry: Option<Expiry>,
    clustering: Clustering,
    cells: impl ExactSizeIterator<Item = (u32, &'c [u8])>,
) -> usize {
    let expiry = expiry.map_or(0, |e| var_len(zigzag(i64::from(e.ttl_s))) + var_len(zigzag(e.expires_at_s)));
    let count = var_len(cells.len() as u64);
    let cells: usize = cells
        .map(|(id, value)| {
            let tagged = var_len(u64::from(id) << 1 | u64::from(value.len() == 8));
            tagged
                + match <[u8; 8]>::try_from(value) {
                    Ok(word) => var_len(u64::from_be_bytes(word)),
                    Err(_) => var_len(value.len() as u64) + value.len(),
                }
        })
        .sum();
    1 + 8 + expiry + clustering.encoded_len() + count + cells
}

fn encode<'c>(
    e: &mut Encoder,
    has_marker: bool,
    timestamp: i64,
    expiry: Option<Expiry>,
    clustering: Clustering,
    cells: impl ExactSizeIterator<Item = (u32, &'c [u8])>,
) {
    let flag = |set: bool, flag: u8| if set { flag } else { 0 };
    e.u8(flag(has_marker, HAS_MARKER) | flag(expiry.is_some(), EXPIRES) | flag(!clustering.is_none(), CLUSTERED));
    e.out.extend_from_slice(&timestamp.to_le_bytes());
    if let Some(expiry) = expiry {
        e.var_i64(i64::from(expiry.ttl_s));
        e.var_i64(expiry.expires_at_s);
    }
    clustering.encode(e);
    e.var_u64(cells.len() as u64);
    for (id, value) in cells {
        e.var_u64(u64::from(id) << 1 | u64::from(value.len() == 8));
        match <[u8; 8]>::try_from(value) {
            Ok(word) => e.var_u64(u64::from_be_bytes(word)),
            Err(_) => e.bytes(value),
        }
    }
}

/// A single row's cell value ([`SingleRow::of`] admits live atomic cells
/// only).
fn atomic_value(data: &ColumnData) -> &Bytes {
    match data {
        ColumnData::Atomic(Cell { value: CellValue::Live { value, .. }, .. }) => value,
        _ => unreachable!("SingleRow::of admits live atomic cells only"),
    }
}

/// The parts of an encoding every cell shares.
pub(crate) struct Header<'a> {
    pub(crate) has_marker: bool,
    pub(crate) timestamp: i64,
    pub(crate) expiry: Option<Expiry>,
    /// The clustering key's encoding and values as stored (empty: none),
    /// read by [`read_clustering`].
    pub(crate) clustering: &'a [u8],
    pub(crate) cells: u64,
}

#[inline]
pub(crate) fn read_header<'a>(d: &mut Decoder<'a>) -> Result<Header<'a>, DecodeError> {
    let flags = d.u8()?;
    let timestamp = i64::from_le_bytes(d.slice(8)?.try_into().map_err(|_| d.error("short timestamp"))?);
    let expiry = match flags & EXPIRES {
        0 => None,
        _ => Some(Expiry { ttl_s: d.var_i32()?, expires_at_s: d.var_i64()? }),
    };
    let clustering = match flags & CLUSTERED {
        0 => &[][..],
        _ => codec::skip_clustering(d)?,
    };
    Ok(Header { has_marker: flags & HAS_MARKER != 0, timestamp, expiry, clustering, cells: d.var_u64()? })
}

/// The key's encoding in a clustering section (empty for none).
fn clustering_key(section: &[u8]) -> Result<&[u8], DecodeError> {
    if section.is_empty() {
        return Ok(&[]);
    }
    let mut d = Decoder::new(section);
    let len = d.len()?;
    d.slice(len)
}

/// A clustering section [`codec::skip_clustering`] passed: the key's encoding
/// and the values, each as `bytes` makes it of its slice.
pub(crate) fn read_clustering<'a, T>(
    section: &'a [u8],
    bytes: impl Fn(&'a [u8]) -> T,
) -> Result<(T, Vec<T>), DecodeError> {
    if section.is_empty() {
        return Ok((bytes(&[]), Vec::new()));
    }
    read_clustering_at(&mut Decoder::new(section), bytes)
}

/// The clustering of the row `encoded` holds, read from where it lies in
/// one pass ([`read_header`] then [`read_clustering`] walk it twice).
pub(crate) fn clustering<'a, T>(encoded: &'a [u8], bytes: impl Fn(&'a [u8]) -> T) -> Result<(T, Vec<T>), DecodeError> {
    let mut d = Decoder::new(encoded);
    let flags = d.u8()?;
    d.slice(8)?;
    if flags & EXPIRES != 0 {
        d.var_i64()?;
        d.var_i64()?;
    }
    match flags & CLUSTERED {
        0 => Ok((bytes(&[]), Vec::new())),
        _ => read_clustering_at(&mut d, bytes),
    }
}

/// The key's encoding and values of a clustering at `d`.
fn read_clustering_at<'a, T>(d: &mut Decoder<'a>, bytes: impl Fn(&'a [u8]) -> T) -> Result<(T, Vec<T>), DecodeError> {
    let len = d.len()?;
    let key = bytes(d.slice(len)?);
    let count = d.var_u64()?;
    let mut values = Vec::with_capacity(count.min(d.remaining() as u64) as usize);
    for _ in 0..count {
        let len = d.len()?;
        values.push(bytes(d.slice(len)?));
    }
    Ok((key, values))
}

/// The timestamp every part of the encoded row shares.
pub(crate) fn timestamp(encoded: &[u8]) -> Result<i64, DecodeError> {
    Ok(read_header(&mut Decoder::new(encoded))?.timestamp)
}

/// A cell's value as encoded: an 8-byte value as its (big-endian) word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    Word(u64),
    Bytes(&'a [u8]),
}

/// The next cell's column id and value.
#[inline]
pub(crate) fn read_cell<'a>(d: &mut Decoder<'a>) -> Result<(u32, Value<'a>), DecodeError> {
    let tagged = d.var_u64()?;
    let value = match tagged & 1 {
        1 => Value::Word(d.var_u64()?),
        _ => {
            let len = d.len()?;
            Value::Bytes(d.slice(len)?)
        }
    };
    let id = u32::try_from(tagged >> 1).map_err(|_| d.error("column id exceeds 32 bits"))?;
    Ok((id, value))
}

impl SingleRow<'_> {
    /// Whether this row, merged into the single row `encoded` holds, wins
    /// every part of it, so the merge is this row alone: it is newer and
    /// has a marker and a cell wherever the other has one (a memcached
    /// `set` over an item, an INSERT over the same row).
    pub(crate) fn supersedes(&self, encoded: &[u8]) -> Result<bool, DecodeError> {
        let has_cell = |id| self.row.columns.contains_key(&id);
        supersedes(encoded, self.timestamp, self.row.marker.is_some(), self.key, has_cell)
    }
}

/// Whether a row of `timestamp` at clustering key `key`, with a marker or
/// not and the cells `has_cell` names, wins every part of the single row
/// `encoded` holds (which must be at the same key).
fn supersedes(
    encoded: &[u8],
    timestamp: i64,
    has_marker: bool,
    key: &[u8],
    has_cell: impl Fn(u32) -> bool,
) -> Result<bool, DecodeError> {
    let mut d = Decoder::new(encoded);
    let header = read_header(&mut d)?;
    if header.timestamp >= timestamp || (header.has_marker && !has_marker) {
        return Ok(false);
    }
    if clustering_key(header.clustering)? != key {
        return Ok(false);
    }
    for _ in 0..header.cells {
        if !has_cell(read_cell(&mut d)?.0) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The compact encoding of the partition an SSTable (or the commitlog)
/// stores as `raw` ([`codec::encode_partition`]'s encoding), written from
/// those bytes without decoding a `Partition`: what [`SingleRow::of`] and
/// [`SingleRow::encode`] make of the decoded partition. `None` where that
/// partition is not a single row (or the bytes are malformed).
pub(crate) fn from_stored(raw: &[u8]) -> Option<Vec<u8>> {
    let row = codec::plain_row(raw)?;
    let mut parts = row.marker.iter().map(|m| (m.timestamp, m.expiry)).chain(row.cells.iter().map(|c| (c.2, c.3)));
    let (timestamp, expiry) = parts.next()?;
    // `SingleRow::of` takes i64::MIN for a part that is not a live cell.
    if timestamp == i64::MIN || !parts.all(|part| part == (timestamp, expiry)) {
        return None;
    }
    let cells = || row.cells.iter().map(|c| (c.0, c.1));
    let clustering = Clustering::Encoded(row.clustering);
    let mut out = Vec::with_capacity(encoded_len(expiry, clustering, cells()));
    encode(&mut Encoder { out: &mut out }, row.marker.is_some(), timestamp, expiry, clustering, cells());
    Some(out)
}

/// The partition [`SingleRow::encode`] wrote, its values copied out.
pub(crate) fn decode(d: &mut Decoder) -> Result<Partition, DecodeError> {
    decode_with(d, Bytes::copy_from_slice)
}

/// The partition [`SingleRow::encode`] wrote into `encoded`, its values
/// slices of `encoded` rather than copies: a read of a large item shares
/// its bytes, as a read of a general partition shares its `Rc`.
pub(crate) fn decode_shared(encoded: &Bytes) -> Result<Partition, DecodeError> {
    decode_with(&mut Decoder::new(encoded), |value| encoded.slice_ref(value))
}

fn decode_with(d: &mut Decoder, value_bytes: impl Fn(&[u8]) -> Bytes) -> Result<Partition, DecodeError> {
    let Header { has_marker, timestamp, expiry, clustering, cells } = read_header(d)?;
    let (key, clustering) = read_clustering(clustering, &value_bytes)?;
    let mut row =
        Row { marker: has_marker.then_some(RowMarker { timestamp, expiry }), deletion: None, columns: BTreeMap::new() };
    for _ in 0..cells {
        let (id, value) = read_cell(d)?;
        let value = match value {
            Value::Word(word) => Bytes::copy_from_slice(&word.to_be_bytes()),
            Value::Bytes(bytes) => value_bytes(bytes),
        };
        row.columns.insert(id, ColumnData::Atomic(Cell { timestamp, value: CellValue::Live { value, expiry } }));
    }
    let mut p = Partition::default();
    p.rows.insert(key, ClusteredRow { clustering, row });
    Ok(p)
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::codec::encode_partition;
    use crate::found::Found;
    use crate::partition::{Collection, RangeTombstone, Tombstone};

    /// A partition near a single row: one, or one broken in one of the
    /// ways that make it general.
    fn near_single_row(rng: &mut impl Rng) -> Partition {
        let timestamp = rng.gen_range(-3..3i64) * 1_000_000_000_000;
        let expiry = rng.gen_bool(0.3).then(|| Expiry { ttl_s: rng.gen_range(1..100), expires_at_s: 1_700_000_000 });
        let mut row = Row {
            marker: rng.gen_bool(0.6).then_some(RowMarker { timestamp, expiry }),
            deletion: None,
            columns: BTreeMap::new(),
        };
        for _ in 0..rng.gen_range(0..4) {
            let len = *[0usize, 1, 8, 100, 1024].get(rng.gen_range(0..5)).expect("in range");
            let value = Bytes::from((0..len).map(|_| rng.gen()).collect::<Vec<u8>>());
            row.columns.insert(rng.gen_range(0..200), ColumnData::Atomic(Cell::live(timestamp, value, expiry)));
        }
        let mut key = Bytes::new();
        let mut p = Partition::default();
        match rng.gen_range(0..12) {
            0 => key = Bytes::from_static(b"ck"),
            1 => p.tombstone = Some(Tombstone { timestamp: 1, deletion_time_s: 2 }),
            2 => {
                p.static_row.columns.insert(1, ColumnData::Atomic(Cell::live(timestamp, Bytes::new(), None)));
            }
            3 => p.range_tombstones.push(RangeTombstone {
                range: crate::partition::ClusteringRange::all(),
                tombstone: Tombstone { timestamp: 1, deletion_time_s: 2 },
            }),
            4 => row.deletion = Some(Tombstone { timestamp: 1, deletion_time_s: 2 }),
            5 => {
                row.columns.insert(500, ColumnData::Atomic(Cell::dead(timestamp, 3)));
            }
            6 => {
                row.columns.insert(501, ColumnData::Atomic(Cell::live(timestamp + 1, Bytes::new(), expiry)));
            }
            7 => {
                row.columns.insert(502, ColumnData::Collection(Collection { tombstone: None, cells: BTreeMap::new() }));
            }
            8 => {
                row.columns.insert(503, ColumnData::Atomic(Cell::counter_delta(timestamp, 5)));
            }
            9 => {
                let second = ClusteredRow { clustering: vec![Bytes::from_static(b"x")], row: row.clone() };
                p.rows.insert(Bytes::from_static(b"x"), second);
            }
            _ => {}
        }
        p.rows.insert(key.clone(), ClusteredRow { clustering: if key.is_empty() { vec![] } else { vec![key] }, row });
        p
    }

    /// The compact bytes written straight from a stored encoding are
    /// those of the decoded partition, and a single row is found where
    /// `SingleRow::of` sees one (seeded: `SHOAL_MODEL_SEED`).
    #[test]
    fn a_stored_single_row_reads_as_its_decoded_partition_would_encode() {
        let seed = std::env::var("SHOAL_MODEL_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(29);
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let (mut rows, mut general) = (0, 0);
        for _ in 0..3_000 {
            let p = near_single_row(&mut rng);
            let mut stored = Vec::new();
            encode_partition(&mut Encoder { out: &mut stored }, &p);
            let expected = SingleRow::of(&p).map(|row| {
                let mut out = Vec::new();
                row.encode(&mut Encoder { out: &mut out });
                out
            });
            assert_eq!(from_stored(&stored), expected, "seed {seed}: {p:?}");
            let found = Found::decode_stored(&stored).expect("a partition's encoding decodes");
            match &found {
                Found::Row(row) => {
                    rows += 1;
                    // Read in one pass from the compact bytes.
                    let (key, clustered) = p.rows.iter().next().expect("a single row");
                    assert_eq!(row.clustering(), (key.clone(), clustered.clustering.clone()), "seed {seed}");
                }
                Found::Partition(_) => general += 1,
            }
            assert_eq!(*found.into_partition(), p, "seed {seed}");
        }
        assert!(rows > 300 && general > 300, "both kinds drawn: {rows} single rows, {general} general");
    }

    #[test]
    fn damaged_stored_bytes_fail_as_the_general_decoder_fails() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..200 {
            let p = near_single_row(&mut rng);
            let mut stored = Vec::new();
            encode_partition(&mut Encoder { out: &mut stored }, &p);
            for cut in 0..stored.len() {
                let decoded = codec::decode_partition(&mut Decoder::new(&stored[..cut]));
                let found = Found::decode_stored(&stored[..cut]);
                assert_eq!(found.is_ok(), decoded.is_ok(), "cut at {cut} of {p:?}");
            }
            let at = rng.gen_range(0..stored.len());
            stored[at] ^= 1 << rng.gen_range(0..8);
            let decoded = codec::decode_partition(&mut Decoder::new(&stored));
            match Found::decode_stored(&stored) {
                Ok(found) => assert_eq!(Ok(&*found.into_partition()), decoded.as_ref()),
                Err(e) => assert_eq!(Err(e), decoded),
            }
        }
    }
}
