//! The partition index's entries ([`IndexEntry`]) and its pages as
//! stored, searched in place.
//!
//! A point read wants one entry of a page of up to
//! [`INDEX_PAGE_ENTRIES`](super::format::INDEX_PAGE_ENTRIES). Decoding every
//! entry (a key allocation each) to binary-search them cost more than the
//! rest of the lookup, and so did walking the page once to find where each
//! entry starts. So a page is stored (format version 2) as its entries
//! followed by their offsets and count:
//!
//! `[entry 0] .. [entry n-1] [u32 LE start of entry 0] .. [u32 LE start of entry n-1] [u32 LE n]`
//!
//! and kept in memory as read: a search reads the offset table and the
//! token and key of the entries it compares where they lie, and decodes
//! only the entry it finds, its key a view of the body. The body is also
//! what the shard's [`index_cache`](super::index_cache) holds: a few bytes
//! per entry where a decoded entry costs a hundred, so the same memory
//! caches several times the pages. A version-1 page (entries only) is
//! walked once when read and given the same layout in memory.
//!
//! Invariants, checked when a page is first read ([`IndexPage::open`]):
//! its offsets start at 0, increase and lie inside the entries; every
//! entry's token and key decode there, in strictly increasing order, and
//! the first is the one the summary names. Walking every entry for this
//! cost three times the page's checksum, so an SSTable remembers which of
//! its pages passed, and reads one again (an index-cache miss on a page
//! read before) with [`IndexPage::reopen`], which checks only the page's
//! length and count: its file is immutable, so bytes that match the
//! page's checksum again are the bytes checked before. A reopened page is
//! searched with its offsets checked where they are read, so even bytes
//! never checked cannot make it panic or read outside the page. The rest of an entry (its
//! place in the data, its clustering samples) is checked when the entry is
//! decoded ([`IndexPage::find`], [`IndexPage::entries`]): in the data
//! stream, samples in order and inside the partition. A page's checksum
//! (checked before) covers it all against damage on disk; these checks
//! keep a damaged page with a valid checksum (a bug, a file made by hand)
//! from panicking or reading out of place.

use bytes::Bytes;

use crate::codec::{Decoder, Encoder};
use crate::error::{StorageError, StorageResult};
use crate::partition::PartitionPosition;

/// Where one partition is in the data stream, with clustering samples
/// (first key of a run of rows, offset of the run from the partition start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    pub position: PartitionPosition,
    pub offset: u64,
    pub len: u64,
    pub samples: Vec<(Bytes, u64)>,
}

impl IndexEntry {
    pub(super) fn encode(&self, e: &mut Encoder) {
        e.out.extend_from_slice(&self.position.token.to_be_bytes());
        e.bytes(&self.position.key);
        e.var_u64(self.offset);
        e.var_u64(self.len);
        e.var_u64(self.samples.len() as u64);
        for (key, offset) in &self.samples {
            e.bytes(key);
            e.var_u64(*offset);
        }
    }
}

/// Bytes of one offset in a page's table, and of its entry count.
const OFFSET_BYTES: usize = 4;

/// Appends a page's offset table and entry count to its encoded entries
/// (`starts`: where each entry begins in `out`), completing a version-2
/// page body.
pub(super) fn finish_page(out: &mut Vec<u8>, starts: &[u32]) {
    out.reserve((starts.len() + 1) * OFFSET_BYTES);
    for start in starts {
        out.extend_from_slice(&start.to_le_bytes());
    }
    // A page holds at most INDEX_PAGE_ENTRIES entries: the count fits.
    out.extend_from_slice(&(starts.len() as u32).to_le_bytes());
}

/// One index page as stored in version 2: its encoded entries, their
/// offsets and count.
#[derive(Debug)]
pub struct IndexPage {
    body: Bytes,
    /// Where the offset table begins: the entries are `body[..entries_end]`.
    entries_end: usize,
    len: usize,
    /// The data stream's length, which every entry must lie inside.
    raw_len: u64,
}

/// An entry's fixed fields, read in place.
struct Head<'a> {
    token: i64,
    key: &'a [u8],
    offset: u64,
    len: u64,
}

/// Reads an entry's token and key at `d`.
fn decode_position<'a>(d: &mut Decoder<'a>) -> StorageResult<(i64, &'a [u8])> {
    let token = d.fixed_i64()?;
    let key_len = d.len()?;
    Ok((token, d.slice(key_len)?))
}

/// The token and key of the entry at the start of `bytes`, and the bytes
/// they take. What a search and the order check read of every entry they
/// touch: keys shorter than 128 bytes (one-byte lengths) are read without
/// the general decoder, which costs several times more per entry.
#[inline]
fn position_at(bytes: &[u8]) -> StorageResult<((i64, &[u8]), usize)> {
    if let Some((token, [len, rest @ ..])) = bytes.split_first_chunk::<8>() {
        if let Some(key) = rest.get(..usize::from(*len)).filter(|_| *len < 0x80) {
            return Ok(((i64::from_be_bytes(*token), key), 9 + key.len()));
        }
    }
    let mut d = Decoder::new(bytes);
    Ok((decode_position(&mut d)?, d.position()))
}

/// Reads the entry at `d`, handing each clustering sample to `sample`;
/// checks that the samples are in order and inside the partition.
fn decode_entry<'a>(d: &mut Decoder<'a>, sample: impl FnMut(&'a [u8], u64)) -> StorageResult<Head<'a>> {
    let (token, key) = decode_position(d)?;
    decode_place(d, token, key, sample)
}

/// [`decode_entry`] after the entry's token and key, read already.
fn decode_place<'a>(
    d: &mut Decoder<'a>,
    token: i64,
    key: &'a [u8],
    mut sample: impl FnMut(&'a [u8], u64),
) -> StorageResult<Head<'a>> {
    let (offset, len) = (d.var_u64()?, d.var_u64()?);
    let n = d.var_u64()?;
    let mut last = 0;
    for _ in 0..n {
        let key_len = d.len()?;
        let key = d.slice(key_len)?;
        let at = d.var_u64()?;
        if at >= len {
            return Err(StorageError::corrupt("clustering sample past its partition"));
        }
        // Runs of rows lie between samples: they must be in order.
        if at <= last {
            return Err(StorageError::corrupt("clustering samples out of order"));
        }
        last = at;
        sample(key, at);
    }
    Ok(Head { token, key, offset, len })
}

/// Checks that positions come in strictly increasing order from the one
/// the summary names for the page.
struct Order<'a> {
    first: &'a PartitionPosition,
    previous: Option<(i64, &'a [u8])>,
}

impl<'a> Order<'a> {
    fn next(&mut self, position: (i64, &'a [u8])) -> StorageResult<()> {
        match self.previous {
            // The summary names a page by its first partition.
            None if position != (self.first.token, &self.first.key[..]) => {
                return Err(StorageError::corrupt("index page does not start where the summary says"));
            }
            Some(last) if position <= last => return Err(StorageError::corrupt("index entries out of order")),
            _ => {}
        }
        self.previous = Some(position);
        Ok(())
    }
}

impl IndexPage {
    /// Opens a page body of format `version` (see the module's
    /// invariants), `first` the position the summary names for it and
    /// `raw_len` the data stream's length.
    pub fn open(body: &[u8], version: u16, first: &PartitionPosition, raw_len: u64) -> StorageResult<IndexPage> {
        let page = Self::reopen(body, version, raw_len)?;
        let mut order = Order { first, previous: None };
        let mut next_start = 0;
        let table = &page.body[page.entries_end..page.entries_end + page.len * OFFSET_BYTES];
        for (i, start) in table.chunks_exact(OFFSET_BYTES).enumerate() {
            let start = u32::from_le_bytes([start[0], start[1], start[2], start[3]]) as usize;
            // Entries are laid end to end from the body's start.
            if (i == 0 && start != 0) || start < next_start || start >= page.entries_end {
                return Err(StorageError::corrupt("index page offsets out of order or outside its entries"));
            }
            let (position, bytes) = position_at(&page.body[start..page.entries_end])?;
            order.next(position)?;
            next_start = start + bytes;
        }
        Ok(page)
    }

    /// A page body [`IndexPage::open`] accepted before (the same bytes,
    /// read again), opened without walking its entries: only its length
    /// and entry count are checked.
    pub fn reopen(body: &[u8], version: u16, raw_len: u64) -> StorageResult<IndexPage> {
        let body = if version == 1 { Self::with_offsets(body)? } else { Bytes::copy_from_slice(body) };
        let [a, b, c, d] = body.len().checked_sub(OFFSET_BYTES).map(|at| &body[at..]).unwrap_or_default() else {
            return Err(StorageError::corrupt("index page shorter than its entry count"));
        };
        let len = u32::from_le_bytes([*a, *b, *c, *d]) as usize;
        let Some(entries_end) = (len + 1).checked_mul(OFFSET_BYTES).and_then(|t| body.len().checked_sub(t)) else {
            return Err(StorageError::corrupt("index page shorter than its offset table"));
        };
        if len == 0 {
            return Err(StorageError::corrupt("index page without entries"));
        }
        Ok(IndexPage { body, entries_end, len, raw_len })
    }

    /// A version-1 body (entries only) walked once, with its offset table
    /// and count appended: the version-2 layout.
    fn with_offsets(entries: &[u8]) -> StorageResult<Bytes> {
        let mut starts = Vec::new();
        let mut d = Decoder::new(entries);
        while !d.is_empty() {
            // A page is far smaller than 4 GiB: its offsets are u32s.
            starts.push(d.position() as u32);
            decode_entry(&mut d, |_, _| {})?;
        }
        let mut body = Vec::with_capacity(entries.len() + (starts.len() + 1) * OFFSET_BYTES);
        body.extend_from_slice(entries);
        finish_page(&mut body, &starts);
        Ok(Bytes::from(body))
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Heap bytes the page holds: its body.
    pub fn heap_bytes(&self) -> usize {
        self.body.len()
    }

    /// The bytes from where entry `i` starts to the end of the entries
    /// (its start checked here too: a reopened page's were not walked).
    fn entry_bytes(&self, i: usize) -> StorageResult<&[u8]> {
        let at = self.entries_end + i * OFFSET_BYTES;
        let b = &self.body[at..at + OFFSET_BYTES];
        let start = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
        self.body
            .get(start..self.entries_end)
            .ok_or_else(|| StorageError::corrupt("index page offset outside its entries"))
    }

    /// Entry `i`, decoded and checked: its keys are views of the page's body.
    fn entry(&self, i: usize) -> StorageResult<IndexEntry> {
        let from = self.entry_bytes(i)?;
        let ((token, key), read) = position_at(from)?;
        self.entry_after(&from[read..], token, key)
    }

    /// The entry of `token` and `key` (read by [`position_at`]), the rest of
    /// it at the start of `rest`.
    fn entry_after(&self, rest: &[u8], token: i64, key: &[u8]) -> StorageResult<IndexEntry> {
        let mut samples = Vec::new();
        let mut d = Decoder::new(rest);
        let head = decode_place(&mut d, token, key, |key, at| samples.push((self.body.slice_ref(key), at)))?;
        if head.offset.checked_add(head.len).is_none_or(|end| end > self.raw_len) {
            return Err(StorageError::corrupt("index entry points past the data"));
        }
        let position = PartitionPosition { token: head.token, key: self.body.slice_ref(head.key) };
        Ok(IndexEntry { position, offset: head.offset, len: head.len, samples })
    }

    /// The entry of the partition at `position`, if the page has it: a
    /// binary search reading only the compared entries' tokens and keys.
    pub fn find(&self, position: &PartitionPosition) -> StorageResult<Option<IndexEntry>> {
        let wanted = (position.token, &position.key[..]);
        let (mut low, mut high) = (0, self.len);
        while low < high {
            let mid = low + (high - low) / 2;
            let from = self.entry_bytes(mid)?;
            let (position, read) = position_at(from)?;
            match position.cmp(&wanted) {
                std::cmp::Ordering::Less => low = mid + 1,
                std::cmp::Ordering::Greater => high = mid,
                // The rest of the entry follows what the search read.
                std::cmp::Ordering::Equal => return self.entry_after(&from[read..], position.0, position.1).map(Some),
            }
        }
        Ok(None)
    }

    /// Every entry, decoded in order (a scan's).
    pub fn entries(&self) -> StorageResult<Vec<IndexEntry>> {
        (0..self.len).map(|i| self.entry(i)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(i: u32, samples: usize) -> IndexEntry {
        IndexEntry {
            position: PartitionPosition { token: i64::from(i / 2), key: Bytes::from(i.to_be_bytes().to_vec()) },
            offset: u64::from(i) * 100,
            len: 100,
            samples: (1..=samples).map(|s| (Bytes::from(vec![s as u8; s]), s as u64 * 10)).collect(),
        }
    }

    /// A page body of `entries`: version 1's (entries only) or version 2's.
    fn encode(entries: &[IndexEntry], version: u16) -> Vec<u8> {
        let mut out = Vec::new();
        let mut starts = Vec::new();
        for e in entries {
            starts.push(out.len() as u32);
            e.encode(&mut Encoder { out: &mut out });
        }
        if version == 2 {
            finish_page(&mut out, &starts);
        }
        out
    }

    #[test]
    fn find_returns_each_entry_and_nothing_between_in_both_versions() {
        // Two partitions per token: keys order entries of one token.
        let entries: Vec<IndexEntry> = (0..50).map(|i| entry(i * 2, (i % 3) as usize)).collect();
        for version in [1, 2] {
            let page =
                IndexPage::open(&encode(&entries, version), version, &entries[0].position, u64::MAX).expect("valid");
            assert_eq!(page.len(), 50);
            for (i, e) in entries.iter().enumerate() {
                assert_eq!(page.find(&e.position).expect("find").as_ref(), Some(e), "entry {i}");
                let absent = entry(i as u32 * 2 + 1, 0).position;
                assert_eq!(page.find(&absent).expect("find"), None);
            }
            assert_eq!(page.entries().expect("entries"), entries);
            // Both versions are held as version 2 lays them out.
            assert_eq!(page.heap_bytes(), encode(&entries, 2).len(), "version {version}");
        }
    }

    #[test]
    fn keys_of_any_length_are_found() {
        // Keys of 127 bytes and less have one-byte lengths (read on a fast
        // path); longer ones are read by the general decoder.
        let entries: Vec<IndexEntry> = [1, 127, 128, 300, 20_000]
            .iter()
            .enumerate()
            .map(|(i, &len)| IndexEntry {
                position: PartitionPosition { token: i as i64, key: Bytes::from(vec![7; len]) },
                offset: 0,
                len: 1,
                samples: Vec::new(),
            })
            .collect();
        let page = IndexPage::open(&encode(&entries, 2), 2, &entries[0].position, 1).expect("valid");
        for e in &entries {
            assert_eq!(page.find(&e.position).expect("find").as_ref(), Some(e));
            let shorter = PartitionPosition { token: e.position.token, key: e.position.key.slice(1..) };
            assert_eq!(page.find(&shorter).expect("find"), None);
        }
    }

    #[test]
    fn damaged_pages_are_refused() {
        let entries: Vec<IndexEntry> = (0..4).map(|i| entry(i, 1)).collect();
        let first = &entries[0].position;
        for version in [1, 2] {
            let open = |entries: &[IndexEntry], first: &PartitionPosition| {
                IndexPage::open(&encode(entries, version), version, first, u64::MAX)
            };
            let refused = |entries: &[IndexEntry], first: &PartitionPosition| {
                open(entries, first).expect_err("refused").to_string()
            };
            assert!(refused(&entries, &entries[1].position).contains("summary"));
            let mut swapped = entries.clone();
            swapped.swap(1, 2);
            assert!(refused(&swapped, first).contains("out of order"));
            // The rest of an entry is checked when it is decoded.
            let page = IndexPage::open(&encode(&entries, version), version, first, 350).expect("heads are in order");
            assert!(page.find(&entries[3].position).expect_err("refused").to_string().contains("past the data"));
            assert_eq!(page.find(&entries[2].position).expect("in the data").as_ref(), Some(&entries[2]));
            let mut sampled = entries.clone();
            sampled[2].samples = vec![(Bytes::new(), 100)];
            // Version 1 decodes every entry to find where they start.
            let message = match open(&sampled, first) {
                Ok(page) if version == 2 => page.entries().expect_err("refused").to_string(),
                Ok(_) => panic!("a version-1 page is walked whole"),
                Err(e) => e.to_string(),
            };
            assert!(message.contains("past its partition"), "{message}");
            let body = encode(&entries, version);
            for cut in [0, 3, 10, body.len() - 1] {
                assert!(IndexPage::open(&body[..cut], version, first, u64::MAX).is_err(), "cut at {cut}");
            }
        }
    }

    #[test]
    fn offset_tables_that_do_not_fit_the_entries_are_refused() {
        let entries: Vec<IndexEntry> = (0..4).map(|i| entry(i, 1)).collect();
        let first = &entries[0].position;
        let body = encode(&entries, 2);
        let table = body.len() - 5 * OFFSET_BYTES;
        let with = |at: usize, value: u32| {
            let mut body = body.clone();
            body[at..at + OFFSET_BYTES].copy_from_slice(&value.to_le_bytes());
            IndexPage::open(&body, 2, first, u64::MAX).map(|_| ()).expect_err("refused").to_string()
        };
        let count = body.len() - OFFSET_BYTES;
        assert!(with(count, 0).contains("without entries"));
        assert!(with(count, 1_000).contains("offset table"));
        assert!(with(count, u32::MAX).contains("offset table"));
        // Entry 0 starting elsewhere than at 0, entry 2 inside entry 1,
        // entry 3 past the entries.
        assert!(with(table, 1).contains("offsets"));
        let second = u32::from_le_bytes(body[table + 4..table + 8].try_into().expect("4 bytes"));
        assert!(with(table + 8, second + 1).contains("offsets"));
        assert!(with(table + 12, table as u32).contains("offsets"));
        // A count one short reads the table from its second offset.
        assert!(with(count, 3).contains("offsets"));
        // Reopened (not walked), such offsets fail the searches that read
        // them, without a panic.
        let mut outside = body.clone();
        outside[table + 12..table + 16].copy_from_slice(&u32::MAX.to_le_bytes());
        let page = IndexPage::reopen(&outside, 2, u64::MAX).expect("length and count fit");
        assert!(page.find(&entries[3].position).expect_err("refused").to_string().contains("outside its entries"));
        assert!(page.entries().is_err());
    }

    #[test]
    fn a_reopened_page_finds_what_the_opened_one_finds() {
        let entries: Vec<IndexEntry> = (0..40).map(|i| entry(i * 2, (i % 3) as usize)).collect();
        for version in [1, 2] {
            let body = encode(&entries, version);
            let page = IndexPage::reopen(&body, version, u64::MAX).expect("valid");
            assert_eq!(page.len(), entries.len());
            for (i, e) in entries.iter().enumerate() {
                assert_eq!(page.find(&e.position).expect("find").as_ref(), Some(e), "entry {i}");
                assert_eq!(page.find(&entry(i as u32 * 2 + 1, 0).position).expect("find"), None);
            }
            assert_eq!(page.entries().expect("entries"), entries);
        }
    }
}
