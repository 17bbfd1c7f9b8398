//! Fuzzes commitlog replay: arbitrary bytes as segment 1 of shard 0, every
//! entry read back decoded as a mutation. Then the same bytes with the
//! segment header and every entry's checksum repaired, so mutations of the
//! payloads reach the mutation decoder. Nothing may panic, hang or allocate
//! by a length read from the file; entries must lie inside the segment, and
//! a mutation that decodes must survive re-encoding unchanged.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use shoal_fuzz::repair_segment;
use shoal_storage::commitlog::{
    decode_mutation, encode_mutation, read_segment, ENTRY_HEADER_BYTES, SEGMENT_HEADER_BYTES,
};

fuzz_target!(|data: &[u8]| {
    replay(data);
    replay(&repair_segment(data));
});

fn replay(data: &[u8]) {
    let path = Path::new("CommitLog-0-1.log");
    let (mut entries, mut bytes) = (0u64, 0u64);
    let report = read_segment(path, 0, 1, data, &mut |entry| {
        let offset = entry.position.offset as usize;
        assert_eq!(entry.position.segment, 1);
        assert!(offset >= SEGMENT_HEADER_BYTES as usize);
        assert!(offset + (ENTRY_HEADER_BYTES as usize) + entry.payload.len() <= data.len());
        entries += 1;
        bytes += u64::from(ENTRY_HEADER_BYTES) + entry.payload.len() as u64;
        if let Ok((table, position, update)) = decode_mutation(entry.payload) {
            let mut again = Vec::new();
            encode_mutation(&mut again, table, &position, &update);
            assert_eq!(decode_mutation(&again), Ok((table, position, update)));
        }
    });
    assert_eq!(report.entries, entries);
    assert_eq!(report.bytes, bytes);
    assert!(report.bytes as usize + SEGMENT_HEADER_BYTES as usize <= data.len().max(SEGMENT_HEADER_BYTES as usize));
}
