//! What a client asked for: the parsed form of one memcached request, text
//! or meta, borrowing its bytes from the connection's read buffer.

use thiserror::Error;

use crate::meta::Meta;
use crate::words::Words;

/// Longest key memcached accepts.
pub const KEY_MAX_BYTES: usize = 250;

/// One request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<'a> {
    /// `get`, `gets` (`with_cas`), `gat`, `gats` (`touch`: the exptime).
    Retrieve {
        keys: Words<'a>,
        with_cas: bool,
        touch: Option<i64>,
    },
    Store {
        command: StoreCommand,
        key: &'a [u8],
        flags: u32,
        exptime: i64,
        data: &'a [u8],
        noreply: bool,
    },
    Arith {
        key: &'a [u8],
        decrement: bool,
        delta: u64,
        noreply: bool,
    },
    Delete {
        key: &'a [u8],
        noreply: bool,
    },
    Touch {
        key: &'a [u8],
        exptime: i64,
        noreply: bool,
    },
    FlushAll {
        delay_s: i64,
        noreply: bool,
    },
    Version,
    Verbosity {
        noreply: bool,
    },
    Quit,
    /// `stats [group]`.
    Stats {
        group: &'a [u8],
    },
    /// `cache_memlimit <megabytes> [noreply]`: the limit `stats` reports
    /// (Shoal does not evict items yet).
    CacheMemlimit {
        megabytes: u64,
        noreply: bool,
    },
    Meta(Meta<'a>),
    /// `mn`: answers `MN`, the end marker of a run of quiet meta requests.
    MetaNoop,
    /// An item over the size limit: answered `SERVER_ERROR object too
    /// large for cache`; a `set` (`key`) also removes the key's old item,
    /// as memcached does, so a failed set leaves no stale value behind.
    TooLarge {
        key: Option<&'a [u8]>,
        /// memcached 1.6 honours `noreply` even for this error.
        noreply: bool,
    },
    /// A request answered with this error, touching no data.
    Fail(ProtocolError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreCommand {
    Set,
    Add,
    Replace,
    Append,
    Prepend,
    /// `cas`, with the unique the item must still have.
    Cas(u64),
}

/// The error lines of memcached's protocols, word for word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ProtocolError {
    /// An unknown command, or a known one with the wrong number of words.
    #[error("ERROR")]
    UnknownCommand,
    #[error("CLIENT_ERROR bad command line format")]
    BadFormat,
    #[error("CLIENT_ERROR bad data chunk")]
    BadDataChunk,
    #[error("CLIENT_ERROR invalid numeric delta argument")]
    InvalidDelta,
    #[error("CLIENT_ERROR invalid exptime argument")]
    InvalidExptime,
    #[error("CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]")]
    DeleteUsage,
    #[error("CLIENT_ERROR invalid flag")]
    InvalidFlag,
    #[error("CLIENT_ERROR duplicate flag")]
    DuplicateFlag,
    /// What `md` and `ma` say for any bad flag, token or key.
    #[error("CLIENT_ERROR invalid or duplicate flag")]
    InvalidOrDuplicateFlag,
    #[error("CLIENT_ERROR opaque token too long")]
    OpaqueTooLong,
    #[error("CLIENT_ERROR error decoding key")]
    KeyDecoding,
    #[error("CLIENT_ERROR bad token in command line format")]
    BadToken,
    #[error("CLIENT_ERROR invalid mode for ms M token")]
    InvalidMsMode,
    #[error("CLIENT_ERROR invalid mode for ma M token")]
    InvalidMaMode,
    #[error("CLIENT_ERROR cannot increment or decrement non-numeric value")]
    NotANumber,
    #[error("SERVER_ERROR object too large for cache")]
    TooLarge,
    #[error("MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m")]
    MemlimitTooSmall,
}

/// A key memcached accepts: 1 to 250 bytes. A text key is a word of the
/// line, so it has no space or newline; memcached 1.6 takes any other byte
/// (control characters included, though protocol.txt forbids them).
pub fn valid_key(key: &[u8]) -> bool {
    !key.is_empty() && key.len() <= KEY_MAX_BYTES
}

/// A decimal number in memcached's sense (`safe_strtoull`): digits only,
/// no sign.
pub fn parse_u64(word: &[u8]) -> Option<u64> {
    if word.is_empty() || word.len() > 20 {
        return None;
    }
    // One pass over the digits (every request has a number or more).
    word.iter().try_fold(0u64, |n, &b| {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        n.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

pub fn parse_u32(word: &[u8]) -> Option<u32> {
    parse_u64(word).and_then(|n| u32::try_from(n).ok())
}

/// A text command's client flags: any decimal below 2^64, of which
/// memcached keeps the low 32 bits.
pub fn parse_client_flags(word: &[u8]) -> Option<u32> {
    parse_u64(word).map(|n| n as u32)
}

/// A signed 32-bit decimal (`safe_strtol`): exptimes and lengths.
pub fn parse_i32(word: &[u8]) -> Option<i32> {
    let (negative, digits) = match word.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, word),
    };
    let magnitude = i64::try_from(parse_u64(digits)?).ok()?;
    i32::try_from(if negative { -magnitude } else { magnitude }).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_digits_only_and_below_their_bound() {
        for (word, n) in [(&b"0"[..], Some(0)), (b"007", Some(7)), (b"18446744073709551615", Some(u64::MAX))] {
            assert_eq!(parse_u64(word), n);
        }
        for word in [&b""[..], b"-1", b"+1", b"1x", b" 1", b"18446744073709551616", b"000000000000000000001"] {
            assert_eq!(parse_u64(word), None, "{}", String::from_utf8_lossy(word));
        }
        assert_eq!((parse_i32(b"-5"), parse_i32(b"2147483648"), parse_u32(b"4294967296")), (Some(-5), None, None));
        assert_eq!(parse_client_flags(b"4294967297"), Some(1));
    }
}
