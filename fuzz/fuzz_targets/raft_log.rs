//! Fuzzes the replay of a Raft group's log file (`cluster::raft_store`):
//! any bytes give a count of whole records or an error naming the damage,
//! never a panic (raft-rs's own log panics on a gap, so the replay checks
//! before it appends; a snapshot record may open the file), and the count
//! never exceeds the input. The same bytes go to group 0's snapshot
//! state's decoder (`cluster::group0_snapshot`, also sent by the leader):
//! an answer, never a panic, and what decodes encodes back the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use raft::storage::MemStorage;
use shoal_cluster::group0_snapshot::Group0State;
use shoal_cluster::raft_store::replay;

fuzz_target!(|data: &[u8]| {
    let memory = MemStorage::new();
    if let Ok(replayed) = replay(data, &memory) {
        assert!(replayed.bytes <= data.len());
    }
    if let Ok(state) = Group0State::decode(data) {
        assert_eq!(state.encode(), data);
    }
});
