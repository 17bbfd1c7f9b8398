//! Item keys and values as the coordinator takes them (`Bytes`), cut from
//! the batch's own bytes: the connection hands each batch its read buffer
//! frozen, so a key or a `set`'s value becomes a reference to it (a count,
//! no allocation, no copy) instead of a copy of its own.
//!
//! What an operation cuts lives as long as its run: the memtable and the
//! commitlog copy a value into their own bytes, and a replica's copy goes
//! out encoded. A written key is copied where it is kept (a new memtable
//! slot, the LRU list, a general partition, a write that waits for the
//! partition's lock or goes to other replicas: `replica::item`), not
//! before: an overwrite of an item in memory, the common `set`, copies
//! nothing. Once the run is over nothing holds the buffer but the
//! connection, which takes it back to read into again.

use bytes::Bytes;
use shoal_coordinator::data::{ItemOp, PartitionPosition};
use shoal_coordinator::item_position;

/// `part` of `buffer` as shared bytes, or a copy where `part` lies
/// elsewhere (a meta key decoded from base64).
pub fn cut(buffer: &Bytes, part: &[u8]) -> Bytes {
    let range = buffer.as_ptr_range();
    let inside = range.start <= part.as_ptr() && part.as_ptr_range().end <= range.end;
    match inside && !part.is_empty() {
        true => buffer.slice_ref(part),
        false => Bytes::copy_from_slice(part),
    }
}

/// `op`'s position, on `key` cut from `buffer`.
pub fn position(buffer: &Bytes, key: &[u8], op: ItemOp) -> (PartitionPosition, ItemOp) {
    (item_position(cut(buffer, key)), op)
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_coordinator::data::Fetch;

    #[test]
    fn keys_and_values_share_the_buffer() {
        let buffer = Bytes::from_static(b"get alpha beta\r\n");
        let (alpha, beta) = (&buffer[4..9], &buffer[10..14]);
        let (a, _) = position(&buffer, alpha, ItemOp::Get(Fetch::default()));
        assert_eq!((&a.key[..], a.key.as_ptr()), (&b"alpha"[..], alpha.as_ptr()), "a read key is cut");
        assert_eq!(a.token, item_position(Bytes::from_static(b"alpha")).token);
        let (w, _) = position(&buffer, beta, ItemOp::Delete { compare_cas: None });
        assert_eq!(&w.key[..], b"beta");
        assert_eq!(w.key.as_ptr(), beta.as_ptr(), "a written key is cut too (copied where kept)");
        assert_eq!(cut(&buffer, beta).as_ptr(), beta.as_ptr());
        // Bytes from elsewhere (a decoded key), and none at all, are copied.
        let elsewhere = b"beta".to_vec();
        assert_eq!(&cut(&buffer, &elsewhere)[..], b"beta");
        assert_ne!(cut(&buffer, &elsewhere).as_ptr(), elsewhere.as_ptr());
        assert!(cut(&buffer, &buffer[3..3]).is_empty());
    }
}
