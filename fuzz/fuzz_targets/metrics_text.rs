//! Fuzz target for the Prometheus text reader that `nodetool` applies to a
//! node's `/metrics` answer: any bytes give some samples, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_metrics::parse_text;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for sample in parse_text(&text) {
        assert!(!sample.name.is_empty());
        assert!(!sample.name.contains(['{', ' ']));
    }
});
