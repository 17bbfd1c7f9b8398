//! Fuzzes the replay of a Raft group's log file (`cluster::raft_store`):
//! any bytes give a count of whole records or an error naming the damage,
//! never a panic (raft-rs's own log panics on a gap, so the replay checks
//! before it appends), and the count never exceeds the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use raft::storage::MemStorage;
use shoal_cluster::raft_store::replay;

fuzz_target!(|data: &[u8]| {
    let memory = MemStorage::new();
    if let Ok(good) = replay(data, &memory) {
        assert!(good <= data.len());
    }
});
