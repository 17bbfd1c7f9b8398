//! Frame body compression (spec section 5): LZ4 and Snappy, as negotiated by
//! the `COMPRESSION` option of STARTUP.
//!
//! Formats (the ones Cassandra and the drivers use):
//! - LZ4: a 4-byte big-endian uncompressed length, then one raw LZ4 block;
//! - Snappy: the raw Snappy format (its own varint length header, no framing).
//!
//! Invariant: decompression allocates the claimed uncompressed length only
//! after checking it against the frame size limit *and* against what the
//! compressed input can possibly expand to (LZ4 at most ~255x, Snappy at most
//! ~22x), so a tiny hostile frame cannot make the server allocate 256 MB.

use thiserror::Error;

/// Most an LZ4 block can expand per input byte (a run-length byte of 255).
const LZ4_MAX_RATIO: usize = 255;
/// Slack for the LZ4 bound: the minimum match length and nibbles of one token.
const LZ4_SLACK: usize = 1024;
/// Most a Snappy stream can expand per input byte (a 3-byte copy of 64).
const SNAPPY_MAX_RATIO: usize = 22;
const SNAPPY_SLACK: usize = 64;

/// A frame compression algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    Lz4,
    Snappy,
}

/// A body that could not be compressed or decompressed. The server answers a
/// decompression failure with a ProtocolError carrying this message.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CompressionError {
    #[error("{algorithm} compressed body of {len} bytes is too short to hold its uncompressed length")]
    MissingLength { algorithm: &'static str, len: usize },
    #[error("{algorithm} body claims {claimed} uncompressed bytes, more than the maximum frame size of {max} bytes")]
    TooLarge { algorithm: &'static str, claimed: usize, max: usize },
    #[error("{algorithm} body claims {claimed} uncompressed bytes, impossible for {compressed} compressed bytes")]
    ImpossibleLength { algorithm: &'static str, claimed: usize, compressed: usize },
    #[error("{algorithm} body decompressed to {actual} bytes but claims {claimed}")]
    LengthMismatch { algorithm: &'static str, claimed: usize, actual: usize },
    #[error("error decompressing {algorithm} frame body: {reason}")]
    Corrupt { algorithm: &'static str, reason: String },
    #[error("body of {len} bytes is too large to compress with {algorithm}")]
    InputTooLarge { algorithm: &'static str, len: usize },
}

impl Compression {
    /// The algorithm a STARTUP `COMPRESSION` value names (case-insensitive,
    /// as in Cassandra).
    pub fn from_name(name: &str) -> Option<Compression> {
        if name.eq_ignore_ascii_case("lz4") {
            Some(Compression::Lz4)
        } else if name.eq_ignore_ascii_case("snappy") {
            Some(Compression::Snappy)
        } else {
            None
        }
    }

    /// The name SUPPORTED advertises and STARTUP uses.
    pub fn name(self) -> &'static str {
        match self {
            Compression::Lz4 => "lz4",
            Compression::Snappy => "snappy",
        }
    }

    /// Appends the compressed form of `input` to `out`.
    pub fn compress(self, input: &[u8], out: &mut Vec<u8>) -> Result<(), CompressionError> {
        match self {
            Compression::Lz4 => lz4_compress(input, out),
            Compression::Snappy => snappy_compress(input, out),
        }
    }

    /// Decompresses a frame body, refusing to produce more than `max_len` bytes.
    pub fn decompress(self, input: &[u8], max_len: usize) -> Result<Vec<u8>, CompressionError> {
        match self {
            Compression::Lz4 => lz4_decompress(input, max_len),
            Compression::Snappy => snappy_decompress(input, max_len),
        }
    }
}

/// Checks a claimed uncompressed length before anything is allocated for it.
fn check_claim(
    algorithm: &'static str,
    claimed: usize,
    max: usize,
    compressed: usize,
    bound: usize,
) -> Result<(), CompressionError> {
    if claimed > max {
        return Err(CompressionError::TooLarge { algorithm, claimed, max });
    }
    if claimed > bound {
        return Err(CompressionError::ImpossibleLength { algorithm, claimed, compressed });
    }
    Ok(())
}

fn lz4_compress(input: &[u8], out: &mut Vec<u8>) -> Result<(), CompressionError> {
    let too_large = || CompressionError::InputTooLarge { algorithm: "lz4", len: input.len() };
    let len = u32::try_from(input.len()).map_err(|_| too_large())?;
    out.extend_from_slice(&len.to_be_bytes());
    let block_at = out.len();
    out.resize(block_at + lz4_flex::block::get_maximum_output_size(input.len()), 0);
    match lz4_flex::block::compress_into(input, &mut out[block_at..]) {
        Ok(written) => {
            out.truncate(block_at + written);
            Ok(())
        }
        Err(_) => {
            out.truncate(block_at - 4);
            Err(too_large())
        }
    }
}

fn lz4_decompress(input: &[u8], max_len: usize) -> Result<Vec<u8>, CompressionError> {
    let [a, b, c, d, ..] = *input else {
        return Err(CompressionError::MissingLength { algorithm: "lz4", len: input.len() });
    };
    let claimed = u32::from_be_bytes([a, b, c, d]) as usize;
    let block = &input[4..];
    if claimed == 0 {
        // Drivers differ in what follows a zero length; nothing can follow
        // meaningfully, so whatever it is is ignored.
        return Ok(Vec::new());
    }
    let bound = block.len().saturating_mul(LZ4_MAX_RATIO).saturating_add(LZ4_SLACK);
    check_claim("lz4", claimed, max_len, block.len(), bound)?;
    let mut output = vec![0u8; claimed];
    let actual = lz4_flex::block::decompress_into(block, &mut output)
        .map_err(|e| CompressionError::Corrupt { algorithm: "lz4", reason: e.to_string() })?;
    if actual != claimed {
        return Err(CompressionError::LengthMismatch { algorithm: "lz4", claimed, actual });
    }
    Ok(output)
}

fn snappy_compress(input: &[u8], out: &mut Vec<u8>) -> Result<(), CompressionError> {
    let too_large = || CompressionError::InputTooLarge { algorithm: "snappy", len: input.len() };
    let max = snap::raw::max_compress_len(input.len());
    if max == 0 && !input.is_empty() {
        return Err(too_large());
    }
    let at = out.len();
    out.resize(at + max.max(1), 0);
    match snap::raw::Encoder::new().compress(input, &mut out[at..]) {
        Ok(written) => {
            out.truncate(at + written);
            Ok(())
        }
        Err(_) => {
            out.truncate(at);
            Err(too_large())
        }
    }
}

fn snappy_decompress(input: &[u8], max_len: usize) -> Result<Vec<u8>, CompressionError> {
    let corrupt = |e: snap::Error| CompressionError::Corrupt { algorithm: "snappy", reason: e.to_string() };
    let claimed = snap::raw::decompress_len(input).map_err(corrupt)?;
    let bound = input.len().saturating_mul(SNAPPY_MAX_RATIO).saturating_add(SNAPPY_SLACK);
    check_claim("snappy", claimed, max_len, input.len(), bound)?;
    let mut output = vec![0u8; claimed];
    let actual = snap::raw::Decoder::new().decompress(input, &mut output).map_err(corrupt)?;
    if actual != claimed {
        return Err(CompressionError::LengthMismatch { algorithm: "snappy", claimed, actual });
    }
    Ok(output)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<Vec<u8>> {
        vec![
            Vec::new(),
            b"a".to_vec(),
            b"hello hello hello hello hello hello".to_vec(),
            (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect(),
            vec![0u8; 100_000],
        ]
    }

    #[test]
    fn round_trips() {
        for compression in [Compression::Lz4, Compression::Snappy] {
            for sample in samples() {
                let mut packed = vec![0xAA]; // compress appends
                assert_eq!(compression.compress(&sample, &mut packed), Ok(()));
                let back = compression.decompress(&packed[1..], 1 << 20);
                assert_eq!(back.as_deref(), Ok(&sample[..]), "{compression:?} {}", sample.len());
            }
        }
    }

    #[test]
    fn lz4_prefix_is_big_endian_length() {
        let mut packed = Vec::new();
        assert_eq!(Compression::Lz4.compress(&[1; 300], &mut packed), Ok(()));
        assert_eq!(&packed[..4], &[0, 0, 1, 44]);
    }

    #[test]
    fn highly_compressible_input_stays_within_the_ratio_bounds() {
        let zeros = vec![0u8; 4 << 20];
        for compression in [Compression::Lz4, Compression::Snappy] {
            let mut packed = Vec::new();
            assert_eq!(compression.compress(&zeros, &mut packed), Ok(()));
            assert_eq!(compression.decompress(&packed, 8 << 20).map(|v| v.len()), Ok(zeros.len()));
        }
    }

    #[test]
    fn claimed_lengths_are_bounded_before_allocating() {
        // 256 MB claimed from a 5-byte block.
        let hostile = [0x10, 0, 0, 0, 0];
        assert!(matches!(
            Compression::Lz4.decompress(&hostile, 1 << 30),
            Err(CompressionError::ImpossibleLength { .. })
        ));
        assert!(matches!(Compression::Lz4.decompress(&hostile, 1000), Err(CompressionError::TooLarge { .. })));
        // Snappy varint header claiming 2^28 bytes.
        let hostile = [0x80, 0x80, 0x80, 0x80, 0x01];
        assert!(matches!(
            Compression::Snappy.decompress(&hostile, 1 << 30),
            Err(CompressionError::ImpossibleLength { .. })
        ));
        let mut packed = Vec::new();
        assert_eq!(Compression::Snappy.compress(&[5; 1000], &mut packed), Ok(()));
        assert!(matches!(Compression::Snappy.decompress(&packed, 999), Err(CompressionError::TooLarge { .. })));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for compression in [Compression::Lz4, Compression::Snappy] {
            for input in [&[][..], &[0, 0, 0], &[0, 0, 0, 9, 0xFF, 0xFF], &[3, 0xFF, 0xFF, 0xFF]] {
                let _ = compression.decompress(input, 1 << 20);
            }
        }
        assert!(Compression::Lz4.decompress(&[0, 0, 0, 9, 0x90, 1, 2], 100).is_err());
        assert!(Compression::Snappy.decompress(&[9, 0xFF], 100).is_err());
    }

    #[test]
    fn names() {
        assert_eq!(Compression::from_name("LZ4"), Some(Compression::Lz4));
        assert_eq!(Compression::from_name("snappy"), Some(Compression::Snappy));
        assert_eq!(Compression::from_name("zstd"), None);
        assert_eq!(Compression::Snappy.name(), "snappy");
    }
}
