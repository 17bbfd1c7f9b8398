//! The partition index's entries ([`IndexEntry`]) and its pages as
//! stored, searched in place.
//!
//! A point read wants one entry of a page of up to
//! [`INDEX_PAGE_ENTRIES`](super::format::INDEX_PAGE_ENTRIES). Decoding every
//! entry (a key allocation each) to binary-search them cost more than the
//! rest of the lookup, so a page keeps its encoded body and where each entry
//! starts: a search reads the token and key of the entries it compares
//! where they lie, and decodes only the entry it finds, its key a view of
//! the body. The body is also what the shard's
//! [`index_cache`](super::index_cache) holds: a few bytes per entry where a
//! decoded entry costs a hundred, so the same memory caches several times
//! the pages.
//!
//! Invariant: a page's entries were checked when it was built
//! ([`IndexPage::parse`]): each decodes, with samples in order and inside
//! its partition; they are sorted by position, the first is the one the
//! summary names; each points into the data stream.

use bytes::Bytes;

use super::format::INDEX_PAGE_ENTRIES;
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

/// One index page: its encoded entries and where each starts.
#[derive(Debug)]
pub struct IndexPage {
    body: Bytes,
    /// Offsets in `body` of the entries, in order.
    starts: Vec<u32>,
}

/// An entry's fixed fields, read in place.
struct Head<'a> {
    token: i64,
    key: &'a [u8],
    offset: u64,
    len: u64,
}

/// Reads the entry at `d`, handing each clustering sample to `sample`;
/// checks that the samples are in order and inside the partition.
fn decode_entry<'a>(d: &mut Decoder<'a>, mut sample: impl FnMut(&'a [u8], u64)) -> StorageResult<Head<'a>> {
    let token = d.fixed_i64()?;
    let key_len = d.len()?;
    let key = d.slice(key_len)?;
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

impl IndexPage {
    /// Checks the entries of `body` (see the module's invariant) against
    /// the page's `first` position and the data stream's `raw_len`, and
    /// notes where they start.
    pub fn parse(body: Bytes, first: &PartitionPosition, raw_len: u64) -> StorageResult<IndexPage> {
        let mut starts = Vec::with_capacity(INDEX_PAGE_ENTRIES);
        let mut d = Decoder::new(&body);
        let mut previous: Option<(i64, &[u8])> = None;
        while !d.is_empty() {
            let start = d.position();
            let head = decode_entry(&mut d, |_, _| {})?;
            if head.offset.checked_add(head.len).is_none_or(|end| end > raw_len) {
                return Err(StorageError::corrupt("index entry points past the data"));
            }
            let position = (head.token, head.key);
            match previous {
                // The summary names a page by its first partition.
                None if position != (first.token, &first.key[..]) => {
                    return Err(StorageError::corrupt("index page does not start where the summary says"));
                }
                Some(last) if position <= last => return Err(StorageError::corrupt("index entries out of order")),
                _ => {}
            }
            previous = Some(position);
            // A page is far smaller than 4 GiB: its length is a u32.
            starts.push(start as u32);
        }
        Ok(IndexPage { body, starts })
    }

    pub fn len(&self) -> usize {
        self.starts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// Heap bytes the page holds: its body and its entries' offsets.
    pub fn heap_bytes(&self) -> usize {
        self.body.len() + self.starts.capacity() * std::mem::size_of::<u32>()
    }

    /// Entry `i`, decoded: its keys are views of the page's body.
    fn entry(&self, i: usize) -> StorageResult<IndexEntry> {
        let mut d = Decoder::new(&self.body[self.starts[i] as usize..]);
        let mut samples = Vec::new();
        let head = decode_entry(&mut d, |key, at| samples.push((self.body.slice_ref(key), at)))?;
        let position = PartitionPosition { token: head.token, key: self.body.slice_ref(head.key) };
        Ok(IndexEntry { position, offset: head.offset, len: head.len, samples })
    }

    /// The entry of the partition at `position`, if the page has it: a
    /// binary search reading only the compared entries' tokens and keys.
    pub fn find(&self, position: &PartitionPosition) -> StorageResult<Option<IndexEntry>> {
        let wanted = (position.token, &position.key[..]);
        let (mut low, mut high) = (0, self.starts.len());
        while low < high {
            let mid = low + (high - low) / 2;
            let mut d = Decoder::new(&self.body[self.starts[mid] as usize..]);
            let token = d.fixed_i64()?;
            let key_len = d.len()?;
            match (token, d.slice(key_len)?).cmp(&wanted) {
                std::cmp::Ordering::Less => low = mid + 1,
                std::cmp::Ordering::Greater => high = mid,
                std::cmp::Ordering::Equal => return self.entry(mid).map(Some),
            }
        }
        Ok(None)
    }

    /// Every entry, decoded in order (a scan's).
    pub fn entries(&self) -> StorageResult<Vec<IndexEntry>> {
        (0..self.starts.len()).map(|i| self.entry(i)).collect()
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

    fn encode(entries: &[IndexEntry]) -> Bytes {
        let mut out = Vec::new();
        entries.iter().for_each(|e| e.encode(&mut Encoder { out: &mut out }));
        Bytes::from(out)
    }

    #[test]
    fn find_returns_each_entry_and_nothing_between() {
        // Two partitions per token: keys order entries of one token.
        let entries: Vec<IndexEntry> = (0..50).map(|i| entry(i * 2, (i % 3) as usize)).collect();
        let page = IndexPage::parse(encode(&entries), &entries[0].position, u64::MAX).expect("a valid page");
        assert_eq!(page.len(), 50);
        for (i, e) in entries.iter().enumerate() {
            assert_eq!(page.find(&e.position).expect("find").as_ref(), Some(e), "entry {i}");
            let absent = entry(i as u32 * 2 + 1, 0).position;
            assert_eq!(page.find(&absent).expect("find"), None);
        }
        assert_eq!(page.entries().expect("entries"), entries);
        assert!(page.heap_bytes() >= encode(&entries).len());
    }

    #[test]
    fn damaged_pages_are_refused() {
        let entries: Vec<IndexEntry> = (0..4).map(|i| entry(i, 1)).collect();
        let first = &entries[0].position;
        let refused = |entries: &[IndexEntry], first: &PartitionPosition, raw_len: u64| {
            IndexPage::parse(encode(entries), first, raw_len).expect_err("refused").to_string()
        };
        assert!(refused(&entries, &entries[1].position, u64::MAX).contains("summary"));
        assert!(refused(&entries, first, 350).contains("past the data"));
        let mut swapped = entries.clone();
        swapped.swap(1, 2);
        assert!(refused(&swapped, first, u64::MAX).contains("out of order"));
        let mut sampled = entries.clone();
        sampled[2].samples = vec![(Bytes::new(), 100)];
        assert!(refused(&sampled, first, u64::MAX).contains("past its partition"));
        let truncated = encode(&entries).slice(..10);
        assert!(IndexPage::parse(truncated, first, u64::MAX).is_err());
    }
}
