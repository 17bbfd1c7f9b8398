//! memcached wire format, client side: encoding the requests the tool sends
//! and parsing replies incrementally out of a byte buffer that may hold a
//! partial reply, several replies, or both.
//!
//! Requests (key `k<n>`, flags 0, no expiry):
//! - text: `set k 0 0 <len>\r\n<data>\r\n`, `incr k 1\r\n`, `delete k\r\n`
//!   and `get k [k ...]\r\n`;
//! - meta: `ms k <len>\r\n<data>\r\n`, `ma k\r\n`, `md k\r\n` and `mg k v\r\n`.
//!
//! Replies: `STORED` / `DELETED` / a number / `HD` (done), `NOT_STORED` /
//! `NS` (refused), `NOT_FOUND` / `NF` (no such key), `VALUE k <flags> <len>
//! [<cas>]\r\n<data>\r\n`... `END` (hits of a get, one block per key found) /
//! `VA <len> [flags]\r\n<data>` (a hit of `mg`), `END` / `EN` (miss), and
//! the error lines `ERROR`, `CLIENT_ERROR ...`, `SERVER_ERROR ...`. Anything
//! else means the stream is out of step and is a [`ProtocolError`] (the
//! caller drops the connection).

use crate::args::{MemcacheDialect, MemcacheWrite, VALUE_SIZE_MAX};

/// A reply line longer than this without `\r\n` is garbage, not a slow reply.
const LINE_MAX_BYTES: usize = 8192;

/// One complete reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `STORED`, `DELETED`, `HD`, or the new value of an `incr`.
    Done,
    NotStored,
    /// `NOT_FOUND` / `NF`: an `incr` or `delete` of a key that is not there.
    NotFound,
    /// The values found by a get (at least one); their data was checked and skipped.
    Hits(usize),
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

/// Appends a write of key `k<key>`: `value` for a set, nothing for the others.
pub fn encode_write(buf: &mut Vec<u8>, dialect: MemcacheDialect, write: MemcacheWrite, key: u64, value: &[u8]) {
    let mut digits = itoa::Buffer::new();
    buf.extend_from_slice(match (dialect, write) {
        (MemcacheDialect::Text, MemcacheWrite::Set) => b"set k",
        (MemcacheDialect::Text, MemcacheWrite::Incr) => b"incr k",
        (MemcacheDialect::Text, MemcacheWrite::Delete) => b"delete k",
        (MemcacheDialect::Meta, MemcacheWrite::Set) => b"ms k",
        (MemcacheDialect::Meta, MemcacheWrite::Incr) => b"ma k",
        (MemcacheDialect::Meta, MemcacheWrite::Delete) => b"md k",
    });
    buf.extend_from_slice(digits.format(key).as_bytes());
    match (dialect, write) {
        (_, MemcacheWrite::Set) => {
            if dialect == MemcacheDialect::Text {
                buf.extend_from_slice(b" 0 0");
            }
            buf.push(b' ');
            buf.extend_from_slice(digits.format(value.len()).as_bytes());
            buf.extend_from_slice(b"\r\n");
            buf.extend_from_slice(value);
        }
        (MemcacheDialect::Text, MemcacheWrite::Incr) => buf.extend_from_slice(b" 1"),
        _ => {}
    }
    buf.extend_from_slice(b"\r\n");
}

/// Appends a read of keys `k<key>` (several in one text `get`; `mg` takes one).
pub fn encode_get(buf: &mut Vec<u8>, dialect: MemcacheDialect, keys: &[u64]) {
    assert!(!keys.is_empty() && (dialect == MemcacheDialect::Text || keys.len() == 1), "mg takes one key");
    let mut digits = itoa::Buffer::new();
    let (command, tail): (&[u8], &[u8]) = match dialect {
        MemcacheDialect::Text => (b"get", b"\r\n"),
        MemcacheDialect::Meta => (b"mg", b" v\r\n"),
    };
    buf.extend_from_slice(command);
    for &key in keys {
        buf.extend_from_slice(b" k");
        buf.extend_from_slice(digits.format(key).as_bytes());
    }
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
        b"STORED" | b"DELETED" | b"HD" => Reply::Done,
        b"NOT_STORED" | b"NS" => Reply::NotStored,
        b"NOT_FOUND" | b"NF" => Reply::NotFound,
        b"END" | b"EN" => Reply::Miss,
        b"ERROR" | b"CLIENT_ERROR" | b"SERVER_ERROR" => Reply::Error(text()),
        b"VALUE" => return text_values(buf),
        b"VA" => {
            let len = words.next().and_then(parse_len).ok_or_else(|| ProtocolError::BadValueHeader(text()))?;
            return Ok(value_end(buf, after_line, len)?.map(|end| (Reply::Hits(1), end)));
        }
        digits if !digits.is_empty() && digits.iter().all(u8::is_ascii_digit) => Reply::Done,
        _ => return Err(ProtocolError::UnexpectedLine(text())),
    };
    Ok(Some((reply, after_line)))
}

/// A text get's reply that begins with a `VALUE` block: blocks up to `END`.
fn text_values(buf: &[u8]) -> Result<Option<(Reply, usize)>, ProtocolError> {
    let mut at = 0;
    let mut hits = 0;
    loop {
        let rest = &buf[at..];
        let Some(line_end) = find_crlf(rest) else {
            // What has arrived must begin another block or the END, checked
            // before the whole reply is in so that garbage fails early.
            let cut = rest.len().min(6);
            if hits > 0 && !b"END\r\n".starts_with(&rest[..cut.min(5)]) && !b"VALUE ".starts_with(&rest[..cut]) {
                return Err(ProtocolError::MissingEnd);
            }
            return if rest.len() > LINE_MAX_BYTES { Err(ProtocolError::LineTooLong) } else { Ok(None) };
        };
        let line = &rest[..line_end];
        if line == b"END" && hits > 0 {
            return Ok(Some((Reply::Hits(hits), at + line_end + 2)));
        }
        let mut words = line.split(|&b| b == b' ').filter(|w| !w.is_empty());
        if words.next() != Some(&b"VALUE"[..]) {
            return Err(ProtocolError::MissingEnd);
        }
        // VALUE <key> <flags> <bytes> [<cas>]
        let bad_header = || ProtocolError::BadValueHeader(String::from_utf8_lossy(line).into_owned());
        let len = words.nth(2).and_then(parse_len).ok_or_else(bad_header)?;
        match value_end(buf, at + line_end + 2, len)? {
            Some(end) => at = end,
            None => return Ok(None),
        }
        hits += 1;
    }
}

/// Where a value of `len` bytes at `start` and its `\r\n` end; `None` until
/// they have arrived.
fn value_end(buf: &[u8], start: usize, len: usize) -> Result<Option<usize>, ProtocolError> {
    let data_end = start + len;
    let end = data_end + 2;
    // What has arrived past the data must begin `\r\n`.
    let crlf = buf.get(data_end..end.min(buf.len())).unwrap_or_default();
    if !b"\r\n".starts_with(crlf) {
        return Err(ProtocolError::BadDataTerminator);
    }
    Ok((buf.len() >= end).then_some(end))
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
        encode_write(&mut buf, MemcacheDialect::Text, MemcacheWrite::Set, 7, b"ab\r\n");
        encode_get(&mut buf, MemcacheDialect::Text, &[7]);
        encode_write(&mut buf, MemcacheDialect::Meta, MemcacheWrite::Set, 8, b"xyz");
        encode_get(&mut buf, MemcacheDialect::Meta, &[8]);
        assert_eq!(buf, b"set k7 0 0 4\r\nab\r\n\r\nget k7\r\nms k8 3\r\nxyz\r\nmg k8 v\r\n");
        buf.clear();
        for dialect in [MemcacheDialect::Text, MemcacheDialect::Meta] {
            encode_write(&mut buf, dialect, MemcacheWrite::Incr, 1, b"ignored");
            encode_write(&mut buf, dialect, MemcacheWrite::Delete, 2, b"ignored");
        }
        encode_get(&mut buf, MemcacheDialect::Text, &[3, 40, 500]);
        assert_eq!(buf, b"incr k1 1\r\ndelete k2\r\nma k1\r\nmd k2\r\nget k3 k40 k500\r\n");
    }

    #[test]
    fn all_reply_kinds_parse_back_to_back() -> Result<(), ProtocolError> {
        let buf = b"STORED\r\nHD\r\nDELETED\r\n18446744073709551615\r\nNOT_STORED\r\nNS\r\nNOT_FOUND\r\nNF\r\n\
                    END\r\nEN\r\nVALUE k1 0 3\r\nabc\r\nEND\r\n\
                    VALUE k1 5 2 99\r\n\r\n\r\nVALUE k7 0 1\r\nx\r\nEND\r\nVA 4 f1\r\nwxyz\r\nVA 0\r\n\r\n\
                    ERROR\r\nCLIENT_ERROR bad data chunk\r\nSERVER_ERROR out of memory\r\n";
        assert_eq!(
            parse_all(buf)?,
            [
                Reply::Done,
                Reply::Done,
                Reply::Done,
                Reply::Done,
                Reply::NotStored,
                Reply::NotStored,
                Reply::NotFound,
                Reply::NotFound,
                Reply::Miss,
                Reply::Miss,
                Reply::Hits(1),
                Reply::Hits(2),
                Reply::Hits(1),
                Reply::Hits(1),
                Reply::Error("ERROR".into()),
                Reply::Error("CLIENT_ERROR bad data chunk".into()),
                Reply::Error("SERVER_ERROR out of memory".into()),
            ]
        );
        Ok(())
    }

    #[test]
    fn every_split_point_waits_for_more() -> Result<(), ProtocolError> {
        let replies: [&[u8]; 5] = [
            b"VALUE k12 0 5\r\nhe\r\no\r\nEND\r\n",
            b"VALUE k1 0 2\r\nab\r\nVALUE k2 0 1\r\nc\r\nEND\r\n",
            b"VA 5 t\r\nhe\r\no\r\n",
            b"STORED\r\n",
            b"SERVER_ERROR x\r\n",
        ];
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
        assert!(matches!(parse_reply(b"VALUE k 0 1\r\na\r\nVALUX"), Err(ProtocolError::MissingEnd)));
        assert!(matches!(parse_reply(&[b'x'; LINE_MAX_BYTES + 1]), Err(ProtocolError::LineTooLong)));
        assert!(matches!(parse_reply(b"VA 999999999999\r\n"), Err(ProtocolError::BadValueHeader(_))));
    }
}
