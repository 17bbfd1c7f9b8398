//! GRANT / REVOKE / LIST PERMISSIONS, and the permissions a schema change
//! brings: a role that creates a keyspace, table or role gets ALL on it,
//! and dropping one drops every permission on it (as Cassandra does).
//! Changes are schema transitions, as role changes are (`roles`).

use std::collections::BTreeSet;

use shoal_schema::{CqlType, Roles, Schema};

use super::access::qualified;
use super::authorizer;
use super::resource::{Resource, PERMISSIONS};
use super::roles::next_schema;
use super::statement::{PermissionStatement, RoleStatement};
use crate::ast::{AlterTableOp, Statement};
use crate::error::{invalid, CqlError, CqlResult};
use crate::result::{ColumnSpec, QueryResult, Rows};
use crate::system_cells::text;

/// Runs a permission statement for `user` in `session` (its keyspace).
pub async fn execute(
    statement: &PermissionStatement,
    session: Option<&str>,
    user: Option<&str>,
) -> CqlResult<QueryResult> {
    if !authorizer::enabled() {
        let what = match statement {
            PermissionStatement::List { .. } => "LIST PERMISSIONS",
            _ => "GRANT/REVOKE PERMISSIONS",
        };
        return Err(invalid(format!("{what} operation is not supported by AllowAllAuthorizer")));
    }
    let schema = shoal_coordinator::schema();
    match statement {
        PermissionStatement::List { permission, resource, of, recursive } => {
            let resource = resource.as_ref().map(|r| qualified(r, session));
            list(&schema.roles, user, permission.as_deref(), resource.as_ref(), of.as_deref(), *recursive)
        }
        PermissionStatement::Grant { permission, resource, role }
        | PermissionStatement::Revoke { permission, resource, role } => {
            let grant = matches!(statement, PermissionStatement::Grant { .. });
            let resource = qualified(resource, session);
            let (permission, role) = (permission.clone(), role.clone());
            let change = move |current: &Schema| {
                let permissions = requested(&resource, permission.as_deref());
                check_exists(current, &resource, &role)?;
                let mut roles = Roles::clone(&current.roles);
                let changed = match grant {
                    true => add(&mut roles, &role, &resource, &permissions),
                    false => remove(&mut roles, &role, &resource, &permissions),
                };
                Ok::<_, CqlError>(changed.then(|| next_schema(current, roles)))
            };
            // Every node before the answer: a REVOKE holds on the next
            // statement anywhere, whatever each node's cache holds.
            shoal_coordinator::announce_schema_change_everywhere(change).await??;
            Ok(QueryResult::Void)
        }
    }
}

/// The permissions a statement names on `resource` (ALL: those it
/// supports; the parser refused one it does not, see [`unsupported`]).
fn requested(resource: &Resource, permission: Option<&str>) -> Vec<&'static str> {
    resource.applicable().iter().filter(|a| permission.is_none_or(|p| **a == p)).copied().collect()
}

/// Cassandra's refusal of a GRANT or REVOKE of a permission `resource`
/// does not take; its grammar reports it, so it is a syntax error, before
/// anything is authorized (ScyllaDB's #13822: CREATE on one function).
pub(crate) fn unsupported(resource: &Resource, permission: &str) -> Option<String> {
    (!resource.applicable().contains(&permission))
        .then(|| format!("Resource type {} does not support the requested permissions: {permission}", kind(resource)))
}

fn kind(resource: &Resource) -> &'static str {
    match resource {
        Resource::AllKeyspaces | Resource::Keyspace(_) | Resource::Table(..) => "DataResource",
        Resource::AllRoles | Resource::Role(_) => "RoleResource",
        _ => "FunctionResource",
    }
}

fn check_exists(schema: &Schema, resource: &Resource, role: &str) -> CqlResult<()> {
    if schema.roles.get(role).is_none() {
        return Err(invalid(format!("Role {role} doesn't exist")));
    }
    let exists = match resource {
        Resource::Keyspace(ks) | Resource::FunctionsIn(ks) => schema.keyspace(ks).is_some(),
        Resource::Table(ks, t) => schema.table(ks, t).is_some(),
        Resource::Role(r) => schema.roles.get(r).is_some(),
        // A function or aggregate of that signature; a user type argument
        // is named with or without its (implied) frozen<>.
        Resource::Function(ks, name, args) => schema.keyspace(ks).is_some_and(|k| {
            let (mut functions, mut aggregates) = k.functions.named(name);
            let same = |types: &[CqlType]| {
                types.len() == args.len()
                    && types
                        .iter()
                        .zip(args)
                        .all(|(ty, arg)| *arg == ty.to_string() || *arg == ty.unfrozen().to_string())
            };
            functions.any(|f| same(&f.arg_types)) || aggregates.any(|a| same(&a.arg_types))
        }),
        _ => true,
    };
    if !exists {
        return Err(invalid(format!("Resource {resource} doesn't exist")));
    }
    Ok(())
}

fn add(roles: &mut Roles, role: &str, resource: &Resource, permissions: &[&str]) -> bool {
    let held = roles.permissions.entry(role.to_string()).or_default().entry(resource.name()).or_default();
    let before = held.len();
    held.extend(permissions.iter().map(|p| p.to_string()));
    held.len() != before
}

fn remove(roles: &mut Roles, role: &str, resource: &Resource, permissions: &[&str]) -> bool {
    let Some(resources) = roles.permissions.get_mut(role) else { return false };
    let Some(held) = resources.get_mut(&resource.name()) else { return false };
    let before = held.len();
    held.retain(|p| !permissions.contains(&p.as_str()));
    let changed = held.len() != before;
    if held.is_empty() {
        resources.remove(&resource.name());
    }
    if resources.is_empty() {
        roles.permissions.remove(role);
    }
    changed
}

/// Applies a GRANT read back from the schema file.
pub fn restore(schema: &mut Schema, statement: &PermissionStatement) {
    if let PermissionStatement::Grant { permission: Some(p), resource, role } = statement {
        let mut roles = Roles::clone(&schema.roles);
        add(&mut roles, role, resource, &[p.as_str()]);
        schema.roles = std::sync::Arc::new(roles);
    }
}

/// After a schema statement by `user` succeeded: ALL on what it created,
/// and no permission left on what it dropped (a dropped keyspace's
/// functions too; every overload of a function dropped by name).
pub async fn after_schema_change(statement: &Statement, session: Option<&str>, user: Option<&str>) -> CqlResult<()> {
    if !authorizer::enabled() {
        return Ok(());
    }
    let in_keyspace = |named: &Option<String>| named.as_deref().or(session).map(str::to_string);
    let function = |keyspace: Option<String>, name: &str, types: &mut dyn Iterator<Item = &CqlType>| {
        keyspace.map(|ks| Resource::Function(ks, name.to_string(), types.map(ToString::to_string).collect()))
    };
    // The CDC log a CREATE TABLE or an ALTER TABLE WITH cdc leaves is its
    // creator's too (ScyllaDB's #19798), granted if the log exists then.
    let cdc_log = match statement {
        Statement::CreateTable(s) => in_keyspace(&s.keyspace).map(|ks| (ks, s.name.clone())),
        Statement::AlterTable(s) if sets_cdc(&s.op) => in_keyspace(&s.keyspace).map(|ks| (ks, s.name.clone())),
        _ => None,
    }
    .map(|(ks, table)| (ks, crate::cdc::log_name(&table)));
    let (created, dropped): (Option<Resource>, Vec<String>) = match statement {
        Statement::CreateKeyspace(s) => (Some(Resource::Keyspace(s.name.clone())), Vec::new()),
        Statement::CreateTable(s) => {
            (in_keyspace(&s.keyspace).map(|ks| Resource::Table(ks, s.name.clone())), Vec::new())
        }
        // A function's or aggregate's creator gets nothing on it, as in
        // ScyllaDB (Cassandra grants it ALL): CREATE OR REPLACE of it later
        // still needs ALTER.
        Statement::Role(RoleStatement::Create { name, .. }) => (Some(Resource::Role(name.clone())), Vec::new()),
        Statement::DropKeyspace(s) => {
            let dropped = [Resource::Keyspace(s.name.clone()), Resource::FunctionsIn(s.name.clone())];
            (None, dropped.iter().map(Resource::name).collect())
        }
        Statement::AlterTable(_) if cdc_log.is_some() => (None, Vec::new()),
        Statement::DropTable(s) => {
            let tables = [s.name.clone(), crate::cdc::log_name(&s.name)];
            let dropped = in_keyspace(&s.keyspace)
                .map(|ks| tables.into_iter().map(|t| Resource::Table(ks.clone(), t).name()).collect());
            (None, dropped.unwrap_or_default())
        }
        Statement::DropFunction(s) => {
            let Some(ks) = in_keyspace(&s.keyspace) else { return Ok(()) };
            let dropped = match &s.args {
                Some(types) => function(Some(ks), &s.name, &mut types.iter()).map(|f| f.name()),
                // Every overload: `functions/ks/f[...]`.
                None => Some(Resource::overloads_prefix(&ks, &s.name)),
            };
            (None, dropped.into_iter().collect())
        }
        Statement::Role(RoleStatement::Drop { name, .. }) => (None, vec![Resource::Role(name.clone()).name()]),
        _ => return Ok(()),
    };
    let user = user.map(str::to_string);
    let change = move |current: &Schema| {
        let mut roles = Roles::clone(&current.roles);
        let mut changed = false;
        let log = cdc_log.as_ref().filter(|(ks, log)| current.table(ks, log).is_some());
        let log = log.map(|(ks, log)| Resource::Table(ks.clone(), log.clone()));
        for resource in created.iter().chain(&log) {
            if let Some(user) = &user {
                changed |= roles.get(user).is_some() && add(&mut roles, user, resource, resource.applicable());
            }
        }
        for name in &dropped {
            changed |= forget(&mut roles, name);
        }
        Ok::<_, CqlError>(changed.then(|| next_schema(current, roles)))
    };
    shoal_coordinator::announce_schema_change(change).await??;
    Ok(())
}

/// Whether an ALTER TABLE sets the `cdc` option.
fn sets_cdc(op: &AlterTableOp) -> bool {
    matches!(op, AlterTableOp::With(options) if options.iter().any(|(name, _)| name.eq_ignore_ascii_case("cdc")))
}

/// Removes every permission on the resource named `name` and on what it
/// holds; a name ending in `[` is a prefix (a function's overloads).
fn forget(roles: &mut Roles, name: &str) -> bool {
    let inside = format!("{name}/");
    let gone = |r: &String| match name.strip_suffix('[') {
        Some(_) => r.starts_with(name),
        None => r == name || r.starts_with(&inside),
    };
    let mut changed = false;
    for resources in roles.permissions.values_mut() {
        let before = resources.len();
        resources.retain(|r, _| !gone(r));
        changed |= resources.len() != before;
    }
    roles.permissions.retain(|_, resources| !resources.is_empty());
    changed
}

/// LIST PERMISSIONS: one row per role, resource and permission.
fn list(
    roles: &Roles,
    user: Option<&str>,
    permission: Option<&str>,
    resource: Option<&Resource>,
    of: Option<&str>,
    recursive: bool,
) -> CqlResult<QueryResult> {
    let superuser = user.is_none_or(|u| roles.is_superuser(u));
    let whose: Vec<String> = match (of, user) {
        (Some(of), _) if roles.get(of).is_none() => return Err(invalid(format!("{of} doesn't exist"))),
        (Some(of), Some(user)) if !superuser && !roles.granted(user).contains(of) => {
            return Err(CqlError::Unauthorized(format!("You are not authorized to view {of}'s permissions")));
        }
        (Some(of), _) if recursive => roles.granted(of).into_iter().collect(),
        (Some(of), _) => vec![of.to_string()],
        (None, _) if superuser => roles.permissions.keys().cloned().collect(),
        (None, _) => {
            return Err(CqlError::Unauthorized("You are not authorized to view everyone's permissions".into()))
        }
    };
    let on: Option<BTreeSet<String>> = resource.map(|r| match recursive {
        true => r.chain().iter().map(Resource::name).collect(),
        false => BTreeSet::from([r.name()]),
    });
    let mut rows = Vec::new();
    for role in &whose {
        for (name, held) in roles.permissions.get(role).into_iter().flatten() {
            if on.as_ref().is_some_and(|on| !on.contains(name)) {
                continue;
            }
            let Some(shown) = Resource::from_name(name) else { continue };
            for p in PERMISSIONS.iter().filter(|p| held.contains(**p) && permission.is_none_or(|want| want == **p)) {
                let shown = shown.to_string();
                rows.push(vec![text(role), text(role), text(&shown), text(p)]);
            }
        }
    }
    let column = |name: &str| ColumnSpec {
        keyspace: super::roles::AUTH_KEYSPACE.to_string(),
        table: "role_permissions".to_string(),
        name: name.to_string(),
        ty: CqlType::Text,
    };
    let columns = [column("role"), column("username"), column("resource"), column("permission")];
    Ok(QueryResult::Rows(Rows { columns: columns.into(), rows, paging_state: None }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_revokes_and_forgetting() {
        let mut roles = Roles::default();
        let t = Resource::Table("ks".into(), "t".into());
        assert!(add(&mut roles, "r", &t, &["SELECT", "MODIFY"]));
        assert!(!add(&mut roles, "r", &t, &["SELECT"]));
        assert!(remove(&mut roles, "r", &t, &["MODIFY"]));
        assert!(!remove(&mut roles, "r", &t, &["MODIFY"]));
        add(&mut roles, "r", &Resource::Keyspace("ks".into()), &["ALTER"]);
        add(&mut roles, "r", &Resource::Keyspace("ks2".into()), &["ALTER"]);
        assert!(forget(&mut roles, &Resource::Keyspace("ks".into()).name()));
        let left: Vec<&String> = roles.permissions["r"].keys().collect();
        assert_eq!(left, ["data/ks2"]);
        for args in [vec!["int".to_string()], vec!["int".into(), "text".into()]] {
            add(&mut roles, "r", &Resource::Function("ks".into(), "f".into(), args), &["EXECUTE"]);
        }
        add(&mut roles, "r", &Resource::Function("ks".into(), "g".into(), Vec::new()), &["EXECUTE"]);
        assert!(forget(&mut roles, "functions/ks/f["), "every overload of f");
        let left: Vec<&String> = roles.permissions["r"].keys().collect();
        assert_eq!(left, ["data/ks2", "functions/ks/g[]"]);
        assert_eq!(requested(&t, None), ["ALTER", "DROP", "SELECT", "MODIFY", "AUTHORIZE"]);
        assert_eq!(requested(&t, Some("DROP")), ["DROP"]);
        assert_eq!(
            unsupported(&t, "EXECUTE").as_deref(),
            Some("Resource type DataResource does not support the requested permissions: EXECUTE")
        );
        assert_eq!(unsupported(&t, "SELECT"), None);
        add(&mut roles, "o'dd", &Resource::Function("ks".into(), "f".into(), vec!["int".into()]), &["EXECUTE"]);
        add(&mut roles, "o'dd", &Resource::Role("x".into()), &["ALTER"]);
        add(&mut roles, "o'dd", &Resource::AllKeyspaces, &["CREATE"]);
        let mut schema = Schema::empty();
        for line in crate::auth::render(&roles).lines() {
            let Ok(Statement::Permission(p)) = crate::parser::parse_statement(line).map(|p| p.statement) else {
                panic!("{line}")
            };
            restore(&mut schema, &p);
        }
        assert_eq!(*schema.roles, roles);
    }
}
