//! The SSTable on-disk format: file names, the header every component
//! starts with, small checksummed components, and the statistics.
//!
//! An SSTable is a set of component files named
//! `shard<S>-<generation>-<Component>`:
//! - `Data.db`: the partitions, encoded by [`crate::codec`], as one stream
//!   cut into chunks of `chunk_len` raw bytes, each compressed on its own and
//!   stored as `[u32 stored length][u32 crc32c][bytes]`;
//! - `CompressionInfo.db`: codec, chunk length (at most [`MAX_CHUNK_BYTES`])
//!   and every chunk's file offset;
//! - `Index.db`: index entries (key → data offset, length and clustering
//!   samples) in pages of up to [`INDEX_PAGE_ENTRIES`], each page
//!   `[u32 length][u32 crc32c][entries][u32 offset of each entry][u32 count]`
//!   (version 1 had no offsets or count: see `index_page`);
//! - `Summary.db`: the first key and place of every index page (kept in RAM);
//! - `Filter.db`: the Bloom filter (kept in RAM);
//! - `Statistics.db`: key range, timestamps, tombstone and TTL counts, the
//!   commitlog position the data covers, the compaction level;
//! - `TOC.txt`: the list of components, written last (to a temporary name,
//!   fsynced, renamed): an SSTable without its TOC is half-written and is
//!   removed at start.
//!
//! Every binary component starts with [`MAGIC`], the format version and the
//! component kind, checked on open; the small ones end with a crc32c of
//! their body. Versions [`OLDEST_VERSION`] to [`VERSION`] are read; only
//! [`VERSION`] is written.

use std::path::{Path, PathBuf};

use crate::codec::{Decoder, Encoder};
use crate::commitlog::Position;
use crate::error::{StorageError, StorageResult};
use crate::partition::PartitionPosition;

pub const MAGIC: &[u8; 8] = b"SHOALSST";
/// The format version written. 2 stores each index page's entry offsets.
pub const VERSION: u16 = 2;
/// The oldest format version read.
pub const OLDEST_VERSION: u16 = 1;
pub const HEADER_BYTES: usize = MAGIC.len() + 2 + 1;

/// Index entries per index page (and so per summary entry).
pub const INDEX_PAGE_ENTRIES: usize = 128;
/// The largest chunk (raw bytes) an SSTable may have: a reader allocates a
/// chunk's length before decompressing it, so a damaged compression info
/// must not name a larger one.
pub const MAX_CHUNK_BYTES: usize = 16 << 20;
/// A clustering sample is taken every this many raw bytes of a partition,
/// so a slice of a large partition reads only the runs it needs.
pub const CLUSTERING_SAMPLE_BYTES: u64 = 64 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    Data,
    CompressionInfo,
    Index,
    Summary,
    Filter,
    Statistics,
    Toc,
}

impl Component {
    pub const ALL: [Component; 7] = [
        Component::Data,
        Component::CompressionInfo,
        Component::Index,
        Component::Summary,
        Component::Filter,
        Component::Statistics,
        Component::Toc,
    ];

    pub fn file_suffix(self) -> &'static str {
        match self {
            Component::Data => "Data.db",
            Component::CompressionInfo => "CompressionInfo.db",
            Component::Index => "Index.db",
            Component::Summary => "Summary.db",
            Component::Filter => "Filter.db",
            Component::Statistics => "Statistics.db",
            Component::Toc => "TOC.txt",
        }
    }

    fn kind(self) -> u8 {
        self as u8
    }
}

/// Which SSTable: its directory, owning shard and generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Descriptor {
    pub dir: PathBuf,
    pub shard: usize,
    pub generation: u64,
}

impl Descriptor {
    pub fn path(&self, component: Component) -> PathBuf {
        self.dir.join(format!("shard{}-{}-{}", self.shard, self.generation, component.file_suffix()))
    }

    /// Parses `shard<S>-<generation>-<Component>`; `None` for other names.
    pub fn parse(dir: &Path, file_name: &str) -> Option<(Descriptor, Option<Component>)> {
        let rest = file_name.strip_prefix("shard")?;
        let (shard, rest) = rest.split_once('-')?;
        let (generation, suffix) = rest.split_once('-')?;
        let descriptor =
            Descriptor { dir: dir.to_path_buf(), shard: shard.parse().ok()?, generation: generation.parse().ok()? };
        Some((descriptor, Component::ALL.into_iter().find(|c| c.file_suffix() == suffix)))
    }

    pub fn name(&self) -> String {
        format!("{}/shard{}-{}", self.dir.display(), self.shard, self.generation)
    }
}

pub fn write_header(out: &mut Vec<u8>, component: Component) {
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.push(component.kind());
}

/// Checks a component's header; returns its format version.
pub fn check_header(bytes: &[u8], component: Component) -> StorageResult<u16> {
    if bytes.len() < HEADER_BYTES || &bytes[..MAGIC.len()] != MAGIC {
        return Err(StorageError::corrupt("not a Shoal SSTable component (bad magic)"));
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    if !(OLDEST_VERSION..=VERSION).contains(&version) {
        return Err(StorageError::corrupt(format!(
            "SSTable format version {version}; this build reads {OLDEST_VERSION} to {VERSION}"
        )));
    }
    if bytes[10] != component.kind() {
        return Err(StorageError::corrupt("component kind does not match the file name"));
    }
    Ok(version)
}

/// The bytes before a block's body: its length and checksum.
pub const BLOCK_HEADER_BYTES: usize = 8;

/// A checksummed block, as data chunks and index pages are stored:
/// `[u32 body length][u32 crc32c of body][body]`.
pub fn frame_block(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + BLOCK_HEADER_BYTES);
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(body).to_le_bytes());
    out.extend_from_slice(body);
    out
}

/// The body of a block read whole, after checking length and checksum.
pub fn open_block(bytes: &[u8]) -> StorageResult<&[u8]> {
    if bytes.len() < BLOCK_HEADER_BYTES {
        return Err(StorageError::corrupt("block shorter than its header"));
    }
    let len = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
    let crc = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
    let body = &bytes[BLOCK_HEADER_BYTES..];
    if len != body.len() || crc32c::crc32c(body) != crc {
        return Err(StorageError::corrupt("checksum mismatch"));
    }
    Ok(body)
}

/// A small component: header, body, crc32c of the body.
pub fn seal_small(component: Component, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_BYTES + body.len() + 4);
    write_header(&mut out, component);
    out.extend_from_slice(body);
    out.extend_from_slice(&crc32c::crc32c(body).to_le_bytes());
    out
}

/// The body of a small component, after checking header and checksum.
pub fn open_small(component: Component, bytes: &[u8]) -> StorageResult<&[u8]> {
    check_header(bytes, component)?;
    if bytes.len() < HEADER_BYTES + 4 {
        return Err(StorageError::corrupt("component is truncated"));
    }
    let (body, crc) = bytes[HEADER_BYTES..].split_at(bytes.len() - HEADER_BYTES - 4);
    if crc32c::crc32c(body).to_le_bytes() != crc {
        return Err(StorageError::corrupt("checksum mismatch"));
    }
    Ok(body)
}

/// What the SSTable holds, for reads (key range), compaction (timestamps,
/// tombstones, level) and recovery (commitlog position).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statistics {
    pub partitions: u64,
    pub rows: u64,
    pub min_timestamp: i64,
    pub max_timestamp: i64,
    /// Partition, row, range and cell tombstones.
    pub tombstones: u64,
    /// Cells and row markers with a TTL, and the latest expiry among them.
    pub expiring_cells: u64,
    pub max_expiry_s: i64,
    /// Bytes of encoded partitions (before compression).
    pub raw_bytes: u64,
    pub first: Option<PartitionPosition>,
    pub last: Option<PartitionPosition>,
    /// Every commitlog entry of this table before this position is in an
    /// SSTable: replay skips them.
    pub commitlog_position: Position,
    /// Leveled compaction's level; 0 for flushed SSTables.
    pub level: u32,
    /// The generations this SSTable was compacted from: if they are still
    /// on disk at start (a crash between writing it and deleting them),
    /// they are deleted then.
    pub ancestors: Vec<u64>,
    /// False on every output of a compaction but its last: a compaction
    /// that splits its output finishes the outputs one by one, and only
    /// the last one's existence says the whole run is on disk (see
    /// `Table::open`). True for flushes. Files written before this field
    /// existed read as true (their compactions wrote one output).
    pub last_of_run: bool,
}

impl Default for Statistics {
    fn default() -> Self {
        Statistics {
            partitions: 0,
            rows: 0,
            min_timestamp: i64::MAX,
            max_timestamp: i64::MIN,
            tombstones: 0,
            expiring_cells: 0,
            max_expiry_s: i64::MIN,
            raw_bytes: 0,
            first: None,
            last: None,
            commitlog_position: Position::ZERO,
            level: 0,
            ancestors: Vec::new(),
            last_of_run: true,
        }
    }
}

impl Statistics {
    pub fn encode(&self, e: &mut Encoder) {
        for v in [self.partitions, self.rows, self.tombstones, self.expiring_cells, self.raw_bytes] {
            e.var_u64(v);
        }
        for v in [self.min_timestamp, self.max_timestamp, self.max_expiry_s] {
            e.var_i64(v);
        }
        for position in [&self.first, &self.last] {
            match position {
                None => e.u8(0),
                Some(p) => {
                    e.u8(1);
                    e.var_i64(p.token);
                    e.bytes(&p.key);
                }
            }
        }
        e.var_u64(self.commitlog_position.segment);
        e.var_u64(u64::from(self.commitlog_position.offset));
        e.var_u64(u64::from(self.level));
        e.var_u64(self.ancestors.len() as u64);
        for generation in &self.ancestors {
            e.var_u64(*generation);
        }
        e.u8(u8::from(self.last_of_run));
    }

    pub fn decode(d: &mut Decoder) -> StorageResult<Statistics> {
        let (partitions, rows, tombstones, expiring_cells, raw_bytes) =
            (d.var_u64()?, d.var_u64()?, d.var_u64()?, d.var_u64()?, d.var_u64()?);
        let (min_timestamp, max_timestamp, max_expiry_s) = (d.var_i64()?, d.var_i64()?, d.var_i64()?);
        let mut position = || -> StorageResult<Option<PartitionPosition>> {
            Ok(match d.u8()? {
                0 => None,
                1 => Some(PartitionPosition { token: d.var_i64()?, key: d.bytes()? }),
                _ => return Err(StorageError::corrupt("bad key flag in statistics")),
            })
        };
        let (first, last) = (position()?, position()?);
        let commitlog_position = Position { segment: d.var_u64()?, offset: d.var_u32()? };
        let level = d.var_u32()?;
        let n = d.len()?;
        let mut ancestors = Vec::with_capacity(n);
        for _ in 0..n {
            ancestors.push(d.var_u64()?);
        }
        // Added later at the end: older files end before it.
        let last_of_run = match if d.is_empty() { 1 } else { d.u8()? } {
            0 => false,
            1 => true,
            _ => return Err(StorageError::corrupt("bad run flag in statistics")),
        };
        Ok(Statistics {
            partitions,
            rows,
            min_timestamp,
            max_timestamp,
            tombstones,
            expiring_cells,
            max_expiry_s,
            raw_bytes,
            first,
            last,
            commitlog_position,
            level,
            ancestors,
            last_of_run,
        })
    }
}
