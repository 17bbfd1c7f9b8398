//! Hash maps keyed by partition: the key's hash is its partition token (a
//! murmur3 hash already), handed to the map as it is, so a lookup hashes no
//! key bytes (SipHash over a key and a table id cost more than the rest of
//! a lock's bookkeeping).
//!
//! A key type opts in by hashing itself as one `write_u64` of its token
//! (mixed with whatever else tells keys of equal tokens apart cheaply);
//! equality still compares whole keys, so equal tokens only share a bucket.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

pub(crate) type TokenHashMap<K, V> = HashMap<K, V, BuildHasherDefault<TokenHasher>>;

#[derive(Default)]
pub(crate) struct TokenHasher(u64);

impl Hasher for TokenHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    /// Other input (a key type that does not opt in): FNV-1a, correct if
    /// not fast.
    fn write(&mut self, bytes: &[u8]) {
        const PRIME: u64 = 0x0100_0000_01b3;
        let mut hash = if self.0 == 0 { 0xcbf2_9ce4_8422_2325 } else { self.0 };
        for b in bytes {
            hash = (hash ^ u64::from(*b)).wrapping_mul(PRIME);
        }
        self.0 = hash;
    }

    fn write_u64(&mut self, n: u64) {
        self.0 ^= n;
    }

    fn write_i64(&mut self, n: i64) {
        self.write_u64(n as u64);
    }
}
