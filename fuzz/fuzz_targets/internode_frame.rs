//! Fuzzes what a node reads from another: internode frames split off a
//! byte stream, and each frame's payload read as a handshake (`Hello`),
//! as its answer (`Welcome`), as a Raft message, as a group 0 join and
//! as a group 0 log entry. Any bytes give frames, "incomplete" or an
//! error, never a panic; a decoded frame consumes bytes, and an incomplete
//! one asks for at least one more byte and has room for all it asks, so a
//! connection's read loop always makes progress.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use shoal_cluster::frame::{bytes_to_come, decode};
use shoal_cluster::group0_entry::{decode_member, Entry};
use shoal_cluster::hello::{Hello, Welcome};
use shoal_cluster::raft_codec::decode_message;

fuzz_target!(|data: &[u8]| {
    let mut buf = BytesMut::from(data);
    loop {
        let before = buf.len();
        match decode(&mut buf) {
            Ok(Some(frame)) => {
                assert!(buf.len() < before, "a frame consumed nothing");
                let _ = Hello::decode(frame.payload.clone());
                let _ = decode_message(&frame.payload);
                let _ = decode_member(&frame.payload);
                let _ = Entry::decode(&frame.payload);
                let _ = Welcome::decode(frame.payload);
            }
            Ok(None) => {
                if let Some(missing) = bytes_to_come(&buf) {
                    assert!(missing > 0, "an incomplete frame asks for nothing");
                    assert!(buf.capacity() - buf.len() >= missing, "no room for the rest of a frame");
                }
                break;
            }
            Err(_) => break,
        }
    }
    // The payload decoders on raw bytes too, without a frame around them.
    let _ = Hello::decode(bytes::Bytes::copy_from_slice(data));
    let _ = Welcome::decode(bytes::Bytes::copy_from_slice(data));
    let _ = decode_message(data);
    let _ = decode_member(data);
    let _ = Entry::decode(data);
});
