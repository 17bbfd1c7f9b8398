//! Cassandra's Murmur3Partitioner: the token of a partition key, and the
//! serialized form of (possibly composite) partition keys that is hashed.
//!
//! Invariants:
//! - [`murmur3_token`] equals Cassandra's and ScyllaDB's token for the same
//!   key bytes, including Cassandra's quirk of sign-extending the tail bytes
//!   (Java's signed `byte` widened to `long`), which differs from reference
//!   MurmurHash3 for tail bytes ≥ 0x80. Drivers compute the same value for
//!   token-aware routing, so this must never change.
//! - A hashed token is never `i64::MIN`: that value is mapped to `i64::MAX`,
//!   leaving `i64::MIN` as the minimum token (what the empty key gets).
//! - [`split_partition_key`] inverts [`serialize_partition_key`] and rejects
//!   malformed input instead of panicking.

use thiserror::Error;

/// The largest serialized partition key: keys are stored with a u16 length.
pub const MAX_KEY_LEN: usize = u16::MAX as usize;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TokenError {
    #[error("a partition key needs at least one component")]
    NoComponents,
    /// Cassandra's and ScyllaDB's text (`validation::is_cql_key_invalid`).
    #[error("Key length of {0} is longer than maximum of 65535")]
    KeyTooLong(usize),
    #[error("malformed composite partition key: {0}")]
    Malformed(&'static str),
    #[error("composite partition key has {got} components, expected {expected}")]
    ComponentCount { expected: usize, got: usize },
}

const C1: u64 = 0x87c3_7b91_1142_53d5;
const C2: u64 = 0x4cf5_ad43_2745_937f;

/// The token of a serialized partition key. The empty key gets the minimum
/// token, `i64::MIN`, as in Cassandra.
pub fn murmur3_token(key: &[u8]) -> i64 {
    if key.is_empty() {
        return i64::MIN;
    }
    match murmur3_x64_128(key, 0).0 as i64 {
        i64::MIN => i64::MAX,
        token => token,
    }
}

/// Cassandra's `MurmurHash.hash3_x64_128`: both 64-bit halves (h1, h2).
pub fn murmur3_x64_128(key: &[u8], seed: u64) -> (u64, u64) {
    let (mut h1, mut h2) = (seed, seed);
    let blocks = key.chunks_exact(16);
    let tail = blocks.remainder();
    for block in blocks {
        let (k1, k2) = block.split_at(8);
        h1 ^= mix_k1(le_u64(k1));
        h1 = h1.rotate_left(27).wrapping_add(h2).wrapping_mul(5).wrapping_add(0x52dc_e729);
        h2 ^= mix_k2(le_u64(k2));
        h2 = h2.rotate_left(31).wrapping_add(h1).wrapping_mul(5).wrapping_add(0x3849_5ab5);
    }
    let (k1, k2) = tail_words(tail);
    if tail.len() > 8 {
        h2 ^= mix_k2(k2);
    }
    if !tail.is_empty() {
        h1 ^= mix_k1(k1);
    }
    let len = key.len() as u64;
    h1 ^= len;
    h2 ^= len;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix(h1);
    h2 = fmix(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    (h1, h2)
}

/// The body reads blocks as unsigned little-endian words.
fn le_u64(bytes: &[u8]) -> u64 {
    bytes.iter().rev().fold(0, |acc, &b| (acc << 8) | u64::from(b))
}

/// The tail (< 16 bytes) as two words, byte i at bit 8·(i mod 8). Each byte
/// is sign-extended before shifting — Cassandra's `(long) key.get(i)` — so a
/// byte ≥ 0x80 sets every bit above it. XOR makes the order irrelevant.
fn tail_words(tail: &[u8]) -> (u64, u64) {
    let (mut k1, mut k2) = (0u64, 0u64);
    for (i, &byte) in tail.iter().enumerate() {
        let extended = byte as i8 as i64 as u64;
        if i < 8 {
            k1 ^= extended << (8 * i);
        } else {
            k2 ^= extended << (8 * (i - 8));
        }
    }
    (k1, k2)
}

fn mix_k1(k1: u64) -> u64 {
    k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2)
}

fn mix_k2(k2: u64) -> u64 {
    k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1)
}

fn fmix(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// The partition key bytes that are hashed and stored: a single component
/// as is; several as Cassandra's `CompositeType` — per component a u16
/// big-endian length, the bytes, and an end-of-component 0x00.
pub fn serialize_partition_key(components: &[&[u8]]) -> Result<Vec<u8>, TokenError> {
    let key = match components {
        [] => return Err(TokenError::NoComponents),
        [single] => single.to_vec(),
        many => {
            let total = many.iter().map(|c| c.len() + 3).sum();
            let mut key = Vec::with_capacity(total);
            for component in many {
                let len = u16::try_from(component.len()).map_err(|_| TokenError::KeyTooLong(total))?;
                key.extend_from_slice(&len.to_be_bytes());
                key.extend_from_slice(component);
                key.push(0x00);
            }
            key
        }
    };
    if key.len() > MAX_KEY_LEN {
        return Err(TokenError::KeyTooLong(key.len()));
    }
    Ok(key)
}

/// The components of a key serialized by [`serialize_partition_key`] for a
/// table whose partition key has `n_components` columns.
pub fn split_partition_key(n_components: usize, key: &[u8]) -> Result<Vec<&[u8]>, TokenError> {
    match n_components {
        0 => return Err(TokenError::NoComponents),
        1 => return Ok(vec![key]),
        _ => {}
    }
    let mut components = Vec::with_capacity(n_components);
    let mut rest = key;
    while !rest.is_empty() {
        let (len, after) = rest.split_at_checked(2).ok_or(TokenError::Malformed("truncated component length"))?;
        let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
        let (component, after) = after.split_at_checked(len).ok_or(TokenError::Malformed("truncated component"))?;
        let (end, after) = after.split_first().ok_or(TokenError::Malformed("missing end-of-component byte"))?;
        if *end != 0 {
            return Err(TokenError::Malformed("end-of-component byte is not 0"));
        }
        components.push(component);
        rest = after;
    }
    if components.len() != n_components {
        return Err(TokenError::ComponentCount { expected: n_components, got: components.len() });
    }
    Ok(components)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `SELECT token(k)` for int keys, from Cassandra's own distributed
    /// tests and cqlsh tests.
    #[test]
    fn int_keys_match_cassandra() {
        let known = [
            (1, -4_069_959_284_402_364_209),
            (2, -3_248_873_570_005_575_792),
            (3, 9_010_454_139_840_013_625),
            (4, -2_729_420_104_000_364_805),
            (5, -7_509_452_495_886_106_294),
            (10, -6_715_243_485_458_697_746),
            (12, 8_582_886_034_424_406_875),
            (20, 1_388_667_306_199_997_068),
        ];
        for (key, token) in known {
            assert_eq!(murmur3_token(&i32::to_be_bytes(key)), token, "int {key}");
        }
    }

    /// The vectors the drivers test their token-aware routing with; several
    /// have tail bytes ≥ 0x80, which only match with sign extension.
    #[test]
    fn driver_vectors_match() {
        let pattern: Vec<u8> = [0x00, 0xff, 0x10, 0xfa, 0x99].repeat(10);
        let counting: Vec<u8> = (1..=16).collect();
        let known: [(&[u8], i64); 6] = [
            (b"123", -7_468_325_962_851_647_638),
            (&pattern, 5_837_342_703_291_459_765),
            (&[0xfe; 8], -8_927_430_733_708_461_935),
            (&[0x10; 8], 1_446_172_840_243_228_796),
            (b"9223372036854775807", 7_162_290_910_810_015_547),
            (&counting, -5_563_837_382_979_743_776),
        ];
        for (key, token) in known {
            assert_eq!(murmur3_token(key), token, "{key:02x?}");
        }
    }

    #[test]
    fn raw_hash_of_nothing_is_zero() {
        // Finalization of all-zero state stays zero; the partitioner maps the
        // empty key to the minimum token instead (below).
        assert_eq!(murmur3_x64_128(&[], 0), (0, 0));
    }

    #[test]
    fn empty_key_gets_the_minimum_token() {
        assert_eq!(murmur3_token(&[]), i64::MIN);
    }

    #[test]
    fn composite_keys_serialize_like_cassandra() {
        // (int 1, text '2') — token taken from a Cassandra cluster by a
        // driver's test suite.
        let key = serialize_partition_key(&[&[0, 0, 0, 1], b"2"]).expect("small key");
        assert_eq!(key, [0, 4, 0, 0, 0, 1, 0, 0, 1, b'2', 0]);
        assert_eq!(murmur3_token(&key), 4_093_852_821_103_061_060);
        assert_eq!(split_partition_key(2, &key), Ok(vec![&[0, 0, 0, 1][..], b"2"]));
        // One component is the bare value.
        assert_eq!(serialize_partition_key(&[b"abc"]), Ok(b"abc".to_vec()));
        assert_eq!(split_partition_key(1, b"abc"), Ok(vec![&b"abc"[..]]));
        // Empty components are allowed inside composites.
        let key = serialize_partition_key(&[b"", b"", b"x"]).expect("small key");
        assert_eq!(split_partition_key(3, &key), Ok(vec![&b""[..], b"", b"x"]));
    }

    #[test]
    fn malformed_composites_are_rejected() {
        assert_eq!(serialize_partition_key(&[]), Err(TokenError::NoComponents));
        assert!(matches!(serialize_partition_key(&[&[0; 70_000]]), Err(TokenError::KeyTooLong(70_000))));
        assert!(matches!(serialize_partition_key(&[&[0; 70_000], b"a"]), Err(TokenError::KeyTooLong(_))));
        assert!(matches!(serialize_partition_key(&[&[0; 40_000], &[0; 40_000]]), Err(TokenError::KeyTooLong(_))));
        assert_eq!(split_partition_key(0, b""), Err(TokenError::NoComponents));
        assert_eq!(split_partition_key(2, &[0]), Err(TokenError::Malformed("truncated component length")));
        assert_eq!(split_partition_key(2, &[0, 5, 1]), Err(TokenError::Malformed("truncated component")));
        assert_eq!(split_partition_key(2, &[0, 1, 1]), Err(TokenError::Malformed("missing end-of-component byte")));
        assert_eq!(split_partition_key(2, &[0, 1, 1, 1]), Err(TokenError::Malformed("end-of-component byte is not 0")));
        assert_eq!(split_partition_key(2, &[0, 1, 1, 0]), Err(TokenError::ComponentCount { expected: 2, got: 1 }));
        assert_eq!(split_partition_key(2, &[]), Err(TokenError::ComponentCount { expected: 2, got: 0 }));
    }

    #[test]
    fn every_tail_length_hashes_without_panicking() {
        let data: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(37)).collect();
        let tokens: std::collections::HashSet<i64> = (1..=data.len()).map(|n| murmur3_token(&data[..n])).collect();
        assert_eq!(tokens.len(), data.len(), "distinct prefixes hash differently");
    }
}
