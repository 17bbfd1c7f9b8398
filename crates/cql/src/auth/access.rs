//! What each statement needs, as Cassandra checks it: the permission and
//! the resource, for [`authorizer::ensure`](super::authorizer::ensure).
//! Run on every statement (QUERY, EXECUTE of a prepared one, each one of
//! a BATCH); the schema tables drivers read (`system`, `system_schema`,
//! `system_traces`, `system_virtual_schema`) are readable by every role, as
//! in Cassandra. A statement on a keyspace or table that does not exist
//! needs nothing: it fails on its own, with Cassandra's InvalidRequest (as
//! drivers expect of `system_virtual_schema`, which Shoal has not).

use shoal_schema::{CqlType, Schema};

use super::authorizer;
use super::resource::Resource;
use super::statement::{PermissionStatement, RoleStatement, ServiceLevelStatement};
use crate::ast::{Condition, Statement};
use crate::error::CqlResult;

/// Keyspaces every role may read.
const READABLE_KEYSPACES: [&str; 4] = ["system", "system_schema", "system_traces", "system_virtual_schema"];

/// Refuses `statement` unless `user` may run it (always allowed without
/// a user or without the authorizer). `keyspace` is the session's.
pub fn check(statement: &Statement, keyspace: Option<&str>, user: Option<&str>) -> CqlResult<()> {
    let Some(user) = user.filter(|_| authorizer::enabled()) else { return Ok(()) };
    let schema = shoal_coordinator::schema();
    // Every read and write: the table's names borrowed, nothing allocated.
    if let Some(needed) = on_one_table(statement, keyspace) {
        return match needed {
            Some((permission, keyspace, table)) => {
                let table = base_of(&schema, keyspace, table).unwrap_or(table);
                authorizer::ensure_table(&schema, user, permission, keyspace, table)
            }
            None => Ok(()),
        };
    }
    let mut needed = Vec::new();
    required(&schema, statement, keyspace, user, &mut needed);
    let exists = |resource: &Resource| match resource {
        Resource::Keyspace(ks) => schema.keyspace(ks).is_some(),
        Resource::Table(ks, t) => schema.table(ks, t).is_some(),
        _ => true,
    };
    for (permission, mut resource) in needed.into_iter().filter(|(_, r)| exists(r)) {
        if let Resource::Table(ks, t) = &resource {
            if let Some(base) = base_of(&schema, ks, t) {
                resource = Resource::Table(ks.clone(), base.to_string());
            }
        }
        authorizer::ensure(&schema, user, permission, &resource)?;
    }
    Ok(())
}

/// The base table of a view (a materialized view or an index's table): a
/// view has no permissions of its own, as in ScyllaDB, so reading,
/// altering or dropping it asks for the permission on its base, and a
/// grant on the view itself changes nothing.
fn base_of<'s>(schema: &'s Schema, keyspace: &str, table: &str) -> Option<&'s str> {
    schema.table(keyspace, table)?.view_of.as_deref()
}

/// A permission needed on a table, and the table's keyspace and name.
type OnTable<'a> = (&'static str, &'a str, &'a str);

/// What a SELECT, INSERT, UPDATE or DELETE needs: the permission and its
/// table's keyspace and name, borrowed. `None` for other statements;
/// `Some(None)` when it needs nothing: a table every role reads, or no
/// keyspace (the statement then fails on its own).
fn on_one_table<'a>(statement: &'a Statement, session: Option<&'a str>) -> Option<Option<OnTable<'a>>> {
    if conditional_write(statement).is_some() {
        return None;
    }
    let (permission, named, table) = match statement {
        Statement::Select(s) => ("SELECT", s.keyspace.as_deref(), &s.table),
        Statement::Insert(s) => ("MODIFY", s.keyspace.as_deref(), &s.table),
        Statement::InsertJson(s) => ("MODIFY", s.keyspace.as_deref(), &s.table),
        Statement::Update(s) => ("MODIFY", s.keyspace.as_deref(), &s.table),
        Statement::Delete(s) => ("MODIFY", s.keyspace.as_deref(), &s.table),
        _ => return None,
    };
    let keyspace = named.or(session);
    let readable = permission == "SELECT" && keyspace.is_some_and(|ks| READABLE_KEYSPACES.contains(&ks));
    Some(keyspace.filter(|_| !readable).map(|keyspace| (permission, keyspace, table.as_str())))
}

/// The keyspace (if named) and table of a write with an `IF` clause: it
/// needs SELECT besides MODIFY, as in Cassandra, because its answer shows
/// the row it read.
fn conditional_write(statement: &Statement) -> Option<(Option<&str>, &str)> {
    match statement {
        Statement::Insert(s) if s.if_not_exists => Some((s.keyspace.as_deref(), &s.table)),
        Statement::InsertJson(s) if s.if_not_exists => Some((s.keyspace.as_deref(), &s.table)),
        Statement::Update(s) if s.condition != Condition::None => Some((s.keyspace.as_deref(), &s.table)),
        Statement::Delete(s) if s.condition != Condition::None => Some((s.keyspace.as_deref(), &s.table)),
        _ => None,
    }
}

/// A table, its keyspace the session's when not named; `None` when there
/// is none (the statement then fails on its own).
fn table(named: Option<&str>, session: Option<&str>, table: &str) -> Option<Resource> {
    Some(Resource::Table(named.or(session)?.to_string(), table.to_string()))
}

fn keyspace(named: Option<&str>, session: Option<&str>) -> Option<Resource> {
    Some(Resource::Keyspace(named.or(session)?.to_string()))
}

/// `ALL FUNCTIONS IN KEYSPACE ks`, whose permissions cover each function
/// of it (ScyllaDB checks CREATE there, and DROP on the function itself).
fn functions_in(named: Option<&str>, session: Option<&str>) -> Option<Resource> {
    Some(Resource::FunctionsIn(named.or(session)?.to_string()))
}

/// Function `name` of these argument types, its keyspace the session's
/// when not named.
fn function(named: Option<&str>, session: Option<&str>, name: &str, args: &[&CqlType]) -> Option<Resource> {
    let args = args.iter().map(ToString::to_string).collect();
    Some(Resource::Function(named.or(session)?.to_string(), name.to_string(), args))
}

/// Resolves a permission statement's table named without keyspace.
pub fn qualified(resource: &Resource, session: Option<&str>) -> Resource {
    match resource {
        Resource::Table(ks, t) if ks.is_empty() => Resource::Table(session.unwrap_or_default().to_string(), t.clone()),
        other => other.clone(),
    }
}

fn required(
    schema: &Schema,
    statement: &Statement,
    session: Option<&str>,
    user: &str,
    out: &mut Vec<(&'static str, Resource)>,
) {
    let mut need = |permission: &'static str, resource: Option<Resource>| {
        if let Some(resource) = resource {
            out.push((permission, resource));
        }
    };
    if let Some(needed) = on_one_table(statement, session) {
        if let Some((permission, keyspace, table)) = needed {
            out.push((permission, Resource::Table(keyspace.to_string(), table.to_string())));
        }
        return;
    }
    if let Some((named, name)) = conditional_write(statement) {
        need("MODIFY", table(named, session, name));
        need("SELECT", table(named, session, name));
        return;
    }
    match statement {
        // Above.
        Statement::Select(_)
        | Statement::Insert(_)
        | Statement::InsertJson(_)
        | Statement::Update(_)
        | Statement::Delete(_) => {}
        Statement::Truncate(s) => need("MODIFY", table(s.keyspace.as_deref(), session, &s.name)),
        Statement::Batch(b) => {
            for statement in &b.statements {
                required(schema, statement, session, user, out);
            }
        }
        Statement::CreateKeyspace(_) => need("CREATE", Some(Resource::AllKeyspaces)),
        Statement::AlterKeyspace(s) => need("ALTER", Some(Resource::Keyspace(s.name.clone()))),
        Statement::DropKeyspace(s) => need("DROP", Some(Resource::Keyspace(s.name.clone()))),
        Statement::CreateTable(s) => need("CREATE", keyspace(s.keyspace.as_deref(), session)),
        Statement::AlterTable(s) => need("ALTER", table(s.keyspace.as_deref(), session, &s.name)),
        Statement::DropTable(s) => need("DROP", table(s.keyspace.as_deref(), session, &s.name)),
        Statement::CreateType(s) => need("CREATE", keyspace(s.keyspace.as_deref(), session)),
        Statement::AlterType(s) => need("ALTER", keyspace(s.keyspace.as_deref(), session)),
        Statement::DropType(s) => need("DROP", keyspace(s.keyspace.as_deref(), session)),
        Statement::CreateIndex(s) => need("ALTER", table(s.keyspace.as_deref(), session, &s.table)),
        Statement::DropIndex(s) => need("ALTER", keyspace(s.keyspace.as_deref(), session)),
        // Cassandra asks ALTER on the base table; a view's own statements
        // name only the view, whose parents are the base's.
        Statement::CreateView(s) => {
            need("ALTER", table(s.base_keyspace.as_deref().or(s.keyspace.as_deref()), session, &s.base))
        }
        Statement::AlterView(s) => need("ALTER", table(s.keyspace.as_deref(), session, &s.name)),
        Statement::DropView(s) => need("ALTER", table(s.keyspace.as_deref(), session, &s.name)),
        // ScyllaDB's: CREATE on the keyspace's functions, and ALTER on the
        // function itself when it may replace one.
        Statement::CreateFunction(s) => {
            need("CREATE", functions_in(s.keyspace.as_deref(), session));
            if s.or_replace {
                let args: Vec<_> = s.args.iter().map(|(_, ty)| ty).collect();
                need("ALTER", function(s.keyspace.as_deref(), session, &s.name, &args));
            }
        }
        Statement::CreateAggregate(s) => {
            need("CREATE", functions_in(s.keyspace.as_deref(), session));
            if s.or_replace {
                let args: Vec<_> = s.arg_types.iter().collect();
                need("ALTER", function(s.keyspace.as_deref(), session, &s.name, &args));
            }
        }
        // ScyllaDB's: DROP on the one function the statement names; none
        // when it names none or several (it then fails on its own).
        Statement::DropFunction(s) => {
            let Some(ks) = s.keyspace.as_deref().or(session) else { return };
            let overloads = schema.keyspace(ks).map(|k| crate::function_ddl::named_overloads(k, s)).unwrap_or_default();
            if let [args] = overloads.as_slice() {
                need("DROP", function(Some(ks), session, &s.name, &args.iter().collect::<Vec<_>>()));
            }
        }
        Statement::Role(role) => match role {
            RoleStatement::Create { .. } => need("CREATE", Some(Resource::AllRoles)),
            // A role may change its own password.
            RoleStatement::Alter { name, .. } if name == user => {}
            RoleStatement::Alter { name, .. } => need("ALTER", Some(Resource::Role(name.clone()))),
            RoleStatement::Drop { name, .. } => need("DROP", Some(Resource::Role(name.clone()))),
            RoleStatement::Grant { role, .. } | RoleStatement::Revoke { role, .. } => {
                need("AUTHORIZE", Some(Resource::Role(role.clone())))
            }
            RoleStatement::ListRoles { .. } | RoleStatement::ListUsers => {}
        },
        // ScyllaDB's: on the root of service levels.
        Statement::ServiceLevel(statement) => {
            let permission = match statement {
                ServiceLevelStatement::Create { .. } => "CREATE",
                ServiceLevelStatement::Alter { .. } => "ALTER",
                ServiceLevelStatement::Drop { .. } => "DROP",
                ServiceLevelStatement::Attach { .. } | ServiceLevelStatement::Detach { .. } => "AUTHORIZE",
                ServiceLevelStatement::List { .. }
                | ServiceLevelStatement::ListAttached { .. }
                | ServiceLevelStatement::ListEffective { .. } => "DESCRIBE",
            };
            need(permission, Some(Resource::AllServiceLevels))
        }
        Statement::Permission(
            PermissionStatement::Grant { permission, resource, .. }
            | PermissionStatement::Revoke { permission, resource, .. },
        ) => {
            // The grantor needs AUTHORIZE, and the permissions it grants.
            let resource = qualified(resource, session);
            need("AUTHORIZE", Some(resource.clone()));
            let granted: &[&'static str] = match permission {
                Some(_) => &[],
                None => resource.applicable(),
            };
            for p in granted {
                need(p, Some(resource.clone()));
            }
            if let Some(p) = permission {
                if let Some(p) = super::resource::PERMISSIONS.iter().find(|known| **known == p.as_str()) {
                    need(p, Some(resource));
                }
            }
        }
        Statement::Permission(PermissionStatement::List { .. }) | Statement::Use(_) | Statement::Describe(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parser::parse_statement;

    fn needs(text: &str, session: Option<&str>) -> Vec<(&'static str, String)> {
        let parsed = parse_statement(text).expect(text);
        let mut out = Vec::new();
        required(&Schema::empty(), &parsed.statement, session, "alice", &mut out);
        out.into_iter().map(|(p, r)| (p, r.to_string())).collect()
    }

    #[test]
    fn statements_need_cassandras_permissions() {
        assert_eq!(needs("SELECT * FROM ks.t", None), [("SELECT", "<table ks.t>".to_string())]);
        assert_eq!(needs("SELECT * FROM t", Some("ks")), [("SELECT", "<table ks.t>".to_string())]);
        assert!(needs("SELECT * FROM system.local", None).is_empty());
        assert!(needs("SELECT * FROM system_schema.tables", None).is_empty());
        assert_eq!(
            needs("SELECT * FROM system_auth.roles", None),
            [("SELECT", "<table system_auth.roles>".to_string())]
        );
        assert_eq!(needs("INSERT INTO ks.t (k) VALUES (1)", None), [("MODIFY", "<table ks.t>".to_string())]);
        let batch =
            needs("BEGIN BATCH INSERT INTO ks.a (k) VALUES (1); DELETE FROM ks.b WHERE k = 1; APPLY BATCH", None);
        assert_eq!(batch, [("MODIFY", "<table ks.a>".to_string()), ("MODIFY", "<table ks.b>".to_string())]);
        // A conditional write shows what it read: it needs SELECT too, also
        // after an unconditional write to its table in the same batch.
        let read_and_write = [("MODIFY", "<table ks.t>".to_string()), ("SELECT", "<table ks.t>".to_string())];
        for conditional in [
            "INSERT INTO t (k) VALUES (1) IF NOT EXISTS",
            "UPDATE t SET v = 1 WHERE k = 0 IF v = 0",
            "UPDATE t SET v = 1 WHERE k = 0 IF EXISTS",
            "DELETE FROM t WHERE k = 0 IF EXISTS",
        ] {
            assert_eq!(needs(conditional, Some("ks")), read_and_write, "{conditional}");
        }
        let batch = needs(
            "BEGIN BATCH INSERT INTO ks.t (k, v) VALUES (0, 0); UPDATE ks.t SET v = 1 WHERE k = 0 IF v = 0; APPLY BATCH",
            None,
        );
        assert_eq!(batch[1..], read_and_write);
        assert_eq!(
            needs("CREATE KEYSPACE k2 WITH replication = {'class': 'SimpleStrategy'}", None),
            [("CREATE", "<all keyspaces>".to_string())]
        );
        assert_eq!(needs("DROP TABLE ks.t", None), [("DROP", "<table ks.t>".to_string())]);
        assert_eq!(needs("CREATE ROLE r", None), [("CREATE", "<all roles>".to_string())]);
        assert_eq!(needs("ATTACH SERVICE LEVEL s TO r", None), [("AUTHORIZE", "<all service levels>".to_string())]);
        assert!(needs("ALTER ROLE alice WITH PASSWORD = 'x'", None).is_empty());
        assert_eq!(
            needs("GRANT SELECT ON ks.t TO bob", None),
            [("AUTHORIZE", "<table ks.t>".to_string()), ("SELECT", "<table ks.t>".to_string())]
        );
    }
}
