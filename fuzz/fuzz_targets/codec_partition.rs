//! Fuzzes the partition decoder shared by the commitlog and SSTables: any
//! bytes decode or give a `DecodeError` (whose offset lies inside the
//! input), never panic or allocate by an untrusted length; a partition that
//! decodes survives re-encoding unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_storage::codec::{decode_partition, encode_partition, Decoder, Encoder};

fuzz_target!(|data: &[u8]| {
    let mut d = Decoder::new(data);
    match decode_partition(&mut d) {
        Ok(partition) => {
            assert!(d.position() <= data.len());
            let mut again = Vec::new();
            encode_partition(&mut Encoder { out: &mut again }, &partition);
            let mut d = Decoder::new(&again);
            assert_eq!(decode_partition(&mut d), Ok(partition));
            assert!(d.is_empty());
        }
        Err(e) => assert!(e.offset <= data.len(), "{e}"),
    }
});
