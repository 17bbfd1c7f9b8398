//! CREATE/DROP FUNCTION and AGGREGATE: checks, in ScyllaDB's (else
//! Cassandra's) texts, and the keyspace's next list of functions.
//!
//! A function's body is compiled here, so one that is not Lua is refused
//! when created; an aggregate's functions must exist with the signatures
//! its state type asks for, and a function an aggregate uses cannot be
//! dropped (see `shoal_schema::function`).

use shoal_schema::function::signature;
use shoal_schema::{CqlType, KeyspaceMeta, SchemaChangeTarget, UserAggregate, UserFunction};

use crate::ast::{CreateAggregate, CreateFunction, DropFunction};
use crate::error::{invalid, CqlResult};
use crate::lua;
use crate::values::{eval, Bindings, BoundValue, Receiver};

/// The change a function statement announces: its name and argument types.
fn target(keyspace: &str, name: &str, arg_types: &[CqlType], aggregate: bool) -> SchemaChangeTarget {
    let (keyspace, name) = (keyspace.to_string(), name.to_string());
    let arg_types = arg_types.iter().map(ToString::to_string).collect();
    match aggregate {
        false => SchemaChangeTarget::Function { keyspace, name, arg_types },
        true => SchemaChangeTarget::Aggregate { keyspace, name, arg_types },
    }
}

/// Whether a function (or an `aggregate`) `name(arg_types)` may be
/// created with `(or_replace, if_not_exists)`: `false` when IF NOT EXISTS
/// finds one; an error when one exists otherwise, or the other kind has
/// the signature.
fn may_create(
    keyspace: &KeyspaceMeta,
    name: &str,
    arg_types: &[CqlType],
    (or_replace, if_not_exists): (bool, bool),
    aggregate: bool,
) -> CqlResult<bool> {
    if or_replace && if_not_exists {
        return Err(invalid("Cannot use both 'OR REPLACE' and 'IF NOT EXISTS' directives"));
    }
    let functions = &keyspace.functions;
    let scalar = functions.function(name, arg_types).map(|f| f.return_type.clone());
    let aggregated = functions.aggregate(name, arg_types).map(|a| a.return_type.clone());
    let (same, other) = if aggregate { (aggregated, scalar) } else { (scalar, aggregated) };
    let what = if aggregate { "aggregate" } else { "function" };
    if let Some(returns) = other {
        let old = described(&keyspace.name, name, arg_types, &returns);
        return Err(invalid(format!("Cannot replace '{old}' which is not a user defined {what}")));
    }
    match (same, or_replace, if_not_exists) {
        (Some(_), false, true) => Ok(false),
        (Some(returns), false, false) => {
            let old = described(&keyspace.name, name, arg_types, &returns);
            Err(invalid(format!("The function '{old}' already exists")))
        }
        _ => Ok(true),
    }
}

/// A function as ScyllaDB's errors name one: `ks.f : (int, text) -> int`.
fn described(keyspace: &str, name: &str, arg_types: &[CqlType], returns: &CqlType) -> String {
    let args: Vec<String> = arg_types.iter().map(ToString::to_string).collect();
    format!("{keyspace}.{name} : ({}) -> {returns}", args.join(", "))
}

/// Applies CREATE FUNCTION; `None` when `IF NOT EXISTS` made it a no-op.
pub fn create_function(keyspace: &mut KeyspaceMeta, s: &CreateFunction) -> CqlResult<Option<SchemaChangeTarget>> {
    let arg_types: Vec<CqlType> = s.args.iter().map(|(_, ty)| ty.clone()).collect();
    let full = format!("{}.{}", keyspace.name, signature(&s.name, &arg_types));
    let directives = (s.or_replace, s.if_not_exists);
    if !may_create(keyspace, &s.name, &arg_types, directives, false)? {
        return Ok(None);
    }
    let language = s.language.to_ascii_lowercase();
    if language != "lua" {
        return Err(invalid(format!("Language '{}' is not supported", s.language)));
    }
    let arg_names: Vec<String> = s.args.iter().map(|(name, _)| name.clone()).collect();
    if let Some(name) = arg_names.iter().enumerate().find_map(|(i, n)| arg_names[..i].contains(n).then_some(n)) {
        return Err(invalid(format!("Duplicate argument name {name} in function {full}")));
    }
    lua::check(&arg_names, &s.body).map_err(invalid)?;
    let return_type = s.return_type.clone();
    let function = UserFunction {
        keyspace: keyspace.name.clone(),
        name: s.name.clone(),
        arg_names,
        arg_types: arg_types.clone(),
        return_type,
        called_on_null_input: s.called_on_null_input,
        language,
        body: s.body.clone(),
    };
    if let Some(user) = keyspace.aggregates_using(&function) {
        if function.return_type.unfrozen() != user.1.unfrozen() {
            return Err(invalid(format!(
                "Cannot change the return type of {full}, as it is used by user-defined aggregate {}.{}",
                keyspace.name, user.0
            )));
        }
    }
    keyspace.functions.put_function(function);
    Ok(Some(target(&keyspace.name, &s.name, &arg_types, false)))
}

/// The scalar function `name(arg_types)` of `keyspace` an aggregate calls,
/// or ScyllaDB's error (`what` is "State" or "Final"; an aggregate of that
/// signature is not found either).
fn needed<'k>(
    keyspace: &'k KeyspaceMeta,
    what: &str,
    name: &str,
    arg_types: &[CqlType],
) -> CqlResult<&'k UserFunction> {
    let found = keyspace
        .functions
        .functions
        .iter()
        .find(|f| f.name == name && same_types(&f.arg_types, arg_types))
        .map(AsRef::as_ref);
    found.ok_or_else(|| invalid(format!("{what} function {} not found", signature(name, arg_types))))
}

/// Argument types that match, frozen or not, at any depth (a frozen
/// tuple column holds frozen collections; the function names them bare).
pub(crate) fn same_types(a: &[CqlType], b: &[CqlType]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| thawed(a) == thawed(b))
}

/// `ty` without any `frozen<>`.
fn thawed(ty: &CqlType) -> CqlType {
    let inner = |t: &CqlType| Box::new(thawed(t));
    match ty.unfrozen() {
        CqlType::List(e) => CqlType::List(inner(e)),
        CqlType::Set(e) => CqlType::Set(inner(e)),
        CqlType::Map(k, v) => CqlType::Map(inner(k), inner(v)),
        CqlType::Vector(e, dimension) => CqlType::Vector(inner(e), *dimension),
        CqlType::Tuple(types) => CqlType::Tuple(types.iter().map(thawed).collect()),
        other => other.clone(),
    }
}

/// Applies CREATE AGGREGATE; `None` when `IF NOT EXISTS` made it a no-op.
pub fn create_aggregate(keyspace: &mut KeyspaceMeta, s: &CreateAggregate) -> CqlResult<Option<SchemaChangeTarget>> {
    let arg_types = s.arg_types.clone();
    if !may_create(keyspace, &s.name, &arg_types, (s.or_replace, s.if_not_exists), true)? {
        return Ok(None);
    }
    let state_type = s.state_type.clone();
    let state_args: Vec<CqlType> = std::iter::once(state_type.clone()).chain(arg_types.iter().cloned()).collect();
    let state_func = needed(keyspace, "State", &s.state_func, &state_args)?;
    if state_func.return_type.unfrozen() != state_type.unfrozen() {
        return Err(invalid(format!("State function '{}' doesn't return state ({state_type})", s.state_func)));
    }
    let pair = [state_type.clone(), state_type.clone()];
    if let Some(reduce) = &s.reduce_func {
        let reduce_func = keyspace
            .functions
            .functions
            .iter()
            .find(|f| f.name == *reduce && same_types(&f.arg_types, &pair))
            .ok_or_else(|| {
                invalid(format!("Scalar reduce function {reduce} for state type {state_type} not found."))
            })?;
        if reduce_func.return_type.unfrozen() != state_type.unfrozen() {
            return Err(invalid(format!(
                "Reduce function {}.{} return type must be the same as the state type",
                keyspace.name,
                signature(reduce, &pair)
            )));
        }
    }
    let return_type = match &s.final_func {
        Some(name) => needed(keyspace, "Final", name, &pair[..1])?.return_type.clone(),
        None => state_type.clone(),
    };
    let initcond = match &s.initcond {
        Some(term) => {
            let receiver = Receiver { name: "initcond", ty: &state_type };
            match eval(term, receiver, Bindings::NONE)? {
                BoundValue::Value(_) => Some(term.to_string()),
                _ => None,
            }
        }
        None => None,
    };
    let aggregate = UserAggregate {
        keyspace: keyspace.name.clone(),
        name: s.name.clone(),
        arg_types: arg_types.clone(),
        state_func: s.state_func.clone(),
        state_type,
        final_func: s.final_func.clone(),
        reduce_func: s.reduce_func.clone(),
        initcond,
        return_type,
    };
    keyspace.functions.put_aggregate(aggregate);
    Ok(Some(target(&keyspace.name, &s.name, &arg_types, true)))
}

/// The argument types of the overloads a DROP FUNCTION|AGGREGATE names:
/// those of its name and kind, narrowed to the one of the argument types
/// it gives, if it gives them.
pub fn named_overloads(keyspace: &KeyspaceMeta, s: &DropFunction) -> Vec<Vec<CqlType>> {
    let functions = &keyspace.functions;
    let signatures: Vec<Vec<CqlType>> = match s.aggregate {
        false => functions.functions.iter().filter(|f| f.name == s.name).map(|f| f.arg_types.clone()).collect(),
        true => functions.aggregates.iter().filter(|a| a.name == s.name).map(|a| a.arg_types.clone()).collect(),
    };
    match &s.args {
        Some(args) => signatures.into_iter().filter(|types| same_types(types, args)).take(1).collect(),
        None => signatures,
    }
}

/// Applies DROP FUNCTION|AGGREGATE; `None` when `IF EXISTS` found none.
/// As in ScyllaDB, the name is looked up among functions and aggregates
/// both; the kind is checked only once one is found.
pub fn drop(keyspace: &mut KeyspaceMeta, s: &DropFunction) -> CqlResult<Option<SchemaChangeTarget>> {
    let full = format!("{}.{}", keyspace.name, s.name);
    let arg_types = s.args.clone();
    let functions = &keyspace.functions;
    let scalars =
        functions.functions.iter().filter(|f| f.name == s.name).map(|f| (false, &f.arg_types, &f.return_type));
    let aggregates =
        functions.aggregates.iter().filter(|a| a.name == s.name).map(|a| (true, &a.arg_types, &a.return_type));
    let candidates: Vec<(bool, &Vec<CqlType>, &CqlType)> = scalars.chain(aggregates).collect();
    let found = match &arg_types {
        Some(args) => candidates.into_iter().find(|(_, types, _)| same_types(types, args)),
        None if candidates.len() > 1 => return Err(invalid(format!("There are multiple functions named {full}"))),
        None => candidates.into_iter().next(),
    };
    let Some((is_aggregate, found, returns)) = found else {
        if s.if_exists {
            return Ok(None);
        }
        return Err(invalid(match &arg_types {
            Some(args) => {
                let args: Vec<String> = args.iter().map(ToString::to_string).collect();
                format!("User function {full}({}) doesn't exist", args.join(", "))
            }
            None => format!("No function named {full} found"),
        }));
    };
    if is_aggregate != s.aggregate {
        let what = if s.aggregate { "aggregate" } else { "function" };
        let found = described(&keyspace.name, &s.name, found, returns);
        return Err(invalid(format!("'{found}' is not a user defined {what}")));
    }
    let found = found.clone();
    if s.aggregate {
        keyspace.functions.aggregates.retain(|a| !(a.name == s.name && a.arg_types == found));
    } else {
        if let Some(user) = functions.aggregates.iter().find(|a| uses(a, &s.name, &found)) {
            return Err(invalid(format!(
                "Cannot delete function {}.{}, as it is used by user-defined aggregate {}.{}",
                keyspace.name,
                signature(&s.name, &found),
                keyspace.name,
                user.name
            )));
        }
        keyspace.functions.functions.retain(|f| !(f.name == s.name && f.arg_types == found));
    }
    Ok(Some(target(&keyspace.name, &s.name, &found, s.aggregate)))
}

/// Whether `aggregate` calls function `name(arg_types)`.
fn uses(aggregate: &UserAggregate, name: &str, arg_types: &[CqlType]) -> bool {
    let state = &aggregate.state_type;
    let state_args: Vec<CqlType> = std::iter::once(state.clone()).chain(aggregate.arg_types.iter().cloned()).collect();
    let pair = [state.clone(), state.clone()];
    (aggregate.state_func == name && same_types(&state_args, arg_types))
        || (aggregate.final_func.as_deref() == Some(name) && same_types(&pair[..1], arg_types))
        || (aggregate.reduce_func.as_deref() == Some(name) && same_types(&pair, arg_types))
}

/// Used by [`create_function`]: the first aggregate that calls `function`
/// as its state or reduce function (whose result must stay the state type),
/// with that type.
trait AggregatesUsing {
    fn aggregates_using(&self, function: &UserFunction) -> Option<(String, CqlType)>;
}

impl AggregatesUsing for KeyspaceMeta {
    fn aggregates_using(&self, function: &UserFunction) -> Option<(String, CqlType)> {
        self.functions.aggregates.iter().find(|a| uses(a, &function.name, &function.arg_types)).map(|a| {
            let must_return = match a.final_func.as_deref() == Some(function.name.as_str())
                && same_types(std::slice::from_ref(&a.state_type), &function.arg_types)
            {
                true => a.return_type.clone(),
                false => a.state_type.clone(),
            };
            (a.name.clone(), must_return)
        })
    }
}

#[cfg(test)]
mod tests {
    use shoal_schema::Schema;

    use crate::ddl;
    use crate::error::CqlError;

    fn apply(schema: &Schema, text: &str) -> Result<Schema, String> {
        let parsed = crate::parser::parse_statement(text).map_err(|e| e.to_string())?;
        match ddl::apply(schema, &parsed.statement, Some("ks")) {
            Ok(Some((next, _))) => Ok(next),
            Ok(None) => Ok(schema.clone()),
            Err(CqlError::Invalid(message)) => Err(message),
            Err(e) => Err(e.to_string()),
        }
    }

    fn run(statements: &[&str]) -> Schema {
        let keyspace = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}";
        std::iter::once(&keyspace)
            .chain(statements)
            .fold(Schema::empty(), |schema, text| apply(&schema, text).expect("applies"))
    }

    #[test]
    fn argument_types_match_frozen_or_not_at_any_depth() {
        let parse = |t: &str| shoal_schema::CqlType::parse(t).expect("type");
        let declared = [parse("tuple<double, list<double>, map<int, boolean>>")];
        let column = [parse("frozen<tuple<double, frozen<list<double>>, frozen<map<int, boolean>>>>")];
        assert!(super::same_types(&declared, &column));
        assert!(!super::same_types(&declared, &[parse("frozen<tuple<double, list<int>, map<int, boolean>>>")]));
    }

    const PLUS: &str =
        "CREATE FUNCTION plus(s int, v int) RETURNS NULL ON NULL INPUT RETURNS int LANGUAGE lua AS 'return s + v'";

    #[test]
    fn refusals_in_scyllas_texts() {
        let schema = run(&[
            PLUS,
            "CREATE FUNCTION plus(s int) RETURNS NULL ON NULL INPUT RETURNS int LANGUAGE lua AS 'return s'",
        ]);
        let java = "CREATE FUNCTION j(i int) CALLED ON NULL INPUT RETURNS int LANGUAGE java AS 'return 42;'";
        assert_eq!(apply(&schema, java).err().as_deref(), Some("Language 'java' is not supported"));
        assert_eq!(
            apply(&schema, PLUS).err().as_deref(),
            Some("The function 'ks.plus : (int, int) -> int' already exists")
        );
        assert_eq!(
            apply(&schema, "DROP FUNCTION plus").err().as_deref(),
            Some("There are multiple functions named ks.plus")
        );
        assert_eq!(apply(&schema, "DROP FUNCTION nope").err().as_deref(), Some("No function named ks.nope found"));
        assert_eq!(
            apply(&schema, "DROP FUNCTION plus(text)").err().as_deref(),
            Some("User function ks.plus(text) doesn't exist")
        );
        assert_eq!(
            apply(&schema, "DROP AGGREGATE nosuch.f(int)").err().as_deref(),
            Some("User function nosuch.f(int) doesn't exist")
        );
        assert!(apply(&schema, "DROP FUNCTION IF EXISTS nosuch.f").is_ok());
        let bad = "CREATE FUNCTION b(i int) CALLED ON NULL INPUT RETURNS int LANGUAGE lua AS 'return ('";
        assert!(apply(&schema, bad).err().is_some_and(|e| e.starts_with("could not compile: ")));
        let schema = apply(&schema, "CREATE AGGREGATE total(int) SFUNC plus STYPE int INITCOND 0").expect("created");
        assert_eq!(
            apply(&schema, "DROP FUNCTION plus(int, int)").err().as_deref(),
            Some("Cannot delete function ks.plus(int, int), as it is used by user-defined aggregate ks.total")
        );
        assert_eq!(
            apply(&schema, "CREATE AGGREGATE t2(text) SFUNC plus STYPE int").err().as_deref(),
            Some("State function plus(int, text) not found")
        );
        assert_eq!(
            apply(&schema, "CREATE AGGREGATE t3(int) SFUNC plus STYPE int FINALFUNC total").err().as_deref(),
            Some("Final function total(int) not found")
        );
        let text =
            "CREATE FUNCTION half(s int, v int) RETURNS NULL ON NULL INPUT RETURNS text LANGUAGE lua AS 'return s'";
        let schema = apply(&schema, text).expect("created");
        assert_eq!(
            apply(&schema, "CREATE AGGREGATE t4(int) SFUNC half STYPE int").err().as_deref(),
            Some("State function 'half' doesn't return state (int)")
        );
        assert_eq!(
            apply(&schema, "DROP FUNCTION total").err().as_deref(),
            Some("'ks.total : (int) -> int' is not a user defined function")
        );
        assert_eq!(
            apply(&schema, "DROP AGGREGATE plus(int, int)").err().as_deref(),
            Some("'ks.plus : (int, int) -> int' is not a user defined aggregate")
        );
        assert_eq!(
            apply(&schema, "DROP AGGREGATE plus").err().as_deref(),
            Some("There are multiple functions named ks.plus")
        );
        let schema = apply(&schema, "DROP AGGREGATE total").expect("dropped");
        let schema = apply(&schema, "DROP FUNCTION plus(int, int)").expect("dropped");
        assert_eq!(schema.keyspace("ks").map(|k| k.functions.functions.len()), Some(2));
    }
}
