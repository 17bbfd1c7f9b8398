//! Fuzzes the data messages a replica reads from another node's
//! coordinator, and the answers a coordinator reads back (`coordinator::
//! wire`: mutations, counter writes for their leader, reads, results, partitions, Paxos prepares, promises
//! and proposals, batchlog batches, streaming reads and pages, repair's
//! hash pages and row hashes, memcached item runs for their leader and
//! its answers, forwarded writes' headers and their replicas' answers),
//! the hint log's entries (`coordinator::hint_log`), plus
//! group 0's schema entries (`coordinator::schema_entry`).
//! A mutation's partition bytes, logged as they came, replay to the
//! partition decoded. The first byte picks the decoder; any bytes give a message or an
//! error, never a panic, and a message decoded encodes to what decodes to
//! it again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_coordinator::{schema_entry, wire};
use shoal_storage::commitlog;

fuzz_target!(|data: &[u8]| {
    let Some((&which, bytes)) = data.split_first() else { return };
    match which % 19 {
        0 => {
            if let Ok((mutation, partition)) = wire::decode_received_mutation(bytes) {
                // Decoded alike, into one copy or not.
                let copied = wire::decode_mutation(bytes).expect("it decodes without the copy too");
                assert_eq!((&copied.position, &copied.update), (&mutation.position, &mutation.update));
                assert!(wire::decode_mutation(&wire::encode_mutation(&mutation)).is_ok());
                // What a replica logs of it (the partition's bytes as they
                // came) replays to the partition it applied.
                let (table, position, update) = (mutation.table, &mutation.position, &mutation.update);
                let mut entry = Vec::new();
                commitlog::encode_received_mutation(&mut entry, table, position, update, &partition);
                assert_eq!(commitlog::decode_mutation(&entry).ok().map(|(_, _, u)| u).as_ref(), Some(update));
            }
        }
        1 => {
            if let Ok(command) = wire::decode_read_command(bytes) {
                assert!(wire::decode_read_command(&wire::encode_read_command(&command)).is_ok());
            }
        }
        2 => {
            if let Ok(result) = wire::decode_read_result(bytes) {
                assert!(wire::decode_read_result(&wire::encode_read_result(&result)).is_ok());
            }
        }
        3 => {
            if let Ok(partitions) = wire::decode_partitions(bytes) {
                assert_eq!(wire::decode_partitions(&wire::encode_partitions(&partitions)).ok(), Some(partitions));
            }
        }
        4 => {
            if let Ok(prepare) = wire::decode_paxos_prepare(bytes) {
                assert_eq!(wire::decode_paxos_prepare(&wire::encode_paxos_prepare(&prepare)).ok(), Some(prepare));
            }
        }
        5 => {
            if let Ok(promise) = wire::decode_promise(bytes) {
                assert_eq!(wire::decode_promise(&wire::encode_promise(&promise)).ok(), Some(promise));
            }
        }
        6 => {
            let _ = shoal_coordinator::decode_batch(bytes);
        }
        7 => {
            if let Ok(read) = wire::decode_stream_read(bytes) {
                assert_eq!(wire::decode_stream_read(&wire::encode_stream_read(&read)).ok(), Some(read));
            }
        }
        8 => {
            if let Ok(page) = wire::decode_stream_page(bytes) {
                assert_eq!(wire::decode_stream_page(&wire::encode_stream_page(&page)).ok(), Some(page));
            }
        }
        9 => {
            if let Ok(page) = wire::decode_hash_page(bytes) {
                assert_eq!(wire::decode_hash_page(&wire::encode_hash_page(&page)).ok(), Some(page));
            }
        }
        10 => {
            if let Ok((ballot, mutation)) = wire::decode_paxos_proposal(bytes) {
                assert!(wire::decode_paxos_proposal(&wire::encode_paxos_proposal(ballot, &mutation)).is_ok());
            }
        }
        11 => {
            if let Ok(hint) = shoal_coordinator::decode_hint_entry(bytes) {
                let mut again = Vec::new();
                shoal_coordinator::encode_hint_entry(
                    &mut again,
                    hint.target,
                    hint.token,
                    hint.written_ms,
                    &hint.payload,
                );
                assert_eq!(shoal_coordinator::decode_hint_entry(&again).ok(), Some(hint));
            }
        }
        12 => {
            if let Ok(hashes) = wire::decode_row_hashes(bytes) {
                assert_eq!(wire::decode_row_hashes(&wire::encode_row_hashes(&hashes)).ok(), Some(hashes));
            }
        }
        13 => {
            if let Ok(write) = wire::decode_counter_write(bytes) {
                let again = wire::decode_counter_write(&wire::encode_counter_write(&write)).expect("round trip");
                assert_eq!((again.consistency, again.timeout_ms), (write.consistency, write.timeout_ms));
            }
        }
        14 => {
            if let Ok(run) = wire::items::decode_item_run(bytes) {
                assert_eq!(wire::items::decode_item_run(&wire::items::encode_item_run(&run)).ok(), Some(run));
            }
        }
        15 => {
            if let Ok(answers) = wire::items::decode_item_answers(bytes) {
                let again = wire::items::decode_item_answers(&wire::items::encode_item_answers(&answers));
                assert_eq!(again.ok(), Some(answers));
            }
        }
        16 => {
            if let Ok((forward, mutation)) = wire::decode_forward(bytes) {
                let again = wire::encode_forward(&forward, mutation);
                assert_eq!(wire::decode_forward(&again).ok(), Some((forward, mutation)));
            }
        }
        17 => {
            if let Ok((id, replica, answer)) = wire::decode_write_done(bytes) {
                let again = wire::encode_write_done(id, replica, answer);
                assert_eq!(wire::decode_write_done(&again).ok(), Some((id, replica, answer)));
            }
        }
        _ => {
            let _ = schema_entry::decode(bytes);
        }
    }
});
