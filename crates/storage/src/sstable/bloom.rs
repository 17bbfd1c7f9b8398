//! A Bloom filter over partition keys: says "surely absent" for most keys
//! an SSTable does not hold, so a point read skips it without I/O.
//!
//! The k probe positions come from double hashing (Kirsch–Mitzenmacher) of
//! two independent 64-bit hashes: the partition's Murmur3 token, already
//! computed by the layers above, and xxh3 of the key bytes.

use crate::codec::{DecodeError, Decoder, Encoder};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BloomFilter {
    bits: Vec<u64>,
    hashes: u32,
}

/// The most hash functions any filter uses; bounds work per probe.
const MAX_HASHES: u32 = 20;

impl BloomFilter {
    /// A filter sized for `keys` keys at false-positive chance `fp_chance`.
    pub fn new(keys: usize, fp_chance: f64) -> BloomFilter {
        let fp = fp_chance.clamp(1e-6, 0.5);
        let keys = keys.max(1) as f64;
        let ln2 = std::f64::consts::LN_2;
        let bits = (-keys * fp.ln() / (ln2 * ln2)).ceil().max(64.0);
        let hashes = ((bits / keys) * ln2).round().clamp(1.0, f64::from(MAX_HASHES)) as u32;
        BloomFilter { bits: vec![0; (bits as usize).div_ceil(64)], hashes }
    }

    fn probes(&self, token: i64, key: &[u8]) -> impl Iterator<Item = usize> {
        let h1 = token as u64;
        let h2 = xxhash_rust::xxh3::xxh3_64(key) | 1;
        let nbits = (self.bits.len() * 64) as u64;
        (0..u64::from(self.hashes)).map(move |i| (h1.wrapping_add(i.wrapping_mul(h2)) % nbits) as usize)
    }

    pub fn insert(&mut self, token: i64, key: &[u8]) {
        let probes: Vec<usize> = self.probes(token, key).collect();
        for bit in probes {
            self.bits[bit / 64] |= 1 << (bit % 64);
        }
    }

    /// Heap held by the filter's bits.
    pub fn memory_bytes(&self) -> usize {
        self.bits.capacity() * std::mem::size_of::<u64>()
    }

    pub fn may_contain(&self, token: i64, key: &[u8]) -> bool {
        self.probes(token, key).all(|bit| self.bits[bit / 64] & (1 << (bit % 64)) != 0)
    }

    pub fn encode(&self, e: &mut Encoder) {
        e.var_u64(u64::from(self.hashes));
        e.var_u64(self.bits.len() as u64);
        for word in &self.bits {
            e.out.extend_from_slice(&word.to_le_bytes());
        }
    }

    pub fn decode(d: &mut Decoder) -> Result<BloomFilter, DecodeError> {
        let hashes = d.var_u32()?;
        if hashes == 0 || hashes > MAX_HASHES {
            return Err(d.error("bloom filter hash count out of range"));
        }
        let words = d.var_u64()? as usize;
        let bytes = d.slice(words.checked_mul(8).ok_or_else(|| d.error("bloom filter too large"))?)?;
        if words == 0 {
            return Err(d.error("empty bloom filter"));
        }
        let bits = bytes.chunks_exact(8).map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default())).collect();
        Ok(BloomFilter { bits, hashes })
    }

    pub fn size_bytes(&self) -> usize {
        self.bits.len() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_false_negatives_and_about_the_asked_false_positive_rate() {
        let mut filter = BloomFilter::new(10_000, 0.01);
        for i in 0..10_000i64 {
            filter.insert(i.wrapping_mul(0x1e37_79b9_7f4a_7c15), &i.to_be_bytes());
        }
        for i in 0..10_000i64 {
            assert!(filter.may_contain(i.wrapping_mul(0x1e37_79b9_7f4a_7c15), &i.to_be_bytes()));
        }
        let false_positives = (10_000..110_000i64)
            .filter(|i| filter.may_contain(i.wrapping_mul(0x1e37_79b9_7f4a_7c15), &i.to_be_bytes()))
            .count();
        assert!(false_positives < 2_000, "{false_positives} false positives in 100000");
        let mut out = Vec::new();
        filter.encode(&mut Encoder { out: &mut out });
        assert_eq!(BloomFilter::decode(&mut Decoder::new(&out)), Ok(filter));
    }
}
