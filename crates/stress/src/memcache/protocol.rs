//! memcached wire format, client side: encoding the four requests the tool
//! sends and parsing replies incrementally out of a byte buffer that may hold
//! a partial reply, several replies, or both.
//!
//! Requests (key `k<n>`, flags 0, no expiry):
//! - text: `set k 0 0 <len>\r\n<data>\r\n` and `get k\r\n`;
//! - meta: `ms k <len>\r\n<data>\r\n` and `mg k v\r\n`.
//!
//! Replies: `STORED` / `HD` (written), `NOT_STORED` / `NS` (refused),
//! `VALUE k <flags> <len> [<cas>]\r\n<data>\r\nEND` / `VA <len> [flags]\r\n<data>`
//! (hit), `END` / `EN` (miss), and the error lines `ERROR`, `CLIENT_ERROR ...`,
//! `SERVER_ERROR ...`. Anything else means the stream is out of step and is a
//! [`ProtocolError`] (the caller drops the connection).

use crate::args::{MemcacheDialect, VALUE_SIZE_MAX};

/// A reply line longer than this without `\r\n` is garbage, not a slow reply.
const LINE_MAX_BYTES: usize = 8192;

/// One complete reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Stored,
    NotStored,
    /// A hit; the data (of this length) was checked and skipped.
    Value {
        len: usize,
    },
    Miss,
    /// `ERROR`, `CLIENT_ERROR ...` or `SERVER_ERROR ...`, as sent.
    Error(String),
}

/// The bytes cannot be a reply: the connection is out of step.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error("unexpected reply line {0:?}")]
    UnexpectedLine(String),
    #[error("malformed value header {0:?}")]
    BadValueHeader(String),
    #[error("value data not followed by \\r\\n")]
    BadDataTerminator,
    #[error("VALUE not followed by END")]
    MissingEnd,
    #[error("no end of line within {LINE_MAX_BYTES} bytes")]
    LineTooLong,
}

/// Appends a write of `value` under key `k<key>`.
pub fn encode_set(buf: &mut Vec<u8>, dialect: MemcacheDialect, key: u64, value: &[u8]) {
    let mut digits = itoa::Buffer::new();
    buf.extend_from_slice(match dialect {
        MemcacheDialect::Text => b"set k",
        MemcacheDialect::Meta => b"ms k",
    });
    buf.extend_from_slice(digits.format(key).as_bytes());
    if dialect == MemcacheDialect::Text {
        buf.extend_from_slice(b" 0 0");
    }
    buf.push(b' ');
    buf.extend_from_slice(digits.format(value.len()).as_bytes());
    buf.extend_from_slice(b"\r\n");
    buf.extend_from_slice(value);
    buf.extend_from_slice(b"\r\n");
}

/// Appends a read of key `k<key>`.
pub fn encode_get(buf: &mut Vec<u8>, dialect: MemcacheDialect, key: u64) {
    let (command, tail): (&[u8], &[u8]) = match dialect {
        MemcacheDialect::Text => (b"get k", b"\r\n"),
        MemcacheDialect::Meta => (b"mg k", b" v\r\n"),
    };
    buf.extend_from_slice(command);
    buf.extend_from_slice(itoa::Buffer::new().format(key).as_bytes());
    buf.extend_from_slice(tail);
}

/// Parses the first reply in `buf`: `Ok(None)` if it is not complete yet,
/// else the reply and how many bytes it took.
pub fn parse_reply(buf: &[u8]) -> Result<Option<(Reply, usize)>, ProtocolError> {
    let Some(line_end) = find_crlf(buf) else {
        return if buf.len() > LINE_MAX_BYTES { Err(ProtocolError::LineTooLong) } else { Ok(None) };
    };
    let line = &buf[..line_end];
    let after_line = line_end + 2;
    let text = || String::from_utf8_lossy(line).into_owned();
    let mut words = line.split(|&b| b == b' ').filter(|w| !w.is_empty());
    let first = words.next().unwrap_or_default();
    let reply = match first {
        b"STORED" | b"HD" => Reply::Stored,
        b"NOT_STORED" | b"NS" => Reply::NotStored,
        b"END" | b"EN" => Reply::Miss,
        b"ERROR" | b"CLIENT_ERROR" | b"SERVER_ERROR" => Reply::Error(text()),
        b"VALUE" => {
            // VALUE <key> <flags> <bytes> [<cas>]
            let len = words.nth(2).and_then(parse_len).ok_or_else(|| ProtocolError::BadValueHeader(text()))?;
            return value_then(buf, after_line, len, b"END\r\n");
        }
        b"VA" => {
            let len = words.next().and_then(parse_len).ok_or_else(|| ProtocolError::BadValueHeader(text()))?;
            return value_then(buf, after_line, len, b"");
        }
        _ => return Err(ProtocolError::UnexpectedLine(text())),
    };
    Ok(Some((reply, after_line)))
}

/// A value of `len` bytes at `start`, then `\r\n`, then `trailer`.
fn value_then(buf: &[u8], start: usize, len: usize, trailer: &[u8]) -> Result<Option<(Reply, usize)>, ProtocolError> {
    let data_end = start + len;
    let end = data_end + 2 + trailer.len();
    // What has arrived past the data must begin `\r\n` + trailer, checked
    // before the whole reply is in so that garbage fails early.
    let tail = buf.get(data_end..end.min(buf.len())).unwrap_or_default();
    let (crlf, rest) = tail.split_at(tail.len().min(2));
    if !b"\r\n".starts_with(crlf) {
        return Err(ProtocolError::BadDataTerminator);
    }
    if !trailer.starts_with(rest) {
        return Err(ProtocolError::MissingEnd);
    }
    Ok((buf.len() >= end).then_some((Reply::Value { len }, end)))
}

fn parse_len(word: &[u8]) -> Option<usize> {
    let len: usize = std::str::from_utf8(word).ok()?.parse().ok()?;
    (len <= VALUE_SIZE_MAX).then_some(len)
}

fn find_crlf(buf: &[u8]) -> Option<usize> {
    buf.windows(2).position(|w| w == b"\r\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(buf: &[u8]) -> Result<Vec<Reply>, ProtocolError> {
        let mut replies = Vec::new();
        let mut at = 0;
        while let Some((reply, used)) = parse_reply(&buf[at..])? {
            replies.push(reply);
            at += used;
        }
        assert_eq!(at, buf.len(), "bytes left over");
        Ok(replies)
    }

    #[test]
    fn requests_are_encoded() {
        let mut buf = Vec::new();
        encode_set(&mut buf, MemcacheDialect::Text, 7, b"ab\r\n");
        encode_get(&mut buf, MemcacheDialect::Text, 7);
        encode_set(&mut buf, MemcacheDialect::Meta, 8, b"xyz");
        encode_get(&mut buf, MemcacheDialect::Meta, 8);
        assert_eq!(buf, b"set k7 0 0 4\r\nab\r\n\r\nget k7\r\nms k8 3\r\nxyz\r\nmg k8 v\r\n");
    }

    #[test]
    fn all_reply_kinds_parse_back_to_back() -> Result<(), ProtocolError> {
        let buf = b"STORED\r\nHD\r\nNOT_STORED\r\nNS\r\nEND\r\nEN\r\nVALUE k1 0 3\r\nabc\r\nEND\r\n\
                    VALUE k1 5 2 99\r\n\r\n\r\nEND\r\nVA 4 f1\r\nwxyz\r\nVA 0\r\n\r\n\
                    ERROR\r\nCLIENT_ERROR bad data chunk\r\nSERVER_ERROR out of memory\r\n";
        assert_eq!(
            parse_all(buf)?,
            [
                Reply::Stored,
                Reply::Stored,
                Reply::NotStored,
                Reply::NotStored,
                Reply::Miss,
                Reply::Miss,
                Reply::Value { len: 3 },
                Reply::Value { len: 2 },
                Reply::Value { len: 4 },
                Reply::Value { len: 0 },
                Reply::Error("ERROR".into()),
                Reply::Error("CLIENT_ERROR bad data chunk".into()),
                Reply::Error("SERVER_ERROR out of memory".into()),
            ]
        );
        Ok(())
    }

    #[test]
    fn every_split_point_waits_for_more() -> Result<(), ProtocolError> {
        let replies: [&[u8]; 4] =
            [b"VALUE k12 0 5\r\nhe\r\no\r\nEND\r\n", b"VA 5 t\r\nhe\r\no\r\n", b"STORED\r\n", b"SERVER_ERROR x\r\n"];
        for reply in replies {
            for cut in 0..reply.len() {
                assert_eq!(parse_reply(&reply[..cut])?, None, "{:?} cut at {cut}", String::from_utf8_lossy(reply));
            }
            let (_, used) = parse_reply(reply)?.ok_or(ProtocolError::MissingEnd)?;
            assert_eq!(used, reply.len());
        }
        Ok(())
    }

    #[test]
    fn misses_are_not_errors() -> Result<(), ProtocolError> {
        assert_eq!(parse_reply(b"END\r\nSTORED")?, Some((Reply::Miss, 5)));
        assert_eq!(parse_reply(b"EN\r\n")?, Some((Reply::Miss, 4)));
        Ok(())
    }

    #[test]
    fn garbage_is_a_protocol_error() {
        assert!(matches!(parse_reply(b"HELLO\r\n"), Err(ProtocolError::UnexpectedLine(_))));
        assert!(matches!(parse_reply(b"VALUE k1 0\r\n"), Err(ProtocolError::BadValueHeader(_))));
        assert!(matches!(parse_reply(b"VALUE k1 0 x\r\n"), Err(ProtocolError::BadValueHeader(_))));
        assert!(matches!(parse_reply(b"VA 3\r\nabcd\r\n"), Err(ProtocolError::BadDataTerminator)));
        assert!(matches!(parse_reply(b"VALUE k 0 1\r\na\r\nSTORED\r\n"), Err(ProtocolError::MissingEnd)));
        // Detected before the whole reply is in.
        assert!(matches!(parse_reply(b"VALUE k 0 1\r\naXY"), Err(ProtocolError::BadDataTerminator)));
        assert!(matches!(parse_reply(b"VALUE k 0 1\r\na\r\nX"), Err(ProtocolError::MissingEnd)));
        assert!(matches!(parse_reply(&[b'x'; LINE_MAX_BYTES + 1]), Err(ProtocolError::LineTooLong)));
        assert!(matches!(parse_reply(b"VA 999999999999\r\n"), Err(ProtocolError::BadValueHeader(_))));
    }
}
