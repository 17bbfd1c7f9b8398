//! Cassandra 6's length functions: `length(text)`, the count of UTF-16
//! code units (Java's `String.length()`: a character outside the Basic
//! Multilingual Plane counts 2), and `octet_length(x)` of any native
//! type, the size of its serialized value in bytes.

use bytes::Bytes;
use shoal_schema::CqlType;

use crate::error::{invalid, CqlResult};

/// What `length` takes; `octet_length` takes any native type.
pub const LENGTH_TYPES: [CqlType; 2] = [CqlType::Text, CqlType::Ascii];

/// `name` of a serialized argument, as an int.
pub fn apply(name: &str, arg: &[u8]) -> CqlResult<Bytes> {
    let n = match name {
        "length" => std::str::from_utf8(arg)
            .map_err(|_| invalid("In call to function system.length, value is not valid UTF-8"))?
            .encode_utf16()
            .count(),
        _ => arg.len(),
    };
    Ok(Bytes::copy_from_slice(&i32::try_from(n).unwrap_or(i32::MAX).to_be_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(b: Bytes) -> i32 {
        i32::from_be_bytes(b[..].try_into().expect("4 bytes"))
    }

    #[test]
    fn lengths_count_as_java_does() {
        let text = "こんにちは世界";
        assert_eq!(int(apply("length", text.as_bytes()).expect("length")), 7);
        assert_eq!(int(apply("octet_length", text.as_bytes()).expect("octet_length")), 21);
        assert_eq!(int(apply("length", "a😀".as_bytes()).expect("length")), 3, "a surrogate pair counts 2");
    }
}
