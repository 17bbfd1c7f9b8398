//! CQL values: the in-memory [`Value`] and its native protocol v4
//! serialization (section 6 of the v4 spec), plus Cassandra's ordering of
//! serialized values ([`compare`]) and the numeric helpers aggregates need.
//!
//! Invariants:
//! - [`Value::deserialize`] and [`validate`] accept exactly the byte strings
//!   Cassandra accepts for the type (exact sizes, UTF-8/ASCII, time range,
//!   timeuuid version, duration signs, nested lengths, no trailing bytes),
//!   with one deliberate exception: the zero-length "empty value" that
//!   Cassandra allows for most types is rejected, because [`Value`] has no
//!   variant for it.
//! - Nothing here panics on any input: these functions decode bytes that
//!   arrived from the network. [`compare`] falls back to bytewise order when
//!   a value does not decode.
//! - `Value::Varint` and `Value::Decimal::unscaled` hold minimal two's
//!   complement big-endian bytes; [`Value::deserialize`] normalizes
//!   non-minimal input (Cassandra accepts it) so equal numbers are equal.

use std::cmp::Ordering;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use thiserror::Error;

use crate::literal;
use crate::types::CqlType;
use crate::vector::{self, VectorReader};

/// One non-null CQL value. Collections and tuples nest; a tuple field may be
/// null, a collection element may not (CQL forbids nulls in collections).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Ascii(String),
    Text(String),
    Blob(Vec<u8>),
    Boolean(bool),
    Tinyint(i8),
    Smallint(i16),
    Int(i32),
    Bigint(i64),
    Counter(i64),
    Float(f32),
    Double(f64),
    /// Two's complement big-endian, minimal.
    Varint(Vec<u8>),
    /// `unscaled × 10^-scale`; `unscaled` as in `Varint`.
    Decimal {
        scale: i32,
        unscaled: Vec<u8>,
    },
    Uuid([u8; 16]),
    Timeuuid([u8; 16]),
    Inet(IpAddr),
    /// Days with 2^31 = 1970-01-01 (the protocol's unsigned form).
    Date(u32),
    /// Nanoseconds since midnight, 0..=86_399_999_999_999.
    Time(i64),
    /// Milliseconds since the Unix epoch.
    Timestamp(i64),
    Duration {
        months: i32,
        days: i32,
        nanos: i64,
    },
    List(Vec<Value>),
    Set(Vec<Value>),
    Map(Vec<(Value, Value)>),
    Tuple(Vec<Option<Value>>),
    /// A `vector<elem, n>` value: `n` elements, none null.
    Vector(Vec<Value>),
}

/// Why bytes are not a valid value of a type, or why arithmetic failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ValueError {
    #[error("expected {expected} bytes for {} {ty} value, got {got}", article(.ty))]
    WrongSize { ty: &'static str, expected: usize, got: usize },
    #[error("expected 4 or 16 bytes for an inet value, got {0}")]
    InetSize(usize),
    /// ScyllaDB's text (users and tests match on "validat").
    #[error("Validation failed - non-UTF8 character in a UTF8 string, at byte offset {offset}")]
    InvalidUtf8 { offset: usize },
    #[error("non-ASCII byte 0x{byte:02x} at offset {offset} in ascii value")]
    NonAscii { offset: usize, byte: u8 },
    #[error("value for time out of range (must be 0..86399999999999 nanoseconds), got {0}")]
    TimeOutOfRange(i64),
    #[error("timeuuid value must be a version 1 (time-based) UUID, got version {0}")]
    NotTimeuuid(u8),
    #[error("empty varint value: at least one byte is required")]
    EmptyVarint,
    #[error("decimal value needs a 4-byte scale and at least one byte of unscaled value, got {0} bytes")]
    DecimalTooShort(usize),
    #[error("truncated duration value: missing the {0} field")]
    TruncatedDuration(&'static str),
    #[error("duration {field} must fit in a 32-bit integer, got {value}")]
    DurationFieldRange { field: &'static str, value: i64 },
    #[error("duration months, days and nanoseconds must all have the same sign, got ({months}, {days}, {nanos})")]
    DurationMixedSigns { months: i64, days: i64, nanos: i64 },
    #[error("truncated {what}: need {needed} bytes, {remaining} remain")]
    Truncated { what: &'static str, needed: usize, remaining: usize },
    #[error("negative {what} count {count}")]
    NegativeCount { what: &'static str, count: i32 },
    #[error("null {0} inside a collection: collections cannot contain nulls")]
    NullElement(&'static str),
    #[error("expected {expected} bytes for a {ty} value, got {got}")]
    VectorSize { ty: String, expected: usize, got: usize },
    #[error("{extra} unexpected bytes after the end of a {ty} value")]
    TrailingBytes { ty: String, extra: usize },
    #[error("in {context}: {source}")]
    Nested { context: String, source: Box<ValueError> },
    #[error("{0} values cannot be added or averaged")]
    NotNumeric(String),
    #[error("expected {expected} values, got {got}")]
    Mismatch { expected: String, got: String },
    #[error("cannot add decimals with scales {0} and {1}: the scales are too far apart")]
    ScalesTooFarApart(i32, i32),
    /// An arithmetic operation that failed (`crate::arithmetic`).
    #[error("{0}")]
    Operation(String),
}

/// "an" before vowel-initial type names, so messages read naturally.
fn article(ty: &str) -> &'static str {
    match ty.as_bytes().first() {
        Some(b'a' | b'e' | b'i' | b'o') => "an",
        _ => "a",
    }
}

/// Largest valid `time` value: the last nanosecond of a day.
pub const MAX_TIME_NANOS: i64 = 86_399_999_999_999;

/// Scale gap beyond which decimal addition refuses to align operands: the
/// aligned unscaled value would have that many more digits.
const MAX_SCALE_GAP: i64 = 10_000;

impl Value {
    /// Appends the value body in protocol v4 form (no length prefix).
    pub fn serialize(&self, out: &mut Vec<u8>) {
        match self {
            Value::Ascii(s) | Value::Text(s) => out.extend_from_slice(s.as_bytes()),
            Value::Blob(b) => out.extend_from_slice(b),
            Value::Boolean(b) => out.push(u8::from(*b)),
            Value::Tinyint(v) => out.extend_from_slice(&v.to_be_bytes()),
            Value::Smallint(v) => out.extend_from_slice(&v.to_be_bytes()),
            Value::Int(v) => out.extend_from_slice(&v.to_be_bytes()),
            Value::Bigint(v) | Value::Counter(v) | Value::Time(v) | Value::Timestamp(v) => {
                out.extend_from_slice(&v.to_be_bytes())
            }
            Value::Float(v) => out.extend_from_slice(&v.to_be_bytes()),
            Value::Double(v) => out.extend_from_slice(&v.to_be_bytes()),
            Value::Varint(b) => write_varint(b, out),
            Value::Decimal { scale, unscaled } => {
                out.extend_from_slice(&scale.to_be_bytes());
                write_varint(unscaled, out);
            }
            Value::Uuid(u) | Value::Timeuuid(u) => out.extend_from_slice(u),
            Value::Inet(IpAddr::V4(a)) => out.extend_from_slice(&a.octets()),
            Value::Inet(IpAddr::V6(a)) => out.extend_from_slice(&a.octets()),
            Value::Date(d) => out.extend_from_slice(&d.to_be_bytes()),
            Value::Duration { months, days, nanos } => {
                for field in [i64::from(*months), i64::from(*days), *nanos] {
                    write_unsigned_vint(zigzag_encode(field), out);
                }
            }
            Value::List(items) | Value::Set(items) => {
                write_i32(items.len(), out);
                items.iter().for_each(|item| write_element(Some(item), out));
            }
            Value::Map(entries) => {
                write_i32(entries.len(), out);
                for (key, value) in entries {
                    write_element(Some(key), out);
                    write_element(Some(value), out);
                }
            }
            Value::Tuple(fields) => fields.iter().for_each(|f| write_element(f.as_ref(), out)),
            Value::Vector(items) => {
                let bodies: Vec<Vec<u8>> = items.iter().map(Value::to_bytes).collect();
                vector::write(&element_type(items.first()), bodies.iter().map(Vec::as_slice), out);
            }
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.serialize(&mut out);
        out
    }

    /// Decodes and fully validates a value of type `ty`.
    pub fn deserialize(ty: &CqlType, bytes: &[u8]) -> Result<Value, ValueError> {
        let value = match ty {
            CqlType::Frozen(inner) => return Value::deserialize(inner, bytes),
            CqlType::Ascii => Value::Ascii(check_ascii(bytes)?.to_owned()),
            CqlType::Text => Value::Text(check_utf8(bytes)?.to_owned()),
            CqlType::Blob => Value::Blob(bytes.to_vec()),
            CqlType::Boolean => Value::Boolean(fixed::<1>(bytes, "boolean")?[0] != 0),
            CqlType::Tinyint => Value::Tinyint(i8::from_be_bytes(fixed(bytes, "tinyint")?)),
            CqlType::Smallint => Value::Smallint(i16::from_be_bytes(fixed(bytes, "smallint")?)),
            CqlType::Int => Value::Int(i32::from_be_bytes(fixed(bytes, "int")?)),
            CqlType::Bigint => Value::Bigint(i64::from_be_bytes(fixed(bytes, "bigint")?)),
            CqlType::Counter => Value::Counter(i64::from_be_bytes(fixed(bytes, "counter")?)),
            CqlType::Float => Value::Float(f32::from_be_bytes(fixed(bytes, "float")?)),
            CqlType::Double => Value::Double(f64::from_be_bytes(fixed(bytes, "double")?)),
            CqlType::Varint => Value::Varint(bignum::minimal(check_varint(bytes)?).to_vec()),
            CqlType::Decimal => {
                let (scale, unscaled) = split_decimal(bytes)?;
                Value::Decimal { scale, unscaled: bignum::minimal(unscaled).to_vec() }
            }
            CqlType::Uuid => Value::Uuid(fixed(bytes, "uuid")?),
            CqlType::Timeuuid => Value::Timeuuid(check_timeuuid(bytes)?),
            CqlType::Inet => Value::Inet(read_inet(bytes)?),
            CqlType::Date => Value::Date(u32::from_be_bytes(fixed(bytes, "date")?)),
            CqlType::Time => Value::Time(check_time(bytes)?),
            CqlType::Timestamp => Value::Timestamp(i64::from_be_bytes(fixed(bytes, "timestamp")?)),
            CqlType::Duration => {
                let (months, days, nanos) = read_duration(bytes)?;
                Value::Duration { months, days, nanos }
            }
            CqlType::List(elem) => Value::List(read_elements(ty, elem, bytes)?),
            CqlType::Set(elem) => Value::Set(read_elements(ty, elem, bytes)?),
            CqlType::Map(key, value) => Value::Map(read_entries(ty, key, value, bytes)?),
            CqlType::Tuple(fields) => Value::Tuple(read_tuple(ty, fields.iter(), bytes)?),
            // A user type's value is laid out as a tuple of its fields.
            CqlType::Udt(udt) => Value::Tuple(read_tuple(ty, udt.field_types(), bytes)?),
            CqlType::Vector(elem, dimension) => Value::Vector(read_vector(ty, elem, *dimension, bytes)?),
        };
        Ok(value)
    }

    /// The value's type; for collections, best effort from the first element
    /// (`blob` when empty). Nested collections come out frozen, as CQL needs.
    pub fn cql_type(&self) -> CqlType {
        match self {
            Value::Ascii(_) => CqlType::Ascii,
            Value::Text(_) => CqlType::Text,
            Value::Blob(_) => CqlType::Blob,
            Value::Boolean(_) => CqlType::Boolean,
            Value::Tinyint(_) => CqlType::Tinyint,
            Value::Smallint(_) => CqlType::Smallint,
            Value::Int(_) => CqlType::Int,
            Value::Bigint(_) => CqlType::Bigint,
            Value::Counter(_) => CqlType::Counter,
            Value::Float(_) => CqlType::Float,
            Value::Double(_) => CqlType::Double,
            Value::Varint(_) => CqlType::Varint,
            Value::Decimal { .. } => CqlType::Decimal,
            Value::Uuid(_) => CqlType::Uuid,
            Value::Timeuuid(_) => CqlType::Timeuuid,
            Value::Inet(_) => CqlType::Inet,
            Value::Date(_) => CqlType::Date,
            Value::Time(_) => CqlType::Time,
            Value::Timestamp(_) => CqlType::Timestamp,
            Value::Duration { .. } => CqlType::Duration,
            Value::List(items) => CqlType::List(Box::new(element_type(items.first()))),
            Value::Set(items) => CqlType::Set(Box::new(element_type(items.first()))),
            Value::Map(entries) => {
                let first = entries.first();
                CqlType::Map(
                    Box::new(element_type(first.map(|(k, _)| k))),
                    Box::new(element_type(first.map(|(_, v)| v))),
                )
            }
            Value::Tuple(fields) => CqlType::Tuple(fields.iter().map(|f| element_type(f.as_ref())).collect()),
            Value::Vector(items) => {
                CqlType::Vector(Box::new(element_type(items.first())), u32::try_from(items.len()).unwrap_or(u32::MAX))
            }
        }
    }
}

/// Type of a nested value: collections inside anything must be frozen.
fn element_type(value: Option<&Value>) -> CqlType {
    match value.map(Value::cql_type) {
        None => CqlType::Blob,
        Some(ty) if ty.is_multi_cell() => CqlType::Frozen(Box::new(ty)),
        Some(ty) => ty,
    }
}

// ---------------------------------------------------------------------------
// Writing helpers
// ---------------------------------------------------------------------------

/// Writes a protocol `[int]` count or length. Values over 2 GiB cannot be
/// represented in the protocol at all; frames are bounded far below that,
/// so saturating here never changes a real value.
fn write_i32(n: usize, out: &mut Vec<u8>) {
    out.extend_from_slice(&i32::try_from(n).unwrap_or(i32::MAX).to_be_bytes());
}

/// Writes a `[bytes]` element: i32 length then the body, -1 for null.
fn write_element(value: Option<&Value>, out: &mut Vec<u8>) {
    let Some(value) = value else {
        out.extend_from_slice(&(-1i32).to_be_bytes());
        return;
    };
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    value.serialize(out);
    let len = out.len() - at - 4;
    let prefix = i32::try_from(len).unwrap_or(i32::MAX).to_be_bytes();
    out[at..at + 4].copy_from_slice(&prefix);
}

/// An empty varint is invalid on the wire; write it as zero instead.
fn write_varint(bytes: &[u8], out: &mut Vec<u8>) {
    if bytes.is_empty() {
        out.push(0);
    } else {
        out.extend_from_slice(bytes);
    }
}

pub(crate) fn zigzag_encode(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

pub(crate) fn zigzag_decode(n: u64) -> i64 {
    ((n >> 1) as i64) ^ -((n & 1) as i64)
}

/// Cassandra's unsigned vint: the count of leading 1 bits in the first byte
/// is the count of extra bytes; the value is big-endian in the rest.
pub(crate) fn write_unsigned_vint(value: u64, out: &mut Vec<u8>) {
    let bits = 64 - (value | 1).leading_zeros() as usize;
    let extra = ((bits - 1) / 7).min(8);
    let bytes = value.to_be_bytes();
    if extra == 8 {
        out.push(0xFF);
        out.extend_from_slice(&bytes);
        return;
    }
    // `value` fits in 7 × (extra + 1) bits, so the top extra + 1 bits of
    // the first written byte are zero and free for the length marker.
    let tail = &bytes[7 - extra..];
    let marker = !(0xFFu8 >> extra);
    out.push(tail[0] | marker);
    out.extend_from_slice(&tail[1..]);
}

/// Reads one unsigned vint, advancing `input` past it.
pub(crate) fn read_unsigned_vint(input: &mut shoal_buf::Reader<'_>) -> Result<u64, shoal_buf::Short> {
    let first = input.u8("vint")?;
    let extra = first.leading_ones() as usize;
    let tail = input.take(extra, "vint")?;
    let mask = 0xFFu8.checked_shr(extra as u32).unwrap_or(0);
    Ok(tail.iter().fold(u64::from(first & mask), |acc, &b| (acc << 8) | u64::from(b)))
}

// ---------------------------------------------------------------------------
// Scalar checks (shared by deserialize, validate and compare)
// ---------------------------------------------------------------------------

fn fixed<const N: usize>(bytes: &[u8], ty: &'static str) -> Result<[u8; N], ValueError> {
    <[u8; N]>::try_from(bytes).map_err(|_| ValueError::WrongSize { ty, expected: N, got: bytes.len() })
}

fn check_utf8(bytes: &[u8]) -> Result<&str, ValueError> {
    std::str::from_utf8(bytes).map_err(|e| ValueError::InvalidUtf8 { offset: e.valid_up_to() })
}

fn check_ascii(bytes: &[u8]) -> Result<&str, ValueError> {
    if let Some(offset) = bytes.iter().position(|b| !b.is_ascii()) {
        return Err(ValueError::NonAscii { offset, byte: bytes[offset] });
    }
    check_utf8(bytes)
}

fn check_varint(bytes: &[u8]) -> Result<&[u8], ValueError> {
    if bytes.is_empty() {
        return Err(ValueError::EmptyVarint);
    }
    Ok(bytes)
}

/// Splits a decimal into its scale and (non-empty) unscaled bytes.
pub(crate) fn split_decimal(bytes: &[u8]) -> Result<(i32, &[u8]), ValueError> {
    match bytes {
        [a, b, c, d, unscaled @ ..] if !unscaled.is_empty() => Ok((i32::from_be_bytes([*a, *b, *c, *d]), unscaled)),
        _ => Err(ValueError::DecimalTooShort(bytes.len())),
    }
}

fn check_timeuuid(bytes: &[u8]) -> Result<[u8; 16], ValueError> {
    let uuid: [u8; 16] = fixed(bytes, "timeuuid")?;
    let version = uuid[6] >> 4;
    if version != 1 {
        return Err(ValueError::NotTimeuuid(version));
    }
    Ok(uuid)
}

fn check_time(bytes: &[u8]) -> Result<i64, ValueError> {
    let nanos = i64::from_be_bytes(fixed(bytes, "time")?);
    if !(0..=MAX_TIME_NANOS).contains(&nanos) {
        return Err(ValueError::TimeOutOfRange(nanos));
    }
    Ok(nanos)
}

fn read_inet(bytes: &[u8]) -> Result<IpAddr, ValueError> {
    if let Ok(v4) = <[u8; 4]>::try_from(bytes) {
        return Ok(IpAddr::V4(Ipv4Addr::from(v4)));
    }
    if let Ok(v6) = <[u8; 16]>::try_from(bytes) {
        return Ok(IpAddr::V6(Ipv6Addr::from(v6)));
    }
    Err(ValueError::InetSize(bytes.len()))
}

/// Decodes the three zigzag vints of a duration, with Cassandra's checks:
/// months and days fit in i32, and no two fields have opposite signs.
fn read_duration(bytes: &[u8]) -> Result<(i32, i32, i64), ValueError> {
    let mut input = shoal_buf::Reader::new(bytes);
    let mut field =
        |name| read_unsigned_vint(&mut input).map(zigzag_decode).map_err(|_| ValueError::TruncatedDuration(name));
    let (months, days, nanos) = (field("months")?, field("days")?, field("nanoseconds")?);
    if !input.is_empty() {
        return Err(ValueError::TrailingBytes { ty: "duration".into(), extra: input.remaining() });
    }
    let small = |field, value: i64| i32::try_from(value).map_err(|_| ValueError::DurationFieldRange { field, value });
    let (m, d) = (small("months", months)?, small("days", days)?);
    let any_negative = months < 0 || days < 0 || nanos < 0;
    let any_positive = months > 0 || days > 0 || nanos > 0;
    if any_negative && any_positive {
        return Err(ValueError::DurationMixedSigns { months, days, nanos });
    }
    Ok((m, d, nanos))
}

// ---------------------------------------------------------------------------
// Collections and tuples
// ---------------------------------------------------------------------------

/// Reads protocol `[int]` and `[bytes]` items from the front of a buffer,
/// on top of the one bounds-checked byte reader (`shoal_buf`).
pub(crate) struct Reader<'a> {
    bytes: shoal_buf::Reader<'a>,
}

impl From<shoal_buf::Short> for ValueError {
    fn from(short: shoal_buf::Short) -> ValueError {
        ValueError::Truncated { what: short.what, needed: short.needed, remaining: short.left }
    }
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes: shoal_buf::Reader::new(bytes) }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    fn read_i32(&mut self, what: &'static str) -> Result<i32, ValueError> {
        Ok(self.bytes.be_i32(what)?)
    }

    /// A non-negative element count.
    pub(crate) fn read_count(&mut self, what: &'static str) -> Result<usize, ValueError> {
        let count = self.read_i32(what)?;
        usize::try_from(count).map_err(|_| ValueError::NegativeCount { what, count })
    }

    /// A `[bytes]` item; a negative length means null.
    pub(crate) fn read_item(&mut self, what: &'static str) -> Result<Option<&'a [u8]>, ValueError> {
        let len = self.read_i32(what)?;
        match usize::try_from(len) {
            Ok(len) => Ok(Some(self.bytes.take(len, what)?)),
            Err(_) => Ok(None),
        }
    }

    /// A collection element, which must not be null.
    pub(crate) fn read_element(&mut self, what: &'static str) -> Result<&'a [u8], ValueError> {
        self.read_item(what)?.ok_or(ValueError::NullElement(what))
    }

    pub(crate) fn finish(self, ty: &CqlType) -> Result<(), ValueError> {
        finish(&self.bytes, ty)
    }
}

/// Checks that a value ended after its last item.
pub(crate) fn finish(bytes: &shoal_buf::Reader<'_>, ty: &CqlType) -> Result<(), ValueError> {
    if bytes.is_empty() {
        Ok(())
    } else {
        Err(ValueError::TrailingBytes { ty: ty.to_string(), extra: bytes.remaining() })
    }
}

/// Wraps an element's error with where it happened.
fn nested(ty: &CqlType, what: &str, index: usize) -> impl FnOnce(ValueError) -> ValueError {
    let context = format!("{what} {index} of {ty}");
    move |source| ValueError::Nested { context, source: Box::new(source) }
}

/// Capacity hint for `count` items: never trust a count from the wire beyond
/// what the remaining bytes could hold (each item takes at least 4 bytes).
fn capacity(count: usize, bytes: &[u8]) -> usize {
    count.min(bytes.len() / 4)
}

fn read_elements(ty: &CqlType, elem: &CqlType, bytes: &[u8]) -> Result<Vec<Value>, ValueError> {
    let mut reader = Reader::new(bytes);
    let count = reader.read_count("collection size")?;
    let mut items = Vec::with_capacity(capacity(count, bytes));
    for i in 0..count {
        let raw = reader.read_element("element")?;
        items.push(Value::deserialize(elem, raw).map_err(nested(ty, "element", i))?);
    }
    reader.finish(ty)?;
    Ok(items)
}

fn read_entries(
    ty: &CqlType,
    key_ty: &CqlType,
    value_ty: &CqlType,
    bytes: &[u8],
) -> Result<Vec<(Value, Value)>, ValueError> {
    let mut reader = Reader::new(bytes);
    let count = reader.read_count("map size")?;
    let mut entries = Vec::with_capacity(capacity(count, bytes));
    for i in 0..count {
        let key = Value::deserialize(key_ty, reader.read_element("map key")?).map_err(nested(ty, "key", i))?;
        let value = Value::deserialize(value_ty, reader.read_element("map value")?).map_err(nested(ty, "value", i))?;
        entries.push((key, value));
    }
    reader.finish(ty)?;
    Ok(entries)
}

/// Tuples may be serialized with fewer fields than the type has (Cassandra
/// accepts that); the missing trailing fields are null.
fn read_tuple<'t>(
    ty: &CqlType,
    fields: impl ExactSizeIterator<Item = &'t CqlType>,
    bytes: &[u8],
) -> Result<Vec<Option<Value>>, ValueError> {
    let mut reader = Reader::new(bytes);
    let mut values = Vec::with_capacity(fields.len());
    for (i, field) in fields.enumerate() {
        let raw = if reader.is_empty() { None } else { reader.read_item("tuple field")? };
        let value = raw.map(|raw| Value::deserialize(field, raw)).transpose();
        values.push(value.map_err(nested(ty, "field", i))?);
    }
    reader.finish(ty)?;
    Ok(values)
}

/// A vector's `dimension` elements, each a valid `elem`.
fn read_vector(ty: &CqlType, elem: &CqlType, dimension: u32, bytes: &[u8]) -> Result<Vec<Value>, ValueError> {
    vector::check_length(ty, elem, dimension, bytes)?;
    let mut reader = VectorReader::new(elem, bytes);
    // Every element takes at least one byte, so the input bounds the count.
    let mut items = Vec::with_capacity((dimension as usize).min(bytes.len()));
    for i in 0..dimension as usize {
        let value = reader.next_element().and_then(|raw| Value::deserialize(elem, raw));
        items.push(value.map_err(nested(ty, "element", i))?);
    }
    reader.finish(ty)?;
    Ok(items)
}

// ---------------------------------------------------------------------------
// Validation without building values
// ---------------------------------------------------------------------------

/// Checks `bytes` exactly as [`Value::deserialize`] does, returning the same
/// error, without building the value: it allocates only to report an error.
pub fn validate(ty: &CqlType, bytes: &[u8]) -> Result<(), ValueError> {
    match ty {
        CqlType::Frozen(inner) => validate(inner, bytes),
        CqlType::Ascii => check_ascii(bytes).map(drop),
        CqlType::Text => check_utf8(bytes).map(drop),
        CqlType::Blob => Ok(()),
        CqlType::Varint => check_varint(bytes).map(drop),
        CqlType::Decimal => split_decimal(bytes).map(drop),
        CqlType::Timeuuid => check_timeuuid(bytes).map(drop),
        CqlType::Inet => read_inet(bytes).map(drop),
        CqlType::Time => check_time(bytes).map(drop),
        CqlType::Duration => read_duration(bytes).map(drop),
        CqlType::List(elem) | CqlType::Set(elem) => {
            validate_elements(ty, "collection size", &[(elem, "element", "element")], bytes)
        }
        CqlType::Map(key, value) => {
            let group = [(&**key, "map key", "key"), (&**value, "map value", "value")];
            validate_elements(ty, "map size", &group, bytes)
        }
        CqlType::Tuple(fields) => validate_tuple(ty, fields.iter(), bytes),
        CqlType::Udt(udt) => validate_tuple(ty, udt.field_types(), bytes),
        CqlType::Vector(elem, dimension) => validate_vector(ty, elem, *dimension, bytes),
        fixed_ty => validate_fixed(fixed_ty, bytes),
    }
}

/// The remaining types all have a fixed size; only the size needs checking.
fn validate_fixed(ty: &CqlType, bytes: &[u8]) -> Result<(), ValueError> {
    let expected = ty.fixed_size_bytes().unwrap_or(0);
    if bytes.len() == expected {
        return Ok(());
    }
    Err(ValueError::WrongSize { ty: fixed_type_name(ty), expected, got: bytes.len() })
}

fn fixed_type_name(ty: &CqlType) -> &'static str {
    match ty {
        CqlType::Boolean => "boolean",
        CqlType::Tinyint => "tinyint",
        CqlType::Smallint => "smallint",
        CqlType::Int => "int",
        CqlType::Float => "float",
        CqlType::Date => "date",
        CqlType::Bigint => "bigint",
        CqlType::Counter => "counter",
        CqlType::Double => "double",
        CqlType::Time => "time",
        CqlType::Timestamp => "timestamp",
        CqlType::Timeuuid => "timeuuid",
        _ => "uuid",
    }
}

/// Collection elements come in groups: one per list/set element, a key and
/// a value per map entry; each with the labels [`Value::deserialize`] uses
/// in its errors, so both report the same error.
fn validate_elements(
    ty: &CqlType,
    count_label: &'static str,
    group: &[(&CqlType, &'static str, &'static str)],
    bytes: &[u8],
) -> Result<(), ValueError> {
    let mut reader = Reader::new(bytes);
    let count = reader.read_count(count_label)?;
    for i in 0..count {
        for (elem, wire_label, context_label) in group {
            let raw = reader.read_element(wire_label)?;
            validate(elem, raw).map_err(nested(ty, context_label, i))?;
        }
    }
    reader.finish(ty)
}

fn validate_vector(ty: &CqlType, elem: &CqlType, dimension: u32, bytes: &[u8]) -> Result<(), ValueError> {
    vector::check_length(ty, elem, dimension, bytes)?;
    let mut reader = VectorReader::new(elem, bytes);
    for i in 0..dimension as usize {
        reader.next_element().and_then(|raw| validate(elem, raw)).map_err(nested(ty, "element", i))?;
    }
    reader.finish(ty)
}

fn validate_tuple<'t>(ty: &CqlType, fields: impl Iterator<Item = &'t CqlType>, bytes: &[u8]) -> Result<(), ValueError> {
    let mut reader = Reader::new(bytes);
    for (i, field) in fields.enumerate() {
        if reader.is_empty() {
            break;
        }
        if let Some(raw) = reader.read_item("tuple field")? {
            validate(field, raw).map_err(nested(ty, "field", i))?;
        }
    }
    reader.finish(ty)
}

// ---------------------------------------------------------------------------
// Ordering
// ---------------------------------------------------------------------------

/// Cassandra's order of two serialized values of type `ty` (the order of
/// `ORDER BY`, clustering, `min`/`max`). Invalid input falls back to
/// bytewise order rather than failing.
pub fn compare(ty: &CqlType, a: &[u8], b: &[u8]) -> Ordering {
    try_compare(ty, a, b).unwrap_or_else(|| a.cmp(b))
}

fn try_compare(ty: &CqlType, a: &[u8], b: &[u8]) -> Option<Ordering> {
    match ty {
        CqlType::Frozen(inner) => try_compare(inner, a, b),
        CqlType::Ascii | CqlType::Text | CqlType::Blob | CqlType::Inet | CqlType::Duration => Some(a.cmp(b)),
        CqlType::Boolean => cmp_by(a, b, |x| fixed::<1>(x, "boolean").ok().map(|v| v[0] != 0)),
        CqlType::Tinyint => cmp_by(a, b, |x| fixed(x, "tinyint").ok().map(i8::from_be_bytes)),
        CqlType::Smallint => cmp_by(a, b, |x| fixed(x, "smallint").ok().map(i16::from_be_bytes)),
        CqlType::Int => cmp_by(a, b, |x| fixed(x, "int").ok().map(i32::from_be_bytes)),
        CqlType::Date => cmp_by(a, b, |x| fixed(x, "date").ok().map(u32::from_be_bytes)),
        CqlType::Bigint | CqlType::Counter | CqlType::Time | CqlType::Timestamp => {
            cmp_by(a, b, |x| fixed(x, "bigint").ok().map(i64::from_be_bytes))
        }
        CqlType::Float => cmp_by(a, b, |x| fixed(x, "float").ok().map(|v| float_key(f32::from_be_bytes(v)))),
        CqlType::Double => cmp_by(a, b, |x| fixed(x, "double").ok().map(|v| double_key(f64::from_be_bytes(v)))),
        CqlType::Varint => (!a.is_empty() && !b.is_empty()).then(|| bignum::cmp_varint(a, b)),
        CqlType::Decimal => cmp_by(a, b, |x| NormalDecimal::from_bytes(x).ok()),
        CqlType::Uuid => cmp_by(a, b, |x| fixed(x, "uuid").ok().map(uuid_key)),
        CqlType::Timeuuid => cmp_by(a, b, |x| fixed(x, "timeuuid").ok().map(timeuuid_key)),
        CqlType::List(elem) | CqlType::Set(elem) => compare_elements(&[elem], a, b),
        CqlType::Map(key, value) => compare_elements(&[key, value], a, b),
        CqlType::Tuple(fields) => compare_tuples(fields.iter(), a, b),
        CqlType::Udt(udt) => compare_tuples(udt.field_types(), a, b),
        CqlType::Vector(elem, dimension) => compare_vectors(elem, *dimension, a, b),
    }
}

fn cmp_by<T: Ord>(a: &[u8], b: &[u8], key: impl Fn(&[u8]) -> Option<T>) -> Option<Ordering> {
    Some(key(a)?.cmp(&key(b)?))
}

/// Java's `Float.compare` as an unsigned key: -0.0 < 0.0, every NaN equal
/// and above +Infinity. Negative floats have all bits inverted, others
/// only the sign bit, so unsigned order is numeric order.
pub(crate) fn float_key(v: f32) -> u32 {
    let bits = if v.is_nan() { f32::NAN.to_bits() & 0x7FFF_FFFF } else { v.to_bits() };
    if bits & 0x8000_0000 != 0 {
        !bits
    } else {
        bits | 0x8000_0000
    }
}

/// [`float_key`] for doubles (`Double.compare`).
pub(crate) fn double_key(v: f64) -> u64 {
    let bits = if v.is_nan() { f64::NAN.to_bits() & !(1 << 63) } else { v.to_bits() };
    if bits & (1 << 63) != 0 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

/// Cassandra's `TimeUUIDType` reorders the most significant half so the
/// 60-bit timestamp reads high-to-low: time_hi (with version), time_mid,
/// time_low.
fn reorder_timestamp(msb: u64) -> u64 {
    (msb << 48) | ((msb << 16) & 0xFFFF_0000_0000) | (msb >> 32)
}

/// `UUIDType` order as bytes: version nibble first; version 1 by timestamp
/// (reordered, non-negative so unsigned order matches Java's signed compare),
/// others by the raw most significant half; then the least significant half
/// unsigned.
pub(crate) fn uuid_key(uuid: [u8; 16]) -> [u8; 17] {
    let (msb_bytes, lsb) = uuid.split_at(8);
    let msb = u64::from_be_bytes(to_array8(msb_bytes));
    let version = ((msb >> 12) & 0xF) as u8;
    let msb_key = if version == 1 { reorder_timestamp(msb) } else { msb };
    let mut key = [0u8; 17];
    key[0] = version;
    key[1..9].copy_from_slice(&msb_key.to_be_bytes());
    key[9..].copy_from_slice(lsb);
    key
}

/// `TimeUUIDType` order as bytes: reordered timestamp compared signed (sign
/// bit flipped), then the least significant bytes compared as *signed*
/// bytes (Cassandra keeps that for compatibility; flipping each byte's top
/// bit makes unsigned order match).
pub(crate) fn timeuuid_key(uuid: [u8; 16]) -> [u8; 16] {
    let (msb_bytes, lsb) = uuid.split_at(8);
    let msb = reorder_timestamp(u64::from_be_bytes(to_array8(msb_bytes))) ^ (1 << 63);
    let mut key = [0u8; 16];
    key[..8].copy_from_slice(&msb.to_be_bytes());
    for (dst, src) in key[8..].iter_mut().zip(lsb) {
        *dst = src ^ 0x80;
    }
    key
}

fn to_array8(bytes: &[u8]) -> [u8; 8] {
    let mut array = [0u8; 8];
    array.iter_mut().zip(bytes).for_each(|(dst, src)| *dst = *src);
    array
}

/// Frozen lists, sets and maps: element by element (for maps key then value
/// of each entry), and a collection that is a prefix of the other first.
fn compare_elements(group: &[&CqlType], a: &[u8], b: &[u8]) -> Option<Ordering> {
    let (mut ra, mut rb) = (Reader::new(a), Reader::new(b));
    let (na, nb) = (ra.read_count("size").ok()?, rb.read_count("size").ok()?);
    for _ in 0..na.min(nb) {
        for elem in group {
            let (ea, eb) = (ra.read_element("element").ok()?, rb.read_element("element").ok()?);
            let order = try_compare(elem, ea, eb)?;
            if order != Ordering::Equal {
                return Some(order);
            }
        }
    }
    Some(na.cmp(&nb))
}

/// Vectors element by element (Cassandra's `VectorType` order).
fn compare_vectors(elem: &CqlType, dimension: u32, a: &[u8], b: &[u8]) -> Option<Ordering> {
    let (mut ra, mut rb) = (VectorReader::new(elem, a), VectorReader::new(elem, b));
    for _ in 0..dimension {
        let order = try_compare(elem, ra.next_element().ok()?, rb.next_element().ok()?)?;
        if order != Ordering::Equal {
            return Some(order);
        }
    }
    (ra.is_empty() && rb.is_empty()).then_some(Ordering::Equal)
}

/// Tuples field by field; null (or a missing trailing field) sorts first.
fn compare_tuples<'t>(fields: impl Iterator<Item = &'t CqlType>, a: &[u8], b: &[u8]) -> Option<Ordering> {
    let (mut ra, mut rb) = (Reader::new(a), Reader::new(b));
    for field in fields {
        let fa = if ra.is_empty() { None } else { ra.read_item("field").ok()? };
        let fb = if rb.is_empty() { None } else { rb.read_item("field").ok()? };
        let order = match (fa, fb) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            (Some(fa), Some(fb)) => try_compare(field, fa, fb)?,
        };
        if order != Ordering::Equal {
            return Some(order);
        }
    }
    (ra.is_empty() && rb.is_empty()).then_some(Ordering::Equal)
}

/// A decimal in a canonical form where numerically equal values are equal:
/// `sign × 0.d1d2d3… × 10^exponent`, `digits` without trailing zeros and
/// with a non-zero first digit (empty for zero).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NormalDecimal {
    /// Less for negative, Equal for zero, Greater for positive.
    pub(crate) sign: Ordering,
    pub(crate) exponent: i64,
    /// Decimal digit values 0..=9, most significant first.
    pub(crate) digits: Vec<u8>,
}

impl NormalDecimal {
    pub(crate) fn from_bytes(bytes: &[u8]) -> Result<Self, ValueError> {
        let (scale, unscaled) = split_decimal(bytes)?;
        let (negative, magnitude) = bignum::to_magnitude(unscaled);
        let mut digits = bignum::to_decimal_digits(magnitude);
        if digits == [0] {
            return Ok(NormalDecimal { sign: Ordering::Equal, exponent: 0, digits: Vec::new() });
        }
        // value = digits × 10^-scale = 0.digits × 10^(len - scale)
        let exponent = digits.len() as i64 - i64::from(scale);
        while digits.last() == Some(&0) {
            digits.pop();
        }
        let sign = if negative { Ordering::Less } else { Ordering::Greater };
        Ok(NormalDecimal { sign, exponent, digits })
    }
}

impl Ord for NormalDecimal {
    fn cmp(&self, other: &Self) -> Ordering {
        let magnitude = || self.exponent.cmp(&other.exponent).then_with(|| self.digits.cmp(&other.digits));
        match self.sign.cmp(&other.sign) {
            Ordering::Equal => match self.sign {
                Ordering::Equal => Ordering::Equal,
                Ordering::Greater => magnitude(),
                Ordering::Less => magnitude().reverse(),
            },
            order => order,
        }
    }
}

impl PartialOrd for NormalDecimal {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

// ---------------------------------------------------------------------------
// Aggregate arithmetic
// ---------------------------------------------------------------------------

/// `a + b` for `sum()`: the result has the operands' type. Fixed-size
/// integers wrap on overflow exactly as Cassandra's `sum` does; varint and
/// decimal are exact; float and double use IEEE arithmetic.
pub fn add(ty: &CqlType, a: &Value, b: &Value) -> Result<Value, ValueError> {
    let sum = match (a, b) {
        (Value::Tinyint(x), Value::Tinyint(y)) => Value::Tinyint(x.wrapping_add(*y)),
        (Value::Smallint(x), Value::Smallint(y)) => Value::Smallint(x.wrapping_add(*y)),
        (Value::Int(x), Value::Int(y)) => Value::Int(x.wrapping_add(*y)),
        (Value::Bigint(x), Value::Bigint(y)) => Value::Bigint(x.wrapping_add(*y)),
        (Value::Counter(x), Value::Counter(y)) => Value::Counter(x.wrapping_add(*y)),
        (Value::Float(x), Value::Float(y)) => Value::Float(x + y),
        (Value::Double(x), Value::Double(y)) => Value::Double(x + y),
        (Value::Varint(x), Value::Varint(y)) => Value::Varint(bignum::add(x, y)),
        (Value::Decimal { scale: sa, unscaled: ua }, Value::Decimal { scale: sb, unscaled: ub }) => {
            add_decimals((*sa, ua), (*sb, ub))?
        }
        _ if !is_numeric(ty) => return Err(ValueError::NotNumeric(ty.to_string())),
        _ => return Err(mismatch(ty, if a.cql_type() == *ty.unfrozen() { b } else { a })),
    };
    Ok(sum)
}

/// Whether `ty` (frozen or not) is one of the numeric types.
pub(crate) fn is_numeric(ty: &CqlType) -> bool {
    matches!(
        ty.unfrozen(),
        CqlType::Tinyint
            | CqlType::Smallint
            | CqlType::Int
            | CqlType::Bigint
            | CqlType::Counter
            | CqlType::Float
            | CqlType::Double
            | CqlType::Varint
            | CqlType::Decimal
    )
}

fn mismatch(ty: &CqlType, got: &Value) -> ValueError {
    ValueError::Mismatch { expected: ty.to_string(), got: got.cql_type().to_string() }
}

/// Decimal addition at the larger scale (Java's `BigDecimal.add`).
pub(crate) fn add_decimals(a: (i32, &[u8]), b: (i32, &[u8])) -> Result<Value, ValueError> {
    let ((sa, ua), (sb, ub)) = if a.0 >= b.0 { (a, b) } else { (b, a) };
    let gap = i64::from(sa) - i64::from(sb);
    if gap > MAX_SCALE_GAP {
        return Err(ValueError::ScalesTooFarApart(sa, sb));
    }
    let aligned = bignum::mul_pow10(ub, gap as u32);
    Ok(Value::Decimal { scale: sa, unscaled: bignum::add(ua, &aligned) })
}

/// `unscaled × 10^-scale` rounded half up (away from zero on a tie, Java's
/// `HALF_UP`) to at most `precision` significant digits; `None` when the
/// scale the rounding needs does not fit an i32.
pub(crate) fn round_decimal_half_up(scale: i32, unscaled: &[u8], precision: usize) -> Option<(i32, Vec<u8>)> {
    assert!(precision > 0, "a precision of at least one digit");
    let (negative, magnitude) = bignum::to_magnitude(unscaled);
    let digits = bignum::to_decimal_digits(magnitude);
    if digits.len() <= precision {
        return Some((scale, unscaled.to_vec()));
    }
    let mut dropped = digits.len() - precision;
    let mut kept: Vec<u8> = digits[..precision].to_vec();
    if digits[precision] >= 5 {
        // Carry through trailing nines; all nines become 1 and zeros.
        let last_below_nine = kept.iter().rposition(|d| *d < 9);
        match last_below_nine {
            Some(at) => {
                kept[at] += 1;
                kept[at + 1..].iter_mut().for_each(|d| *d = 0);
            }
            None => {
                kept.iter_mut().for_each(|d| *d = 0);
                kept[0] = 1;
                // 10^precision has one digit too many: drop a zero.
                dropped += 1;
            }
        }
    }
    let ascii: Vec<u8> = kept.iter().map(|d| b'0' + d).collect();
    let scale = i32::try_from(i64::from(scale) - i64::try_from(dropped).ok()?).ok()?;
    Some((scale, bignum::from_magnitude(negative, &bignum::from_decimal_digits(&ascii))))
}

/// Widens an integer value to a varint, so `avg` can sum without the
/// overflow `sum` keeps; pass the result sum to [`divide_for_avg`].
pub fn to_varint(value: &Value) -> Option<Value> {
    let wide = match value {
        Value::Tinyint(v) => i128::from(*v),
        Value::Smallint(v) => i128::from(*v),
        Value::Int(v) => i128::from(*v),
        Value::Bigint(v) | Value::Counter(v) => i128::from(*v),
        Value::Varint(v) => return Some(Value::Varint(v.clone())),
        _ => return None,
    };
    Some(Value::Varint(bignum::minimal(&wide.to_be_bytes()).to_vec()))
}

/// `sum / count` for `avg()`, as a value of `ty`. Integers truncate toward
/// zero; `sum` may be of `ty` or a varint (see [`to_varint`]), and the
/// result is narrowed to `ty`. Decimals keep the sum's scale and round half
/// to even (ScyllaDB); floats divide in their own precision. A zero count
/// gives zero, as Cassandra's `avg` of no rows does.
pub fn divide_for_avg(ty: &CqlType, sum: &Value, count: u64) -> Result<Value, ValueError> {
    let ty = ty.unfrozen();
    if count == 0 {
        return zero_of(ty);
    }
    let quotient = match sum {
        Value::Float(s) => return same_type(ty, Value::Float(s / count as f32)),
        Value::Double(s) => return same_type(ty, Value::Double(s / count as f64)),
        Value::Decimal { scale, unscaled } => {
            let unscaled = bignum::divide_half_even(unscaled, count);
            return same_type(ty, Value::Decimal { scale: *scale, unscaled });
        }
        Value::Varint(s) => bignum::divide_truncating(s, count),
        int => match to_varint(int) {
            Some(Value::Varint(s)) => bignum::divide_truncating(&s, count),
            _ => return Err(mismatch(ty, sum)),
        },
    };
    narrow_integer(ty, quotient).ok_or_else(|| mismatch(ty, sum))
}

fn same_type(ty: &CqlType, value: Value) -> Result<Value, ValueError> {
    if value.cql_type() == *ty {
        Ok(value)
    } else {
        Err(mismatch(ty, &value))
    }
}

/// An integer average always lies within the range of the summed type, so
/// the truncating casts below never lose information for real averages.
fn narrow_integer(ty: &CqlType, varint: Vec<u8>) -> Option<Value> {
    let wide = bignum::to_i128(&varint);
    let value = match ty {
        CqlType::Tinyint => Value::Tinyint(wide? as i8),
        CqlType::Smallint => Value::Smallint(wide? as i16),
        CqlType::Int => Value::Int(wide? as i32),
        CqlType::Bigint => Value::Bigint(wide? as i64),
        CqlType::Counter => Value::Counter(wide? as i64),
        CqlType::Varint => Value::Varint(varint),
        _ => return None,
    };
    Some(value)
}

/// The zero of a numeric type: where `sum` and `avg` start.
pub fn zero_of(ty: &CqlType) -> Result<Value, ValueError> {
    let zero = match ty {
        CqlType::Tinyint => Value::Tinyint(0),
        CqlType::Smallint => Value::Smallint(0),
        CqlType::Int => Value::Int(0),
        CqlType::Bigint => Value::Bigint(0),
        CqlType::Counter => Value::Counter(0),
        CqlType::Float => Value::Float(0.0),
        CqlType::Double => Value::Double(0.0),
        CqlType::Varint => Value::Varint(vec![0]),
        CqlType::Decimal => Value::Decimal { scale: 0, unscaled: vec![0] },
        other => return Err(ValueError::NotNumeric(other.to_string())),
    };
    Ok(zero)
}

// ---------------------------------------------------------------------------
// Display
// ---------------------------------------------------------------------------

/// The cqlsh-like text of a value: top-level strings plain, strings inside
/// collections and tuples quoted as CQL literals.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_value(self, f, false)
    }
}

fn write_value(value: &Value, f: &mut fmt::Formatter<'_>, nested: bool) -> fmt::Result {
    match value {
        Value::Ascii(s) | Value::Text(s) => write_text(s, f, nested),
        Value::Blob(b) => {
            f.write_str("0x")?;
            b.iter().try_for_each(|byte| write!(f, "{byte:02x}"))
        }
        Value::Boolean(b) => write!(f, "{b}"),
        Value::Tinyint(v) => write!(f, "{v}"),
        Value::Smallint(v) => write!(f, "{v}"),
        Value::Int(v) => write!(f, "{v}"),
        Value::Bigint(v) | Value::Counter(v) => write!(f, "{v}"),
        Value::Float(v) => write_float(f64::from(*v), &v.to_string(), f),
        Value::Double(v) => write_float(*v, &v.to_string(), f),
        Value::Varint(b) => f.write_str(&bignum::to_decimal_string(b)),
        Value::Decimal { scale, unscaled } => f.write_str(&decimal_to_string(*scale, unscaled)),
        Value::Uuid(u) | Value::Timeuuid(u) => write!(f, "{}", uuid::Uuid::from_bytes(*u)),
        Value::Inet(addr) => write_text(&addr.to_string(), f, nested),
        Value::Date(d) => write_text(&literal::format_date(*d), f, nested),
        Value::Time(t) => write_text(&literal::format_time(*t), f, nested),
        Value::Timestamp(ms) => write_text(&literal::format_timestamp_ms(*ms), f, nested),
        Value::Duration { months, days, nanos } => f.write_str(&literal::format_duration(*months, *days, *nanos)),
        Value::List(items) | Value::Vector(items) => write_seq(f, "[", "]", items.iter().map(Some)),
        Value::Set(items) => write_seq(f, "{", "}", items.iter().map(Some)),
        Value::Tuple(fields) => write_seq(f, "(", ")", fields.iter().map(Option::as_ref)),
        Value::Map(entries) => {
            f.write_str("{")?;
            for (i, (key, value)) in entries.iter().enumerate() {
                f.write_str(if i > 0 { ", " } else { "" })?;
                write_value(key, f, true)?;
                f.write_str(": ")?;
                write_value(value, f, true)?;
            }
            f.write_str("}")
        }
    }
}

fn write_text(s: &str, f: &mut fmt::Formatter<'_>, quoted: bool) -> fmt::Result {
    if quoted {
        write!(f, "'{}'", s.replace('\'', "''"))
    } else {
        f.write_str(s)
    }
}

/// Rust prints infinities as `inf`; CQL spells them `Infinity`.
fn write_float(v: f64, shortest: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match v {
        f64::INFINITY => f.write_str("Infinity"),
        f64::NEG_INFINITY => f.write_str("-Infinity"),
        _ => f.write_str(shortest),
    }
}

fn write_seq<'a>(
    f: &mut fmt::Formatter<'_>,
    open: &str,
    close: &str,
    items: impl Iterator<Item = Option<&'a Value>>,
) -> fmt::Result {
    f.write_str(open)?;
    for (i, item) in items.enumerate() {
        f.write_str(if i > 0 { ", " } else { "" })?;
        match item {
            Some(value) => write_value(value, f, true)?,
            None => f.write_str("null")?,
        }
    }
    f.write_str(close)
}

/// Java's `BigDecimal.toString`: plain notation when the scale is
/// non-negative and the adjusted exponent is at least -6, otherwise
/// scientific (`1.5E+3`, `1E-7`).
pub fn decimal_to_string(scale: i32, unscaled: &[u8]) -> String {
    let (negative, magnitude) = bignum::to_magnitude(unscaled);
    let digits: String = bignum::to_decimal_digits(magnitude).iter().map(|d| char::from(b'0' + d)).collect();
    let sign = if negative { "-" } else { "" };
    let scale = i64::from(scale);
    let adjusted = digits.len() as i64 - 1 - scale;
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    if scale > 0 && adjusted >= -6 {
        let point = digits.len() as i64 - scale;
        return if point > 0 {
            let (int, frac) = digits.split_at(point as usize);
            format!("{sign}{int}.{frac}")
        } else {
            format!("{sign}0.{}{digits}", "0".repeat((-point) as usize))
        };
    }
    let (first, rest) = digits.split_at(1);
    let dot = if rest.is_empty() { "" } else { "." };
    let plus = if adjusted > 0 { "+" } else { "" };
    format!("{sign}{first}{dot}{rest}E{plus}{adjusted}")
}

// ---------------------------------------------------------------------------
// Arbitrary-precision integers on two's complement byte strings
// ---------------------------------------------------------------------------

/// Just enough big-integer arithmetic for varint and decimal: conversion
/// to and from decimal digits, addition, scaling by powers of ten and
/// division by a `u64`. Magnitudes are little-endian `u32` limbs without
/// high zero limbs (zero is the empty vector).
pub(crate) mod bignum {
    use std::cmp::Ordering;

    pub(crate) fn is_negative(bytes: &[u8]) -> bool {
        bytes.first().is_some_and(|b| b & 0x80 != 0)
    }

    /// Drops redundant leading sign bytes (0x00 before a byte with the top
    /// bit clear, 0xFF before one with it set).
    pub(crate) fn minimal(mut bytes: &[u8]) -> &[u8] {
        while let [first, second, ..] = bytes {
            let redundant = (*first == 0x00 && second & 0x80 == 0) || (*first == 0xFF && second & 0x80 != 0);
            if !redundant {
                break;
            }
            bytes = &bytes[1..];
        }
        bytes
    }

    /// Numeric order of two non-empty two's complement integers: sign, then
    /// minimal length (longer is further from zero), then bytes — for equal
    /// length and sign, unsigned byte order of two's complement is numeric.
    pub(crate) fn cmp_varint(a: &[u8], b: &[u8]) -> Ordering {
        let (a, b) = (minimal(a), minimal(b));
        match (is_negative(a), is_negative(b)) {
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            (false, false) => a.len().cmp(&b.len()).then_with(|| a.cmp(b)),
            (true, true) => b.len().cmp(&a.len()).then_with(|| a.cmp(b)),
        }
    }

    fn negate_in_place(bytes: &mut [u8]) {
        let mut carry = true;
        for byte in bytes.iter_mut().rev() {
            let (value, overflow) = (!*byte).overflowing_add(u8::from(carry));
            *byte = value;
            carry = overflow;
        }
    }

    fn trim(limbs: &mut Vec<u32>) {
        while limbs.last() == Some(&0) {
            limbs.pop();
        }
    }

    /// Sign (true = negative) and magnitude of a two's complement integer.
    pub(crate) fn to_magnitude(twos: &[u8]) -> (bool, Vec<u32>) {
        let negative = is_negative(twos);
        let mut bytes = twos.to_vec();
        if negative {
            negate_in_place(&mut bytes);
        }
        let mut limbs: Vec<u32> =
            bytes.rchunks(4).map(|chunk| chunk.iter().fold(0u32, |acc, &b| (acc << 8) | u32::from(b))).collect();
        trim(&mut limbs);
        (negative, limbs)
    }

    /// Minimal two's complement bytes of `±magnitude` (negative zero is 0).
    pub(crate) fn from_magnitude(negative: bool, limbs: &[u32]) -> Vec<u8> {
        let mut bytes = vec![0u8];
        limbs.iter().rev().for_each(|limb| bytes.extend_from_slice(&limb.to_be_bytes()));
        if negative {
            negate_in_place(&mut bytes);
        }
        minimal(&bytes).to_vec()
    }

    /// `limbs = limbs × factor + addend`.
    pub(crate) fn mul_add_small(limbs: &mut Vec<u32>, factor: u32, addend: u32) {
        let mut carry = u64::from(addend);
        for limb in limbs.iter_mut() {
            let product = u64::from(*limb) * u64::from(factor) + carry;
            *limb = product as u32;
            carry = product >> 32;
        }
        if carry != 0 {
            limbs.push(carry as u32);
        }
    }

    /// `limbs /= divisor`, returning the remainder. `divisor` must be non-zero.
    fn divrem(limbs: &mut Vec<u32>, divisor: u64) -> u64 {
        let divisor = u128::from(divisor.max(1));
        let mut rem: u128 = 0;
        for limb in limbs.iter_mut().rev() {
            // rem < divisor ≤ 2^64, so the quotient digit fits in 32 bits.
            let current = (rem << 32) | u128::from(*limb);
            *limb = (current / divisor) as u32;
            rem = current % divisor;
        }
        trim(limbs);
        rem as u64
    }

    /// `-twos`.
    pub(crate) fn negate(twos: &[u8]) -> Vec<u8> {
        let (negative, magnitude) = to_magnitude(twos);
        from_magnitude(!negative, &magnitude)
    }

    /// Decimal digit values (0..=9), most significant first; `[0]` for zero.
    pub(crate) fn to_decimal_digits(mut limbs: Vec<u32>) -> Vec<u8> {
        let mut chunks = Vec::new();
        while !limbs.is_empty() {
            chunks.push(divrem(&mut limbs, 1_000_000_000));
        }
        let mut digits = Vec::with_capacity(chunks.len() * 9 + 1);
        for (i, chunk) in chunks.iter().rev().enumerate() {
            let text = if i == 0 { chunk.to_string() } else { format!("{chunk:09}") };
            digits.extend(text.bytes().map(|c| c - b'0'));
        }
        if digits.is_empty() {
            digits.push(0);
        }
        digits
    }

    /// Magnitude of a string of ASCII decimal digits (the caller checked them).
    pub(crate) fn from_decimal_digits(digits: &[u8]) -> Vec<u32> {
        let mut limbs = Vec::new();
        for chunk in digits.chunks(9) {
            let value = chunk.iter().fold(0u32, |acc, &c| acc * 10 + u32::from(c.wrapping_sub(b'0') % 10));
            mul_add_small(&mut limbs, 10u32.pow(chunk.len() as u32), value);
        }
        trim(&mut limbs);
        limbs
    }

    pub(crate) fn to_decimal_string(twos: &[u8]) -> String {
        let (negative, magnitude) = to_magnitude(twos);
        let digits: String = to_decimal_digits(magnitude).iter().map(|d| char::from(b'0' + d)).collect();
        if negative {
            format!("-{digits}")
        } else {
            digits
        }
    }

    /// Exact sum of two two's complement integers.
    pub(crate) fn add(a: &[u8], b: &[u8]) -> Vec<u8> {
        let len = a.len().max(b.len()) + 1;
        let extend = |x: &[u8]| {
            let fill = if is_negative(x) { 0xFF } else { 0x00 };
            let mut wide = vec![fill; len - x.len()];
            wide.extend_from_slice(x);
            wide
        };
        let (x, y) = (extend(a), extend(b));
        let mut sum = vec![0u8; len];
        let mut carry = 0u16;
        for ((s, xb), yb) in sum.iter_mut().zip(&x).zip(&y).rev() {
            let total = u16::from(*xb) + u16::from(*yb) + carry;
            *s = total as u8;
            carry = total >> 8;
        }
        minimal(&sum).to_vec()
    }

    /// `twos × 10^exponent`.
    pub(crate) fn mul_pow10(twos: &[u8], mut exponent: u32) -> Vec<u8> {
        let (negative, mut limbs) = to_magnitude(twos);
        while exponent > 0 {
            let step = exponent.min(9);
            mul_add_small(&mut limbs, 10u32.pow(step), 0);
            exponent -= step;
        }
        from_magnitude(negative, &limbs)
    }

    /// `twos / divisor` rounded toward zero (Java's `BigInteger.divide`).
    pub(crate) fn divide_truncating(twos: &[u8], divisor: u64) -> Vec<u8> {
        let (negative, mut limbs) = to_magnitude(twos);
        divrem(&mut limbs, divisor);
        from_magnitude(negative, &limbs)
    }

    /// `twos / divisor` rounded half to even.
    pub(crate) fn divide_half_even(twos: &[u8], divisor: u64) -> Vec<u8> {
        let (negative, mut limbs) = to_magnitude(twos);
        let rem = u128::from(divrem(&mut limbs, divisor));
        let odd = limbs.first().is_some_and(|l| l & 1 == 1);
        let twice = rem * 2;
        let divisor = u128::from(divisor);
        if twice > divisor || (twice == divisor && odd) {
            mul_add_small(&mut limbs, 1, 1);
        }
        from_magnitude(negative, &limbs)
    }

    /// The value as an i128, if it fits.
    pub(crate) fn to_i128(twos: &[u8]) -> Option<i128> {
        let twos = minimal(twos);
        if twos.is_empty() || twos.len() > 16 {
            return None;
        }
        let fill = if is_negative(twos) { 0xFF } else { 0x00 };
        let mut wide = [fill; 16];
        wide[16 - twos.len()..].copy_from_slice(twos);
        Some(i128::from_be_bytes(wide))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ty(text: &str) -> CqlType {
        CqlType::parse(text).expect("test type text is valid")
    }

    fn varint(v: i128) -> Value {
        Value::Varint(bignum::minimal(&v.to_be_bytes()).to_vec())
    }

    fn decimal(unscaled: i128, scale: i32) -> Value {
        Value::Decimal { scale, unscaled: bignum::minimal(&unscaled.to_be_bytes()).to_vec() }
    }

    fn sample_values() -> Vec<(CqlType, Value)> {
        vec![
            (CqlType::Ascii, Value::Ascii("abc".into())),
            (CqlType::Text, Value::Text("héllo\0".into())),
            (CqlType::Blob, Value::Blob(vec![0xca, 0xfe])),
            (CqlType::Boolean, Value::Boolean(true)),
            (CqlType::Tinyint, Value::Tinyint(-5)),
            (CqlType::Smallint, Value::Smallint(300)),
            (CqlType::Int, Value::Int(i32::MIN)),
            (CqlType::Bigint, Value::Bigint(i64::MAX)),
            (CqlType::Counter, Value::Counter(-7)),
            (CqlType::Float, Value::Float(1.5)),
            (CqlType::Double, Value::Double(-2.25)),
            (CqlType::Varint, varint(-129)),
            (CqlType::Varint, varint(170_141_183_460_469_231_731_687_303_715_884_105_727)),
            (CqlType::Decimal, decimal(-12345, 3)),
            (CqlType::Uuid, Value::Uuid([7; 16])),
            (CqlType::Timeuuid, Value::Timeuuid([0, 0, 0, 0, 0, 0, 0x11, 0, 0, 0, 0, 0, 0, 0, 0, 0])),
            (CqlType::Inet, Value::Inet("10.0.0.1".parse().expect("valid ip"))),
            (CqlType::Inet, Value::Inet("::1".parse().expect("valid ip"))),
            (CqlType::Date, Value::Date(1 << 31)),
            (CqlType::Time, Value::Time(MAX_TIME_NANOS)),
            (CqlType::Timestamp, Value::Timestamp(-1)),
            (CqlType::Duration, Value::Duration { months: 1, days: 2, nanos: 3 }),
            (CqlType::Duration, Value::Duration { months: i32::MIN, days: -1, nanos: i64::MIN }),
            (CqlType::Duration, Value::Duration { months: i32::MAX, days: 0, nanos: i64::MAX }),
            (ty("list<int>"), Value::List(vec![Value::Int(1), Value::Int(2)])),
            (ty("set<text>"), Value::Set(vec![])),
            (ty("vector<float, 2>"), Value::Vector(vec![Value::Float(1.5), Value::Float(-0.0)])),
            (ty("vector<text, 2>"), Value::Vector(vec![Value::Text("".into()), Value::Text("ab".into())])),
            (
                ty("vector<frozen<list<vector<int, 1>>>, 1>"),
                Value::Vector(vec![Value::List(vec![Value::Vector(vec![Value::Int(7)])])]),
            ),
            (
                ty("map<text, frozen<list<int>>>"),
                Value::Map(vec![(Value::Text("a".into()), Value::List(vec![Value::Int(3)]))]),
            ),
            (ty("tuple<int, text, blob>"), Value::Tuple(vec![Some(Value::Int(1)), None, Some(Value::Blob(vec![]))])),
            (ty("frozen<list<frozen<set<bigint>>>>"), Value::List(vec![Value::Set(vec![Value::Bigint(9)])])),
        ]
    }

    #[test]
    fn values_round_trip() {
        for (t, value) in sample_values() {
            let bytes = value.to_bytes();
            assert_eq!(Value::deserialize(&t, &bytes).as_ref(), Ok(&value), "{t}");
            assert_eq!(validate(&t, &bytes), Ok(()), "{t}");
            assert_eq!(compare(&t, &bytes, &bytes), Ordering::Equal, "{t}");
        }
    }

    #[test]
    fn serialized_forms_match_the_protocol() {
        assert_eq!(Value::Int(1).to_bytes(), [0, 0, 0, 1]);
        assert_eq!(varint(128).to_bytes(), [0x00, 0x80]);
        assert_eq!(varint(-1).to_bytes(), [0xFF]);
        assert_eq!(varint(-128).to_bytes(), [0x80]);
        assert_eq!(decimal(15, 1).to_bytes(), [0, 0, 0, 1, 15]);
        assert_eq!(Value::Date(1 << 31).to_bytes(), [0x80, 0, 0, 0]);
        assert_eq!(Value::Boolean(false).to_bytes(), [0]);
        // Zigzag: 1 → 2, 2 → 4, -3 → 5; each fits one vint byte.
        assert_eq!(Value::Duration { months: 1, days: 2, nanos: 0 }.to_bytes(), [2, 4, 0]);
        assert_eq!(Value::Duration { months: 0, days: 0, nanos: -3 }.to_bytes(), [0, 0, 5]);
        // 64 zigzags to 128, which needs a second byte: 0x80 marker | 0, 0x80.
        assert_eq!(Value::Duration { months: 64, days: 0, nanos: 0 }.to_bytes(), [0x80, 0x80, 0, 0]);
        assert_eq!(
            Value::List(vec![Value::Int(1), Value::Int(2)]).to_bytes(),
            [0, 0, 0, 2, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 2]
        );
        assert_eq!(
            Value::Tuple(vec![None, Some(Value::Tinyint(1))]).to_bytes(),
            [0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 1, 1]
        );
        // Fixed-length vector elements are packed; others get a vint length.
        assert_eq!(Value::Vector(vec![Value::Int(1), Value::Int(2)]).to_bytes(), [0, 0, 0, 1, 0, 0, 0, 2]);
        assert_eq!(Value::Vector(vec![Value::Smallint(1), Value::Smallint(2)]).to_bytes(), [2, 0, 1, 2, 0, 2]);
        assert_eq!(Value::Vector(vec![Value::Vector(vec![Value::Boolean(true)])]).to_bytes(), [1]);
    }

    #[test]
    fn vints_round_trip_at_every_width() {
        let mut samples =
            vec![0u64, 1, 127, 128, 16_383, 16_384, u64::MAX, u64::MAX >> 1, u64::MAX >> 7, u64::MAX >> 8];
        samples.extend((0..64).map(|bit| 1u64 << bit));
        samples.extend((1..64).map(|bit| (1u64 << bit) - 1));
        for value in samples {
            let mut out = Vec::new();
            write_unsigned_vint(value, &mut out);
            let bits = 64 - (value | 1).leading_zeros() as usize;
            assert_eq!(out.len(), if bits > 56 { 9 } else { bits.div_ceil(7) }, "{value}");
            let mut input = shoal_buf::Reader::new(&out);
            assert_eq!(read_unsigned_vint(&mut input), Ok(value));
            assert!(input.is_empty());
        }
        for n in [0i64, 1, -1, i64::MAX, i64::MIN, 12345, -12345] {
            assert_eq!(zigzag_decode(zigzag_encode(n)), n);
        }
    }

    #[test]
    fn non_minimal_varints_are_normalized() {
        assert_eq!(Value::deserialize(&CqlType::Varint, &[0, 0, 1]), Ok(varint(1)));
        assert_eq!(Value::deserialize(&CqlType::Varint, &[0xFF, 0xFF, 0x80]), Ok(varint(-128)));
        assert_eq!(Value::deserialize(&CqlType::Varint, &[0xFF, 0x7F]), Ok(varint(-129)));
    }

    fn error(t: &str, bytes: &[u8]) -> String {
        match Value::deserialize(&ty(t), bytes) {
            Ok(v) => panic!("{t} accepted {bytes:?} as {v:?}"),
            Err(e) => {
                assert_eq!(validate(&ty(t), bytes).err().as_ref(), Some(&e), "validate agrees for {t}");
                e.to_string()
            }
        }
    }

    #[test]
    fn invalid_values_are_rejected_with_clear_messages() {
        assert_eq!(error("int", &[0, 0, 1]), "expected 4 bytes for an int value, got 3");
        assert_eq!(error("bigint", &[]), "expected 8 bytes for a bigint value, got 0");
        assert_eq!(error("uuid", &[1; 15]), "expected 16 bytes for a uuid value, got 15");
        assert_eq!(
            error("text", &[0x41, 0xC3]),
            "Validation failed - non-UTF8 character in a UTF8 string, at byte offset 1"
        );
        assert_eq!(error("ascii", b"ab\xC3\xA9"), "non-ASCII byte 0xc3 at offset 2 in ascii value");
        assert_eq!(
            error("time", &86_400_000_000_000i64.to_be_bytes()),
            "value for time out of range (must be 0..86399999999999 nanoseconds), got 86400000000000"
        );
        assert!(error("time", &(-1i64).to_be_bytes()).contains("out of range"));
        assert_eq!(
            error("timeuuid", &[0x40; 16]),
            "timeuuid value must be a version 1 (time-based) UUID, got version 4"
        );
        assert_eq!(error("inet", &[1, 2, 3, 4, 5]), "expected 4 or 16 bytes for an inet value, got 5");
        assert_eq!(error("varint", &[]), "empty varint value: at least one byte is required");
        assert!(error("decimal", &[0, 0, 0, 1]).contains("got 4 bytes"));
        assert!(error("duration", &[2, 4]).contains("missing the nanoseconds field"));
        assert!(error("duration", &[2, 4, 6, 0]).contains("1 unexpected bytes after the end of a duration"));
        assert!(error("duration", &[2, 3, 0]).contains("same sign, got (1, -2, 0)"));
        // months = 2^31 (zigzag 2^32, a 5-byte vint) does not fit an i32.
        let mut big = Vec::new();
        write_unsigned_vint(zigzag_encode(1 << 31), &mut big);
        big.extend_from_slice(&[0, 0]);
        assert!(error("duration", &big).contains("months must fit in a 32-bit integer"));
        assert_eq!(
            error("list<int>", &[0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 1]),
            "in element 0 of list<int>: expected 4 bytes for an int value, got 3"
        );
        assert_eq!(error("list<int>", &[0, 0, 0, 1, 0, 0, 0, 4]), "truncated element: need 4 bytes, 0 remain");
        assert_eq!(error("list<int>", &[0, 0, 0, 0, 9]), "1 unexpected bytes after the end of a list<int> value");
        assert_eq!(error("set<int>", &[0xFF, 0xFF, 0xFF, 0xFF]), "negative collection size count -1");
        assert!(error("list<int>", &[0, 0, 0, 1, 0xFF, 0xFF, 0xFF, 0xFF]).contains("collections cannot contain nulls"));
        assert!(error("map<int, text>", &[0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 1, 0xFF])
            .contains("value 0 of map<int, text>"));
        assert!(error("tuple<int>", &[0, 0, 0, 4, 0, 0, 0, 1, 0]).contains("after the end of a tuple<int>"));
        assert_eq!(error("vector<int, 2>", &[0; 4]), "expected 8 bytes for a vector<int, 2> value, got 4");
        assert_eq!(
            error("vector<text, 2>", &[1, b'a']),
            "in element 1 of vector<text, 2>: truncated vector element length: need 1 bytes, 0 remain"
        );
        assert_eq!(
            error("vector<text, 1>", &[1, 0xC3]),
            "in element 0 of vector<text, 1>: Validation failed - non-UTF8 character in a UTF8 string, at byte offset 0"
        );
        assert!(error("vector<text, 1>", &[0, 0]).contains("1 unexpected bytes after the end of a vector<text, 1>"));
    }

    #[test]
    fn huge_counts_do_not_preallocate() {
        assert!(Value::deserialize(&ty("list<int>"), &[0x7F, 0xFF, 0xFF, 0xFF]).is_err());
        assert!(Value::deserialize(&ty("map<int, int>"), &[0x7F, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0]).is_err());
    }

    #[test]
    fn tuples_may_omit_trailing_fields() {
        let t = ty("tuple<int, text>");
        let expected = Value::Tuple(vec![Some(Value::Int(5)), None]);
        assert_eq!(Value::deserialize(&t, &[0, 0, 0, 4, 0, 0, 0, 5]), Ok(expected));
        assert_eq!(Value::deserialize(&t, &[]), Ok(Value::Tuple(vec![None, None])));
        let full = Value::Tuple(vec![Some(Value::Int(5)), None]).to_bytes();
        assert_eq!(compare(&t, &full, &[0, 0, 0, 4, 0, 0, 0, 5]), Ordering::Equal);
    }

    /// Deterministic pseudo-random bytes (splitmix64) for fuzzing.
    fn random_bytes(state: &mut u64, max_len: usize) -> Vec<u8> {
        let mut next = || {
            *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = *state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        let len = (next() % (max_len as u64 + 1)) as usize;
        (0..len)
            .map(|_| match next() % 4 {
                0 => 0,
                1 => 0xFF,
                _ => next() as u8,
            })
            .collect()
    }

    #[test]
    fn garbage_never_panics_and_validate_agrees_with_deserialize() {
        let types = [
            "int",
            "text",
            "ascii",
            "varint",
            "decimal",
            "duration",
            "time",
            "timeuuid",
            "uuid",
            "inet",
            "boolean",
            "list<int>",
            "set<text>",
            "map<int, blob>",
            "tuple<int, varint>",
            "frozen<list<frozen<map<int, duration>>>>",
            "vector<int, 2>",
            "vector<smallint, 3>",
            "vector<frozen<set<text>>, 2>",
        ];
        let mut state = 42;
        for t in types.map(ty) {
            for _ in 0..2000 {
                let (a, b) = (random_bytes(&mut state, 24), random_bytes(&mut state, 24));
                let decoded = Value::deserialize(&t, &a);
                assert_eq!(decoded.is_ok(), validate(&t, &a).is_ok(), "{t} {a:?}");
                if let Ok(value) = decoded {
                    let _ = value.to_string();
                    assert_eq!(Value::deserialize(&t, &value.to_bytes()), Ok(value));
                }
                let _ = compare(&t, &a, &b);
            }
        }
    }

    #[test]
    fn numbers_compare_numerically() {
        let v = |n: i128| varint(n).to_bytes();
        assert_eq!(compare(&CqlType::Varint, &v(-129), &v(-128)), Ordering::Less);
        assert_eq!(compare(&CqlType::Varint, &v(127), &v(128)), Ordering::Less);
        assert_eq!(compare(&CqlType::Varint, &v(-1), &v(0)), Ordering::Less);
        assert_eq!(compare(&CqlType::Varint, &[0, 0, 5], &v(5)), Ordering::Equal);
        let d = |u: i128, s: i32| decimal(u, s).to_bytes();
        assert_eq!(compare(&CqlType::Decimal, &d(10, 1), &d(1, 0)), Ordering::Equal);
        assert_eq!(compare(&CqlType::Decimal, &d(1, -2), &d(100, 0)), Ordering::Equal);
        assert_eq!(compare(&CqlType::Decimal, &d(0, 5), &d(0, -5)), Ordering::Equal);
        assert_eq!(compare(&CqlType::Decimal, &d(-15, 1), &d(-2, 0)), Ordering::Greater);
        assert_eq!(compare(&CqlType::Decimal, &d(999, 3), &d(1, 0)), Ordering::Less);
        assert_eq!(compare(&CqlType::Decimal, &d(-1, 0), &d(0, 0)), Ordering::Less);
        let f = |x: f32| x.to_be_bytes();
        assert_eq!(compare(&CqlType::Float, &f(-0.0), &f(0.0)), Ordering::Less);
        assert_eq!(compare(&CqlType::Float, &f(f32::NAN), &f(f32::INFINITY)), Ordering::Greater);
        assert_eq!(compare(&CqlType::Float, &f(-f32::NAN), &f(f32::NAN)), Ordering::Equal);
        assert_eq!(compare(&CqlType::Float, &f(-1.0), &f(-0.5)), Ordering::Less);
        assert_eq!(compare(&CqlType::Date, &[0x80, 0, 0, 0], &[0x7F, 0, 0, 0]), Ordering::Greater);
        assert_eq!(compare(&CqlType::Int, &(-1i32).to_be_bytes(), &1i32.to_be_bytes()), Ordering::Less);
        assert_eq!(compare(&CqlType::Boolean, &[0], &[2]), Ordering::Less);
        assert_eq!(compare(&CqlType::Boolean, &[1], &[2]), Ordering::Equal);
    }

    /// Exact comparison of small decimals through i128 arithmetic.
    fn decimal_oracle(a: (i64, i32), b: (i64, i32)) -> Ordering {
        let common = a.1.max(b.1);
        let scale = |(u, s): (i64, i32)| i128::from(u) * 10i128.pow((common - s) as u32);
        scale(a).cmp(&scale(b))
    }

    #[test]
    fn decimal_and_varint_order_match_integer_arithmetic() {
        let mut state = 7u64;
        let mut next = || {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            state >> 33
        };
        for _ in 0..5000 {
            let mut pick = || {
                let magnitude = [0, 1, 9, 10, 99, 100, 12345, 1 << 20, i64::from(u32::MAX)][(next() % 9) as usize];
                let sign = if next() % 2 == 0 { 1 } else { -1 };
                (sign * (magnitude + (next() % 3) as i64), (next() % 9) as i32 - 4)
            };
            let (a, b) = (pick(), pick());
            let (da, db) = (decimal(a.0.into(), a.1).to_bytes(), decimal(b.0.into(), b.1).to_bytes());
            assert_eq!(compare(&CqlType::Decimal, &da, &db), decimal_oracle(a, b), "{a:?} {b:?}");
            let (va, vb) = (varint(a.0.into()).to_bytes(), varint(b.0.into()).to_bytes());
            assert_eq!(compare(&CqlType::Varint, &va, &vb), a.0.cmp(&b.0));
        }
    }

    #[test]
    fn uuids_compare_like_cassandra() {
        // UUIDType: version first, so a v1 UUID sorts before any v4.
        let mut v1 = [0xFFu8; 16];
        v1[6] = 0x1F;
        let mut v4 = [0u8; 16];
        v4[6] = 0x40;
        assert_eq!(compare(&CqlType::Uuid, &v1, &v4), Ordering::Less);
        // Version 1 orders by timestamp: time_hi beats time_low.
        let timeuuid = |time_low: u8, time_hi: u8, clock: u8| {
            let mut u = [0u8; 16];
            u[3] = time_low;
            u[7] = time_hi;
            u[6] = 0x10;
            u[8] = clock;
            u
        };
        let (early, late) = (timeuuid(0xFF, 0, 0), timeuuid(0, 1, 0));
        for t in [CqlType::Uuid, CqlType::Timeuuid] {
            assert_eq!(compare(&t, &early, &late), Ordering::Less);
        }
        // Same timestamp: TimeUUIDType compares the rest as signed bytes,
        // UUIDType as unsigned.
        let (low, high) = (timeuuid(0, 0, 0x01), timeuuid(0, 0, 0x80));
        assert_eq!(compare(&CqlType::Timeuuid, &low, &high), Ordering::Greater);
        assert_eq!(compare(&CqlType::Uuid, &low, &high), Ordering::Less);
    }

    #[test]
    fn collections_and_tuples_compare_element_wise() {
        let list = |items: &[i32]| Value::List(items.iter().map(|i| Value::Int(*i)).collect()).to_bytes();
        let t = ty("frozen<list<int>>");
        assert_eq!(compare(&t, &list(&[1, 2]), &list(&[1, 2, 0])), Ordering::Less);
        assert_eq!(compare(&t, &list(&[1, 3]), &list(&[1, 2, 0])), Ordering::Greater);
        assert_eq!(compare(&t, &list(&[-1]), &list(&[])), Ordering::Greater);
        let tuple =
            |a: Option<i32>, b: &str| Value::Tuple(vec![a.map(Value::Int), Some(Value::Text(b.into()))]).to_bytes();
        let t = ty("tuple<int, text>");
        assert_eq!(compare(&t, &tuple(None, "z"), &tuple(Some(i32::MIN), "a")), Ordering::Less);
        assert_eq!(compare(&t, &tuple(Some(1), "b"), &tuple(Some(1), "a")), Ordering::Greater);
        let map = |k: i32, v: &str| Value::Map(vec![(Value::Int(k), Value::Text(v.into()))]).to_bytes();
        let t = ty("frozen<map<int, text>>");
        assert_eq!(compare(&t, &map(1, "b"), &map(2, "a")), Ordering::Less);
        assert_eq!(compare(&t, &map(1, "b"), &map(1, "a")), Ordering::Greater);
    }

    #[test]
    fn display_matches_cqlsh() {
        let cases: Vec<(Value, &str)> = vec![
            (Value::Int(42), "42"),
            (Value::Text("abc".into()), "abc"),
            (Value::Blob(vec![0xca, 0xfe]), "0xcafe"),
            (Value::Timestamp(1_704_164_645_000), "2024-01-02 03:04:05.000000+0000"),
            (Value::Timestamp(-1), "1969-12-31 23:59:59.999000+0000"),
            (Value::Date((1 << 31) + 19_724), "2024-01-02"),
            (Value::Time(3_723_000_000_123), "01:02:03.000000123"),
            (Value::List(vec![Value::Int(1), Value::Int(2)]), "[1, 2]"),
            (Value::Map(vec![(Value::Text("a'b".into()), Value::Int(1))]), "{'a''b': 1}"),
            (Value::Set(vec![Value::Inet("1.2.3.4".parse().expect("valid ip"))]), "{'1.2.3.4'}"),
            (Value::Tuple(vec![Some(Value::Boolean(true)), None]), "(true, null)"),
            (Value::Float(f32::NEG_INFINITY), "-Infinity"),
            (Value::Double(f64::NAN), "NaN"),
            (Value::Double(1.5), "1.5"),
            (varint(-1234567890123456789012345678901234567), "-1234567890123456789012345678901234567"),
            (decimal(150, 2), "1.50"),
            (decimal(-5, 3), "-0.005"),
            (decimal(1, 7), "1E-7"),
            (decimal(123, -2), "1.23E+4"),
            (decimal(0, 0), "0"),
            (Value::Uuid([0x12; 16]), "12121212-1212-1212-1212-121212121212"),
            (Value::Duration { months: 14, days: 3, nanos: 3_600_000_000_001 }, "1y2mo3d1h1ns"),
            (Value::Duration { months: 0, days: -1, nanos: 0 }, "-1d"),
        ];
        for (value, text) in cases {
            assert_eq!(value.to_string(), text, "{value:?}");
        }
    }

    #[test]
    fn cql_type_is_best_effort() {
        assert_eq!(Value::List(vec![]).cql_type(), ty("list<blob>"));
        assert_eq!(Value::Set(vec![Value::List(vec![Value::Int(1)])]).cql_type(), ty("set<frozen<list<int>>>"));
        assert_eq!(
            Value::Tuple(vec![Some(Value::Int(1)), None]).cql_type(),
            CqlType::Tuple(vec![CqlType::Int, CqlType::Blob])
        );
    }

    #[test]
    fn sums_follow_cassandra() {
        assert_eq!(add(&CqlType::Int, &Value::Int(i32::MAX), &Value::Int(1)), Ok(Value::Int(i32::MIN)));
        assert_eq!(add(&CqlType::Tinyint, &Value::Tinyint(100), &Value::Tinyint(100)), Ok(Value::Tinyint(-56)));
        assert_eq!(add(&CqlType::Double, &Value::Double(0.5), &Value::Double(0.25)), Ok(Value::Double(0.75)));
        assert_eq!(
            add(&CqlType::Varint, &varint(i128::MAX), &varint(1)).map(|v| v.to_string()),
            Ok("170141183460469231731687303715884105728".into())
        );
        assert_eq!(add(&CqlType::Varint, &varint(-200), &varint(72)), Ok(varint(-128)));
        assert_eq!(add(&CqlType::Decimal, &decimal(15, 1), &decimal(-1, 3)), Ok(decimal(1499, 3)));
        assert_eq!(add(&CqlType::Decimal, &decimal(1, 0), &decimal(1, -2)), Ok(decimal(101, 0)));
        assert!(matches!(add(&CqlType::Int, &Value::Int(1), &Value::Bigint(1)), Err(ValueError::Mismatch { .. })));
        assert!(matches!(
            add(&CqlType::Text, &Value::Text("a".into()), &Value::Text("b".into())),
            Err(ValueError::NotNumeric(_))
        ));
        assert!(matches!(
            add(&CqlType::Decimal, &decimal(1, 0), &decimal(1, 20_000)),
            Err(ValueError::ScalesTooFarApart(..))
        ));
    }

    #[test]
    fn averages_follow_cassandra() {
        assert_eq!(divide_for_avg(&CqlType::Int, &Value::Int(7), 2), Ok(Value::Int(3)));
        assert_eq!(divide_for_avg(&CqlType::Int, &Value::Int(-7), 2), Ok(Value::Int(-3)));
        // Summing as varint avoids the overflow sum() keeps.
        let wide = add(
            &CqlType::Varint,
            &to_varint(&Value::Int(i32::MAX)).expect("int widens"),
            &varint(i128::from(i32::MAX)),
        )
        .expect("varints add");
        assert_eq!(divide_for_avg(&CqlType::Int, &wide, 2), Ok(Value::Int(i32::MAX)));
        assert_eq!(divide_for_avg(&CqlType::Bigint, &Value::Bigint(10), 0), Ok(Value::Bigint(0)));
        assert_eq!(divide_for_avg(&CqlType::Float, &Value::Float(1.0), 4), Ok(Value::Float(0.25)));
        assert_eq!(divide_for_avg(&CqlType::Varint, &varint(-10), 4), Ok(varint(-2)));
        // Decimal keeps the scale and rounds half to even: 2.5 → 2, 3.5 → 4, -2.5 → -2.
        assert_eq!(divide_for_avg(&CqlType::Decimal, &decimal(5, 0), 2), Ok(decimal(2, 0)));
        assert_eq!(divide_for_avg(&CqlType::Decimal, &decimal(7, 0), 2), Ok(decimal(4, 0)));
        assert_eq!(divide_for_avg(&CqlType::Decimal, &decimal(-5, 0), 2), Ok(decimal(-2, 0)));
        assert_eq!(divide_for_avg(&CqlType::Decimal, &decimal(100, 2), 3), Ok(decimal(33, 2)));
        assert!(divide_for_avg(&CqlType::Int, &Value::Text("x".into()), 1).is_err());
        assert!(divide_for_avg(&CqlType::Float, &Value::Int(1), 1).is_err());
    }

    #[test]
    fn bignum_digits_round_trip() {
        for text in
            ["0", "1", "999999999", "1000000000", "18446744073709551616", "123456789012345678901234567890123456789"]
        {
            let limbs = bignum::from_decimal_digits(text.as_bytes());
            let twos = bignum::from_magnitude(false, &limbs);
            assert_eq!(bignum::to_decimal_string(&twos), text);
            let negative = bignum::from_magnitude(true, &limbs);
            let expected = if text == "0" { "0".to_string() } else { format!("-{text}") };
            assert_eq!(bignum::to_decimal_string(&negative), expected);
        }
        assert_eq!(bignum::to_i128(&[0x80]), Some(-128));
        assert_eq!(bignum::to_i128(&[1; 17]), None);
    }
}
