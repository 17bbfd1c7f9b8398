//! memcached's meta commands (`mg`, `ms`, `md`, `ma`, `me`; `mn` is a
//! plain request): `<cmd> <key> [<datalen>] <flag>*`, each flag one letter,
//! some followed by a token (`T30`, `Oopaque`). Flags are kept in request
//! order, because the answer echoes the requested ones in that order.

use std::borrow::Cow;

use base64::Engine;

use crate::parse::{Limits, Parsed, ARGS_MAX};
use crate::request::{parse_i32, parse_u32, parse_u64, valid_key, ProtocolError, Request, KEY_MAX_BYTES};
use crate::words::Words;

/// Flags one request may carry, at most (memcached's tokens per line).
pub const FLAGS_MAX: usize = 24;
/// Longest opaque token echoed back.
const OPAQUE_MAX_BYTES: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaCommand {
    Get,
    Set,
    Delete,
    Arith,
    Debug,
}

impl MetaCommand {
    /// The flags the command takes: letters alone, and letters that take a
    /// token.
    fn accepts(self) -> (&'static [u8], &'static [u8]) {
        match self {
            // Not yet: md x (remove the value, keep the item), E on mg:
            // refused as invalid flags.
            MetaCommand::Get => (b"bcfhklqstuv", b"NORT"),
            MetaCommand::Set => (b"bckqI", b"CEFMNOT"),
            MetaCommand::Delete => (b"bkqI", b"CEOT"),
            MetaCommand::Arith => (b"bcktqv", b"CDEJMNOT"),
            MetaCommand::Debug => (b"b", b""),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta<'a> {
    pub command: MetaCommand,
    /// The key as stored (decoded when sent in base64, flag `b`).
    pub key: Cow<'a, [u8]>,
    pub flags: Flags<'a>,
    /// `ms`'s data block.
    pub data: &'a [u8],
}

/// A meta request's flags, validated, where they stand in the line (in
/// request order, as the answer echoes them), and which letters are
/// present, so `has` is a bit test and an absent flag's token costs no walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flags<'a> {
    words: Words<'a>,
    present: u64,
}

impl<'a> Flags<'a> {
    /// `(letter, token)` in request order. A flag without a token may
    /// still carry bytes after its letter (memcached ignores them, and so
    /// does every reader of a bare flag's token).
    pub fn iter(self) -> impl Iterator<Item = (u8, &'a [u8])> {
        // Every word is a validated flag: a letter, then its token.
        self.words.iter().filter_map(|word| word.split_first().map(|(flag, token)| (*flag, token)))
    }

    pub fn has(self, flag: u8) -> bool {
        letter_bit(flag).is_some_and(|bit| self.present & bit != 0)
    }

    pub fn token(self, flag: u8) -> Option<&'a [u8]> {
        if !self.has(flag) {
            return None;
        }
        self.iter().find(|(f, _)| *f == flag).map(|(_, t)| t)
    }
}

/// A flag letter's bit in [`Flags::present`]; other bytes are no flag.
fn letter_bit(flag: u8) -> Option<u64> {
    match flag {
        b'A'..=b'Z' => Some(1 << (flag - b'A')),
        b'a'..=b'z' => Some(1 << (26 + flag - b'a')),
        _ => None,
    }
}

impl<'a> Meta<'a> {
    pub fn has(&self, flag: u8) -> bool {
        self.flags.has(flag)
    }

    pub fn token(&self, flag: u8) -> Option<&'a [u8]> {
        self.flags.token(flag)
    }

    /// A numeric token, validated when parsed.
    pub fn number(&self, flag: u8) -> Option<u64> {
        self.token(flag).and_then(parse_u64)
    }

    /// A TTL-like token (`T`, `N`, `R`), validated when parsed.
    pub fn seconds(&self, flag: u8) -> Option<i64> {
        self.token(flag).and_then(parse_i32).map(i64::from)
    }

    /// The key as the client sent it: base64 again under `b`.
    pub fn key_as_sent(&self) -> Cow<'_, [u8]> {
        if self.has(b'b') {
            Cow::Owned(base64::engine::general_purpose::STANDARD.encode(&self.key).into_bytes())
        } else {
            Cow::Borrowed(&self.key)
        }
    }
}

/// Parses a meta request whose command word is `command`, `words` the
/// rest of its line; `rest` follows its line (`ms`'s data block).
pub fn parse<'a>(command: &[u8], words: Words<'a>, rest: &'a [u8], line_bytes: usize, limits: &Limits) -> Parsed<'a> {
    let command = match command {
        b"mg" => MetaCommand::Get,
        b"ms" => MetaCommand::Set,
        b"md" => MetaCommand::Delete,
        b"ma" => MetaCommand::Arith,
        _ => MetaCommand::Debug,
    };
    let fail = |e| Parsed::Request { request: Request::Fail(e), consumed: line_bytes, skip: 0 };
    if words.exceeds(ARGS_MAX) {
        return fail(ProtocolError::BadFormat);
    }
    let Some((key, mut words)) = words.split_first() else {
        // No key: memcached 1.6.18's answers.
        return fail(if command == MetaCommand::Debug {
            ProtocolError::BadFormat
        } else {
            ProtocolError::UnknownCommand
        });
    };
    if key.len() > KEY_MAX_BYTES {
        return fail(ProtocolError::BadFormat);
    }
    let mut length = None;
    if command == MetaCommand::Set {
        let Some((datalen, flags)) = words.split_first() else { return fail(ProtocolError::BadFormat) };
        match parse_i32(datalen).and_then(|n| usize::try_from(n).ok()) {
            Some(n) => length = Some(n),
            None => return fail(ProtocolError::BadFormat),
        }
        words = flags;
    }
    // Once an `ms` announced its data block, an error swallows the block,
    // as memcached does, so it is not read as commands.
    let refuse = |e: ProtocolError| {
        let e = match (command, e) {
            (MetaCommand::Delete | MetaCommand::Arith, e) if e != ProtocolError::InvalidMaMode => {
                ProtocolError::InvalidOrDuplicateFlag
            }
            (_, e) => e,
        };
        Parsed::Request { request: Request::Fail(e), consumed: line_bytes, skip: length.map_or(0, |n| n + 2) }
    };
    let flags = match parse_flags(command, words) {
        Ok(flags) => flags,
        Err(e) => return refuse(e),
    };
    let key = match decode_key(key, flags.has(b'b')) {
        Ok(key) => key,
        Err(e) => return refuse(e),
    };
    let meta = |data| Meta { command, key, flags, data };
    let Some(length) = length else {
        return Parsed::Request { request: Request::Meta(meta(&[])), consumed: line_bytes, skip: 0 };
    };
    if length > limits.item_size_max_bytes {
        let request = Request::TooLarge { key: None, noreply: false };
        return Parsed::Request { request, consumed: line_bytes, skip: length + 2 };
    }
    let Some(block) = rest.get(..length + 2) else { return Parsed::Incomplete };
    let consumed = line_bytes + length + 2;
    if &block[length..] != b"\r\n" {
        return Parsed::Request { request: Request::Fail(ProtocolError::BadDataChunk), consumed, skip: 0 };
    }
    Parsed::Request { request: Request::Meta(meta(&block[..length])), consumed, skip: 0 }
}

/// Validates `words` as `command`'s flags.
fn parse_flags(command: MetaCommand, words: Words<'_>) -> Result<Flags<'_>, ProtocolError> {
    if words.exceeds(FLAGS_MAX) {
        return Err(ProtocolError::BadFormat);
    }
    let (bare, with_token) = command.accepts();
    let mut present = 0u64;
    for word in words.iter() {
        let (&flag, token) = word.split_first().ok_or(ProtocolError::BadFormat)?;
        let bit = letter_bit(flag);
        if bit.is_some_and(|bit| present & bit != 0) {
            return Err(ProtocolError::DuplicateFlag);
        }
        // Every flag a command accepts is a letter.
        let bit =
            bit.filter(|_| bare.contains(&flag) || with_token.contains(&flag)).ok_or(ProtocolError::InvalidFlag)?;
        present |= bit;
        if bare.contains(&flag) {
            continue;
        }
        let valid = match flag {
            b'O' if token.len() > OPAQUE_MAX_BYTES => return Err(ProtocolError::OpaqueTooLong),
            b'O' => true,
            b'M' if command == MetaCommand::Set => matches!(token, [b'E' | b'A' | b'P' | b'R' | b'S']),
            b'M' => matches!(token, [b'I' | b'i' | b'+' | b'D' | b'd' | b'-']),
            b'F' => parse_u32(token).is_some(),
            b'T' | b'N' | b'R' => parse_i32(token).is_some(),
            _ => parse_u64(token).is_some(),
        };
        if !valid {
            return Err(match (flag, command) {
                (b'M', MetaCommand::Set) => ProtocolError::InvalidMsMode,
                (b'M', _) => ProtocolError::InvalidMaMode,
                _ => ProtocolError::BadToken,
            });
        }
    }
    Ok(Flags { words, present })
}

/// The key (at most [`KEY_MAX_BYTES`], checked first), decoded under `b`.
fn decode_key(key: &[u8], base64: bool) -> Result<Cow<'_, [u8]>, ProtocolError> {
    if !base64 {
        return if valid_key(key) { Ok(Cow::Borrowed(key)) } else { Err(ProtocolError::BadFormat) };
    }
    match base64::engine::general_purpose::STANDARD.decode(key) {
        Ok(decoded) if !decoded.is_empty() => Ok(Cow::Owned(decoded)),
        _ => Err(ProtocolError::KeyDecoding),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse as parse_request;

    const LIMITS: Limits = Limits { item_size_max_bytes: 1 << 20 };

    fn meta(buf: &[u8]) -> Meta<'_> {
        match parse_request(buf, &LIMITS) {
            Parsed::Request { request: Request::Meta(meta), .. } => meta,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn flags_keep_their_order_and_tokens() {
        let m = meta(b"mg foo v t Oabc T30 k\r\n");
        assert_eq!(m.command, MetaCommand::Get);
        assert_eq!(&*m.key, b"foo");
        assert_eq!(
            m.flags.iter().collect::<Vec<_>>(),
            vec![(b'v', &b""[..]), (b't', b""), (b'O', b"abc"), (b'T', b"30"), (b'k', b"")]
        );
        assert!(m.has(b'k') && !m.has(b'q') && m.token(b'q').is_none());
        assert_eq!(m.seconds(b'T'), Some(30));
    }

    #[test]
    fn ms_takes_a_data_block_and_base64_keys() {
        let m = meta(b"ms Zm9v 2 b T0 F5\r\nhi\r\n");
        assert_eq!((&*m.key, m.data), (&b"foo"[..], &b"hi"[..]));
        assert_eq!(&*m.key_as_sent(), b"Zm9v");
    }

    #[test]
    fn bad_flags_are_refused() {
        let fail = |buf: &[u8]| match parse_request(buf, &LIMITS) {
            Parsed::Request { request: Request::Fail(e), .. } => e,
            other => panic!("{other:?}"),
        };
        assert_eq!(fail(b"mg foo !\r\n"), ProtocolError::InvalidFlag);
        assert_eq!(fail(b"mg foo v v\r\n"), ProtocolError::DuplicateFlag);
        assert_eq!(fail(b"mg foo Tx\r\n"), ProtocolError::BadToken);
        assert_eq!(fail(b"mg\r\n"), ProtocolError::UnknownCommand);
        assert_eq!(fail(b"ms foo x\r\n"), ProtocolError::BadFormat);
        assert_eq!(fail(b"mg !!!! b\r\n"), ProtocolError::KeyDecoding);
    }
}
