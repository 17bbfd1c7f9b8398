//! Schema statements: from the current schema and a CREATE/ALTER/DROP to the
//! next schema and the change clients are told about.
//!
//! Pure functions: persisting the new schema and installing it on every
//! shard is the coordinator's schema service's job.

use std::collections::BTreeMap;
use std::sync::Arc;

use shoal_schema::{
    ClusteringOrder, ColumnKind, ColumnMeta, CqlType, KeyspaceMeta, Schema, SchemaChange, SchemaChangeKind,
    SchemaChangeTarget, TableMeta, TableOptions, MAX_VECTOR_DIMENSION,
};
use uuid::Uuid;

use crate::ast::{AlterTableOp, ColumnDef, CreateTable, OptionValue, Options, Order, Statement};
use crate::error::{invalid, CqlError, CqlResult};
use crate::{cdc, dropped_columns, function_ddl, index_ddl, user_types, view_ddl};

pub use shoal_schema::SYSTEM_KEYSPACES;

/// Longest keyspace, table, view or index name: ScyllaDB's
/// `schema::NAME_LENGTH`, which leaves room in a 255-byte file name for a
/// table directory's id suffix and a CDC log table's suffix.
const NAME_LENGTH_MAX: usize = 207;

/// The next schema and its change; `None` when an `IF [NOT] EXISTS` made the
/// statement a no-op.
pub fn apply(
    schema: &Schema,
    statement: &Statement,
    keyspace: Option<&str>,
) -> CqlResult<Option<(Schema, SchemaChange)>> {
    let mut next = schema.clone();
    let change = match statement {
        Statement::CreateKeyspace(s) => {
            if next.keyspaces.contains_key(&s.name) {
                if s.if_not_exists {
                    return Ok(None);
                }
                return Err(CqlError::AlreadyExists {
                    keyspace: s.name.clone(),
                    table: String::new(),
                    message: format!("Keyspace '{}' already exists", s.name),
                });
            }
            check_name(&s.name, "Keyspace")?;
            let (replication, durable_writes) = keyspace_options(&s.options, None)?;
            let meta = KeyspaceMeta {
                name: s.name.clone(),
                replication,
                durable_writes,
                tables: BTreeMap::new(),
                types: BTreeMap::new(),
                functions: Default::default(),
            };
            next.keyspaces.insert(s.name.clone(), Arc::new(meta));
            change(SchemaChangeKind::Created, SchemaChangeTarget::Keyspace(s.name.clone()))
        }
        Statement::AlterKeyspace(s) => {
            let current = user_keyspace(&next, &s.name)?;
            let (replication, durable_writes) = keyspace_options(&s.options, Some(current))?;
            let meta = KeyspaceMeta { replication, durable_writes, ..current.as_ref().clone() };
            next.keyspaces.insert(s.name.clone(), Arc::new(meta));
            change(SchemaChangeKind::Updated, SchemaChangeTarget::Keyspace(s.name.clone()))
        }
        Statement::DropKeyspace(s) => {
            if !next.keyspaces.contains_key(&s.name) {
                if s.if_exists {
                    return Ok(None);
                }
                return Err(invalid(format!("Keyspace '{}' doesn't exist", s.name)));
            }
            user_keyspace(&next, &s.name)?;
            next.keyspaces.remove(&s.name);
            change(SchemaChangeKind::Dropped, SchemaChangeTarget::Keyspace(s.name.clone()))
        }
        Statement::CreateTable(s) => {
            let ks = qualify(s.keyspace.as_deref(), keyspace)?;
            let current = user_keyspace(&next, ks)?;
            if current.tables.contains_key(&s.name) {
                if s.if_not_exists {
                    return Ok(None);
                }
                return Err(CqlError::AlreadyExists {
                    keyspace: ks.to_string(),
                    table: s.name.clone(),
                    message: format!("Table '{ks}.{}' already exists", s.name),
                });
            }
            check_name(&s.name, "Table")?;
            let mut s = s.clone();
            for column in &mut s.columns {
                column.ty = user_types::resolve(&column.ty, current)?;
            }
            let table = create_table(ks, &s)?;
            check_unused_id(&next, table.id)?;
            let mut meta = next.keyspaces[ks].as_ref().clone();
            cdc::follow_base(&mut meta, &table)?;
            next.keyspaces.insert(ks.to_string(), Arc::new(meta));
            put_table(&mut next, table);
            change(SchemaChangeKind::Created, table_target(ks, &s.name))
        }
        Statement::AlterTable(s) => {
            let ks = qualify(s.keyspace.as_deref(), keyspace)?;
            if ks == "system" {
                return system_table_alter(&s.op);
            }
            let current = user_table(&next, ks, &s.name)?;
            if current.view_of.is_some() {
                return Err(invalid("Cannot use ALTER TABLE on Materialized View"));
            }
            // user_table found the keyspace just above.
            let keyspace = &next.keyspaces[ks];
            cdc::check_log_alter(keyspace, current, &s.op)?;
            let op = match &s.op {
                AlterTableOp::Add(defs) => {
                    let resolve =
                        |d: &ColumnDef| Ok(ColumnDef { ty: user_types::resolve(&d.ty, keyspace)?, ..d.clone() });
                    AlterTableOp::Add(defs.iter().map(resolve).collect::<CqlResult<_>>()?)
                }
                AlterTableOp::AlterType { column, ty } => {
                    AlterTableOp::AlterType { column: column.clone(), ty: user_types::resolve(ty, keyspace)? }
                }
                op => op.clone(),
            };
            match &op {
                AlterTableOp::Drop { columns, .. } => {
                    columns.iter().try_for_each(|n| view_ddl::check_column_drop(keyspace, current, n))?
                }
                AlterTableOp::Rename(pairs) => {
                    pairs.iter().try_for_each(|(from, _)| view_ddl::check_column_rename(keyspace, current, from))?
                }
                _ => {}
            }
            let table = alter_table(current, &op)?;
            view_ddl::check_base_options(keyspace, &table)?;
            let mut meta = keyspace.as_ref().clone();
            if let AlterTableOp::Add(defs) = &op {
                let added: Vec<String> = defs.iter().map(|d| d.name.clone()).collect();
                view_ddl::follow_added_columns(&mut meta, &table, &added);
            }
            if table.options.cdc_log && cdc::enabled(&table) {
                return Err(invalid(format!(
                    "Cannot create a CDC log for a table {ks}.{}, because creating nested CDC logs is not allowed",
                    s.name
                )));
            }
            cdc::follow_base(&mut meta, &table)?;
            meta.tables.insert(table.name.clone(), Arc::new(table));
            next.keyspaces.insert(ks.to_string(), Arc::new(meta));
            change(SchemaChangeKind::Updated, table_target(ks, &s.name))
        }
        Statement::DropTable(s) => {
            let ks = qualify(s.keyspace.as_deref(), keyspace)?;
            if next.table(ks, &s.name).is_none() && s.if_exists {
                return Ok(None);
            }
            let table = Arc::clone(user_table(&next, ks, &s.name)?);
            if table.view_of.is_some() {
                return Err(invalid("Cannot use DROP TABLE on Materialized View"));
            }
            view_ddl::check_table_drop(&next.keyspaces[ks], &table)?;
            let mut meta = next.keyspaces[ks].as_ref().clone();
            meta.tables.remove(&s.name);
            index_ddl::drop_views_of(&mut meta, &table);
            cdc::drop_log_of(&mut meta, &s.name);
            next.keyspaces.insert(ks.to_string(), Arc::new(meta));
            change(SchemaChangeKind::Dropped, table_target(ks, &s.name))
        }
        Statement::CreateIndex(s) => {
            let ks = qualify(s.keyspace.as_deref(), keyspace)?;
            user_keyspace(&next, ks)?;
            let Some(table) = index_ddl::create(&mut next, ks, s)? else { return Ok(None) };
            change(SchemaChangeKind::Updated, table_target(ks, &table))
        }
        Statement::DropIndex(s) => {
            let ks = qualify(s.keyspace.as_deref(), keyspace)?;
            if next.keyspace(ks).is_some() {
                user_keyspace(&next, ks)?;
            }
            let Some(table) = index_ddl::drop(&mut next, ks, s)? else { return Ok(None) };
            change(SchemaChangeKind::Updated, table_target(ks, &table))
        }
        Statement::CreateView(s) => {
            let ks = qualify(s.keyspace.as_deref(), keyspace)?;
            user_keyspace(&next, ks)?;
            if !view_ddl::create(&mut next, ks, s)? {
                return Ok(None);
            }
            change(SchemaChangeKind::Created, table_target(ks, &s.name))
        }
        Statement::AlterView(s) => {
            let ks = qualify(s.keyspace.as_deref(), keyspace)?;
            user_keyspace(&next, ks)?;
            view_ddl::alter(&mut next, ks, s)?;
            change(SchemaChangeKind::Updated, table_target(ks, &s.name))
        }
        Statement::DropView(s) => {
            let ks = qualify(s.keyspace.as_deref(), keyspace)?;
            if next.keyspace(ks).is_none() && s.if_exists {
                return Ok(None);
            }
            user_keyspace(&next, ks)?;
            if !view_ddl::drop(&mut next, ks, s)? {
                return Ok(None);
            }
            change(SchemaChangeKind::Dropped, table_target(ks, &s.name))
        }
        Statement::CreateType(s) => {
            let ks = qualify(s.keyspace.as_deref(), keyspace)?;
            let mut meta = user_keyspace(&next, ks)?.as_ref().clone();
            if !user_types::create(&mut meta, s)? {
                return Ok(None);
            }
            next.keyspaces.insert(ks.to_string(), Arc::new(meta));
            change(SchemaChangeKind::Created, type_target(ks, &s.name))
        }
        Statement::AlterType(s) => {
            let ks = qualify(s.keyspace.as_deref(), keyspace)?;
            let mut meta = user_keyspace(&next, ks)?.as_ref().clone();
            user_types::alter(&mut meta, s)?;
            next.keyspaces.insert(ks.to_string(), Arc::new(meta));
            change(SchemaChangeKind::Updated, type_target(ks, &s.name))
        }
        Statement::DropType(s) => {
            let ks = qualify(s.keyspace.as_deref(), keyspace)?;
            if s.if_exists && next.keyspace(ks).is_none() {
                return Ok(None);
            }
            let mut meta = user_keyspace(&next, ks)?.as_ref().clone();
            if !user_types::drop(&mut meta, s)? {
                return Ok(None);
            }
            next.keyspaces.insert(ks.to_string(), Arc::new(meta));
            change(SchemaChangeKind::Dropped, type_target(ks, &s.name))
        }
        Statement::CreateFunction(_) | Statement::CreateAggregate(_) | Statement::DropFunction(_) => {
            return function_statement(next, statement, keyspace)
        }
        _ => return Err(CqlError::Server("not a schema statement".to_string())),
    };
    next.version = Uuid::new_v4();
    Ok(Some((next, change)))
}

/// A function's argument, result or state type with its user types
/// resolved in `keyspace` (here, as `function_ddl` sits beneath
/// `user_types`). As in ScyllaDB, a user type is named bare: it is always
/// taken frozen, and `frozen<>` around one is refused.
fn function_type(ty: &CqlType, keyspace: &KeyspaceMeta) -> CqlResult<CqlType> {
    if let CqlType::Frozen(inner) = ty {
        if matches!(**inner, CqlType::Udt(_)) {
            return Err(invalid("User defined argument and return types should not be frozen"));
        }
    }
    Ok(match user_types::resolve(ty, keyspace)? {
        udt @ CqlType::Udt(_) => CqlType::Frozen(Box::new(udt)),
        resolved => resolved,
    })
}

/// CREATE FUNCTION|AGGREGATE and DROP FUNCTION|AGGREGATE (`function_ddl`).
fn function_statement(
    mut next: Schema,
    statement: &Statement,
    session: Option<&str>,
) -> CqlResult<Option<(Schema, SchemaChange)>> {
    let (named, kind) = match statement {
        Statement::CreateFunction(s) => (s.keyspace.as_deref(), SchemaChangeKind::Created),
        Statement::CreateAggregate(s) => (s.keyspace.as_deref(), SchemaChangeKind::Created),
        Statement::DropFunction(s) => (s.keyspace.as_deref(), SchemaChangeKind::Dropped),
        _ => return Err(CqlError::Server("not a function statement".to_string())),
    };
    let ks = qualify(named, session)?;
    // A keyspace that does not exist has no function to drop (ScyllaDB's
    // "doesn't exist" texts, or nothing with IF EXISTS).
    if let (None, Statement::DropFunction(s)) = (next.keyspace(ks), statement) {
        let mut missing = KeyspaceMeta {
            name: ks.to_string(),
            replication: BTreeMap::new(),
            durable_writes: true,
            tables: BTreeMap::new(),
            types: BTreeMap::new(),
            functions: Default::default(),
        };
        function_ddl::drop(&mut missing, s)?;
        return Ok(None);
    }
    let mut meta = user_keyspace(&next, ks)?.as_ref().clone();
    let target = match statement {
        Statement::CreateFunction(s) => {
            let mut s = s.clone();
            for (_, ty) in &mut s.args {
                *ty = function_type(ty, &meta)?;
            }
            s.return_type = function_type(&s.return_type, &meta)?;
            function_ddl::create_function(&mut meta, &s)?
        }
        Statement::CreateAggregate(s) => {
            let mut s = s.clone();
            s.arg_types = s.arg_types.iter().map(|ty| function_type(ty, &meta)).collect::<CqlResult<_>>()?;
            s.state_type = function_type(&s.state_type, &meta)?;
            function_ddl::create_aggregate(&mut meta, &s)?
        }
        Statement::DropFunction(s) => {
            let mut s = s.clone();
            if let Some(args) = &mut s.args {
                *args = args.iter().map(|ty| function_type(ty, &meta)).collect::<CqlResult<_>>()?;
            }
            function_ddl::drop(&mut meta, &s)?
        }
        _ => None,
    };
    let Some(target) = target else { return Ok(None) };
    next.keyspaces.insert(ks.to_string(), Arc::new(meta));
    next.version = Uuid::new_v4();
    Ok(Some((next, change(kind, target))))
}

fn change(kind: SchemaChangeKind, target: SchemaChangeTarget) -> SchemaChange {
    SchemaChange { kind, target }
}

fn table_target(keyspace: &str, table: &str) -> SchemaChangeTarget {
    SchemaChangeTarget::Table { keyspace: keyspace.to_string(), table: table.to_string() }
}

fn type_target(keyspace: &str, name: &str) -> SchemaChangeTarget {
    SchemaChangeTarget::Type { keyspace: keyspace.to_string(), name: name.to_string() }
}

/// The keyspace a statement names, or the session's (`USE`).
pub fn qualify<'a>(named: Option<&'a str>, session: Option<&'a str>) -> CqlResult<&'a str> {
    named.or(session).ok_or_else(|| {
        invalid("No keyspace has been specified. USE a keyspace, or explicitly specify keyspace.tablename")
    })
}

/// A keyspace, table, view or index name: word characters, at most
/// [`NAME_LENGTH_MAX`] of them, in ScyllaDB's texts (`what` is
/// "Keyspace", "Table", ...; a table's text names the characters allowed).
pub(crate) fn check_name(name: &str, what: &str) -> CqlResult<()> {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        let lower = what.to_ascii_lowercase();
        return Err(invalid(match what {
            "Table" => {
                format!("\"{name}\" is not a valid {lower} name (must be alphanumeric character only: [0-9A-Za-z]+)")
            }
            _ => format!("\"{name}\" is not a valid {lower} name"),
        }));
    }
    if name.len() > NAME_LENGTH_MAX {
        return Err(invalid(format!(
            "{what} names shouldn't be more than {NAME_LENGTH_MAX} characters long (got \"{name}\")"
        )));
    }
    Ok(())
}

/// Refuses a table id already in use, in any keyspace, as ScyllaDB does
/// (`WITH ID = ...` names one): two tables with one id would share data.
pub(crate) fn check_unused_id(schema: &Schema, id: Uuid) -> CqlResult<()> {
    match schema.keyspaces.values().flat_map(|k| k.tables.values()).find(|t| t.id == id) {
        Some(t) => Err(invalid(format!("Table with ID {id} already exists: {}.{}", t.keyspace, t.name))),
        None => Ok(()),
    }
}

/// ALTER TABLE of a table of keyspace `system`, as ScyllaDB answers it:
/// `memtable_flush_period_in_ms` alone may be set (its #21223; Shoal's
/// system tables flush by their own rules, so it changes nothing), any
/// other change is Unauthorized with its text.
fn system_table_alter(op: &AlterTableOp) -> CqlResult<Option<(Schema, SchemaChange)>> {
    match op {
        AlterTableOp::With(options)
            if !options.is_empty()
                && options.iter().all(|(name, _)| name.eq_ignore_ascii_case("memtable_flush_period_in_ms")) =>
        {
            Ok(None)
        }
        _ => Err(CqlError::Unauthorized("system keyspace is not user-modifiable.".into())),
    }
}

fn user_keyspace<'s>(schema: &'s Schema, name: &str) -> CqlResult<&'s Arc<KeyspaceMeta>> {
    if SYSTEM_KEYSPACES.contains(&name) {
        return Err(CqlError::Config(format!("Cannot modify system keyspace {name}")));
    }
    schema.keyspace(name).ok_or_else(|| invalid(format!("Keyspace '{name}' doesn't exist")))
}

fn user_table<'s>(schema: &'s Schema, keyspace: &str, name: &str) -> CqlResult<&'s Arc<TableMeta>> {
    user_keyspace(schema, keyspace)?;
    schema.table(keyspace, name).ok_or_else(|| invalid(format!("unconfigured table {name}")))
}

fn put_table(schema: &mut Schema, table: TableMeta) {
    let mut keyspace = schema.keyspaces[&table.keyspace].as_ref().clone();
    keyspace.tables.insert(table.name.clone(), Arc::new(table));
    schema.keyspaces.insert(keyspace.name.clone(), Arc::new(keyspace));
}

fn option_text(value: &OptionValue) -> String {
    match value {
        OptionValue::String(s) | OptionValue::Number(s) => s.clone(),
        OptionValue::Bool(b) => b.to_string(),
        OptionValue::Map(_) => String::new(),
    }
}

fn keyspace_options(
    options: &Options,
    current: Option<&Arc<KeyspaceMeta>>,
) -> CqlResult<(BTreeMap<String, String>, bool)> {
    let mut replication = current.map(|k| k.replication.clone());
    let mut durable_writes = current.is_none_or(|k| k.durable_writes);
    for (name, value) in options {
        match (name.to_ascii_lowercase().as_str(), value) {
            ("replication", OptionValue::Map(entries)) => {
                let map = replication_map(entries)?;
                // ALTER KEYSPACE must say where the replicas go (Cassandra's
                // and ScyllaDB's check; CREATE lets the strategy default).
                if current.is_some()
                    && map.len() == 1
                    && map.get("class").is_some_and(|c| c.ends_with(".NetworkTopologyStrategy"))
                {
                    return Err(CqlError::Config(
                        "Configuration for at least one datacenter must be present".to_string(),
                    ));
                }
                replication = Some(map)
            }
            ("storage", OptionValue::Map(entries)) => check_storage_options(entries)?,
            ("tablets", OptionValue::Map(entries)) => check_tablets_options(entries)?,
            ("durable_writes", OptionValue::Bool(b)) => durable_writes = *b,
            ("durable_writes", v) => durable_writes = option_text(v).eq_ignore_ascii_case("true"),
            (other, _) => return Err(CqlError::Syntax(format!("Unknown property '{other}'"))),
        }
    }
    let replication =
        replication.ok_or_else(|| CqlError::Config("Missing mandatory option 'replication'".to_string()))?;
    Ok((replication, durable_writes))
}

/// `STORAGE = {'type': 'LOCAL'}`, ScyllaDB's keyspace storage option: local
/// storage is all there is here (ScyllaDB's texts for the rest).
fn check_storage_options(entries: &[(String, String)]) -> CqlResult<()> {
    let kind = entries.iter().find(|(key, _)| key == "type").map(|(_, value)| value.as_str());
    match kind {
        None | Some("LOCAL") if entries.iter().all(|(key, _)| key == "type") => Ok(()),
        None | Some("LOCAL") => Err(invalid("Local storage does not accept any custom options")),
        Some(other) => Err(invalid(format!("Unknown storage type: {other}"))),
    }
}

/// ScyllaDB's `tablets = {'enabled': false}`: vnode-style token ranges are
/// all there is here, so scripts that ask for them run; asking for tablets
/// is refused.
fn check_tablets_options(entries: &[(String, String)]) -> CqlResult<()> {
    match entries.iter().find(|(key, _)| key == "enabled").map(|(_, value)| value.to_ascii_lowercase()) {
        Some(enabled) if enabled == "false" && entries.len() == 1 => Ok(()),
        _ => Err(CqlError::Config(
            "Tablets are not supported: omit the tablets option or set tablets = {'enabled': false}".to_string(),
        )),
    }
}

/// The replication options as stored; which strategies exist and what
/// they require is the cluster's to say.
fn replication_map(entries: &[(String, String)]) -> CqlResult<BTreeMap<String, String>> {
    shoal_coordinator::cluster::replication_options(entries).map_err(|e| CqlError::Config(e.0))
}

fn new_column(id: u32, def: &ColumnDef, kind: ColumnKind, position: i32) -> ColumnMeta {
    ColumnMeta { id, name: def.name.clone(), ty: def.ty.clone(), kind, position, order: ClusteringOrder::Asc }
}

pub fn create_table(keyspace: &str, s: &CreateTable) -> CqlResult<TableMeta> {
    if s.multiple_primary_keys {
        return Err(invalid("Multiple PRIMARY KEYs specified (exactly one required)"));
    }
    if s.partition_key.is_empty() {
        return Err(invalid("No PRIMARY KEY specified (exactly one required)"));
    }
    let mut columns: Vec<ColumnMeta> = Vec::new();
    for (id, def) in s.columns.iter().enumerate() {
        if columns.iter().any(|c| c.name == def.name) {
            return Err(invalid(format!("Multiple definition of identifier {}", def.name)));
        }
        let pk = s.partition_key.iter().position(|n| n == &def.name);
        let ck = s.clustering_key.iter().position(|n| n == &def.name);
        let (kind, position) = match (pk, ck) {
            (Some(p), _) => (ColumnKind::PartitionKey, p as i32),
            (None, Some(c)) => (ColumnKind::Clustering, c as i32),
            (None, None) if def.is_static => (ColumnKind::Static, -1),
            (None, None) => (ColumnKind::Regular, -1),
        };
        let def = checked_column(def, kind)?;
        columns.push(new_column(id as u32, &def, kind, position));
    }
    for name in s.partition_key.iter().chain(&s.clustering_key) {
        if !columns.iter().any(|c| &c.name == name) {
            return Err(invalid(format!("Unknown definition {name} referenced in PRIMARY KEY")));
        }
    }
    if s.compact_storage {
        if !crate::live_config::compact_storage_allowed() {
            // ScyllaDB's text.
            return Err(invalid(
                "Support for the deprecated feature of 'CREATE TABLE WITH COMPACT STORAGE' is disabled and will \
                 eventually be removed in a future version.  To enable, set the \
                 'enable_create_table_with_compact_storage' config option to 'true'.",
            ));
        }
        check_compact_storage(&columns)?;
    }
    if s.clustering_key.is_empty() && columns.iter().any(|c| c.kind == ColumnKind::Static) {
        return Err(invalid(
            "Static columns are only useful (and thus allowed) if the table has at least one clustering column",
        ));
    }
    apply_clustering_order(&mut columns, &s.clustering_key, &s.clustering_order)?;
    let (mut options, id) = table_options(&s.options, TableOptions::default())?;
    options.compact_storage = s.compact_storage;
    let next_column_id = columns.len() as u32;
    let mut table = TableMeta {
        id: id.unwrap_or_else(Uuid::new_v4),
        keyspace: keyspace.to_string(),
        name: s.name.clone(),
        columns,
        options,
        next_column_id,
        indexes: Vec::new(),
        view_of: None,
        materialized: None,
        dropped_columns: Default::default(),
    };
    table.normalize_columns();
    check_counter_table(&table)?;
    Ok(table)
}

/// ScyllaDB's rules for a COMPACT STORAGE table's columns, in its order:
/// no non-frozen collection or user type, something besides the key
/// without clustering columns, no static column, and at most one regular
/// column with them.
fn check_compact_storage(columns: &[ColumnMeta]) -> CqlResult<()> {
    let rest: Vec<&ColumnMeta> = columns.iter().filter(|c| !c.kind.is_primary_key()).collect();
    let dense = columns.iter().any(|c| c.kind == ColumnKind::Clustering);
    if !dense && rest.is_empty() {
        return Err(invalid("No definition found that is not part of the PRIMARY KEY"));
    }
    if rest.iter().any(|c| c.ty.is_multi_cell()) {
        return Err(invalid("Non-frozen collections and UDTs are not supported with COMPACT STORAGE"));
    }
    if rest.iter().any(|c| c.kind == ColumnKind::Static) {
        return Err(invalid("Static columns are not supported in COMPACT STORAGE tables"));
    }
    if dense && rest.len() > 1 {
        let mut names: Vec<&str> = rest.iter().map(|c| c.name.as_str()).collect();
        names.sort_unstable();
        return Err(invalid(format!(
            "COMPACT STORAGE with composite PRIMARY KEY allows no more than one column not part of the PRIMARY KEY (got: {})",
            names.join(", ")
        )));
    }
    Ok(())
}

/// The column with its type as stored: tuples, and collections inside other
/// types, are frozen (as Cassandra stores and shows them).
fn checked_column(def: &ColumnDef, kind: ColumnKind) -> CqlResult<ColumnDef> {
    check_column_type(def, kind)?;
    Ok(ColumnDef { ty: stored_type(&def.ty)?, ..def.clone() })
}

/// A column's or user type field's type as stored and shown: non-frozen
/// at the top as declared, frozen inside.
pub(crate) fn stored_type(ty: &CqlType) -> CqlResult<CqlType> {
    check_vectors(ty)?;
    Ok(match ty {
        CqlType::List(e) => CqlType::List(Box::new(nested(e, ty)?)),
        CqlType::Set(e) => CqlType::Set(Box::new(nested(e, ty)?)),
        CqlType::Map(k, v) => CqlType::Map(Box::new(nested(k, ty)?), Box::new(nested(v, ty)?)),
        // A non-frozen user type is stored whole too, but keeps its
        // declared form, which drivers see in system_schema.columns.
        CqlType::Udt(_) => ty.clone(),
        other => frozen_inside(other),
    })
}

/// An element type of a non-frozen collection: must itself be frozen if it
/// is a collection.
fn nested(element: &CqlType, outer: &CqlType) -> CqlResult<CqlType> {
    if element.is_multi_cell() {
        return Err(invalid(format!("Non-frozen collections are not allowed inside collections: {outer}")));
    }
    if matches!(element, CqlType::Udt(_)) {
        // ScyllaDB names the user type with its keyspace here.
        let shown = |t: &CqlType| match t {
            CqlType::Udt(udt) => format!("{}.{}", udt.keyspace, udt.name),
            other => other.to_string(),
        };
        let outer = match outer {
            CqlType::List(e) => format!("list<{}>", shown(e)),
            CqlType::Set(e) => format!("set<{}>", shown(e)),
            CqlType::Map(k, v) => format!("map<{}, {}>", shown(k), shown(v)),
            other => other.to_string(),
        };
        return Err(invalid(format!("Non-frozen UDTs are not allowed inside collections: {outer}")));
    }
    Ok(frozen_inside(element))
}

/// Every vector in `ty` has a dimension in 1..=MAX_VECTOR_DIMENSION and
/// elements that are not counters, and `frozen<>` wraps only collections,
/// tuples and user types (ScyllaDB's messages).
fn check_vectors(ty: &CqlType) -> CqlResult<()> {
    match ty {
        CqlType::Vector(elem, dimension) => {
            if *dimension == 0 {
                return Err(invalid("Vectors must have a dimension greater than 0"));
            }
            if *dimension > MAX_VECTOR_DIMENSION {
                return Err(invalid(format!(
                    "Vectors must have a dimension less than or equal to {MAX_VECTOR_DIMENSION}"
                )));
            }
            if elem.unfrozen().is_counter() {
                return Err(invalid(format!("Counters are not allowed inside vectors: {ty}")));
            }
            check_vectors(elem)
        }
        CqlType::Frozen(e) => match e.as_ref() {
            CqlType::List(_) | CqlType::Set(_) | CqlType::Map(..) | CqlType::Tuple(_) | CqlType::Udt(_) => {
                check_vectors(e)
            }
            _ => Err(invalid("frozen<> is only allowed on collections, tuples, and user-defined types")),
        },
        CqlType::List(e) | CqlType::Set(e) => check_vectors(e),
        CqlType::Map(k, v) => check_vectors(k).and_then(|()| check_vectors(v)),
        CqlType::Tuple(fields) => fields.iter().try_for_each(check_vectors),
        // A user type's fields were checked when it was defined.
        _ => Ok(()),
    }
}

/// Wraps every tuple, collection and user type at or below `ty` in
/// `frozen<...>` (a user type's own fields were checked when it was defined).
/// A vector is one cell already and prints bare, as in Cassandra, but its
/// elements are frozen.
fn frozen_inside(ty: &CqlType) -> CqlType {
    let inner = |t: &CqlType| Box::new(frozen_inside(t));
    match ty.unfrozen() {
        CqlType::List(e) => CqlType::Frozen(Box::new(CqlType::List(inner(e)))),
        CqlType::Set(e) => CqlType::Frozen(Box::new(CqlType::Set(inner(e)))),
        CqlType::Map(k, v) => CqlType::Frozen(Box::new(CqlType::Map(inner(k), inner(v)))),
        CqlType::Tuple(fields) => CqlType::Frozen(Box::new(CqlType::Tuple(fields.iter().map(frozen_inside).collect()))),
        udt @ CqlType::Udt(_) => CqlType::Frozen(Box::new(udt.clone())),
        CqlType::Vector(e, dimension) => CqlType::Vector(inner(e), *dimension),
        native => native.clone(),
    }
}

fn check_column_type(def: &ColumnDef, kind: ColumnKind) -> CqlResult<()> {
    if kind.is_primary_key() && def.ty.is_multi_cell() {
        return Err(invalid(format!(
            "Invalid non-frozen collection type {} for PRIMARY KEY component {}",
            def.ty, def.name
        )));
    }
    if kind.is_primary_key() && matches!(def.ty, CqlType::Udt(_)) {
        return Err(invalid(format!(
            "Invalid non-frozen user-defined type \"{}\" for PRIMARY KEY component {}",
            def.ty, def.name
        )));
    }
    if kind.is_primary_key() && def.is_static {
        return Err(invalid(format!("Static column {} cannot be part of the PRIMARY KEY", def.name)));
    }
    if kind.is_primary_key() && crate::durations::references_duration(&def.ty) {
        return Err(invalid(format!("duration type is not supported for PRIMARY KEY column '{}'", def.name)));
    }
    if kind.is_primary_key() && def.ty.is_counter() {
        return Err(invalid(format!("counter type is not supported for PRIMARY KEY column '{}'", def.name)));
    }
    if let CqlType::Udt(udt) = &def.ty {
        if udt.field_types().any(CqlType::is_multi_cell) {
            return Err(invalid("Non-frozen UDTs with nested non-frozen collections are not supported"));
        }
    }
    if contains_counter(&def.ty) && !def.ty.is_counter() {
        return Err(invalid(format!("Counters are not allowed inside collections: {}", def.ty)));
    }
    Ok(())
}

fn contains_counter(ty: &CqlType) -> bool {
    match ty.unfrozen() {
        CqlType::Counter => true,
        CqlType::List(e) | CqlType::Set(e) => contains_counter(e),
        CqlType::Map(k, v) => contains_counter(k) || contains_counter(v),
        CqlType::Tuple(fields) => fields.iter().any(contains_counter),
        _ => false,
    }
}

/// Whether the table holds counters: then every column outside the primary
/// key is a counter.
pub fn is_counter_table(table: &TableMeta) -> bool {
    table.columns.iter().any(|c| !c.kind.is_primary_key() && c.ty.is_counter())
}

/// Cassandra's rules for counter tables: counters only, and no TTL.
fn check_counter_table(table: &TableMeta) -> CqlResult<()> {
    if !is_counter_table(table) {
        return Ok(());
    }
    if table.columns.iter().any(|c| !c.kind.is_primary_key() && !c.ty.is_counter()) {
        return Err(invalid("Cannot mix counter and non counter columns in the same table"));
    }
    if table.options.default_time_to_live_s > 0 {
        return Err(invalid("Cannot set default_time_to_live on a table with counters"));
    }
    Ok(())
}

fn apply_clustering_order(
    columns: &mut [ColumnMeta],
    clustering: &[String],
    order: &[(String, Order)],
) -> CqlResult<()> {
    // ScyllaDB's checks, in its order: the directive names the clustering
    // columns, a prefix of them, in key order.
    if order.len() > clustering.len() {
        return Err(invalid("Only clustering key columns can be defined in CLUSTERING ORDER directive"));
    }
    for ((name, direction), expected) in order.iter().zip(clustering) {
        if name != expected {
            return Err(invalid(match order.iter().any(|(named, _)| named == expected) {
                true => format!("The order of columns in the CLUSTERING ORDER directive must be the one of the clustering key ({expected} must appear before {name})"),
                false => format!("Missing CLUSTERING ORDER for column {expected}"),
            }));
        }
        if let Some(column) = columns.iter_mut().find(|c| &c.name == name) {
            column.order = if *direction == Order::Desc { ClusteringOrder::Desc } else { ClusteringOrder::Asc };
        }
    }
    Ok(())
}

/// Table options over `base`; also returns a table id given as `id = ...`
/// (how the schema file keeps ids across restarts).
pub fn table_options(options: &Options, mut base: TableOptions) -> CqlResult<(TableOptions, Option<Uuid>)> {
    let mut id = None;
    for (name, value) in options {
        let text = option_text(value);
        let number = |what: &str| -> CqlResult<i32> {
            text.parse().map_err(|_| CqlError::Syntax(format!("Invalid value for {what}: {text}")))
        };
        let float = |what: &str| -> CqlResult<f64> {
            text.parse().map_err(|_| CqlError::Syntax(format!("Invalid value for {what}: {text}")))
        };
        let boolean = |what: &str| -> CqlResult<bool> {
            match text.to_ascii_lowercase().as_str() {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(CqlError::Syntax(format!("Invalid value for {what}: {text} (true or false)"))),
            }
        };
        match (name.to_ascii_lowercase().as_str(), value) {
            ("comment", _) => base.comment = text,
            ("default_time_to_live", _) => base.default_time_to_live_s = number("default_time_to_live")?,
            ("gc_grace_seconds", _) => base.gc_grace_seconds = number("gc_grace_seconds")?,
            ("bloom_filter_fp_chance", _) => {
                let chance = float("bloom_filter_fp_chance")?;
                // The least a Bloom filter of at most 20 hashes per key can
                // promise (Cassandra's and ScyllaDB's bound, and their text).
                if !(chance > 6.71e-5 && chance <= 1.0) {
                    return Err(CqlError::Config(format!(
                        "bloom_filter_fp_chance must be larger than 6.71e-05 and less than or equal to 1.0 (got {chance})"
                    )));
                }
                base.bloom_filter_fp_chance = chance
            }
            ("crc_check_chance", _) => base.crc_check_chance = float("crc_check_chance")?,
            ("memtable_flush_period_in_ms", _) => {
                base.memtable_flush_period_in_ms = number("memtable_flush_period_in_ms")?
            }
            ("min_index_interval", _) => base.min_index_interval = number("min_index_interval")?,
            ("max_index_interval", _) => base.max_index_interval = number("max_index_interval")?,
            ("speculative_retry", _) => {
                speculative_retry(&text)?;
                base.speculative_retry = text
            }
            ("in_memory", _) => base.in_memory = boolean("in_memory")?,
            ("caching", OptionValue::Map(m)) => base.caching = m.iter().cloned().collect(),
            ("compaction", OptionValue::Map(m)) => base.compaction = crate::compaction_options::validated(m)?,
            ("compression", OptionValue::Map(m)) => base.compression = compression_options(m)?,
            ("id", _) => {
                // ScyllaDB's class: a configuration error.
                id = Some(Uuid::parse_str(&text).map_err(|_| CqlError::Config(format!("Invalid table id {text}")))?)
            }
            // ScyllaDB's: kept and shown (DESCRIBE recreates them), not
            // acted on, as tombstones here are purged by gc_grace_seconds
            // alone and view updates are always synchronous.
            ("tombstone_gc", OptionValue::Map(m)) => base.tombstone_gc = Some(m.iter().cloned().collect()),
            ("paxos_grace_seconds", _) => base.paxos_grace_seconds = Some(number("paxos_grace_seconds")?),
            ("synchronous_updates", _) => base.synchronous_updates = Some(boolean("synchronous_updates")?),
            ("cdc", OptionValue::Map(m)) => base.cdc = cdc::options(m)?,
            // Accepted and ignored, so scripts and DESCRIBE output of
            // Cassandra 3 to 5 run unchanged.
            (
                "read_repair_chance"
                | "dclocal_read_repair_chance"
                | "additional_write_policy"
                | "extensions"
                | "read_repair"
                | "memtable"
                | "allow_auto_snapshot"
                | "incremental_backups",
                _,
            ) => {}
            (other, _) => return Err(CqlError::Syntax(format!("Unknown property '{other}'"))),
        }
    }
    if base.default_time_to_live_s < 0 {
        return Err(invalid("default_time_to_live must be greater than or equal to 0"));
    }
    // ScyllaDB's checks and texts (cf_prop_defs::validate), on the result,
    // so an ALTER that moves one bound is checked against the other.
    if base.min_index_interval < 1 {
        return Err(CqlError::Config("min_index_interval must be greater than 0".into()));
    }
    if base.max_index_interval < base.min_index_interval {
        return Err(CqlError::Config("max_index_interval must be greater than min_index_interval".into()));
    }
    Ok((base, id))
}

/// The `compression` map, refusing sub-options no compressor knows, as
/// ScyllaDB's `compression_parameters::validate_options` does (its keys,
/// Cassandra 3+'s `class`, `enabled` and `min_compress_ratio`, and zstd's
/// `compression_level`).
fn compression_options(entries: &[(String, String)]) -> CqlResult<BTreeMap<String, String>> {
    const KNOWN: [&str; 8] = [
        "sstable_compression",
        "class",
        "chunk_length_in_kb",
        "chunk_length_kb",
        "crc_check_chance",
        "enabled",
        "min_compress_ratio",
        "compression_level",
    ];
    if let Some((key, _)) = entries.iter().find(|(key, _)| !KNOWN.contains(&key.as_str())) {
        return Err(CqlError::Config(format!("Unknown compression option '{key}'.")));
    }
    // ScyllaDB's `compression_parameters` parsing (a syntax error) then
    // `validate` (configuration errors), with its texts; a chunk of more
    // than 128 KiB would make every read allocate that much (its #9933).
    let chunk = entries.iter().find(|(key, _)| key == "chunk_length_in_kb" || key == "chunk_length_kb");
    if let Some((key, value)) = chunk {
        let kb: i64 =
            value.parse().map_err(|_| CqlError::Syntax(format!("Invalid integer value {value} for {key}")))?;
        if kb <= 0 {
            return Err(CqlError::Config("Invalid negative or null for chunk_length_in_kb/chunk_length_kb".into()));
        }
        if kb & (kb - 1) != 0 {
            return Err(CqlError::Config("chunk_length_in_kb/chunk_length_kb must be a power of 2.".into()));
        }
        if kb > 128 {
            return Err(CqlError::Config("chunk_length_in_kb/chunk_length_kb must be 128 or less.".into()));
        }
    }
    if let Some((_, value)) = entries.iter().find(|(key, _)| key == "crc_check_chance") {
        let chance: f64 =
            value.parse().map_err(|_| CqlError::Syntax(format!("Invalid double value {value}for crc_check_chance")))?;
        if !(0.0..=1.0).contains(&chance) {
            return Err(CqlError::Config("crc_check_chance must be between 0.0 and 1.0.".into()));
        }
    }
    Ok(entries.iter().cloned().collect())
}

/// Checks a `speculative_retry` value as ScyllaDB's
/// `speculative_retry::from_sstring` does: `NONE`, `ALWAYS`, `<x>MS` or
/// `<p>PERCENTILE` with `p` in [0, 100], in any case; its texts, quoting the
/// value upper-cased as it does.
fn speculative_retry(text: &str) -> CqlResult<()> {
    let upper = text.to_ascii_uppercase();
    let cannot = || CqlError::Config(format!("cannot convert {upper} to speculative_retry"));
    if upper == "NONE" || upper == "ALWAYS" {
        return Ok(());
    }
    if let Some(ms) = upper.strip_suffix("MS") {
        return ms.parse::<f64>().map(|_| ()).map_err(|_| cannot());
    }
    let percentile = upper.strip_suffix("PERCENTILE").ok_or_else(cannot)?.parse::<f64>().map_err(|_| cannot())?;
    if !(0.0..=100.0).contains(&percentile) {
        return Err(CqlError::Config(format!(
            "Invalid value {upper} for PERCENTILE option 'speculative_retry': must be between (0.0 and 100.0)"
        )));
    }
    Ok(())
}

fn alter_table(current: &TableMeta, op: &AlterTableOp) -> CqlResult<TableMeta> {
    let mut table = current.clone();
    match op {
        AlterTableOp::Add(defs) => {
            if table.is_dense() {
                return Err(invalid("Cannot add new column to a COMPACT STORAGE table"));
            }
            for def in defs {
                if table.options.compact_storage && def.is_static {
                    return Err(invalid("Static columns are not allowed in COMPACT STORAGE tables"));
                }
                if table.options.compact_storage && def.ty.is_multi_cell() {
                    return Err(invalid("Cannot use non-frozen collections in COMPACT STORAGE tables"));
                }
                if let Some(existing) = table.column(&def.name) {
                    let what = match existing.kind {
                        ColumnKind::PartitionKey => "a PRIMARY KEY part",
                        _ => "an existing column",
                    };
                    return Err(invalid(format!("Invalid column name {} because it conflicts with {what}", def.name)));
                }
                if def.is_static && table.clustering_key_len() == 0 {
                    return Err(invalid("Static columns are only useful (and thus allowed) if the table has at least one clustering column"));
                }
                let kind = if def.is_static { ColumnKind::Static } else { ColumnKind::Regular };
                let readded_id = dropped_columns::readd(&table, &def.name, &def.ty, kind)?;
                let def = checked_column(def, kind)?;
                let has_regular = table.columns.iter().any(|c| !c.kind.is_primary_key());
                if has_regular && is_counter_table(&table) != def.ty.is_counter() {
                    return Err(invalid(match def.ty.is_counter() {
                        true => format!("Cannot add a counter column ({}) in a non counter column family", def.name),
                        false => format!("Cannot add a non counter column ({}) in a counter column family", def.name),
                    }));
                }
                let id = readded_id.unwrap_or_else(|| {
                    table.next_column_id += 1;
                    table.next_column_id - 1
                });
                table.columns.push(new_column(id, &def, kind, -1));
            }
        }
        AlterTableOp::Drop { columns, timestamp, .. } => {
            if table.options.compact_storage {
                return Err(invalid("Cannot drop columns from a non-CQL3 table"));
            }
            let at_us = timestamp
                .ok_or_else(|| CqlError::Server("a column drop reached the schema without its time".into()))?;
            for name in columns {
                let column = table
                    .column(name)
                    .ok_or_else(|| invalid(format!("Column {name} was not found in table {}", table.name)))?;
                if column.kind.is_primary_key() {
                    return Err(invalid(format!("Cannot drop PRIMARY KEY part {name}")));
                }
                index_ddl::check_column_drop(&table, name)?;
                let column = column.clone();
                dropped_columns::record(&mut table, &column, at_us);
                table.columns.retain(|c| &c.name != name);
            }
        }
        AlterTableOp::Rename(pairs) => {
            for (from, to) in pairs {
                if table.column(to).is_some() {
                    return Err(invalid(format!(
                        "Cannot rename column {from} to {to} in table {}; another column of that name already exist",
                        table.name
                    )));
                }
                let column = table
                    .columns
                    .iter_mut()
                    .find(|c| &c.name == from)
                    .ok_or_else(|| invalid(format!("Column {from} was not found in table {}", current.name)))?;
                if !column.kind.is_primary_key() {
                    return Err(invalid(format!("Cannot rename non PRIMARY KEY column {from}")));
                }
                column.name = to.clone();
            }
        }
        AlterTableOp::With(options) => {
            let (options, id) = table_options(options, table.options.clone())?;
            if id.is_some() {
                return Err(CqlError::Config("Cannot update table id".to_string()));
            }
            table.options = options;
        }
        AlterTableOp::AlterType { .. } => return Err(invalid("Altering column types is no longer supported")),
    }
    table.normalize_columns();
    check_counter_table(&table)?;
    Ok(table)
}
