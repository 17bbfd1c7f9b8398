//! Arithmetic on numbers (`SELECT a + b`, `v * 2`), as Cassandra's
//! `OperationFcts`: the operands are brought to one type and the result is
//! of that type.
//!
//! The result type follows Cassandra: floating point when either operand
//! is (float up to 4 bytes, double up to 8, decimal beyond: a varint or
//! decimal operand), else the wider integer (tinyint, smallint, int,
//! bigint, varint). Fixed-size integers wrap as Java's do; division or
//! remainder by zero fails with Java's message (`/ by zero`, `BigInteger
//! divide by zero`, `Division by zero`); floating point division by zero
//! gives an infinity or NaN, as in Java. Varint and decimal operands are
//! exact while they fit 128 bits, and refused past that, but for decimal
//! `+` and `-`, of any size and rounded half up to 10,000 digits as
//! Cassandra 5's; decimal division
//! is Cassandra's (a scale of at least 32, enough for 32 significant
//! digits, rounded half up, trailing zeros stripped), decimal remainder
//! Java's `BigDecimal.remainder`, with its scale.

use crate::cast::cast;
use crate::types::CqlType;
use crate::value::{self, bignum, Value, ValueError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumericOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
}

impl NumericOp {
    pub fn symbol(self) -> &'static str {
        match self {
            NumericOp::Add => "+",
            NumericOp::Sub => "-",
            NumericOp::Mul => "*",
            NumericOp::Div => "/",
            NumericOp::Mod => "%",
        }
    }
}

/// Bytes of a numeric type, as Cassandra sizes them; `None` for the
/// arbitrary-precision ones and for non-numbers.
fn size(ty: &CqlType) -> Option<Option<u8>> {
    Some(match ty.unfrozen() {
        CqlType::Tinyint => Some(1),
        CqlType::Smallint => Some(2),
        CqlType::Int | CqlType::Float => Some(4),
        CqlType::Bigint | CqlType::Counter | CqlType::Double => Some(8),
        CqlType::Varint | CqlType::Decimal => None,
        _ => return None,
    })
}

/// The type `left op right` is computed in; `None` when an operand is not
/// a number.
pub fn result_type(left: &CqlType, right: &CqlType) -> Option<CqlType> {
    let (a, b) = (size(left)?, size(right)?);
    let floating = |ty: &CqlType| matches!(ty.unfrozen(), CqlType::Float | CqlType::Double | CqlType::Decimal);
    let widest = match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        _ => None,
    };
    Some(match (floating(left) || floating(right), widest) {
        (true, Some(4)) => CqlType::Float,
        (true, Some(8)) => CqlType::Double,
        (true, _) => CqlType::Decimal,
        (false, Some(1)) => CqlType::Tinyint,
        (false, Some(2)) => CqlType::Smallint,
        (false, Some(4)) => CqlType::Int,
        (false, Some(8)) => CqlType::Bigint,
        (false, _) => CqlType::Varint,
    })
}

/// `left op right` computed in `ty` (from [`result_type`]).
pub fn apply(op: NumericOp, ty: &CqlType, left: &Value, right: &Value) -> Result<Value, ValueError> {
    let (a, b) = (cast(left, ty)?, cast(right, ty)?);
    let (left_ty, right_ty) = (left.cql_type(), right.cql_type());
    let failed = |why: &str| {
        ValueError::Operation(format!("the operation '{left_ty} {} {right_ty}' failed: {why}", op.symbol()))
    };
    macro_rules! integers {
        ($x:expr, $y:expr, $variant:path) => {{
            let (x, y) = ($x, $y);
            $variant(match op {
                NumericOp::Add => x.wrapping_add(y),
                NumericOp::Sub => x.wrapping_sub(y),
                NumericOp::Mul => x.wrapping_mul(y),
                NumericOp::Div | NumericOp::Mod if y == 0 => return Err(failed("/ by zero")),
                NumericOp::Div => x.wrapping_div(y),
                NumericOp::Mod => x.wrapping_rem(y),
            })
        }};
    }
    macro_rules! floats {
        ($x:expr, $y:expr, $variant:path) => {{
            let (x, y) = ($x, $y);
            $variant(match op {
                NumericOp::Add => x + y,
                NumericOp::Sub => x - y,
                NumericOp::Mul => x * y,
                NumericOp::Div => x / y,
                NumericOp::Mod => x % y,
            })
        }};
    }
    Ok(match (&a, &b) {
        (Value::Tinyint(x), Value::Tinyint(y)) => integers!(*x, *y, Value::Tinyint),
        (Value::Smallint(x), Value::Smallint(y)) => integers!(*x, *y, Value::Smallint),
        (Value::Int(x), Value::Int(y)) => integers!(*x, *y, Value::Int),
        (Value::Bigint(x), Value::Bigint(y)) => integers!(*x, *y, Value::Bigint),
        (Value::Float(x), Value::Float(y)) => floats!(*x, *y, Value::Float),
        (Value::Double(x), Value::Double(y)) => floats!(*x, *y, Value::Double),
        (Value::Varint(x), Value::Varint(y)) => {
            let (x, y) = (wide(x).ok_or_else(|| failed("too large"))?, wide(y).ok_or_else(|| failed("too large"))?);
            Value::Varint(varint(exact(op, x, y).ok_or_else(|| failed(overflow_or_zero(op, y)))?))
        }
        (Value::Decimal { scale: sa, unscaled: ua }, Value::Decimal { scale: sb, unscaled: ub }) => {
            decimal(op, (*sa, ua), (*sb, ub)).map_err(failed)?
        }
        _ => return Err(failed("not numbers")),
    })
}

fn wide(twos: &[u8]) -> Option<i128> {
    bignum::to_i128(twos)
}

fn varint(value: i128) -> Vec<u8> {
    bignum::minimal(&value.to_be_bytes()).to_vec()
}

fn exact(op: NumericOp, x: i128, y: i128) -> Option<i128> {
    match op {
        NumericOp::Add => x.checked_add(y),
        NumericOp::Sub => x.checked_sub(y),
        NumericOp::Mul => x.checked_mul(y),
        NumericOp::Div => x.checked_div(y),
        NumericOp::Mod => x.checked_rem(y),
    }
}

/// Java's `BigInteger` message for a varint divided by zero.
fn overflow_or_zero(op: NumericOp, y: i128) -> &'static str {
    match op {
        NumericOp::Div | NumericOp::Mod if y == 0 => "BigInteger divide by zero",
        _ => TOO_LARGE,
    }
}

const TOO_LARGE: &str = "the result does not fit 128 bits (not supported yet)";

/// Significant digits a decimal sum keeps (Cassandra's
/// `DecimalType.MAX_PRECISION`): 1e10000 + 1 is 1e10000.
const DECIMAL_SUM_PRECISION: usize = 10_000;

/// Decimal `+` and `-` of any size (at the larger scale, then rounded half
/// up to [`DECIMAL_SUM_PRECISION`] digits), `*` (scales added), `/` and
/// `%`, exact while the unscaled values fit 128 bits.
fn decimal(op: NumericOp, (sa, ua): (i32, &[u8]), (sb, ub): (i32, &[u8])) -> Result<Value, &'static str> {
    let unscaled_pair = || Ok::<_, &'static str>((wide(ua).ok_or(TOO_LARGE)?, wide(ub).ok_or(TOO_LARGE)?));
    let (scale, unscaled) = match op {
        NumericOp::Add | NumericOp::Sub => return decimal_sum(op, (sa, ua), (sb, ub)),
        NumericOp::Mul => {
            let (x, y) = unscaled_pair()?;
            (sa.checked_add(sb).ok_or(TOO_LARGE)?, x.checked_mul(y).ok_or(TOO_LARGE)?)
        }
        NumericOp::Div => {
            let (x, y) = unscaled_pair()?;
            return decimal_divide((sa, x), (sb, y));
        }
        NumericOp::Mod => {
            let (x, y) = unscaled_pair()?;
            decimal_remainder((sa, x), (sb, y))?
        }
    };
    Ok(Value::Decimal { scale, unscaled: varint(unscaled) })
}

fn decimal_sum(op: NumericOp, a: (i32, &[u8]), (sb, ub): (i32, &[u8])) -> Result<Value, &'static str> {
    let negated;
    let ub = match op {
        NumericOp::Sub => {
            negated = bignum::negate(ub);
            &negated[..]
        }
        _ => ub,
    };
    let Ok(Value::Decimal { scale, unscaled }) = value::add_decimals(a, (sb, ub)) else {
        return Err("the operands' scales are more than 10000 apart (not supported)");
    };
    let (scale, unscaled) = value::round_decimal_half_up(scale, &unscaled, DECIMAL_SUM_PRECISION).ok_or(TOO_LARGE)?;
    Ok(Value::Decimal { scale, unscaled })
}

/// `v × 10^by`, if it fits.
fn align(v: i128, by: i32) -> Option<i128> {
    v.checked_mul(10i128.checked_pow(u32::try_from(by).ok()?)?)
}

/// Decimal digits of `v` (Java's `precision`: 1 for zero).
fn precision(v: u128) -> i64 {
    i64::from(v.checked_ilog10().unwrap_or(0)) + 1
}

/// Cassandra's `DecimalType.divide`: the quotient at a scale of 32 or
/// more (32 significant digits, at least each operand's scale, at most
/// 1000), rounded half up, without trailing zeros.
fn decimal_divide((sa, x): (i32, i128), (sb, y): (i32, i128)) -> Result<Value, &'static str> {
    let (a, b) = (x.unsigned_abs(), y.unsigned_abs());
    let first_digit = (precision(a) - i64::from(sa)) - (precision(b) - i64::from(sb));
    let scale = (32 - first_digit).max(sa.into()).max(sb.into()).clamp(32, 1000);
    // The quotient's unscaled value is a × 10^raise / b.
    let raise = scale + i64::from(sb) - i64::from(sa);
    if b == 0 {
        return Err(decimal_by_zero(x, raise));
    }
    let divisor = match raise {
        0.. => Some(b),
        _ => u32::try_from(-raise).ok().and_then(|e| 10u128.checked_pow(e)).and_then(|p| b.checked_mul(p)),
    }
    .ok_or(TOO_LARGE)?;
    let mut digits = (a / divisor).to_string().into_bytes();
    let mut rem = a % divisor;
    for _ in 0..raise.max(0) {
        let shifted = rem.checked_mul(10).ok_or(TOO_LARGE)?;
        // shifted < 10 × divisor: one digit.
        digits.push(b'0' + (shifted / divisor) as u8);
        rem = shifted % divisor;
    }
    if rem >= divisor - rem {
        round_up(&mut digits);
    }
    let mut scale = scale;
    while digits.len() > 1 && digits.last() == Some(&b'0') {
        digits.pop();
        scale -= 1;
    }
    let magnitude = bignum::from_decimal_digits(&digits);
    let scale = if magnitude.is_empty() { 0 } else { i32::try_from(scale).map_err(|_| TOO_LARGE)? };
    let unscaled = bignum::from_magnitude((x < 0) != (y < 0), &magnitude);
    Ok(Value::Decimal { scale, unscaled })
}

/// Adds one to a string of ASCII digits.
fn round_up(digits: &mut Vec<u8>) {
    for digit in digits.iter_mut().rev() {
        if *digit == b'9' {
            *digit = b'0';
        } else {
            *digit += 1;
            return;
        }
    }
    digits.insert(0, b'1');
}

/// Java's message for a decimal divided by zero at `raise`: its dividend
/// scaled up as a `long` where that fits (`/ by zero`), as a `BigInteger`
/// otherwise.
fn decimal_by_zero(x: i128, raise: i64) -> &'static str {
    let scaled = u32::try_from(raise).ok().filter(|r| *r < 19).and_then(|r| align(x, r as i32));
    match scaled.and_then(|v| i64::try_from(v).ok()) {
        Some(_) => "/ by zero",
        None => "BigInteger divide by zero",
    }
}

/// Java's `BigDecimal.remainder`: `x - trunc(x / y) × y`, at the scale of
/// the dividend, or of the product where that is finer; returns (scale,
/// unscaled).
fn decimal_remainder((sa, x): (i32, i128), (sb, y): (i32, i128)) -> Result<(i32, i128), &'static str> {
    if y == 0 {
        return Err(if x == 0 { "Division undefined" } else { "Division by zero" });
    }
    let common = sa.max(sb);
    let aligned = align(x, common - sa).zip(align(y, common - sb));
    let (x, y) = aligned.ok_or(TOO_LARGE)?;
    let (quotient, rem) = (x.checked_div(y).ok_or(TOO_LARGE)?, x.checked_rem(y).ok_or(TOO_LARGE)?);
    let scale = match quotient {
        0 => sa,
        q if sa < sb => sa.max(sb - trailing_zeros(q)),
        _ => sa,
    };
    // The remainder is a multiple of 10^(common - scale), exactly.
    let unscaled = rem / 10i128.pow((common - scale).unsigned_abs());
    Ok((scale, unscaled))
}

fn trailing_zeros(mut v: i128) -> i32 {
    let mut zeros = 0;
    while v != 0 && v % 10 == 0 {
        v /= 10;
        zeros += 1;
    }
    zeros
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_types_follow_cassandra() {
        let t = |a, b| result_type(&a, &b).expect("numbers");
        assert_eq!(t(CqlType::Int, CqlType::Tinyint), CqlType::Int);
        assert_eq!(t(CqlType::Int, CqlType::Bigint), CqlType::Bigint);
        assert_eq!(t(CqlType::Int, CqlType::Float), CqlType::Float);
        assert_eq!(t(CqlType::Bigint, CqlType::Float), CqlType::Double);
        assert_eq!(t(CqlType::Varint, CqlType::Int), CqlType::Varint);
        assert_eq!(t(CqlType::Varint, CqlType::Double), CqlType::Decimal);
        assert_eq!(result_type(&CqlType::Text, &CqlType::Int), None);
    }

    #[test]
    fn operations_are_javas() {
        let int = |op, a, b| apply(op, &CqlType::Int, &Value::Int(a), &Value::Int(b));
        assert_eq!(int(NumericOp::Add, i32::MAX, 1).expect("wraps"), Value::Int(i32::MIN));
        assert_eq!(int(NumericOp::Div, -7, 2).expect("truncates"), Value::Int(-3));
        assert_eq!(int(NumericOp::Mod, -7, 2).expect("sign of dividend"), Value::Int(-1));
        let zero = int(NumericOp::Div, 1, 0).expect_err("by zero").to_string();
        assert!(zero.contains("the operation 'int / int' failed: / by zero"), "{zero}");
        let mixed = apply(NumericOp::Mul, &CqlType::Double, &Value::Int(3), &Value::Double(0.5)).expect("mixed");
        assert_eq!(mixed, Value::Double(1.5));
        let d = |scale, unscaled: i64| Value::Decimal { scale, unscaled: varint(i128::from(unscaled)) };
        assert_eq!(apply(NumericOp::Add, &CqlType::Decimal, &d(1, 15), &d(2, 25)).expect("adds"), d(2, 175));
        assert_eq!(apply(NumericOp::Mul, &CqlType::Decimal, &d(1, 15), &d(1, 20)).expect("multiplies"), d(2, 300));
    }

    fn decimal(text: &str) -> Value {
        let (int, frac) = text.split_once('.').unwrap_or((text, ""));
        let unscaled: i128 = format!("{int}{frac}").parse().expect("a number");
        Value::Decimal { scale: frac.len() as i32, unscaled: varint(unscaled) }
    }

    fn decimal_op(op: NumericOp, a: &str, b: &str) -> Result<String, String> {
        match apply(op, &CqlType::Decimal, &decimal(a), &decimal(b)) {
            Ok(Value::Decimal { scale, unscaled }) => Ok(crate::value::decimal_to_string(scale, &unscaled)),
            Ok(other) => Err(format!("{other:?}")),
            Err(e) => Err(e.to_string()),
        }
    }

    #[test]
    fn decimal_division_is_cassandras() {
        let div = |a, b| decimal_op(NumericOp::Div, a, b).expect("divides");
        assert_eq!(div("1", "3"), "0.33333333333333333333333333333333");
        assert_eq!(div("2", "3"), "0.66666666666666666666666666666667");
        assert_eq!(div("10", "4"), "2.5");
        assert_eq!(div("100", "1"), "1E+2");
        assert_eq!(div("-7.5", "2.5"), "-3");
        assert_eq!(div("0", "5"), "0");
        assert_eq!(div("123456789", "0.001"), "1.23456789E+11");
        let zero = decimal_op(NumericOp::Div, "1.5", "0").expect_err("by zero");
        assert!(zero.ends_with("failed: BigInteger divide by zero"), "{zero}");
    }

    #[test]
    fn decimal_sums_are_exact_at_any_size_to_ten_thousand_digits() {
        let big = |text: &str| {
            crate::literal::parse_literal(&CqlType::Decimal, crate::literal::LiteralKind::Float, text)
                .expect("a decimal literal")
        };
        let sum = |op, a: &str, b: &str| match apply(op, &CqlType::Decimal, &big(a), &big(b)).expect("sums") {
            Value::Decimal { scale, unscaled } => crate::value::decimal_to_string(scale, &unscaled),
            other => panic!("not a decimal: {other:?}"),
        };
        let ones = "1".repeat(60);
        assert_eq!(sum(NumericOp::Add, &ones, &ones), "2".repeat(60));
        assert_eq!(sum(NumericOp::Sub, &ones, &format!("{ones}.5")), "-0.5");
        // Past 10,000 digits the smaller operand is rounded away, as Cassandra's.
        assert_eq!(sum(NumericOp::Add, "1e10000", "1"), format!("1.{}E+10000", "0".repeat(9999)));
        assert_eq!(sum(NumericOp::Sub, "1e10000", "1e10000"), "0E+10000");
    }

    #[test]
    fn decimal_rounding_carries_through_nines() {
        let nines = crate::value::bignum::from_magnitude(false, &crate::value::bignum::from_decimal_digits(b"9995"));
        let (scale, unscaled) = crate::value::round_decimal_half_up(1, &nines, 3).expect("rounds");
        assert_eq!(crate::value::decimal_to_string(scale, &unscaled), "1.00E+3");
        let (scale, unscaled) = crate::value::round_decimal_half_up(1, &nines, 4).expect("fits");
        assert_eq!(crate::value::decimal_to_string(scale, &unscaled), "999.5");
    }

    #[test]
    fn decimal_remainder_is_javas() {
        let rem = |a, b| decimal_op(NumericOp::Mod, a, b).expect("remainder");
        assert_eq!(rem("7.5", "2"), "1.5");
        assert_eq!(rem("7", "2.5"), "2.0");
        assert_eq!(rem("-7", "2"), "-1");
        assert_eq!(rem("10", "3"), "1");
        assert_eq!(rem("1", "3.00"), "1");
        let zero = decimal_op(NumericOp::Mod, "1.5", "0").expect_err("by zero");
        assert!(zero.ends_with("failed: Division by zero"), "{zero}");
        let undefined = decimal_op(NumericOp::Mod, "0", "0").expect_err("undefined");
        assert!(undefined.ends_with("failed: Division undefined"), "{undefined}");
    }
}
