//! The fields of a serialized tuple or user type value (each field a
//! `[bytes]`, in order, trailing fields possibly left out): one read for
//! field selection (`SELECT u.f`), all split into the cells of a non-frozen
//! user type (one per field, keyed by [`cell_key`]) and joined back on read.

use crate::value::{Reader, ValueError};

const WHAT: &str = "tuple field";

/// Field `index` of `bytes`; `None` when it is null or left out.
pub fn field(bytes: &[u8], index: usize) -> Result<Option<&[u8]>, ValueError> {
    let mut reader = Reader::new(bytes);
    for _ in 0..index {
        if reader.is_empty() {
            return Ok(None);
        }
        reader.read_item(WHAT)?;
    }
    if reader.is_empty() {
        return Ok(None);
    }
    reader.read_item(WHAT)
}

/// Every field of `bytes`, in order (`None` for a null one); trailing
/// fields left out are not listed.
pub fn split(bytes: &[u8]) -> Result<Vec<Option<&[u8]>>, ValueError> {
    let mut reader = Reader::new(bytes);
    let mut fields = Vec::new();
    while !reader.is_empty() {
        fields.push(reader.read_item(WHAT)?);
    }
    Ok(fields)
}

/// The value made of `fields`, each a `[bytes]` (null as length -1).
pub fn join<'a>(fields: impl IntoIterator<Item = Option<&'a [u8]>>) -> Vec<u8> {
    let mut out = Vec::new();
    for field in fields {
        match field {
            Some(v) => {
                // Every field came out of a `[bytes]` or a frame, so its
                // length fits an i32.
                let len = i32::try_from(v.len()).expect("field length fits [bytes]");
                out.extend_from_slice(&len.to_be_bytes());
                out.extend_from_slice(v);
            }
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    out
}

/// The cell key of field `index` of a non-frozen user type, which keeps
/// one cell per field as ScyllaDB does: the index as a big-endian 16-bit
/// number (so keys sort in field order).
pub fn cell_key(index: usize) -> bytes::Bytes {
    // A user type has at most 32767 fields (the CQL limit on tuple size).
    let index = u16::try_from(index).unwrap_or(u16::MAX);
    bytes::Bytes::copy_from_slice(&index.to_be_bytes())
}

/// The field index a cell key names; `None` for a malformed key.
pub fn index_of_key(key: &[u8]) -> Option<usize> {
    <[u8; 2]>::try_from(key).ok().map(|k| usize::from(u16::from_be_bytes(k)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(v: Option<&[u8]>) -> Vec<u8> {
        match v {
            Some(v) => [&(v.len() as i32).to_be_bytes()[..], v].concat(),
            None => (-1i32).to_be_bytes().to_vec(),
        }
    }

    #[test]
    fn reads_fields_and_missing_ones() {
        let value = [item(Some(b"ab")), item(None), item(Some(&[7]))].concat();
        assert_eq!(field(&value, 0), Ok(Some(&b"ab"[..])));
        assert_eq!(field(&value, 1), Ok(None));
        assert_eq!(field(&value, 2), Ok(Some(&[7][..])));
        assert_eq!(field(&value, 5), Ok(None));
        assert!(field(&value[..3], 0).is_err());
    }

    #[test]
    fn splits_and_joins() {
        let value = [item(Some(b"ab")), item(None), item(Some(b""))].concat();
        let fields = split(&value).expect("well formed");
        assert_eq!(fields, vec![Some(&b"ab"[..]), None, Some(&b""[..])]);
        assert_eq!(join(fields), value);
        assert_eq!(split(&[]), Ok(Vec::new()));
        assert!(split(&value[..5]).is_err());
    }

    #[test]
    fn cell_keys_sort_in_field_order() {
        assert!(cell_key(1) < cell_key(2) && cell_key(2) < cell_key(300));
        assert_eq!(index_of_key(&cell_key(300)), Some(300));
        assert_eq!(index_of_key(b"x"), None);
    }
}
