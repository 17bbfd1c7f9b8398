//! Cassandra 5's math functions — `abs`, `exp`, `log`, `log10`, `round` —
//! on every numeric type, each returning its argument's type, computed as
//! Cassandra's `NumberType`s do: fixed-size integers go through a Java
//! `double` and back with Java's casts (`(int) Math.exp(x)`), `abs` wraps
//! at the minimum, `round` of an integer is the integer, of a float or
//! double Java's `Math.round` (half up), of a decimal half up to scale 0;
//! varints and decimals take `exp` and the logarithms through a double.

use crate::cast::cast;
use crate::types::CqlType;
use crate::value::{bignum, Value, ValueError};

/// The math functions, by CQL name.
pub const NAMES: [&str; 5] = ["abs", "exp", "log", "log10", "round"];

/// Whether `ty` is a type the math functions take (and return): a number.
pub fn takes(ty: &CqlType) -> bool {
    crate::value::is_numeric(ty)
}

/// The types the math functions take, in Cassandra's order of overloads.
pub fn types() -> [CqlType; 9] {
    [
        CqlType::Tinyint,
        CqlType::Smallint,
        CqlType::Int,
        CqlType::Float,
        CqlType::Bigint,
        CqlType::Double,
        CqlType::Varint,
        CqlType::Decimal,
        CqlType::Counter,
    ]
}

/// Math function `name` of `value`.
pub fn apply(name: &str, value: &Value) -> Result<Value, ValueError> {
    let failed = |why: &str| ValueError::Operation(format!("{name}({}) failed: {why}", value.cql_type()));
    let real = |x: f64| -> f64 {
        match name {
            "exp" => x.exp(),
            "log" => x.ln(),
            _ => x.log10(),
        }
    };
    // Java casts a double to an int or a long saturating, and narrows an
    // int to a byte or short wrapping: `$via` is the saturating step.
    macro_rules! integer {
        ($x:expr, $variant:path, $via:ty, $ty:ty) => {{
            let x = $x;
            $variant(match name {
                "abs" => x.wrapping_abs(),
                "round" => x,
                _ => real(x as f64) as $via as $ty,
            })
        }};
    }
    Ok(match value {
        Value::Tinyint(x) => integer!(*x, Value::Tinyint, i32, i8),
        Value::Smallint(x) => integer!(*x, Value::Smallint, i32, i16),
        Value::Int(x) => integer!(*x, Value::Int, i32, i32),
        Value::Bigint(x) => integer!(*x, Value::Bigint, i64, i64),
        Value::Counter(x) => integer!(*x, Value::Counter, i64, i64),
        Value::Float(x) => Value::Float(match name {
            "abs" => x.abs(),
            "round" => java_round(f64::from(*x)) as i32 as f32,
            _ => real(f64::from(*x)) as f32,
        }),
        Value::Double(x) => Value::Double(match name {
            "abs" => x.abs(),
            "round" => java_round(*x) as f64,
            _ => real(*x),
        }),
        Value::Varint(_) | Value::Decimal { .. } if !matches!(name, "abs" | "round") => {
            let Value::Double(x) = cast(value, &CqlType::Double)? else { return Err(failed("not a number")) };
            let result = real(x);
            if !result.is_finite() {
                return Err(failed("the result is not a finite number"));
            }
            cast(&Value::Double(result), &value.cql_type())?
        }
        Value::Varint(v) => match name {
            "abs" => Value::Varint(negated_if_negative(v).ok_or_else(|| failed("too large"))?),
            _ => value.clone(),
        },
        Value::Decimal { scale, unscaled } => match name {
            "abs" => Value::Decimal {
                scale: *scale,
                unscaled: negated_if_negative(unscaled).ok_or_else(|| failed("too large"))?,
            },
            _ => round_decimal(*scale, unscaled).ok_or_else(|| failed("too large"))?,
        },
        _ => return Err(failed("not a number")),
    })
}

/// Java's `Math.round`: the closest integer, ties toward positive infinity.
fn java_round(x: f64) -> i64 {
    (x + 0.5).floor() as i64
}

/// The absolute value of a two's complement big-endian integer.
fn negated_if_negative(twos: &[u8]) -> Option<Vec<u8>> {
    if twos.first().is_none_or(|b| *b & 0x80 == 0) {
        return Some(twos.to_vec());
    }
    let value = bignum::to_i128(twos)?.checked_neg()?;
    Some(bignum::minimal(&value.to_be_bytes()).to_vec())
}

/// A decimal rounded half up (away from zero at .5) to scale 0, as
/// `BigDecimal.setScale(0, RoundingMode.HALF_UP)`.
fn round_decimal(scale: i32, unscaled: &[u8]) -> Option<Value> {
    if scale <= 0 {
        return Some(Value::Decimal { scale, unscaled: unscaled.to_vec() });
    }
    let value = bignum::to_i128(unscaled)?;
    let divisor = 10i128.checked_pow(u32::try_from(scale).ok()?)?;
    let (quotient, remainder) = (value / divisor, value % divisor);
    let rounded = match remainder.unsigned_abs() * 2 >= divisor.unsigned_abs() {
        true => quotient + value.signum(),
        false => quotient,
    };
    Some(Value::Decimal { scale: 0, unscaled: bignum::minimal(&rounded.to_be_bytes()).to_vec() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decimal(scale: i32, unscaled: i64) -> Value {
        Value::Decimal { scale, unscaled: bignum::minimal(&i128::from(unscaled).to_be_bytes()).to_vec() }
    }

    #[test]
    fn integers_go_through_doubles_as_in_java() {
        assert_eq!(apply("abs", &Value::Int(-3)).expect("abs"), Value::Int(3));
        assert_eq!(apply("abs", &Value::Int(i32::MIN)).expect("wraps"), Value::Int(i32::MIN));
        assert_eq!(apply("exp", &Value::Int(2)).expect("exp"), Value::Int(7));
        assert_eq!(apply("log", &Value::Int(0)).expect("-inf saturates"), Value::Int(i32::MIN));
        assert_eq!(apply("log10", &Value::Bigint(1000)).expect("log10"), Value::Bigint(3));
        assert_eq!(apply("round", &Value::Smallint(-7)).expect("round"), Value::Smallint(-7));
        assert_eq!(apply("exp", &Value::Tinyint(10)).expect("wraps"), Value::Tinyint(22026_i64 as i8));
    }

    #[test]
    fn floating_point_and_decimals() {
        assert_eq!(apply("round", &Value::Double(2.5)).expect("half up"), Value::Double(3.0));
        assert_eq!(apply("round", &Value::Double(-2.5)).expect("half up"), Value::Double(-2.0));
        assert_eq!(apply("round", &Value::Float(1.4)).expect("round"), Value::Float(1.0));
        assert_eq!(apply("abs", &Value::Double(-0.5)).expect("abs"), Value::Double(0.5));
        assert_eq!(apply("abs", &decimal(2, -1234)).expect("abs"), decimal(2, 1234));
        assert_eq!(apply("round", &decimal(1, 25)).expect("half up"), decimal(0, 3));
        assert_eq!(apply("round", &decimal(1, -25)).expect("away from zero"), decimal(0, -3));
        assert_eq!(apply("round", &decimal(2, 1249)).expect("down"), decimal(0, 12));
        assert_eq!(apply("log10", &decimal(0, 100)).expect("log10"), decimal(1, 20));
        assert!(apply("log", &decimal(0, 0)).is_err());
    }
}
