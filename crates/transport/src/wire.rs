//! The primitive notation of the CQL native protocol v4 (spec section 3):
//! `[byte]`, `[short]`, `[int]`, `[long]`, `[string]`, `[long string]`,
//! `[uuid]`, `[string list]`, `[bytes]`, `[value]`, `[short bytes]`,
//! `[option]` (as a CQL type), `[inet]`, `[consistency]`, `[string map]`,
//! `[string multimap]` and `[bytes map]`.
//!
//! Reading goes through [`Reader`], a cursor over a borrowed frame body.
//! Invariants every read keeps:
//! - it is bounds-checked and fails with a [`WireError`] that names the item,
//!   the offset and the bytes left, never with a panic;
//! - a length or count taken from the input is only trusted after the bytes it
//!   claims are known to be there: collections are pre-sized by what the
//!   remaining bytes can hold at most, never by the claimed count;
//! - results borrow from the input (`&'a str`, `&'a [u8]`), so decoding copies
//!   nothing but the container `Vec`s.
//!
//! Writing is a set of free functions appending to a `Vec<u8>`. The protocol
//! cannot represent every Rust value (a `[string]` holds at most 65535 bytes);
//! writers never panic on such input: they truncate (strings at a character
//! boundary, lists after 65535 entries) and say so in their docs. Frames are
//! capped far below the `[int]` limits, so only `[short]`-sized items can hit
//! this in practice.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use shoal_schema::{marshal, CqlType};
use thiserror::Error;

/// How deeply `[option]` types may nest when read; real types nest a few
/// levels, and the bound keeps recursion on hostile input shallow.
pub const MAX_TYPE_DEPTH: usize = 32;

/// A malformed or truncated frame body.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    #[error("frame body too short: needed {needed} bytes for {what} at offset {offset}, {left} left")]
    Truncated { what: &'static str, needed: usize, offset: usize, left: usize },
    #[error("invalid length {length} for {what} at offset {offset}")]
    InvalidLength { what: &'static str, length: i32, offset: usize },
    #[error("invalid UTF-8 in {what} at offset {offset}")]
    InvalidUtf8 { what: &'static str, offset: usize },
    #[error("invalid [inet] address size {size} at offset {offset}: expected 4 or 16")]
    InvalidInetSize { size: u8, offset: usize },
    #[error("invalid [inet] port {port} at offset {offset}: expected 0..=65535")]
    InvalidInetPort { port: i32, offset: usize },
    #[error("unknown or unsupported type [option] id 0x{id:04x} at offset {offset}")]
    UnknownTypeOption { id: u16, offset: usize },
    #[error("unsupported custom type '{class}' at offset {offset}")]
    UnsupportedCustomType { class: String, offset: usize },
    #[error("type [option] nested deeper than {MAX_TYPE_DEPTH} levels at offset {offset}")]
    TypeTooDeep { offset: usize },
}

/// `[bytes map]` entries as read: key and possibly-null value, borrowed.
pub type BytesMapEntries<'a> = Vec<(&'a str, Option<&'a [u8]>)>;

/// A `[value]`: bytes, `null` (length -1) or `not set` (length -2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawValue<'a> {
    Value(&'a [u8]),
    Null,
    Unset,
}

/// A cursor over a frame body: the protocol's items on top of the one
/// bounds-checked byte reader (`shoal_buf`).
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    bytes: shoal_buf::Reader<'a>,
}

impl From<shoal_buf::Short> for WireError {
    fn from(short: shoal_buf::Short) -> WireError {
        let shoal_buf::Short { what, needed, offset, left } = short;
        WireError::Truncated { what, needed, offset, left }
    }
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { bytes: shoal_buf::Reader::new(buf) }
    }

    /// Offset of the next byte to read, from the start of the input.
    pub fn position(&self) -> usize {
        self.bytes.position()
    }

    pub fn remaining(&self) -> usize {
        self.bytes.remaining()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The unread bytes; reading them does not advance the cursor.
    pub fn rest(&self) -> &'a [u8] {
        self.bytes.rest()
    }

    /// Takes the next `n` bytes, failing without consuming anything when fewer
    /// are left.
    pub fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], WireError> {
        Ok(self.bytes.take(n, what)?)
    }

    fn take_array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], WireError> {
        Ok(self.bytes.array(what)?)
    }

    /// Upper bound for pre-sizing a collection of `claimed` items each taking
    /// at least `min_item_bytes`: what the remaining input can actually hold.
    pub fn capacity_for(&self, claimed: usize, min_item_bytes: usize) -> usize {
        self.bytes.capacity_for(claimed, min_item_bytes)
    }

    pub fn read_byte(&mut self) -> Result<u8, WireError> {
        Ok(self.bytes.u8("[byte]")?)
    }

    pub fn read_short(&mut self) -> Result<u16, WireError> {
        Ok(self.bytes.be_u16("[short]")?)
    }

    pub fn read_int(&mut self) -> Result<i32, WireError> {
        Ok(self.bytes.be_i32("[int]")?)
    }

    pub fn read_long(&mut self) -> Result<i64, WireError> {
        Ok(self.bytes.be_i64("[long]")?)
    }

    pub fn read_uuid(&mut self) -> Result<[u8; 16], WireError> {
        self.take_array("[uuid]")
    }

    pub fn read_consistency(&mut self) -> Result<u16, WireError> {
        Ok(self.bytes.be_u16("[consistency]")?)
    }

    fn utf8(&self, bytes: &'a [u8], what: &'static str) -> Result<&'a str, WireError> {
        std::str::from_utf8(bytes).map_err(|_| WireError::InvalidUtf8 { what, offset: self.position() - bytes.len() })
    }

    pub fn read_string(&mut self) -> Result<&'a str, WireError> {
        let len = usize::from(self.read_short()?);
        let bytes = self.take(len, "[string]")?;
        self.utf8(bytes, "[string]")
    }

    pub fn read_long_string(&mut self) -> Result<&'a str, WireError> {
        let offset = self.position();
        let len = self.read_int()?;
        let len = usize::try_from(len).map_err(|_| WireError::InvalidLength {
            what: "[long string]",
            length: len,
            offset,
        })?;
        let bytes = self.take(len, "[long string]")?;
        self.utf8(bytes, "[long string]")
    }

    /// `[bytes]`: any negative length is `null` (`None`).
    pub fn read_bytes(&mut self) -> Result<Option<&'a [u8]>, WireError> {
        let len = self.read_int()?;
        match usize::try_from(len) {
            Ok(len) => self.take(len, "[bytes]").map(Some),
            Err(_) => Ok(None),
        }
    }

    /// `[value]`: -1 is null, -2 is unset, anything below is an error.
    pub fn read_value(&mut self) -> Result<RawValue<'a>, WireError> {
        let offset = self.position();
        let len = self.read_int()?;
        match len {
            -1 => Ok(RawValue::Null),
            -2 => Ok(RawValue::Unset),
            _ => match usize::try_from(len) {
                Ok(len) => self.take(len, "[value]").map(RawValue::Value),
                Err(_) => Err(WireError::InvalidLength { what: "[value]", length: len, offset }),
            },
        }
    }

    pub fn read_short_bytes(&mut self) -> Result<&'a [u8], WireError> {
        let len = usize::from(self.read_short()?);
        self.take(len, "[short bytes]")
    }

    pub fn read_string_list(&mut self) -> Result<Vec<&'a str>, WireError> {
        let n = usize::from(self.read_short()?);
        let mut list = Vec::with_capacity(self.capacity_for(n, 2));
        for _ in 0..n {
            list.push(self.read_string()?);
        }
        Ok(list)
    }

    /// `[string map]` as pairs in wire order; duplicates are kept.
    pub fn read_string_map(&mut self) -> Result<Vec<(&'a str, &'a str)>, WireError> {
        let n = usize::from(self.read_short()?);
        let mut map = Vec::with_capacity(self.capacity_for(n, 4));
        for _ in 0..n {
            let key = self.read_string()?;
            map.push((key, self.read_string()?));
        }
        Ok(map)
    }

    pub fn read_string_multimap(&mut self) -> Result<Vec<(&'a str, Vec<&'a str>)>, WireError> {
        let n = usize::from(self.read_short()?);
        let mut map = Vec::with_capacity(self.capacity_for(n, 4));
        for _ in 0..n {
            let key = self.read_string()?;
            map.push((key, self.read_string_list()?));
        }
        Ok(map)
    }

    pub fn read_bytes_map(&mut self) -> Result<BytesMapEntries<'a>, WireError> {
        let n = usize::from(self.read_short()?);
        let mut map = Vec::with_capacity(self.capacity_for(n, 6));
        for _ in 0..n {
            let key = self.read_string()?;
            map.push((key, self.read_bytes()?));
        }
        Ok(map)
    }

    /// `[inet]`: a size byte (4 or 16), the address, then an `[int]` port.
    pub fn read_inet(&mut self) -> Result<SocketAddr, WireError> {
        let offset = self.position();
        let ip = match self.read_byte()? {
            4 => IpAddr::V4(Ipv4Addr::from(self.take_array::<4>("[inet] address")?)),
            16 => IpAddr::V6(Ipv6Addr::from(self.take_array::<16>("[inet] address")?)),
            size => return Err(WireError::InvalidInetSize { size, offset }),
        };
        let port_offset = self.position();
        let port = self.read_int()?;
        let port = u16::try_from(port).map_err(|_| WireError::InvalidInetPort { port, offset: port_offset })?;
        Ok(SocketAddr::new(ip, port))
    }

    /// A column type as an `[option]` (spec 4.2.5.2). Collections come back
    /// unfrozen: the wire form does not say whether a type was frozen.
    pub fn read_type_option(&mut self) -> Result<CqlType, WireError> {
        self.read_type_option_at_depth(0)
    }

    fn read_type_option_at_depth(&mut self, depth: usize) -> Result<CqlType, WireError> {
        let offset = self.position();
        if depth >= MAX_TYPE_DEPTH {
            return Err(WireError::TypeTooDeep { offset });
        }
        let id = self.read_short()?;
        if let Some(native) = native_type_for_id(id) {
            return Ok(native);
        }
        let ty = match id {
            0x0000 => {
                let class = self.read_string()?;
                marshal::parse(class)
                    .map_err(|_| WireError::UnsupportedCustomType { class: class.to_string(), offset })?
            }
            0x0020 => CqlType::List(Box::new(self.read_type_option_at_depth(depth + 1)?)),
            0x0022 => CqlType::Set(Box::new(self.read_type_option_at_depth(depth + 1)?)),
            0x0021 => {
                let key = self.read_type_option_at_depth(depth + 1)?;
                let value = self.read_type_option_at_depth(depth + 1)?;
                CqlType::Map(Box::new(key), Box::new(value))
            }
            0x0030 => {
                let keyspace = self.read_string()?.to_string();
                let name = self.read_string()?.to_string();
                let n = usize::from(self.read_short()?);
                let mut fields = Vec::with_capacity(self.capacity_for(n, 4));
                for _ in 0..n {
                    let field = self.read_string()?.to_string();
                    fields.push((field, self.read_type_option_at_depth(depth + 1)?));
                }
                CqlType::Udt(std::sync::Arc::new(shoal_schema::UserType { keyspace, name, fields }))
            }
            0x0031 => {
                let n = usize::from(self.read_short()?);
                let mut fields = Vec::with_capacity(self.capacity_for(n, 2));
                for _ in 0..n {
                    fields.push(self.read_type_option_at_depth(depth + 1)?);
                }
                CqlType::Tuple(fields)
            }
            _ => return Err(WireError::UnknownTypeOption { id, offset }),
        };
        Ok(ty)
    }
}

/// The `[option]` id of a native (non-parameterized) type other than
/// `duration`, which v4 sends as a custom type.
pub fn native_type_id(ty: &CqlType) -> Option<u16> {
    let id = match ty {
        CqlType::Ascii => 0x0001,
        CqlType::Bigint => 0x0002,
        CqlType::Blob => 0x0003,
        CqlType::Boolean => 0x0004,
        CqlType::Counter => 0x0005,
        CqlType::Decimal => 0x0006,
        CqlType::Double => 0x0007,
        CqlType::Float => 0x0008,
        CqlType::Int => 0x0009,
        CqlType::Timestamp => 0x000B,
        CqlType::Uuid => 0x000C,
        CqlType::Text => 0x000D,
        CqlType::Varint => 0x000E,
        CqlType::Timeuuid => 0x000F,
        CqlType::Inet => 0x0010,
        CqlType::Date => 0x0011,
        CqlType::Time => 0x0012,
        CqlType::Smallint => 0x0013,
        CqlType::Tinyint => 0x0014,
        _ => return None,
    };
    Some(id)
}

fn native_type_for_id(id: u16) -> Option<CqlType> {
    let ty = match id {
        0x0001 => CqlType::Ascii,
        0x0002 => CqlType::Bigint,
        0x0003 => CqlType::Blob,
        0x0004 => CqlType::Boolean,
        0x0005 => CqlType::Counter,
        0x0006 => CqlType::Decimal,
        0x0007 => CqlType::Double,
        0x0008 => CqlType::Float,
        0x0009 => CqlType::Int,
        0x000B => CqlType::Timestamp,
        0x000C => CqlType::Uuid,
        0x000D => CqlType::Text,
        0x000E => CqlType::Varint,
        0x000F => CqlType::Timeuuid,
        0x0010 => CqlType::Inet,
        0x0011 => CqlType::Date,
        0x0012 => CqlType::Time,
        0x0013 => CqlType::Smallint,
        0x0014 => CqlType::Tinyint,
        _ => return None,
    };
    Some(ty)
}

// ---------------------------------------------------------------- writers

pub fn write_byte(out: &mut Vec<u8>, value: u8) {
    out.push(value);
}

pub fn write_short(out: &mut Vec<u8>, value: u16) {
    out.extend_from_slice(&value.to_be_bytes());
}

pub fn write_int(out: &mut Vec<u8>, value: i32) {
    out.extend_from_slice(&value.to_be_bytes());
}

pub fn write_long(out: &mut Vec<u8>, value: i64) {
    out.extend_from_slice(&value.to_be_bytes());
}

pub fn write_uuid(out: &mut Vec<u8>, value: &[u8; 16]) {
    out.extend_from_slice(value);
}

pub fn write_consistency(out: &mut Vec<u8>, code: u16) {
    write_short(out, code);
}

/// A `[short]` count for `n` items, clamped to 65535 (callers then write only
/// that many items).
fn short_count(n: usize) -> u16 {
    u16::try_from(n).unwrap_or(u16::MAX)
}

/// An `[int]` length for `n` bytes, clamped to `i32::MAX`. Frames are capped
/// at 256 MB, so the clamp is never reached by a frame that can be sent.
fn int_len(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// The longest prefix of `s` of at most `max` bytes ending on a char boundary.
fn truncate_str(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// `[string]`; text beyond 65535 bytes is cut at a char boundary.
pub fn write_string(out: &mut Vec<u8>, value: &str) {
    let value = truncate_str(value, usize::from(u16::MAX));
    write_short(out, short_count(value.len()));
    out.extend_from_slice(value.as_bytes());
}

pub fn write_long_string(out: &mut Vec<u8>, value: &str) {
    let value = truncate_str(value, i32::MAX as usize);
    write_int(out, int_len(value.len()));
    out.extend_from_slice(value.as_bytes());
}

/// `[bytes]`: `None` is written as length -1 (null).
pub fn write_bytes(out: &mut Vec<u8>, value: Option<&[u8]>) {
    match value {
        Some(bytes) => {
            let len = int_len(bytes.len());
            write_int(out, len);
            out.extend_from_slice(&bytes[..len as usize]);
        }
        None => write_int(out, -1),
    }
}

pub fn write_value(out: &mut Vec<u8>, value: RawValue<'_>) {
    match value {
        RawValue::Value(bytes) => write_bytes(out, Some(bytes)),
        RawValue::Null => write_int(out, -1),
        RawValue::Unset => write_int(out, -2),
    }
}

/// `[short bytes]`; bytes beyond 65535 are dropped.
pub fn write_short_bytes(out: &mut Vec<u8>, value: &[u8]) {
    let len = short_count(value.len());
    write_short(out, len);
    out.extend_from_slice(&value[..usize::from(len)]);
}

/// `[string list]`; entries beyond 65535 are dropped.
pub fn write_string_list<S: AsRef<str>>(out: &mut Vec<u8>, values: &[S]) {
    let n = short_count(values.len());
    write_short(out, n);
    for value in &values[..usize::from(n)] {
        write_string(out, value.as_ref());
    }
}

/// `[string map]` from pairs; entries beyond 65535 are dropped.
pub fn write_string_map<K: AsRef<str>, V: AsRef<str>>(out: &mut Vec<u8>, pairs: &[(K, V)]) {
    let n = short_count(pairs.len());
    write_short(out, n);
    for (key, value) in &pairs[..usize::from(n)] {
        write_string(out, key.as_ref());
        write_string(out, value.as_ref());
    }
}

/// `[string multimap]` from (key, values) pairs; entries beyond 65535 are
/// dropped.
pub fn write_string_multimap<K, L, V>(out: &mut Vec<u8>, pairs: &[(K, L)])
where
    K: AsRef<str>,
    L: AsRef<[V]>,
    V: AsRef<str>,
{
    let n = short_count(pairs.len());
    write_short(out, n);
    for (key, values) in &pairs[..usize::from(n)] {
        write_string(out, key.as_ref());
        write_string_list(out, values.as_ref());
    }
}

/// `[bytes map]` from pairs; a `None` value is a null `[bytes]`.
pub fn write_bytes_map<K: AsRef<str>, B: AsRef<[u8]>>(out: &mut Vec<u8>, pairs: &[(K, Option<B>)]) {
    let n = short_count(pairs.len());
    write_short(out, n);
    for (key, value) in &pairs[..usize::from(n)] {
        write_string(out, key.as_ref());
        write_bytes(out, value.as_ref().map(AsRef::as_ref));
    }
}

pub fn write_inet(out: &mut Vec<u8>, addr: SocketAddr) {
    match addr.ip() {
        IpAddr::V4(ip) => {
            write_byte(out, 4);
            out.extend_from_slice(&ip.octets());
        }
        IpAddr::V6(ip) => {
            write_byte(out, 16);
            out.extend_from_slice(&ip.octets());
        }
    }
    write_int(out, i32::from(addr.port()));
}

/// A column type as an `[option]`. `frozen<T>` is written as `T` (the wire
/// form has no frozen marker); `duration` and `vector<T, n>`, which v4 has
/// no id for, as the custom (marshal) class Cassandra sends.
pub fn write_type_option(out: &mut Vec<u8>, ty: &CqlType) {
    if let Some(id) = native_type_id(ty) {
        write_short(out, id);
        return;
    }
    match ty {
        CqlType::Duration | CqlType::Vector(..) => {
            write_short(out, 0x0000);
            write_string(out, &marshal::class_name(ty));
        }
        CqlType::List(elem) => {
            write_short(out, 0x0020);
            write_type_option(out, elem);
        }
        CqlType::Map(key, value) => {
            write_short(out, 0x0021);
            write_type_option(out, key);
            write_type_option(out, value);
        }
        CqlType::Set(elem) => {
            write_short(out, 0x0022);
            write_type_option(out, elem);
        }
        CqlType::Tuple(fields) => {
            write_short(out, 0x0031);
            let n = short_count(fields.len());
            write_short(out, n);
            for field in &fields[..usize::from(n)] {
                write_type_option(out, field);
            }
        }
        CqlType::Udt(udt) => {
            write_short(out, 0x0030);
            write_string(out, &udt.keyspace);
            write_string(out, &udt.name);
            let n = short_count(udt.fields.len());
            write_short(out, n);
            for (name, field) in &udt.fields[..usize::from(n)] {
                write_string(out, name);
                write_type_option(out, field);
            }
        }
        CqlType::Frozen(inner) => write_type_option(out, inner),
        // Every other variant is native and was handled above.
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_width_round_trip() {
        let mut out = Vec::new();
        write_byte(&mut out, 0xAB);
        write_short(&mut out, 0xFFFE);
        write_int(&mut out, -5);
        write_long(&mut out, i64::MIN + 3);
        write_uuid(&mut out, &[7; 16]);
        write_consistency(&mut out, 0x000A);
        assert_eq!(out.len(), 1 + 2 + 4 + 8 + 16 + 2);
        assert_eq!(&out[1..3], &[0xFF, 0xFE]);
        let mut r = Reader::new(&out);
        assert_eq!(r.read_byte(), Ok(0xAB));
        assert_eq!(r.read_short(), Ok(0xFFFE));
        assert_eq!(r.read_int(), Ok(-5));
        assert_eq!(r.read_long(), Ok(i64::MIN + 3));
        assert_eq!(r.read_uuid(), Ok([7; 16]));
        assert_eq!(r.read_consistency(), Ok(0x000A));
        assert!(r.is_empty());
    }

    #[test]
    fn strings_round_trip() {
        let mut out = Vec::new();
        write_string(&mut out, "héllo");
        write_long_string(&mut out, "SELECT * FROM t");
        write_string(&mut out, "");
        write_string_list(&mut out, &["a", "bc"]);
        assert_eq!(&out[..2], &[0, 6]);
        let mut r = Reader::new(&out);
        assert_eq!(r.read_string(), Ok("héllo"));
        assert_eq!(r.read_long_string(), Ok("SELECT * FROM t"));
        assert_eq!(r.read_string(), Ok(""));
        assert_eq!(r.read_string_list(), Ok(vec!["a", "bc"]));
        assert!(r.is_empty());
    }

    #[test]
    fn long_strings_are_truncated_at_char_boundary() {
        let text = "é".repeat(40_000); // 80,000 bytes
        let mut out = Vec::new();
        write_string(&mut out, &text);
        let mut r = Reader::new(&out);
        let back = r.read_string().map(str::len);
        assert_eq!(back, Ok(65_534));
    }

    #[test]
    fn bytes_and_values_round_trip() {
        let mut out = Vec::new();
        write_bytes(&mut out, Some(b"xyz"));
        write_bytes(&mut out, None);
        write_bytes(&mut out, Some(b""));
        write_value(&mut out, RawValue::Value(b"v"));
        write_value(&mut out, RawValue::Null);
        write_value(&mut out, RawValue::Unset);
        write_short_bytes(&mut out, &[1, 2]);
        let mut r = Reader::new(&out);
        assert_eq!(r.read_bytes(), Ok(Some(&b"xyz"[..])));
        assert_eq!(r.read_bytes(), Ok(None));
        assert_eq!(r.read_bytes(), Ok(Some(&b""[..])));
        assert_eq!(r.read_value(), Ok(RawValue::Value(b"v")));
        assert_eq!(r.read_value(), Ok(RawValue::Null));
        assert_eq!(r.read_value(), Ok(RawValue::Unset));
        assert_eq!(r.read_short_bytes(), Ok(&[1u8, 2][..]));
        assert!(r.is_empty());
    }

    #[test]
    fn any_negative_bytes_length_is_null_but_value_below_minus_two_is_an_error() {
        let body = (-7i32).to_be_bytes();
        assert_eq!(Reader::new(&body).read_bytes(), Ok(None));
        assert_eq!(
            Reader::new(&body).read_value(),
            Err(WireError::InvalidLength { what: "[value]", length: -7, offset: 0 })
        );
        assert!(Reader::new(&(-1i32).to_be_bytes()).read_long_string().is_err());
    }

    #[test]
    fn maps_round_trip() {
        let mut out = Vec::new();
        write_string_map(&mut out, &[("CQL_VERSION", "3.0.0"), ("COMPRESSION", "lz4")]);
        write_string_multimap(&mut out, &[("COMPRESSION", vec!["lz4", "snappy"]), ("X", vec![])]);
        write_bytes_map(&mut out, &[("k", Some(b"v".to_vec())), ("n", None)]);
        let mut r = Reader::new(&out);
        assert_eq!(r.read_string_map(), Ok(vec![("CQL_VERSION", "3.0.0"), ("COMPRESSION", "lz4")]));
        assert_eq!(r.read_string_multimap(), Ok(vec![("COMPRESSION", vec!["lz4", "snappy"]), ("X", vec![])]));
        assert_eq!(r.read_bytes_map(), Ok(vec![("k", Some(&b"v"[..])), ("n", None)]));
        assert!(r.is_empty());
    }

    #[test]
    fn inet_round_trip() {
        for addr in ["10.1.2.3:9042", "[::1]:19042"] {
            let addr: SocketAddr = addr.parse().expect("test address");
            let mut out = Vec::new();
            write_inet(&mut out, addr);
            assert_eq!(Reader::new(&out).read_inet(), Ok(addr));
        }
        let mut out = Vec::new();
        write_inet(&mut out, "1.2.3.4:9042".parse().expect("test address"));
        assert_eq!(out, [4, 1, 2, 3, 4, 0, 0, 0x23, 0x52]);
        assert!(matches!(Reader::new(&[5, 0]).read_inet(), Err(WireError::InvalidInetSize { .. })));
    }

    #[test]
    fn type_options_round_trip() {
        for text in [
            "int",
            "text",
            "ascii",
            "varint",
            "duration",
            "list<int>",
            "set<timeuuid>",
            "map<text, list<blob>>",
            "tuple<int, text, map<int, date>>",
            "vector<float, 3>",
            "list<vector<text, 2>>",
        ] {
            let ty = CqlType::parse(text).expect("test type");
            let mut out = Vec::new();
            write_type_option(&mut out, &ty);
            let mut r = Reader::new(&out);
            assert_eq!(r.read_type_option(), Ok(ty), "{text}");
            assert!(r.is_empty());
        }
        let mut out = Vec::new();
        write_type_option(&mut out, &CqlType::parse("frozen<map<text, int>>").expect("test type"));
        assert_eq!(out, [0, 0x21, 0, 0x0D, 0, 0x09]);
    }

    #[test]
    fn user_type_option_round_trips() {
        let fields = vec![("a".to_string(), CqlType::Int), ("b".to_string(), CqlType::List(Box::new(CqlType::Text)))];
        let udt = shoal_schema::UserType { keyspace: "ks".into(), name: "t".into(), fields };
        let ty = CqlType::Udt(std::sync::Arc::new(udt));
        let mut out = Vec::new();
        write_type_option(&mut out, &ty);
        assert_eq!(out[..12], [0, 0x30, 0, 2, b'k', b's', 0, 1, b't', 0, 2, 0]);
        let mut r = Reader::new(&out);
        assert_eq!(r.read_type_option(), Ok(ty));
        assert!(r.is_empty());
        assert!(Reader::new(&out[..out.len() - 1]).read_type_option().is_err());
    }

    #[test]
    fn deep_type_options_are_rejected() {
        let mut body = Vec::new();
        for _ in 0..100 {
            write_short(&mut body, 0x0020);
        }
        write_short(&mut body, 0x0009);
        assert!(matches!(Reader::new(&body).read_type_option(), Err(WireError::TypeTooDeep { .. })));
    }

    #[test]
    fn truncation_error_names_item_offset_and_bytes_left() {
        let body = [0u8; 14];
        let mut r = Reader::new(&body);
        assert!(r.take(12, "test").is_ok());
        let err = r.read_int().err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("frame body too short: needed 4 bytes for [int] at offset 12, 2 left"));
        // A failed read consumes nothing.
        assert_eq!(r.position(), 12);
    }

    #[test]
    fn huge_claimed_counts_do_not_allocate_or_panic() {
        let body = [0xFF, 0xFF, 0, 1, b'a'];
        assert!(Reader::new(&body).read_string_list().is_err());
        assert!(Reader::new(&body).read_string_map().is_err());
        let body = [0x7F, 0xFF, 0xFF, 0xFF, 1];
        assert!(Reader::new(&body).read_bytes().is_err());
        assert!(Reader::new(&body).read_long_string().is_err());
    }

    #[test]
    fn invalid_utf8_is_reported() {
        let body = [0, 2, 0xC3, 0x28];
        assert_eq!(Reader::new(&body).read_string(), Err(WireError::InvalidUtf8 { what: "[string]", offset: 2 }));
    }
}
