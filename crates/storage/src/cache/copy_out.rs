//! The copies of entries that reads take out of the row cache (its
//! segments move entries when compacted, so a read cannot keep a slice of
//! one), cut from shared chunks: one allocation per chunk rather than one
//! per read. A hit's copy is its one allocation otherwise, and at a size
//! past the allocator's small classes (a 1 KiB item) its slowest. A chunk
//! is freed once every copy cut from it is dropped (an answer written);
//! while the shard is reading, one chunk at a time is being cut.

use bytes::{Bytes, BytesMut};

/// A chunk's size: many 1 KiB items per allocation, little held by one
/// copy kept long.
const CHUNK_BYTES: usize = 32 * 1024;

/// Copies larger than this get an allocation of their own, so a chunk
/// always holds several copies.
const OWN_ALLOCATION_BYTES: usize = CHUNK_BYTES / 4;

#[derive(Default)]
pub(crate) struct CopyOut {
    /// What is left of the chunk being cut.
    chunk: BytesMut,
}

impl CopyOut {
    /// `bytes`, copied.
    pub(crate) fn copy(&mut self, bytes: &[u8]) -> Bytes {
        if bytes.len() > OWN_ALLOCATION_BYTES {
            return Bytes::copy_from_slice(bytes);
        }
        if self.chunk.capacity() < bytes.len() {
            self.chunk = BytesMut::with_capacity(CHUNK_BYTES);
        }
        self.chunk.extend_from_slice(bytes);
        self.chunk.split().freeze()
    }

    /// What the cache counts for it: a whole chunk, the most it holds
    /// uncut (a constant, so that reads change no count).
    pub(crate) const HELD_BYTES: usize = CHUNK_BYTES;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_share_a_chunk_and_stay_apart() {
        let mut copy_out = CopyOut::default();
        let a = copy_out.copy(b"first");
        let b = copy_out.copy(b"second");
        assert_eq!((&a[..], &b[..]), (&b"first"[..], &b"second"[..]));
        // Cut from one chunk, one after the other.
        assert_eq!(a.as_ptr().wrapping_add(a.len()), b.as_ptr());
        // A full chunk is replaced; what was cut from it stays.
        let many: Vec<Bytes> = (0..100).map(|i| copy_out.copy(&[i as u8; 1000])).collect();
        assert!(many.iter().enumerate().all(|(i, c)| c[..] == [i as u8; 1000][..]));
        assert_eq!(&a[..], b"first");
        assert!(copy_out.chunk.capacity() <= CopyOut::HELD_BYTES);
        let large = copy_out.copy(&[7; OWN_ALLOCATION_BYTES + 1]);
        assert_eq!(large.len(), OWN_ALLOCATION_BYTES + 1);
    }
}
