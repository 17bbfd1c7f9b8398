//! Running role statements, as Cassandra's `CassandraRoleManager`.
//!
//! A change is a schema transition ([`transition`], pure): the coordinator's
//! schema service runs it under the DDL lock and has group 0 agree on the
//! result, which every node installs on every shard before the statement
//! is answered, so the next statement anywhere sees it. A password is
//! hashed before the transition (off the shard, `password`), so the
//! transition only stores its hash. The roles persist in the schema file
//! as CQL (`describe`, read back with [`restore`]): `CREATE ROLE ... WITH
//! HASHED PASSWORD` and `GRANT`.

use std::sync::Arc;

use shoal_schema::{CqlType, Role, Roles, Schema, SchemaChange, SchemaChangeKind, SchemaChangeTarget};
use uuid::Uuid;

use super::describe::DEFAULT_SUPERUSER;
use super::password;
use super::statement::{RoleOptions, RoleStatement};
use crate::error::{invalid, CqlError, CqlResult};
use crate::result::{ColumnSpec, QueryResult, Rows};
use crate::system_cells::{boolean, text, text_map};

/// The keyspace clients are told changed when roles change.
pub const AUTH_KEYSPACE: &str = "system_auth";

/// Runs a role statement for `user` (the logged-in role; `None` without
/// authentication).
pub async fn execute(statement: &RoleStatement, user: Option<&str>) -> CqlResult<QueryResult> {
    let schema = shoal_coordinator::schema();
    match statement {
        RoleStatement::ListRoles { of, recursive } => list_roles(&schema.roles, user, of.as_deref(), *recursive),
        RoleStatement::ListUsers => Ok(list_users(&schema.roles)),
        _ => {
            // Checked here first so a refused statement hashes nothing;
            // the transition checks again against the schema it runs on.
            check(&schema.roles, statement, user)?;
            let hashed = match password_of(statement) {
                Some(password) => Some(password::hash(password.to_string()).await.map_err(overloaded)?),
                None => None,
            };
            let (statement, user) = (statement.clone(), user.map(str::to_string));
            let change = move |current: &Schema| transition(current, &statement, user.as_deref(), hashed.as_deref());
            // Every node before the answer: a role dropped or losing LOGIN
            // or SUPERUSER is so on the next statement anywhere.
            shoal_coordinator::announce_schema_change_everywhere(change).await??;
            Ok(QueryResult::Void)
        }
    }
}

fn overloaded(e: password::PasswordError) -> CqlError {
    match e {
        password::PasswordError::Busy => CqlError::Overloaded(e.to_string()),
        password::PasswordError::Hashing(_) => CqlError::Server(e.to_string()),
    }
}

fn password_of(statement: &RoleStatement) -> Option<&str> {
    match statement {
        RoleStatement::Create { options, .. } | RoleStatement::Alter { options, .. } => options.password.as_deref(),
        _ => None,
    }
}

/// Creates the default superuser `cassandra`/`cassandra` if no role exists
/// (a new cluster with password authentication), warning that it did.
pub async fn ensure_default_superuser() -> CqlResult<()> {
    if !shoal_coordinator::schema().roles.roles.is_empty() {
        return Ok(());
    }
    let hashed = password::hash(DEFAULT_SUPERUSER.to_string()).await.map_err(overloaded)?;
    let created = shoal_coordinator::announce_schema_change(move |current: &Schema| {
        if !current.roles.roles.is_empty() {
            return Ok(None);
        }
        let role = Role {
            name: DEFAULT_SUPERUSER.to_string(),
            salted_hash: Some(hashed.clone()),
            can_login: true,
            is_superuser: true,
            ..Role::default()
        };
        let mut roles = Roles::clone(&current.roles);
        roles.roles.insert(role.name.clone(), role);
        Ok::<_, CqlError>(Some(next_schema(current, roles)))
    })
    .await??;
    if created.is_some() {
        tracing::warn!(
            "Created default superuser role '{DEFAULT_SUPERUSER}' with password '{DEFAULT_SUPERUSER}': create \
             another superuser and drop it, or change its password"
        );
    }
    Ok(())
}

/// The schema after `statement` (whose password, if any, is `hashed`), or
/// `None` when IF [NOT] EXISTS made it a no-op.
pub fn transition(
    current: &Schema,
    statement: &RoleStatement,
    user: Option<&str>,
    hashed: Option<&str>,
) -> CqlResult<Option<(Schema, SchemaChange)>> {
    check(&current.roles, statement, user)?;
    let mut roles = Roles::clone(&current.roles);
    if !change(&mut roles, statement, hashed)? {
        return Ok(None);
    }
    Ok(Some(next_schema(current, roles)))
}

pub(crate) fn next_schema(current: &Schema, roles: Roles) -> (Schema, SchemaChange) {
    let next = Schema { version: Uuid::new_v4(), roles: Arc::new(roles), ..current.clone() };
    let change = SchemaChange {
        kind: SchemaChangeKind::Updated,
        target: SchemaChangeTarget::Keyspace(AUTH_KEYSPACE.to_string()),
    };
    (next, change)
}

/// Cassandra's checks of who may run `statement` (with no authorizer, as
/// under AllowAllAuthorizer: only superuser status is guarded).
fn check(roles: &Roles, statement: &RoleStatement, user: Option<&str>) -> CqlResult<()> {
    let Some(user) = user else { return Ok(()) };
    let superuser = roles.is_superuser(user);
    let refuse = |message: &str| Err(CqlError::Unauthorized(message.to_string()));
    match statement {
        // A hash is a backup's restore (ScyllaDB lets only superusers run
        // it): anyone else would set a password without knowing it.
        RoleStatement::Create { options, .. } | RoleStatement::Alter { options, .. }
            if options.hashed_password.is_some() && !superuser =>
        {
            refuse("Only superusers can create or alter a role with a hashed password")
        }
        RoleStatement::Create { options, .. } if options.superuser == Some(true) && !superuser => {
            refuse("Only superusers can create a role with superuser status")
        }
        RoleStatement::Alter { name, options, .. } => {
            if options.superuser.is_some() && roles.granted(user).contains(name) {
                return refuse(
                    "You aren't allowed to alter your own superuser status or that of a role granted to you",
                );
            }
            // Another role's password, a superuser's too, is the authorizer's
            // to guard (ALTER on that role), as in Cassandra and ScyllaDB
            // (scylladb#14277).
            if options.superuser.is_some() && !superuser {
                return refuse("Only superusers are allowed to alter superuser status");
            }
            Ok(())
        }
        RoleStatement::Drop { name, .. } if name == user => refuse("Cannot DROP primary role for current login"),
        RoleStatement::Drop { name, .. } if !superuser && roles.is_superuser(name) => {
            refuse("Only superusers can drop a role with superuser status")
        }
        _ => Ok(()),
    }
}

/// Applies `statement` to `roles`; false when it changes nothing.
fn change(roles: &mut Roles, statement: &RoleStatement, hashed: Option<&str>) -> CqlResult<bool> {
    let missing = |name: &str| invalid(format!("{name} doesn't exist"));
    match statement {
        RoleStatement::Create { name, if_not_exists, options, user } => {
            if roles.get(name).is_some() {
                return if *if_not_exists { Ok(false) } else { Err(invalid(format!("{name} already exists"))) };
            }
            if name.is_empty() {
                return Err(invalid("Role name can't be an empty string"));
            }
            let mut role = Role { name: name.clone(), can_login: *user, ..Role::default() };
            set_options(&mut role, options, hashed);
            roles.roles.insert(name.clone(), role);
        }
        RoleStatement::Alter { name, options, .. } => {
            let role = roles.roles.get_mut(name).ok_or_else(|| missing(name))?;
            set_options(role, options, hashed);
        }
        RoleStatement::Drop { name, if_exists, .. } => {
            if roles.get(name).is_none() {
                return if *if_exists { Ok(false) } else { Err(missing(name)) };
            }
            roles.drop_role(name);
        }
        RoleStatement::Grant { role, grantee } => {
            for name in [role, grantee] {
                roles.get(name).ok_or_else(|| missing(name))?;
            }
            if roles.granted(grantee).contains(role) {
                return Err(invalid(format!("{grantee} is a member of {role}")));
            }
            if roles.granted(role).contains(grantee) {
                return Err(invalid(format!("{role} is a member of {grantee}")));
            }
            // Present: checked above.
            if let Some(grantee) = roles.roles.get_mut(grantee) {
                grantee.member_of.insert(role.clone());
            }
        }
        RoleStatement::Revoke { role, revokee } => {
            for name in [role, revokee] {
                roles.get(name).ok_or_else(|| missing(name))?;
            }
            let removed = roles.roles.get_mut(revokee).is_some_and(|r| r.member_of.remove(role));
            if !removed {
                return Err(invalid(format!("{revokee} is not a member of {role}")));
            }
        }
        RoleStatement::ListRoles { .. } | RoleStatement::ListUsers => return Ok(false),
    }
    Ok(true)
}

fn set_options(role: &mut Role, options: &RoleOptions, hashed: Option<&str>) {
    if let Some(hash) = hashed.or(options.hashed_password.as_deref()) {
        role.salted_hash = Some(hash.to_string());
    }
    if let Some(login) = options.login {
        role.can_login = login;
    }
    if let Some(superuser) = options.superuser {
        role.is_superuser = superuser;
    }
    if let Some(custom) = &options.options {
        role.options = custom.iter().cloned().collect();
    }
}

fn column(table: &str, name: &str, ty: CqlType) -> ColumnSpec {
    ColumnSpec { keyspace: AUTH_KEYSPACE.to_string(), table: table.to_string(), name: name.to_string(), ty }
}

/// `LIST ROLES`: every role for a superuser or without authentication, a
/// user's own roles otherwise; `OF r` lists what `r` was granted.
fn list_roles(roles: &Roles, user: Option<&str>, of: Option<&str>, recursive: bool) -> CqlResult<QueryResult> {
    let names: Vec<String> = match of {
        Some(name) => {
            let role = roles.get(name).ok_or_else(|| invalid(format!("{name} doesn't exist")))?;
            match recursive {
                true => roles.granted(name).into_iter().collect(),
                false => std::iter::once(name.to_string()).chain(role.member_of.iter().cloned()).collect(),
            }
        }
        None => match user {
            Some(user) if !roles.is_superuser(user) => roles.granted(user).into_iter().collect(),
            _ => roles.roles.keys().cloned().collect(),
        },
    };
    let mut names = names;
    names.sort();
    names.dedup();
    let rows = names
        .iter()
        .filter_map(|name| roles.get(name))
        .map(|r| vec![text(&r.name), boolean(roles.is_superuser(&r.name)), boolean(r.can_login), text_map(&r.options)])
        .collect();
    let columns = [
        column("roles", "role", CqlType::Text),
        column("roles", "super", CqlType::Boolean),
        column("roles", "login", CqlType::Boolean),
        column("roles", "options", CqlType::Map(Box::new(CqlType::Text), Box::new(CqlType::Text))),
    ];
    Ok(QueryResult::Rows(Rows { columns: columns.into(), rows, paging_state: None }))
}

/// `LIST USERS`: the roles that may log in.
fn list_users(roles: &Roles) -> QueryResult {
    let rows = roles
        .roles
        .values()
        .filter(|r| r.can_login)
        .map(|r| vec![text(&r.name), boolean(roles.is_superuser(&r.name))])
        .collect();
    let columns = [column("users", "name", CqlType::Text), column("users", "super", CqlType::Boolean)];
    QueryResult::Rows(Rows { columns: columns.into(), rows, paging_state: None })
}

/// Applies a role statement read back from the schema file.
pub fn restore(schema: &mut Schema, statement: &RoleStatement) -> CqlResult<()> {
    if let Some((next, _)) = transition(schema, statement, None, None)? {
        schema.roles = next.roles;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parser::parse_statement;

    fn statement(text: &str) -> RoleStatement {
        match parse_statement(text).map(|p| p.statement) {
            Ok(crate::ast::Statement::Role(role)) => role,
            other => panic!("{text}: {other:?}"),
        }
    }

    fn run(schema: &mut Schema, text: &str, user: Option<&str>) -> CqlResult<()> {
        if let Some((next, _)) = transition(schema, &statement(text), user, Some("$2a$10$hash"))? {
            *schema = next;
        }
        Ok(())
    }

    #[test]
    fn roles_are_created_granted_and_dropped() {
        let mut schema = Schema::empty();
        run(&mut schema, "CREATE ROLE admin WITH SUPERUSER = true AND LOGIN = true AND PASSWORD = 'x'", None)
            .expect("created");
        run(&mut schema, "CREATE USER bob WITH PASSWORD 'pw'", None).expect("created");
        run(&mut schema, "CREATE ROLE reader", None).expect("created");
        let exists = run(&mut schema, "CREATE ROLE reader", None);
        assert_eq!(exists, Err(invalid("reader already exists")));
        run(&mut schema, "CREATE ROLE IF NOT EXISTS reader", None).expect("a no-op");
        run(&mut schema, "GRANT reader TO bob", None).expect("granted");
        assert_eq!(run(&mut schema, "GRANT reader TO bob", None), Err(invalid("bob is a member of reader")));
        assert_eq!(run(&mut schema, "GRANT bob TO reader", None), Err(invalid("bob is a member of reader")));
        let bob = schema.roles.get("bob").expect("bob");
        assert!(bob.can_login && !bob.is_superuser && bob.salted_hash.is_some());
        assert!(bob.member_of.contains("reader"));
        let refused = run(&mut schema, "CREATE ROLE boss WITH SUPERUSER = true", Some("bob"));
        assert!(matches!(refused, Err(CqlError::Unauthorized(_))), "{refused:?}");
        for text in ["CREATE ROLE x WITH HASHED PASSWORD = '$2a$10$h'", "ALTER ROLE bob WITH HASHED PASSWORD = 'h'"] {
            let refused = run(&mut schema, text, Some("bob"));
            assert!(matches!(refused, Err(CqlError::Unauthorized(_))), "{text}: {refused:?}");
        }
        run(&mut schema, "CREATE ROLE x WITH SALTED HASH = '$2a$10$h'", Some("admin")).expect("a superuser may");
        assert!(matches!(run(&mut schema, "DROP ROLE bob", Some("bob")), Err(CqlError::Unauthorized(_))));
        run(&mut schema, "REVOKE reader FROM bob", None).expect("revoked");
        assert_eq!(run(&mut schema, "REVOKE reader FROM bob", None), Err(invalid("bob is not a member of reader")));
        run(&mut schema, "DROP ROLE reader", Some("admin")).expect("dropped");
        assert_eq!(run(&mut schema, "DROP ROLE reader", None), Err(invalid("reader doesn't exist")));
        run(&mut schema, "DROP ROLE IF EXISTS reader", None).expect("a no-op");
    }

    #[test]
    fn roles_survive_the_schema_file() {
        let mut schema = Schema::empty();
        run(&mut schema, "CREATE ROLE 'Odd''name' WITH LOGIN = true AND PASSWORD = 'x' AND OPTIONS = {'k': 'v'}", None)
            .expect("created");
        run(&mut schema, "CREATE ROLE r", None).expect("created");
        run(&mut schema, "GRANT r TO 'Odd''name'", None).expect("granted");
        let mut roles = Roles::clone(&schema.roles);
        let level = shoal_schema::ServiceLevel {
            timeout_ms: Some(7_200_000),
            workload: Some(shoal_schema::Workload::Interactive),
            shares: 300,
        };
        roles.service_levels.insert("Gold".into(), level);
        roles.service_levels.insert("plain".into(), shoal_schema::ServiceLevel::default());
        roles.roles.get_mut("r").expect("r").service_level = Some("Gold".into());
        schema.roles = Arc::new(roles);
        let mut restored = Schema::empty();
        for line in crate::auth::render(&schema.roles).lines() {
            let parsed = crate::parser::parse_statement(line).expect(line);
            assert!(crate::auth::restore(&mut restored, &parsed.statement).expect(line), "{line}");
        }
        assert_eq!(restored.roles, schema.roles);
    }

    #[test]
    fn list_roles_shows_a_users_own_roles() {
        let mut schema = Schema::empty();
        for text in ["CREATE ROLE a WITH LOGIN = true", "CREATE ROLE b", "CREATE ROLE c", "GRANT b TO a"] {
            run(&mut schema, text, None).expect(text);
        }
        let QueryResult::Rows(rows) = list_roles(&schema.roles, Some("a"), None, true).expect("listed") else {
            panic!("rows")
        };
        let names: Vec<_> = rows.rows.iter().map(|r| r[0].clone()).collect();
        assert_eq!(names, [text("a"), text("b")]);
        let QueryResult::Rows(all) = list_roles(&schema.roles, None, None, true).expect("listed") else {
            panic!("rows")
        };
        assert_eq!(all.rows.len(), 3);
    }
}
