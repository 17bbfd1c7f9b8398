//! JSON in CQL, as Cassandra speaks it: `SELECT JSON` and `toJson()` render
//! values as JSON text ([`to_json`], [`rows_to_json`]); `INSERT JSON` and
//! `fromJson()` read JSON text into values of a column's type
//! ([`insert_values`], [`from_json_call`]).
//!
//! Reading goes JSON → [`Term`] → [`values::eval`]: a JSON value becomes the
//! CQL literal it stands for, so validation, set and map ordering, user type
//! field checks and vector dimensions are those of every other write. JSON
//! numbers keep their source text (serde_json's `arbitrary_precision`), so a
//! varint or decimal is never rounded through a float.
//!
//! The renderings follow Cassandra's `toJSONString` of each type: numbers
//! bare (float and double as Java prints them, NaN and infinities as `null`,
//! since JSON has no such numbers), timestamps as `yyyy-MM-dd HH:mm:ss.SSSZ`
//! in UTC, blobs as `"0x..."`, map keys always strings, user types as
//! objects, tuples and vectors as arrays.

use std::fmt::{self, Write as _};
use std::net::IpAddr;

use bytes::Bytes;
use serde_json::Value as Json;
use shoal_schema::literal::{format_date, format_duration, format_time, format_timestamp_ms, parse_hex};
use shoal_schema::value::{decimal_to_string, Value};
use shoal_schema::{CqlType, TableMeta};

use crate::ast::{Literal, Term};
use crate::error::{invalid, CqlError, CqlResult};
use crate::result::{ColumnSpec, Rows};
use crate::values::{eval, Bindings, BoundValue, Receiver};

/// The one column of a `SELECT JSON` result, and the name of the bind
/// marker of `INSERT JSON ?`.
pub const JSON_COLUMN: &str = "[json]";

/// Nesting deeper than this is refused before serde_json's own limit (128)
/// turns it into a less helpful message; no CQL type nests this deep.
const JSON_DEPTH_MAX: usize = 64;

/// The `[json]` text column of `keyspace.table`.
pub fn json_column(keyspace: &str, table: &str) -> ColumnSpec {
    ColumnSpec {
        keyspace: keyspace.to_string(),
        table: table.to_string(),
        name: JSON_COLUMN.to_string(),
        ty: CqlType::Text,
    }
}

/// SELECT JSON: each row becomes one JSON object from the selection's
/// column names (aliases included) to the values, in selection order. The
/// paging state passes through, so paging works as for the plain SELECT.
pub fn rows_to_json(rows: Rows, keyspace: &str, table: &str) -> CqlResult<Rows> {
    let keys: Vec<String> = rows.columns.iter().map(|c| object_key(&c.name)).collect();
    let mut out = Vec::with_capacity(rows.rows.len());
    for row in &rows.rows {
        let mut object = String::from("{");
        for (i, (key, (cell, column))) in keys.iter().zip(row.iter().zip(rows.columns.iter())).enumerate() {
            object.push_str(if i > 0 { ", " } else { "" });
            object.push_str(key);
            object.push_str(": ");
            match cell {
                None => object.push_str("null"),
                Some(bytes) => write_json(&mut object, &column.ty, bytes)?,
            }
        }
        object.push('}');
        out.push(vec![Some(Bytes::from(object))]);
    }
    Ok(Rows { columns: vec![json_column(keyspace, table)].into(), rows: out, paging_state: rows.paging_state })
}

/// A result column name as a JSON object key: names that are not all lower
/// case are wrapped in double quotes first, as CQL would have to quote them,
/// so that the key can be fed back to INSERT JSON.
fn object_key(name: &str) -> String {
    let mut key = String::new();
    if name == name.to_lowercase() {
        push_string(&mut key, name);
    } else {
        push_string(&mut key, &format!("\"{name}\""));
    }
    key
}

/// `toJson()`: the JSON text of a serialized value of `ty`. An empty value
/// of a type that is not a string renders as `""`.
pub fn to_json(ty: &CqlType, bytes: &[u8]) -> CqlResult<String> {
    let mut out = String::new();
    write_json(&mut out, ty, bytes)?;
    Ok(out)
}

/// Writes the JSON of a serialized value; an empty blob is `"0x"`, as
/// Cassandra writes it.
fn write_json(out: &mut String, ty: &CqlType, bytes: &[u8]) -> CqlResult<()> {
    if bytes.is_empty() && !matches!(ty.unfrozen(), CqlType::Ascii | CqlType::Text | CqlType::Blob) {
        out.push_str("\"\"");
        return Ok(());
    }
    write_serialized(out, ty, bytes)
}

fn write_serialized(out: &mut String, ty: &CqlType, bytes: &[u8]) -> CqlResult<()> {
    let value = Value::deserialize(ty, bytes).map_err(|e| CqlError::Server(format!("corrupt {ty} value: {e}")))?;
    write_value(out, ty, &value);
    Ok(())
}

fn write_value(out: &mut String, ty: &CqlType, value: &Value) {
    let ty = ty.unfrozen();
    match (value, ty) {
        (Value::Ascii(s) | Value::Text(s), _) => push_string(out, s),
        (Value::Blob(b), _) => {
            let hex: String = b.iter().map(|byte| format!("{byte:02x}")).collect();
            push_string(out, &format!("0x{hex}"));
        }
        (Value::Boolean(b), _) => push_display(out, b),
        (Value::Tinyint(v), _) => push_display(out, v),
        (Value::Smallint(v), _) => push_display(out, v),
        (Value::Int(v), _) => push_display(out, v),
        (Value::Bigint(v) | Value::Counter(v), _) => push_display(out, v),
        (Value::Varint(_), _) => push_display(out, value),
        (Value::Float(v), _) => out.push_str(&java_float(*v, f64::from(*v))),
        (Value::Double(v), _) => out.push_str(&java_float(*v, *v)),
        (Value::Decimal { scale, unscaled }, _) => out.push_str(&decimal_to_string(*scale, unscaled)),
        (Value::Uuid(u) | Value::Timeuuid(u), _) => push_string(out, &uuid::Uuid::from_bytes(*u).to_string()),
        (Value::Inet(addr), _) => push_string(out, &java_host_address(*addr)),
        (Value::Date(days), _) => push_string(out, &format_date(*days)),
        (Value::Time(nanos), _) => push_string(out, &format_time(*nanos)),
        (Value::Timestamp(ms), _) => push_string(out, &json_timestamp(*ms)),
        (Value::Duration { months, days, nanos }, _) => push_string(out, &format_duration(*months, *days, *nanos)),
        (Value::List(items) | Value::Set(items) | Value::Vector(items), _) => {
            let elem = match ty {
                CqlType::List(e) | CqlType::Set(e) | CqlType::Vector(e, _) => e.as_ref(),
                other => other,
            };
            write_array(out, items.iter().map(|item| (elem, Some(item))));
        }
        (Value::Map(entries), CqlType::Map(key_ty, value_ty)) => {
            out.push('{');
            for (i, (key, value)) in entries.iter().enumerate() {
                out.push_str(if i > 0 { ", " } else { "" });
                out.push_str(&map_key(key_ty, key));
                out.push_str(": ");
                write_value(out, value_ty, value);
            }
            out.push('}');
        }
        (Value::Tuple(fields), CqlType::Udt(udt)) => {
            out.push('{');
            for (i, ((name, field_ty), field)) in udt.fields.iter().zip(fields).enumerate() {
                out.push_str(if i > 0 { ", " } else { "" });
                out.push_str(&object_key(name));
                out.push_str(": ");
                write_optional(out, field_ty, field.as_ref());
            }
            out.push('}');
        }
        (Value::Tuple(fields), CqlType::Tuple(types)) => {
            write_array(out, types.iter().zip(fields).map(|(t, f)| (t, f.as_ref())));
        }
        // A deserialized value always has its type's shape; anything else
        // would be a bug in `Value::deserialize`, rendered rather than lost.
        (Value::Map(_) | Value::Tuple(_), _) => push_string(out, &value.to_string()),
    }
}

fn write_array<'a>(out: &mut String, items: impl Iterator<Item = (&'a CqlType, Option<&'a Value>)>) {
    out.push('[');
    for (i, (ty, item)) in items.enumerate() {
        out.push_str(if i > 0 { ", " } else { "" });
        write_optional(out, ty, item);
    }
    out.push(']');
}

fn write_optional(out: &mut String, ty: &CqlType, value: Option<&Value>) {
    match value {
        Some(v) => write_value(out, ty, v),
        None => out.push_str("null"),
    }
}

/// JSON object keys are strings: a key whose JSON is not a string already
/// (a number, an array) is the string of its JSON text.
fn map_key(ty: &CqlType, key: &Value) -> String {
    let mut rendered = String::new();
    write_value(&mut rendered, ty, key);
    if rendered.starts_with('"') {
        return rendered;
    }
    let mut quoted = String::new();
    push_string(&mut quoted, &rendered);
    quoted
}

fn push_display(out: &mut String, value: impl fmt::Display) {
    // Writing to a String cannot fail.
    let _ = write!(out, "{value}");
}

/// A JSON string literal, escaped as Cassandra's encoder (Jackson) does:
/// quote, backslash and control characters only, `\u` escapes upper case.
fn push_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if u32::from(c) < 0x20 => push_display(out, format_args!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Java's `Float.toString`/`Double.toString` of a finite value: plain
/// notation with at least one fraction digit for magnitudes in [1e-3, 1e7),
/// `d.dddE±n` otherwise. JSON has no NaN or infinity: those are `null`.
fn java_float<T: fmt::Display + fmt::LowerExp>(v: T, as_f64: f64) -> String {
    if !as_f64.is_finite() {
        return "null".to_string();
    }
    let magnitude = as_f64.abs();
    if magnitude == 0.0 || (1e-3..1e7).contains(&magnitude) {
        let plain = v.to_string();
        return if plain.contains('.') { plain } else { format!("{plain}.0") };
    }
    let scientific = format!("{v:e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let point = if mantissa.contains('.') { "" } else { ".0" };
    format!("{mantissa}{point}E{exponent}")
}

/// Java's `InetAddress.getHostAddress`: IPv6 as eight hexadecimal groups,
/// never `::`-compressed; an IPv4-mapped address as its IPv4 form.
fn java_host_address(addr: IpAddr) -> String {
    match addr {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6.segments().iter().map(|s| format!("{s:x}")).collect::<Vec<_>>().join(":"),
        },
    }
}

/// `yyyy-MM-dd HH:mm:ss.SSSZ` in UTC, Cassandra's JSON timestamp format.
fn json_timestamp(ms: i64) -> String {
    let cqlsh = format_timestamp_ms(ms);
    // cqlsh's form adds microseconds and the offset: `...05.123000+0000`.
    match cqlsh.strip_suffix("000+0000") {
        Some(millis) => format!("{millis}Z"),
        None => cqlsh,
    }
}

/// Parses JSON text; the error says what is wrong and where.
pub fn parse(text: &str) -> Result<Json, String> {
    let json: Json = serde_json::from_str(text).map_err(|e| format!("Could not decode JSON string '{text}': {e}"))?;
    if depth(&json) > JSON_DEPTH_MAX {
        return Err(format!("JSON value nested deeper than {JSON_DEPTH_MAX} levels"));
    }
    Ok(json)
}

fn depth(json: &Json) -> usize {
    match json {
        Json::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Json::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// The kind of a JSON value, for error messages.
fn kind(json: &Json) -> &'static str {
    match json {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

/// The CQL term a JSON value of a column of type `ty` stands for. Strings
/// are accepted for numbers and booleans; collections, tuples and user
/// types also accept a string holding their JSON (that is how map keys of
/// those types arrive), as in Cassandra.
pub fn term_of(ty: &CqlType, json: &Json) -> Result<Term, String> {
    use CqlType as T;
    let ty = ty.unfrozen();
    let literal = match (ty, json) {
        (_, Json::Null) => Literal::Null,
        (T::Ascii | T::Text | T::Inet | T::Timestamp | T::Date | T::Time, Json::String(s)) => {
            Literal::String(s.clone())
        }
        (T::Tinyint | T::Smallint | T::Int | T::Bigint | T::Varint | T::Counter | T::Timestamp, Json::Number(n)) => {
            Literal::Integer(integer_text(&n.to_string()))
        }
        (T::Tinyint | T::Smallint | T::Int | T::Bigint | T::Varint | T::Counter, Json::String(s)) => {
            Literal::Integer(s.clone())
        }
        (T::Float | T::Double | T::Decimal, Json::Number(n)) => Literal::Float(n.to_string()),
        (T::Float | T::Double | T::Decimal, Json::String(s)) => Literal::Float(s.clone()),
        (T::Boolean, Json::Bool(b)) => Literal::Boolean(*b),
        (T::Boolean, Json::String(s)) if s.eq_ignore_ascii_case("true") || s.eq_ignore_ascii_case("false") => {
            Literal::Boolean(s.eq_ignore_ascii_case("true"))
        }
        (T::Blob, Json::String(s)) => {
            let hex =
                s.strip_prefix("0x").ok_or_else(|| format!("blob must be a string starting with 0x, got \"{s}\""))?;
            Literal::Blob(parse_hex(hex).map_err(|e| e.to_string())?)
        }
        (T::Uuid | T::Timeuuid, Json::String(s)) => Literal::Uuid(s.clone()),
        (T::Duration, Json::String(s)) => Literal::Duration(s.clone()),
        (T::List(_) | T::Set(_) | T::Map(..) | T::Tuple(_) | T::Udt(_) | T::Vector(..), Json::String(s)) => {
            return term_of(ty, &parse(s)?);
        }
        (T::List(elem) | T::Vector(elem, _), Json::Array(items)) => return Ok(Term::List(terms(elem, items)?)),
        (T::Set(_), Json::Array(items)) if items.is_empty() => return Ok(Term::EmptyBraces),
        (T::Set(elem), Json::Array(items)) => return Ok(Term::Set(terms(elem, items)?)),
        (T::Map(..), Json::Object(map)) if map.is_empty() => return Ok(Term::EmptyBraces),
        (T::Map(key_ty, value_ty), Json::Object(map)) => {
            let entries = map
                .iter()
                .map(|(key, value)| Ok((term_of(key_ty, &Json::String(key.clone()))?, term_of(value_ty, value)?)))
                .collect::<Result<Vec<_>, String>>()?;
            return Ok(Term::Map(entries));
        }
        (T::Tuple(fields), Json::Array(items)) => {
            if items.len() > fields.len() {
                return Err(format!("tuple of {} elements for type {ty}, which has {}", items.len(), fields.len()));
            }
            let items = fields.iter().zip(items).map(|(f, item)| term_of(f, item)).collect::<Result<_, _>>()?;
            return Ok(Term::Tuple(items));
        }
        (T::Udt(udt), Json::Object(map)) => {
            let mut fields = Vec::with_capacity(map.len());
            for (key, value) in map {
                let name = identifier(key);
                let index = udt
                    .field_index(&name)
                    .ok_or_else(|| format!("Unknown field '{name}' in value of user defined type {}", udt.name))?;
                fields.push((name, term_of(&udt.fields[index].1, value)?));
            }
            return Ok(Term::UserType(fields));
        }
        _ => return Err(format!("Expected a value of type {ty}, but got {}: {json}", kind(json))),
    };
    Ok(Term::Literal(literal))
}

fn terms(elem: &CqlType, items: &[Json]) -> Result<Vec<Term>, String> {
    items.iter().map(|item| term_of(elem, item)).collect()
}

/// A column or field name as a JSON key names it: `"\"Name\""` keeps its
/// case, anything else is lowercased, as unquoted CQL names are.
fn identifier(key: &str) -> String {
    match key.strip_prefix('"').and_then(|k| k.strip_suffix('"')) {
        Some(quoted) => quoted.to_string(),
        None => key.to_lowercase(),
    }
}

/// The columns and values of `INSERT JSON text`: each column the object
/// names, with its value; with DEFAULT NULL (`default_unset` false) also
/// every other column of the table, as null.
pub fn insert_values(meta: &TableMeta, text: &str, default_unset: bool) -> CqlResult<Vec<(String, BoundValue)>> {
    let json = parse(text).map_err(invalid)?;
    let map = match json {
        Json::Object(map) => map,
        Json::Null => return Err(invalid("Got null for INSERT JSON values")),
        other => return Err(invalid(format!("INSERT JSON takes a JSON object, but got {}: {other}", kind(&other)))),
    };
    let mut given = Vec::with_capacity(map.len());
    for (key, value) in map {
        let name = identifier(&key);
        if meta.column(&name).is_none() {
            return Err(invalid(format!("JSON values map contains unrecognized column: {name}")));
        }
        given.push((name, value));
    }
    let mut out = Vec::with_capacity(meta.columns.len());
    for column in &meta.columns {
        let value = match given.iter().find(|(name, _)| *name == column.name) {
            Some((name, json)) => column_value(name, &column.ty, json)?,
            None if default_unset => continue,
            None => BoundValue::Null,
        };
        out.push((column.name.clone(), value));
    }
    Ok(out)
}

/// The serialized value of one INSERT JSON column.
fn column_value(name: &str, ty: &CqlType, json: &Json) -> CqlResult<BoundValue> {
    let decode_error = |e: String| invalid(format!("Error decoding JSON value for {name}: {e}"));
    if json.as_str() == Some("") && empty_string_is_empty_value(ty) {
        return Ok(BoundValue::Value(Bytes::new()));
    }
    let term = term_of(ty, json).map_err(decode_error)?;
    let evaluated = eval(&term, Receiver { name, ty }, Bindings::NONE).map_err(|e| decode_error(e.to_string()))?;
    Ok(match evaluated {
        BoundValue::Value(v) => BoundValue::Value(v),
        BoundValue::Null | BoundValue::Unset => BoundValue::Null,
    })
}

/// Whether INSERT JSON reads `""` for a column of `ty` as the type's empty
/// value, as Cassandra's `fromString("")` does for these types (and
/// ScyllaDB for uuid, timeuuid, inet, timestamp and the floating point
/// ones); SELECT JSON writes that value back as `""`.
fn empty_string_is_empty_value(ty: &CqlType) -> bool {
    matches!(
        ty,
        CqlType::Int
            | CqlType::Bigint
            | CqlType::Varint
            | CqlType::Float
            | CqlType::Double
            | CqlType::Decimal
            | CqlType::Uuid
            | CqlType::Timeuuid
            | CqlType::Inet
            | CqlType::Timestamp
            | CqlType::Boolean
    )
}

/// `fromJson(text)` as a term received by `receiver`: null when the text is
/// null or the JSON `null`.
pub fn from_json_call(args: &[Term], receiver: Receiver<'_>, bindings: Bindings<'_>) -> CqlResult<BoundValue> {
    let [arg] = args else {
        return Err(invalid(format!(
            "Invalid number of arguments in call to function system.fromjson: 1 required but {} provided",
            args.len()
        )));
    };
    let text = match eval(arg, Receiver { name: receiver.name, ty: &CqlType::Text }, bindings)? {
        BoundValue::Value(v) => v,
        BoundValue::Null | BoundValue::Unset => return Ok(BoundValue::Null),
    };
    // A text receiver's value was validated as UTF-8.
    let text = String::from_utf8_lossy(&text);
    let json = parse(&text)
        .map_err(|e| function_failure("fromJson", receiver.ty, &format!("Failed parsing fromJson parameter: {e}")))?;
    let converted = term_of(receiver.ty, &json).map_err(invalid).and_then(|term| eval(&term, receiver, Bindings::NONE));
    converted.map_err(|e| {
        function_failure("fromjson", &CqlType::Text, &format!("Failed execution of function system.fromjson: {e}"))
    })
}

/// ScyllaDB's error for a `fromJson()` that fails on its argument: a
/// FunctionFailure (its `function_execution_exception`), not an Invalid,
/// since the statement is valid and only the value is wrong. ScyllaDB
/// names the function and its argument types differently for JSON that
/// does not parse (`fromJson`, the receiver's type) and for a value it
/// cannot convert (`fromjson`, `text`); so does this.
fn function_failure(function: &str, arg_type: &CqlType, detail: &str) -> CqlError {
    CqlError::FunctionFailure {
        keyspace: "system".to_string(),
        function: function.to_string(),
        arg_types: vec![arg_type.to_string()],
        message: format!("execution of {function} failed: {detail}"),
    }
}

/// A JSON number for an integer type, as an integer literal: one in
/// scientific notation or with a fraction (`1e6`, `1.23456789E+9`) is
/// rewritten exactly when it is whole, as ScyllaDB reads it (issue
/// #10100); one that is not whole stays as it is, for the integer parser
/// to refuse.
fn integer_text(number: &str) -> String {
    let (mantissa, exponent) = match number.find(['e', 'E']) {
        Some(at) => (&number[..at], &number[at + 1..]),
        None => (number, "0"),
    };
    let Ok(exponent) = exponent.parse::<i64>() else { return number.to_string() };
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = format!("{whole}{fraction}");
    // The number is `digits` * 10^shift.
    let shift = exponent - fraction.len() as i64;
    let integral = match usize::try_from(shift) {
        // Longer than any integer type: the parser refuses it as too big.
        Ok(zeros) if zeros <= 64 => format!("{digits}{}", "0".repeat(zeros)),
        Ok(_) => return number.to_string(),
        Err(_) => {
            let cut = digits.len().saturating_sub(shift.unsigned_abs() as usize);
            if digits[cut..].bytes().any(|d| d != b'0') {
                return number.to_string();
            }
            digits[..cut].to_string()
        }
    };
    let integral = integral.trim_start_matches('0');
    format!("{sign}{}", if integral.is_empty() { "0" } else { integral })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ty(text: &str) -> CqlType {
        CqlType::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    /// The JSON of a value given as CQL literal text.
    fn render(type_text: &str, json_in: &str) -> String {
        let t = ty(type_text);
        let bytes = serialized(&t, json_in);
        to_json(&t, &bytes).unwrap_or_else(|e| panic!("{type_text}: {e}"))
    }

    fn serialized(t: &CqlType, json_in: &str) -> Bytes {
        match column_value("c", t, &parse(json_in).unwrap_or_else(|e| panic!("{e}"))) {
            Ok(BoundValue::Value(v)) => v,
            other => panic!("{t} from {json_in}: {other:?}"),
        }
    }

    fn decode_error(type_text: &str, json_in: &str) -> String {
        let json = parse(json_in).unwrap_or_else(|e| panic!("{e}"));
        match column_value("c", &ty(type_text), &json) {
            Err(e) => e.to_string(),
            Ok(v) => panic!("{type_text} from {json_in} gave {v:?}"),
        }
    }

    #[test]
    fn integers_render_as_numbers_and_accept_numeric_strings() {
        assert_eq!(render("tinyint", "-128"), "-128");
        assert_eq!(render("smallint", "\"300\""), "300");
        assert_eq!(render("int", "2147483647"), "2147483647");
        assert_eq!(render("bigint", "-9223372036854775808"), "-9223372036854775808");
        assert_eq!(render("varint", "123456789012345678901234567890"), "123456789012345678901234567890");
        assert_eq!(render("varint", "\"-5\""), "-5");
        assert!(decode_error("int", "1.5").contains("Error decoding JSON value for c"));
        assert!(decode_error("int", "2147483648").contains("int"));
        assert!(decode_error("tinyint", "true").contains("Expected a value of type tinyint, but got a boolean"));
    }

    #[test]
    fn floats_render_as_java_does_and_specials_as_null() {
        assert_eq!(render("double", "1.5"), "1.5");
        assert_eq!(render("double", "100"), "100.0");
        assert_eq!(render("double", "1e7"), "1.0E7");
        assert_eq!(render("double", "1.25e-5"), "1.25E-5");
        assert_eq!(render("double", "0.001"), "0.001");
        assert_eq!(render("double", "-0.0"), "-0.0");
        assert_eq!(render("float", "1.1"), "1.1");
        assert_eq!(render("float", "\"3.5\""), "3.5");
        assert_eq!(render("double", "\"NaN\""), "null");
        assert_eq!(render("float", "\"-Infinity\""), "null");
    }

    #[test]
    fn decimals_keep_every_digit() {
        assert_eq!(render("decimal", "1.10"), "1.10");
        assert_eq!(
            render("decimal", "123456789012345678901234567890.000000001"),
            "123456789012345678901234567890.000000001"
        );
        assert_eq!(render("decimal", "\"-0.5\""), "-0.5");
        assert_eq!(render("decimal", "1E+3"), "1E+3");
    }

    #[test]
    fn strings_are_escaped_as_jackson_does() {
        assert_eq!(render("text", r#""a\"b\\c\nd\u0001é/""#), r#""a\"b\\c\nd\u0001é/""#);
        assert_eq!(render("ascii", "\"plain\""), "\"plain\"");
        assert!(decode_error("ascii", "\"é\"").contains("Error decoding JSON value for c"));
        assert!(decode_error("text", "5").contains("Expected a value of type text, but got a number: 5"));
    }

    #[test]
    fn an_empty_string_is_an_empty_value_of_types_cassandra_reads_it_for() {
        for type_text in ["int", "bigint", "uuid", "timeuuid", "inet", "timestamp", "double", "decimal"] {
            assert_eq!(render(type_text, "\"\""), "\"\"", "{type_text}");
        }
        assert_eq!(render("text", "\"\""), "\"\"");
        assert!(decode_error("date", "\"\"").contains("Error decoding JSON value for c"));
    }

    #[test]
    fn scalar_types_round_trip_in_cassandra_forms() {
        assert_eq!(render("boolean", "true"), "true");
        assert_eq!(render("boolean", "\"FALSE\""), "false");
        assert_eq!(render("blob", "\"0xCAFE\""), "\"0xcafe\"");
        assert!(decode_error("blob", "\"cafe\"").contains("0x"));
        let id = "\"550e8400-e29b-41d4-a716-446655440000\"";
        assert_eq!(render("uuid", id), id);
        assert!(decode_error("timeuuid", id).contains("Error decoding JSON value for c"));
        assert_eq!(render("timestamp", "\"2024-01-02 03:04:05.678+0000\""), "\"2024-01-02 03:04:05.678Z\"");
        assert_eq!(render("timestamp", "1000"), "\"1970-01-01 00:00:01.000Z\"");
        assert_eq!(render("date", "\"2024-02-29\""), "\"2024-02-29\"");
        assert_eq!(render("time", "\"08:12:54.123456789\""), "\"08:12:54.123456789\"");
        assert_eq!(render("duration", "\"1h30m\""), "\"1h30m\"");
        assert_eq!(render("inet", "\"10.0.0.1\""), "\"10.0.0.1\"");
        assert_eq!(render("inet", "\"::1\""), "\"0:0:0:0:0:0:0:1\"");
        assert_eq!(render("inet", "\"2001:db8::ff\""), "\"2001:db8:0:0:0:0:0:ff\"");
    }

    #[test]
    fn collections_nest_and_map_keys_become_strings() {
        assert_eq!(render("list<int>", "[3, 1, 2]"), "[3, 1, 2]");
        assert_eq!(render("set<text>", r#"["b", "a", "b"]"#), r#"["a", "b"]"#);
        assert_eq!(render("set<int>", "[]"), "[]");
        assert_eq!(render("map<text, int>", r#"{"b": 2, "a": 1}"#), r#"{"a": 1, "b": 2}"#);
        assert_eq!(render("map<int, boolean>", r#"{"2": true, "1": false}"#), r#"{"1": false, "2": true}"#);
        assert_eq!(render("map<frozen<list<int>>, int>", r#"{"[1, 2]": 3}"#), r#"{"[1, 2]": 3}"#);
        assert_eq!(
            render("map<timestamp, int>", r#"{"1970-01-01 00:00:00.000Z": 1}"#),
            r#"{"1970-01-01 00:00:00.000Z": 1}"#
        );
        assert_eq!(render("list<frozen<map<text, int>>>", r#"[{"a": 1}, {}]"#), r#"[{"a": 1}, {}]"#);
        // A collection may also arrive as a string holding its JSON.
        assert_eq!(render("list<int>", r#""[1, 2]""#), "[1, 2]");
        assert!(decode_error("list<int>", "[1, null]").contains("null"));
        assert!(decode_error("list<int>", "{}").contains("but got an object"));
    }

    #[test]
    fn tuples_vectors_and_user_types() {
        assert_eq!(render("tuple<int, text, double>", r#"[1, null, 2.5]"#), r#"[1, null, 2.5]"#);
        assert!(decode_error("tuple<int>", "[1, 2]").contains("tuple of 2 elements"));
        assert_eq!(render("vector<float, 3>", "[1, 2.5, -3]"), "[1.0, 2.5, -3.0]");
        assert!(decode_error("vector<int, 2>", "[1]").contains("expected 2 elements"));
        let udt = CqlType::Udt(std::sync::Arc::new(shoal_schema::UserType {
            keyspace: "ks".into(),
            name: "address".into(),
            fields: vec![("street".into(), CqlType::Text), ("Zip".into(), CqlType::Int)],
        }));
        let bytes = serialized(&udt, r#"{"STREET": "Main", "\"Zip\"": 5}"#);
        assert_eq!(to_json(&udt, &bytes).ok(), Some(r#"{"street": "Main", "\"Zip\"": 5}"#.to_string()));
        let bytes = serialized(&udt, r#"{"street": "Main"}"#);
        assert_eq!(to_json(&udt, &bytes).ok(), Some(r#"{"street": "Main", "\"Zip\"": null}"#.to_string()));
        let json = parse(r#"{"zip": 5}"#).unwrap_or_else(|e| panic!("{e}"));
        assert!(column_value("c", &udt, &json).is_err_and(|e| e.to_string().contains("Unknown field 'zip'")));
    }

    #[test]
    fn whole_numbers_in_any_notation_become_integers() {
        for (number, integer) in [
            ("1e6", "1000000"),
            ("1.23456789E+9", "1234567890"),
            ("-4.0", "-4"),
            ("5000e-3", "5"),
            ("0.0e0", "0"),
            ("115292150460684697.5e1", "1152921504606846975"),
            ("17", "17"),
        ] {
            assert_eq!(integer_text(number), integer, "{number}");
        }
        // Not whole, or too long for any integer type: left for the integer
        // parser to refuse.
        for number in ["1.2", "1.5e0", "1e-3", "1e100"] {
            assert_eq!(integer_text(number), number);
        }
    }

    #[test]
    fn from_json_failures_are_function_failures() {
        let ty = CqlType::Int;
        let receiver = Receiver { name: "v", ty: &ty };
        let unparsable = from_json_call(&[Term::Literal(Literal::String("dog".into()))], receiver, Bindings::NONE);
        let message = unparsable.map_err(|e| e.to_string()).err().unwrap_or_default();
        assert!(message.starts_with("execution of fromJson failed: Failed parsing fromJson parameter: "), "{message}");
        let wrong = from_json_call(&[Term::Literal(Literal::String("1.2".into()))], receiver, Bindings::NONE);
        let message = wrong.map_err(|e| e.to_string()).err().unwrap_or_default();
        assert!(
            message.starts_with("execution of fromjson failed: Failed execution of function system.fromjson: "),
            "{message}"
        );
        for text in ["dog", "\"dog\"", "1.2", "2147483648", "\"\"", "{17: 3}"] {
            let arg = Term::Literal(Literal::String(text.to_string()));
            let result = from_json_call(&[arg], receiver, Bindings::NONE);
            let function = match &result {
                Err(CqlError::FunctionFailure { function, .. }) => function.to_lowercase(),
                _ => String::new(),
            };
            assert_eq!(function, "fromjson", "{text}: {result:?}");
        }
    }

    #[test]
    fn empty_values_render_as_empty_strings() {
        assert_eq!(to_json(&CqlType::Int, &[]).ok(), Some("\"\"".to_string()));
        assert_eq!(to_json(&CqlType::Text, &[]).ok(), Some("\"\"".to_string()));
        assert_eq!(to_json(&CqlType::Blob, &[]).ok(), Some("\"0x\"".to_string()));
    }

    #[test]
    fn malformed_or_deep_json_is_refused_with_a_reason() {
        assert!(parse("{\"a\": ").is_err_and(|e| e.contains("Could not decode JSON string")));
        let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert!(parse(&deep).is_err_and(|e| e.contains("nested deeper")));
    }

    #[test]
    fn keys_are_quoted_when_not_lower_case() {
        assert_eq!(object_key("abc"), "\"abc\"");
        assert_eq!(object_key("Abc"), "\"\\\"Abc\\\"\"");
        assert_eq!(identifier("\"Abc\""), "Abc");
        assert_eq!(identifier("ABC"), "abc");
        assert_eq!(identifier("\""), "\"");
    }
}
