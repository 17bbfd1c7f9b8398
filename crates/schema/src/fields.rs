//! One field of a serialized tuple or user type value (each field a
//! `[bytes]`, in order, trailing fields possibly left out): read for field
//! selection (`SELECT u.f`), replaced for `UPDATE ... SET u.f = v`, which the
//! shard owning the row applies to the stored value.

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

/// Whether every field of `bytes` is null (or left out): a non-frozen
/// user type in that state is no value at all, as in Cassandra, where its
/// fields are cells and none is left.
pub fn all_null(bytes: &[u8]) -> Result<bool, ValueError> {
    let mut reader = Reader::new(bytes);
    while !reader.is_empty() {
        if reader.read_item(WHAT)?.is_some() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// `bytes` (no value at all when `None`) with field `index` set to `value`;
/// fields before it that the value left out become null.
pub fn with_field(bytes: Option<&[u8]>, index: usize, value: Option<&[u8]>) -> Result<Vec<u8>, ValueError> {
    let mut reader = Reader::new(bytes.unwrap_or_default());
    let mut fields = Vec::new();
    while !reader.is_empty() {
        fields.push(reader.read_item(WHAT)?);
    }
    if fields.len() <= index {
        fields.resize(index + 1, None);
    }
    fields[index] = value;
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
    Ok(out)
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
    fn all_null_when_no_field_has_a_value() {
        assert_eq!(all_null(&[]), Ok(true));
        assert_eq!(all_null(&[item(None), item(None)].concat()), Ok(true));
        assert_eq!(all_null(&[item(None), item(Some(b""))].concat()), Ok(false));
        assert!(all_null(&[0, 0, 0, 9]).is_err());
    }

    #[test]
    fn replaces_and_extends() {
        let value = [item(Some(b"ab")), item(None)].concat();
        assert_eq!(with_field(Some(&value), 0, Some(b"x")), Ok([item(Some(b"x")), item(None)].concat()));
        let extended = [item(Some(b"ab")), item(None), item(None), item(Some(b"y"))].concat();
        assert_eq!(with_field(Some(&value), 3, Some(b"y")), Ok(extended));
        assert_eq!(with_field(None, 1, None), Ok([item(None), item(None)].concat()));
        assert!(with_field(Some(&value[..5]), 0, None).is_err());
    }
}
