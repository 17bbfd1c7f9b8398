//! Running ScyllaDB's service level statements.
//!
//! A change is a schema transition on the roles ([`transition`], pure), run
//! as a role statement is: group 0 agrees on it and every node installs it
//! before the answer. Options are checked before the transition, with
//! ScyllaDB's texts (`sl_prop_defs.cc`, `service_level_controller.cc`). The
//! listings are answered from the schema snapshot, with ScyllaDB's result
//! columns (keyspace `QOS`).
//!
//! ScyllaDB caps service levels by its scheduling groups: Shoal refuses a
//! level past [`SERVICE_LEVELS_MAX`], the number a user may create there
//! beside its `default` and `driver` levels, so an application that
//! handles that refusal meets it at the same point.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Duration;

use shoal_runtime::Group;
use shoal_schema::service_level::{ServiceLevel, Workload};
use shoal_schema::{CqlType, Roles, Schema, SchemaChange, Value};

use super::roles::next_schema;
use super::statement::{ServiceLevelOptions, ServiceLevelStatement};
use crate::error::{invalid, CqlError, CqlResult};
use crate::result::{ColumnSpec, QueryResult, Rows};
use crate::system_cells::{int, text};
use uuid::Uuid;

/// Service levels a cluster holds at most (ScyllaDB's scheduling groups
/// left for them).
pub const SERVICE_LEVELS_MAX: usize = 6;

/// The range of `shares`.
const SHARES_MIN: i64 = 1;
const SHARES_MAX: i64 = 1000;

/// Runs `statement` (its permission was checked by `access`).
pub async fn execute(statement: &ServiceLevelStatement) -> CqlResult<QueryResult> {
    let schema = shoal_coordinator::schema();
    match statement {
        ServiceLevelStatement::List { name } => Ok(list(&schema.roles, name.as_deref())),
        ServiceLevelStatement::ListAttached { role } => Ok(list_attached(&schema.roles, role.as_deref())),
        ServiceLevelStatement::ListEffective { role } => list_effective(&schema.roles, role),
        _ => {
            // Checked here so a bad option fails before group 0 is asked.
            changed_options(statement, &ServiceLevel::default())?;
            let statement = statement.clone();
            let change = move |current: &Schema| transition(current, &statement);
            shoal_coordinator::announce_schema_change_everywhere(change).await??;
            Ok(QueryResult::Void)
        }
    }
}

/// The schema after `statement`, or `None` when it changes nothing (IF
/// [NOT] EXISTS, a DETACH of nothing).
pub fn transition(current: &Schema, statement: &ServiceLevelStatement) -> CqlResult<Option<(Schema, SchemaChange)>> {
    let mut roles = Roles::clone(&current.roles);
    if !change(&mut roles, statement)? {
        return Ok(None);
    }
    Ok(Some(next_schema(current, roles)))
}

/// Applies a service level statement read back from the schema file.
pub fn restore(schema: &mut Schema, statement: &ServiceLevelStatement) -> CqlResult<()> {
    if let Some((next, _)) = transition(schema, statement)? {
        schema.roles = next.roles;
    }
    Ok(())
}

fn missing_level(name: &str) -> CqlError {
    invalid(format!("Service Level {name} doesn't exists."))
}

fn missing_role(name: &str) -> CqlError {
    invalid(format!("Role {name} doesn't exist."))
}

/// Applies `statement` to `roles`; false when it changes nothing.
fn change(roles: &mut Roles, statement: &ServiceLevelStatement) -> CqlResult<bool> {
    match statement {
        ServiceLevelStatement::Create { name, if_not_exists, .. } => {
            if roles.service_levels.contains_key(name) {
                if *if_not_exists {
                    return Ok(false);
                }
                return Err(invalid(format!("The service level '{name}' already exists.")));
            }
            if roles.service_levels.len() >= SERVICE_LEVELS_MAX {
                return Err(invalid("Can't create service level - no more scheduling groups exist"));
            }
            let level = changed_options(statement, &ServiceLevel::default())?;
            roles.service_levels.insert(name.clone(), level);
        }
        ServiceLevelStatement::Alter { name, .. } => {
            let current = roles
                .service_levels
                .get(name)
                .ok_or_else(|| invalid(format!("The service level '{name}' doesn't exist.")))?;
            let level = changed_options(statement, current)?;
            roles.service_levels.insert(name.clone(), level);
        }
        ServiceLevelStatement::Drop { name, if_exists } => {
            if !roles.service_levels.contains_key(name) {
                return if *if_exists { Ok(false) } else { Err(missing_level(name)) };
            }
            roles.drop_service_level(name);
        }
        ServiceLevelStatement::Attach { name, role } => {
            if !roles.service_levels.contains_key(name) {
                return Err(missing_level(name));
            }
            let role = roles.roles.get_mut(role).ok_or_else(|| missing_role(role))?;
            role.service_level = Some(name.clone());
        }
        ServiceLevelStatement::Detach { role } => {
            let role = roles.roles.get_mut(role).ok_or_else(|| missing_role(role))?;
            return Ok(role.service_level.take().is_some());
        }
        ServiceLevelStatement::List { .. }
        | ServiceLevelStatement::ListAttached { .. }
        | ServiceLevelStatement::ListEffective { .. } => return Ok(false),
    }
    Ok(true)
}

/// `current` with the options a CREATE or ALTER sets; other statements
/// set none.
fn changed_options(statement: &ServiceLevelStatement, current: &ServiceLevel) -> CqlResult<ServiceLevel> {
    let options = match statement {
        ServiceLevelStatement::Create { options, .. } | ServiceLevelStatement::Alter { options, .. } => options,
        _ => return Ok(current.clone()),
    };
    let ServiceLevelOptions { timeout, workload_type, shares } = options;
    let mut level = current.clone();
    if let Some(timeout) = timeout {
        level.timeout_ms = timeout.as_deref().map(timeout_ms).transpose()?;
    }
    if let Some(workload) = workload_type {
        level.workload = match workload.as_deref() {
            None | Some("null") => None,
            Some("batch") => Some(Workload::Batch),
            Some("interactive") => Some(Workload::Interactive),
            Some(other) => return Err(invalid(format!("Invalid workload type: {other}"))),
        };
    }
    if let Some(shares) = *shares {
        if !(SHARES_MIN..=SHARES_MAX).contains(&shares) {
            return Err(CqlError::Syntax(format!(
                "'SHARES' can only take values of {SHARES_MIN}-{SHARES_MAX} (given {shares})"
            )));
        }
        // In range: checked just above.
        level.shares = shares as i32;
    }
    Ok(level)
}

/// A timeout as written (a duration literal), in whole milliseconds.
fn timeout_ms(text: &str) -> CqlResult<u64> {
    let Ok(Value::Duration { months, days, nanos }) = shoal_schema::literal::parse_duration(text) else {
        return Err(invalid(format!("Unable to convert '{text}' to a duration")));
    };
    if months != 0 || days != 0 {
        return Err(invalid("Timeout values cannot be expressed in days/months"));
    }
    if nanos % 1_000_000 != 0 {
        return Err(invalid("Timeout values must be expressed in millisecond granularity"));
    }
    if nanos < 0 {
        return Err(invalid("Timeout values must be nonnegative"));
    }
    Ok(nanos as u64 / 1_000_000)
}

fn column(table: &str, name: &str, ty: CqlType) -> ColumnSpec {
    ColumnSpec { keyspace: "QOS".to_string(), table: table.to_string(), name: name.to_string(), ty }
}

fn rows(columns: Vec<ColumnSpec>, rows: Vec<Vec<Option<bytes::Bytes>>>) -> QueryResult {
    QueryResult::Rows(Rows { columns: columns.into(), rows, paging_state: None })
}

fn nanos(timeout_ms: u64) -> i64 {
    i64::try_from(timeout_ms.saturating_mul(1_000_000)).unwrap_or(i64::MAX)
}

/// A timeout as a `duration` cell.
fn duration_cell(timeout_ms: u64) -> Option<bytes::Bytes> {
    Some(Value::Duration { months: 0, days: 0, nanos: nanos(timeout_ms) }.to_bytes().into())
}

fn duration_text(timeout_ms: u64) -> String {
    shoal_schema::literal::format_duration(0, 0, nanos(timeout_ms))
}

/// `LIST SERVICE LEVEL name` (no row when it does not exist), or `LIST
/// ALL SERVICE LEVELS` with each level's percentage of all shares.
fn list(roles: &Roles, name: Option<&str>) -> QueryResult {
    let all = name.is_none();
    let levels: Vec<(&String, &ServiceLevel)> =
        roles.service_levels.iter().filter(|(n, _)| name.is_none_or(|name| name == n.as_str())).collect();
    let total_shares: i64 = levels.iter().map(|(_, l)| i64::from(l.shares)).sum();
    let rows_out = levels
        .iter()
        .map(|(name, level)| {
            let mut row = vec![
                text(name),
                level.timeout_ms.and_then(duration_cell),
                level.workload.and_then(|w| text(w.name())),
                int(level.shares),
            ];
            if all {
                let percent = 100.0 * level.shares as f64 / total_shares.max(1) as f64;
                row.push(text(&format!("{percent:.2}%")));
            }
            row
        })
        .collect();
    let mut columns = vec![
        column("service_levels", "service_level", CqlType::Text),
        column("service_levels", "timeout", CqlType::Duration),
        column("service_levels", "workload_type", CqlType::Text),
        column("service_levels", "shares", CqlType::Int),
    ];
    if all {
        columns.push(column("service_levels", "percentage of all service level shares", CqlType::Text));
    }
    rows(columns, rows_out)
}

/// `LIST ATTACHED SERVICE LEVEL OF role`, or of every role (`None`).
fn list_attached(roles: &Roles, role: Option<&str>) -> QueryResult {
    let rows_out = roles
        .roles
        .values()
        .filter(|r| role.is_none_or(|role| role == r.name))
        .filter_map(|r| Some(vec![text(&r.name), text(r.service_level.as_deref()?)]))
        .collect();
    let table = "service_levels_attachments";
    rows(vec![column(table, "role", CqlType::Text), column(table, "service_level", CqlType::Text)], rows_out)
}

/// `LIST EFFECTIVE SERVICE LEVEL OF role`: each option, the level it comes
/// from, and its value as text.
fn list_effective(roles: &Roles, role: &str) -> CqlResult<QueryResult> {
    if roles.get(role).is_none() {
        return Err(missing_role(role));
    }
    let effective = roles
        .effective_service_level(role)
        .ok_or_else(|| invalid(format!("Role {role} doesn't have assigned any service level")))?;
    let workload = effective.workload.value.map_or("unspecified", Workload::name);
    let rows_out = vec![
        vec![text("workload_type"), text(&effective.workload.service_level), text(workload)],
        vec![
            text("timeout"),
            text(&effective.timeout_ms.service_level),
            effective.timeout_ms.value.and_then(|ms| text(&duration_text(ms))),
        ],
        vec![text("shares"), text(&effective.shares.service_level), text(&effective.shares.value.to_string())],
    ];
    let table = "effective_service_level";
    let columns = vec![
        column(table, "service_level_option", CqlType::Text),
        column(table, "effective_service_level", CqlType::Text),
        column(table, "value", CqlType::Text),
    ];
    Ok(rows(columns, rows_out))
}

/// What a role's effective service level sets for its requests on this
/// shard.
#[derive(Debug, Clone, Copy)]
struct Resolved {
    timeout: Option<Duration>,
    group: Group,
}

thread_local! {
    /// Each role's service level timeout and scheduling group, resolved
    /// once per schema version on this shard: resolving walks the roles
    /// granted to it, which a request should not.
    static RESOLVED: RefCell<(Uuid, HashMap<String, Resolved>)> = RefCell::new((Uuid::nil(), HashMap::new()));
}

/// The timeout of `user`'s requests set by its effective service level,
/// if any: what a statement without `USING TIMEOUT` runs under.
pub fn timeout_of(schema: &Schema, user: Option<&str>) -> Option<Duration> {
    if schema.roles.service_levels.is_empty() {
        return None;
    }
    resolved(schema, user?).timeout
}

/// The CPU scheduling group `user`'s requests run in: that of the service
/// level its effective shares come from (ScyllaDB's
/// `get_user_scheduling_group`), or the default `Statements`.
pub fn group_of(schema: &Schema, user: Option<&str>) -> Group {
    match user {
        Some(user) if !schema.roles.service_levels.is_empty() => resolved(schema, user).group,
        _ => Group::Statements,
    }
}

fn resolved(schema: &Schema, user: &str) -> Resolved {
    RESOLVED.with(|cache| {
        let mut cache = cache.borrow_mut();
        let (version, by_user) = &mut *cache;
        if *version != schema.version {
            *version = schema.version;
            by_user.clear();
        }
        if let Some(resolved) = by_user.get(user) {
            return *resolved;
        }
        let resolved = resolve(&schema.roles, user);
        by_user.insert(user.to_string(), resolved);
        resolved
    })
}

fn resolve(roles: &Roles, user: &str) -> Resolved {
    let Some(effective) = roles.effective_service_level(user) else {
        return Resolved { timeout: None, group: Group::Statements };
    };
    Resolved {
        timeout: effective.timeout_ms.value.map(Duration::from_millis),
        group: shoal_runtime::sched::service_level_group(&effective.shares.service_level).unwrap_or(Group::Statements),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parser::parse_statement;

    fn run(schema: &mut Schema, text: &str) -> CqlResult<()> {
        let statement = match parse_statement(text).map(|p| p.statement) {
            Ok(crate::ast::Statement::ServiceLevel(s)) => s,
            Ok(crate::ast::Statement::Role(role)) => {
                if let Some((next, _)) = super::super::roles::transition(schema, &role, None, None)? {
                    *schema = next;
                }
                return Ok(());
            }
            other => panic!("{text}: {other:?}"),
        };
        if let Some((next, _)) = transition(schema, &statement)? {
            *schema = next;
        }
        Ok(())
    }

    #[test]
    fn levels_are_created_altered_attached_and_dropped() {
        let mut schema = Schema::empty();
        for text in [
            "CREATE ROLE r",
            "CREATE SERVICE LEVEL sl WITH timeout = 10s",
            "ALTER SERVICE LEVEL sl WITH workload_type = 'batch' AND shares = 500",
            "ATTACH SERVICE LEVEL sl TO r",
        ] {
            run(&mut schema, text).expect(text);
        }
        let level = ServiceLevel { timeout_ms: Some(10_000), workload: Some(Workload::Batch), shares: 500 };
        assert_eq!(schema.roles.service_levels.get("sl"), Some(&level));
        assert_eq!(schema.roles.get("r").and_then(|r| r.service_level.as_deref()), Some("sl"));
        assert_eq!(timeout_of(&schema, Some("r")), Some(Duration::from_secs(10)));
        assert_eq!(run(&mut schema, "CREATE SERVICE LEVEL sl"), Err(invalid("The service level 'sl' already exists.")));
        run(&mut schema, "CREATE SERVICE LEVEL IF NOT EXISTS sl").expect("a no-op");
        run(&mut schema, "ALTER SERVICE LEVEL sl WITH timeout = null").expect("reset");
        assert_eq!(timeout_of(&schema, Some("r")), None);
        run(&mut schema, "DROP SERVICE LEVEL sl").expect("dropped");
        assert!(schema.roles.get("r").is_some_and(|r| r.service_level.is_none()), "detached by the drop");
        assert_eq!(run(&mut schema, "DROP SERVICE LEVEL sl"), Err(invalid("Service Level sl doesn't exists.")));
        assert_eq!(run(&mut schema, "ATTACH SERVICE LEVEL sl TO r"), Err(invalid("Service Level sl doesn't exists.")));
        for n in 0..SERVICE_LEVELS_MAX {
            run(&mut schema, &format!("CREATE SERVICE LEVEL s{n}")).expect("under the limit");
        }
        let refused = run(&mut schema, "CREATE SERVICE LEVEL one_too_many");
        assert_eq!(refused, Err(invalid("Can't create service level - no more scheduling groups exist")));
    }

    #[test]
    fn bad_timeouts_and_shares_are_refused() {
        let mut schema = Schema::empty();
        run(&mut schema, "CREATE SERVICE LEVEL sl").expect("created");
        for bad in ["1ns", "-5s", "writetime", "10d", "5y", "7", "0"] {
            let text = format!("ALTER SERVICE LEVEL sl WITH timeout = {bad}");
            assert!(run(&mut schema, &text).is_err(), "{text}");
        }
        let refused = run(&mut schema, "ALTER SERVICE LEVEL sl WITH shares = 1001");
        assert_eq!(refused, Err(CqlError::Syntax("'SHARES' can only take values of 1-1000 (given 1001)".into())));
        let refused = run(&mut schema, "ALTER SERVICE LEVEL sl WITH workload_type = 'unspecified'");
        assert_eq!(refused, Err(invalid("Invalid workload type: unspecified")));
    }

    #[test]
    fn a_role_runs_in_the_group_of_the_level_its_shares_come_from() {
        let mut schema = Schema::empty();
        for text in [
            "CREATE ROLE r1",
            "CREATE ROLE r2",
            "CREATE ROLE r3",
            "CREATE SERVICE LEVEL sl1 WITH shares = 500",
            "CREATE SERVICE LEVEL sl2 WITH shares = 200",
            "ATTACH SERVICE LEVEL sl1 TO r1",
            "ATTACH SERVICE LEVEL sl2 TO r2",
            "GRANT r2 TO r1",
        ] {
            run(&mut schema, text).expect(text);
        }
        assert_eq!(group_of(&schema, Some("r1")), Group::Statements, "no group before the shard makes them");
        // What the shard does as it installs the schema.
        let levels = schema.roles.service_levels.iter().map(|(n, l)| (n.as_str(), l.shares.unsigned_abs()));
        shoal_runtime::sched::set_service_levels(levels);
        run(&mut schema, "CREATE ROLE r4").expect("a new schema version");
        let sl2 = shoal_runtime::sched::service_level_group("sl2").expect("sl2 has a group");
        assert_eq!(shoal_runtime::sched::stats(sl2).shares, 200);
        assert_eq!(group_of(&schema, Some("r1")), sl2, "the smaller shares, granted through r2");
        assert_eq!(group_of(&schema, Some("r2")), sl2);
        assert_eq!(group_of(&schema, Some("r3")), Group::Statements);
        assert_eq!(group_of(&schema, None), Group::Statements);
    }

    #[test]
    fn the_effective_level_merges_granted_roles() {
        let mut schema = Schema::empty();
        for text in [
            "CREATE ROLE r1",
            "CREATE ROLE r2",
            "CREATE SERVICE LEVEL sl1 WITH timeout = 10s AND shares = 500",
            "CREATE SERVICE LEVEL sl2 WITH workload_type = 'batch' AND shares = 200",
            "ATTACH SERVICE LEVEL sl1 TO r1",
            "ATTACH SERVICE LEVEL sl2 TO r2",
            "GRANT r2 TO r1",
        ] {
            run(&mut schema, text).expect(text);
        }
        let QueryResult::Rows(listed) = list_effective(&schema.roles, "r1").expect("listed") else { panic!("rows") };
        let expected = [
            [text("workload_type"), text("sl2"), text("batch")],
            [text("timeout"), text("sl1"), text("10s")],
            [text("shares"), text("sl2"), text("200")],
        ];
        assert_eq!(listed.rows, expected.map(|row| row.to_vec()).to_vec());
        let refused = list_effective(&schema.roles, "nobody");
        assert_eq!(refused.err(), Some(invalid("Role nobody doesn't exist.")));
    }
}
