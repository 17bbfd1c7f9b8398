//! Calling user-defined functions and aggregates: finding the one a call
//! names (`ks.f(...)`, or `f(...)` in the table's keyspace), running it on
//! serialized values, and folding an aggregate's state.
//!
//! A failure while running (a Lua error, a bad result, the instruction
//! bound) is a FunctionFailure naming the function, as in Cassandra; a
//! function `RETURNS NULL ON NULL INPUT` is not run on a null argument.

use std::sync::Arc;

use bytes::Bytes;
use shoal_schema::{CqlType, KeyspaceMeta, Schema, UserAggregate, UserFunction, Value};

use crate::error::{CqlError, CqlResult};
use crate::lua;
use crate::parser::parse_term;
use crate::values::{eval, Bindings, Receiver};

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
            eval(&term, Receiver { name: "initcond", ty: state }, Bindings { values: &[] })?.into_option()
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
