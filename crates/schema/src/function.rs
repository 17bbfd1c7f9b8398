//! User-defined functions and aggregates of a keyspace (CREATE FUNCTION,
//! CREATE AGGREGATE): their definitions as the schema keeps them.
//!
//! A function is known by its name and argument types (overloads share a
//! name). An aggregate names its state and final functions, which are
//! functions of the same keyspace; a function an aggregate uses cannot be
//! dropped, so every aggregate's functions exist while it does.

use std::sync::Arc;

use crate::CqlType;

/// `CREATE FUNCTION ks.name(arg type, ...) ... RETURNS type LANGUAGE lua AS body`.
#[derive(Debug, Clone, PartialEq)]
pub struct UserFunction {
    pub keyspace: String,
    pub name: String,
    pub arg_names: Vec<String>,
    pub arg_types: Vec<CqlType>,
    pub return_type: CqlType,
    /// `CALLED ON NULL INPUT`; else `RETURNS NULL ON NULL INPUT`: a null
    /// argument makes the result null without running the body.
    pub called_on_null_input: bool,
    pub language: String,
    pub body: String,
}

/// `CREATE AGGREGATE ks.name(type, ...) SFUNC s STYPE t [FINALFUNC f] [INITCOND c]`.
#[derive(Debug, Clone, PartialEq)]
pub struct UserAggregate {
    pub keyspace: String,
    pub name: String,
    pub arg_types: Vec<CqlType>,
    /// Called as `state_func(state, args...)` (arguments `state_type`
    /// then `arg_types`) for each row.
    pub state_func: String,
    pub state_type: CqlType,
    /// Called as `final_func(state)` at the end.
    pub final_func: Option<String>,
    /// ScyllaDB's REDUCEFUNC: `reduce_func(state, state)`, kept and shown.
    pub reduce_func: Option<String>,
    /// The initial state as a CQL literal (`0`, `'x'`, `(0, 0)`), or none
    /// (a null state).
    pub initcond: Option<String>,
    /// The final function's return type, else the state type.
    pub return_type: CqlType,
}

/// A keyspace's functions and aggregates, each list ordered by name then
/// argument types (as text), so listings and the schema file are stable.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Functions {
    pub functions: Vec<Arc<UserFunction>>,
    pub aggregates: Vec<Arc<UserAggregate>>,
}

/// `name(type, ...)`, as messages and events write a signature.
pub fn signature(name: &str, arg_types: &[CqlType]) -> String {
    let types: Vec<String> = arg_types.iter().map(ToString::to_string).collect();
    format!("{name}({})", types.join(", "))
}

fn order_key(name: &str, arg_types: &[CqlType]) -> (String, String) {
    (name.to_string(), signature("", arg_types))
}

impl Functions {
    pub fn is_empty(&self) -> bool {
        self.functions.is_empty() && self.aggregates.is_empty()
    }

    pub fn function(&self, name: &str, arg_types: &[CqlType]) -> Option<&Arc<UserFunction>> {
        self.functions.iter().find(|f| f.name == name && f.arg_types == arg_types)
    }

    pub fn aggregate(&self, name: &str, arg_types: &[CqlType]) -> Option<&Arc<UserAggregate>> {
        self.aggregates.iter().find(|a| a.name == name && a.arg_types == arg_types)
    }

    /// Every overload of `name`, functions first.
    pub fn named<'s>(
        &'s self,
        name: &'s str,
    ) -> (impl Iterator<Item = &'s Arc<UserFunction>>, impl Iterator<Item = &'s Arc<UserAggregate>>) {
        (self.functions.iter().filter(move |f| f.name == name), self.aggregates.iter().filter(move |a| a.name == name))
    }

    /// Adds or replaces (same name and argument types) `function`.
    pub fn put_function(&mut self, function: UserFunction) {
        self.functions.retain(|f| !(f.name == function.name && f.arg_types == function.arg_types));
        self.functions.push(Arc::new(function));
        self.functions.sort_by_key(|f| order_key(&f.name, &f.arg_types));
    }

    /// Adds or replaces (same name and argument types) `aggregate`.
    pub fn put_aggregate(&mut self, aggregate: UserAggregate) {
        self.aggregates.retain(|a| !(a.name == aggregate.name && a.arg_types == aggregate.arg_types));
        self.aggregates.push(Arc::new(aggregate));
        self.aggregates.sort_by_key(|a| order_key(&a.name, &a.arg_types));
    }

    /// A copy that shares no reference count with `self` (see
    /// `Schema::unshared`).
    pub fn unshared(&self) -> Functions {
        Functions {
            functions: self.functions.iter().map(|f| Arc::new(UserFunction::clone(f))).collect(),
            aggregates: self.aggregates.iter().map(|a| Arc::new(UserAggregate::clone(a))).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn function(name: &str, arg_types: Vec<CqlType>, body: &str) -> UserFunction {
        UserFunction {
            keyspace: "ks".into(),
            name: name.into(),
            arg_names: (0..arg_types.len()).map(|i| format!("a{i}")).collect(),
            arg_types,
            return_type: CqlType::Int,
            called_on_null_input: false,
            language: "lua".into(),
            body: body.into(),
        }
    }

    #[test]
    fn overloads_are_kept_apart_and_replaced_by_signature() {
        let mut functions = Functions::default();
        functions.put_function(function("f", vec![CqlType::Int], "return 1"));
        functions.put_function(function("f", vec![CqlType::Text], "return 2"));
        functions.put_function(function("a", vec![], "return 3"));
        functions.put_function(function("f", vec![CqlType::Int], "return 4"));
        let listed: Vec<(&str, &str)> =
            functions.functions.iter().map(|f| (f.name.as_str(), f.body.as_str())).collect();
        assert_eq!(listed, [("a", "return 3"), ("f", "return 4"), ("f", "return 2")]);
        assert_eq!(functions.function("f", &[CqlType::Text]).map(|f| f.body.as_str()), Some("return 2"));
        assert!(functions.function("f", &[]).is_none());
        assert_eq!(signature("f", &[CqlType::Int, CqlType::Text]), "f(int, text)");
    }
}
