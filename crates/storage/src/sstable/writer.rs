//! Writes one SSTable from partitions given in ring order (a memtable
//! flush or a compaction's merged output).
//!
//! Memory stays bounded whatever the SSTable's size: data leaves in chunks
//! as they fill, index pages as they fill; only the summary (one entry per
//! [`INDEX_PAGE_ENTRIES`] partitions) and the Bloom filter stay in RAM.
//! Nothing is visible until [`Writer::finish`] writes the TOC, so a crash
//! mid-write leaves files the next start removes.
//!
//! `Data.db` and `Index.db` are written direct (O_DIRECT) through
//! `shoal_io::Appender`: an aligned write-behind buffer of 128 KiB, the
//! last block padded and the file truncated to its length at finish, so
//! the files hold exactly the bytes the format describes.

use bytes::Bytes;
use shoal_io::{Appender, IoClass};

use super::bloom::BloomFilter;
use super::compression::Compression;
use super::format::{
    frame_block, seal_small, write_header, Component, Descriptor, Statistics, CLUSTERING_SAMPLE_BYTES, HEADER_BYTES,
    INDEX_PAGE_ENTRIES, MAX_CHUNK_BYTES,
};
use super::index_page::finish_page;
use super::{IndexEntry, SummaryEntry};
use crate::codec::{self, Encoder};
use crate::commitlog::Position;
use crate::error::StorageResult;
use crate::partition::{Cell, CellValue, ColumnData, Partition, PartitionPosition, Row};

/// Where an SSTable's data comes from, as its statistics record it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lineage {
    /// The generations it was compacted from; none for a flush.
    pub ancestors: Vec<u64>,
    /// Whether it is the last SSTable its compaction wrote.
    pub last_of_run: bool,
}

impl Lineage {
    /// A flushed SSTable's: no ancestors, a run of its own.
    pub fn flushed() -> Lineage {
        Lineage { ancestors: Vec::new(), last_of_run: true }
    }
}

/// How an SSTable is written (from the table's options).
#[derive(Debug, Clone, Copy)]
pub struct WriterOptions {
    pub compression: Compression,
    pub chunk_bytes: usize,
    pub bloom_fp_chance: f64,
}

pub struct Writer {
    descriptor: Descriptor,
    options: WriterOptions,
    /// What the writing is part of: a flush or a compaction.
    class: IoClass,
    data: Appender,
    index: Appender,
    /// Raw bytes not yet cut into a chunk, and the stream offset of their start.
    raw: Vec<u8>,
    raw_start: u64,
    data_file_offset: u64,
    chunk_offsets: Vec<u64>,
    /// The index page being filled: its encoded entries, and where each
    /// starts (written after them, `index_page`).
    page: Vec<u8>,
    page_starts: Vec<u32>,
    index_file_offset: u64,
    summary: Vec<SummaryEntry>,
    bloom: BloomFilter,
    stats: Statistics,
}

impl Writer {
    /// Starts writing `descriptor`'s files; `expected_partitions` sizes the
    /// Bloom filter.
    pub async fn create(
        descriptor: Descriptor,
        options: WriterOptions,
        expected_partitions: usize,
        class: IoClass,
    ) -> StorageResult<Writer> {
        assert!(options.chunk_bytes >= 4096, "chunks smaller than a page");
        assert!(options.chunk_bytes <= MAX_CHUNK_BYTES, "chunks larger than readers accept");
        shoal_io::create_dir_all(&descriptor.dir, class).await?;
        let opened: StorageResult<(Appender, Appender)> = async {
            let mut data = Appender::create(&descriptor.path(Component::Data), class).await?;
            let mut index = Appender::create(&descriptor.path(Component::Index), class).await?;
            let mut header = Vec::new();
            write_header(&mut header, Component::Data);
            data.append(&header).await?;
            header.clear();
            write_header(&mut header, Component::Index);
            index.append(&header).await?;
            Ok((data, index))
        }
        .await;
        let (data, index) = match opened {
            Ok(files) => files,
            Err(e) => {
                remove_files(&descriptor).await;
                return Err(e);
            }
        };
        Ok(Writer {
            class,
            bloom: BloomFilter::new(expected_partitions, options.bloom_fp_chance),
            descriptor,
            options,
            data,
            index,
            raw: Vec::with_capacity(options.chunk_bytes * 2),
            raw_start: 0,
            data_file_offset: HEADER_BYTES as u64,
            chunk_offsets: Vec::new(),
            page: Vec::new(),
            page_starts: Vec::with_capacity(INDEX_PAGE_ENTRIES),
            index_file_offset: HEADER_BYTES as u64,
            summary: Vec::new(),
            stats: Statistics::default(),
        })
    }

    pub fn descriptor(&self) -> &Descriptor {
        &self.descriptor
    }

    /// Bytes written so far (before compression), for splitting outputs.
    pub fn raw_bytes(&self) -> u64 {
        self.raw_start + self.raw.len() as u64
    }

    /// Appends a partition; positions must be strictly increasing.
    pub async fn add(&mut self, position: &PartitionPosition, partition: &Partition) -> StorageResult<()> {
        if let Some(last) = &self.stats.last {
            assert!(position > last, "partitions out of order in an SSTable");
        }
        let start = self.raw_bytes();
        codec::encode_header(&mut Encoder { out: &mut self.raw }, partition);
        let mut samples: Vec<(Bytes, u64)> = Vec::new();
        let mut last_sample = 0u64;
        for (key, row) in &partition.rows {
            let offset = self.raw_bytes() - start;
            if offset - last_sample >= CLUSTERING_SAMPLE_BYTES {
                samples.push((key.clone(), offset));
                last_sample = offset;
            }
            codec::encode_clustered_row(&mut Encoder { out: &mut self.raw }, key, row);
            self.flush_full_chunks().await?;
        }
        codec::encode_end(&mut Encoder { out: &mut self.raw });
        let len = self.raw_bytes() - start;
        self.flush_full_chunks().await?;

        let entry = IndexEntry { position: position.clone(), offset: start, len, samples };
        if self.page_starts.is_empty() {
            self.summary.push(SummaryEntry { first: position.clone(), offset: self.index_file_offset, len: 0 });
        }
        // A page is far smaller than 4 GiB: its offsets are u32s.
        self.page_starts.push(self.page.len() as u32);
        entry.encode(&mut Encoder { out: &mut self.page });
        if self.page_starts.len() == INDEX_PAGE_ENTRIES {
            self.flush_page().await?;
        }
        self.bloom.insert(position.token, &position.key);
        self.note_stats(position, partition, len);
        Ok(())
    }

    fn note_stats(&mut self, position: &PartitionPosition, p: &Partition, len: u64) {
        let s = &mut self.stats;
        s.partitions += 1;
        s.rows += p.rows.len() as u64;
        s.raw_bytes += len;
        if s.first.is_none() {
            s.first = Some(position.clone());
        }
        s.last = Some(position.clone());
        let mut tally = Tally { stats: s };
        if let Some(t) = p.tombstone {
            tally.tombstone(t.timestamp);
        }
        for rt in &p.range_tombstones {
            tally.tombstone(rt.tombstone.timestamp);
        }
        tally.row(&p.static_row);
        for row in p.rows.values() {
            tally.row(&row.row);
        }
    }

    async fn flush_full_chunks(&mut self) -> StorageResult<()> {
        while self.raw.len() >= self.options.chunk_bytes {
            let rest = self.raw.split_off(self.options.chunk_bytes);
            let chunk = std::mem::replace(&mut self.raw, rest);
            self.write_chunk(&chunk).await?;
        }
        Ok(())
    }

    async fn write_chunk(&mut self, raw: &[u8]) -> StorageResult<()> {
        let out = frame_block(&self.options.compression.compress(raw));
        self.chunk_offsets.push(self.data_file_offset);
        let len = out.len() as u64;
        self.data.append(&out).await?;
        self.data_file_offset += len;
        self.raw_start += raw.len() as u64;
        Ok(())
    }

    async fn flush_page(&mut self) -> StorageResult<()> {
        if self.page_starts.is_empty() {
            return Ok(());
        }
        finish_page(&mut self.page, &self.page_starts);
        let out = frame_block(&self.page);
        self.page.clear();
        let len = out.len() as u64;
        // Invariant: a summary entry was pushed with the page's first entry.
        #[allow(clippy::unwrap_used)]
        let summary = self.summary.last_mut().unwrap();
        summary.len = len as u32;
        self.index.append(&out).await?;
        self.index_file_offset += len;
        self.page_starts.clear();
        Ok(())
    }

    /// Writes the remaining data and the other components, makes them
    /// durable, then writes the TOC: from then on the SSTable exists.
    pub async fn finish(
        mut self,
        commitlog_position: Position,
        level: u32,
        lineage: Lineage,
    ) -> StorageResult<Descriptor> {
        if !self.raw.is_empty() {
            let raw = std::mem::take(&mut self.raw);
            self.write_chunk(&raw).await?;
        }
        self.flush_page().await?;
        self.stats.commitlog_position = commitlog_position;
        self.stats.level = level;
        self.stats.ancestors = lineage.ancestors;
        self.stats.last_of_run = lineage.last_of_run;

        let mut body = Vec::new();
        let mut e = Encoder { out: &mut body };
        e.u8(self.options.compression.id());
        e.var_u64(self.options.chunk_bytes as u64);
        e.var_u64(self.raw_start);
        e.var_u64(self.chunk_offsets.len() as u64);
        for offset in &self.chunk_offsets {
            e.var_u64(*offset);
        }
        e.var_u64(self.data_file_offset);
        let compression_info = seal_small(Component::CompressionInfo, &body);

        body.clear();
        let mut e = Encoder { out: &mut body };
        e.var_u64(self.summary.len() as u64);
        for s in &self.summary {
            s.encode(&mut e);
        }
        let summary = seal_small(Component::Summary, &body);

        body.clear();
        self.bloom.encode(&mut Encoder { out: &mut body });
        let filter = seal_small(Component::Filter, &body);

        body.clear();
        self.stats.encode(&mut Encoder { out: &mut body });
        let statistics = seal_small(Component::Statistics, &body);

        assert_eq!(self.data.len(), self.data_file_offset, "the data file holds every chunk");
        assert_eq!(self.index.len(), self.index_file_offset, "the index file holds every page");
        self.data.finish().await?;
        self.index.finish().await?;
        for (component, bytes) in [
            (Component::CompressionInfo, compression_info),
            (Component::Summary, summary),
            (Component::Filter, filter),
            (Component::Statistics, statistics),
        ] {
            shoal_io::write_durably(&self.descriptor.path(component), bytes, self.class).await?;
        }
        let toc: String = Component::ALL.iter().map(|c| format!("{}\n", c.file_suffix())).collect();
        let toc_path = self.descriptor.path(Component::Toc);
        let tmp = toc_path.with_extension("txt.tmp");
        shoal_io::replace_durably(&toc_path, &tmp, toc.into_bytes(), self.class).await?;
        Ok(self.descriptor)
    }

    /// Removes what was written (after a failure).
    pub async fn abort(self) {
        remove_files(&self.descriptor).await;
    }
}

/// Adds a partition's timestamps, tombstones and expiring cells to the
/// statistics.
struct Tally<'a> {
    stats: &'a mut Statistics,
}

impl Tally<'_> {
    fn timestamp(&mut self, t: i64) {
        self.stats.min_timestamp = self.stats.min_timestamp.min(t);
        self.stats.max_timestamp = self.stats.max_timestamp.max(t);
    }

    fn tombstone(&mut self, t: i64) {
        self.timestamp(t);
        self.stats.tombstones += 1;
    }

    fn expiry(&mut self, expires_at_s: i64) {
        self.stats.expiring_cells += 1;
        self.stats.max_expiry_s = self.stats.max_expiry_s.max(expires_at_s);
    }

    fn cell(&mut self, c: &Cell) {
        match &c.value {
            CellValue::Dead { .. } => self.tombstone(c.timestamp),
            CellValue::Counter { .. } => self.timestamp(c.timestamp),
            CellValue::Live { expiry, .. } => {
                self.timestamp(c.timestamp);
                if let Some(x) = expiry {
                    self.expiry(x.expires_at_s);
                }
            }
        }
    }

    fn row(&mut self, row: &Row) {
        if let Some(m) = &row.marker {
            self.timestamp(m.timestamp);
            if let Some(x) = m.expiry {
                self.expiry(x.expires_at_s);
            }
        }
        if let Some(t) = row.deletion {
            self.tombstone(t.timestamp);
        }
        for data in row.columns.values() {
            match data {
                ColumnData::Atomic(c) => self.cell(c),
                ColumnData::Collection(coll) => {
                    if let Some(t) = coll.tombstone {
                        self.tombstone(t.timestamp);
                    }
                    coll.cells.values().for_each(|cc| self.cell(&cc.cell));
                }
            }
        }
    }
}

/// Deletes every component of `descriptor` (TOC first, so a crash midway
/// leaves a TOC-less set that the next start removes).
pub async fn remove_files(descriptor: &Descriptor) {
    let toc = descriptor.path(Component::Toc);
    for path in std::iter::once(toc.with_extension("txt.tmp"))
        .chain(std::iter::once(toc))
        .chain(Component::ALL.iter().filter(|c| **c != Component::Toc).map(|c| descriptor.path(*c)))
    {
        if let Err(e) = shoal_io::remove_file_if_exists(&path, IoClass::Maintenance).await {
            tracing::warn!("cannot remove SSTable file: {e}");
        }
    }
}
