//! Per-chunk compression of SSTable data, chosen by the table's
//! `compression` option (Cassandra's class names).

use crate::error::StorageError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Lz4,
    Zstd,
}

impl Compression {
    /// From a table's `compression` map: `class` (or the older
    /// `sstable_compression`), `enabled: false` or an empty class for none.
    pub fn from_options(options: &std::collections::BTreeMap<String, String>) -> Compression {
        if options.get("enabled").is_some_and(|v| v.eq_ignore_ascii_case("false")) {
            return Compression::None;
        }
        let class = options.get("class").or_else(|| options.get("sstable_compression"));
        match class.map(|c| c.rsplit('.').next().unwrap_or(c)) {
            Some("ZstdCompressor") => Compression::Zstd,
            Some("") => Compression::None,
            // LZ4 is the default; Snappy and Deflate tables get LZ4 too.
            _ => Compression::Lz4,
        }
    }

    pub fn id(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Lz4 => 1,
            Compression::Zstd => 2,
        }
    }

    pub fn from_id(id: u8) -> Option<Compression> {
        match id {
            0 => Some(Compression::None),
            1 => Some(Compression::Lz4),
            2 => Some(Compression::Zstd),
            _ => None,
        }
    }

    pub fn compress(self, raw: &[u8]) -> Vec<u8> {
        match self {
            Compression::None => raw.to_vec(),
            Compression::Lz4 => lz4_flex::block::compress(raw),
            // Invariant: zstd only fails to compress on allocation failure or
            // bad parameters; level 1 is valid.
            #[allow(clippy::expect_used)]
            Compression::Zstd => zstd::bulk::compress(raw, 1).expect("zstd compression at level 1"),
        }
    }

    /// Decompresses a chunk whose uncompressed size is `raw_len`.
    pub fn decompress(self, compressed: &[u8], raw_len: usize) -> Result<Vec<u8>, StorageError> {
        let out = match self {
            Compression::None => Ok(compressed.to_vec()),
            Compression::Lz4 => lz4_flex::block::decompress(compressed, raw_len).map_err(|e| e.to_string()),
            Compression::Zstd => zstd::bulk::decompress(compressed, raw_len).map_err(|e| e.to_string()),
        };
        match out {
            Ok(raw) if raw.len() == raw_len => Ok(raw),
            Ok(_) => Err(StorageError::corrupt("decompressed chunk has the wrong length")),
            Err(e) => Err(StorageError::corrupt(format!("chunk does not decompress: {e}"))),
        }
    }
}
