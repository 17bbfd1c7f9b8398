//! memcached's ASCII authentication (`-Y`, `--auth-file`): a file of
//! `username:password` lines, and a connection that must first send
//! `set <any key> <flags> <exptime> <bytes>\r\n<username> <password>\r\n`.
//! Until it has, every other line is answered `CLIENT_ERROR
//! unauthenticated` (memcached's `try_read_command_asciiauth`, whose texts
//! these are); a good pair answers `STORED`, a wrong one `CLIENT_ERROR
//! authentication failure`, and the connection may try again.
//!
//! Both decoders are total and bounded (fuzzed: `memcache_auth`): the file
//! is at most [`AUTH_FILE_BYTES_MAX`]; a first line without a newline in
//! [`LINE_MAX_BYTES`] bytes closes the connection, as memcached does, and
//! so does a payload announced longer than [`PAYLOAD_BYTES_MAX`] (memcached
//! would wait for it in a read buffer that cannot hold it).

use crate::parse::LINE_MAX_BYTES;

/// Larger auth files are refused (memcached keeps 8 entries).
pub const AUTH_FILE_BYTES_MAX: usize = 1 << 20;
/// The longest `username password` payload waited for.
pub const PAYLOAD_BYTES_MAX: usize = 2048;

/// The users an auth file allows.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct AuthTable {
    users: Vec<(Vec<u8>, Vec<u8>)>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthFileError {
    #[error("the auth file is larger than {AUTH_FILE_BYTES_MAX} bytes")]
    TooLarge,
    #[error("line {0} of the auth file is not username:password")]
    Malformed(usize),
    #[error("the auth file names no user")]
    Empty,
}

impl AuthTable {
    /// Parses an auth file: `username:password` per line (the password is
    /// the rest of the line, colons included; a `\r` before the newline is
    /// dropped). A line without a colon is an error, as in memcached;
    /// unlike memcached (which keeps the first 8 silently), every line
    /// counts.
    pub fn parse(text: &[u8]) -> Result<AuthTable, AuthFileError> {
        if text.len() > AUTH_FILE_BYTES_MAX {
            return Err(AuthFileError::TooLarge);
        }
        let text = text.strip_suffix(b"\n").unwrap_or(text);
        if text.is_empty() {
            return Err(AuthFileError::Empty);
        }
        let mut users = Vec::new();
        for (index, line) in text.split(|b| *b == b'\n').enumerate() {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let colon = line.iter().position(|b| *b == b':').ok_or(AuthFileError::Malformed(index + 1))?;
            users.push((line[..colon].to_vec(), line[colon + 1..].to_vec()));
        }
        Ok(AuthTable { users })
    }

    /// Whether `user` with `password` is allowed; compares every entry in
    /// full, so the time taken does not tell how much of a guess was right.
    pub fn check(&self, user: &[u8], password: &[u8]) -> bool {
        self.users.iter().fold(false, |found, (u, p)| found | (same(u, user) & same(p, password)))
    }
}

/// Equal bytes, in time that depends only on the lengths.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// What the first bytes of an unauthenticated connection are.
#[derive(Debug, PartialEq, Eq)]
pub enum AuthRequest<'a> {
    /// Read more.
    Incomplete,
    /// Junk: hang up.
    Close,
    /// A line that is not an authenticating `set`: `CLIENT_ERROR
    /// unauthenticated`.
    NotAuthentication {
        consumed: usize,
    },
    /// The payload does not end in `\r\n`.
    BadTermination {
        consumed: usize,
    },
    /// The payload is not two words.
    BadFormat {
        consumed: usize,
    },
    Credentials {
        user: &'a [u8],
        password: &'a [u8],
        consumed: usize,
    },
}

/// memcached's answers to each outcome.
pub const UNAUTHENTICATED: &[u8] = b"CLIENT_ERROR unauthenticated\r\n";
pub const BAD_TERMINATION: &[u8] = b"CLIENT_ERROR bad command line termination\r\n";
pub const BAD_FORMAT: &[u8] = b"CLIENT_ERROR bad authentication token format\r\n";
pub const FAILURE: &[u8] = b"CLIENT_ERROR authentication failure\r\n";
pub const STORED: &[u8] = b"STORED\r\n";

/// Words separated by spaces, as memcached's tokenizer splits them.
fn words(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes.split(|b| *b == b' ').filter(|w| !w.is_empty())
}

/// The authentication request at the front of `buf`.
pub fn parse_auth(buf: &[u8]) -> AuthRequest<'_> {
    let Some(newline) = buf.iter().position(|b| *b == b'\n') else {
        return if buf.len() > LINE_MAX_BYTES { AuthRequest::Close } else { AuthRequest::Incomplete };
    };
    let line_bytes = newline + 1;
    let header: Vec<&[u8]> = words(&buf[..newline]).take(6).collect();
    // The length may be followed by the line's `\r`, as memcached's
    // strtoul allows.
    let length = header.get(4).map(|w| w.strip_suffix(b"\r").unwrap_or(w)).and_then(|w| {
        std::str::from_utf8(w).ok().filter(|t| t.bytes().all(|b| b.is_ascii_digit())).and_then(|t| t.parse().ok())
    });
    let payload_bytes: usize = match (header.first(), length) {
        (Some(&b"set"), Some(length)) if header.len() >= 5 => length,
        _ => return AuthRequest::NotAuthentication { consumed: line_bytes },
    };
    if payload_bytes > PAYLOAD_BYTES_MAX {
        return AuthRequest::Close;
    }
    let Some(block) = buf.get(line_bytes..line_bytes + payload_bytes + 2) else { return AuthRequest::Incomplete };
    let consumed = line_bytes + block.len();
    let Some(payload) = block.strip_suffix(b"\r\n") else { return AuthRequest::BadTermination { consumed } };
    let mut tokens = words(payload);
    match (tokens.next(), tokens.next()) {
        (Some(user), Some(password)) => AuthRequest::Credentials { user, password, consumed },
        _ => AuthRequest::BadFormat { consumed },
    }
}

/// The answer to `request` against `table`, and whether the connection is
/// now authenticated; `None` for [`AuthRequest::Incomplete`] and
/// [`AuthRequest::Close`].
pub fn answer(request: &AuthRequest<'_>, table: &AuthTable) -> Option<(usize, &'static [u8], bool)> {
    Some(match *request {
        AuthRequest::Incomplete | AuthRequest::Close => return None,
        AuthRequest::NotAuthentication { consumed } => (consumed, UNAUTHENTICATED, false),
        AuthRequest::BadTermination { consumed } => (consumed, BAD_TERMINATION, false),
        AuthRequest::BadFormat { consumed } => (consumed, BAD_FORMAT, false),
        AuthRequest::Credentials { user, password, consumed } => {
            let allowed = table.check(user, password);
            (consumed, if allowed { STORED } else { FAILURE }, allowed)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_files_parse_as_memcached_reads_them() {
        let table = AuthTable::parse(b"alice:secret\nbob:pa:ss\r\ncarol:\n").expect("a valid file");
        assert!(table.check(b"alice", b"secret"));
        assert!(table.check(b"bob", b"pa:ss"));
        assert!(table.check(b"carol", b""));
        assert!(!table.check(b"alice", b"secre"));
        assert!(!table.check(b"alice", b"secrets"));
        assert!(!table.check(b"bob", b"secret"));
        assert_eq!(AuthTable::parse(b"alice:x\nnobody\n"), Err(AuthFileError::Malformed(2)));
        assert_eq!(AuthTable::parse(b"alice:x\n\nbob:y\n"), Err(AuthFileError::Malformed(2)));
        assert_eq!(AuthTable::parse(b""), Err(AuthFileError::Empty));
        assert_eq!(AuthTable::parse(&vec![b'a'; AUTH_FILE_BYTES_MAX + 1]), Err(AuthFileError::TooLarge));
    }

    #[test]
    fn the_first_command_authenticates_or_is_refused() {
        let table = AuthTable::parse(b"alice:secret\n").expect("a valid file");
        let run = |bytes: &[u8]| answer(&parse_auth(bytes), &table).map(|(n, text, ok)| (n, text.to_vec(), ok));
        let good = b"set anything 0 0 12\r\nalice secret\r\nget k\r\n";
        assert_eq!(run(good), Some((35, STORED.to_vec(), true)));
        assert_eq!(run(b"set x 1 2 11\r\nalice wrong\r\n"), Some((27, FAILURE.to_vec(), false)));
        assert_eq!(run(b"get k\r\n"), Some((7, UNAUTHENTICATED.to_vec(), false)));
        assert_eq!(run(b"set k 0 0\r\n"), Some((11, UNAUTHENTICATED.to_vec(), false)));
        assert_eq!(run(b"set k 0 0 x\r\n"), Some((13, UNAUTHENTICATED.to_vec(), false)));
        assert_eq!(run(b"set k 0 0 5\r\nalice\r\n"), Some((20, BAD_FORMAT.to_vec(), false)));
        assert_eq!(run(b"set k 0 0 5\r\nalicexx"), Some((20, BAD_TERMINATION.to_vec(), false)));
        assert_eq!(parse_auth(b"set k 0 0 12\r\nalice sec"), AuthRequest::Incomplete);
        assert_eq!(parse_auth(b"set k 0 0 1"), AuthRequest::Incomplete);
        assert_eq!(parse_auth(&[b'x'; LINE_MAX_BYTES + 1]), AuthRequest::Close);
        assert_eq!(parse_auth(b"set k 0 0 999999\r\n"), AuthRequest::Close);
    }
}
