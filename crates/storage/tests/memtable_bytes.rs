//! What a memcached item really costs in a memtable: the process's resident
//! memory before and after 100,000 items of 1 KiB (a key of 16 bytes and
//! the value, flags and CAS cells a memcached `set` writes), against the
//! memtable's own estimate, which the shard's memory budget counts
//! (`shoal_storage::memory::memtable_bytes`) and flushes by.
//!
//! Its own test binary, so no other test allocates meanwhile. Prints one
//! line: `cargo test -p shoal-storage --test memtable_bytes -- --nocapture`.

use bytes::Bytes;
use shoal_storage::memtable::Memtable;
use shoal_storage::{PartitionPosition, RowCells};

const ITEMS: usize = 100_000;
const VALUE_BYTES: usize = 1024;
const KEY_BYTES: usize = 16;

/// Resident bytes of this process (Linux).
fn resident_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: usize = statm.split_whitespace().nth(1).and_then(|f| f.parse().ok()).expect("resident pages");
    pages * 4096
}

/// A memcached item's position (a 16-byte key).
fn position(i: usize) -> PartitionPosition {
    let key = Bytes::from(format!("key:{i:012}"));
    // Tokens spread over the ring, as Murmur3 spreads memcached keys.
    let token = (i as i64).wrapping_mul(0x9E37_79B9_7F4A_7C15_u64 as i64);
    PartitionPosition { token, key }
}

#[test]
fn a_memcached_item_costs_its_key_value_and_little_else() {
    let mut memtable = Memtable::default();
    let before = resident_bytes();
    let value = vec![b'x'; VALUE_BYTES];
    for i in 0..ITEMS {
        // As the replica writes a memcached `set` (`replica::item`): value,
        // flags and CAS cells, applied as they lie.
        let (flags, cas) = (0i64.to_be_bytes(), (i as i64).to_be_bytes());
        let cells: [(u32, &[u8]); 3] = [(1, &value), (2, &flags), (3, &cas)];
        let row = RowCells { timestamp: 1_700_000_000_000_000 + i as i64, expiry: None, cells: &cells };
        memtable.apply_row(position(i), &row, None);
    }
    let real = (resident_bytes() - before) / ITEMS;
    let counted = memtable.size_bytes() / ITEMS;
    println!(
        "{ITEMS} items of {KEY_BYTES}-byte keys and {VALUE_BYTES}-byte values: resident {real} bytes per item, \
         counted {counted} bytes per item (overhead beyond key and value: {} resident, {} counted)",
        real as isize - (KEY_BYTES + VALUE_BYTES) as isize,
        counted as isize - (KEY_BYTES + VALUE_BYTES) as isize,
    );
    assert!(real <= KEY_BYTES + VALUE_BYTES + 192, "{real} bytes per item");
    // The budget counts what the memory holds, within a fifth.
    assert!(counted * 5 >= real * 4 && counted * 5 <= real * 6, "counted {counted}, resident {real} per item");
}
