//! What a read of one whole partition found, shared with where it lives
//! instead of decoded into an owned [`Partition`]: a single row in the
//! compact layout of [`crate::single_row`] (a memtable's compact slot, a
//! row cache entry), or a partition in the general form.
//!
//! A memcached hit or a key-value point read wants one row's cells; the
//! memtable and the row cache hold such a row as compact bytes. Decoding
//! them into a `Partition` (a row map, a column map, a buffer per 8-byte
//! value) cost more than the rest of a hit together, so a read of a single
//! source hands the bytes on ([`SharedRow`], a `Bytes`: a reference count,
//! no copy, for a memtable's slot; one copy of the entry for the row
//! cache, whose segments move) and the reader takes the cells it needs
//! from them, values as slices. Only a read that must merge two sources
//! decodes them ([`Found::into_partition`]).
//!
//! A read that decides at once and keeps nothing (a memcached
//! read-modify-write) borrows instead ([`FoundRef`], [`RowRef`]): not even
//! a reference count, whose first increment on a memtable slot allocates
//! (a `Bytes` made from a vector allocates its shared header then); it
//! shares a value only where it keeps it ([`RowRef::share`]).

use std::rc::Rc;

use bytes::Bytes;

use crate::codec::{self, DecodeError, Decoder};
use crate::partition::{Expiry, Partition, Tombstone};
use crate::single_row::{self, Value};

/// A partition as a read found it.
#[derive(Debug, Clone)]
pub enum Found {
    Row(SharedRow),
    Partition(Rc<Partition>),
}

impl Found {
    /// What a read finds in a partition's stored encoding (an SSTable's:
    /// `codec::encode_partition`'s): a single row as its compact bytes,
    /// written from the stored ones without building a `Partition`
    /// (`single_row::from_stored`), anything else decoded. Fails exactly
    /// where `codec::decode_partition` fails, and finds the partition it
    /// decodes.
    pub fn decode_stored(raw: &[u8]) -> Result<Found, DecodeError> {
        match single_row::from_stored(raw) {
            Some(row) => Ok(Found::Row(SharedRow::new(Bytes::from(row)))),
            None => codec::decode_partition(&mut Decoder::new(raw)).map(|p| Found::Partition(Rc::new(p))),
        }
    }

    /// Borrowed, as [`FoundRef`].
    pub fn as_found_ref(&self) -> FoundRef<'_> {
        match self {
            Found::Row(row) => FoundRef::Row(RowRef { bytes: &row.bytes }),
            Found::Partition(partition) => FoundRef::Partition(partition),
        }
    }

    /// As a partition, decoding a single row (its values stay slices of
    /// the shared bytes).
    pub fn into_partition(self) -> Rc<Partition> {
        match self {
            Found::Row(row) => Rc::new(row.to_partition()),
            Found::Partition(partition) => partition,
        }
    }
}

/// A partition as memory holds it, borrowed (module doc).
#[derive(Debug, Clone, Copy)]
pub enum FoundRef<'a> {
    Row(RowRef<'a>),
    Partition(&'a Partition),
    /// A partition tombstone and nothing else (a deleted memcached item).
    Deleted(Tombstone),
}

/// A single-row partition in [`single_row`]'s encoding, borrowed.
#[derive(Debug, Clone, Copy)]
pub struct RowRef<'a> {
    /// As [`SharedRow`]'s.
    bytes: &'a Bytes,
}

impl<'a> RowRef<'a> {
    /// `bytes` must be an encoding `single_row` wrote.
    pub(crate) fn new(bytes: &'a Bytes) -> RowRef<'a> {
        RowRef { bytes }
    }

    /// The row's header, and its cells (column id and value, borrowed) in
    /// column order.
    pub fn read(self) -> (RowHeader, impl Iterator<Item = (u32, Value<'a>)>) {
        let mut d = Decoder::new(self.bytes);
        let header = single_row::read_header(&mut d).unwrap_or_else(|e| corrupt(e));
        let row = RowHeader { has_marker: header.has_marker, timestamp: header.timestamp, expiry: header.expiry };
        let cells = (0..header.cells).map(move |_| single_row::read_cell(&mut d).unwrap_or_else(|e| corrupt(e)));
        (row, cells)
    }

    /// `value`, a value [`RowRef::read`] gave, as shared bytes: the
    /// row's reference count, allocating its shared header on the first
    /// share of a memtable slot.
    pub fn share(self, value: &[u8]) -> Bytes {
        self.bytes.slice_ref(value)
    }
}

/// A single-row partition in [`single_row`]'s encoding, shared.
#[derive(Debug, Clone)]
pub struct SharedRow {
    /// Written by `single_row::SingleRow::encode` (the memtable's or the
    /// cache's own bytes): failing to read them is a bug, not bad input.
    bytes: Bytes,
}

/// What every cell of a [`SharedRow`] shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowHeader {
    /// Whether the row has a marker (an INSERT's, a memcached item's).
    pub has_marker: bool,
    pub timestamp: i64,
    pub expiry: Option<Expiry>,
}

impl RowHeader {
    /// Whether the row's cells are live at `now_s`.
    pub fn is_live(&self, now_s: i64) -> bool {
        self.expiry.is_none_or(|e| e.expires_at_s > now_s)
    }
}

/// A cell's value: an 8-byte value (a bigint) as its big-endian word, as
/// the layout keeps it, or a slice of the shared bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SharedValue {
    Word(u64),
    Bytes(Bytes),
}

impl SharedRow {
    /// `bytes` must be an encoding `single_row` wrote.
    pub(crate) fn new(bytes: Bytes) -> SharedRow {
        SharedRow { bytes }
    }

    /// The encoding's length.
    pub(crate) fn len(&self) -> usize {
        self.bytes.len()
    }

    /// The encoding.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The row's header, and its cells (column id and value) in column
    /// order.
    pub fn read(&self) -> (RowHeader, impl Iterator<Item = (u32, SharedValue)> + '_) {
        let row = RowRef { bytes: &self.bytes };
        let (header, cells) = row.read();
        let cells = cells.map(move |(id, value)| {
            let value = match value {
                Value::Word(word) => SharedValue::Word(word),
                Value::Bytes(slice) => SharedValue::Bytes(row.share(slice)),
            };
            (id, value)
        });
        (header, cells)
    }

    /// The row's clustering key (its order-preserving encoding) and its
    /// values, slices of the shared bytes: empty for a table without
    /// clustering columns.
    pub fn clustering(&self) -> (Bytes, Vec<Bytes>) {
        single_row::clustering(&self.bytes, |b| self.bytes.slice_ref(b)).unwrap_or_else(|e| corrupt(e))
    }

    /// The row as a partition, its values slices of the shared bytes.
    pub fn to_partition(&self) -> Partition {
        single_row::decode_shared(&self.bytes).unwrap_or_else(|e| corrupt(e))
    }
}

fn corrupt(e: DecodeError) -> ! {
    panic!("a shared single row does not decode (its bytes are the memtable's or the row cache's own): {e}")
}
