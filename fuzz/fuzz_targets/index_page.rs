//! Fuzzes the decoder of one partition-index page (`sstable::index_page`),
//! in both format versions: version 1's entries alone, and version 2's
//! entries followed by their offsets and count. Any bytes must open as a
//! page or fail with an error, never panic or allocate by a length read
//! from them; a page that opens must answer every search without a panic,
//! and when its entries all decode, each must be found where it is and be
//! in strictly increasing order. Any bytes reopened as a page read before
//! (`IndexPage::reopen`, which does not walk the entries) must answer
//! searches without a panic too.
//!
//! An input is `[flags][raw_len: u16 LE][page body]`: bit 0 of the flags
//! picks version 2 over 1, bit 1 an unbounded data stream over `raw_len`.
//! The position the summary would name for the page is read from the body's
//! start (an 8-byte token, a key), as a valid page begins, so that the
//! fuzzer gets past the first check without guessing it.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use shoal_storage::codec::Decoder;
use shoal_storage::sstable::index_page::IndexPage;
use shoal_storage::PartitionPosition;

fuzz_target!(|data: &[u8]| {
    let [flags, lo, hi, body @ ..] = data else { return };
    let version = if flags & 1 == 0 { 1 } else { 2 };
    let raw_len = if flags & 2 == 0 { u64::from(u16::from_le_bytes([*lo, *hi])) } else { u64::MAX };
    let first = first_position(body).unwrap_or(PartitionPosition { token: 0, key: Bytes::new() });
    if let Ok(page) = IndexPage::reopen(body, version, raw_len) {
        let _ = page.find(&first);
        let _ = page.find(&PartitionPosition { token: i64::MAX, key: Bytes::from_static(&[0xff; 3]) });
        let _ = page.entries();
    }
    let Ok(page) = IndexPage::open(body, version, &first, raw_len) else { return };
    assert!(!page.is_empty(), "a page that opens has entries");
    assert!(page.heap_bytes() <= body.len() + 4 * (page.len() + 1), "a page holds no more than its body and offsets");
    // Searches near the first position, found or not, never panic.
    for token in [first.token.wrapping_sub(1), first.token, first.token.wrapping_add(1)] {
        let _ = page.find(&PartitionPosition { token, key: first.key.clone() });
    }
    let _ = page.find(&PartitionPosition { token: i64::MAX, key: Bytes::from_static(&[0xff; 3]) });
    if let Ok(entries) = page.entries() {
        assert_eq!(entries.len(), page.len());
        assert_eq!(entries[0].position, first, "the page starts where the summary says");
        assert!(entries.windows(2).all(|w| w[0].position < w[1].position), "entries in order");
        for entry in &entries {
            assert!(entry.offset + entry.len <= raw_len, "an entry inside the data");
            assert_eq!(page.find(&entry.position).expect("a decodable entry is found").as_ref(), Some(entry));
        }
    }
});

/// The token and key a valid page's first entry starts with.
fn first_position(body: &[u8]) -> Option<PartitionPosition> {
    let mut d = Decoder::new(body);
    let token = d.fixed_i64().ok()?;
    let key = d.bytes().ok()?;
    Some(PartitionPosition { token, key })
}
