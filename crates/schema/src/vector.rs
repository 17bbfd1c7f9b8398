//! The serialized layout of `vector<elem, n>` values (Cassandra 5's
//! `VectorType`, the same in the native protocol and in storage): the `n`
//! element bodies back to back, each preceded by its length as an unsigned
//! vint unless the element type has a fixed length
//! ([`CqlType::vector_element_size`]). Elements are never null.
//!
//! Nothing here panics on any input: vectors arrive from the network.

use crate::types::CqlType;
use crate::value::{read_unsigned_vint, write_unsigned_vint, ValueError};

/// Reads the element bodies of one vector value from the front.
pub(crate) struct VectorReader<'a> {
    bytes: shoal_buf::Reader<'a>,
    fixed: Option<usize>,
}

impl<'a> VectorReader<'a> {
    pub(crate) fn new(elem: &CqlType, bytes: &'a [u8]) -> Self {
        VectorReader { bytes: shoal_buf::Reader::new(bytes), fixed: elem.vector_element_size() }
    }

    /// The next element's body; its validity as an `elem` is the caller's.
    pub(crate) fn next_element(&mut self) -> Result<&'a [u8], ValueError> {
        let len = match self.fixed {
            Some(size) => size,
            None => {
                let len = read_unsigned_vint(&mut self.bytes).map_err(|short| ValueError::Truncated {
                    what: "vector element length",
                    needed: short.needed,
                    remaining: short.left,
                })?;
                usize::try_from(len).unwrap_or(usize::MAX)
            }
        };
        Ok(self.bytes.take(len, "vector element")?)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Checks that the vector ended after its last element.
    pub(crate) fn finish(self, ty: &CqlType) -> Result<(), ValueError> {
        crate::value::finish(&self.bytes, ty)
    }
}

/// Checks a vector's size before reading it, so a fixed-length vector of
/// the wrong length gets one clear error rather than a truncation.
pub(crate) fn check_length(ty: &CqlType, elem: &CqlType, dimension: u32, bytes: &[u8]) -> Result<(), ValueError> {
    let Some(expected) = elem.vector_element_size().and_then(|size| size.checked_mul(dimension as usize)) else {
        return Ok(());
    };
    if bytes.len() == expected {
        return Ok(());
    }
    Err(ValueError::VectorSize { ty: ty.to_string(), expected, got: bytes.len() })
}

/// Appends a vector of `elem` made of the given (valid) element bodies.
pub fn write<'a>(elem: &CqlType, items: impl IntoIterator<Item = &'a [u8]>, out: &mut Vec<u8>) {
    let fixed = elem.vector_element_size().is_some();
    for item in items {
        if !fixed {
            write_unsigned_vint(item.len() as u64, out);
        }
        out.extend_from_slice(item);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ty(text: &str) -> CqlType {
        CqlType::parse(text).expect("test type text is valid")
    }

    #[test]
    fn fixed_elements_are_packed_and_variable_ones_prefixed() {
        let mut out = Vec::new();
        write(&CqlType::Int, [&[0, 0, 0, 1][..], &[0, 0, 0, 2]], &mut out);
        assert_eq!(out, [0, 0, 0, 1, 0, 0, 0, 2]);
        let mut out = Vec::new();
        write(&CqlType::Text, [&b"ab"[..], b""], &mut out);
        assert_eq!(out, [2, b'a', b'b', 0]);
        let mut reader = VectorReader::new(&CqlType::Text, &out);
        assert_eq!(reader.next_element(), Ok(&b"ab"[..]));
        assert_eq!(reader.next_element(), Ok(&b""[..]));
        assert_eq!(reader.finish(&ty("vector<text, 2>")), Ok(()));
    }

    #[test]
    fn long_variable_elements_use_multi_byte_lengths() {
        let item = vec![7u8; 300];
        let mut out = Vec::new();
        write(&CqlType::Blob, [&item[..]], &mut out);
        assert_eq!(out.len(), 302);
        let mut reader = VectorReader::new(&CqlType::Blob, &out);
        assert_eq!(reader.next_element(), Ok(&item[..]));
    }

    #[test]
    fn bad_layouts_are_errors() {
        let t = ty("vector<int, 2>");
        assert!(matches!(check_length(&t, &CqlType::Int, 2, &[0; 7]), Err(ValueError::VectorSize { .. })));
        assert_eq!(check_length(&t, &CqlType::Int, 2, &[0; 8]), Ok(()));
        // A length claiming more bytes than remain, and a lone length marker.
        assert!(VectorReader::new(&CqlType::Text, &[5, b'a']).next_element().is_err());
        assert!(VectorReader::new(&CqlType::Text, &[0xFF]).next_element().is_err());
        let mut reader = VectorReader::new(&CqlType::Text, &[0, 9]);
        assert_eq!(reader.next_element(), Ok(&b""[..]));
        assert!(reader.finish(&t).is_err());
    }
}
