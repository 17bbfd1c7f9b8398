//! Native scalar functions: `now()`, `uuid()`, `currentTimestamp()` and
//! friends, the time conversions (`toTimestamp`, `toDate`, ...) and the blob
//! conversions (`blobAsInt`, `textAsBlob`, ...), and the JSON functions
//! `toJson()` (selections only) and `fromJson()` (terms only), which
//! `json` implements, and Cassandra 5's vector similarity functions
//! (`similarity_cosine`, `similarity_euclidean`, `similarity_dot_product`)
//! and math functions (`abs`, `exp`, `log`, `log10`, `round`: `schema::math`),
//! collection functions (`map_keys`, `collection_sum`, ...:
//! `collection_fcts`), and Cassandra 6's `length` and `octet_length`
//! (`length_fcts`) and `format_bytes` and `format_time` (`format_fcts`).
//!
//! One implementation serves both places a function appears: in a term
//! (`VALUES (toTimestamp(now()))`) and in a selector (`SELECT blobAsText(b)`).
//!
//! A call in a term may also name a user function (`VALUES (ks.f(1))`,
//! `m[f(1)]`): it is found here, by name and the keyspace the bindings
//! carry, run by `lua`, and its EXECUTE permission checked at each call.
//! (Selectors' user function calls are compiled by `select`.)

use shoal_runtime::clock::{now_ms, now_us};
use std::cell::Cell;
use std::sync::Arc;

use bytes::Bytes;
use shoal_schema::{math, CqlType, Schema, UserFunction, Value};

use crate::ast::{Literal, Term};
use crate::error::{invalid, CqlError, CqlResult};
use crate::values::{eval, validate_value, Bindings, BoundValue, Receiver};
use crate::{collection_fcts, format_fcts, length_fcts};

/// 100-ns intervals between the UUID epoch (1582-10-15) and the Unix epoch.
const UUID_EPOCH_OFFSET_100NS: i64 = 0x01B2_1DD2_1381_4000;
const MS_PER_DAY: i64 = 86_400_000;
/// `date` values count days with 2^31 as the Unix epoch.
const DATE_EPOCH: i64 = 1 << 31;

/// Evaluates a function call term for `receiver`.
pub fn call(name: &str, args: &[Term], receiver: Receiver<'_>, bindings: Bindings<'_>) -> CqlResult<BoundValue> {
    if let Some(function) = term_callee(name, args, bindings)? {
        return call_in_term(&function, args, receiver, bindings);
    }
    let name = name.trim_start_matches("system.");
    match name {
        // Its result type is the receiver's, so it is evaluated apart.
        "fromjson" => return crate::json::from_json_call(args, receiver, bindings),
        "tojson" => return Err(invalid("toJson() may only be used within the selection clause of SELECT statements")),
        // A term has no rows to aggregate (ScyllaDB's text).
        "count" | "min" | "max" | "sum" | "avg" => {
            return Err(invalid("Aggregation functions are not supported in the where clause"))
        }
        _ => {}
    }
    let mut values = Vec::with_capacity(args.len());
    let arg_types = argument_types(name, args, Some(receiver.ty))?;
    for (arg, ty) in args.iter().zip(&arg_types) {
        match eval(arg, Receiver { name: receiver.name, ty }, bindings)? {
            BoundValue::Value(v) => values.push(v),
            // Functions of null are null, as in Cassandra; an unset
            // argument is refused (Cassandra's text).
            BoundValue::Null => return Ok(BoundValue::Null),
            BoundValue::Unset => {
                return Err(invalid(format!("Invalid unset value for argument in call to function {name}")))
            }
        }
    }
    let (result_ty, value) = apply(name, &arg_types, &values)?;
    if !receiver.ty.unfrozen().is_value_compatible_with(&result_ty) {
        return Err(invalid(format!(
            "Type error: cannot assign result of function system.{name} (type {result_ty}) to {} (type {})",
            receiver.name, receiver.ty
        )));
    }
    Ok(value.map_or(BoundValue::Null, BoundValue::Value))
}

/// The user function a call in a term names: `None` for a system
/// function or a name no user function has (the caller then reports it
/// unknown). Of overloads, the one whose parameters take every argument.
fn term_callee(name: &str, args: &[Term], bindings: Bindings<'_>) -> CqlResult<Option<Arc<UserFunction>>> {
    if !may_name_user_function(name) {
        return Ok(None);
    }
    let schema = shoal_coordinator::schema();
    let keyspace = bindings.keyspace.unwrap_or_default();
    let Some((ks, f)) = split_call(name, keyspace) else { return Ok(None) };
    let Some(meta) = schema.keyspace(ks) else { return Ok(None) };
    let (functions, mut aggregates) = meta.functions.named(f);
    if aggregates.any(|a| a.arg_types.len() == args.len()) {
        return Err(invalid("Aggregation functions are not supported in the where clause"));
    }
    let mut functions: Vec<Arc<UserFunction>> =
        functions.filter(|f| f.arg_types.len() == args.len()).cloned().collect();
    if functions.len() <= 1 {
        return Ok(functions.pop());
    }
    let takes = |f: &UserFunction| {
        args.iter().zip(&f.arg_types).all(|(arg, ty)| eval(arg, Receiver { name: "", ty }, bindings).is_ok())
    };
    let mut fitting = functions.iter().filter(|f| takes(f));
    match (fitting.next(), fitting.next()) {
        (Some(only), None) => Ok(Some(Arc::clone(only))),
        (first, _) => {
            let signatures: Vec<String> = functions.iter().map(|f| signature(f)).collect();
            let f = &functions[0];
            Err(invalid(if first.is_some() {
                format!(
                    "Ambiguous call to function {}.{} (can be matched by following signatures: {}): use type casts to disambiguate",
                    f.keyspace,
                    f.name,
                    signatures.join(", ")
                )
            } else {
                format!(
                    "Invalid call to function {}.{}, none of its type signatures match (known type signatures: {})",
                    f.keyspace,
                    f.name,
                    signatures.join(", ")
                )
            }))
        }
    }
}

fn signature(f: &UserFunction) -> String {
    let types: Vec<String> = f.arg_types.iter().map(ToString::to_string).collect();
    format!("{}.{} : ({}) -> {}", f.keyspace, f.name, types.join(", "), f.return_type)
}

/// Runs `function`, called in a term, for `receiver`: each argument
/// evaluated as its parameter's type, the result checked against the
/// receiver's, EXECUTE on the function checked first.
fn call_in_term(
    function: &UserFunction,
    args: &[Term],
    receiver: Receiver<'_>,
    bindings: Bindings<'_>,
) -> CqlResult<BoundValue> {
    crate::auth::authorizer::check_execute(
        || vec![(function.keyspace.as_str(), function.name.as_str(), function.arg_types.as_slice())],
        bindings.user,
    )?;
    let full_name = format!("{}.{}", function.keyspace, function.name);
    if !receiver.ty.unfrozen().is_value_compatible_with(&function.return_type) {
        return Err(invalid(format!(
            "Type error: cannot assign result of function {full_name} (type {}) to {} (type {})",
            function.return_type, receiver.name, receiver.ty
        )));
    }
    let mut values = Vec::with_capacity(args.len());
    for (i, (arg, ty)) in args.iter().zip(&function.arg_types).enumerate() {
        let name = format!("arg{i}({full_name})");
        values.push(match eval(arg, Receiver { name: &name, ty }, bindings)? {
            BoundValue::Value(v) => Some(v),
            BoundValue::Null => None,
            BoundValue::Unset => {
                return Err(invalid(format!("Invalid unset value for argument in call to function {full_name}")))
            }
        });
    }
    Ok(crate::lua::call(function, &values)?.map_or(BoundValue::Null, BoundValue::Value))
}

/// A SELECT without FROM reads `system.one_row`, but an unqualified call
/// in it names a function of the session's keyspace (ScyllaDB's `USE ks;
/// SELECT f(1)`): such names are qualified with `keyspace` when it has a
/// function or aggregate by that name.
pub(crate) fn qualify_calls(select: &mut crate::ast::Select, schema: &Schema, keyspace: &str) {
    let Some(meta) = schema.keyspace(keyspace) else { return };
    let crate::ast::Selection::Selectors(selectors) = &mut select.selection else { return };
    let mut qualify = |name: &mut String| {
        let known = |name: &str| {
            let (mut functions, mut aggregates) = meta.functions.named(name);
            functions.next().is_some() || aggregates.next().is_some()
        };
        if !name.contains('.') && may_name_user_function(name) && known(name) {
            *name = format!("{keyspace}.{name}");
        }
    };
    for selector in selectors {
        selector.expr.function_names_mut(&mut qualify);
    }
}

/// The types a function's arguments are evaluated as. For the conversions
/// that accept several types, the argument's own shape decides; a math
/// function's argument has its receiver's type (its result's).
fn argument_types(name: &str, args: &[Term], receiver: Option<&CqlType>) -> CqlResult<Vec<CqlType>> {
    let expected = arity(name).ok_or_else(|| invalid(format!("Unknown function '{name}'")))?;
    if args.len() != expected {
        return Err(invalid(format!(
            "Invalid number of arguments in call to function system.{name}: {expected} required but {} provided",
            args.len()
        )));
    }
    let Some(arg) = args.first() else { return Ok(Vec::new()) };
    let ty = if let Some(source) = name.strip_suffix("asblob") {
        CqlType::native(source).ok_or_else(|| invalid(format!("Unknown function '{name}'")))?
    } else if name.starts_with("blobas") {
        CqlType::Blob
    } else if matches!(name, "mintimeuuid" | "maxtimeuuid") {
        CqlType::Timestamp
    } else if matches!(name, "dateof" | "unixtimestampof") {
        CqlType::Timeuuid
    } else if math::NAMES.contains(&name) {
        match receiver.filter(|ty| math::takes(ty)) {
            Some(ty) => ty.unfrozen().clone(),
            None => inferred_type(arg).unwrap_or(CqlType::Double),
        }
    } else {
        inferred_type(arg).unwrap_or(CqlType::Timeuuid)
    };
    Ok(vec![ty])
}

/// Whether a call of `name` (unqualified) is one of the system's: a
/// scalar function, an aggregate, `token` or the JSON functions. Those
/// are found before a user function of the same name, as in Cassandra.
pub(crate) fn is_native(name: &str) -> bool {
    arity(name).is_some() || matches!(name, "fromjson" | "count" | "min" | "max" | "sum" | "avg" | "token")
}

/// Whether `term` calls a function that is not the system's (a user
/// function, or a name that will be refused as unknown): such a term is
/// evaluated at each execution, where its EXECUTE permission is checked.
pub(crate) fn calls_user_function(term: &Term) -> bool {
    term.any(&|t| matches!(t, Term::FunctionCall { name, .. } if may_name_user_function(name)))
}

/// The keyspace and function name of a call named `name` in a table of
/// `keyspace`; `None` for system functions.
pub(crate) fn split_call<'n>(name: &'n str, keyspace: &'n str) -> Option<(&'n str, &'n str)> {
    match name.split_once('.') {
        Some(("system", _)) => None,
        Some((ks, f)) => Some((ks, f)),
        None => Some((keyspace, name)),
    }
}

/// Whether a call of `name` may mean a user function: qualified with
/// another keyspace than `system`, or unqualified and not the system's.
pub(crate) fn may_name_user_function(name: &str) -> bool {
    match name.split_once('.') {
        Some((keyspace, _)) => keyspace != "system",
        None => !is_native(name),
    }
}

fn arity(name: &str) -> Option<usize> {
    match name {
        "now" | "uuid" | "currenttimestamp" | "currentdate" | "currenttime" | "currenttimeuuid" => Some(0),
        "totimestamp" | "todate" | "tounixtimestamp" | "dateof" | "unixtimestampof" | "mintimeuuid" | "maxtimeuuid"
        | "tojson" => Some(1),
        "similarity_cosine" | "similarity_euclidean" | "similarity_dot_product" => Some(2),
        collection_fcts::SET_INTERSECTION => Some(2),
        "length" | "octet_length" => Some(1),
        // Or 2 or 3: `check_arguments` counts them.
        "format_bytes" | "format_time" => Some(1),
        _ if collection_fcts::NAMES.contains(&name) => Some(1),
        _ if math::NAMES.contains(&name) => Some(1),
        _ if conversion_type(name).is_some() => Some(1),
        _ => None,
    }
}

/// For `blobAsX` and `xAsBlob`: the type X.
fn conversion_type(name: &str) -> Option<CqlType> {
    let other = name.strip_prefix("blobas").or_else(|| name.strip_suffix("asblob"))?;
    CqlType::native(other)
}

/// The type a term has on its own, when it says so itself.
fn inferred_type(term: &Term) -> Option<CqlType> {
    match term {
        Term::FunctionCall { name, args } => call_result_type(name, args),
        Term::Cast { ty, .. } | Term::CastAs { ty, .. } => Some(ty.clone()),
        Term::Literal(Literal::String(_)) => Some(CqlType::Timestamp),
        Term::Literal(Literal::Integer(_)) => Some(CqlType::Timestamp),
        _ => None,
    }
}

/// What a call of `name` on `args` returns, when its arguments tell.
pub(crate) fn call_result_type(name: &str, args: &[Term]) -> Option<CqlType> {
    let name = name.trim_start_matches("system.");
    let types = argument_types(name, args, None).ok()?;
    result_type(name, &types)
}

/// What function `name` returns given its arguments' types (only a math
/// function's depends on them: it returns its argument's type).
pub fn result_type(name: &str, arg_types: &[CqlType]) -> Option<CqlType> {
    let ty = match name {
        _ if math::NAMES.contains(&name) => arg_types.first().filter(|ty| math::takes(ty))?.unfrozen().clone(),
        "now" | "currenttimeuuid" | "mintimeuuid" | "maxtimeuuid" => CqlType::Timeuuid,
        "uuid" => CqlType::Uuid,
        "currenttimestamp" | "totimestamp" | "dateof" => CqlType::Timestamp,
        "currentdate" | "todate" => CqlType::Date,
        "currenttime" => CqlType::Time,
        "tounixtimestamp" | "unixtimestampof" => CqlType::Bigint,
        "tojson" => CqlType::Text,
        "similarity_cosine" | "similarity_euclidean" | "similarity_dot_product" => CqlType::Float,
        "length" | "octet_length" => CqlType::Int,
        "format_bytes" | "format_time" => CqlType::Text,
        collection_fcts::SET_INTERSECTION => arg_types.first()?.unfrozen().clone(),
        _ if collection_fcts::NAMES.contains(&name) => collection_fcts::result_type(name, arg_types.first()?)?,
        _ if name.starts_with("blobas") => conversion_type(name)?,
        _ if name.ends_with("asblob") => CqlType::Blob,
        _ => return None,
    };
    Some(ty)
}

/// Applies function `name` to serialized arguments of `arg_types`; a
/// `None` value is null (a collection's minimum when it has none).
pub fn apply(name: &str, arg_types: &[CqlType], args: &[Bytes]) -> CqlResult<(CqlType, Option<Bytes>)> {
    let ret = result_type(name, arg_types).ok_or_else(|| invalid(format!("Unknown function '{name}'")))?;
    let arg = args.first();
    let arg_ty = arg_types.first();
    if let (true, Some(ty), Some(arg)) = (collection_fcts::NAMES.contains(&name), arg_ty, arg) {
        return Ok((ret, collection_fcts::apply(name, ty, arg)?));
    }
    let out = match (name, arg_ty, args) {
        (collection_fcts::SET_INTERSECTION, Some(ty), [a, b]) => collection_fcts::set_intersection(ty, a, b)?,
        _ => apply_one(name, &ret, arg_types, args)?,
    };
    Ok((ret, Some(out)))
}

/// A function of at most one argument (or a format function's units).
fn apply_one(name: &str, ret: &CqlType, arg_types: &[CqlType], args: &[Bytes]) -> CqlResult<Bytes> {
    let arg = args.first();
    let arg_ty = arg_types.first();
    Ok(match name {
        "length" | "octet_length" => length_fcts::apply(name, arg.map_or(&[][..], |a| &a[..]))?,
        "format_bytes" | "format_time" => format_fcts::apply(name, arg_types, args)?,
        "now" | "currenttimeuuid" => Bytes::copy_from_slice(&timeuuid_now()),
        "uuid" => Bytes::copy_from_slice(uuid::Uuid::new_v4().as_bytes()),
        "currenttimestamp" => Bytes::copy_from_slice(&now_ms().to_be_bytes()),
        "currentdate" => date_bytes(now_ms()),
        "currenttime" => Bytes::copy_from_slice(&((now_us() % (MS_PER_DAY * 1000)) * 1000).to_be_bytes()),
        "totimestamp" | "dateof" | "tounixtimestamp" | "unixtimestampof" => {
            Bytes::copy_from_slice(&to_ms(arg_ty, arg).to_be_bytes())
        }
        "todate" => date_bytes(to_ms(arg_ty, arg)),
        "tojson" => match (arg_ty, arg) {
            (Some(ty), Some(value)) => Bytes::from(crate::json::to_json(ty, value)?),
            _ => return Err(invalid("Invalid number of arguments in call to function system.tojson")),
        },
        "mintimeuuid" | "maxtimeuuid" => {
            let ms = to_ms(arg_ty, arg);
            let uuid = timeuuid_at(ms, name == "maxtimeuuid").ok_or_else(|| {
                invalid(format!("In call to function system.{name}, timestamp {ms} is outside the range of a timeuuid"))
            })?;
            Bytes::copy_from_slice(&uuid)
        }
        "similarity_cosine" | "similarity_euclidean" | "similarity_dot_product" => {
            Bytes::copy_from_slice(&similarity(name, args)?.to_be_bytes())
        }
        _ if math::NAMES.contains(&name) => {
            let value = Value::deserialize(ret, arg.map_or(&[][..], |a| &a[..]))
                .map_err(|e| invalid(format!("In call to function system.{name}, value {e}")))?;
            Bytes::from(math::apply(name, &value).map_err(|e| invalid(e.to_string()))?.to_bytes())
        }
        _ => {
            let value = arg.cloned().unwrap_or_default();
            // Cassandra's and ScyllaDB's text, which names the bytes.
            validate_value(ret, &value).map_err(|_| {
                let hex: String = value.iter().map(|b| format!("{b:02x}")).collect();
                invalid(format!(
                    "In call to function system.{name}, value 0x{hex} is not a valid binary representation for type {ret}"
                ))
            })?;
            value
        }
    })
}

/// The argument types of function `name`'s overloads, for messages and
/// checks; `None` where any type goes (toJson) or the types depend on one
/// another (the similarity functions take two float vectors of one size).
fn signatures(name: &str) -> Option<Vec<Vec<CqlType>>> {
    let one = |types: &[CqlType]| types.iter().map(|t| vec![t.clone()]).collect();
    Some(match name {
        "totimestamp" => one(&[CqlType::Timeuuid, CqlType::Date]),
        "todate" => one(&[CqlType::Timeuuid, CqlType::Timestamp]),
        "tounixtimestamp" => one(&[CqlType::Timeuuid, CqlType::Timestamp, CqlType::Date]),
        "dateof" | "unixtimestampof" => one(&[CqlType::Timeuuid]),
        "mintimeuuid" | "maxtimeuuid" => one(&[CqlType::Timestamp]),
        "length" => one(&length_fcts::LENGTH_TYPES),
        _ if math::NAMES.contains(&name) => one(&math::types()),
        _ if name.starts_with("blobas") => one(&[CqlType::Blob]),
        _ if name.ends_with("asblob") => one(&[conversion_type(name)?]),
        _ if arity(name) == Some(0) => vec![Vec::new()],
        _ => return None,
    })
}

/// Cassandra's refusal of a bare marker as the argument of a time
/// conversion that takes several types (`toDate(?)`): nothing tells which
/// overload is meant. `None` for every other function.
pub(crate) fn ambiguous_marker(name: &str) -> Option<CqlError> {
    if !matches!(name, "totimestamp" | "todate" | "tounixtimestamp") {
        return None;
    }
    let signatures: Vec<String> = signatures(name)?
        .iter()
        .filter_map(|types| {
            let ret = result_type(name, types)?;
            Some(format!("system.{name} : ({}) -> {ret}", types.first()?))
        })
        .collect();
    Some(invalid(format!(
        "Ambiguous call to function system.{name} (can be matched by following signatures: {}): use type casts to disambiguate",
        signatures.join(", ")
    )))
}

/// Refuses arguments of types function `name` does not take, with
/// Cassandra's messages: a function of one signature names the argument,
/// an overloaded one lists its signatures.
pub fn check_arguments(name: &str, args: &[(String, CqlType)]) -> CqlResult<()> {
    // One overload per native type: a wrong count matches none of them.
    if name == "octet_length" && args.len() != 1 {
        return Err(invalid(
            "Invalid call to function octet_length, none of its type signatures match (one per native type)",
        ));
    }
    if format_fcts::NAMES.contains(&name) {
        return format_fcts::check_count(name, args.len());
    }
    if name == collection_fcts::SET_INTERSECTION {
        return collection_fcts::check_set_intersection(args);
    }
    // ScyllaDB's text for its similarity functions.
    if name.starts_with("similarity_") && args.len() != 2 {
        return Err(invalid(format!(
            "Invalid number of arguments for function system.{name}(vector<float, n>, vector<float, n>)"
        )));
    }
    let expected = arity(name).ok_or_else(|| invalid(format!("Unknown function '{name}'")))?;
    if args.len() != expected {
        return Err(invalid(format!(
            "Invalid number of arguments in call to function system.{name}: {expected} required but {} provided",
            args.len()
        )));
    }
    if name.starts_with("similarity_") {
        return check_vectors(name, args);
    }
    if let (true, [(arg, ty)]) = (collection_fcts::NAMES.contains(&name), args) {
        return collection_fcts::check(name, arg, ty);
    }
    let Some(signatures) = signatures(name) else { return Ok(()) };
    let given: Vec<&CqlType> = args.iter().map(|(_, ty)| ty.unfrozen()).collect();
    if signatures.iter().any(|s| s.iter().zip(&given).all(|(want, got)| want == *got)) {
        return Ok(());
    }
    match signatures.as_slice() {
        [single] => {
            let at = single.iter().zip(&given).position(|(want, got)| want != *got).unwrap_or(0);
            Err(invalid(format!(
                "Type error: {} cannot be passed as argument {at} of function system.{name} of type {}",
                args[at].0, single[at]
            )))
        }
        _ => {
            let known: Vec<String> = signatures
                .iter()
                .map(|s| {
                    let types: Vec<String> = s.iter().map(CqlType::to_string).collect();
                    let ret = result_type(name, s).unwrap_or(CqlType::Blob);
                    format!("system.{name} : ({}) -> {ret}", types.join(", "))
                })
                .collect();
            Err(invalid(format!(
                "Invalid call to function {name}, none of its type signatures match (known type signatures: {})",
                known.join(", ")
            )))
        }
    }
}

fn check_vectors(name: &str, args: &[(String, CqlType)]) -> CqlResult<()> {
    let dimension = |(arg, ty): &(String, CqlType)| match ty.unfrozen() {
        CqlType::Vector(elem, n) if **elem == CqlType::Float => Ok(*n),
        _ => Err(invalid(format!(
            "Function system.{name} requires a float vector argument, but found argument {arg} of type {ty}"
        ))),
    };
    let (a, b) = (dimension(&args[0])?, dimension(&args[1])?);
    if a != b {
        return Err(invalid(format!("All arguments must have the same vector dimensions, but found {a} and {b}")));
    }
    Ok(())
}

/// The type a literal argument of function `name` takes at `index`, given
/// the other arguments' types: for a similarity function a list's own
/// float vector type, else the other float vector argument's; or the one
/// type a single signature names.
pub fn parameter_type(name: &str, index: usize, literal: &Term, others: &[Option<CqlType>]) -> Option<CqlType> {
    if name.starts_with("similarity_") {
        // A list literal is a float vector of its own length (so a wrong
        // length is told as differing dimensions); anything else (null, a
        // marker) takes the other argument's type when that is a float
        // vector, so a refusal names the other argument.
        let other = others
            .iter()
            .enumerate()
            .find(|(i, _)| *i != index)
            .and_then(|(_, t)| t.clone())
            .filter(|t| matches!(t.unfrozen(), CqlType::Vector(e, _) if **e == CqlType::Float));
        return match literal {
            Term::List(items) => Some(CqlType::Vector(Box::new(CqlType::Float), u32::try_from(items.len()).ok()?)),
            _ => other,
        };
    }
    // A set beside a set takes its type (`set_intersection(s, {1, 2})`).
    if name == collection_fcts::SET_INTERSECTION {
        return others.iter().enumerate().find(|(i, _)| *i != index).and_then(|(_, t)| t.clone());
    }
    // A format function's units are text.
    if format_fcts::NAMES.contains(&name) {
        return (index > 0).then_some(CqlType::Ascii);
    }
    match signatures(name)?.as_slice() {
        [single] => single.get(index).cloned(),
        _ => None,
    }
}

/// Refuses, as ScyllaDB does, a similarity function's constant arguments
/// that are no float vectors: a literal other than a list of numbers
/// (`similarity_cosine(v, 5)`, `(v, [1.1, 'dog'])`), and arguments that
/// are all nulls or markers (`similarity_cosine(null, null)`), whose type
/// nothing tells (Cassandra's text). `args` are the arguments' terms,
/// `None` for one that is no term (a column, a function call).
pub fn check_similarity_terms<'a>(name: &str, args: impl Iterator<Item = Option<&'a Term>> + Clone) -> CqlResult<()> {
    if !name.starts_with("similarity_") {
        return Ok(());
    }
    let untyped = |term: &Option<&Term>| matches!(term, Some(Term::Literal(Literal::Null) | Term::Bind(_)));
    let number = |term: &Term| matches!(term, Term::Literal(Literal::Integer(_) | Literal::Float(_)));
    for term in args.clone().flatten() {
        let vector = match term {
            Term::List(items) => items.iter().all(number),
            Term::Literal(Literal::Null) | Term::Bind(_) | Term::Cast { .. } | Term::FunctionCall { .. } => true,
            _ => false,
        };
        if !vector {
            // A list literal is told as ScyllaDB tells it: frozen.
            let ty = match constant_type(term) {
                list @ CqlType::List(_) => CqlType::Frozen(Box::new(list)),
                other => other,
            };
            return Err(invalid(format!(
                "Function system.{name} requires a float vector argument, but found {term} of type {ty}"
            )));
        }
    }
    let mut args = args;
    match args.next() {
        Some(first) if untyped(&first) && args.all(|a| untyped(&a)) => {
            let shown = match first {
                Some(Term::Bind(_)) => "?",
                _ => "null",
            };
            Err(cannot_infer(shown, name))
        }
        _ => Ok(()),
    }
}

/// The refusal of an argument (`?`, `null`) of function `name` whose type
/// nothing tells: ScyllaDB's text for its similarity functions,
/// Cassandra's for the others.
pub fn cannot_infer(shown: &str, name: &str) -> CqlError {
    match name.starts_with("similarity_") {
        true => invalid(format!(
            "Cannot infer type of argument {shown} for function system.{name}(vector<float, n>, vector<float, n>)"
        )),
        false => invalid(format!("Cannot infer type of argument {shown} in call to function system.{name}")),
    }
}

/// The type of a constant selector standing alone (`SELECT (text)'a', 4.5`):
/// a cast's, or the one ScyllaDB infers for a literal (text for a string,
/// double for a float, a tuple of its elements' types, ...); int for an
/// integer and whatever else tells nothing.
pub fn constant_type(term: &Term) -> CqlType {
    let of_all = |items: &[Term]| items.iter().map(constant_type).collect::<Vec<_>>();
    match term {
        Term::Cast { ty, .. } | Term::CastAs { ty, .. } => ty.clone(),
        Term::Literal(Literal::String(_)) => CqlType::Text,
        Term::Literal(Literal::Float(_)) => CqlType::Double,
        Term::Literal(Literal::Boolean(_)) => CqlType::Boolean,
        Term::Literal(Literal::Uuid(_)) => CqlType::Uuid,
        Term::Literal(Literal::Blob(_)) => CqlType::Blob,
        Term::Literal(Literal::Duration(_)) => CqlType::Duration,
        Term::Tuple(items) => CqlType::Tuple(of_all(items)),
        // By the first element; the parser gives set and map literals one.
        Term::List(items) | Term::Set(items) if !items.is_empty() => {
            let element = Box::new(constant_type(&items[0]));
            match term {
                Term::List(_) => CqlType::List(element),
                _ => CqlType::Set(element),
            }
        }
        Term::Map(entries) if !entries.is_empty() => {
            let (key, value) = &entries[0];
            CqlType::Map(Box::new(constant_type(key)), Box::new(constant_type(value)))
        }
        _ => CqlType::Int,
    }
}

/// Cassandra 5's (Lucene's) similarities of two float vectors, each
/// scaled into [0, 1]: cosine `(1 + cos) / 2`, euclidean
/// `1 / (1 + squared distance)`, dot product `(1 + dot) / 2`.
fn similarity(name: &str, args: &[Bytes]) -> CqlResult<f32> {
    let floats =
        |b: &Bytes| -> Vec<f32> { b.chunks_exact(4).map(|c| f32::from_be_bytes([c[0], c[1], c[2], c[3]])).collect() };
    let (Some(a), Some(b)) = (args.first().map(floats), args.get(1).map(floats)) else {
        return Err(invalid(format!("Invalid number of arguments in call to function system.{name}")));
    };
    let dot: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
    Ok(match name {
        "similarity_cosine" => {
            let norms = a.iter().map(|x| x * x).sum::<f32>().sqrt() * b.iter().map(|y| y * y).sum::<f32>().sqrt();
            if norms == 0.0 {
                return Err(invalid(format!("Function system.{name} doesn't support all-zero vectors")));
            }
            (1.0 + dot / norms) / 2.0
        }
        "similarity_euclidean" => 1.0 / (1.0 + a.iter().zip(&b).map(|(x, y)| (x - y) * (x - y)).sum::<f32>()),
        _ => (1.0 + dot) / 2.0,
    })
}

/// Milliseconds since the Unix epoch of a timeuuid, timestamp or date value.
fn to_ms(ty: Option<&CqlType>, value: Option<&Bytes>) -> i64 {
    let Some(value) = value else { return 0 };
    match ty {
        Some(CqlType::Timestamp) | Some(CqlType::Bigint) => {
            value.get(..8).map_or(0, |b| i64::from_be_bytes(b.try_into().unwrap_or_default()))
        }
        Some(CqlType::Date) => {
            let days = value.get(..4).map_or(0, |b| u32::from_be_bytes(b.try_into().unwrap_or_default())) as i64;
            (days - DATE_EPOCH) * MS_PER_DAY
        }
        _ => timeuuid_ms(value),
    }
}

fn date_bytes(ms: i64) -> Bytes {
    let days = ms.div_euclid(MS_PER_DAY) + DATE_EPOCH;
    Bytes::copy_from_slice(&(days as u32).to_be_bytes())
}

/// The Unix milliseconds in a version-1 UUID.
pub fn timeuuid_ms(value: &[u8]) -> i64 {
    let Some(b) = value.get(..8) else { return 0 };
    let time_low = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as i64;
    let time_mid = u16::from_be_bytes([b[4], b[5]]) as i64;
    let time_hi = (u16::from_be_bytes([b[6], b[7]]) & 0x0fff) as i64;
    let ts_100ns = (time_hi << 48) | (time_mid << 32) | time_low;
    (ts_100ns - UUID_EPOCH_OFFSET_100NS).div_euclid(10_000)
}

thread_local! {
    /// Last 100-ns tick handed out on this shard, so timeuuids are unique.
    static LAST_TICK: Cell<i64> = const { Cell::new(0) };
    static NODE: Cell<u64> = Cell::new(rand::random::<u64>() | 0x0100_0000_0000);
}

pub(crate) fn timeuuid_now() -> [u8; 16] {
    let now_ticks = now_us() * 10 + UUID_EPOCH_OFFSET_100NS;
    let tick = LAST_TICK.with(|last| {
        let tick = now_ticks.max(last.get() + 1);
        last.set(tick);
        tick
    });
    let node = NODE.with(Cell::get);
    timeuuid_from(tick, (node >> 48) as u16 & 0x3fff, node & 0xffff_ffff_ffff)
}

/// The smallest (or greatest) timeuuid at a millisecond, as Cassandra's
/// minTimeuuid/maxTimeuuid.
/// The least (or greatest) timeuuid of millisecond `ms`; `None` outside
/// what a timeuuid's 60 bits of 100 ns ticks from 1582-10-15 can hold
/// (a wrapped value would name another time).
fn timeuuid_at(ms: i64, greatest: bool) -> Option<[u8; 16]> {
    let base = ms.checked_mul(10_000)?.checked_add(UUID_EPOCH_OFFSET_100NS)?;
    let last = base.checked_add(9_999)?;
    if base < 0 || last >= 1 << 60 {
        return None;
    }
    Some(if greatest {
        timeuuid_from(last, 0x3f7f & 0x3fff, 0x7f7f_7f7f_7f7f)
    } else {
        timeuuid_from(base, 0x0080, 0x8080_8080_8080)
    })
}

fn timeuuid_from(ticks: i64, clock_seq: u16, node: u64) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[0..4].copy_from_slice(&(ticks as u32).to_be_bytes());
    out[4..6].copy_from_slice(&((ticks >> 32) as u16).to_be_bytes());
    out[6..8].copy_from_slice(&((((ticks >> 48) as u16) & 0x0fff) | 0x1000).to_be_bytes());
    out[8..10].copy_from_slice(&((clock_seq & 0x3fff) | 0x8000).to_be_bytes());
    out[10..16].copy_from_slice(&node.to_be_bytes()[2..8]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeuuids_carry_their_time_and_are_unique() {
        let before = now_ms();
        let a = timeuuid_now();
        let b = timeuuid_now();
        assert_ne!(a, b);
        assert_eq!(a[6] >> 4, 1, "version 1");
        let ms = timeuuid_ms(&a);
        assert!(ms >= before && ms <= now_ms());
        assert_eq!(timeuuid_at(1_000, false).map(|u| timeuuid_ms(&u)), Some(1_000));
        assert_eq!(timeuuid_at(1_000, true).map(|u| timeuuid_ms(&u)), Some(1_000));
        // Far past and future timestamps have no timeuuid: none is made up.
        for ms in [i64::MIN + 123, -(1 << 62), -(1 << 58), 1 << 62, i64::MAX - 123] {
            assert_eq!(timeuuid_at(ms, false), None, "{ms}");
            assert_eq!(timeuuid_at(ms, true), None, "{ms}");
        }
        let oldest = -UUID_EPOCH_OFFSET_100NS / 10_000;
        assert_eq!(timeuuid_at(oldest, false).map(|u| timeuuid_ms(&u)), Some(oldest));
    }

    #[test]
    fn conversions_know_their_types() {
        assert_eq!(result_type("blobastext", &[CqlType::Blob]), Some(CqlType::Text));
        assert_eq!(result_type("intasblob", &[CqlType::Int]), Some(CqlType::Blob));
        assert_eq!(result_type("totimestamp", &[CqlType::Timeuuid]), Some(CqlType::Timestamp));
        assert_eq!(result_type("abs", &[CqlType::Decimal]), Some(CqlType::Decimal));
        assert_eq!(result_type("abs", &[CqlType::Text]), None);
        assert_eq!(result_type("nosuch", &[]), None);
    }
}
