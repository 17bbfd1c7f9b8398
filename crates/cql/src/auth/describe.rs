//! Roles, role grants and permissions as CQL that recreates them: the auth
//! part of ScyllaDB's `DESCRIBE SCHEMA WITH INTERNALS [AND PASSWORDS]`,
//! and the roles' lines of the schema file (one renderer for both, so a
//! backup restores exactly what a restart reads back).
//!
//! [`execute`] answers every DESCRIBE: the schema's own (`crate::describe`)
//! and, for `[FULL] SCHEMA WITH INTERNALS`, these rows after the keyspaces,
//! as ScyllaDB orders them (a permission names a keyspace), each with a
//! null `keyspace_name`. It lives here, above `crate::describe`, so that
//! module never names auth.
//!
//! As ScyllaDB writes them (`auth/service.cc`, `describe_roles` and
//! `describe_permissions`):
//! - `role`: `CREATE ROLE r WITH [HASHED PASSWORD = '..' AND] LOGIN = x
//!   AND SUPERUSER = y;`, `IF NOT EXISTS` for the default superuser (a new
//!   cluster has made it already); the hash only when asked for
//!   passwords. Shoal adds `AND OPTIONS = {..}` when a role has options.
//! - `grant_role`: `GRANT r TO grantee;`, named by the granted role.
//! - `grant_permission`: `GRANT SELECT ON ks.t TO r;`, one permission per
//!   statement, named by the grantee.
//! - `service_level` and `service_level_attachment`: `CREATE SERVICE LEVEL
//!   sl WITH ...;` and `ATTACH SERVICE LEVEL sl TO r;`, before the
//!   permissions.
//!
//! Roles come in name order, grants in (name, statement) order; names are
//! quoted where CQL needs it.

use std::fmt::Write as _;

use shoal_schema::{Roles, Schema};

use super::config::{Authenticator, Authorizer};
use super::resource::Resource;
use crate::ast::{Describe, DescribeTarget};
use crate::describe::{literal, map_literal, maybe_quote};
use crate::error::{CqlError, CqlResult};
use crate::result::Rows;
use crate::system_cells::text;

/// The default superuser, created when no role exists.
pub const DEFAULT_SUPERUSER: &str = "cassandra";

/// One statement of the description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthElement {
    /// `role`, `grant_role` or `grant_permission` (ScyllaDB's `type`).
    pub kind: &'static str,
    pub name: String,
    pub create_statement: String,
}

/// What a description holds besides the roles themselves.
#[derive(Debug, Clone, Copy)]
pub struct Include {
    /// Each role's salted hash (`AND PASSWORDS`; a superuser's request).
    pub passwords: bool,
    /// The permissions granted (not under AllowAllAuthorizer, as ScyllaDB).
    pub permissions: bool,
}

/// The statements that recreate `roles`: roles, then role grants, then
/// permissions (a grant needs both roles, a permission its grantee).
pub fn elements(roles: &Roles, include: Include) -> Vec<AuthElement> {
    let mut out: Vec<AuthElement> = roles.roles.values().map(|role| role_element(role, include.passwords)).collect();
    let mut grants: Vec<AuthElement> = roles
        .roles
        .values()
        .flat_map(|role| {
            role.member_of.iter().map(|granted| AuthElement {
                kind: "grant_role",
                name: granted.clone(),
                create_statement: format!("GRANT {} TO {};", maybe_quote(granted), maybe_quote(&role.name)),
            })
        })
        .collect();
    grants.sort_by(|a, b| (&a.name, &a.create_statement).cmp(&(&b.name, &b.create_statement)));
    out.extend(grants);
    out.extend(service_levels(roles));
    if include.permissions {
        let mut permissions: Vec<AuthElement> = roles
            .permissions
            .iter()
            .flat_map(|(role, resources)| {
                resources.iter().filter_map(|(name, held)| Some((Resource::from_name(name)?, held))).flat_map(
                    move |(resource, held)| {
                        held.iter().map(move |p| AuthElement {
                            kind: "grant_permission",
                            name: role.clone(),
                            create_statement: format!("GRANT {p} ON {} TO {};", cql(&resource), maybe_quote(role)),
                        })
                    },
                )
            })
            .collect();
        permissions.sort_by(|a, b| (&a.name, &a.create_statement).cmp(&(&b.name, &b.create_statement)));
        out.extend(permissions);
    }
    out
}

/// Service levels, then their attachments to roles, as ScyllaDB describes
/// them (`service_level_controller.cc`): a timeout in milliseconds.
fn service_levels(roles: &Roles) -> Vec<AuthElement> {
    let levels = roles.service_levels.iter().map(|(name, level)| {
        let mut options = Vec::new();
        if let Some(ms) = level.timeout_ms {
            options.push(format!("TIMEOUT = {ms}ms"));
        }
        if let Some(workload) = level.workload {
            options.push(format!("WORKLOAD_TYPE = '{}'", workload.name()));
        }
        options.push(format!("SHARES = {}", level.shares));
        AuthElement {
            kind: "service_level",
            name: name.clone(),
            create_statement: format!("CREATE SERVICE LEVEL {} WITH {};", maybe_quote(name), options.join(" AND ")),
        }
    });
    let attachments = roles.roles.values().filter_map(|role| {
        let level = role.service_level.as_ref()?;
        Some(AuthElement {
            kind: "service_level_attachment",
            name: role.name.clone(),
            create_statement: format!("ATTACH SERVICE LEVEL {} TO {};", maybe_quote(level), maybe_quote(&role.name)),
        })
    });
    levels.chain(attachments).collect()
}

/// The auth part of `DESCRIBE [FULL] SCHEMA WITH INTERNALS [AND
/// PASSWORDS]` for `user` (the logged-in role; `None` without
/// authentication), as ScyllaDB answers it: passwords only for a
/// superuser, and only where the authenticator uses them; permissions only
/// under CassandraAuthorizer.
pub fn for_describe(roles: &Roles, user: Option<&str>, passwords: bool) -> CqlResult<Vec<AuthElement>> {
    if passwords && !user.is_some_and(|user| roles.is_superuser(user)) {
        return Err(CqlError::Unauthorized(
            "DESCRIBE SCHEMA WITH INTERNALS AND PASSWORDS can only be issued by a superuser".to_string(),
        ));
    }
    let config = super::config::config();
    let include = Include {
        passwords: passwords && config.authenticator == Authenticator::Password,
        permissions: config.authorizer == Authorizer::Cassandra,
    };
    Ok(elements(roles, include))
}

/// A resource as GRANT names it, as ScyllaDB's DESCRIBE writes it: names
/// quoted where CQL needs it, a table without `TABLE`.
fn cql(resource: &Resource) -> String {
    let quote = maybe_quote;
    match resource {
        Resource::AllKeyspaces => "ALL KEYSPACES".to_string(),
        Resource::Keyspace(ks) => format!("KEYSPACE {}", quote(ks)),
        Resource::Table(ks, t) => format!("{}.{}", quote(ks), quote(t)),
        Resource::AllRoles => "ALL ROLES".to_string(),
        Resource::Role(r) => format!("ROLE {}", quote(r)),
        Resource::AllFunctions => "ALL FUNCTIONS".to_string(),
        Resource::FunctionsIn(ks) => format!("ALL FUNCTIONS IN KEYSPACE {}", quote(ks)),
        Resource::Function(ks, f, args) => format!("FUNCTION {}.{}({})", quote(ks), quote(f), args.join(", ")),
        Resource::AllServiceLevels => "ALL SERVICE_LEVELS".to_string(),
    }
}

/// Answers `describe` for `user` (the logged-in role; `None` without
/// authentication, which matters only to `AND PASSWORDS`).
pub fn execute(
    describe: &Describe,
    schema: &Schema,
    session_keyspace: Option<&str>,
    user: Option<&str>,
) -> CqlResult<Rows> {
    let mut rows = crate::describe::execute(describe, schema, session_keyspace)?;
    if describe.with_internals && matches!(describe.target, DescribeTarget::Schema { .. }) {
        let auth = for_describe(&schema.roles, user, describe.with_passwords)?;
        rows.rows.extend(auth.iter().map(|e| vec![None, text(e.kind), text(&e.name), text(&e.create_statement)]));
    }
    Ok(rows)
}

fn role_element(role: &shoal_schema::Role, passwords: bool) -> AuthElement {
    let name = maybe_quote(&role.name);
    let mut statement = match role.name == DEFAULT_SUPERUSER {
        true => format!("CREATE ROLE IF NOT EXISTS {name} WITH"),
        false => format!("CREATE ROLE {name} WITH"),
    };
    if let Some(hash) = role.salted_hash.as_deref().filter(|_| passwords) {
        let _ = write!(statement, " HASHED PASSWORD = {} AND", literal(hash));
    }
    let _ = write!(statement, " LOGIN = {} AND SUPERUSER = {}", role.can_login, role.is_superuser);
    if !role.options.is_empty() {
        let _ = write!(statement, " AND OPTIONS = {}", map_literal(&role.options));
    }
    statement.push(';');
    AuthElement { kind: "role", name: role.name.clone(), create_statement: statement }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_schema::Role;

    fn roles() -> Roles {
        let mut roles = Roles::default();
        let role = |name: &str, hash: Option<&str>, login, superuser| Role {
            name: name.to_string(),
            salted_hash: hash.map(str::to_string),
            can_login: login,
            is_superuser: superuser,
            ..Role::default()
        };
        roles.roles.insert("cassandra".into(), role("cassandra", Some("$2a$10$c"), true, true));
        roles.roles.insert("Bob".into(), role("Bob", Some("$2a$10$b'"), true, false));
        let mut reader = role("reader", None, false, false);
        reader.options.insert("k".into(), "v".into());
        roles.roles.insert("reader".into(), reader);
        roles.roles.get_mut("Bob").map(|b| b.member_of.insert("reader".into()));
        let grant = |roles: &mut Roles, role: &str, resource: &str, p: &str| {
            roles.permissions.entry(role.into()).or_default().entry(resource.into()).or_default().insert(p.into());
        };
        grant(&mut roles, "reader", "data/ks/t", "SELECT");
        grant(&mut roles, "reader", "data/ks/t", "MODIFY");
        grant(&mut roles, "Bob", "roles/reader", "ALTER");
        grant(&mut roles, "Bob", "data", "CREATE");
        roles
    }

    #[test]
    fn schema_with_internals_adds_the_roles_and_passwords_need_a_superuser() {
        let mut schema = Schema::empty();
        let mut roles = Roles::default();
        let role = Role { name: "r".into(), salted_hash: Some("$2a$10$h".into()), ..Role::default() };
        roles.roles.insert("r".into(), role);
        schema.roles = std::sync::Arc::new(roles);
        let run = |text: &str| {
            let Ok(crate::ast::Statement::Describe(d)) = crate::parser::parse_statement(text).map(|p| p.statement)
            else {
                panic!("not a DESCRIBE: {text}")
            };
            execute(&d, &schema, None, None)
        };
        let plain = run("DESCRIBE SCHEMA").expect("described");
        assert!(plain.rows.iter().all(|r| r[1] != text("role")));
        let internals = run("DESC SCHEMA WITH INTERNALS").expect("described");
        let last = internals.rows.last().expect("rows");
        let statement = "CREATE ROLE r WITH LOGIN = false AND SUPERUSER = false;";
        assert_eq!(last, &vec![None, text("role"), text("r"), text(statement)], "a role belongs to no keyspace");
        let refused = run("DESCRIBE FULL SCHEMA WITH INTERNALS AND PASSWORDS");
        let message = "DESCRIBE SCHEMA WITH INTERNALS AND PASSWORDS can only be issued by a superuser";
        assert!(matches!(&refused, Err(CqlError::Unauthorized(m)) if m == message), "{refused:?}");
    }

    fn statements(include: Include) -> Vec<(String, String, String)> {
        elements(&roles(), include).into_iter().map(|e| (e.kind.to_string(), e.name, e.create_statement)).collect()
    }

    #[test]
    fn roles_grants_and_permissions_as_scylladb_writes_them() {
        let all = statements(Include { passwords: true, permissions: true });
        let expected = [
            ("role", "Bob", "CREATE ROLE \"Bob\" WITH HASHED PASSWORD = '$2a$10$b''' AND LOGIN = true AND SUPERUSER = false;"),
            ("role", "cassandra", "CREATE ROLE IF NOT EXISTS cassandra WITH HASHED PASSWORD = '$2a$10$c' AND LOGIN = true AND SUPERUSER = true;"),
            ("role", "reader", "CREATE ROLE reader WITH LOGIN = false AND SUPERUSER = false AND OPTIONS = {'k': 'v'};"),
            ("grant_role", "reader", "GRANT reader TO \"Bob\";"),
            ("grant_permission", "Bob", "GRANT ALTER ON ROLE reader TO \"Bob\";"),
            ("grant_permission", "Bob", "GRANT CREATE ON ALL KEYSPACES TO \"Bob\";"),
            ("grant_permission", "reader", "GRANT MODIFY ON ks.t TO reader;"),
            ("grant_permission", "reader", "GRANT SELECT ON ks.t TO reader;"),
        ];
        let expected: Vec<_> = expected.iter().map(|(k, n, s)| (k.to_string(), n.to_string(), s.to_string())).collect();
        assert_eq!(all, expected);
        let without = statements(Include { passwords: false, permissions: false });
        assert_eq!(without.len(), 4, "{without:?}");
        assert!(without.iter().all(|(_, _, s)| !s.contains("HASHED")), "{without:?}");
    }
}
