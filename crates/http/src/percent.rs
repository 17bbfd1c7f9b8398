//! Percent-decoding of a URL's path segments and query parameters
//! (RFC 3986 §2.1), so `?tag=my%20tag` and `/system/logger/a%3A%3Ab` mean
//! what the client encoded. In a query, `+` is a space (HTML forms).
//! nodetool encodes what it puts in a path or a query the same way.

use crate::HttpError;

/// `text` with each `%XX` replaced by its byte and, where `plus_is_space`,
/// each `+` by a space; an unfinished or non-hex escape, or bytes that are
/// not UTF-8 once decoded, are an error.
pub fn percent_decode(text: &str, plus_is_space: bool) -> Result<String, HttpError> {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'%' => {
                let hex = bytes.get(at + 1..at + 3).ok_or(HttpError::BadEscape)?;
                let high = hex_value(hex[0]).ok_or(HttpError::BadEscape)?;
                let low = hex_value(hex[1]).ok_or(HttpError::BadEscape)?;
                decoded.push(high << 4 | low);
                at += 3;
            }
            b'+' if plus_is_space => {
                decoded.push(b' ');
                at += 1;
            }
            _ => {
                decoded.push(byte);
                at += 1;
            }
        }
    }
    String::from_utf8(decoded).map_err(|_| HttpError::NotUtf8)
}

/// `text` with every byte outside RFC 3986's unreserved set
/// (`A-Z a-z 0-9 - . _ ~`) written as `%XX`: safe as a path segment or a
/// query value.
pub fn percent_encode(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => encoded.push(char::from(byte)),
            _ => encoded.push_str(&format!("%{byte:02X}")),
        }
    }
    encoded
}

fn hex_value(digit: u8) -> Option<u8> {
    char::from(digit).to_digit(16).and_then(|v| u8::try_from(v).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_escapes_and_plus() {
        assert_eq!(percent_decode("a%20b%2Fc", false).as_deref(), Ok("a b/c"));
        assert_eq!(percent_decode("a+b", true).as_deref(), Ok("a b"));
        assert_eq!(percent_decode("a+b", false).as_deref(), Ok("a+b"));
        assert_eq!(percent_decode("%c3%a9t%C3%A9", false).as_deref(), Ok("été"));
        assert_eq!(percent_decode("", false).as_deref(), Ok(""));
    }

    #[test]
    fn encoding_round_trips() {
        for text in ["plain", "a b/c?d=e&f", "été:x%", "shoal_cluster::group0", ""] {
            let encoded = percent_encode(text);
            assert!(encoded.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~%".contains(&b)), "{encoded}");
            assert_eq!(percent_decode(&encoded, true).as_deref(), Ok(text));
        }
    }

    #[test]
    fn refuses_bad_escapes() {
        assert_eq!(percent_decode("%", false), Err(HttpError::BadEscape));
        assert_eq!(percent_decode("%4", false), Err(HttpError::BadEscape));
        assert_eq!(percent_decode("%zz", false), Err(HttpError::BadEscape));
        assert_eq!(percent_decode("%ff", false), Err(HttpError::NotUtf8));
    }
}
