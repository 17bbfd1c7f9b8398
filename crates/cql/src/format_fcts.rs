//! Cassandra 6's `format_bytes(value[, unit | source_unit, target_unit])`
//! and `format_time(...)`: a size or a duration as text in a unit
//! (`"1.46 GiB"`, `"2.5 h"`), as Cassandra's `FormatFcts`.
//!
//! The value is an integer (tinyint, smallint, int, bigint, varint) or
//! text holding one, never negative; it counts bytes (`format_bytes`) or
//! milliseconds (`format_time`) unless a source unit is given. With no
//! target unit the largest unit the value reaches is taken. The number is
//! printed as Java's `DecimalFormat("#.##")` prints a double: at most two
//! fraction digits rounded half up on the double's exact value, no
//! trailing zeros, and past 10^15 the double's shortest digits. A size
//! moved to a smaller unit saturates at `Long.MAX_VALUE`; a duration is
//! scaled in double precision. A null value gives null; a null unit is
//! refused.

use bytes::Bytes;
use shoal_schema::{CqlType, Value};

use crate::error::{invalid, CqlResult};

pub const NAMES: [&str; 2] = ["format_bytes", "format_time"];

/// A unit's name and its size in the function's smallest unit (bytes or
/// nanoseconds).
type Unit = (&'static str, u64);

const BYTE_UNITS: [Unit; 4] = [("B", 1), ("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30)];
const TIME_UNITS: [Unit; 7] = [
    ("ns", 1),
    ("us", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
    ("d", 86_400_000_000_000),
];

fn units(name: &str) -> &'static [Unit] {
    match name {
        "format_bytes" => &BYTE_UNITS,
        _ => &TIME_UNITS,
    }
}

/// The unit a value without one is in: bytes, or milliseconds.
fn default_unit(name: &str) -> Unit {
    match name {
        "format_bytes" => BYTE_UNITS[0],
        _ => TIME_UNITS[2],
    }
}

/// Refuses a call with other than one to three arguments (Cassandra's text).
pub fn check_count(name: &str, count: usize) -> CqlResult<()> {
    match count {
        1..=3 => Ok(()),
        _ => Err(invalid(format!(
            "Invalid number of arguments for function system.{name}([int|tinyint|smallint|bigint|varint|ascii|text], [ascii], [ascii])"
        ))),
    }
}

/// The refusal of a null unit argument.
pub fn null_unit() -> crate::error::CqlError {
    invalid("none of the arguments may be null")
}

fn unit(name: &str, text: &[u8]) -> CqlResult<Unit> {
    let text = String::from_utf8_lossy(text);
    units(name).iter().copied().find(|(n, _)| *n == text).ok_or_else(|| {
        let known: Vec<&str> = units(name).iter().map(|(n, _)| *n).collect();
        let what = if name == "format_bytes" { "data storage unit" } else { "time unit" };
        invalid(format!("Unsupported {what}: {text}. Supported units are: {}", known.join(", ")))
    })
}

/// The value argument as a non-negative long.
fn amount(ty: &CqlType, value: &[u8]) -> CqlResult<i64> {
    let corrupt = |e: shoal_schema::ValueError| invalid(format!("Invalid value: {e}"));
    let n = match Value::deserialize(ty.unfrozen(), value).map_err(corrupt)? {
        Value::Tinyint(v) => i64::from(v),
        Value::Smallint(v) => i64::from(v),
        Value::Int(v) => i64::from(v),
        Value::Bigint(v) => v,
        // Java's `longValue()` of a BigInteger.
        varint @ Value::Varint(_) => match shoal_schema::cast::cast(&varint, &CqlType::Bigint).map_err(corrupt)? {
            Value::Bigint(v) => v,
            _ => return Err(invalid("value is too large for type long")),
        },
        Value::Ascii(s) | Value::Text(s) => {
            s.trim().parse().map_err(|_| invalid(format!("unable to convert string '{s}' to a value of type long")))?
        }
        other => return Err(invalid(format!("Invalid argument of type {} to a format function", other.cql_type()))),
    };
    if n < 0 {
        return Err(invalid("value must be non-negative"));
    }
    Ok(n)
}

/// `name(args)`: the value and any units, all present (not null).
pub fn apply(name: &str, arg_types: &[CqlType], args: &[Bytes]) -> CqlResult<Bytes> {
    let (Some(ty), Some(value)) = (arg_types.first(), args.first()) else {
        return Err(invalid(format!("Invalid number of arguments in call to function system.{name}")));
    };
    let n = amount(ty, value)?;
    let (source, target) = match &args[1..] {
        [] => {
            let source = default_unit(name);
            let in_smallest = (n as u128) * u128::from(source.1);
            let target = units(name).iter().rev().find(|u| in_smallest >= u128::from(u.1)).copied();
            (source, target.unwrap_or(source))
        }
        [target] => (default_unit(name), unit(name, target)?),
        [source, target, ..] => (unit(name, source)?, unit(name, target)?),
    };
    let converted = match name {
        // Sizes move to a smaller unit as longs, saturating.
        "format_bytes" if source.1 >= target.1 => n.saturating_mul((source.1 / target.1) as i64) as f64,
        _ => n as f64 * (source.1 as f64 / target.1 as f64),
    };
    Ok(Bytes::from(format!("{} {}", java_format(converted), target.0)))
}

/// The digits `FloatingDecimal` gives an integral double `n` below 2^63:
/// for a binary exponent `e` over 53 it drops the low decimal digits its
/// table names for `e - 54` (rounding half up), and pads with zeros.
fn java_long_digits(n: u64) -> String {
    const INSIGNIFICANT: [u32; 9] = [0, 0, 0, 0, 1, 1, 1, 2, 2];
    let exponent = 63 - n.leading_zeros() as usize;
    let dropped = exponent.checked_sub(54).and_then(|i| INSIGNIFICANT.get(i)).copied().unwrap_or(0);
    let scale = 10u64.pow(dropped);
    let kept = n / scale + u64::from(n % scale >= scale / 2 && dropped > 0);
    format!("{kept}{}", "0".repeat(dropped as usize))
}

/// Java's `DecimalFormat("#.##")` (rounding half up) of a non-negative double.
fn java_format(v: f64) -> String {
    if v >= 1e15 {
        // Below 2^63 Java takes the value as a long and rounds away the
        // digits its old `FloatingDecimal` deems insignificant for the
        // exponent; above, it prints the shortest digits, zero padded, as
        // Rust's `Display` does.
        return match v < 9_223_372_036_854_775_808.0 {
            true => java_long_digits(v as u64),
            false => format!("{v}"),
        };
    }
    // The exact binary value to 30 places decides the rounding.
    let exact = format!("{v:.30}");
    let (whole, fraction) = exact.split_once('.').unwrap_or((&exact, ""));
    let mut digits: Vec<u8> = format!("{whole}{}", &fraction[..2]).into_bytes();
    if fraction.as_bytes().get(2).is_some_and(|d| *d >= b'5') {
        let mut at = digits.len();
        loop {
            if at == 0 {
                digits.insert(0, b'1');
                break;
            }
            at -= 1;
            if digits[at] == b'9' {
                digits[at] = b'0';
            } else {
                digits[at] += 1;
                break;
            }
        }
    }
    let split = digits.len() - 2;
    let text = String::from_utf8_lossy(&digits).into_owned();
    let (whole, fraction) = text.split_at(split);
    let fraction = fraction.trim_end_matches('0');
    match fraction.is_empty() {
        true => whole.to_string(),
        false => format!("{whole}.{fraction}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, value: i32, units: &[&str]) -> String {
        let mut types = vec![CqlType::Int];
        let mut args = vec![Bytes::copy_from_slice(&value.to_be_bytes())];
        for u in units {
            types.push(CqlType::Ascii);
            args.push(Bytes::copy_from_slice(u.as_bytes()));
        }
        String::from_utf8(apply(name, &types, &args).expect("format").to_vec()).expect("utf-8")
    }

    #[test]
    fn sizes_pick_their_unit_and_round_half_up() {
        assert_eq!(call("format_bytes", 1_073_741_825, &[]), "1 GiB");
        assert_eq!(call("format_bytes", 1_073_741_823, &[]), "1024 MiB");
        assert_eq!(call("format_bytes", 102_775, &[]), "100.37 KiB");
        assert_eq!(call("format_bytes", 0, &[]), "0 B");
        assert_eq!(call("format_bytes", 1_563_401_650, &["KiB"]), "1526759.42 KiB");
        assert_eq!(call("format_bytes", 2_147_483_646, &["GiB", "B"]), "2305843007066210300 B");
        // Not the shortest digits (2305843008139952000): Java's.
        assert_eq!(call("format_bytes", 2_147_483_647, &["GiB", "B"]), "2305843008139952130 B");
        assert_eq!(java_format(9_223_372_036_854_775_807.0), "9223372036854776000");
        assert_eq!(java_format(35_182_224_605_184.0 * 100.0), "3518222460518400");
    }

    #[test]
    fn durations_default_to_milliseconds() {
        assert_eq!(call("format_time", 7_200_001, &[]), "2 h");
        assert_eq!(call("format_time", 9_000_000, &[]), "2.5 h");
        assert_eq!(call("format_time", 0, &[]), "0 ms");
        assert_eq!(call("format_time", 1_073_741_826, &["m"]), "17895.7 m");
        assert_eq!(call("format_time", 1_073_741_826, &["us", "ns"]), "1073741826000 ns");
    }

    #[test]
    fn exact_ties_round_up() {
        assert_eq!(java_format(0.125), "0.13");
        assert_eq!(java_format(2.0), "2");
        assert_eq!(java_format(0.995), "0.99", "0.995 is a little less than that in binary");
    }
}
