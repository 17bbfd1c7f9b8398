//! Fuzzes the decoder of a shard's saved hot keys (`saved_caches/*.keys`,
//! read at start): any bytes give keys or an error, never a panic or an
//! allocation larger than the input; what decodes survives a round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_storage::cache::saved::{decode, encode};

fuzz_target!(|data: &[u8]| {
    if let Ok(keys) = decode(data) {
        assert_eq!(decode(&encode(&keys)).ok(), Some(keys), "decoded keys do not survive a round trip");
    }
});
