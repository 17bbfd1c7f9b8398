//! Item keys as the coordinator takes them (`Bytes`, in a
//! `PartitionPosition`), copied out of the connection's read buffer
//! without an allocation per key where they can be.
//!
//! An operation that only reads holds its key for the run alone, so its
//! key is cut from a block the connection's keys share (a reference
//! count, no allocation): the block is reused once every run that cut from
//! it ended. An operation that writes copies its own key: the memtable and
//! the LRU list keep the key as long as the item, and a key cut from a
//! shared block would keep the whole block alive with it.

use bytes::{Bytes, BytesMut};
use shoal_coordinator::data::{ItemOp, PartitionPosition};
use shoal_coordinator::item_position;

/// Bytes a block holds, at least: a pipeline of a few hundred short keys.
const BLOCK_BYTES: usize = 4096;

/// A connection's block of read keys.
#[derive(Default)]
pub struct KeyArena {
    block: BytesMut,
}

impl KeyArena {
    /// `op`'s position, on `key`.
    pub fn position(&mut self, key: &[u8], op: ItemOp) -> (PartitionPosition, ItemOp) {
        let key = if op.writes() {
            Bytes::copy_from_slice(key)
        } else {
            if self.block.capacity() < key.len() {
                // Reclaims the block where no earlier key still holds it.
                self.block.reserve(key.len().max(BLOCK_BYTES));
            }
            self.block.extend_from_slice(key);
            self.block.split().freeze()
        };
        (item_position(key), op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_coordinator::data::Fetch;

    #[test]
    fn read_keys_share_a_block_and_written_keys_own_theirs() {
        let mut arena = KeyArena::default();
        let read = || ItemOp::Get(Fetch::default());
        let (a, _) = arena.position(b"alpha", read());
        let (b, _) = arena.position(b"beta", read());
        assert_eq!((&a.key[..], &b.key[..]), (&b"alpha"[..], &b"beta"[..]));
        assert_eq!(a.key.as_ptr().wrapping_add(5), b.key.as_ptr(), "cut one after the other from one block");
        let (w, _) = arena.position(b"gamma", ItemOp::Delete { compare_cas: None });
        assert_eq!(&w.key[..], b"gamma");
        assert_ne!(b.key.as_ptr().wrapping_add(4), w.key.as_ptr(), "a written key is its own copy");
        assert_eq!(a.token, item_position(Bytes::from_static(b"alpha")).token);
        // Keys longer than what the block has left start a new one.
        let long = vec![b'k'; BLOCK_BYTES];
        let (l, _) = arena.position(&long, read());
        assert_eq!(&l.key[..], &long[..]);
    }
}
