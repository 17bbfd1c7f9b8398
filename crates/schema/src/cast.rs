//! `CAST(x AS type)`: the conversions Cassandra's `CastFcts` define, with
//! Java's results.
//!
//! - Between numeric types (tinyint, smallint, int, bigint, counter as a
//!   source, float, double, varint, decimal): Java's `Number` conversions.
//!   Integers narrow by wrapping (`(byte) 300` is 44); floating point
//!   narrows through `int` or `long` by saturating, NaN giving 0; decimal
//!   and varint narrow through their integer part's low bits; float and
//!   double become decimals through their shortest decimal text.
//! - Every numeric, boolean, inet, uuid, timeuuid, timestamp, date, time
//!   and ascii value to text or ascii: the value's text as Cassandra's
//!   serializers print it (`2.0`, `1.0E10`, `2020-01-02T03:04:05.000Z`).
//! - Between times: timestamp to date; timeuuid to timestamp and date;
//!   date to timestamp.

use crate::literal::{format_date, format_time, parse_literal, LiteralKind};
use crate::types::CqlType;
use crate::value::{bignum, decimal_to_string, is_numeric, Value, ValueError};

const MS_PER_DAY: i64 = 86_400_000;
/// Protocol dates count days with 2^31 as the Unix epoch.
const DATE_EPOCH: i64 = 1 << 31;
/// 100-ns intervals between the UUID epoch (1582-10-15) and the Unix epoch.
const UUID_EPOCH_OFFSET_100NS: i64 = 0x01B2_1DD2_1381_4000;

/// Whether a value of `from` can be cast to `to`.
pub fn supported(from: &CqlType, to: &CqlType) -> bool {
    let (from, to) = (from.unfrozen(), to.unfrozen());
    if from == to {
        return true;
    }
    match to {
        CqlType::Text | CqlType::Ascii => {
            is_numeric(from)
                || matches!(
                    from,
                    CqlType::Ascii
                        | CqlType::Boolean
                        | CqlType::Inet
                        | CqlType::Uuid
                        | CqlType::Timeuuid
                        | CqlType::Timestamp
                        | CqlType::Date
                        | CqlType::Time
                )
        }
        CqlType::Counter => false,
        _ if is_numeric(to) => is_numeric(from),
        CqlType::Date => matches!(from, CqlType::Timestamp | CqlType::Timeuuid),
        CqlType::Timestamp => matches!(from, CqlType::Date | CqlType::Timeuuid),
        _ => false,
    }
}

/// `value` (of `from`) cast to `to`; call only where [`supported`].
pub fn cast(value: &Value, to: &CqlType) -> Result<Value, ValueError> {
    let to = to.unfrozen();
    let unsupported = || ValueError::Mismatch { expected: to.to_string(), got: value.cql_type().to_string() };
    Ok(match to {
        CqlType::Text => Value::Text(text_of(value).ok_or_else(unsupported)?),
        CqlType::Ascii => Value::Ascii(text_of(value).filter(|t| t.is_ascii()).ok_or_else(unsupported)?),
        CqlType::Date => {
            Value::Date((epoch_ms(value).ok_or_else(unsupported)?.div_euclid(MS_PER_DAY) + DATE_EPOCH) as u32)
        }
        CqlType::Timestamp => Value::Timestamp(epoch_ms(value).ok_or_else(unsupported)?),
        _ => numeric(value, to).ok_or_else(unsupported)?,
    })
}

/// A number as one of the shapes Java converts from.
enum Number {
    Integer(i128),
    Floating(f64),
    /// Varint or decimal: (scale, two's complement unscaled).
    Big(i32, Vec<u8>),
}

fn number(value: &Value) -> Option<Number> {
    Some(match value {
        Value::Tinyint(v) => Number::Integer(i128::from(*v)),
        Value::Smallint(v) => Number::Integer(i128::from(*v)),
        Value::Int(v) => Number::Integer(i128::from(*v)),
        Value::Bigint(v) | Value::Counter(v) => Number::Integer(i128::from(*v)),
        Value::Float(v) => Number::Floating(f64::from(*v)),
        Value::Double(v) => Number::Floating(*v),
        Value::Varint(v) => Number::Big(0, v.clone()),
        Value::Decimal { scale, unscaled } => Number::Big(*scale, unscaled.clone()),
        _ => return None,
    })
}

fn numeric(value: &Value, to: &CqlType) -> Option<Value> {
    let n = number(value)?;
    Some(match to {
        CqlType::Tinyint => Value::Tinyint(as_int(&n) as i8),
        CqlType::Smallint => Value::Smallint(as_int(&n) as i16),
        CqlType::Int => Value::Int(as_int(&n)),
        CqlType::Bigint => Value::Bigint(as_long(&n)),
        CqlType::Float => Value::Float(as_double(&n) as f32),
        CqlType::Double => Value::Double(as_double(&n)),
        CqlType::Varint => Value::Varint(match &n {
            Number::Integer(i) => bignum::minimal(&i.to_be_bytes()).to_vec(),
            // BigInteger.valueOf(longValue()).
            Number::Floating(d) => bignum::minimal(&i128::from(*d as i64).to_be_bytes()).to_vec(),
            Number::Big(scale, unscaled) => integer_part(*scale, unscaled),
        }),
        CqlType::Decimal => match (&n, value) {
            (Number::Integer(i), _) => {
                Value::Decimal { scale: 0, unscaled: bignum::minimal(&i.to_be_bytes()).to_vec() }
            }
            // A float keeps its own shortest digits (5.2, not the double
            // 5.199999809265137 it widens to), as ScyllaDB casts it.
            (Number::Floating(_), Value::Float(f)) if f.is_finite() => {
                parse_literal(&CqlType::Decimal, LiteralKind::Float, &java_float(*f)).ok()?
            }
            (Number::Floating(d), _) if d.is_finite() => {
                parse_literal(&CqlType::Decimal, LiteralKind::Float, &java_double(*d)).ok()?
            }
            (Number::Floating(_), _) => return None,
            (Number::Big(scale, unscaled), _) => Value::Decimal { scale: *scale, unscaled: unscaled.clone() },
        },
        _ => return None,
    })
}

/// Java's `intValue()`: floating point saturates, big numbers keep the
/// low 32 bits of their integer part.
fn as_int(n: &Number) -> i32 {
    match n {
        Number::Floating(d) => *d as i32,
        _ => as_long(n) as i32,
    }
}

/// Java's `longValue()`.
fn as_long(n: &Number) -> i64 {
    match n {
        Number::Integer(i) => *i as i64,
        Number::Floating(d) => *d as i64,
        Number::Big(scale, unscaled) => low_bits(&integer_part(*scale, unscaled)),
    }
}

fn as_double(n: &Number) -> f64 {
    match n {
        Number::Integer(i) => *i as f64,
        Number::Floating(d) => *d,
        Number::Big(scale, unscaled) => decimal_to_string(*scale, unscaled).parse().unwrap_or(f64::NAN),
    }
}

/// The low 64 bits of a two's complement integer, sign-extended.
fn low_bits(twos: &[u8]) -> i64 {
    let fill = if bignum::is_negative(twos) { 0xFF } else { 0x00 };
    let mut bytes = [fill; 8];
    let take = twos.len().min(8);
    bytes[8 - take..].copy_from_slice(&twos[twos.len() - take..]);
    i64::from_be_bytes(bytes)
}

/// `unscaled × 10^-scale` truncated toward zero, as a varint.
fn integer_part(scale: i32, unscaled: &[u8]) -> Vec<u8> {
    if scale <= 0 {
        return bignum::mul_pow10(unscaled, scale.unsigned_abs());
    }
    let mut left = scale.unsigned_abs();
    let mut value = unscaled.to_vec();
    while left > 0 && value.iter().any(|b| *b != 0) {
        let step = left.min(19);
        value = bignum::divide_truncating(&value, 10u64.pow(step));
        left -= step;
    }
    if left > 0 {
        return vec![0];
    }
    value
}

/// Milliseconds since the Unix epoch of a time value.
fn epoch_ms(value: &Value) -> Option<i64> {
    match value {
        Value::Timestamp(ms) => Some(*ms),
        Value::Date(days) => Some((i64::from(*days) - DATE_EPOCH) * MS_PER_DAY),
        Value::Timeuuid(u) => {
            let time_low = i64::from(u32::from_be_bytes([u[0], u[1], u[2], u[3]]));
            let time_mid = i64::from(u16::from_be_bytes([u[4], u[5]]));
            let time_hi = i64::from(u16::from_be_bytes([u[6], u[7]]) & 0x0fff);
            Some((((time_hi << 48) | (time_mid << 32) | time_low) - UUID_EPOCH_OFFSET_100NS).div_euclid(10_000))
        }
        _ => None,
    }
}

/// A value's text as Cassandra's serializers print it.
fn text_of(value: &Value) -> Option<String> {
    Some(match value {
        Value::Text(s) | Value::Ascii(s) => s.clone(),
        Value::Float(v) => java_float(*v),
        Value::Double(v) => java_double(*v),
        Value::Timestamp(ms) => iso_timestamp(*ms),
        Value::Date(days) => format_date(*days),
        Value::Time(nanos) => format_time(*nanos),
        Value::Blob(_)
        | Value::Duration { .. }
        | Value::List(_)
        | Value::Set(_)
        | Value::Map(_)
        | Value::Tuple(_)
        | Value::Vector(_) => return None,
        other => other.to_string(),
    })
}

/// `yyyy-MM-ddTHH:mm:ss.SSSZ`, UTC.
fn iso_timestamp(ms: i64) -> String {
    let days = ms.div_euclid(MS_PER_DAY);
    let date = format_date((days + DATE_EPOCH) as u32);
    let millis = ms.rem_euclid(MS_PER_DAY);
    let (secs, frac) = (millis / 1000, millis % 1000);
    format!("{date}T{:02}:{:02}:{:02}.{frac:03}Z", secs / 3600, secs / 60 % 60, secs % 60)
}

fn java_float(v: f32) -> String {
    java_style(f64::from(v), format!("{v:e}"))
}

fn java_double(v: f64) -> String {
    java_style(v, format!("{v:e}"))
}

/// Java's `Double.toString` from Rust's shortest digits (`{:e}`, which is
/// `d[.ddd]e[-]x`): plain with at least one fraction digit for
/// 10^-3 <= |v| < 10^7, else `d.dddE[-]x`.
fn java_style(v: f64, scientific: String) -> String {
    if v.is_nan() {
        return "NaN".to_string();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.to_string();
    }
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (sign, mantissa) = mantissa.strip_prefix('-').map_or(("", mantissa), |m| ("-", m));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if v == 0.0 {
        return format!("{sign}0.0");
    }
    if (-3..7).contains(&exponent) {
        let point = exponent + 1;
        let (int, frac) = if point <= 0 {
            ("0".to_string(), format!("{}{digits}", "0".repeat(point.unsigned_abs() as usize)))
        } else {
            let point = point as usize;
            let padded = format!("{digits:0<point$}");
            (padded[..point].to_string(), padded[point..].to_string())
        };
        let frac = if frac.is_empty() { "0".to_string() } else { frac };
        return format!("{sign}{int}.{frac}");
    }
    let (first, rest) = digits.split_at(1);
    let rest = if rest.is_empty() { "0" } else { rest };
    format!("{sign}{first}.{rest}E{exponent}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn to(value: Value, ty: CqlType) -> Value {
        assert!(supported(&value.cql_type(), &ty), "{value:?} to {ty}");
        cast(&value, &ty).expect("cast")
    }

    #[test]
    fn numbers_convert_as_java_does() {
        assert_eq!(to(Value::Int(300), CqlType::Tinyint), Value::Tinyint(44));
        assert_eq!(to(Value::Double(1e20), CqlType::Int), Value::Int(i32::MAX));
        assert_eq!(to(Value::Double(f64::NAN), CqlType::Bigint), Value::Bigint(0));
        assert_eq!(to(Value::Double(-2.7), CqlType::Smallint), Value::Smallint(-2));
        assert_eq!(to(Value::Int(7), CqlType::Double), Value::Double(7.0));
        let decimal = Value::Decimal { scale: 2, unscaled: vec![0x04, 0xd2] }; // 12.34
        assert_eq!(to(decimal.clone(), CqlType::Int), Value::Int(12));
        assert_eq!(to(decimal.clone(), CqlType::Double), Value::Double(12.34));
        assert_eq!(to(decimal, CqlType::Varint), Value::Varint(vec![12]));
        assert_eq!(to(Value::Double(2.5), CqlType::Decimal), Value::Decimal { scale: 1, unscaled: vec![25] });
        assert_eq!(to(Value::Float(5.2), CqlType::Decimal), Value::Decimal { scale: 1, unscaled: vec![52] });
        assert_eq!(to(Value::Varint(vec![0x01, 0x00, 0x00, 0x00, 0x00, 0x05]), CqlType::Int), Value::Int(5));
    }

    #[test]
    fn text_is_what_cassandra_prints() {
        assert_eq!(to(Value::Double(2.0), CqlType::Text), Value::Text("2.0".into()));
        assert_eq!(to(Value::Double(1e10), CqlType::Text), Value::Text("1.0E10".into()));
        assert_eq!(to(Value::Double(0.00012), CqlType::Text), Value::Text("1.2E-4".into()));
        assert_eq!(to(Value::Double(0.001), CqlType::Text), Value::Text("0.001".into()));
        assert_eq!(to(Value::Float(1.5), CqlType::Text), Value::Text("1.5".into()));
        assert_eq!(to(Value::Double(-1234567.0), CqlType::Text), Value::Text("-1234567.0".into()));
        assert_eq!(to(Value::Int(-7), CqlType::Ascii), Value::Ascii("-7".into()));
        assert_eq!(to(Value::Timestamp(86_400_123), CqlType::Text), Value::Text("1970-01-02T00:00:00.123Z".into()));
        assert_eq!(to(Value::Boolean(true), CqlType::Text), Value::Text("true".into()));
    }

    #[test]
    fn times_convert_between_each_other() {
        assert_eq!(to(Value::Timestamp(86_400_000 * 3 + 5), CqlType::Date), Value::Date((DATE_EPOCH + 3) as u32));
        assert_eq!(to(Value::Date((DATE_EPOCH + 1) as u32), CqlType::Timestamp), Value::Timestamp(86_400_000));
        assert!(!supported(&CqlType::Blob, &CqlType::Int));
        assert!(!supported(&CqlType::Int, &CqlType::Timestamp));
        assert!(!supported(&CqlType::Text, &CqlType::Int));
    }
}
