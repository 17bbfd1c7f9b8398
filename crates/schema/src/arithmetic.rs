//! Arithmetic on numbers (`SELECT a + b`, `v * 2`), as Cassandra's
//! `OperationFcts`: the operands are brought to one type and the result is
//! of that type.
//!
//! The result type follows Cassandra: floating point when either operand
//! is (float up to 4 bytes, double up to 8, decimal beyond: a varint or
//! decimal operand), else the wider integer (tinyint, smallint, int,
//! bigint, varint). Fixed-size integers wrap as Java's do; division or
//! remainder by zero fails with Java's message; varint and decimal are
//! exact while they fit 128 bits, and refused past that, as are decimal
//! division and remainder, which Shoal does not do yet.

use crate::cast::cast;
use crate::types::CqlType;
use crate::value::{bignum, Value, ValueError};

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
    let failed = |why: &str| ValueError::Operation(format!("the operation '{ty} {} {ty}' failed: {why}", op.symbol()));
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
            decimal(op, (*sa, ua), (*sb, ub)).ok_or_else(|| failed(decimal_limit(op)))?
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

fn overflow_or_zero(op: NumericOp, y: i128) -> &'static str {
    match op {
        NumericOp::Div | NumericOp::Mod if y == 0 => "/ by zero",
        _ => "the result does not fit 128 bits (not supported yet)",
    }
}

fn decimal_limit(op: NumericOp) -> &'static str {
    match op {
        NumericOp::Div | NumericOp::Mod => "decimal division is not supported yet",
        _ => "the result does not fit 128 bits (not supported yet)",
    }
}

/// Decimal `+`, `-` (at the larger scale) and `*` (scales added), exact
/// while the unscaled values fit 128 bits.
fn decimal(op: NumericOp, (sa, ua): (i32, &[u8]), (sb, ub): (i32, &[u8])) -> Option<Value> {
    let (x, y) = (wide(ua)?, wide(ub)?);
    let (scale, unscaled) = match op {
        NumericOp::Add | NumericOp::Sub => {
            let scale = sa.max(sb);
            let align = |v: i128, s: i32| v.checked_mul(10i128.checked_pow(u32::try_from(scale - s).ok()?)?);
            (scale, exact(op, align(x, sa)?, align(y, sb)?)?)
        }
        NumericOp::Mul => (sa.checked_add(sb)?, x.checked_mul(y)?),
        NumericOp::Div | NumericOp::Mod => return None,
    };
    Some(Value::Decimal { scale, unscaled: varint(unscaled) })
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
}
