//! Arithmetic in terms (`WHERE c = 1 + 2`, `VALUES (?, 2 * ?)`, `SET v =
//! -(3 * 4)`, Cassandra 4's): which operand types an operation is
//! computed in, and the computation on serialized operands, which
//! selectors share.
//!
//! The operand types follow Cassandra's resolution of its operation
//! functions: of the pairs of numeric types whose result type is the
//! receiver's, the first whose operands all match exactly wins (an integer
//! literal is exactly an int, a bigint or a varint by its size, a float
//! literal a double, a cast its type); else the one pair every operand can
//! be assigned to; of several, the receiver's own type for both when no
//! operand is a bind marker, else Cassandra's "Ambiguous '+' operation"
//! error, which asks for a cast. An operation nested as an operand is
//! assignable to every numeric type, so it takes the type its parent gives.
//! Nothing here evaluates a term: `values` does, with the types chosen here.
//! `operate` also concatenates strings, which only selections add, and
//! moves a timestamp or a date by a duration (`t > ? - 5m`).

use bytes::Bytes;
use shoal_schema::arithmetic::{self, NumericOp};
use shoal_schema::temporal_arithmetic;
use shoal_schema::{CqlType, Value};

use crate::ast::{Literal, Term};
use crate::error::{invalid, CqlError, CqlResult};

/// The types operations compute in, in Cassandra's order of candidates.
const NUMERIC: [CqlType; 8] = [
    CqlType::Tinyint,
    CqlType::Smallint,
    CqlType::Int,
    CqlType::Bigint,
    CqlType::Float,
    CqlType::Double,
    CqlType::Varint,
    CqlType::Decimal,
];

/// How well an operand fits a parameter type (Cassandra's
/// `AssignmentTestable.TestResult`), worst first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fit {
    No,
    Weak,
    Exact,
}

/// The types `left` and `right` are evaluated in so that `left op right`
/// is a value of the receiver's type `receiver_ty`, named `receiver` in
/// errors.
pub(crate) fn operand_types(
    op: NumericOp,
    left: &Term,
    right: &Term,
    receiver: &str,
    receiver_ty: &CqlType,
) -> CqlResult<(CqlType, CqlType)> {
    let temporal = receiver_ty.unfrozen();
    if temporal_arithmetic::supported(op, temporal) && is_duration(right) {
        return Ok((temporal.clone(), CqlType::Duration));
    }
    let target = numeric_receiver(receiver_ty).ok_or_else(|| not_assignable(left, op, right, receiver, receiver_ty))?;
    let mut compatible = Vec::new();
    for a in &NUMERIC {
        for b in &NUMERIC {
            if arithmetic::result_type(a, b).as_ref() != Some(&target) {
                continue;
            }
            match fit(left, a).min(fit(right, b)) {
                Fit::Exact => return Ok((a.clone(), b.clone())),
                Fit::Weak => compatible.push((a.clone(), b.clone())),
                Fit::No => {}
            }
        }
    }
    if compatible.len() > 1 {
        let has_marker = matches!(left, Term::Bind(_)) || matches!(right, Term::Bind(_));
        let own = (target.clone(), target);
        if !has_marker && compatible.contains(&own) {
            return Ok(own);
        }
        return Err(ambiguous(op, left, right));
    }
    compatible.pop().ok_or_else(|| {
        invalid(format!(
            "the '{}' operation is not supported between {left} and {right} for {receiver} of type {receiver_ty}",
            op.symbol()
        ))
    })
}

/// The type `-operand` is evaluated in for the receiver: its own, if a
/// number.
pub(crate) fn negation_type(operand: &Term, receiver: &str, receiver_ty: &CqlType) -> CqlResult<CqlType> {
    numeric_receiver(receiver_ty).ok_or_else(|| {
        invalid(format!("Type error: cannot assign result of operation -{operand} to {receiver} (type {receiver_ty})"))
    })
}

/// `left op right` of serialized operands of `types`, computed in `ty`
/// (their [`arithmetic::result_type`]); null when either is null. A
/// failed operation (division by zero) is a FunctionFailure, as
/// Cassandra's OperationExecutionException is.
pub(crate) fn operate(
    op: NumericOp,
    types: &(CqlType, CqlType),
    ty: &CqlType,
    left: Option<Bytes>,
    right: Option<Bytes>,
) -> CqlResult<Option<Bytes>> {
    let (Some(a), Some(b)) = (left, right) else { return Ok(None) };
    if matches!(ty.unfrozen(), CqlType::Text | CqlType::Ascii) {
        return Ok(Some([a, b].concat().into()));
    }
    let value = |bytes: &Bytes, ty: &CqlType| {
        Value::deserialize(ty, bytes).map_err(|e| CqlError::Server(format!("an operand's value: {e}")))
    };
    let failure = |e: shoal_schema::ValueError| CqlError::FunctionFailure {
        keyspace: "system".to_string(),
        function: op.symbol().to_string(),
        arg_types: vec![types.0.to_string(), types.1.to_string()],
        message: e.to_string(),
    };
    let (a, b) = (value(&a, &types.0)?, value(&b, &types.1)?);
    let result = match types.1 {
        CqlType::Duration => temporal_arithmetic::shift(op, &a, &b),
        _ => arithmetic::apply(op, ty, &a, &b),
    }
    .map_err(failure)?;
    Ok(Some(Bytes::from(result.to_bytes())))
}

/// Cassandra's refusal of an operation whose operand types nothing tells.
pub(crate) fn ambiguous(op: NumericOp, left: &Term, right: &Term) -> CqlError {
    invalid(format!(
        "Ambiguous '{}' operation with args {left} and {right}: use type hint to disambiguate, example '(int) ?'",
        op.symbol()
    ))
}

/// The type of `left op right` computed in `types` (from
/// [`operand_types`]): a temporal operation's is its timestamp's or date's.
pub(crate) fn result_type(types: &(CqlType, CqlType)) -> Option<CqlType> {
    match types {
        (temporal, CqlType::Duration) => Some(temporal.clone()),
        (a, b) => arithmetic::result_type(a, b),
    }
}

/// Whether a term can be a duration operand (`5m`, `?`, `(duration) ?`).
fn is_duration(term: &Term) -> bool {
    match term {
        Term::Literal(Literal::Duration(_) | Literal::Null) | Term::Bind(_) => true,
        Term::Cast { ty, .. } => *ty.unfrozen() == CqlType::Duration,
        _ => false,
    }
}

/// The type of `left + right` of two strings (Cassandra's concatenation):
/// ascii only when both are, as text holds either.
pub(crate) fn concatenation_type(left: &CqlType, right: &CqlType) -> CqlType {
    match (left.unfrozen(), right.unfrozen()) {
        (CqlType::Ascii, CqlType::Ascii) => CqlType::Ascii,
        _ => CqlType::Text,
    }
}

/// The zero `-x` is subtracted from, of `ty`.
pub(crate) fn zero(ty: &CqlType) -> Bytes {
    // Every numeric type reads the literal 0.
    let zero = shoal_schema::literal::parse_literal(ty, shoal_schema::literal::LiteralKind::Integer, "0")
        .expect("0 is a value of every numeric type");
    Bytes::from(zero.to_bytes())
}

/// The name of Cassandra's function for an operator, which names the
/// operation's bind markers (`arg0(system._add)`).
pub(crate) fn function_name(op: NumericOp) -> &'static str {
    match op {
        NumericOp::Add => "_add",
        NumericOp::Sub => "_substract",
        NumericOp::Mul => "_multiply",
        NumericOp::Div => "_divide",
        NumericOp::Mod => "_modulo",
    }
}

/// The numeric type a receiver of `ty` takes an operation's result as (a
/// counter's is a bigint).
fn numeric_receiver(ty: &CqlType) -> Option<CqlType> {
    match ty.unfrozen() {
        CqlType::Counter => Some(CqlType::Bigint),
        ty if NUMERIC.contains(ty) => Some(ty.clone()),
        _ => None,
    }
}

fn fit(term: &Term, ty: &CqlType) -> Fit {
    let numeric = NUMERIC.contains(ty);
    match term {
        Term::Literal(Literal::Integer(text)) if *ty == preferred_integer_type(text) => Fit::Exact,
        Term::Literal(Literal::Integer(_)) if numeric => Fit::Weak,
        Term::Literal(Literal::Float(_)) if *ty == CqlType::Double => Fit::Exact,
        Term::Literal(Literal::Float(_)) if matches!(ty, CqlType::Float | CqlType::Decimal) => Fit::Weak,
        Term::Cast { ty: cast, .. } | Term::CastAs { ty: cast, .. } if cast.unfrozen() == ty => Fit::Exact,
        Term::Literal(Literal::Null) | Term::Bind(_) | Term::FunctionCall { .. } => Fit::Weak,
        Term::Operation { .. } | Term::Negation(_) if numeric => Fit::Weak,
        _ => Fit::No,
    }
}

/// The smallest of int, bigint and varint that holds an integer literal
/// (Cassandra's preferred type for it).
pub(crate) fn preferred_integer_type(text: &str) -> CqlType {
    if text.parse::<i32>().is_ok() {
        CqlType::Int
    } else if text.parse::<i64>().is_ok() {
        CqlType::Bigint
    } else {
        CqlType::Varint
    }
}

fn not_assignable(left: &Term, op: NumericOp, right: &Term, receiver: &str, receiver_ty: &CqlType) -> CqlError {
    invalid(format!(
        "Type error: cannot assign result of operation {left} {} {right} to {receiver} (type {receiver_ty})",
        op.symbol()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(text: &str) -> Term {
        Term::Literal(Literal::Integer(text.into()))
    }

    fn types(left: &Term, right: &Term, ty: CqlType) -> CqlResult<(CqlType, CqlType)> {
        operand_types(NumericOp::Add, left, right, "c", &ty)
    }

    #[test]
    fn literals_take_the_receivers_type_or_their_own() {
        // Only tinyint + tinyint gives a tinyint.
        assert_eq!(
            types(&int("1"), &int("1"), CqlType::Tinyint).expect("resolves"),
            (CqlType::Tinyint, CqlType::Tinyint)
        );
        assert_eq!(
            types(&int("1"), &Term::Bind(0), CqlType::Tinyint).expect("resolves"),
            (CqlType::Tinyint, CqlType::Tinyint)
        );
        // int + int matches two int literals exactly.
        assert_eq!(types(&int("1"), &int("1"), CqlType::Int).expect("resolves"), (CqlType::Int, CqlType::Int));
        // Several pairs give a smallint; no marker: the receiver's own.
        let nested = Term::Operation { op: NumericOp::Add, left: Box::new(int("1")), right: Box::new(int("1")) };
        assert_eq!(
            types(&int("1"), &nested, CqlType::Smallint).expect("resolves"),
            (CqlType::Smallint, CqlType::Smallint)
        );
        // A cast picks its side; a big literal is a bigint.
        let cast = Term::Cast { ty: CqlType::Int, term: Box::new(Term::Bind(0)) };
        assert_eq!(types(&cast, &int("1"), CqlType::Int).expect("resolves"), (CqlType::Int, CqlType::Int));
        assert_eq!(
            types(&int("1"), &int("4294967296"), CqlType::Bigint).expect("resolves"),
            (CqlType::Int, CqlType::Bigint)
        );
    }

    #[test]
    fn a_marker_among_several_pairs_is_ambiguous_and_a_text_receiver_refused() {
        let ambiguous = types(&Term::Bind(0), &int("1"), CqlType::Int).expect_err("refused").to_string();
        assert!(
            ambiguous.contains(
                "Ambiguous '+' operation with args ? and 1: use type hint to disambiguate, example '(int) ?'"
            ),
            "{ambiguous}"
        );
        let text = types(&int("1"), &int("1"), CqlType::Text).expect_err("refused").to_string();
        assert!(text.contains("cannot assign result of operation 1 + 1 to c (type text)"), "{text}");
    }

    #[test]
    fn operations_compute_in_the_result_type_and_pass_nulls() {
        let two = Bytes::from(Value::Int(2).to_bytes());
        let three = Bytes::from(Value::Int(3).to_bytes());
        let pair = (CqlType::Int, CqlType::Int);
        let sum = operate(NumericOp::Mul, &pair, &CqlType::Int, Some(two.clone()), Some(three)).expect("resolves");
        assert_eq!(sum, Some(Bytes::from(Value::Int(6).to_bytes())));
        assert_eq!(operate(NumericOp::Add, &pair, &CqlType::Int, Some(two), None).expect("resolves"), None);
        assert_eq!(zero(&CqlType::Decimal), Bytes::from(Value::Decimal { scale: 0, unscaled: vec![0] }.to_bytes()));
    }
}
