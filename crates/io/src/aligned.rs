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
//!
//! Reads whose bytes are used and let go before the caller goes on (an
//! index page copied out, a row decoded: `File::read_with`) borrow their
//! buffer from the thread's pool ([`pooled_read_buffer`], [`recycle`])
//! instead of allocating and freeing one per read: at most
//! [`POOL_MAX_BUFFERS`] buffers of [`POOLED_SPAN_BYTES`] each per thread.

use std::cell::RefCell;

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

/// The aligned span a pooled buffer holds: two blocks, what a point read
/// of a row or an index page of a few KiB spans.
pub const POOLED_SPAN_BYTES: usize = 2 * ALIGN_BYTES;
/// Buffers a thread's pool keeps (12 KiB each with their alignment
/// slack: 768 KiB at most); more in flight at once are allocated and
/// freed as before.
pub const POOL_MAX_BUFFERS: usize = 64;

thread_local! {
    /// Empty aligned buffers of [`POOLED_SPAN_BYTES`], ready for a read.
    static POOL: RefCell<Vec<BytesMut>> = const { RefCell::new(Vec::new()) };
}

/// [`read_buffer`] for a read of up to `len` bytes whose buffer goes back
/// to the pool afterwards ([`recycle`]): from the pool where `len` fits a
/// pooled buffer and one is there.
pub fn pooled_read_buffer(len: usize) -> BytesMut {
    if len > POOLED_SPAN_BYTES {
        return read_buffer(len);
    }
    POOL.with(|pool| pool.borrow_mut().pop()).unwrap_or_else(|| read_buffer(POOLED_SPAN_BYTES))
}

/// Gives a buffer from [`pooled_read_buffer`] back, emptied, for the next
/// read; a larger one, or one past the pool's bound, is freed.
pub fn recycle(mut buf: BytesMut) {
    buf.clear();
    // What `read_buffer(POOLED_SPAN_BYTES)` makes: the span, and up to a
    // block's slack before the allocation's end.
    let pooled = (POOLED_SPAN_BYTES..=POOLED_SPAN_BYTES + ALIGN_BYTES).contains(&buf.capacity());
    if !pooled || buf.as_ptr().align_offset(ALIGN_BYTES) != 0 {
        return;
    }
    // At thread exit the pool may be gone: the buffer is then just freed.
    let _ = POOL.try_with(|pool| {
        let mut pool = pool.borrow_mut();
        if pool.len() < POOL_MAX_BUFFERS {
            pool.push(buf);
        }
    });
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

    /// The bytes of `vec` from `start` on, sent as they are where they
    /// begin at an aligned address: a buffer filled in place (the
    /// commitlog's pending bytes) is written without a copy. `Err(vec)`
    /// where they do not (the vector grew, so its bytes moved).
    pub fn from_vec(vec: Vec<u8>, start: usize) -> Result<AlignedBuf, Vec<u8>> {
        if start > vec.len() || vec[start..].as_ptr().align_offset(ALIGN_BYTES) != 0 {
            return Err(vec);
        }
        let len = vec.len() - start;
        Ok(AlignedBuf { vec, start, len })
    }

    /// The vector it was made of, its bytes before the aligned start and
    /// past the length included.
    pub fn into_vec(self) -> Vec<u8> {
        self.vec
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
    fn a_vector_is_sent_in_place_only_from_an_aligned_byte() {
        let mut vec: Vec<u8> = Vec::with_capacity(3 * ALIGN_BYTES);
        let start = vec.as_ptr().align_offset(ALIGN_BYTES);
        vec.resize(start + ALIGN_BYTES, 5);
        let at = vec[start..].as_ptr();
        let buf = AlignedBuf::from_vec(vec, start).expect("aligned");
        assert_eq!((buf.as_slice().as_ptr(), buf.len()), (at, ALIGN_BYTES));
        let vec = buf.into_vec();
        assert_eq!(vec.len(), start + ALIGN_BYTES);
        assert!(AlignedBuf::from_vec(vec, start + 1).is_err());
        assert!(AlignedBuf::from_vec(Vec::new(), 1).is_err());
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
    fn pooled_buffers_come_back_empty_aligned_and_bounded() {
        let first = pooled_read_buffer(100);
        let at = first.as_ptr();
        assert_eq!(at.align_offset(ALIGN_BYTES), 0);
        assert!(first.capacity() >= POOLED_SPAN_BYTES);
        let mut used = first;
        used.extend_from_slice(&[1; 64]);
        recycle(used);
        let again = pooled_read_buffer(POOLED_SPAN_BYTES);
        assert_eq!((again.as_ptr(), again.len()), (at, 0), "the same buffer, emptied");
        // Larger reads are not pooled.
        let large = pooled_read_buffer(3 * POOLED_SPAN_BYTES);
        assert!(large.capacity() >= 3 * POOLED_SPAN_BYTES);
        recycle(large);
        assert_ne!(pooled_read_buffer(1).as_ptr(), at, "the pool was empty: a new buffer");
        // The pool keeps at most its bound.
        let many: Vec<BytesMut> = (0..POOL_MAX_BUFFERS + 8).map(|_| pooled_read_buffer(1)).collect();
        many.into_iter().for_each(recycle);
        assert_eq!(POOL.with(|pool| pool.borrow().len()), POOL_MAX_BUFFERS);
        recycle(again);
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
