//! The one byte reader: a bounds-checked cursor over a byte slice that
//! every decoder of bytes from the network or disk builds on — the CQL
//! frame codec (`transport::wire`), CQL values, collections and vectors
//! (`schema`), and the partition codec of commitlog and SSTables
//! (`storage::codec`). Each format adds its own items (protocol strings,
//! LEB128 or CQL vints, `[bytes]`) on top and maps [`Short`] to its own
//! error; the bounds checking lives here once.
//!
//! Invariant: `pos <= buf.len()` always; no call panics, whatever the input.

use thiserror::Error;

/// Fewer bytes were left than an item needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("needed {needed} bytes for {what} at offset {offset}, {left} left")]
pub struct Short {
    /// What was being read, for the message.
    pub what: &'static str,
    pub needed: usize,
    /// Where the item started, from the start of the input.
    pub offset: usize,
    pub left: usize,
}

/// A cursor over `buf`: reads advance it, a failed read leaves it where it was.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    /// Offset of the next byte to read, from the start of the input.
    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The unread bytes; looking at them does not advance the cursor.
    #[inline]
    pub fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    /// Takes the next `n` bytes, or fails without consuming anything.
    #[inline]
    pub fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], Short> {
        let left = self.remaining();
        if n > left {
            return Err(Short { what, needed: n, offset: self.pos, left });
        }
        let start = self.pos;
        self.pos += n;
        debug_assert!(self.pos <= self.buf.len());
        Ok(&self.buf[start..self.pos])
    }

    /// Takes the next `N` bytes as an array.
    pub fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], Short> {
        let mut array = [0u8; N];
        array.copy_from_slice(self.take(N, what)?);
        Ok(array)
    }

    // Inline (here, `take` and `be_i64`): the decoders in other crates
    // call these per byte or field, and a call cost more than the read.
    #[inline]
    pub fn u8(&mut self, what: &'static str) -> Result<u8, Short> {
        Ok(self.array::<1>(what)?[0])
    }

    pub fn be_u16(&mut self, what: &'static str) -> Result<u16, Short> {
        Ok(u16::from_be_bytes(self.array(what)?))
    }

    pub fn be_i32(&mut self, what: &'static str) -> Result<i32, Short> {
        Ok(i32::from_be_bytes(self.array(what)?))
    }

    #[inline]
    pub fn be_i64(&mut self, what: &'static str) -> Result<i64, Short> {
        Ok(i64::from_be_bytes(self.array(what)?))
    }

    /// Upper bound for pre-sizing a collection of `claimed` items each
    /// taking at least `min_item_bytes`: what the remaining input can hold,
    /// so a count from the wire never sizes an allocation by itself.
    pub fn capacity_for(&self, claimed: usize, min_item_bytes: usize) -> usize {
        claimed.min(self.remaining() / min_item_bytes.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_advance_and_short_reads_consume_nothing() {
        let mut r = Reader::new(&[0, 1, 0, 0, 0, 2, 9]);
        assert_eq!(r.be_u16("short"), Ok(1));
        assert_eq!(r.be_i32("int"), Ok(2));
        assert_eq!(r.position(), 6);
        assert_eq!(r.be_i32("int"), Err(Short { what: "int", needed: 4, offset: 6, left: 1 }));
        assert_eq!(r.position(), 6);
        assert_eq!(r.rest(), &[9]);
        assert_eq!(r.u8("byte"), Ok(9));
        assert!(r.is_empty());
        assert_eq!(r.take(0, "nothing"), Ok(&[][..]));
    }

    #[test]
    fn capacity_never_exceeds_what_the_input_holds() {
        let r = Reader::new(&[0; 10]);
        assert_eq!(r.capacity_for(1_000_000, 4), 2);
        assert_eq!(r.capacity_for(1, 4), 1);
        assert_eq!(r.capacity_for(7, 0), 7);
    }
}
