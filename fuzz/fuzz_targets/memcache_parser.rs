//! Fuzzes memcached request framing and parsing (text and meta commands):
//! any bytes split into requests, errors answered in memcached's words,
//! "incomplete" or "close", never a panic; every request takes at least
//! one byte and no more than the buffer holds, so a connection's parse
//! loop always makes progress.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_memcache::parse::{parse, Limits, Parsed};

/// Small, so that the "too large" path and its skip are reached.
const LIMITS: Limits = Limits { item_size_max_bytes: 64 };

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    loop {
        match parse(rest, &LIMITS) {
            Parsed::Request { consumed, .. } => {
                assert!(consumed > 0 && consumed <= rest.len(), "consumed {consumed} of {}", rest.len());
                rest = &rest[consumed..];
            }
            Parsed::Incomplete | Parsed::Close => break,
        }
    }
});
