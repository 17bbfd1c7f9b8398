//! SSTables: immutable sorted files of partitions, and reading them.
//!
//! A point read goes Bloom filter → summary (in RAM) → one index page
//! (searched in place, [`index_page`]) → the data chunks holding the
//! partition; a partition with clustering samples reads only the runs of
//! rows a slice needs. The index page comes from the shard's
//! [`index_cache`] when it holds it, and is put there when read. Scans and
//! compaction walk index pages in order with a [`Scanner`], reading them
//! from disk and never caching them. Every chunk and index page is
//! checksummed: a damaged one fails the read that touches it, with the file
//! and chunk named, and nothing else — except that a point read of an
//! uncompressed table reads only the aligned blocks its partition lies in
//! (a 1 KiB row costs a 4 KiB read, not its 16 KiB chunk), so it cannot
//! check the chunk's checksum; scans and compaction, which read chunks
//! whole, do (ScyllaDB checks an uncompressed SSTable's checksums only when
//! validating it).
//!
//! An [`SSTable`] is shared by `Rc` between the table's current set and the
//! reads and compactions using it; once compaction replaces it, it is
//! marked obsolete and its files are deleted when the last user lets go.

pub mod bloom;
pub mod compression;
pub mod format;
pub mod index_cache;
pub mod index_page;
pub mod writer;

use std::cell::Cell;
use std::collections::VecDeque;
use std::ops::Bound;
use std::rc::Rc;

use bytes::Bytes;
use shoal_io::{File, IoClass};

use crate::codec::{self, Decoder, Encoder};
use crate::error::{StorageError, StorageResult};
use crate::found::Found;
use crate::partition::{ClusteringRange, Partition, PartitionPosition};
use bloom::BloomFilter;
use compression::Compression;
use format::{
    check_header, open_block, open_small, Component, Descriptor, Statistics, BLOCK_HEADER_BYTES, HEADER_BYTES,
    MAX_CHUNK_BYTES,
};
pub use index_page::IndexEntry;
use index_page::IndexPage;

/// The first partition of an index page and where the page is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryEntry {
    pub first: PartitionPosition,
    pub offset: u64,
    pub len: u32,
}

impl SummaryEntry {
    fn encode(&self, e: &mut Encoder) {
        e.out.extend_from_slice(&self.first.token.to_be_bytes());
        e.bytes(&self.first.key);
        e.var_u64(self.offset);
        e.var_u64(u64::from(self.len));
    }

    fn decode(d: &mut Decoder) -> StorageResult<SummaryEntry> {
        let token = d.fixed_i64()?;
        let key = d.bytes()?;
        Ok(SummaryEntry { first: PartitionPosition { token, key }, offset: d.var_u64()?, len: d.var_u32()? })
    }
}

/// The last decompressed chunk, so consecutive small partitions of a scan
/// decompress each chunk once; the I/O class the reads are made for (a
/// query's, or compaction's); and whether uncompressed data is read in
/// whole chunks (scans: the next partitions are in the same chunk) or
/// only the blocks a partition lies in (a point read).
pub struct ChunkCache {
    chunk: Option<(usize, Bytes)>,
    class: IoClass,
    whole_chunks: bool,
}

impl ChunkCache {
    /// For a scan: whole chunks, each read once.
    fn new(class: IoClass) -> ChunkCache {
        ChunkCache { chunk: None, class, whole_chunks: true }
    }

    /// For a point read (a query's).
    fn point() -> ChunkCache {
        ChunkCache { chunk: None, class: IoClass::Query, whole_chunks: false }
    }
}

pub struct SSTable {
    /// Shard-unique (generations are unique only per table): names the
    /// SSTable's pages in the [`index_cache`].
    id: u64,
    descriptor: Descriptor,
    data: File,
    index: File,
    compression: Compression,
    chunk_bytes: u64,
    raw_len: u64,
    /// File offset of every chunk, then the end of the data file.
    chunk_offsets: Vec<u64>,
    /// The index file's format version: how its pages are laid out.
    index_version: u16,
    summary: Vec<SummaryEntry>,
    /// Per index page: whether [`IndexPage::open`] has walked and accepted
    /// it since the SSTable was opened, so a later read of it (an index
    /// cache miss) reopens it unwalked when its checksum matches
    /// ([`IndexPage::reopen`]; see `index_page`).
    pages_checked: Box<[Cell<bool>]>,
    bloom: BloomFilter,
    stats: Statistics,
    data_file_bytes: u64,
    obsolete: Cell<bool>,
    /// Bloom filter, summary and chunk offsets: counted in the shard's
    /// memory while the SSTable is open.
    metadata_bytes: usize,
}

impl SSTable {
    /// Opens an SSTable, checking every component's header and the small
    /// components' checksums; `class` is what the opening is part of (a
    /// flush, a compaction, start-up).
    pub async fn open(descriptor: Descriptor, class: IoClass) -> StorageResult<SSTable> {
        let name = descriptor.name();
        Self::open_checked(descriptor, class).await.map_err(|e| e.at(|| name))
    }

    async fn open_checked(descriptor: Descriptor, class: IoClass) -> StorageResult<SSTable> {
        let read_small = |component: Component| {
            let path = descriptor.path(component);
            async move {
                let bytes = File::open(&path, class).await?.read_all(class).await?;
                open_small(component, &bytes).map(<[u8]>::to_vec).map_err(|e| e.at(|| format!("{}", path.display())))
            }
        };
        let info = read_small(Component::CompressionInfo).await?;
        let mut d = Decoder::new(&info);
        let compression =
            Compression::from_id(d.u8()?).ok_or_else(|| StorageError::corrupt("unknown compression codec"))?;
        let chunk_bytes = d.var_u64()?;
        let raw_len = d.var_u64()?;
        let chunks = d.var_u64()?;
        if chunk_bytes == 0 || chunk_bytes > MAX_CHUNK_BYTES as u64 {
            return Err(StorageError::corrupt(format!("chunk length {chunk_bytes} out of range")));
        }
        if chunks != raw_len.div_ceil(chunk_bytes) {
            return Err(StorageError::corrupt("compression info does not match the data length"));
        }
        let mut chunk_offsets = Vec::new();
        for _ in 0..=chunks {
            chunk_offsets.push(d.var_u64()?);
        }
        if chunk_offsets.windows(2).any(|w| w[0] >= w[1]) {
            return Err(StorageError::corrupt("chunk offsets are not increasing"));
        }

        let summary_body = read_small(Component::Summary).await?;
        let mut d = Decoder::new(&summary_body);
        let n = d.var_u64()?;
        let mut summary = Vec::new();
        for _ in 0..n {
            summary.push(SummaryEntry::decode(&mut d)?);
        }
        let filter = read_small(Component::Filter).await?;
        let bloom = BloomFilter::decode(&mut Decoder::new(&filter))?;
        let stats_body = read_small(Component::Statistics).await?;
        let stats = Statistics::decode(&mut Decoder::new(&stats_body))?;

        let data = File::open(&descriptor.path(Component::Data), class).await?;
        let index = File::open(&descriptor.path(Component::Index), class).await?;
        let data_file_bytes = data.len().await?;
        let mut index_version = 0;
        for (file, component) in [(&data, Component::Data), (&index, Component::Index)] {
            let header = file.read_exact_at(0, HEADER_BYTES, class).await?;
            index_version =
                check_header(&header, component).map_err(|e| e.at(|| format!("{}", file.path().display())))?;
        }
        // A page is read whole, into a buffer of its length: the summary
        // must not name one beyond the index file.
        let index_file_bytes = index.len().await?;
        if summary.iter().any(|s| {
            s.offset < HEADER_BYTES as u64
                || s.offset.checked_add(u64::from(s.len)).is_none_or(|end| end > index_file_bytes)
        }) {
            return Err(StorageError::corrupt(format!(
                "{} names an index page outside {} ({index_file_bytes} bytes)",
                descriptor.path(Component::Summary).display(),
                index.path().display()
            )));
        }
        // Invariant: chunk_offsets has chunks + 1 entries.
        #[allow(clippy::unwrap_used)]
        if *chunk_offsets.last().unwrap() != data_file_bytes {
            return Err(StorageError::corrupt(format!(
                "{} is {data_file_bytes} bytes; its compression info says {}",
                descriptor.path(Component::Data).display(),
                chunk_offsets.last().unwrap()
            )));
        }
        // What the SSTable keeps in RAM while open, in the shard's budget.
        let metadata_bytes = bloom.memory_bytes()
            + summary.iter().map(|s| std::mem::size_of::<SummaryEntry>() + s.first.key.len()).sum::<usize>()
            + chunk_offsets.capacity() * std::mem::size_of::<u64>()
            + summary.len();
        crate::memory::metadata_changed(metadata_bytes as isize);
        Ok(SSTable {
            metadata_bytes,
            id: index_cache::next_sstable_id(),
            descriptor,
            data,
            index,
            compression,
            chunk_bytes,
            raw_len,
            chunk_offsets,
            index_version,
            pages_checked: summary.iter().map(|_| Cell::new(false)).collect(),
            summary,
            bloom,
            stats,
            data_file_bytes,
            obsolete: Cell::new(false),
        })
    }

    pub fn descriptor(&self) -> &Descriptor {
        &self.descriptor
    }

    pub fn stats(&self) -> &Statistics {
        &self.stats
    }

    pub fn generation(&self) -> u64 {
        self.descriptor.generation
    }

    /// Bytes on disk of the data file (what compaction strategies size by).
    pub fn data_bytes(&self) -> u64 {
        self.data_file_bytes
    }

    /// Marks the SSTable replaced: its files go when the last user drops it.
    pub fn mark_obsolete(&self) {
        self.obsolete.set(true);
    }

    /// Whether the partition may be here (key range and Bloom filter).
    pub fn may_contain(&self, position: &PartitionPosition) -> bool {
        match (&self.stats.first, &self.stats.last) {
            (Some(first), Some(last)) if position >= first && position <= last => {
                self.bloom.may_contain(position.token, &position.key)
            }
            _ => false,
        }
    }

    /// Whether any partition in `(from, to)` may be here.
    pub fn overlaps(&self, from: Bound<&PartitionPosition>, to: Bound<&PartitionPosition>) -> bool {
        let (Some(first), Some(last)) = (&self.stats.first, &self.stats.last) else { return false };
        let after_from = match from {
            Bound::Included(f) => last >= f,
            Bound::Excluded(f) => last > f,
            Bound::Unbounded => true,
        };
        let before_to = match to {
            Bound::Included(t) => first <= t,
            Bound::Excluded(t) => first < t,
            Bound::Unbounded => true,
        };
        after_from && before_to
    }

    /// The partition at `position` restricted to `ranges`, if stored here.
    pub async fn read(
        &self,
        position: &PartitionPosition,
        ranges: &[ClusteringRange],
    ) -> StorageResult<Option<Partition>> {
        if !self.may_contain(position) {
            return Ok(None);
        }
        self.read_admitted(position, ranges).await
    }

    /// [`SSTable::read`] for a caller that has asked
    /// [`SSTable::may_contain`] already (a table's read, which asks it to
    /// choose the SSTables): the Bloom filter is not asked twice.
    pub(crate) async fn read_admitted(
        &self,
        position: &PartitionPosition,
        ranges: &[ClusteringRange],
    ) -> StorageResult<Option<Partition>> {
        let Some(entry) = self.find(position).await? else { return Ok(None) };
        self.read_entry(&entry, ranges, &mut ChunkCache::point()).await.map(Some)
    }

    /// The whole partition at `position`, if stored here, as a read finds
    /// it ([`Found::decode_stored`]): a single row in the compact layout
    /// written straight from the stored bytes (no `Partition` built; what
    /// the row cache keeps and a memcached hit reads), anything else
    /// decoded.
    pub async fn read_found(&self, position: &PartitionPosition) -> StorageResult<Option<Found>> {
        if !self.may_contain(position) {
            return Ok(None);
        }
        self.read_found_admitted(position).await
    }

    /// [`SSTable::read_found`] for a caller that has asked
    /// [`SSTable::may_contain`] already ([`SSTable::read_admitted`]).
    pub(crate) async fn read_found_admitted(&self, position: &PartitionPosition) -> StorageResult<Option<Found>> {
        let Some(entry) = self.find(position).await? else { return Ok(None) };
        self.decode_whole(&entry, &mut ChunkCache::point(), Found::decode_stored).await.map(Some)
    }

    /// The index entry of the partition at `position`, if stored here (its
    /// key range and Bloom filter admitted it).
    async fn find(&self, position: &PartitionPosition) -> StorageResult<Option<IndexEntry>> {
        let page = self.summary.partition_point(|s| s.first <= *position);
        if page == 0 {
            return Ok(None);
        }
        let index_page = self.query_page(page - 1).await?;
        let place = || format!("{} page {}", self.index.path().display(), page - 1);
        index_page.find(position).map_err(|e| e.at(place))
    }

    /// Index page `page` for a point read: from the shard's index cache, or
    /// read from disk and cached.
    async fn query_page(&self, page: usize) -> StorageResult<index_cache::Page> {
        if let Some(entries) = index_cache::get(self.id, page) {
            return Ok(entries);
        }
        let entries = Rc::new(self.read_page(page, IoClass::Query).await?);
        index_cache::insert(self.id, page, Rc::clone(&entries));
        Ok(entries)
    }

    /// Reads index page `page`, checking its checksum and, the first time,
    /// its entries' offsets and order ([`IndexPage::open`]; a page read
    /// again is reopened, [`IndexPage::reopen`]). Its body is copied out of
    /// the read buffer, which is larger (aligned blocks) and goes back to
    /// the thread's pool: the page may be cached for long.
    async fn read_page(&self, page: usize, class: IoClass) -> StorageResult<IndexPage> {
        let s = &self.summary[page];
        let place = || format!("{} page {page} (offset {})", self.index.path().display(), s.offset);
        let checked = &self.pages_checked[page];
        let opened = self
            .index
            .read_with(s.offset, s.len as usize, class, |bytes| {
                let body = open_block(bytes)?;
                match checked.get() {
                    true => IndexPage::reopen(body, self.index_version, self.raw_len),
                    false => IndexPage::open(body, self.index_version, &s.first, self.raw_len),
                }
            })
            .await?;
        let opened = opened.map_err(|e| e.at(place))?;
        checked.set(true);
        Ok(opened)
    }

    /// Decodes the partition of `entry`, reading only the runs of rows
    /// `ranges` need when the entry has clustering samples.
    async fn read_entry(
        &self,
        entry: &IndexEntry,
        ranges: &[ClusteringRange],
        cache: &mut ChunkCache,
    ) -> StorageResult<Partition> {
        let place =
            || format!("{} partition at offset {}", self.descriptor.path(Component::Data).display(), entry.offset);
        let whole =
            entry.samples.is_empty() || ranges.iter().any(|r| r.start == Bound::Unbounded && r.end == Bound::Unbounded);
        if whole {
            let mut partition =
                self.decode_whole(entry, cache, |raw| codec::decode_partition(&mut Decoder::new(raw))).await?;
            partition.rows.retain(|key, _| ranges.iter().any(|r| r.contains(key)));
            return Ok(partition);
        }
        // Run i holds the rows from sample i-1 (the header and the first
        // rows for i = 0) up to sample i.
        let bounds: Vec<u64> =
            std::iter::once(0).chain(entry.samples.iter().map(|(_, at)| *at)).chain([entry.len]).collect();
        let first_key = |run: usize| if run == 0 { None } else { Some(&entry.samples[run - 1].0) };
        let needed = |run: usize| {
            ranges.iter().any(|r| {
                let starts_before_run_end = match (run + 1 < bounds.len() - 1, &r.start) {
                    (false, _) | (_, Bound::Unbounded) => true,
                    (true, Bound::Included(s) | Bound::Excluded(s)) => s < &entry.samples[run].0,
                };
                let ends_after_run_start = match (first_key(run), &r.end) {
                    (None, _) | (_, Bound::Unbounded) => true,
                    (Some(f), Bound::Included(e)) => e >= f,
                    (Some(f), Bound::Excluded(e)) => e > f,
                };
                starts_before_run_end && ends_after_run_start && !r.is_empty()
            })
        };
        let header_run = self.read_raw(entry.offset, bounds[1], cache).await?;
        let mut d = Decoder::new(&header_run);
        let mut partition = codec::decode_header(&mut d).map_err(|e| StorageError::from(e).at(place))?;
        let rows_start = d.position();
        let mut runs = Vec::new();
        if needed(0) {
            runs.push((header_run, rows_start));
        }
        for run in 1..bounds.len() - 1 {
            if needed(run) {
                runs.push((self.read_raw(entry.offset + bounds[run], bounds[run + 1] - bounds[run], cache).await?, 0));
            }
        }
        for (bytes, start) in runs {
            let mut d = Decoder::new(&bytes[start..]);
            while !d.is_empty() {
                let Some((key, row)) = codec::decode_next_row(&mut d).map_err(|e| StorageError::from(e).at(place))?
                else {
                    break;
                };
                if ranges.iter().any(|r| r.contains(&key)) {
                    partition.rows.insert(key, row);
                }
            }
        }
        Ok(partition)
    }

    /// What `decode` makes of the whole partition of `entry` (its raw
    /// bytes, borrowed for the call: a point read of an uncompressed table
    /// reads them into a pooled buffer).
    async fn decode_whole<R>(
        &self,
        entry: &IndexEntry,
        cache: &mut ChunkCache,
        decode: impl FnOnce(&[u8]) -> Result<R, codec::DecodeError>,
    ) -> StorageResult<R> {
        let decoded = if self.reads_blocks(entry.offset, entry.len, cache) {
            self.read_uncompressed_with(entry.offset, entry.len, cache.class, decode).await?
        } else {
            decode(&self.read_raw(entry.offset, entry.len, cache).await?)
        };
        let place =
            || format!("{} partition at offset {}", self.descriptor.path(Component::Data).display(), entry.offset);
        decoded.map_err(|e| StorageError::from(e).at(place))
    }

    /// Whether `[offset, offset + len)` is read as the aligned blocks it
    /// lies in (`read_uncompressed`), not as whole chunks: a point read of
    /// an uncompressed table, within two chunks (`len` comes from the
    /// index, and a damaged one must fail on the chunks it names, not
    /// allocate its length).
    fn reads_blocks(&self, offset: u64, len: u64, cache: &ChunkCache) -> bool {
        let chunks = || ((offset + len - 1) / self.chunk_bytes) - offset / self.chunk_bytes + 1;
        self.compression == Compression::None && !cache.whole_chunks && len > 0 && chunks() <= 2
    }

    /// The raw (decompressed) bytes `[offset, offset + len)` of the data
    /// stream, checking each chunk's checksum. Bytes within one chunk are
    /// a view of it, not a copy.
    async fn read_raw(&self, offset: u64, len: u64, cache: &mut ChunkCache) -> StorageResult<Bytes> {
        if len == 0 {
            return Ok(Bytes::new());
        }
        if self.reads_blocks(offset, len, cache) {
            return self.read_uncompressed(offset, len, cache.class).await;
        }
        let first = (offset / self.chunk_bytes) as usize;
        let last = ((offset + len - 1) / self.chunk_bytes) as usize;
        let mut pieces = Vec::new();
        for chunk in first..=last {
            let raw = match &cache.chunk {
                Some((index, raw)) if *index == chunk => raw.clone(),
                _ => {
                    let raw = self.read_chunk(chunk, cache.class).await?;
                    cache.chunk = Some((chunk, raw.clone()));
                    raw
                }
            };
            let chunk_start = chunk as u64 * self.chunk_bytes;
            let from = offset.saturating_sub(chunk_start) as usize;
            let to = ((offset + len - chunk_start) as usize).min(raw.len());
            if from > to {
                return Err(StorageError::corrupt(format!("chunk {chunk} is shorter than the index says")));
            }
            if first == last {
                return Ok(raw.slice(from..to));
            }
            pieces.push(raw.slice(from..to));
        }
        Ok(Bytes::from(pieces.concat()))
    }

    /// The bytes `[offset, offset + len)` of an uncompressed data stream
    /// (within two chunks), read from the aligned blocks that hold them and
    /// no more: a 1 KiB
    /// row costs a 4 KiB read, not its 16 KiB chunk. The chunks' checksums
    /// cover whole chunks, so they are not checked here (as ScyllaDB checks
    /// an uncompressed SSTable's only when validating it); scans and
    /// compaction, which read whole chunks, check them.
    async fn read_uncompressed(&self, offset: u64, len: u64, class: IoClass) -> StorageResult<Bytes> {
        let blocks = self.uncompressed_blocks(offset, len)?;
        let bytes = self.data.read_exact_at(blocks.from, blocks.len, class).await?;
        Ok(if blocks.second.is_none() { bytes } else { Bytes::from(blocks.join(&bytes)) })
    }

    /// [`SSTable::read_uncompressed`] handing the bytes to `f`, read into
    /// a buffer of the thread's pool (`shoal_io::File::read_with`).
    async fn read_uncompressed_with<R>(
        &self,
        offset: u64,
        len: u64,
        class: IoClass,
        f: impl FnOnce(&[u8]) -> R,
    ) -> StorageResult<R> {
        let blocks = self.uncompressed_blocks(offset, len)?;
        let read = self.data.read_with(blocks.from, blocks.len, class, |bytes| match blocks.second {
            None => f(bytes),
            Some(_) => f(&blocks.join(bytes)),
        });
        Ok(read.await?)
    }

    /// Where the raw bytes `[offset, offset + len)` of an uncompressed
    /// stream (within two chunks) lie in the data file, each chunk's
    /// stored length checked.
    fn uncompressed_blocks(&self, offset: u64, len: u64) -> StorageResult<RawSpan> {
        let first = (offset / self.chunk_bytes) as usize;
        let last = ((offset + len - 1) / self.chunk_bytes) as usize;
        let chunk_raw_len = |chunk: usize| (self.raw_len - chunk as u64 * self.chunk_bytes).min(self.chunk_bytes);
        for chunk in first..=last {
            let stored = self.chunk_offsets[chunk + 1] - self.chunk_offsets[chunk];
            if stored != BLOCK_HEADER_BYTES as u64 + chunk_raw_len(chunk) {
                let path = self.descriptor.path(Component::Data);
                return Err(StorageError::corrupt(format!("{} chunk {chunk}: {stored} bytes stored", path.display())));
            }
        }
        // Where raw byte `at` of the stream is in the file, `at` in
        // `chunk` or at its end.
        let file_at = |chunk: usize, at: u64| {
            self.chunk_offsets[chunk] + BLOCK_HEADER_BYTES as u64 + (at - chunk as u64 * self.chunk_bytes)
        };
        let from = file_at(first, offset);
        let to = file_at(last, offset + len);
        // The raw bytes of the second chunk start after its header.
        let second = (first != last).then(|| {
            let boundary = last as u64 * self.chunk_bytes;
            ((file_at(first, boundary) - from) as usize, (file_at(last, boundary) - from) as usize)
        });
        Ok(RawSpan { from, len: (to - from) as usize, second })
    }

    /// Chunk `chunk`'s raw bytes, its checksum checked: an uncompressed
    /// chunk is a view of the bytes read (no copy).
    async fn read_chunk(&self, chunk: usize, class: IoClass) -> StorageResult<Bytes> {
        let path = self.descriptor.path(Component::Data);
        let place = || format!("{} chunk {chunk} (offset {})", path.display(), self.chunk_offsets[chunk]);
        let start = self.chunk_offsets[chunk];
        let stored = self.chunk_offsets[chunk + 1] - start;
        let bytes = self.data.read_exact_at(start, stored as usize, class).await?;
        let body = open_block(&bytes).map_err(|e| e.at(place))?;
        let raw_len = (self.raw_len - chunk as u64 * self.chunk_bytes).min(self.chunk_bytes) as usize;
        if self.compression == Compression::None && body.len() == raw_len {
            return Ok(bytes.slice(bytes.len() - body.len()..));
        }
        self.compression.decompress(body, raw_len).map(Bytes::from).map_err(|e| e.at(place))
    }
}

impl Drop for SSTable {
    fn drop(&mut self) {
        // Its pages could never be found again (ids are not reused): give
        // their memory back now.
        index_cache::forget(self.id);
        crate::memory::metadata_changed(-(self.metadata_bytes as isize));
        if self.obsolete.get() {
            let descriptor = self.descriptor.clone();
            shoal_runtime::spawn(async move { writer::remove_files(&descriptor).await });
        }
    }
}

/// Raw bytes of an uncompressed stream within two chunks, as they lie in
/// the data file: `len` bytes from `from`, the second chunk's header
/// between the pieces when they span two.
struct RawSpan {
    from: u64,
    len: usize,
    /// Where the first chunk's bytes end and the second's begin, relative
    /// to `from`, when they span two chunks.
    second: Option<(usize, usize)>,
}

impl RawSpan {
    /// The raw bytes, the chunk header between them left out.
    fn join(&self, bytes: &[u8]) -> Vec<u8> {
        let Some((end_of_first, start_of_second)) = self.second else { return bytes.to_vec() };
        let mut raw = Vec::with_capacity(bytes.len() - (start_of_second - end_of_first));
        raw.extend_from_slice(&bytes[..end_of_first]);
        raw.extend_from_slice(&bytes[start_of_second..]);
        raw
    }
}

/// Walks an SSTable's partitions in ring order from a start bound.
pub struct Scanner {
    sstable: Rc<SSTable>,
    next_page: usize,
    entries: VecDeque<IndexEntry>,
    to: Bound<PartitionPosition>,
    cache: ChunkCache,
}

impl Scanner {
    /// A scanner whose reads are of I/O class `class` (a query's scan, or
    /// compaction's).
    pub async fn new(
        sstable: Rc<SSTable>,
        from: Bound<&PartitionPosition>,
        to: Bound<PartitionPosition>,
        class: IoClass,
    ) -> StorageResult<Scanner> {
        let page = match from {
            Bound::Unbounded => 0,
            Bound::Included(p) | Bound::Excluded(p) => {
                sstable.summary.partition_point(|s| s.first <= *p).saturating_sub(1)
            }
        };
        let mut scanner =
            Scanner { sstable, next_page: page, entries: VecDeque::new(), to, cache: ChunkCache::new(class) };
        scanner.fill().await?;
        while let Some(entry) = scanner.entries.front() {
            let before = match from {
                Bound::Included(p) => entry.position < *p,
                Bound::Excluded(p) => entry.position <= *p,
                Bound::Unbounded => false,
            };
            if !before {
                break;
            }
            scanner.entries.pop_front();
            scanner.fill().await?;
        }
        Ok(scanner)
    }

    async fn fill(&mut self) -> StorageResult<()> {
        while self.entries.is_empty() && self.next_page < self.sstable.summary.len() {
            // Not through the index cache: a scan reads each page once.
            self.entries = self.sstable.read_page(self.next_page, self.cache.class).await?.entries()?.into();
            self.next_page += 1;
        }
        Ok(())
    }

    /// The next partition's position, without reading it.
    pub fn peek(&self) -> Option<&PartitionPosition> {
        let entry = self.entries.front()?;
        let within = match &self.to {
            Bound::Included(t) => entry.position <= *t,
            Bound::Excluded(t) => entry.position < *t,
            Bound::Unbounded => true,
        };
        within.then_some(&entry.position)
    }

    /// The next partition restricted to `ranges`.
    pub async fn next(&mut self, ranges: &[ClusteringRange]) -> StorageResult<Option<(PartitionPosition, Partition)>> {
        if self.peek().is_none() {
            return Ok(None);
        }
        // Invariant: peek() saw a front entry.
        #[allow(clippy::unwrap_used)]
        let entry = self.entries.pop_front().unwrap();
        let partition = self.sstable.read_entry(&entry, ranges, &mut self.cache).await?;
        self.fill().await?;
        Ok(Some((entry.position, partition)))
    }
}

/// Keeps SSTables in a shared, copy-on-write list.
pub type SSTableSet = Rc<Vec<Rc<SSTable>>>;

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::commitlog::Position;
    use crate::partition::{Cell, ClusteredRow, ColumnData, Row};
    use format::seal_small;
    use writer::{Writer, WriterOptions};

    const PARTITIONS: u32 = 50;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("shoal-sstable-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn position(i: u32) -> PartitionPosition {
        PartitionPosition { token: i64::from(i) * 1_000, key: Bytes::from(i.to_be_bytes().to_vec()) }
    }

    fn partition(i: u32) -> Partition {
        let mut row = Row::default();
        row.columns.insert(0, ColumnData::Atomic(Cell::live(1, Bytes::from(format!("value {i}")), None)));
        let mut p = Partition::default();
        p.rows.insert(Bytes::from_static(b"c"), ClusteredRow { clustering: vec![Bytes::from_static(b"c")], row });
        p
    }

    async fn write_sstable(dir: &std::path::Path) -> Descriptor {
        let descriptor = Descriptor { dir: dir.to_path_buf(), shard: 0, generation: 1 };
        let options = WriterOptions { compression: Compression::Lz4, chunk_bytes: 4096, bloom_fp_chance: 0.01 };
        let mut writer =
            Writer::create(descriptor, options, PARTITIONS as usize, shoal_io::IoClass::Flush).await.expect("create");
        for i in 0..PARTITIONS {
            writer.add(&position(i), &partition(i)).await.expect("add");
        }
        writer.finish(Position::ZERO, 0, super::writer::Lineage::flushed()).await.expect("finish")
    }

    fn small_body(descriptor: &Descriptor, component: Component) -> Vec<u8> {
        let bytes = std::fs::read(descriptor.path(component)).expect("read");
        open_small(component, &bytes).expect("valid component").to_vec()
    }

    /// Replaces a small component's body, with a valid checksum: damage
    /// that a checksum does not catch (a bug, or a file made by hand).
    fn reseal(descriptor: &Descriptor, component: Component, body: &[u8]) {
        std::fs::write(descriptor.path(component), seal_small(component, body)).expect("write");
    }

    fn corruption(result: StorageResult<impl Sized>) -> String {
        match result {
            Err(e @ StorageError::Corrupt { .. }) => e.to_string(),
            Err(e) => panic!("not a corruption error: {e}"),
            Ok(_) => panic!("damage went unnoticed"),
        }
    }

    #[test]
    fn a_summary_naming_a_page_past_the_index_fails_the_open() {
        let dir = temp_dir("summary");
        shoal_io::block_on(async {
            let descriptor = write_sstable(&dir).await;
            let body = small_body(&descriptor, Component::Summary);
            let mut d = Decoder::new(&body);
            let n = d.var_u64().expect("count");
            let mut entries: Vec<SummaryEntry> = (0..n).map(|_| SummaryEntry::decode(&mut d).expect("entry")).collect();
            // A page of 4 GiB would be read into a buffer of that size.
            entries[0].len = u32::MAX;
            let mut body = Vec::new();
            let mut e = Encoder { out: &mut body };
            e.var_u64(n);
            entries.iter().for_each(|s| s.encode(&mut e));
            reseal(&descriptor, Component::Summary, &body);
            let message = corruption(SSTable::open(descriptor, shoal_io::IoClass::Query).await);
            assert!(message.contains("Summary.db") && message.contains("index page"), "{message}");
        });
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_chunk_length_out_of_range_fails_the_open() {
        let dir = temp_dir("chunk-length");
        shoal_io::block_on(async {
            let descriptor = write_sstable(&dir).await;
            let body = small_body(&descriptor, Component::CompressionInfo);
            let mut d = Decoder::new(&body);
            let (codec, _chunk_bytes, _raw_len, chunks) = (
                d.u8().expect("codec"),
                d.var_u64().expect("chunk"),
                d.var_u64().expect("raw"),
                d.var_u64().expect("n"),
            );
            let offsets = &body[d.position()..];
            // Chunks of 1 TiB, as many as before: each would be
            // decompressed into a buffer of that size.
            let chunk_bytes = 1u64 << 40;
            let mut body = vec![codec];
            let mut e = Encoder { out: &mut body };
            e.var_u64(chunk_bytes);
            e.var_u64((chunks - 1) * chunk_bytes + 1);
            e.var_u64(chunks);
            body.extend_from_slice(offsets);
            reseal(&descriptor, Component::CompressionInfo, &body);
            let message = corruption(SSTable::open(descriptor, shoal_io::IoClass::Query).await);
            assert!(message.contains("chunk length"), "{message}");
        });
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_partition_length_beyond_the_data_fails_the_read_without_allocating_it() {
        let dir = temp_dir("partition-length");
        shoal_io::block_on(async {
            let descriptor = write_sstable(&dir).await;
            // One-byte "chunks" of the largest length, over the data file
            // padded to 256 KiB: the raw stream claims 4 TiB.
            let data = descriptor.path(Component::Data);
            let mut bytes = std::fs::read(&data).expect("read data");
            bytes.resize(256 << 10, 0);
            std::fs::write(&data, &bytes).expect("write data");
            let data_bytes = bytes.len() as u64;
            let chunk_offsets: Vec<u64> = (HEADER_BYTES as u64..=data_bytes).collect();
            let chunks = chunk_offsets.len() as u64 - 1;
            let raw_len = chunks * MAX_CHUNK_BYTES as u64;
            let mut body = vec![Compression::Lz4.id()];
            let mut e = Encoder { out: &mut body };
            e.var_u64(MAX_CHUNK_BYTES as u64);
            e.var_u64(raw_len);
            e.var_u64(chunks);
            chunk_offsets.iter().for_each(|o| e.var_u64(*o));
            reseal(&descriptor, Component::CompressionInfo, &body);
            // An index of one page holding one partition as long as that.
            let entry = IndexEntry { position: position(0), offset: 0, len: raw_len, samples: Vec::new() };
            rewrite_index(&descriptor, &[entry]);

            let sstable =
                SSTable::open(descriptor, shoal_io::IoClass::Query).await.expect("the lengths are plausible at open");
            let message = corruption(sstable.read(&position(0), &[ClusteringRange::all()]).await);
            assert!(message.contains("chunk 0"), "{message}");
        });
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Replaces the index with one page of `entries`, and the summary with
    /// its one entry.
    fn rewrite_index(descriptor: &Descriptor, entries: &[IndexEntry]) {
        let mut page = Vec::new();
        let mut starts = Vec::new();
        for entry in entries {
            starts.push(page.len() as u32);
            entry.encode(&mut Encoder { out: &mut page });
        }
        index_page::finish_page(&mut page, &starts);
        let mut index = Vec::new();
        format::write_header(&mut index, Component::Index);
        index.extend_from_slice(&format::frame_block(&page));
        std::fs::write(descriptor.path(Component::Index), &index).expect("write index");
        let summary = SummaryEntry {
            first: entries[0].position.clone(),
            offset: HEADER_BYTES as u64,
            len: (index.len() - HEADER_BYTES) as u32,
        };
        let mut body = Vec::new();
        let mut e = Encoder { out: &mut body };
        e.var_u64(1);
        summary.encode(&mut e);
        reseal(descriptor, Component::Summary, &body);
    }

    #[test]
    fn a_point_read_after_a_warm_up_does_not_read_the_index_again() {
        let dir = temp_dir("index-cache");
        shoal_io::block_on(async {
            index_cache::set_capacity_bytes(1 << 20);
            let descriptor = write_sstable(&dir).await;
            let sstable = SSTable::open(descriptor, IoClass::Query).await.expect("open");
            let all: &[ClusteringRange] = &[ClusteringRange::all()];
            let read = |i: u32| {
                let sstable = &sstable;
                async move {
                    let before = shoal_io::counted(IoClass::Query).0;
                    let read_back = sstable.read(&position(i), all).await.expect("read");
                    assert_eq!(read_back, Some(partition(i)));
                    shoal_io::counted(IoClass::Query).0 - before
                }
            };
            // Cold: the index page, then the data chunk (the file is one chunk).
            assert_eq!(read(3).await, 2);
            let stats = index_cache::stats();
            assert_eq!((stats.hits, stats.misses, stats.pages), (0, 1, 1));
            // Warm: the data chunk only, for any key of the page.
            for i in [3, 0, 49, 17] {
                assert_eq!(read(i).await, 1, "partition {i} reads only its chunk");
            }
            assert_eq!(index_cache::stats().hits, 4);
            // A key between stored ones is found absent on the cached page.
            let absent = PartitionPosition { token: 3_500, key: Bytes::from_static(b"none") };
            assert_eq!(sstable.read(&absent, all).await.expect("read"), None);

            // Dropping the SSTable forgets its pages.
            drop(sstable);
            assert_eq!((index_cache::stats().pages, index_cache::stats().bytes), (0, 0));
        });
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_page_read_again_is_reopened_and_still_checksummed() {
        let dir = temp_dir("index-reopen");
        shoal_io::block_on(async {
            // No index cache: every read reads its page.
            index_cache::set_capacity_bytes(0);
            let descriptor = write_sstable(&dir).await;
            let sstable = SSTable::open(descriptor.clone(), IoClass::Query).await.expect("open");
            let all: &[ClusteringRange] = &[ClusteringRange::all()];
            for round in 0..2 {
                for i in 0..PARTITIONS {
                    let read_back = sstable.read(&position(i), all).await.expect("read");
                    assert_eq!(read_back, Some(partition(i)), "partition {i}, round {round}");
                }
                let absent = PartitionPosition { token: 3_500, key: Bytes::from_static(b"none") };
                assert_eq!(sstable.read(&absent, all).await.expect("read"), None);
            }
            assert!(sstable.pages_checked.iter().all(std::cell::Cell::get));
            // Damage to a page walked before is still caught by its checksum.
            let path = descriptor.path(Component::Index);
            let mut index = std::fs::read(&path).expect("read index");
            index[HEADER_BYTES + BLOCK_HEADER_BYTES + 3] ^= 1;
            std::fs::write(&path, &index).expect("write index");
            let message = corruption(sstable.read(&position(0), all).await);
            assert!(message.contains("checksum") && message.contains("Index.db"), "{message}");
        });
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn scans_neither_use_nor_fill_the_index_cache() {
        let dir = temp_dir("index-cache-scan");
        shoal_io::block_on(async {
            index_cache::set_capacity_bytes(1 << 20);
            let descriptor = write_sstable(&dir).await;
            let sstable = Rc::new(SSTable::open(descriptor, IoClass::Query).await.expect("open"));
            for class in [IoClass::Compaction, IoClass::Query] {
                let mut scanner =
                    Scanner::new(Rc::clone(&sstable), Bound::Unbounded, Bound::Unbounded, class).await.expect("scan");
                let mut n = 0;
                while scanner.next(&[ClusteringRange::all()]).await.expect("next").is_some() {
                    n += 1;
                }
                assert_eq!(n, PARTITIONS);
            }
            assert_eq!(
                index_cache::stats(),
                index_cache::IndexCacheStats { capacity_bytes: 1 << 20, ..Default::default() }
            );
        });
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn index_entries_out_of_order_are_corrupt() {
        let dir = temp_dir("index-order");
        shoal_io::block_on(async {
            let descriptor = write_sstable(&dir).await;
            let entry = |i: u32| IndexEntry { position: position(i), offset: 0, len: 1, samples: Vec::new() };
            rewrite_index(&descriptor, &[entry(1), entry(3), entry(2)]);
            let sstable = SSTable::open(descriptor.clone(), IoClass::Query).await.expect("open");
            let message = corruption(sstable.read(&position(2), &[ClusteringRange::all()]).await);
            assert!(message.contains("out of order") && message.contains("Index.db"), "{message}");
            // A page whose first partition is not the one the summary names.
            rewrite_index(&descriptor, &[entry(1), entry(3)]);
            let body = small_body(&descriptor, Component::Summary);
            let mut d = Decoder::new(&body);
            let n = d.var_u64().expect("count");
            let mut summary = SummaryEntry::decode(&mut d).expect("entry");
            summary.first = position(0);
            let mut body = Vec::new();
            let mut e = Encoder { out: &mut body };
            e.var_u64(n);
            summary.encode(&mut e);
            reseal(&descriptor, Component::Summary, &body);
            let sstable = SSTable::open(descriptor, IoClass::Query).await.expect("open");
            let message = corruption(sstable.read(&position(1), &[ClusteringRange::all()]).await);
            assert!(message.contains("where the summary says"), "{message}");
        });
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn clustering_samples_out_of_order_are_corrupt() {
        for samples in [
            vec![(Bytes::from_static(b"b"), 20), (Bytes::from_static(b"a"), 10)],
            vec![(Bytes::from_static(b"a"), 10), (Bytes::from_static(b"b"), 10)],
        ] {
            let entry = IndexEntry { position: position(1), offset: 0, len: 100, samples };
            let mut out = Vec::new();
            entry.encode(&mut Encoder { out: &mut out });
            let message = corruption(IndexPage::open(&out, 1, &position(1), u64::MAX));
            assert!(message.contains("out of order"), "{message}");
        }
        let entry = IndexEntry { position: position(1), offset: 0, len: 100, samples: vec![(Bytes::new(), 0)] };
        let mut out = Vec::new();
        entry.encode(&mut Encoder { out: &mut out });
        assert!(IndexPage::open(&out, 1, &position(1), u64::MAX).is_err(), "a sample at the start");
        let entry = IndexEntry {
            position: position(1),
            offset: 0,
            len: 100,
            samples: vec![(Bytes::from_static(b"a"), 10), (Bytes::from_static(b"b"), 20)],
        };
        let mut out = Vec::new();
        entry.encode(&mut Encoder { out: &mut out });
        let page = IndexPage::open(&out, 1, &position(1), u64::MAX).expect("ordered samples");
        assert_eq!(page.entries().expect("entries"), [entry]);
    }
}
