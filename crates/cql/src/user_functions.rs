//! The user-defined functions and aggregates a selector's call may name
//! (`ks.f(...)`, or `f(...)` in the table's keyspace), an aggregate with
//! its functions found and initial state evaluated, and folding its state
//! (each step run by `lua::call`). A call in a term is `functions`'.

use std::sync::Arc;

use bytes::Bytes;
use shoal_schema::{CqlType, KeyspaceMeta, Schema, UserAggregate, UserFunction};

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

/// The user functions and aggregates a call of `name` with `arity`
/// arguments may mean: empty when it names none (a system function, for an
/// unqualified name).
pub fn candidates(schema: &Schema, keyspace: &str, name: &str, arity: usize) -> CqlResult<Vec<Callee>> {
    let Some((ks, f)) = crate::functions::split_call(name, keyspace) else { return Ok(Vec::new()) };
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
            eval(&term, Receiver { name: "initcond", ty: state }, Bindings::NONE)?.into_option()
        }
        None => None,
    };
    Ok(Aggregate { definition: Arc::clone(aggregate), state_func, final_func, initial })
}

/// One row's step of `aggregate`: the next state from `state` and the
/// row's `args`.
pub fn step(aggregate: &Aggregate, state: Option<Bytes>, args: Vec<Option<Bytes>>) -> CqlResult<Option<Bytes>> {
    let mut all = Vec::with_capacity(args.len() + 1);
    all.push(state);
    all.extend(args);
    lua::call(&aggregate.state_func, &all)
}

/// The aggregate's result from its last state.
pub fn finish(aggregate: &Aggregate, state: Option<Bytes>) -> CqlResult<Option<Bytes>> {
    match &aggregate.final_func {
        Some(f) => lua::call(f, &[state]),
        None => Ok(state),
    }
}
