//! What permissions are granted on: Cassandra's resources, their names as
//! `system_auth.role_permissions` keeps them (`data/ks/t`), their text in
//! messages (`<table ks.t>`), their parents, and the permissions each
//! kind supports.

use std::fmt;

/// Cassandra's permissions, in its order.
pub const PERMISSIONS: [&str; 8] = ["CREATE", "ALTER", "DROP", "SELECT", "MODIFY", "AUTHORIZE", "DESCRIBE", "EXECUTE"];

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resource {
    AllKeyspaces,
    Keyspace(String),
    Table(String, String),
    AllRoles,
    Role(String),
    AllFunctions,
    /// `ALL FUNCTIONS IN KEYSPACE ks`.
    FunctionsIn(String),
    /// `FUNCTION ks.f(types)`: the keyspace, the name and the argument types.
    Function(String, String, Vec<String>),
    /// ScyllaDB's root of service levels, which their statements need
    /// permissions on.
    AllServiceLevels,
}

impl Resource {
    /// The name `system_auth.role_permissions` keeps.
    pub fn name(&self) -> String {
        match self {
            Resource::AllKeyspaces => "data".to_string(),
            Resource::Keyspace(ks) => format!("data/{ks}"),
            Resource::Table(ks, t) => format!("data/{ks}/{t}"),
            Resource::AllRoles => "roles".to_string(),
            Resource::Role(r) => format!("roles/{r}"),
            Resource::AllFunctions => "functions".to_string(),
            Resource::FunctionsIn(ks) => format!("functions/{ks}"),
            Resource::Function(ks, f, args) => {
                let args: Vec<String> = args.iter().map(|a| escape(a)).collect();
                format!("functions/{ks}/{}[{}]", escape(f), args.join("^"))
            }
            Resource::AllServiceLevels => "service_levels".to_string(),
        }
    }

    /// The resource a [`Resource::name`] names.
    pub fn from_name(name: &str) -> Option<Resource> {
        let parts: Vec<&str> = name.splitn(3, '/').collect();
        Some(match parts.as_slice() {
            ["data"] => Resource::AllKeyspaces,
            ["data", ks] => Resource::Keyspace(ks.to_string()),
            ["data", ks, t] => Resource::Table(ks.to_string(), t.to_string()),
            ["roles"] => Resource::AllRoles,
            ["roles", r] => Resource::Role(r.to_string()),
            ["functions"] => Resource::AllFunctions,
            ["service_levels"] => Resource::AllServiceLevels,
            ["functions", ks] => Resource::FunctionsIn(ks.to_string()),
            ["functions", ks, f] => {
                let (name, args) = split_signature(f)?;
                Resource::Function(ks.to_string(), name, args)
            }
            _ => return None,
        })
    }

    /// The start of the names of every overload of function `ks.name`.
    pub fn overloads_prefix(keyspace: &str, name: &str) -> String {
        format!("functions/{keyspace}/{}[", escape(name))
    }

    /// The resource one level up, whose permissions this one inherits.
    pub fn parent(&self) -> Option<Resource> {
        match self {
            Resource::Table(ks, _) => Some(Resource::Keyspace(ks.clone())),
            Resource::Keyspace(_) => Some(Resource::AllKeyspaces),
            Resource::Role(_) => Some(Resource::AllRoles),
            Resource::Function(ks, _, _) => Some(Resource::FunctionsIn(ks.clone())),
            Resource::FunctionsIn(_) => Some(Resource::AllFunctions),
            Resource::AllKeyspaces | Resource::AllRoles | Resource::AllFunctions | Resource::AllServiceLevels => None,
        }
    }

    /// This resource and its parents, nearest first.
    pub fn chain(&self) -> Vec<Resource> {
        let mut chain = vec![self.clone()];
        while let Some(parent) = chain.last().and_then(Resource::parent) {
            chain.push(parent);
        }
        chain
    }

    /// The permissions that mean something on this resource (what ALL grants).
    pub fn applicable(&self) -> &'static [&'static str] {
        match self {
            Resource::AllKeyspaces | Resource::Keyspace(_) => {
                &["CREATE", "ALTER", "DROP", "SELECT", "MODIFY", "AUTHORIZE"]
            }
            Resource::Table(..) => &["ALTER", "DROP", "SELECT", "MODIFY", "AUTHORIZE"],
            Resource::AllRoles => &["CREATE", "ALTER", "DROP", "AUTHORIZE", "DESCRIBE"],
            Resource::Role(_) => &["ALTER", "DROP", "AUTHORIZE"],
            Resource::AllFunctions | Resource::FunctionsIn(_) => &["CREATE", "ALTER", "DROP", "AUTHORIZE", "EXECUTE"],
            Resource::Function(..) => &["ALTER", "DROP", "AUTHORIZE", "EXECUTE"],
            Resource::AllServiceLevels => &["CREATE", "ALTER", "DROP", "AUTHORIZE", "DESCRIBE"],
        }
    }
}

impl fmt::Display for Resource {
    /// Cassandra's text: `<all keyspaces>`, `<table ks.t>`, ...
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Resource::AllKeyspaces => write!(f, "<all keyspaces>"),
            Resource::Keyspace(ks) => write!(f, "<keyspace {ks}>"),
            Resource::Table(ks, t) => write!(f, "<table {ks}.{t}>"),
            Resource::AllRoles => write!(f, "<all roles>"),
            Resource::Role(r) => write!(f, "<role {r}>"),
            Resource::AllFunctions => write!(f, "<all functions>"),
            Resource::FunctionsIn(ks) => write!(f, "<all functions in {ks}>"),
            Resource::Function(ks, name, args) => {
                write!(f, "<function {ks}.{}({})>", crate::lexer::maybe_quote(name), args.join(", "))
            }
            Resource::AllServiceLevels => write!(f, "<all service levels>"),
        }
    }
}

/// The characters that delimit a function's name and argument types in its
/// resource name (`f[int^text]`), escaped with `\\` where a quoted name or
/// a user type holds them.
const SIGNATURE_DELIMITERS: [char; 4] = ['\\', '[', ']', '^'];

fn escape(part: &str) -> String {
    let mut out = String::with_capacity(part.len());
    for c in part.chars() {
        if SIGNATURE_DELIMITERS.contains(&c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `name[type^type]` back into the name and the types, escapes undone;
/// `None` when malformed.
fn split_signature(text: &str) -> Option<(String, Vec<String>)> {
    let mut parts = vec![String::new()];
    let mut chars = text.chars();
    let (mut in_args, mut closed) = (false, false);
    while let Some(c) = chars.next() {
        if closed {
            return None;
        }
        match c {
            '\\' => parts.last_mut()?.push(chars.next()?),
            '[' if !in_args => {
                in_args = true;
                parts.push(String::new());
            }
            '^' if in_args => parts.push(String::new()),
            ']' if in_args => closed = true,
            _ => parts.last_mut()?.push(c),
        }
    }
    if !closed {
        return None;
    }
    let name = parts.remove(0);
    let args = if parts == [""] { Vec::new() } else { parts };
    Some((name, args))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_texts_and_parents() {
        let all = [
            Resource::AllKeyspaces,
            Resource::Keyspace("ks".into()),
            Resource::Table("ks".into(), "t".into()),
            Resource::AllRoles,
            Resource::Role("r".into()),
            Resource::AllFunctions,
            Resource::FunctionsIn("ks".into()),
            Resource::Function("ks".into(), "f".into(), vec!["int".into(), "text".into()]),
            Resource::Function("ks".into(), "g".into(), Vec::new()),
            Resource::AllServiceLevels,
        ];
        for resource in all {
            assert_eq!(Resource::from_name(&resource.name()), Some(resource.clone()), "{resource}");
        }
        let table = Resource::Table("ks".into(), "t".into());
        assert_eq!(table.to_string(), "<table ks.t>");
        let chain: Vec<String> = table.chain().iter().map(Resource::name).collect();
        assert_eq!(chain, ["data/ks/t", "data/ks", "data"]);
        assert_eq!(Resource::from_name("nonsense/x"), None);
    }

    #[test]
    fn function_names_with_delimiters_round_trip() {
        let weird = Resource::Function(
            "ks".into(),
            "f[a^b]x^y\\".into(),
            vec!["frozen<\"t[t^t]a^b^[]\">".into(), "int".into()],
        );
        assert_eq!(Resource::from_name(&weird.name()), Some(weird.clone()));
        assert!(weird.name().starts_with(&Resource::overloads_prefix("ks", "f[a^b]x^y\\")));
        let plain = Resource::Function("ks".into(), "f".into(), Vec::new());
        assert_eq!(plain.name(), "functions/ks/f[]");
        assert_eq!(
            Resource::from_name("functions/ks/f[int^text]"),
            Some(Resource::Function("ks".into(), "f".into(), vec!["int".into(), "text".into()]))
        );
        assert_eq!(Resource::from_name("functions/ks/f[int]x"), None);
    }
}
