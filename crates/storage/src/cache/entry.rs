//! The bytes of one cached partition: its key, then its data in one of
//! three forms.
//!
//! - ABSENT: the SSTables hold nothing for the key (a negative entry, so
//!   repeated misses touch no Bloom filter, index or disk).
//! - SINGLE_ROW: a single-row partition in the compact layout of
//!   [`crate::single_row`] (key-value tables, memcached items).
//! - GENERAL: anything else, in the SSTable partition encoding.
//!
//! The bytes are the cache's own, written by [`encode`]: a decode failure
//! is a bug in this file, not bad input, so it panics.

use std::rc::Rc;

use bytes::Bytes;

use crate::codec::{self, Decoder, Encoder};
use crate::found::{Found, SharedRow};
use crate::partition::Partition;
use crate::single_row::{self, SingleRow};

const ABSENT: u8 = 0;
const SINGLE_ROW: u8 = 1;
const GENERAL: u8 = 2;

/// Appends the entry for the partition at `key` (`None`: known absent).
pub(crate) fn encode(out: &mut Vec<u8>, key: &[u8], partition: Option<&Partition>) {
    let mut e = Encoder { out };
    e.bytes(key);
    let Some(p) = partition else {
        e.u8(ABSENT);
        return;
    };
    let Some(row) = SingleRow::of(p) else {
        e.u8(GENERAL);
        codec::encode_partition(&mut e, p);
        return;
    };
    e.u8(SINGLE_ROW);
    row.encode(&mut e);
}

/// [`encode`] for what a read found: a single row's compact bytes copied
/// as they are, no partition decoded or encoded.
pub(crate) fn encode_found(out: &mut Vec<u8>, key: &[u8], found: Option<&Found>) {
    match found {
        Some(Found::Row(row)) => {
            let mut e = Encoder { out };
            e.bytes(key);
            e.u8(SINGLE_ROW);
            e.out.extend_from_slice(row.as_bytes());
        }
        Some(Found::Partition(p)) => encode(out, key, Some(p)),
        None => encode(out, key, None),
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

/// What an entry holds, for a read (`crate::found`): a single row as a
/// copy of its bytes made by `copy` (the segments move them), anything
/// else decoded; `None` for a negative entry.
pub(crate) fn found(bytes: &[u8], copy: impl FnOnce(&[u8]) -> Bytes) -> Option<Found> {
    let mut d = split_key(bytes).1;
    let decoded = (|| match d.u8()? {
        ABSENT => Ok(None),
        GENERAL => codec::decode_partition(&mut d).map(|p| Some(Found::Partition(Rc::new(p)))),
        SINGLE_ROW => Ok(Some(Found::Row(SharedRow::new(copy(&bytes[d.position()..]))))),
        _ => Err(d.error("unknown cache entry kind")),
    })();
    decoded.unwrap_or_else(|e| corrupt(e))
}

/// The partition an entry holds; `None` for a negative entry.
pub(crate) fn decode(bytes: &[u8]) -> Option<Partition> {
    let mut d = split_key(bytes).1;
    let decoded = (|| match d.u8()? {
        ABSENT => Ok(None),
        GENERAL => codec::decode_partition(&mut d).map(Some),
        SINGLE_ROW => single_row::decode(&mut d).map(Some),
        _ => Err(d.error("unknown cache entry kind")),
    })();
    decoded.unwrap_or_else(|e| corrupt(e))
}

fn corrupt(e: codec::DecodeError) -> ! {
    panic!("row cache entry does not decode (a bug in cache::entry): {e}")
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::partition::{Cell, CellValue, ClusteredRow, ColumnData, Expiry, Row, RowMarker, Tombstone};

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
