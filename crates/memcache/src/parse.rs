//! Splitting requests off a connection's bytes, and memcached's text
//! commands (protocol.txt): a line of words separated by spaces, ended by
//! `\r\n` (a bare `\n` is accepted, as memcached does), and for storage
//! commands a data block of the announced length, also ended by `\r\n`.
//!
//! The parser is total and bounded: any bytes give a request, an error
//! request answered in memcached's words, "incomplete" or "close", never a
//! panic; nothing is allocated by a length the input claims (a data block
//! is waited for only up to the item size limit; beyond it the request is
//! refused and its data skipped as it arrives).

use crate::meta;
use crate::request::{parse_client_flags, parse_i32, parse_u64, valid_key, ProtocolError, Request, StoreCommand};
use crate::words::Words;

/// A line without a newline longer than this is not a request (memcached
/// closes the connection), unless it is a multi-key get.
pub const LINE_MAX_BYTES: usize = 2048;
/// The longest multi-key `get` line waited for.
pub const MULTIGET_LINE_MAX_BYTES: usize = 1 << 20;
/// Words after the command, at most, of any request but a retrieval: a meta
/// command's key, data length and flags (`meta::FLAGS_MAX`).
pub(crate) const ARGS_MAX: usize = 2 + crate::meta::FLAGS_MAX;

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The largest value stored (memcached's `-I`, `item_size_max`).
    pub item_size_max_bytes: usize,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// A request, the bytes it took from the buffer, and how many bytes
    /// after those to discard as they arrive (a refused data block).
    Request { request: Request<'a>, consumed: usize, skip: usize },
    /// The buffer ends inside a request: read more.
    Incomplete,
    /// Not a protocol this server speaks: close the connection.
    Close,
}

/// The first request in `buf`.
pub fn parse<'a>(buf: &'a [u8], limits: &Limits) -> Parsed<'a> {
    let Some(newline) = memchr::memchr(b'\n', buf) else {
        let waiting = buf.len() <= LINE_MAX_BYTES || (is_multiget(buf) && buf.len() <= MULTIGET_LINE_MAX_BYTES);
        return if waiting { Parsed::Incomplete } else { Parsed::Close };
    };
    let line_bytes = newline + 1;
    let line = buf[..newline].strip_suffix(b"\r").unwrap_or(&buf[..newline]);
    let done = |request| Parsed::Request { request, consumed: line_bytes, skip: 0 };
    let Some((command, words)) = Words::new(line).split_first() else {
        return done(Request::Fail(ProtocolError::UnknownCommand));
    };
    match command {
        // Retrievals take any number of keys: kept where they stand.
        b"get" | b"gets" | b"gat" | b"gats" => return done(retrievals(command, words)),
        b"mg" | b"ms" | b"md" | b"ma" | b"me" => {
            return meta::parse(command, words, &buf[line_bytes..], line_bytes, limits)
        }
        _ => {}
    }
    // (The commands above are no HTTP request line.)
    if is_http_request(command, line) {
        return Parsed::Close;
    }
    // Other commands have a few words: kept on the stack.
    let mut buffer: [&[u8]; ARGS_MAX] = [&[]; ARGS_MAX];
    let mut count = 0;
    for word in words.iter() {
        if count == ARGS_MAX {
            let too_many =
                if command.first() == Some(&b'm') { ProtocolError::BadFormat } else { ProtocolError::UnknownCommand };
            return done(Request::Fail(too_many));
        }
        buffer[count] = word;
        count += 1;
    }
    let args = &buffer[..count];
    match command {
        b"set" | b"add" | b"replace" | b"append" | b"prepend" | b"cas" => {
            store(command, args, &buf[line_bytes..], line_bytes, limits)
        }
        b"incr" | b"decr" => done(arith(args, command == b"decr")),
        b"delete" => done(delete(args)),
        b"touch" => done(touch(args)),
        b"flush_all" => done(flush_all(args)),
        b"version" => done(Request::Version),
        b"verbosity" => done(match args {
            [_] | [_, _] => Request::Verbosity { noreply: args.last() == Some(&&b"noreply"[..]) },
            _ => Request::Fail(ProtocolError::UnknownCommand),
        }),
        b"quit" => done(Request::Quit),
        b"stats" => done(Request::Stats { group: args.first().copied().unwrap_or(b"") }),
        b"cache_memlimit" => done(cache_memlimit(args)),
        b"mn" => done(Request::MetaNoop),
        _ => done(Request::Fail(ProtocolError::UnknownCommand)),
    }
}

/// Commands this parser knows; any other line is an unknown command.
const COMMANDS: &[&[u8]] = &[
    b"get",
    b"gets",
    b"gat",
    b"gats",
    b"set",
    b"add",
    b"replace",
    b"append",
    b"prepend",
    b"cas",
    b"incr",
    b"decr",
    b"delete",
    b"touch",
    b"flush_all",
    b"version",
    b"verbosity",
    b"quit",
    b"stats",
    b"cache_memlimit",
    b"mn",
    b"mg",
    b"ms",
    b"md",
    b"ma",
    b"me",
];

/// An HTTP request line (`GET / HTTP/1.1`), as memcached tells one: an
/// unknown command of two bytes or more (shorter ones are errors first)
/// whose last word starts with `HTTP/`. memcached hangs up on it, so that
/// a web page cannot make a browser talk to the cache port.
fn is_http_request(command: &[u8], line: &[u8]) -> bool {
    let last = || line.split(|b| *b == b' ').rfind(|w| !w.is_empty());
    command.len() >= 2 && !COMMANDS.contains(&command) && last().is_some_and(|w| w.starts_with(b"HTTP/"))
}

fn is_multiget(buf: &[u8]) -> bool {
    let start = buf.iter().position(|b| *b != b' ').unwrap_or(buf.len());
    start <= 100 && (buf[start..].starts_with(b"get ") || buf[start..].starts_with(b"gets "))
}

/// `get|gets <key>*`, `gat|gats <exptime> <key>*`; `words` follow the
/// command.
fn retrievals<'a>(command: &[u8], words: Words<'a>) -> Request<'a> {
    let with_cas = matches!(command, b"gets" | b"gats");
    let (touch, keys) = match command {
        b"gat" | b"gats" => {
            let Some((exptime, keys)) = words.split_first() else {
                return Request::Fail(ProtocolError::UnknownCommand);
            };
            match parse_i32(exptime) {
                // memcached answers a `gat` without keys with an empty END.
                Some(_) if keys.is_empty() => return Request::Retrieve { keys, with_cas: false, touch: None },
                Some(exptime) => (Some(i64::from(exptime)), keys),
                None => return Request::Fail(ProtocolError::InvalidExptime),
            }
        }
        _ => (None, words),
    };
    if keys.is_empty() {
        return Request::Fail(ProtocolError::UnknownCommand);
    }
    if !keys.iter().all(valid_key) {
        return Request::Fail(ProtocolError::BadFormat);
    }
    Request::Retrieve { keys, with_cas, touch }
}

/// `<command> <key> <flags> <exptime> <bytes> [<cas unique>] [noreply]`
/// and its data block.
fn store<'a>(command: &[u8], args: &[&'a [u8]], data: &'a [u8], line_bytes: usize, limits: &Limits) -> Parsed<'a> {
    let is_cas = command == b"cas";
    let fixed = if is_cas { 5 } else { 4 };
    let done = |request| Parsed::Request { request, consumed: line_bytes, skip: 0 };
    if args.len() != fixed && args.len() != fixed + 1 {
        return done(Request::Fail(ProtocolError::UnknownCommand));
    }
    let key = args[0];
    if !valid_key(key) {
        return done(Request::Fail(ProtocolError::BadFormat));
    }
    let (Some(flags), Some(exptime), Some(length)) =
        (parse_client_flags(args[1]), parse_i32(args[2]), parse_i32(args[3]))
    else {
        return done(Request::Fail(ProtocolError::BadFormat));
    };
    let Ok(length) = usize::try_from(length) else { return done(Request::Fail(ProtocolError::BadFormat)) };
    let unique = if is_cas {
        match parse_u64(args[4]) {
            Some(unique) => Some(unique),
            None => return done(Request::Fail(ProtocolError::BadFormat)),
        }
    } else {
        None
    };
    let noreply = args.len() == fixed + 1 && args[fixed] == b"noreply";
    if length > limits.item_size_max_bytes {
        let key = (command == b"set").then_some(key);
        return Parsed::Request { request: Request::TooLarge { key, noreply }, consumed: line_bytes, skip: length + 2 };
    }
    let Some(block) = data.get(..length + 2) else { return Parsed::Incomplete };
    let consumed = line_bytes + length + 2;
    if &block[length..] != b"\r\n" {
        return Parsed::Request { request: Request::Fail(ProtocolError::BadDataChunk), consumed, skip: 0 };
    }
    let command = match (command, unique) {
        (_, Some(unique)) => StoreCommand::Cas(unique),
        (b"set", _) => StoreCommand::Set,
        (b"add", _) => StoreCommand::Add,
        (b"replace", _) => StoreCommand::Replace,
        (b"append", _) => StoreCommand::Append,
        _ => StoreCommand::Prepend,
    };
    let request = Request::Store { command, key, flags, exptime: i64::from(exptime), data: &block[..length], noreply };
    Parsed::Request { request, consumed, skip: 0 }
}

/// `incr|decr <key> <value> [noreply]`
fn arith<'a>(args: &[&'a [u8]], decrement: bool) -> Request<'a> {
    let ([key, delta] | [key, delta, _]) = args else { return Request::Fail(ProtocolError::UnknownCommand) };
    if !valid_key(key) {
        return Request::Fail(ProtocolError::BadFormat);
    }
    let Some(delta) = parse_u64(delta) else { return Request::Fail(ProtocolError::InvalidDelta) };
    Request::Arith { key, decrement, delta, noreply: args.get(2) == Some(&&b"noreply"[..]) }
}

/// `delete <key> [0] [noreply]` (the `0` is a relic clients still send).
fn delete<'a>(args: &[&'a [u8]]) -> Request<'a> {
    let Some((&key, rest)) = args.split_first() else { return Request::Fail(ProtocolError::UnknownCommand) };
    if args.len() > 3 {
        return Request::Fail(ProtocolError::UnknownCommand);
    }
    if !valid_key(key) {
        return Request::Fail(ProtocolError::BadFormat);
    }
    let noreply = rest.last() == Some(&&b"noreply"[..]);
    let legacy = &rest[..rest.len() - usize::from(noreply)];
    if !(legacy.is_empty() || legacy == [b"0"]) {
        return Request::Fail(ProtocolError::DeleteUsage);
    }
    Request::Delete { key, noreply }
}

/// `touch <key> <exptime> [noreply]`
fn touch<'a>(args: &[&'a [u8]]) -> Request<'a> {
    let ([key, exptime] | [key, exptime, _]) = args else { return Request::Fail(ProtocolError::UnknownCommand) };
    if !valid_key(key) {
        return Request::Fail(ProtocolError::BadFormat);
    }
    let Some(exptime) = parse_i32(exptime) else { return Request::Fail(ProtocolError::InvalidExptime) };
    Request::Touch { key, exptime: i64::from(exptime), noreply: args.get(2) == Some(&&b"noreply"[..]) }
}

/// `cache_memlimit <megabytes> [noreply]`
fn cache_memlimit<'a>(args: &[&'a [u8]]) -> Request<'a> {
    /// memcached refuses less.
    const MEGABYTES_MIN: u64 = 8;
    let ([megabytes] | [megabytes, _]) = args else { return Request::Fail(ProtocolError::UnknownCommand) };
    match parse_u64(megabytes) {
        Some(megabytes) if megabytes < MEGABYTES_MIN => Request::Fail(ProtocolError::MemlimitTooSmall),
        Some(megabytes) => Request::CacheMemlimit { megabytes, noreply: args.get(1) == Some(&&b"noreply"[..]) },
        None => Request::Fail(ProtocolError::BadFormat),
    }
}

/// `flush_all [delay] [noreply]`
fn flush_all<'a>(args: &[&'a [u8]]) -> Request<'a> {
    let noreply = args.last() == Some(&&b"noreply"[..]);
    match &args[..args.len() - usize::from(noreply)] {
        [] => Request::FlushAll { delay_s: 0, noreply },
        [delay] => match parse_i32(delay) {
            Some(delay) => Request::FlushAll { delay_s: i64::from(delay), noreply },
            None => Request::Fail(ProtocolError::InvalidExptime),
        },
        _ => Request::Fail(ProtocolError::UnknownCommand),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits { item_size_max_bytes: 1 << 20 };

    fn request(buf: &[u8]) -> (Request<'_>, usize, usize) {
        match parse(buf, &LIMITS) {
            Parsed::Request { request, consumed, skip } => (request, consumed, skip),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_store_takes_its_line_and_data_block() {
        let buf = b"set k 5 0 3 noreply\r\nabc\r\nget k\r\n";
        let (r, consumed, _) = request(buf);
        assert_eq!(consumed, 26);
        assert_eq!(
            r,
            Request::Store { command: StoreCommand::Set, key: b"k", flags: 5, exptime: 0, data: b"abc", noreply: true }
        );
        assert_eq!(
            request(&buf[consumed..]).0,
            Request::Retrieve { keys: Words::new(b"k"), with_cas: false, touch: None }
        );
    }

    #[test]
    fn a_store_waits_for_its_data_and_refuses_a_bad_chunk() {
        assert_eq!(parse(b"set k 0 0 3\r\nab", &LIMITS), Parsed::Incomplete);
        assert_eq!(request(b"set k 0 0 3\r\nabcd\r\n").0, Request::Fail(ProtocolError::BadDataChunk));
    }

    #[test]
    fn an_item_over_the_limit_is_refused_and_its_data_skipped() {
        let (r, consumed, skip) = request(b"set k 0 0 2000000\r\n");
        assert_eq!((r, consumed, skip), (Request::TooLarge { key: Some(b"k"), noreply: false }, 19, 2_000_002));
    }

    #[test]
    fn long_lines_close_unless_they_are_a_multiget() {
        assert_eq!(parse(&[b'x'; LINE_MAX_BYTES + 1], &LIMITS), Parsed::Close);
        // HTTP request lines, as memcached: unknown commands (of two bytes
        // or more) ending with an HTTP version close; known ones do not.
        for line in [
            &b"GET / HTTP/1.0\r\n"[..],
            b"PUT /x HTTP/1.1\r\n",
            b"HTTP/1.1\r\n",
            b"HEAD / HTTP/2.0\r\n",
            b"foo a b c d e f g h i j HTTP/1.1\r\n",
        ] {
            assert_eq!(parse(line, &LIMITS), Parsed::Close, "{}", String::from_utf8_lossy(line));
        }
        for line in [&b"GET / HTTP/1.0 x\r\n"[..], b"x HTTP/1.1\r\n", b"get HTTP/1.1\r\n", b"delete HTTP/1.1\r\n"] {
            assert!(matches!(parse(line, &LIMITS), Parsed::Request { .. }), "{}", String::from_utf8_lossy(line));
        }
        let mut get = b"get ".to_vec();
        get.resize(LINE_MAX_BYTES + 10, b'k');
        assert_eq!(parse(&get, &LIMITS), Parsed::Incomplete);
    }

    #[test]
    fn errors_are_memcacheds() {
        assert_eq!(request(b"bogus\r\n").0, Request::Fail(ProtocolError::UnknownCommand));
        assert_eq!(request(b"set k 0 0\r\n").0, Request::Fail(ProtocolError::UnknownCommand));
        assert_eq!(request(b"set k x 0 1\r\n").0, Request::Fail(ProtocolError::BadFormat));
        let long = [b"get ".as_slice(), &[b'k'; 251], b"\r\n"].concat();
        assert_eq!(request(&long).0, Request::Fail(ProtocolError::BadFormat));
        assert_eq!(request(b"incr k x\r\n").0, Request::Fail(ProtocolError::InvalidDelta));
        assert_eq!(request(b"touch k x\r\n").0, Request::Fail(ProtocolError::InvalidExptime));
        assert_eq!(request(b"delete k 5\r\n").0, Request::Fail(ProtocolError::DeleteUsage));
    }
}
