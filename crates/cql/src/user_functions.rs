//! Calling user-defined functions and aggregates: finding the one a call
//! names (`ks.f(...)`, or `f(...)` in the table's keyspace), running it on
//! serialized values, and folding an aggregate's state. A selector's call
//! is compiled by `select`; a call in a term (`VALUES (ks.f(1))`, a
//! subscript, a collection literal's element) is run here, with its EXECUTE
//! permission checked at each call.
//!
//! A failure while running (a Lua error, a bad result, the instruction
//! bound) is a FunctionFailure naming the function, as in Cassandra; a
//! function `RETURNS NULL ON NULL INPUT` is not run on a null argument.

use std::sync::Arc;

use bytes::Bytes;
use shoal_schema::{CqlType, KeyspaceMeta, Schema, UserAggregate, UserFunction, Value};

use crate::ast::Term;
use crate::error::{invalid, CqlError, CqlResult};
use crate::lua;
use crate::parser::parse_term;
use crate::values::{eval, Bindings, BoundValue, Receiver};

/// A user function or aggregate that a call may name.
pub enum Callee {
    Function(Arc<UserFunction>),
    Aggregate(Arc<Aggregate>),
}

/// An aggregate with its functions found and its initial state evaluated.
#[derive(Debug)]
pub struct Aggregate {
    pub definition: Arc<UserAggregate>,
    pub state_func: Arc<UserFunction>,
    pub final_func: Option<Arc<UserFunction>>,
    pub initial: Option<Bytes>,
}

/// The keyspace and function name of a call named `name` in a table of
/// `keyspace`; `None` for system functions.
fn split<'n>(name: &'n str, keyspace: &'n str) -> Option<(&'n str, &'n str)> {
    match name.split_once('.') {
        Some(("system", _)) => None,
        Some((ks, f)) => Some((ks, f)),
        None => Some((keyspace, name)),
    }
}

/// The user functions and aggregates a call of `name` with `arity`
/// arguments may mean: empty when it names none (a system function, for an
/// unqualified name).
pub fn candidates(schema: &Schema, keyspace: &str, name: &str, arity: usize) -> CqlResult<Vec<Callee>> {
    let Some((ks, f)) = split(name, keyspace) else { return Ok(Vec::new()) };
    let Some(meta) = schema.keyspace(ks) else { return Ok(Vec::new()) };
    let (functions, aggregates) = meta.functions.named(f);
    let mut found: Vec<Callee> =
        functions.filter(|f| f.arg_types.len() == arity).map(|f| Callee::Function(Arc::clone(f))).collect();
    for aggregate in aggregates.filter(|a| a.arg_types.len() == arity) {
        found.push(Callee::Aggregate(Arc::new(resolve_aggregate(meta, aggregate)?)));
    }
    Ok(found)
}

/// The user function a call in a term names: `None` for a system
/// function or a name no user function has (the caller then reports it
/// unknown). Of overloads, the one whose parameters take every argument.
pub fn term_callee(name: &str, args: &[Term], bindings: Bindings<'_>) -> CqlResult<Option<Arc<UserFunction>>> {
    if !crate::functions::may_name_user_function(name) {
        return Ok(None);
    }
    let schema = shoal_coordinator::schema();
    let keyspace = bindings.keyspace.unwrap_or_default();
    let mut functions = Vec::new();
    for callee in candidates(&schema, keyspace, name, args.len())? {
        match callee {
            Callee::Function(f) => functions.push(f),
            Callee::Aggregate(_) => return Err(invalid("Aggregation functions are not supported in the where clause")),
        }
    }
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
pub fn call_in_term(
    function: &UserFunction,
    args: &[Term],
    receiver: Receiver<'_>,
    bindings: Bindings<'_>,
) -> CqlResult<BoundValue> {
    crate::auth::access::check_execute(
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
    Ok(execute(function, &values)?.map_or(BoundValue::Null, BoundValue::Value))
}

/// A SELECT without FROM reads `system.one_row`, but an unqualified call
/// in it names a function of the session's keyspace (ScyllaDB's `USE ks;
/// SELECT f(1)`): such names are qualified with `keyspace` when it has a
/// function or aggregate by that name.
pub fn qualify_calls(select: &mut crate::ast::Select, schema: &Schema, keyspace: &str) {
    let Some(meta) = schema.keyspace(keyspace) else { return };
    let crate::ast::Selection::Selectors(selectors) = &mut select.selection else { return };
    let mut qualify = |name: &mut String| {
        let known = |name: &str| {
            let (mut functions, mut aggregates) = meta.functions.named(name);
            functions.next().is_some() || aggregates.next().is_some()
        };
        if !name.contains('.') && crate::functions::may_name_user_function(name) && known(name) {
            *name = format!("{keyspace}.{name}");
        }
    };
    for selector in selectors {
        selector.expr.function_names_mut(&mut qualify);
    }
}

impl Callee {
    pub fn arg_types(&self) -> &[CqlType] {
        match self {
            Callee::Function(f) => &f.arg_types,
            Callee::Aggregate(a) => &a.definition.arg_types,
        }
    }

    pub fn return_type(&self) -> &CqlType {
        match self {
            Callee::Function(f) => &f.return_type,
            Callee::Aggregate(a) => &a.definition.return_type,
        }
    }

    /// `ks.name`, as a selection's column is named.
    pub fn full_name(&self) -> String {
        match self {
            Callee::Function(f) => format!("{}.{}", f.keyspace, f.name),
            Callee::Aggregate(a) => format!("{}.{}", a.definition.keyspace, a.definition.name),
        }
    }
}

fn resolve_aggregate(keyspace: &KeyspaceMeta, aggregate: &Arc<UserAggregate>) -> CqlResult<Aggregate> {
    let state = &aggregate.state_type;
    let find = |name: &str, args: &[CqlType]| {
        keyspace
            .functions
            .functions
            .iter()
            .find(|f| f.name == name && crate::function_ddl::same_types(&f.arg_types, args))
            .cloned()
            .ok_or_else(|| CqlError::Server(format!("aggregate {} lost its function {name}", aggregate.name)))
    };
    let state_args: Vec<CqlType> = std::iter::once(state.clone()).chain(aggregate.arg_types.iter().cloned()).collect();
    let state_func = find(&aggregate.state_func, &state_args)?;
    let final_func = match &aggregate.final_func {
        Some(name) => Some(find(name, std::slice::from_ref(state))?),
        None => None,
    };
    let initial = match &aggregate.initcond {
        Some(text) => {
            let term = parse_term(text).map_err(|e| CqlError::Server(format!("initcond {text}: {e}")))?;
            eval(&term, Receiver { name: "initcond", ty: state }, Bindings::NONE)?.into_option()
        }
        None => None,
    };
    Ok(Aggregate { definition: Arc::clone(aggregate), state_func, final_func, initial })
}

/// Runs `function` on serialized `args` (null: `None`).
pub fn execute(function: &UserFunction, args: &[Option<Bytes>]) -> CqlResult<Option<Bytes>> {
    if !function.called_on_null_input && args.iter().any(Option::is_none) {
        return Ok(None);
    }
    let mut values = Vec::with_capacity(args.len());
    for (arg, ty) in args.iter().zip(&function.arg_types) {
        values.push(match arg {
            // An empty value of a type that has no empty form reads as null.
            Some(bytes)
                if bytes.is_empty() && !matches!(ty.unfrozen(), CqlType::Text | CqlType::Ascii | CqlType::Blob) =>
            {
                None
            }
            Some(bytes) => Some(
                Value::deserialize(ty, bytes)
                    .map_err(|e| CqlError::Server(format!("argument of {}: {e}", function.name)))?,
            ),
            None => None,
        });
    }
    match lua::run(function, &values) {
        Ok(result) => Ok(result.map(|v| Bytes::from(v.to_bytes()))),
        Err(message) if lua::is_invalid_result(&message) => Err(CqlError::Invalid(message)),
        Err(message) => Err(CqlError::FunctionFailure {
            keyspace: function.keyspace.clone(),
            function: function.name.clone(),
            arg_types: function.arg_types.iter().map(ToString::to_string).collect(),
            message: format!("execution of '{}.{}' failed: {message}", function.keyspace, function.name),
        }),
    }
}

/// One row's step of `aggregate`: the next state from `state` and the
/// row's `args`.
pub fn step(aggregate: &Aggregate, state: Option<Bytes>, args: Vec<Option<Bytes>>) -> CqlResult<Option<Bytes>> {
    let mut all = Vec::with_capacity(args.len() + 1);
    all.push(state);
    all.extend(args);
    execute(&aggregate.state_func, &all)
}

/// The aggregate's result from its last state.
pub fn finish(aggregate: &Aggregate, state: Option<Bytes>) -> CqlResult<Option<Bytes>> {
    match &aggregate.final_func {
        Some(f) => execute(f, &[state]),
        None => Ok(state),
    }
}
