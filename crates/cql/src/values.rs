//! Evaluating terms (literals, bind markers, collection literals, function
//! calls) into serialized values of a known receiver type.
//!
//! Every value that reaches storage passes through here and is validated
//! against its receiver's type, so storage never holds a malformed value.

use bytes::{Bytes, BytesMut};
use shoal_schema::arithmetic::NumericOp;
use shoal_schema::collection;
use shoal_schema::literal::{parse_literal, LiteralKind};
use shoal_schema::value::{compare, validate};
use shoal_schema::{CqlType, UserType};

use crate::ast::{Literal, Term};
use crate::error::{invalid, CqlResult};
use crate::functions;
use crate::term_casts;
use crate::term_operations;

/// A value a term stands for: as the client bound it to a marker, or
/// as a term (literal, function call, collection) evaluated to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BoundValue {
    Value(Bytes),
    Null,
    /// "Leave this column as it is" (protocol v4).
    Unset,
}

impl BoundValue {
    pub fn into_option(self) -> Option<Bytes> {
        match self {
            BoundValue::Value(v) => Some(v),
            BoundValue::Null | BoundValue::Unset => None,
        }
    }
}

/// The bound values of one execution, by marker index, and what a user
/// function called in a term needs: the keyspace an unqualified name is
/// looked up in (the statement's table's) and the role that must be
/// allowed to EXECUTE it.
#[derive(Debug, Clone, Copy)]
pub struct Bindings<'a> {
    pub values: &'a [BoundValue],
    pub keyspace: Option<&'a str>,
    pub user: Option<&'a str>,
}

impl<'a> Bindings<'a> {
    /// No values and no keyspace: constants alone.
    pub const NONE: Bindings<'static> = Bindings { values: &[], keyspace: None, user: None };

    pub fn of(values: &'a [BoundValue], user: Option<&'a str>) -> Self {
        Bindings { values, keyspace: None, user }
    }

    /// The same values, user functions looked up in `keyspace`.
    pub fn in_keyspace<'b>(self, keyspace: &'b str) -> Bindings<'b>
    where
        'a: 'b,
    {
        Bindings { keyspace: Some(keyspace), ..self }
    }
}

/// Who receives a value: named in error messages as Cassandra does.
#[derive(Debug, Clone, Copy)]
pub struct Receiver<'a> {
    pub name: &'a str,
    pub ty: &'a CqlType,
}

/// The value `term` stands for, validated against the receiver's type and
/// in normal form (sets sorted and without duplicates, maps by key:
/// [`collection::normalize`]), so stored values and keys never depend on
/// the order a client sent elements in.
pub fn eval(term: &Term, receiver: Receiver<'_>, bindings: Bindings<'_>) -> CqlResult<BoundValue> {
    Ok(match eval_term(term, receiver, bindings)? {
        BoundValue::Value(v) if collection::may_need_normalizing(receiver.ty) => {
            BoundValue::Value(collection::normalize(receiver.ty, &v))
        }
        other => other,
    })
}

fn eval_term(term: &Term, receiver: Receiver<'_>, bindings: Bindings<'_>) -> CqlResult<BoundValue> {
    let ty = receiver.ty.unfrozen();
    match term {
        Term::Literal(Literal::Null) => Ok(BoundValue::Null),
        Term::Literal(literal) => eval_literal(literal, receiver).map(BoundValue::Value),
        Term::Bind(index) => eval_bind(*index, receiver, bindings),
        Term::List(items) => match ty {
            CqlType::List(elem) => collection(items, receiver.name, elem, bindings, false),
            // Cassandra accepts a list literal for a set only when empty.
            CqlType::Set(elem) if items.is_empty() => collection(items, receiver.name, elem, bindings, true),
            // Vectors take list literals (Cassandra 5).
            CqlType::Vector(elem, dimension) => vector(items, receiver, elem, *dimension, bindings),
            _ => Err(mismatch("list literal", receiver)),
        },
        Term::Set(items) => match ty {
            CqlType::Set(elem) => collection(items, receiver.name, elem, bindings, true),
            _ => Err(mismatch("set literal", receiver)),
        },
        Term::Map(entries) => match ty {
            CqlType::Map(key, value) => map(entries, receiver.name, key, value, bindings),
            _ => Err(mismatch("map literal", receiver)),
        },
        Term::EmptyBraces => match ty {
            CqlType::Map(..) | CqlType::Set(_) => Ok(BoundValue::Value(Bytes::from_static(&[0, 0, 0, 0]))),
            _ => Err(mismatch("empty {} literal", receiver)),
        },
        Term::Tuple(items) => match ty {
            CqlType::Tuple(fields) => tuple(items, receiver, fields, bindings),
            _ => Err(mismatch("tuple literal", receiver)),
        },
        Term::UserType(fields) => match ty {
            CqlType::Udt(udt) => user_type(fields, receiver.name, udt, bindings),
            _ => Err(mismatch("user type literal", receiver)),
        },
        Term::FunctionCall { name, args } => functions::call(name, args, receiver, bindings),
        Term::Cast { ty: cast, term } => {
            // Compared as text: a user type in a cast is a bare reference.
            if cast.unfrozen().to_string() == ty.to_string() {
                return eval(term, receiver, bindings);
            }
            // Otherwise the cast types the term, whose bytes the receiver
            // must read as they are (ScyllaDB's cast assignment test: value
            // compatibility), so a text column takes `(ascii)'foo'` and a
            // blob any single-cell value: `(blob)(int)1`.
            if !ty.is_value_compatible_with(cast.unfrozen()) {
                return Err(invalid(format!(
                    "Cannot assign a value of type {cast} to {} of type {}",
                    receiver.name, receiver.ty
                )));
            }
            eval(term, Receiver { name: receiver.name, ty: cast }, bindings)
        }
        Term::CastAs { term, ty: to } => {
            let from = term_casts::source_type(term, to, functions::call_result_type)?;
            term_casts::check_assignable(to, receiver.name, receiver.ty)?;
            let argument = term_casts::argument_name(to);
            match eval(term, Receiver { name: &argument, ty: &from }, bindings)? {
                BoundValue::Value(bytes) => Ok(BoundValue::Value(term_casts::convert(&from, to, &bytes)?)),
                BoundValue::Null => Ok(BoundValue::Null),
                BoundValue::Unset => Err(term_casts::unset(to)),
            }
        }
        // ScyllaDB's text: a value has no row to read a column from.
        Term::Column(name) => Err(invalid(format!("Cannot resolve column {name} without schema"))),
        Term::Operation { op, left, right } => {
            let types = term_operations::operand_types(*op, left, right, receiver.name, receiver.ty)?;
            let left = operand(left, receiver.name, &types.0, bindings)?;
            let right = operand(right, receiver.name, &types.1, bindings)?;
            let result_ty = term_operations::result_type(&types).expect("operand_types gives types that compute");
            let result = term_operations::operate(*op, &types, &result_ty, left, right)?;
            Ok(result.map_or(BoundValue::Null, BoundValue::Value))
        }
        Term::Negation(term) => {
            let ty = term_operations::negation_type(term, receiver.name, receiver.ty)?;
            let Some(value) = operand(term, receiver.name, &ty, bindings)? else {
                return Ok(BoundValue::Null);
            };
            let types = (ty.clone(), ty.clone());
            let zero = Some(term_operations::zero(&ty));
            let result = term_operations::operate(NumericOp::Sub, &types, &ty, zero, Some(value))?;
            Ok(result.map_or(BoundValue::Null, BoundValue::Value))
        }
    }
}

/// An operation's operand, evaluated in `ty`; unset is refused, as a
/// function's argument is in Cassandra.
fn operand(term: &Term, receiver: &str, ty: &CqlType, bindings: Bindings<'_>) -> CqlResult<Option<Bytes>> {
    match eval(term, Receiver { name: receiver, ty }, bindings)? {
        BoundValue::Value(v) => Ok(Some(v)),
        BoundValue::Null => Ok(None),
        BoundValue::Unset => Err(invalid(format!("Invalid unset value for an operand of {receiver}"))),
    }
}

/// Evaluates a term that must produce a value (not null, not unset).
pub fn eval_required(term: &Term, receiver: Receiver<'_>, bindings: Bindings<'_>) -> CqlResult<Bytes> {
    match eval(term, receiver, bindings)? {
        BoundValue::Value(v) => Ok(v),
        BoundValue::Null => Err(invalid(format!("Invalid null value for {}", receiver.name))),
        BoundValue::Unset => Err(invalid(format!("Invalid unset value for {}", receiver.name))),
    }
}

fn mismatch(what: &str, receiver: Receiver<'_>) -> crate::error::CqlError {
    invalid(format!("Invalid {what} for {} of type {}", receiver.name, receiver.ty))
}

fn eval_literal(literal: &Literal, receiver: Receiver<'_>) -> CqlResult<Bytes> {
    let (kind, text, kind_name) = match literal {
        Literal::String(s) => (LiteralKind::String, s.as_str(), "STRING"),
        Literal::Integer(s) => (LiteralKind::Integer, s.as_str(), "INTEGER"),
        Literal::Float(s) => (LiteralKind::Float, s.as_str(), "FLOAT"),
        Literal::Boolean(b) => (LiteralKind::Boolean, if *b { "true" } else { "false" }, "BOOLEAN"),
        Literal::Uuid(s) => (LiteralKind::Uuid, s.as_str(), "UUID"),
        Literal::Duration(s) => (LiteralKind::Duration, s.as_str(), "DURATION"),
        Literal::Blob(bytes) => {
            return match receiver.ty.unfrozen() {
                CqlType::Blob => Ok(Bytes::copy_from_slice(bytes)),
                // ScyllaDB's text names the constant as written.
                _ => Err(invalid(format!(
                    "Invalid HEX constant (0x{}) for \"{}\" of type {}",
                    crate::error::hex(bytes),
                    receiver.name,
                    receiver.ty
                ))),
            };
        }
        Literal::Null => return Err(invalid("null is not a value here")),
    };
    if let (LiteralKind::String, CqlType::Tuple(fields)) = (kind, receiver.ty.unfrozen()) {
        return tuple_from_string(text, receiver, fields);
    }
    let value = parse_literal(receiver.ty.unfrozen(), kind, text).map_err(|e| {
        invalid(format!("Invalid {kind_name} constant ({text}) for \"{}\" of type {}: {e}", receiver.name, receiver.ty))
    })?;
    Ok(Bytes::from(value.to_bytes()))
}

/// A tuple from a string literal, as ScyllaDB's `tuple_type_impl::from_string`
/// reads one (Cassandra's `TupleType.fromString`): fields separated by `:`,
/// `@` for a null field, `\:` and `\@` for the characters themselves, and
/// the fields left out at the end null: `'1:a\:b'` is `(1, 'a:b')`.
fn tuple_from_string(text: &str, receiver: Receiver<'_>, fields: &[CqlType]) -> CqlResult<Bytes> {
    let mut parts = vec![Some(String::new())];
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        // `parts` is never empty: it starts with one part and only grows.
        let part = parts.last_mut().expect("a part is being read");
        match c {
            '\\' => part.get_or_insert_with(String::new).extend(chars.next()),
            ':' => parts.push(Some(String::new())),
            '@' if part.as_ref().is_some_and(String::is_empty) => *part = None,
            c => part.get_or_insert_with(String::new).push(c),
        }
    }
    if parts.len() > fields.len() {
        return Err(invalid(format!(
            "Invalid tuple literal: too many elements. Type {} expects {} but got {}",
            receiver.ty,
            fields.len(),
            parts.len()
        )));
    }
    let mut out = BytesMut::new();
    for (part, ty) in parts.iter().zip(fields) {
        let value = match part {
            Some(part) => Some(field_from_string(part, receiver, ty)?),
            None => None,
        };
        collection::put_item(&mut out, value.as_deref());
    }
    Ok(out.freeze())
}

/// One field of [`tuple_from_string`]: its text read as the literal a
/// value of its type is written as.
fn field_from_string(text: &str, receiver: Receiver<'_>, ty: &CqlType) -> CqlResult<Bytes> {
    use CqlType as T;
    use LiteralKind as K;
    let kind = match ty.unfrozen() {
        T::Tinyint | T::Smallint | T::Int | T::Bigint | T::Varint | T::Counter => K::Integer,
        T::Float | T::Double | T::Decimal => K::Float,
        T::Boolean => K::Boolean,
        T::Uuid | T::Timeuuid => K::Uuid,
        T::Duration => K::Duration,
        T::Blob => K::Hex,
        _ => K::String,
    };
    let value = parse_literal(ty.unfrozen(), kind, text).map_err(|e| {
        invalid(format!("Invalid tuple field ({text}) for \"{}\" of type {}: {e}", receiver.name, receiver.ty))
    })?;
    Ok(Bytes::from(value.to_bytes()))
}

fn eval_bind(index: usize, receiver: Receiver<'_>, bindings: Bindings<'_>) -> CqlResult<BoundValue> {
    let Some(value) = bindings.values.get(index) else {
        return Err(invalid(format!(
            "There were {} markers(?) in CQL but {} bound variables",
            index + 1,
            bindings.values.len()
        )));
    };
    match value {
        BoundValue::Value(bytes) => {
            validate_value(receiver.ty, bytes)
                .map_err(|e| invalid(format!("Exception while binding column {}: {e}", receiver.name)))?;
            Ok(BoundValue::Value(bytes.clone()))
        }
        BoundValue::Null => Ok(BoundValue::Null),
        BoundValue::Unset => Ok(BoundValue::Unset),
    }
}

/// Checks a serialized value of `ty`, accepting the empty value of types
/// that have one ([`CqlType::allows_empty`]), as Cassandra does for values
/// bound by drivers or produced by `blobAs*` conversions.
pub fn validate_value(ty: &CqlType, bytes: &[u8]) -> Result<(), shoal_schema::ValueError> {
    if bytes.is_empty() && ty.allows_empty() {
        return Ok(());
    }
    validate(ty.unfrozen(), bytes)
}

fn element(term: &Term, name: &str, ty: &CqlType, bindings: Bindings<'_>) -> CqlResult<Bytes> {
    eval(term, Receiver { name, ty }, bindings)?
        .into_option()
        .ok_or_else(|| invalid(format!("null is not supported inside collections ({name})")))
}

fn collection(
    items: &[Term],
    name: &str,
    elem: &CqlType,
    bindings: Bindings<'_>,
    sorted: bool,
) -> CqlResult<BoundValue> {
    let mut values = items.iter().map(|t| element(t, name, elem, bindings)).collect::<CqlResult<Vec<_>>>()?;
    if sorted {
        values.sort_by(|a, b| compare(elem.unfrozen(), a, b));
        values.dedup_by(|a, b| compare(elem.unfrozen(), a, b).is_eq());
    }
    Ok(BoundValue::Value(serialize_items(values.iter().map(|v| &v[..]), values.len())))
}

/// A vector value from a list literal: exactly `dimension` elements, none
/// null, laid out as `shoal_schema::vector` says.
fn vector(
    items: &[Term],
    receiver: Receiver<'_>,
    elem: &CqlType,
    dimension: u32,
    bindings: Bindings<'_>,
) -> CqlResult<BoundValue> {
    if items.len() != dimension as usize {
        return Err(invalid(format!(
            "Invalid vector literal for {} of type {}; expected {dimension} elements, but given {}",
            receiver.name,
            receiver.ty,
            items.len()
        )));
    }
    let mut values = Vec::with_capacity(items.len());
    for item in items {
        // A constant of another type is refused in Cassandra's words (a
        // marker's or a function's own error stands).
        let value = eval(item, Receiver { name: receiver.name, ty: elem }, bindings).map_err(|e| match item {
            Term::Literal(_) | Term::Cast { .. } | Term::List(_) | Term::Set(_) | Term::Map(_) | Term::Tuple(_) => {
                invalid(format!("Invalid vector literal for {}: value {item} is not of type {elem}", receiver.name))
            }
            _ => e,
        })?;
        values.push(value.into_option().ok_or_else(|| invalid("null is not supported inside vectors"))?);
    }
    let mut out = Vec::new();
    shoal_schema::vector::write(elem, values.iter().map(|v| &v[..]), &mut out);
    Ok(BoundValue::Value(Bytes::from(out)))
}

fn map(
    entries: &[(Term, Term)],
    name: &str,
    key_ty: &CqlType,
    value_ty: &CqlType,
    bindings: Bindings<'_>,
) -> CqlResult<BoundValue> {
    let mut pairs = Vec::with_capacity(entries.len());
    for (key, value) in entries {
        pairs.push((element(key, name, key_ty, bindings)?, element(value, name, value_ty, bindings)?));
    }
    // Later entries win for equal keys, as in Cassandra.
    pairs.reverse();
    pairs.sort_by(|a, b| compare(key_ty.unfrozen(), &a.0, &b.0));
    pairs.dedup_by(|a, b| compare(key_ty.unfrozen(), &a.0, &b.0).is_eq());
    let count = pairs.len();
    Ok(BoundValue::Value(collection::serialize_map(
        pairs.iter().flat_map(|(k, v)| [Some(&k[..]), Some(&v[..])]),
        count,
    )))
}

fn tuple(items: &[Term], receiver: Receiver<'_>, fields: &[CqlType], bindings: Bindings<'_>) -> CqlResult<BoundValue> {
    let name = receiver.name;
    if items.len() > fields.len() {
        return Err(invalid(format!(
            "Invalid tuple literal for {name}: too many elements. Type {} expects {} but got {}",
            receiver.ty,
            fields.len(),
            items.len()
        )));
    }
    // A nested tuple literal too long for its component is the outer
    // literal's error (ScyllaDB checks assignability first).
    let too_long = |(item, ty): &(&Term, &CqlType)| match (item, ty.unfrozen()) {
        (Term::Tuple(inner), CqlType::Tuple(types)) => inner.len() > types.len(),
        _ => false,
    };
    if let Some(i) = items.iter().zip(fields).position(|pair| too_long(&pair)) {
        return Err(invalid(format!("Invalid tuple literal for {name}: component {i} is not of type {}", fields[i])));
    }
    let mut out = BytesMut::new();
    for (i, (item, ty)) in items.iter().zip(fields).enumerate() {
        let value = match eval(item, Receiver { name, ty }, bindings)? {
            BoundValue::Unset => return Err(invalid(format!("Invalid unset value for tuple field number {i}"))),
            value => value.into_option(),
        };
        collection::put_item(&mut out, value.as_deref());
    }
    Ok(BoundValue::Value(out.freeze()))
}

/// A user type value: the type's fields in order, each from the literal's
/// field of that name, null where the literal leaves it out.
fn user_type(fields: &[(String, Term)], name: &str, udt: &UserType, bindings: Bindings<'_>) -> CqlResult<BoundValue> {
    if let Some((unknown, _)) = fields.iter().find(|(field, _)| udt.field_index(field).is_none()) {
        return Err(invalid(format!("Unknown field '{unknown}' in value of user defined type {}", udt.name)));
    }
    let mut out = BytesMut::new();
    for (field, ty) in &udt.fields {
        let mut given = fields.iter().filter(|(f, _)| f == field);
        let value = match (given.next(), given.next()) {
            (_, Some(_)) => return Err(invalid(format!("Duplicate field '{field}' in value of type {}", udt.name))),
            (None, None) => None,
            (Some((_, term)), None) => {
                let field_name = format!("{name}.{field}");
                match eval(term, Receiver { name: &field_name, ty }, bindings)? {
                    BoundValue::Unset => {
                        return Err(invalid(format!(
                            "Invalid unset value for field '{field}' of user defined type {}",
                            udt.name
                        )))
                    }
                    value => value.into_option(),
                }
            }
        };
        collection::put_item(&mut out, value.as_deref())
    }
    Ok(BoundValue::Value(out.freeze()))
}

/// A list or set of `count` items in the v4 collection layout.
pub fn serialize_items<'a>(items: impl Iterator<Item = &'a [u8]>, count: usize) -> Bytes {
    collection::serialize(items.map(Some), count)
}

/// The `[bytes]` items of a serialized collection (a list or set's elements,
/// a map's keys and values alternating; a null item is empty). Assumes a
/// validated value.
pub fn collection_items(value: &Bytes) -> Vec<Bytes> {
    // A map's count is of entries: read the items until the bytes end.
    let all = collection::Items::entries(value);
    all.map_while(|item| item.map(|i| value.slice_ref(i)).or(Some(Bytes::new()))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_values_are_valid_only_for_types_that_have_one() {
        for t in ["int", "bigint", "uuid", "timestamp", "boolean", "varint", "decimal", "inet", "frozen<text>"] {
            let ty = CqlType::parse(t).unwrap_or_else(|e| panic!("{t}: {e}"));
            assert_eq!(validate_value(&ty, &[]), Ok(()), "{t}");
        }
        for t in ["duration", "list<int>", "counter"] {
            let ty = CqlType::parse(t).unwrap_or_else(|e| panic!("{t}: {e}"));
            assert!(validate_value(&ty, &[]).is_err(), "{t}");
        }
        // A non-empty value is still checked.
        assert!(validate_value(&CqlType::Int, &[0, 1]).is_err());
    }

    #[test]
    fn a_tuple_reads_from_a_string_with_escapes_and_nulls() {
        let ty = CqlType::parse("frozen<tuple<int, text>>").unwrap_or_else(|e| panic!("{e}"));
        let read = |text: &str| {
            let literal = Literal::String(text.to_string());
            eval_literal(&literal, Receiver { name: "t", ty: &ty }).map(|b| b.to_vec())
        };
        let tuple = |a: Option<&[u8]>, b: Option<&[u8]>| {
            let mut out = BytesMut::new();
            collection::put_item(&mut out, a);
            collection::put_item(&mut out, b);
            Ok(out.to_vec())
        };
        assert_eq!(read("0:0"), tuple(Some(&[0, 0, 0, 0]), Some(b"0")));
        assert_eq!(read("1:1\\:1"), tuple(Some(&[0, 0, 0, 1]), Some(b"1:1")));
        assert_eq!(read("@:1"), tuple(None, Some(b"1")));
        assert_eq!(read("1:"), tuple(Some(&[0, 0, 0, 1]), Some(b"")));
        let mut one = BytesMut::new();
        collection::put_item(&mut one, Some(&[0, 0, 0, 1]));
        assert_eq!(read("1"), Ok(one.to_vec()));
        let too_many = read("1:2:3").map_err(|e| e.to_string());
        assert_eq!(
            too_many,
            Err("Invalid tuple literal: too many elements. Type frozen<tuple<int, text>> expects 2 but got 3".into())
        );
        assert!(read("x:1").is_err());
    }
}
