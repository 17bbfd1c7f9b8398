//! `CAST(term AS type)` where a value is expected (`VALUES (1, CAST(1.3 AS
//! int))`, `WHERE k = CAST(? AS int)`: Cassandra's `castAs` functions),
//! which ScyllaDB's grammar takes only in a selection.
//!
//! The term's own type is the source: a type hint's or a nested cast's,
//! a literal's preferred type (an integer the smallest of int, bigint and
//! varint that holds it, a float a double), a function's result. A bind
//! marker or null tells none, and is refused as Cassandra refuses a call
//! that several `castAs` overloads match. The conversion is the one
//! selections use (`shoal_schema::cast`); its result must be of the
//! receiver's type, as a function's result must. `values` evaluates a
//! cast with these pieces; this module evaluates nothing itself.

use bytes::Bytes;
use shoal_schema::{cast, CqlType, Value};

use crate::ast::{Literal, Term};
use crate::error::{invalid, CqlError, CqlResult};

/// The types a `castAs` function is declared for, in Cassandra's order.
const SOURCES: [CqlType; 17] = [
    CqlType::Ascii,
    CqlType::Bigint,
    CqlType::Boolean,
    CqlType::Counter,
    CqlType::Date,
    CqlType::Decimal,
    CqlType::Double,
    CqlType::Float,
    CqlType::Inet,
    CqlType::Int,
    CqlType::Smallint,
    CqlType::Text,
    CqlType::Time,
    CqlType::Timestamp,
    CqlType::Timeuuid,
    CqlType::Tinyint,
    CqlType::Varint,
];

/// Cassandra's name of the function casting to `to` (`castAsInt`).
pub(crate) fn function_name(to: &CqlType) -> String {
    let name = to.unfrozen().to_string();
    let mut chars = name.chars();
    let first = chars.next().map(|c| c.to_ascii_uppercase()).into_iter();
    format!("castAs{}", first.chain(chars).collect::<String>())
}

/// The name a bind marker cast to `to` is reported under, as Cassandra
/// names a function's argument (so drivers do not route by it).
pub(crate) fn argument_name(to: &CqlType) -> String {
    format!("arg0(system.{})", function_name(to))
}

/// The type `term` is cast from when cast to `to`; `call_type` is what a
/// function call returns (the caller's: this module names no evaluator).
pub(crate) fn source_type(
    term: &Term,
    to: &CqlType,
    call_type: impl Fn(&str, &[Term]) -> Option<CqlType>,
) -> CqlResult<CqlType> {
    let from = match term {
        Term::Cast { ty, .. } | Term::CastAs { ty, .. } => Some(ty.unfrozen().clone()),
        Term::Literal(Literal::Integer(text)) => Some(crate::term_operations::preferred_integer_type(text)),
        Term::Literal(Literal::Float(_)) => Some(CqlType::Double),
        Term::Literal(Literal::String(_)) => Some(CqlType::Text),
        Term::Literal(Literal::Boolean(_)) => Some(CqlType::Boolean),
        Term::Literal(Literal::Uuid(_)) => Some(CqlType::Uuid),
        Term::Literal(Literal::Blob(_)) => Some(CqlType::Blob),
        Term::Literal(Literal::Duration(_)) => Some(CqlType::Duration),
        Term::FunctionCall { name, args } => call_type(name, args),
        _ => None,
    };
    let from = from.ok_or_else(|| ambiguous(to))?;
    if !cast::supported(&from, to) {
        // Cassandra's text for a call no overload takes.
        return Err(invalid(format!(
            "Invalid call to function system.{}, none of its type signatures match (called with {from})",
            function_name(to)
        )));
    }
    Ok(from)
}

/// Refuses a cast's result for a receiver of another type, as a
/// function's result is refused.
pub(crate) fn check_assignable(to: &CqlType, receiver: &str, receiver_ty: &CqlType) -> CqlResult<()> {
    let assignable = to.unfrozen() == receiver_ty.unfrozen()
        || (matches!(to.unfrozen(), CqlType::Ascii) && matches!(receiver_ty.unfrozen(), CqlType::Text));
    if assignable {
        return Ok(());
    }
    Err(invalid(format!(
        "Type error: cannot assign result of function system.{} (type {to}) to {receiver} (type {receiver_ty})",
        function_name(to)
    )))
}

/// The serialized value `bytes` of `from` cast to `to`.
pub(crate) fn convert(from: &CqlType, to: &CqlType, bytes: &[u8]) -> CqlResult<Bytes> {
    let failed =
        |e: shoal_schema::ValueError| invalid(format!("In call to function system.{}, {e}", function_name(to)));
    let value = Value::deserialize(from, bytes).map_err(failed)?;
    Ok(cast::cast(&value, to).map_err(failed)?.to_bytes().into())
}

/// Cassandra's refusal of an unset value as a cast's argument.
pub(crate) fn unset(to: &CqlType) -> CqlError {
    invalid(format!("Invalid unset value for argument in call to function system.{}", function_name(to)))
}

/// Cassandra's refusal of a cast whose argument tells no type.
fn ambiguous(to: &CqlType) -> CqlError {
    let function = function_name(to);
    let signatures: Vec<String> = SOURCES
        .iter()
        .filter(|from| *from != to.unfrozen() && cast::supported(from, to))
        .map(|from| format!("system.{function} : ({from}) -> {to}"))
        .collect();
    invalid(format!(
        "Ambiguous call to function system.{function} (can be matched by following signatures: {}): use type casts to disambiguate",
        signatures.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_cassandras_cast_functions() {
        assert_eq!(function_name(&CqlType::Int), "castAsInt");
        assert_eq!(function_name(&CqlType::Timestamp), "castAsTimestamp");
        assert_eq!(argument_name(&CqlType::Bigint), "arg0(system.castAsBigint)");
    }

    #[test]
    fn a_literal_casts_from_its_preferred_type_and_a_marker_is_ambiguous() {
        let float = Term::Literal(Literal::Float("1.3".into()));
        let no_call = |_: &str, _: &[Term]| None;
        assert_eq!(source_type(&float, &CqlType::Int, no_call).expect("a double"), CqlType::Double);
        let big = Term::Literal(Literal::Integer("9999999999".into()));
        assert_eq!(source_type(&big, &CqlType::Int, no_call).expect("a bigint"), CqlType::Bigint);
        let error = source_type(&Term::Bind(0), &CqlType::Int, no_call).expect_err("ambiguous").to_string();
        assert!(error.contains("Ambiguous call to function system.castAsInt"), "{error}");
        let text = Term::Literal(Literal::String("a".into()));
        assert!(source_type(&text, &CqlType::Int, no_call).is_err());
    }
}
