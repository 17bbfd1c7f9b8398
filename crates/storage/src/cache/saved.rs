//! The file of a shard's hottest cached partitions, for a warm restart:
//! which partitions to read back into the cache at start, most recently
//! used first. Only keys are saved, never data: the data is read from the
//! SSTables again, so a stale file can cost time but never return a stale
//! row.
//!
//! Layout: `SHOALHK1`, a varint count, then per key the table id (16
//! bytes), the token (8 bytes, big-endian) and the key (varint length and
//! bytes); last, a crc32c (little-endian) of everything before it. The
//! file comes from disk, so decoding trusts nothing: a bad checksum,
//! length or count is an error, never a panic or an allocation the file
//! did not pay for.

use uuid::Uuid;

use crate::codec::{DecodeError, Decoder, Encoder};
use crate::partition::PartitionPosition;

const MAGIC: &[u8; 8] = b"SHOALHK1";
/// Table id, token and a key's length byte: the least a key takes.
const MIN_KEY_BYTES: usize = 16 + 8 + 1;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedKey {
    pub table: Uuid,
    pub position: PartitionPosition,
}

pub fn encode(keys: &[SavedKey]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    let mut e = Encoder { out: &mut out };
    e.var_u64(keys.len() as u64);
    for key in keys {
        e.out.extend_from_slice(key.table.as_bytes());
        e.out.extend_from_slice(&key.position.token.to_be_bytes());
        e.bytes(&key.position.key);
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

pub fn decode(bytes: &[u8]) -> Result<Vec<SavedKey>, DecodeError> {
    let bad = |offset: usize, what: &'static str| DecodeError { offset, what };
    if bytes.len() < MAGIC.len() + 1 + 4 || &bytes[..MAGIC.len()] != MAGIC {
        return Err(bad(0, "not a saved-cache file"));
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    // Invariant: `crc` is the last 4 bytes.
    #[allow(clippy::unwrap_used)]
    if crc32c::crc32c(body) != u32::from_le_bytes(crc.try_into().unwrap()) {
        return Err(bad(body.len(), "checksum mismatch"));
    }
    let mut d = Decoder::new(&body[MAGIC.len()..]);
    let count = d.var_u64()?;
    if count > (body.len() / MIN_KEY_BYTES) as u64 {
        return Err(d.error("more keys than the file can hold"));
    }
    let mut keys = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let table = Uuid::from_slice(d.slice(16)?).map_err(|_| d.error("bad table id"))?;
        let token = d.fixed_i64()?;
        let key = d.bytes()?;
        keys.push(SavedKey { table, position: PartitionPosition { token, key } });
    }
    if !d.is_empty() {
        return Err(d.error("bytes after the last key"));
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn keys() -> Vec<SavedKey> {
        (0..50u8)
            .map(|i| SavedKey {
                table: Uuid::from_bytes([i % 3; 16]),
                position: PartitionPosition {
                    token: i64::from(i) * -7_000_000_001,
                    key: Bytes::from(vec![i; i as usize]),
                },
            })
            .collect()
    }

    #[test]
    fn keys_come_back_in_order() {
        assert_eq!(decode(&encode(&keys())).expect("decodes"), keys());
        assert_eq!(decode(&encode(&[])).expect("decodes"), vec![]);
    }

    #[test]
    fn damage_anywhere_is_an_error() {
        let good = encode(&keys());
        for at in 0..good.len() {
            let mut bad = good.clone();
            bad[at] ^= 0x40;
            assert!(decode(&bad).is_err(), "a flipped byte at {at} went unnoticed");
        }
        for len in 0..good.len() {
            assert!(decode(&good[..len]).is_err(), "a file cut at {len} went unnoticed");
        }
    }
}
