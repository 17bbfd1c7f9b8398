//! Fuzzes the partition decoder shared by the commitlog and SSTables: any
//! bytes decode or give a `DecodeError` (whose offset lies inside the
//! input), never panic or allocate by an untrusted length; a partition that
//! decodes survives re-encoding unchanged. A point read's decoder
//! (`Found::decode_stored`: a single row written straight into the compact
//! layout, without the general decoder) fails exactly where the general
//! one does and finds the same partition.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_storage::codec::{decode_partition, encode_partition, Decoder, Encoder};
use shoal_storage::Found;

fuzz_target!(|data: &[u8]| {
    let mut d = Decoder::new(data);
    let decoded = decode_partition(&mut d);
    match Found::decode_stored(data) {
        Ok(found) => assert_eq!(Ok(&*found.into_partition()), decoded.as_ref()),
        Err(e) => assert_eq!(Err(&e), decoded.as_ref()),
    }
    match decoded {
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
