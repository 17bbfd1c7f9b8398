//! Buffers for direct I/O: bytes that start at a [`ALIGN_BYTES`]-aligned
//! address, as O_DIRECT requires of the memory (and of the file offset and
//! length) of every request.
//!
//! Safe Rust has no aligned allocation, so an [`AlignedBuf`] is a `Vec<u8>`
//! one alignment longer than asked, used from its first aligned byte on.
//! A `Vec`'s heap bytes never move while it is not grown, and this one never
//! is: the aligned start found at allocation holds for the buffer's life,
//! also while compio owns it during a request (completion-based I/O moves
//! the buffer into the call and hands it back with the result).

use bytes::BytesMut;
use compio::buf::{IntoInner, IoBuf, Slice};

/// The alignment of direct I/O: of buffer addresses, file offsets and
/// lengths. 4096 covers every disk's logical block (512 or 4096 bytes).
pub const ALIGN_BYTES: usize = 4096;

/// `n` rounded down to a multiple of [`ALIGN_BYTES`].
pub fn align_down(n: u64) -> u64 {
    n - n % ALIGN_BYTES as u64
}

/// `n` rounded up to a multiple of [`ALIGN_BYTES`].
pub fn align_up(n: u64) -> u64 {
    align_down(n + ALIGN_BYTES as u64 - 1)
}

/// Whether `n` is a multiple of [`ALIGN_BYTES`].
pub fn is_aligned(n: u64) -> bool {
    n.is_multiple_of(ALIGN_BYTES as u64)
}

/// An empty buffer for a direct read of up to `len` bytes, at an aligned
/// address: its capacity holds `len` bytes, none initialised. A read fills
/// it in place (compio reads into a `BytesMut`'s uninitialised capacity
/// and sets its length), so nothing is zeroed for the kernel to overwrite,
/// and the filled buffer is handed on as the result (`freeze`) without a
/// copy. The bytes before the aligned address are split off, never
/// touched: both halves share the one allocation, freed with the last.
pub fn read_buffer(len: usize) -> BytesMut {
    let mut whole = BytesMut::with_capacity(len + ALIGN_BYTES);
    let start = whole.as_ptr().align_offset(ALIGN_BYTES);
    assert!(start < ALIGN_BYTES, "a byte buffer can always be aligned");
    whole.split_off(start)
}

/// `len` bytes (zeroed at first) at an aligned address: what direct
/// writes fill and send.
pub struct AlignedBuf {
    vec: Vec<u8>,
    /// Where the aligned bytes begin in `vec`.
    start: usize,
    len: usize,
}

impl AlignedBuf {
    pub fn zeroed(len: usize) -> AlignedBuf {
        let vec = vec![0; len + ALIGN_BYTES];
        let start = vec.as_ptr().align_offset(ALIGN_BYTES);
        assert!(start < ALIGN_BYTES, "a byte buffer can always be aligned");
        AlignedBuf { vec, start, len }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How long the buffer can be made again ([`AlignedBuf::resize_within`]).
    pub fn capacity(&self) -> usize {
        self.vec.len() - self.start
    }

    /// Makes the buffer `len` bytes long, within its capacity: the bytes
    /// past the old length are whatever they were before (a buffer used
    /// again for another write sets what it sends).
    pub fn resize_within(&mut self, len: usize) {
        assert!(len <= self.capacity(), "a buffer is never grown past its allocation");
        self.len = len;
    }

    /// Keeps only the first `len` bytes.
    pub fn shrink_to(&mut self, len: usize) {
        assert!(len <= self.len, "a buffer only shrinks");
        self.len = len;
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.vec[self.start..self.start + self.len]
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.vec[self.start..self.start + self.len]
    }

    /// Bytes `range` (relative to the aligned start) as compio's buffer
    /// for one request; [`AlignedBuf::back`] gets the buffer back.
    pub(crate) fn piece(self, range: std::ops::Range<usize>) -> (Slice<Vec<u8>>, usize, usize) {
        assert!(range.end <= self.len, "a piece lies inside the buffer");
        let (start, len) = (self.start, self.len);
        (self.vec.slice(start + range.start..start + range.end), start, len)
    }

    /// The buffer a request's piece came from.
    pub(crate) fn back(piece: Slice<Vec<u8>>, start: usize, len: usize) -> AlignedBuf {
        let vec = piece.into_inner();
        assert!(vec.len() >= start + len, "a request never shrinks its buffer");
        AlignedBuf { vec, start, len }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_start_aligned_and_rounding_is_to_the_block() {
        for len in [0, 1, 4095, 4096, 10_000] {
            let mut buf = AlignedBuf::zeroed(len);
            assert_eq!(buf.as_slice().as_ptr().align_offset(ALIGN_BYTES), 0);
            assert_eq!(buf.len(), len);
            buf.as_mut_slice().fill(3);
            let (piece, start, l) = buf.piece(0..len);
            let back = AlignedBuf::back(piece, start, l);
            assert!(back.as_slice().iter().all(|b| *b == 3));
        }
        assert_eq!((align_down(4097), align_up(4097), align_up(4096), align_up(0)), (4096, 8192, 4096, 0));
        assert!(is_aligned(8192) && !is_aligned(100));
    }

    #[test]
    fn a_read_buffer_is_empty_and_aligned_with_room_for_the_read() {
        for len in [0, 1, 4096, 20_000] {
            let buf = read_buffer(len);
            assert_eq!(buf.as_ptr().align_offset(ALIGN_BYTES), 0);
            assert!(buf.is_empty() && buf.capacity() >= len);
        }
    }

    #[test]
    fn a_buffer_resized_within_its_capacity_keeps_its_start_and_bytes() {
        let mut buf = AlignedBuf::zeroed(8192);
        buf.as_mut_slice().fill(7);
        buf.resize_within(100);
        assert_eq!(buf.len(), 100);
        buf.resize_within(buf.capacity());
        assert!(buf.capacity() >= 8192);
        assert_eq!(buf.as_slice().as_ptr().align_offset(ALIGN_BYTES), 0);
        assert!(buf.as_slice()[..8192].iter().all(|b| *b == 7));
    }
}
