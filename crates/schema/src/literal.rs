//! CQL literal text → [`Value`]: which literal kinds each type accepts and
//! how the text is read, following Cassandra's `Constants` rules, plus the
//! inverse formatting of dates, times, timestamps and durations.
//!
//! Invariants:
//! - A literal is accepted for a type only when Cassandra accepts that
//!   literal kind for that type (`Constants.Literal.testAssignment`): e.g.
//!   an int never comes from a string, a blob only from a hex literal.
//! - Numbers are exact: integers are range-checked, never wrapped; varint
//!   and decimal keep every digit.
//! - Nothing panics on any text; every rejection is a [`LiteralError`].

use std::fmt;
use std::net::IpAddr;

use thiserror::Error;

use crate::types::CqlType;
use crate::value::{bignum, Value, MAX_TIME_NANOS};

/// The kind of constant the lexer produced. The text handed with it is the
/// raw token text, except that string literals are already unquoted.
/// (`null` is not a constant here: callers handle it before typing.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LiteralKind {
    String,
    Integer,
    /// Also `NaN` and `Infinity`, with an optional leading `-`.
    Float,
    Boolean,
    Uuid,
    Hex,
    Duration,
}

impl LiteralKind {
    /// The upper-case name Cassandra's messages use ("Invalid STRING
    /// constant (foo) for \"k\" of type int").
    pub fn cassandra_name(self) -> &'static str {
        match self {
            LiteralKind::String => "STRING",
            LiteralKind::Integer => "INTEGER",
            LiteralKind::Float => "FLOAT",
            LiteralKind::Boolean => "BOOLEAN",
            LiteralKind::Uuid => "UUID",
            LiteralKind::Hex => "HEX",
            LiteralKind::Duration => "DURATION",
        }
    }
}

impl fmt::Display for LiteralKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.cassandra_name())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LiteralError {
    /// The literal kind is never accepted for the type. Callers that know
    /// the column name build Cassandra's own message from the fields.
    #[error("invalid {kind} constant ({text}) for type {ty}")]
    NotAssignable { kind: LiteralKind, text: String, ty: CqlType },
    #[error("value {text} out of range for {ty}")]
    OutOfRange { text: String, ty: &'static str },
    #[error("invalid {ty} number '{text}'")]
    InvalidNumber { text: String, ty: &'static str },
    /// A decimal whose scale does not fit 32 bits (Cassandra's text).
    #[error("unable to make BigDecimal from '{0}'")]
    DecimalScaleOutOfRange(String),
    #[error("Invalid ASCII character in string literal '{0}'")]
    NonAscii(String),
    #[error("invalid timestamp '{0}': expected yyyy-mm-dd[ hh:mm[:ss[.fff]]][zone] or milliseconds")]
    InvalidTimestamp(String),
    /// More than milliseconds in a timestamp's fraction: ScyllaDB refuses
    /// it (and words it so) where Cassandra truncates.
    #[error("unable to parse date '{text}': Milliseconds length exceeds expected ({digits})")]
    TimestampPrecision { text: String, digits: usize },
    #[error("invalid date '{0}': expected yyyy-mm-dd or a day number from 0 to 4294967295 (2147483648 = 1970-01-01)")]
    InvalidDate(String),
    /// A day number that is no unsigned 32-bit integer (Cassandra's text).
    #[error("Unable to make unsigned int (for date) from: '{0}'")]
    DateOutOfRange(String),
    #[error("invalid time '{0}': expected hh:mm:ss[.fffffffff] or nanoseconds since midnight (0 to 86399999999999)")]
    InvalidTime(String),
    #[error("invalid inet address '{0}': expected an IPv4 or IPv6 address")]
    InvalidInet(String),
    #[error("invalid UUID '{0}'")]
    InvalidUuid(String),
    #[error("invalid timeuuid '{0}': not a version 1 (time-based) UUID")]
    NotTimeuuid(String),
    #[error("invalid hex blob '{0}': expected 0x followed by hexadecimal digits")]
    InvalidHex(String),
    #[error("invalid boolean '{0}': expected true or false")]
    InvalidBoolean(String),
    #[error("invalid duration '{text}': {why}")]
    InvalidDuration { text: String, why: String },
}

/// Parses literal `text` of `kind` as a value of `ty`.
pub fn parse_literal(ty: &CqlType, kind: LiteralKind, text: &str) -> Result<Value, LiteralError> {
    use CqlType as T;
    use LiteralKind as K;
    match (ty.unfrozen(), kind) {
        (T::Ascii, K::String) => parse_ascii(text),
        (T::Text, K::String) => Ok(Value::Text(text.to_owned())),
        (T::Blob, K::Hex) => parse_hex(text).map(Value::Blob),
        (T::Boolean, K::Boolean) => parse_boolean(text).map(Value::Boolean),
        (T::Tinyint, K::Integer) => parse_integer(text, "tinyint").map(Value::Tinyint),
        (T::Smallint, K::Integer) => parse_integer(text, "smallint").map(Value::Smallint),
        (T::Int, K::Integer) => parse_integer(text, "int").map(Value::Int),
        (T::Bigint, K::Integer) => parse_integer(text, "bigint").map(Value::Bigint),
        (T::Counter, K::Integer) => parse_integer(text, "counter").map(Value::Counter),
        (T::Float, K::Integer | K::Float) => parse_float(text, "float").map(Value::Float),
        (T::Double, K::Integer | K::Float) => parse_float(text, "double").map(Value::Double),
        (T::Varint, K::Integer) => parse_varint(text).map(Value::Varint),
        (T::Decimal, K::Integer | K::Float) => parse_decimal(text),
        (T::Uuid, K::Uuid) => parse_uuid(text).map(Value::Uuid),
        (T::Timeuuid, K::Uuid) => parse_timeuuid(text).map(Value::Timeuuid),
        (T::Inet, K::String) => {
            text.parse::<IpAddr>().map(Value::Inet).map_err(|_| LiteralError::InvalidInet(text.to_owned()))
        }
        (T::Timestamp, K::Integer | K::String) => parse_timestamp(text).map(Value::Timestamp),
        (T::Date, K::Integer | K::String) => parse_date(text).map(Value::Date),
        (T::Time, K::Integer | K::String) => parse_time(text).map(Value::Time),
        (T::Duration, K::Duration) => parse_duration(text),
        _ => Err(LiteralError::NotAssignable { kind, text: text.to_owned(), ty: ty.clone() }),
    }
}

// ---------------------------------------------------------------------------
// Simple types
// ---------------------------------------------------------------------------

fn parse_ascii(text: &str) -> Result<Value, LiteralError> {
    if text.is_ascii() {
        Ok(Value::Ascii(text.to_owned()))
    } else {
        Err(LiteralError::NonAscii(text.to_owned()))
    }
}

/// `0x` then hex digits; an odd count gets a leading zero, as Cassandra's
/// `Hex.hexToBytes` does. The prefix is optional so callers may strip it.
pub fn parse_hex(text: &str) -> Result<Vec<u8>, LiteralError> {
    let digits = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")).unwrap_or(text);
    let nibbles: Option<Vec<u8>> = digits.chars().map(|c| c.to_digit(16).map(|d| d as u8)).collect();
    let mut nibbles = nibbles.ok_or_else(|| LiteralError::InvalidHex(text.to_owned()))?;
    if nibbles.len() % 2 == 1 {
        nibbles.insert(0, 0);
    }
    Ok(nibbles.chunks(2).map(|pair| pair.iter().fold(0u8, |acc, n| (acc << 4) | n)).collect())
}

fn parse_boolean(text: &str) -> Result<bool, LiteralError> {
    if text.eq_ignore_ascii_case("true") {
        Ok(true)
    } else if text.eq_ignore_ascii_case("false") {
        Ok(false)
    } else {
        Err(LiteralError::InvalidBoolean(text.to_owned()))
    }
}

/// `-?[0-9]+`, the only integer syntax CQL has.
fn is_integer(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// An integer of type `T`, range-checked (never wrapped).
fn parse_integer<T: TryFrom<i128>>(text: &str, ty: &'static str) -> Result<T, LiteralError> {
    if !is_integer(text) {
        return Err(LiteralError::InvalidNumber { text: text.to_owned(), ty });
    }
    // Valid syntax, so a parse failure can only be magnitude.
    let out_of_range = || LiteralError::OutOfRange { text: text.to_owned(), ty };
    let wide: i128 = text.parse().map_err(|_| out_of_range())?;
    T::try_from(wide).map_err(|_| out_of_range())
}

/// Floats from integer or float text, `NaN` and `[-]Infinity`. Values too
/// large for the type become infinite, as Java's `parseFloat` makes them.
fn parse_float<T: std::str::FromStr>(text: &str, ty: &'static str) -> Result<T, LiteralError> {
    let body = text.strip_prefix('-').unwrap_or(text);
    let special = body.eq_ignore_ascii_case("nan") || body.eq_ignore_ascii_case("infinity");
    let numeric = body.bytes().any(|b| b.is_ascii_digit())
        && body.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'));
    let invalid = || LiteralError::InvalidNumber { text: text.to_owned(), ty };
    if !(special || numeric) {
        return Err(invalid());
    }
    // Rust's float parser reads `NaN`/`Infinity` case-insensitively and
    // rounds decimal text correctly, like Java's.
    text.parse().map_err(|_| invalid())
}

fn parse_varint(text: &str) -> Result<Vec<u8>, LiteralError> {
    if !is_integer(text) {
        return Err(LiteralError::InvalidNumber { text: text.to_owned(), ty: "varint" });
    }
    let (negative, digits) = match text.strip_prefix('-') {
        Some(digits) => (true, digits),
        None => (false, text),
    };
    Ok(bignum::from_magnitude(negative, &bignum::from_decimal_digits(digits.as_bytes())))
}

/// `[-]digits[.digits][e[+-]digits]`, exactly as Java's `BigDecimal(String)`
/// reads it: `1.50` is unscaled 150 at scale 2, `1e3` unscaled 1 at scale -3.
fn parse_decimal(text: &str) -> Result<Value, LiteralError> {
    let invalid = || LiteralError::InvalidNumber { text: text.to_owned(), ty: "decimal" };
    let (negative, body) = match text.strip_prefix('-') {
        Some(body) => (true, body),
        None => (false, text),
    };
    let out_of_range = || LiteralError::DecimalScaleOutOfRange(text.to_owned());
    let (mantissa, exponent) = match body.split_once(['e', 'E']) {
        Some((mantissa, exp)) => {
            let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(invalid());
            }
            (mantissa, exp.parse::<i64>().map_err(|_| out_of_range())?)
        }
        None => (body, 0),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int_part.len() + frac_part.len() == 0 || !all_digits(int_part) || !all_digits(frac_part) {
        return Err(invalid());
    }
    let scale = i32::try_from(frac_part.len() as i64 - exponent).map_err(|_| out_of_range())?;
    let digits = [int_part.as_bytes(), frac_part.as_bytes()].concat();
    let unscaled = bignum::from_magnitude(negative, &bignum::from_decimal_digits(&digits));
    Ok(Value::Decimal { scale, unscaled })
}

/// The hyphenated 8-4-4-4-12 form, the only one the CQL lexer produces.
fn parse_uuid(text: &str) -> Result<[u8; 16], LiteralError> {
    match uuid::Uuid::try_parse(text) {
        Ok(uuid) if text.len() == 36 => Ok(*uuid.as_bytes()),
        _ => Err(LiteralError::InvalidUuid(text.to_owned())),
    }
}

fn parse_timeuuid(text: &str) -> Result<[u8; 16], LiteralError> {
    let bytes = parse_uuid(text)?;
    if bytes[6] >> 4 != 1 {
        return Err(LiteralError::NotTimeuuid(text.to_owned()));
    }
    Ok(bytes)
}

// ---------------------------------------------------------------------------
// Dates and times
// ---------------------------------------------------------------------------

const MILLIS_PER_DAY: i64 = 86_400_000;
const NANOS_PER_MILLI: i64 = 1_000_000;
/// The protocol's `date` counts days with 1970-01-01 at 2^31.
const DATE_EPOCH: i64 = 1 << 31;

/// A byte cursor for the fixed-shape date/time syntaxes.
struct Cursor<'a> {
    text: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn new(text: &'a str) -> Self {
        Cursor { text: text.as_bytes(), pos: 0 }
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    fn at_end(&self) -> bool {
        self.pos >= self.text.len()
    }

    fn eat(&mut self, c: u8) -> bool {
        let matched = self.peek().is_some_and(|p| p.eq_ignore_ascii_case(&c));
        self.pos += usize::from(matched);
        matched
    }

    fn expect(&mut self, c: u8) -> Option<()> {
        self.eat(c).then_some(())
    }

    /// Between `min` and `max` (≤ 18) decimal digits: (value, digit count).
    fn digits(&mut self, min: usize, max: usize) -> Option<(i64, usize)> {
        let rest = self.text.get(self.pos..)?;
        let count = rest.iter().take(max).take_while(|b| b.is_ascii_digit()).count();
        if count < min {
            return None;
        }
        let value = rest[..count].iter().fold(0i64, |acc, b| acc * 10 + i64::from(b - b'0'));
        self.pos += count;
        Some((value, count))
    }

    /// A number of 1 or 2 digits no greater than `max`.
    fn field(&mut self, max: i64) -> Option<i64> {
        self.digits(1, 2).map(|(v, _)| v).filter(|v| *v <= max)
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
pub(crate) fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of [`days_from_civil`]: (year, month, day).
pub(crate) fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

pub(crate) fn days_in_month(year: i64, month: i64) -> i64 {
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// `yyyy-mm-dd` → days since the Unix epoch.
fn read_date(c: &mut Cursor) -> Option<i64> {
    // Years before 1 AD (`-0001-12-31`) reach back to the date type's
    // minimum, -5877641-06-23, as in Cassandra.
    let sign = if c.eat(b'-') {
        -1
    } else {
        c.eat(b'+');
        1
    };
    let (year, _) = c.digits(1, 9)?;
    let year = sign * year;
    c.expect(b'-')?;
    let month = c.field(12).filter(|m| *m >= 1)?;
    c.expect(b'-')?;
    let day = c.field(31).filter(|d| *d >= 1 && *d <= days_in_month(year, month))?;
    Some(days_from_civil(year, month, day))
}

/// `hh:mm[:ss[.f…]]` (seconds mandatory when `need_seconds`) → nanoseconds
/// since midnight; up to nine fraction digits, read as a fraction.
/// `hh:mm[:ss[.f…]]` → (nanoseconds of the day, digits of the fraction).
fn read_clock(c: &mut Cursor, need_seconds: bool) -> Option<(i64, usize)> {
    let hours = c.field(23)?;
    c.expect(b':')?;
    let minutes = c.field(59)?;
    let mut nanos = (hours * 60 + minutes) * 60 * 1_000_000_000;
    if !c.eat(b':') {
        return (!need_seconds).then_some((nanos, 0));
    }
    nanos += c.field(59)? * 1_000_000_000;
    let mut digits = 0;
    if c.eat(b'.') {
        let (fraction, count) = c.digits(1, 9)?;
        nanos += fraction * 10i64.pow(9 - count as u32);
        digits = count;
    }
    Some((nanos, digits))
}

/// `Z`, `UTC`, `GMT`, `±hh`, `±hhmm` or `±hh:mm` → minutes east of UTC.
fn read_zone(c: &mut Cursor) -> Option<i64> {
    if c.eat(b'Z') {
        return Some(0);
    }
    let rest = c.text.get(c.pos..)?;
    if rest.eq_ignore_ascii_case(b"UTC") || rest.eq_ignore_ascii_case(b"GMT") {
        c.pos += 3;
        return Some(0);
    }
    let sign = if c.eat(b'+') { 1 } else { c.expect(b'-').map(|_| -1)? };
    let (hours, _) = c.digits(2, 2).filter(|(h, _)| *h <= 23)?;
    let colon = c.eat(b':');
    let minutes = match c.digits(2, 2) {
        Some((m, _)) if m <= 59 => m,
        Some(_) => return None,
        None if colon => return None,
        None => 0,
    };
    Some(sign * (hours * 60 + minutes))
}

/// A timestamp literal: milliseconds as digits, or `yyyy-mm-dd` with an
/// optional `T`/space and `hh:mm[:ss[.fff]]`, then an optional zone (UTC
/// when absent). A fraction beyond milliseconds is refused, as by
/// ScyllaDB (Cassandra truncates it).
pub fn parse_timestamp(text: &str) -> Result<i64, LiteralError> {
    let invalid = || LiteralError::InvalidTimestamp(text.to_owned());
    if is_integer(text) {
        return text.parse().map_err(|_| invalid());
    }
    let (millis, fraction_digits) = timestamp_millis(text.trim()).ok_or_else(invalid)?;
    if fraction_digits > 3 {
        return Err(LiteralError::TimestampPrecision { text: text.to_owned(), digits: fraction_digits });
    }
    Ok(millis)
}

/// The milliseconds, and how many fraction digits the text gave.
fn timestamp_millis(text: &str) -> Option<(i64, usize)> {
    let mut c = Cursor::new(text);
    let days = read_date(&mut c)?;
    let date_end = c.pos;
    let (mut nanos_of_day, mut fraction_digits) = (0, 0);
    if (c.eat(b'T') || c.eat(b' ')) && c.peek().is_some_and(|b| b.is_ascii_digit()) {
        (nanos_of_day, fraction_digits) = read_clock(&mut c, false)?;
    } else {
        c.pos = date_end;
    }
    // ScyllaDB allows spaces before the zone (Cassandra one at most).
    while c.eat(b' ') {}
    let offset_minutes = if c.at_end() { 0 } else { read_zone(&mut c)? };
    if !c.at_end() {
        return None;
    }
    let millis = days
        .checked_mul(MILLIS_PER_DAY)?
        .checked_add(nanos_of_day / NANOS_PER_MILLI)?
        .checked_sub(offset_minutes * 60_000)?;
    Some((millis, fraction_digits))
}

/// A date literal: `yyyy-mm-dd`, or the raw unsigned day number with
/// 2^31 = 1970-01-01 (Cassandra reads all-digit text that way). The year
/// may be signed and longer than four digits.
pub fn parse_date(text: &str) -> Result<u32, LiteralError> {
    let invalid = || LiteralError::InvalidDate(text.to_owned());
    if is_integer(text) {
        return text.parse().map_err(|_| LiteralError::DateOutOfRange(text.to_owned()));
    }
    let mut c = Cursor::new(text.trim());
    let days = read_date(&mut c).filter(|_| c.at_end()).ok_or_else(invalid)?;
    u32::try_from(days + DATE_EPOCH).map_err(|_| invalid())
}

/// A time literal: `hh:mm:ss[.fffffffff]`, or nanoseconds since midnight.
pub fn parse_time(text: &str) -> Result<i64, LiteralError> {
    let invalid = || LiteralError::InvalidTime(text.to_owned());
    let nanos = if is_integer(text) {
        text.parse().ok()
    } else {
        let mut c = Cursor::new(text.trim());
        read_clock(&mut c, true).filter(|_| c.at_end()).map(|(nanos, _)| nanos)
    };
    nanos.filter(|n| (0..=MAX_TIME_NANOS).contains(n)).ok_or_else(invalid)
}

/// cqlsh's timestamp form: `2024-01-02 03:04:05.000000+0000` (UTC).
pub fn format_timestamp_ms(ms: i64) -> String {
    let (year, month, day) = civil_from_days(ms.div_euclid(MILLIS_PER_DAY));
    let millis = ms.rem_euclid(MILLIS_PER_DAY);
    let (secs, frac) = (millis / 1000, millis % 1000);
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    format!("{year:04}-{month:02}-{day:02} {h:02}:{m:02}:{s:02}.{frac:03}000+0000")
}

/// `yyyy-mm-dd` of a protocol date (2^31 = 1970-01-01).
pub fn format_date(days: u32) -> String {
    let (year, month, day) = civil_from_days(i64::from(days) - DATE_EPOCH);
    format!("{year:04}-{month:02}-{day:02}")
}

/// `hh:mm:ss.nnnnnnnnn`; out-of-range input prints as the raw number.
pub fn format_time(nanos: i64) -> String {
    if !(0..=MAX_TIME_NANOS).contains(&nanos) {
        return nanos.to_string();
    }
    let secs = nanos / 1_000_000_000;
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    format!("{h:02}:{m:02}:{s:02}.{:09}", nanos % 1_000_000_000)
}

// ---------------------------------------------------------------------------
// Durations
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    Months,
    Days,
    Nanos,
}

/// Units of the `1y2mo3w…` form, in the only order Cassandra accepts, with
/// the names its errors give them.
const UNITS: [(&[&str], Field, i64, &str); 10] = [
    (&["y"], Field::Months, 12, "years"),
    (&["mo"], Field::Months, 1, "months"),
    (&["w"], Field::Days, 7, "weeks"),
    (&["d"], Field::Days, 1, "days"),
    (&["h"], Field::Nanos, 3_600_000_000_000, "hours"),
    (&["m"], Field::Nanos, 60_000_000_000, "minutes"),
    (&["s"], Field::Nanos, 1_000_000_000, "seconds"),
    (&["ms"], Field::Nanos, 1_000_000, "milliseconds"),
    (&["us", "µs"], Field::Nanos, 1_000, "microseconds"),
    (&["ns"], Field::Nanos, 1, "nanoseconds"),
];

/// Totals while parsing, wide enough to detect overflow before narrowing.
#[derive(Default)]
struct DurationParts {
    months: i64,
    days: i64,
    nanos: i64,
}

impl DurationParts {
    fn add(&mut self, field: Field, number: i64, factor: i64) -> Result<(), String> {
        let total = match field {
            Field::Months => &mut self.months,
            Field::Days => &mut self.days,
            Field::Nanos => &mut self.nanos,
        };
        *total = number
            .checked_mul(factor)
            .and_then(|n| total.checked_add(n))
            .ok_or_else(|| "the duration is too large".to_string())?;
        Ok(())
    }

    fn into_value(self, negative: bool) -> Result<Value, String> {
        let narrow = |n: i64, what: &str| {
            i32::try_from(n).map_err(|_| format!("the total number of {what} must be at most {}", i32::MAX))
        };
        let (months, days) = (narrow(self.months, "months")?, narrow(self.days, "days")?);
        // Each total is non-negative and fits its type, so negating is exact.
        Ok(if negative {
            Value::Duration { months: -months, days: -days, nanos: -self.nanos }
        } else {
            Value::Duration { months, days, nanos: self.nanos }
        })
    }
}

/// A duration literal: `[-]1y2mo3w4d5h6m7s8ms9us10ns` (any subset, in that
/// order, case-insensitive, `µs` too), ISO 8601 `[-]P1Y2M3DT4H5M6S`,
/// `[-]P2W`, or the alternative `[-]P0001-02-03T04:05:06`.
pub fn parse_duration(text: &str) -> Result<Value, LiteralError> {
    let (negative, body) = match text.strip_prefix('-') {
        Some(body) => (true, body),
        None => (false, text),
    };
    let parts = match body.strip_prefix(['P', 'p']) {
        Some(iso) if iso.ends_with(['W', 'w']) => iso_weeks(iso),
        Some(iso) if iso.contains('-') => iso_alternative(iso),
        Some(iso) => iso_designators(iso),
        None => unit_form(body),
    };
    parts
        .and_then(|parts| parts.into_value(negative))
        .map_err(|why| LiteralError::InvalidDuration { text: text.to_owned(), why })
}

/// Splits `123abc…` into the number and the rest.
fn leading_number(text: &str) -> Result<(i64, &str), String> {
    let len = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    if len == 0 {
        return Err(format!("expected a number at '{text}'"));
    }
    let number = text[..len].parse().map_err(|_| format!("number {} is too large", &text[..len]))?;
    Ok((number, &text[len..]))
}

fn unit_form(mut rest: &str) -> Result<DurationParts, String> {
    if rest.is_empty() {
        return Err("the duration is empty".into());
    }
    let mut parts = DurationParts::default();
    let mut previous: Option<usize> = None;
    while !rest.is_empty() {
        let (number, after) = leading_number(rest)?;
        let unit_len = after.find(|c: char| c.is_ascii_digit()).unwrap_or(after.len());
        let unit = after[..unit_len].to_lowercase();
        rest = &after[unit_len..];
        let rank = UNITS
            .iter()
            .position(|(names, ..)| names.contains(&unit.as_str()))
            .ok_or_else(|| format!("unknown unit '{unit}' (expected y, mo, w, d, h, m, s, ms, us or ns)"))?;
        // Cassandra's and ScyllaDB's texts.
        match previous {
            Some(p) if p == rank => return Err(format!("The {} are specified multiple times", UNITS[rank].3)),
            Some(p) if p > rank => return Err(format!("The {} should be after {}", UNITS[p].3, UNITS[rank].3)),
            _ => {}
        }
        previous = Some(rank);
        let (_, field, factor, _) = UNITS[rank];
        parts.add(field, number, factor)?;
    }
    Ok(parts)
}

/// `nW` after the `P`.
fn iso_weeks(iso: &str) -> Result<DurationParts, String> {
    let (weeks, rest) = leading_number(iso)?;
    if !rest.eq_ignore_ascii_case("w") {
        return Err("expected P followed by a number of weeks and W".into());
    }
    let mut parts = DurationParts::default();
    parts.add(Field::Days, weeks, 7)?;
    Ok(parts)
}

/// `nYnMnD` then optionally `T` and `nHnMnS`, each part optional, in order.
fn iso_designators(iso: &str) -> Result<DurationParts, String> {
    let (date, time) = match iso.find(['T', 't']) {
        Some(t) => (&iso[..t], Some(&iso[t + 1..])),
        None => (iso, None),
    };
    let mut parts = DurationParts::default();
    let date_units = [('Y', Field::Months, 12), ('M', Field::Months, 1), ('D', Field::Days, 1)];
    designators(date, &date_units, &mut parts)?;
    let time_units = [
        ('H', Field::Nanos, 3_600_000_000_000),
        ('M', Field::Nanos, 60_000_000_000),
        ('S', Field::Nanos, 1_000_000_000),
    ];
    designators(time.unwrap_or(""), &time_units, &mut parts)?;
    Ok(parts)
}

fn designators(mut rest: &str, units: &[(char, Field, i64)], parts: &mut DurationParts) -> Result<(), String> {
    let mut next = 0;
    while !rest.is_empty() {
        let (number, after) = leading_number(rest)?;
        let mut chars = after.chars();
        let designator = chars.next().map(|c| c.to_ascii_uppercase());
        let offset = units[next..].iter().position(|(d, _, _)| Some(*d) == designator);
        let Some(offset) = offset else {
            return Err(format!("unexpected '{after}' in ISO 8601 duration"));
        };
        let (_, field, factor) = units[next + offset];
        parts.add(field, number, factor)?;
        next += offset + 1;
        rest = chars.as_str();
    }
    Ok(())
}

/// `yyyy-mm-ddThh:mm:ss` after the `P`.
fn iso_alternative(iso: &str) -> Result<DurationParts, String> {
    let shape_error = || "expected P followed by yyyy-mm-ddThh:mm:ss".to_string();
    let mut c = Cursor::new(iso);
    let mut fields = [0i64; 6];
    for (i, (width, separator)) in [(4, b'-'), (2, b'-'), (2, b'T'), (2, b':'), (2, b':'), (2, 0)].iter().enumerate() {
        fields[i] = c.digits(*width, *width).ok_or_else(shape_error)?.0;
        if *separator != 0 && !c.eat(*separator) {
            return Err(shape_error());
        }
    }
    if !c.at_end() {
        return Err(shape_error());
    }
    let [years, months, days, hours, minutes, seconds] = fields;
    let mut parts = DurationParts::default();
    parts.add(Field::Months, years, 12)?;
    parts.add(Field::Months, months, 1)?;
    parts.add(Field::Days, days, 1)?;
    parts.add(Field::Nanos, hours, 3_600_000_000_000)?;
    parts.add(Field::Nanos, minutes, 60_000_000_000)?;
    parts.add(Field::Nanos, seconds, 1_000_000_000)?;
    Ok(parts)
}

/// Cassandra's `Duration.toString` (`1y2mo3d4h5m6s7ms8us9ns`, `-` first
/// when negative), except that zero prints as `0s` rather than nothing.
pub fn format_duration(months: i32, days: i32, nanos: i64) -> String {
    if months == 0 && days == 0 && nanos == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    if months < 0 || days < 0 || nanos < 0 {
        out.push('-');
    }
    let months = u64::from(months.unsigned_abs());
    let remainder = append_unit(&mut out, months, 12, "y");
    append_unit(&mut out, remainder, 1, "mo");
    append_unit(&mut out, u64::from(days.unsigned_abs()), 1, "d");
    let mut remainder = nanos.unsigned_abs();
    for (divisor, unit) in [
        (3_600_000_000_000, "h"),
        (60_000_000_000, "m"),
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
        (1, "ns"),
    ] {
        remainder = append_unit(&mut out, remainder, divisor, unit);
    }
    out
}

/// Appends `amount / divisor` with its unit when non-zero; returns the rest.
fn append_unit(out: &mut String, amount: u64, divisor: u64, unit: &str) -> u64 {
    if amount < divisor {
        return amount;
    }
    out.push_str(&format!("{}{unit}", amount / divisor));
    amount % divisor
}

#[cfg(test)]
mod tests {
    use super::*;
    use LiteralKind as K;

    fn parse(ty: &str, kind: LiteralKind, text: &str) -> Result<Value, LiteralError> {
        parse_literal(&CqlType::parse(ty).expect("test type text is valid"), kind, text)
    }

    fn message(ty: &str, kind: LiteralKind, text: &str) -> String {
        match parse(ty, kind, text) {
            Ok(v) => panic!("{ty} accepted {kind} {text} as {v:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn integers_are_range_checked() {
        assert_eq!(parse("tinyint", K::Integer, "-128"), Ok(Value::Tinyint(-128)));
        assert_eq!(message("tinyint", K::Integer, "300"), "value 300 out of range for tinyint");
        assert_eq!(parse("smallint", K::Integer, "32767"), Ok(Value::Smallint(32767)));
        assert_eq!(parse("int", K::Integer, "-2147483648"), Ok(Value::Int(i32::MIN)));
        assert_eq!(message("int", K::Integer, "2147483648"), "value 2147483648 out of range for int");
        assert_eq!(parse("bigint", K::Integer, "9223372036854775807"), Ok(Value::Bigint(i64::MAX)));
        assert!(message("bigint", K::Integer, "99999999999999999999999999999999999999999").contains("out of range"));
        assert_eq!(parse("counter", K::Integer, "5"), Ok(Value::Counter(5)));
        assert_eq!(message("int", K::Integer, "1.5"), "invalid int number '1.5'");
    }

    #[test]
    fn literal_kinds_are_checked_per_type() {
        assert_eq!(message("int", K::String, "1"), "invalid STRING constant (1) for type int");
        assert!(matches!(parse("bigint", K::Float, "1.0"), Err(LiteralError::NotAssignable { .. })));
        assert!(matches!(parse("blob", K::String, "cafe"), Err(LiteralError::NotAssignable { .. })));
        assert!(matches!(parse("text", K::Integer, "1"), Err(LiteralError::NotAssignable { .. })));
        assert!(matches!(parse("varint", K::Float, "1.5"), Err(LiteralError::NotAssignable { .. })));
        assert!(matches!(parse("uuid", K::String, "x"), Err(LiteralError::NotAssignable { .. })));
        assert!(matches!(parse("list<int>", K::Integer, "1"), Err(LiteralError::NotAssignable { .. })));
        assert!(matches!(parse("duration", K::Integer, "1"), Err(LiteralError::NotAssignable { .. })));
        assert_eq!(K::Hex.cassandra_name(), "HEX");
    }

    #[test]
    fn floats_accept_integers_and_specials() {
        assert_eq!(parse("float", K::Integer, "3"), Ok(Value::Float(3.0)));
        assert_eq!(parse("double", K::Float, "-1.5e3"), Ok(Value::Double(-1500.0)));
        assert_eq!(parse("double", K::Float, "1."), Ok(Value::Double(1.0)));
        assert_eq!(parse("double", K::Float, "-Infinity"), Ok(Value::Double(f64::NEG_INFINITY)));
        assert_eq!(parse("float", K::Float, "infinity"), Ok(Value::Float(f32::INFINITY)));
        assert!(matches!(parse("double", K::Float, "NaN"), Ok(Value::Double(v)) if v.is_nan()));
        assert!(matches!(parse("float", K::Float, "-nan"), Ok(Value::Float(v)) if v.is_nan()));
        assert_eq!(parse("float", K::Float, "1e39"), Ok(Value::Float(f32::INFINITY)));
        assert_eq!(parse("float", K::Float, "0.1"), Ok(Value::Float(0.1)));
        assert!(parse("double", K::Float, "inf").is_err());
        assert!(parse("double", K::Float, "1.2.3").is_err());
    }

    fn decimal_text(ty: &str, kind: LiteralKind, text: &str) -> String {
        parse(ty, kind, text).map(|v| v.to_string()).unwrap_or_else(|e| e.to_string())
    }

    #[test]
    fn varint_and_decimal_are_exact() {
        let big = "-123456789012345678901234567890123456789012345678901234567890";
        assert_eq!(decimal_text("varint", K::Integer, big), big);
        assert_eq!(parse("varint", K::Integer, "128"), Ok(Value::Varint(vec![0, 128])));
        assert_eq!(parse("decimal", K::Float, "1.50"), Ok(Value::Decimal { scale: 2, unscaled: vec![0, 150] }));
        assert_eq!(parse("decimal", K::Float, "1e3"), Ok(Value::Decimal { scale: -3, unscaled: vec![1] }));
        assert_eq!(parse("decimal", K::Float, "-0.001"), Ok(Value::Decimal { scale: 3, unscaled: vec![0xFF] }));
        assert_eq!(parse("decimal", K::Integer, "42"), Ok(Value::Decimal { scale: 0, unscaled: vec![42] }));
        assert_eq!(
            decimal_text("decimal", K::Float, "12345678901234567890.123456789"),
            "12345678901234567890.123456789"
        );
        assert_eq!(decimal_text("decimal", K::Float, "1.5E-10"), "1.5E-10");
        assert!(parse("decimal", K::Float, "NaN").is_err());
        let huge = parse("decimal", K::Float, "1e2147483649").expect_err("scale past i32").to_string();
        assert_eq!(huge, "unable to make BigDecimal from '1e2147483649'");
        let past_i64 = parse("decimal", K::Float, "1e99999999999999999999").expect_err("exponent past i64");
        assert!(past_i64.to_string().contains("BigDecimal"), "{past_i64}");
        assert!(parse("decimal", K::Float, ".").is_err());
    }

    #[test]
    fn strings_blobs_booleans_uuids_inets() {
        assert_eq!(parse("ascii", K::String, "abc"), Ok(Value::Ascii("abc".into())));
        assert!(matches!(parse("ascii", K::String, "é"), Err(LiteralError::NonAscii(_))));
        assert_eq!(parse("text", K::String, "é"), Ok(Value::Text("é".into())));
        assert_eq!(parse("blob", K::Hex, "0xCAfe"), Ok(Value::Blob(vec![0xca, 0xfe])));
        assert_eq!(parse("blob", K::Hex, "0xabc"), Ok(Value::Blob(vec![0x0a, 0xbc])));
        assert_eq!(parse("blob", K::Hex, "0x"), Ok(Value::Blob(vec![])));
        assert!(parse("blob", K::Hex, "0xzz").is_err());
        assert_eq!(parse("boolean", K::Boolean, "TRUE"), Ok(Value::Boolean(true)));
        assert_eq!(parse("boolean", K::Boolean, "false"), Ok(Value::Boolean(false)));
        let v4 = "550e8400-e29b-41d4-a716-446655440000";
        let v1 = "c1c2c3c4-1234-11ef-8000-000000000000";
        assert!(matches!(parse("uuid", K::Uuid, v4), Ok(Value::Uuid(b)) if b[0] == 0x55 && b[15] == 0));
        assert!(matches!(parse("timeuuid", K::Uuid, v1), Ok(Value::Timeuuid(_))));
        assert_eq!(
            message("timeuuid", K::Uuid, v4),
            format!("invalid timeuuid '{v4}': not a version 1 (time-based) UUID")
        );
        assert!(parse("uuid", K::Uuid, "550e8400e29b41d4a716446655440000").is_err());
        assert_eq!(parse("inet", K::String, "127.0.0.1"), Ok(Value::Inet("127.0.0.1".parse().expect("valid ip"))));
        assert_eq!(
            parse("inet", K::String, "::ffff:1.2.3.4"),
            Ok(Value::Inet("::ffff:1.2.3.4".parse().expect("valid ip")))
        );
        assert!(parse("inet", K::String, "localhost").is_err());
    }

    const JAN_2_2024: i64 = 1_704_153_600_000;

    #[test]
    fn timestamps_in_every_cassandra_form() {
        let cases = [
            ("2024-01-02", JAN_2_2024),
            ("2024-01-02 03:04", JAN_2_2024 + 11_040_000),
            ("2024-01-02 03:04:05", JAN_2_2024 + 11_045_000),
            ("2024-01-02T03:04:05", JAN_2_2024 + 11_045_000),
            ("2024-01-02 03:04:05.123", JAN_2_2024 + 11_045_123),
            ("2024-01-02 03:04:05.1", JAN_2_2024 + 11_045_100),
            ("2024-01-02 03:04:05.000+0000", JAN_2_2024 + 11_045_000),
            ("2024-01-02  Z ", JAN_2_2024),
            ("2024-01-02 03:04:05Z", JAN_2_2024 + 11_045_000),
            ("2024-01-02 03:04:05+0100", JAN_2_2024 + 11_045_000 - 3_600_000),
            ("2024-01-02 03:04:05+01:00", JAN_2_2024 + 11_045_000 - 3_600_000),
            ("2024-01-02 03:04:05 -0530", JAN_2_2024 + 11_045_000 + 19_800_000),
            ("2024-01-02T03:04-05", JAN_2_2024 + 11_040_000 + 18_000_000),
            ("2024-01-02+0000", JAN_2_2024),
            ("2024-01-02 UTC", JAN_2_2024),
            ("1970-01-01", 0),
            ("1969-12-31 23:59:59.999", -1),
            ("2000-02-29", 951_782_400_000),
        ];
        for (text, ms) in cases {
            assert_eq!(parse("timestamp", K::String, text), Ok(Value::Timestamp(ms)), "{text}");
        }
        assert_eq!(parse("timestamp", K::Integer, "-5"), Ok(Value::Timestamp(-5)));
        assert_eq!(parse("timestamp", K::String, "1704153600000"), Ok(Value::Timestamp(JAN_2_2024)));
        for bad in [
            "",
            "abc",
            "2024-13-01",
            "2023-02-29",
            "2024-01-02 24:00",
            "2024-01-02T",
            "2024-01-02 03:04:05+25",
            "2024-01-02 3:4:5 x",
        ] {
            assert!(matches!(parse("timestamp", K::String, bad), Err(LiteralError::InvalidTimestamp(_))), "{bad}");
        }
        assert_eq!(
            message("timestamp", K::String, "x"),
            "invalid timestamp 'x': expected yyyy-mm-dd[ hh:mm[:ss[.fff]]][zone] or milliseconds"
        );
        assert!(parse("timestamp", K::String, "999999999-01-01").is_err());
        // ScyllaDB's refusal of sub-millisecond digits, in its words.
        assert_eq!(
            message("timestamp", K::String, "2024-01-02 03:04:05.123456+0000"),
            "unable to parse date '2024-01-02 03:04:05.123456+0000': Milliseconds length exceeds expected (6)"
        );
    }

    #[test]
    fn dates_and_times() {
        assert_eq!(parse("date", K::String, "1970-01-01"), Ok(Value::Date(1 << 31)));
        assert_eq!(parse("date", K::String, "2024-01-02"), Ok(Value::Date((1 << 31) + 19_724)));
        assert_eq!(parse("date", K::String, "1969-12-31"), Ok(Value::Date((1 << 31) - 1)));
        assert_eq!(parse("date", K::Integer, "0"), Ok(Value::Date(0)));
        assert_eq!(parse("date", K::String, "4294967295"), Ok(Value::Date(u32::MAX)));
        assert!(parse("date", K::Integer, "4294967296").is_err());
        assert!(parse("date", K::Integer, "-1").is_err());
        assert_eq!(message("date", K::Integer, "-123"), "Unable to make unsigned int (for date) from: '-123'");
        assert!(parse("date", K::String, "2024-01-02 00:00").is_err());
        assert!(parse("date", K::String, "9999999-01-01").is_err());
        assert_eq!(parse("time", K::String, "03:04:05.123456789"), Ok(Value::Time(11_045_123_456_789)));
        assert_eq!(parse("time", K::String, "23:59:59.999999999"), Ok(Value::Time(MAX_TIME_NANOS)));
        assert_eq!(parse("time", K::String, "00:00:01.5"), Ok(Value::Time(1_500_000_000)));
        assert_eq!(parse("time", K::Integer, "1"), Ok(Value::Time(1)));
        for bad in ["24:00:00", "12:00", "12:60:00", "86400000000000", "-1", "1:2:3.1234567891"] {
            assert!(matches!(parse("time", K::String, bad), Err(LiteralError::InvalidTime(_))), "{bad}");
        }
    }

    fn duration(months: i32, days: i32, nanos: i64) -> Result<Value, LiteralError> {
        Ok(Value::Duration { months, days, nanos })
    }

    #[test]
    fn durations_in_every_cassandra_form() {
        let hms = |h: i64, m: i64, s: i64| ((h * 60 + m) * 60 + s) * 1_000_000_000;
        let d = |text| parse("duration", K::Duration, text);
        assert_eq!(d("1y2mo3w4d5h6m7s8ms9us10ns"), duration(14, 25, hms(5, 6, 7) + 8_009_010));
        assert_eq!(d("1Y2MO"), duration(14, 0, 0));
        assert_eq!(d("3µs"), duration(0, 0, 3_000));
        assert_eq!(d("-1d12h"), duration(0, -1, -hms(12, 0, 0)));
        assert_eq!(d("P1Y2M3DT4H5M6S"), duration(14, 3, hms(4, 5, 6)));
        assert_eq!(d("P1M"), duration(1, 0, 0));
        assert_eq!(d("PT1M"), duration(0, 0, hms(0, 1, 0)));
        assert_eq!(d("-P2W"), duration(0, -14, 0));
        assert_eq!(d("P0001-02-03T04:05:06"), duration(14, 3, hms(4, 5, 6)));
        assert_eq!(d("2147483647mo"), duration(i32::MAX, 0, 0));
        for bad in [
            "",
            "1",
            "1x",
            "1d1d",
            "1m1h",
            "P1D2Y",
            "P1-2-3T4:5:6",
            "1h2",
            "178956971y",
            "9223372036854775808ns",
            "P1WX",
        ] {
            assert!(matches!(d(bad), Err(LiteralError::InvalidDuration { .. })), "{bad}");
        }
        assert_eq!(
            message("duration", K::Duration, "1m1h"),
            "invalid duration '1m1h': The minutes should be after hours"
        );
        assert_eq!(
            message("duration", K::Duration, "2m3m"),
            "invalid duration '2m3m': The minutes are specified multiple times"
        );
    }

    #[test]
    fn formats_read_back() {
        assert_eq!(format_timestamp_ms(0), "1970-01-01 00:00:00.000000+0000");
        assert_eq!(format_timestamp_ms(JAN_2_2024 + 11_045_123), "2024-01-02 03:04:05.123000+0000");
        for ms in [0, -1, JAN_2_2024 + 11_045_123, 253_402_300_799_999, -62_135_596_800_000] {
            // cqlsh's six fraction digits are refused, as by ScyllaDB; its
            // millisecond part reads back.
            let cqlsh = format_timestamp_ms(ms);
            assert!(matches!(parse_timestamp(&cqlsh), Err(LiteralError::TimestampPrecision { digits: 6, .. })));
            assert_eq!(parse_timestamp(&cqlsh.replace("000+0000", "+0000")), Ok(ms), "{ms}");
        }
        assert!(!format_timestamp_ms(i64::MIN).is_empty());
        for days in [0u32, 1 << 31, u32::MAX, (1 << 31) + 19_724, (1 << 31) - 719_528] {
            let text = format_date(days);
            if !text.starts_with('-') {
                assert_eq!(parse_date(&text), Ok(days), "{text}");
            }
        }
        assert_eq!(format_date((1 << 31) - 719_528), "0000-01-01");
        for nanos in [0, 1, MAX_TIME_NANOS, 11_045_123_456_789] {
            assert_eq!(parse_time(&format_time(nanos)), Ok(nanos));
        }
        assert_eq!(format_time(-1), "-1");
        for (months, days, nanos) in
            [(0, 0, 0), (14, 3, 1), (-1, -2, -3), (-i32::MAX, -i32::MAX, -i64::MAX), (i32::MAX, 0, i64::MAX)]
        {
            let text = format_duration(months, days, nanos);
            assert_eq!(parse_duration(&text), duration(months, days, nanos), "{text}");
        }
        // Like Cassandra, the magnitude is parsed before the sign, so the
        // most negative values print but do not read back.
        assert!(parse_duration(&format_duration(i32::MIN, 0, 0)).is_err());
    }

    #[test]
    fn civil_dates_round_trip() {
        for days in (-1_000_000..1_000_000).step_by(997) {
            let (y, m, d) = civil_from_days(days);
            assert!((1..=12).contains(&m) && (1..=days_in_month(y, m)).contains(&d));
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_724), (2024, 1, 2));
    }

    #[test]
    fn dates_span_the_whole_type_range() {
        assert_eq!(parse_date("-5877641-06-23").ok(), Some(0));
        assert_eq!(parse_date("5881580-07-11").ok(), Some(u32::MAX));
        assert_eq!(parse_date("1970-01-01").ok(), Some(1 << 31));
        assert!(parse_date("-0001-12-31").is_ok_and(|d| d < 1 << 31));
        assert!(parse_date("5881580-07-12").is_err());
        assert!(parse_date("-5877641-06-22").is_err());
    }
}
