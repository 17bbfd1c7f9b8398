//! The bytes of one cached partition: its key, then its data in one of
//! three forms.
//!
//! - ABSENT: the SSTables hold nothing for the key (a negative entry, so
//!   repeated misses touch no Bloom filter, index or disk).
//! - SINGLE_ROW, the compact layout of a partition that is one row of a
//!   table without clustering columns (key-value tables, memcached items)
//!   whose cells share one timestamp and expiry, as a single INSERT or
//!   memcached `set` writes them: one timestamp and expiry for all, then
//!   each cell as column id and value, no row or clustering machinery. An
//!   8-byte value (bigint, memcached's flags and CAS) is stored as a varint.
//! - GENERAL: anything else, in the SSTable partition encoding.
//!
//! The bytes are the cache's own, written by [`encode`]: a decode failure
//! is a bug in this file, not bad input, so it panics.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::codec::{self, Decoder, Encoder};
use crate::partition::{Cell, CellValue, ClusteredRow, ColumnData, Expiry, Partition, Row, RowMarker};

const ABSENT: u8 = 0;
const SINGLE_ROW: u8 = 1;
const GENERAL: u8 = 2;

const HAS_MARKER: u8 = 1;
const EXPIRES: u8 = 2;

/// The one row of a single-row partition, if `p` is one the compact layout
/// can hold, with the timestamp and expiry all its parts share.
fn single_row(p: &Partition) -> Option<(&Row, i64, Option<Expiry>)> {
    if p.tombstone.is_some() || !p.static_row.is_empty() || !p.range_tombstones.is_empty() || p.rows.len() != 1 {
        return None;
    }
    let (key, clustered) = p.rows.iter().next()?;
    let row = &clustered.row;
    if !key.is_empty() || !clustered.clustering.is_empty() || row.deletion.is_some() {
        return None;
    }
    let mut parts = row.marker.iter().map(|m| (m.timestamp, m.expiry)).chain(row.columns.values().map(|c| match c {
        ColumnData::Atomic(Cell { timestamp, value: CellValue::Live { expiry, .. } }) => (*timestamp, *expiry),
        // Never equal to a real part: the row takes the general layout.
        _ => (i64::MIN, None),
    }));
    let (timestamp, expiry) = parts.next()?;
    (timestamp != i64::MIN && parts.all(|part| part == (timestamp, expiry))).then_some((row, timestamp, expiry))
}

/// Appends the entry for the partition at `key` (`None`: known absent).
pub(crate) fn encode(out: &mut Vec<u8>, key: &[u8], partition: Option<&Partition>) {
    let mut e = Encoder { out };
    e.bytes(key);
    let Some(p) = partition else {
        e.u8(ABSENT);
        return;
    };
    let Some((row, timestamp, expiry)) = single_row(p) else {
        e.u8(GENERAL);
        codec::encode_partition(&mut e, p);
        return;
    };
    e.u8(SINGLE_ROW);
    e.u8(if row.marker.is_some() { HAS_MARKER } else { 0 } | if expiry.is_some() { EXPIRES } else { 0 });
    e.out.extend_from_slice(&timestamp.to_le_bytes());
    if let Some(expiry) = expiry {
        e.var_i64(i64::from(expiry.ttl_s));
        e.var_i64(expiry.expires_at_s);
    }
    e.var_u64(row.columns.len() as u64);
    for (id, data) in &row.columns {
        let ColumnData::Atomic(Cell { value: CellValue::Live { value, .. }, .. }) = data else {
            unreachable!("single_row admits live atomic cells only")
        };
        let fixed8 = value.len() == 8;
        e.var_u64(u64::from(*id) << 1 | u64::from(fixed8));
        match <[u8; 8]>::try_from(&value[..]) {
            Ok(word) => e.var_u64(u64::from_be_bytes(word)),
            Err(_) => e.bytes(value),
        }
    }
}

/// An entry's key, and a decoder at its kind byte.
fn split_key(bytes: &[u8]) -> (&[u8], Decoder<'_>) {
    let mut d = Decoder::new(bytes);
    // Invariant: the bytes were written by `encode` (module doc).
    #[allow(clippy::unwrap_used)]
    let len = d.len().unwrap();
    #[allow(clippy::unwrap_used)]
    let key = d.slice(len).unwrap();
    (key, d)
}

/// The key an entry's bytes belong to.
pub(crate) fn key(bytes: &[u8]) -> &[u8] {
    split_key(bytes).0
}

/// Whether the entry holds a partition (is not a negative entry).
pub(crate) fn holds_partition(bytes: &[u8]) -> bool {
    // Invariant: `encode` writes the kind right after the key.
    #[allow(clippy::unwrap_used)]
    let kind = split_key(bytes).1.u8().unwrap();
    kind != ABSENT
}

/// The partition an entry holds; `None` for a negative entry.
pub(crate) fn decode(bytes: &[u8]) -> Option<Partition> {
    let mut d = split_key(bytes).1;
    let decoded = (|| match d.u8()? {
        ABSENT => Ok(None),
        GENERAL => codec::decode_partition(&mut d).map(Some),
        SINGLE_ROW => decode_single_row(&mut d).map(Some),
        _ => Err(d.error("unknown cache entry kind")),
    })();
    match decoded {
        Ok(partition) => partition,
        Err(e) => panic!("row cache entry does not decode (a bug in cache::entry): {e}"),
    }
}

fn decode_single_row(d: &mut Decoder) -> Result<Partition, codec::DecodeError> {
    let flags = d.u8()?;
    let timestamp = i64::from_le_bytes(d.slice(8)?.try_into().map_err(|_| d.error("short timestamp"))?);
    let expiry = match flags & EXPIRES {
        0 => None,
        _ => Some(Expiry { ttl_s: d.var_i32()?, expires_at_s: d.var_i64()? }),
    };
    let mut row = Row {
        marker: (flags & HAS_MARKER != 0).then_some(RowMarker { timestamp, expiry }),
        deletion: None,
        columns: BTreeMap::new(),
    };
    for _ in 0..d.var_u64()? {
        let tagged = d.var_u64()?;
        let value = match tagged & 1 {
            1 => Bytes::copy_from_slice(&d.var_u64()?.to_be_bytes()),
            _ => d.bytes()?,
        };
        let id = u32::try_from(tagged >> 1).map_err(|_| d.error("column id exceeds 32 bits"))?;
        row.columns.insert(id, ColumnData::Atomic(Cell { timestamp, value: CellValue::Live { value, expiry } }));
    }
    let mut p = Partition::default();
    p.rows.insert(Bytes::new(), ClusteredRow { clustering: Vec::new(), row });
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partition::Tombstone;

    fn item(value: &[u8], flags: u64, expiry: Option<Expiry>) -> Partition {
        let cell = |v: Bytes| {
            ColumnData::Atomic(Cell { timestamp: 1_700_000_000_000_000, value: CellValue::Live { value: v, expiry } })
        };
        let mut row = Row { marker: Some(RowMarker { timestamp: 1_700_000_000_000_000, expiry }), ..Row::default() };
        row.columns.insert(1, cell(Bytes::copy_from_slice(value)));
        row.columns.insert(2, cell(Bytes::copy_from_slice(&flags.to_be_bytes())));
        row.columns.insert(3, cell(Bytes::from_static(b"abc")));
        let mut p = Partition::default();
        p.rows.insert(Bytes::new(), ClusteredRow { clustering: Vec::new(), row });
        p
    }

    fn round_trip(p: Option<&Partition>) -> usize {
        let mut out = Vec::new();
        encode(&mut out, b"the-key", p);
        assert_eq!(key(&out), b"the-key");
        assert_eq!(decode(&out).as_ref(), p);
        out.len()
    }

    #[test]
    fn single_rows_take_the_compact_layout_and_come_back_whole() {
        let plain = item(&[7u8; 1000], 0, None);
        let bytes = round_trip(Some(&plain));
        // Key (1 + 7), kind, flags, timestamp, count, then the value cell
        // (id, length, bytes), the 8-byte flags as a 1-byte varint, "abc".
        assert_eq!(bytes, 8 + 1 + 1 + 8 + 1 + (1 + 2 + 1000) + (1 + 1) + (1 + 1 + 3));
        round_trip(Some(&item(b"v", u64::MAX, Some(Expiry { ttl_s: 60, expires_at_s: 1_700_000_060 }))));
    }

    #[test]
    fn anything_else_takes_the_general_layout() {
        let mut deleted = item(b"v", 1, None);
        deleted.tombstone = Some(Tombstone { timestamp: 1, deletion_time_s: 2 });
        round_trip(Some(&deleted));
        let mut mixed = item(b"v", 1, None);
        let row = &mut mixed.rows.values_mut().next().expect("one row").row;
        row.columns.insert(4, ColumnData::Atomic(Cell::live(5, Bytes::from_static(b"older"), None)));
        let compact = {
            let mut out = Vec::new();
            encode(&mut out, b"k", Some(&item(b"v", 1, None)));
            out.len()
        };
        assert!(round_trip(Some(&mixed)) > compact);
        let mut clustered = Partition::default();
        clustered.rows.insert(Bytes::from_static(b"c1"), ClusteredRow::default());
        round_trip(Some(&clustered));
        round_trip(Some(&Partition::default()));
        round_trip(None);
    }
}
