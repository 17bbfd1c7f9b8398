//! CREATE INDEX and DROP INDEX: from the current schema to the next, with
//! Cassandra's checks and texts. An index is an entry of its base table's
//! `indexes` and a hidden table holding it ([`shoal_schema::index`]), both
//! added or removed together.

use std::sync::Arc;

use shoal_schema::index::{self, view_table};
use shoal_schema::{ColumnKind, CqlType, IndexKind, IndexMeta, KeyspaceMeta, Schema, TableMeta, TableOptions};
use uuid::Uuid;

use crate::ast::{CreateIndex, DropIndex};
use crate::error::{invalid, CqlResult};

/// Adds the index `s` asks for to `schema`; `false` when `IF NOT EXISTS`
/// found it there. Returns the base table's name.
pub fn create(schema: &mut Schema, keyspace: &str, s: &CreateIndex) -> CqlResult<Option<String>> {
    if let Some(class) = &s.custom_class {
        return Err(invalid(format!("Custom index class '{class}' is not supported: create a global secondary index (CREATE INDEX without CUSTOM ... USING)")));
    }
    let ks = schema.keyspace(keyspace).ok_or_else(|| invalid(format!("Keyspace '{keyspace}' doesn't exist")))?;
    let base = ks.tables.get(&s.table).ok_or_else(|| invalid(format!("Table '{}' doesn't exist", s.table)))?;
    if let Some(name) = &s.name {
        if let Some((table, index)) = find(ks, name) {
            // IF NOT EXISTS forgives only the same index: a name taken
            // by another column's index is still an error (ScyllaDB's).
            let same = table.name == s.table && index.column == s.target.column && index.kind == s.target.kind;
            return match s.if_not_exists && same {
                true => Ok(None),
                false => Err(invalid(format!("Index '{name}' already exists"))),
            };
        }
    }
    if base.view_of.is_some() {
        return Err(invalid("Secondary indexes on materialized views aren't supported"));
    }
    if crate::ddl::is_counter_table(base) {
        return Err(invalid("Secondary indexes on counter tables aren't supported"));
    }
    if base.is_dense() {
        return Err(invalid(
            "Secondary indexes are not supported on COMPACT STORAGE tables that have clustering columns",
        ));
    }
    let kind = check_target(base, s)?;
    let local = match &s.target.local_key {
        None => false,
        Some(columns) => {
            let pk: Vec<&str> = base.partition_key().map(|c| c.name.as_str()).collect();
            if columns.iter().map(String::as_str).ne(pk.iter().copied()) {
                return Err(invalid(format!(
                    "Local index definition must contain full partition key only. Redundant column: {}",
                    columns.iter().find(|c| !pk.contains(&c.as_str())).map_or("(none)", String::as_str)
                )));
            }
            true
        }
    };
    let name = match &s.name {
        Some(name) => name.clone(),
        None => available_name(ks, &s.table, &s.target.column),
    };
    crate::ddl::check_name(&name, "Index")?;
    if ks.tables.contains_key(&index::view_name(&name)) {
        return Err(invalid(format!(
            "Index '{name}' cannot be created: table '{}' already exists",
            index::view_name(&name)
        )));
    }
    // ScyllaDB's: options of the table holding the index, as a view's.
    let (options, id) = crate::ddl::table_options(&s.options, TableOptions::default())?;
    if options.default_time_to_live_s != 0 {
        return Err(invalid("Cannot set default_time_to_live for a materialized view. Data in a materialized view always expire at the same time than the corresponding data in the parent table."));
    }
    let meta = IndexMeta {
        name: name.clone(),
        column: s.target.column.clone(),
        kind,
        local,
        view_id: s.view_id.or(id).unwrap_or_else(Uuid::new_v4),
    };
    crate::ddl::check_unused_id(schema, meta.view_id)?;
    if let Some(same) = base.indexes.iter().find(|i| (&i.column, i.kind, i.local) == (&meta.column, kind, local)) {
        return match s.if_not_exists {
            true => Ok(None),
            false => Err(invalid(format!("Index {name} is a duplicate of existing index {}", same.name))),
        };
    }
    let mut base = base.as_ref().clone();
    let mut view = view_table(&base, &meta);
    view.options = options;
    base.indexes.push(meta);
    base.indexes.sort_by(|a, b| a.name.cmp(&b.name));
    let mut ks = ks.as_ref().clone();
    let base_name = base.name.clone();
    ks.tables.insert(view.name.clone(), Arc::new(view));
    ks.tables.insert(base_name.clone(), Arc::new(base));
    schema.keyspaces.insert(ks.name.clone(), Arc::new(ks));
    Ok(Some(base_name))
}

/// Removes index `s.name` from `schema`; `None` when `IF EXISTS` did not
/// find it. Returns the base table's name.
pub fn drop(schema: &mut Schema, keyspace: &str, s: &DropIndex) -> CqlResult<Option<String>> {
    let found = schema.keyspace(keyspace).and_then(|ks| find(ks, &s.name).map(|(base, _)| (ks, base)));
    let Some((ks, base)) = found else {
        return match s.if_exists {
            true => Ok(None),
            false => Err(invalid(format!("Index '{keyspace}.{}' doesn't exist", s.name))),
        };
    };
    let mut base = base.as_ref().clone();
    base.indexes.retain(|i| i.name != s.name);
    let mut ks = ks.as_ref().clone();
    ks.tables.remove(&index::view_name(&s.name));
    let base_name = base.name.clone();
    ks.tables.insert(base_name.clone(), Arc::new(base));
    schema.keyspaces.insert(ks.name.clone(), Arc::new(ks));
    Ok(Some(base_name))
}

/// Removes the tables holding `table`'s indexes (the table is dropped).
pub fn drop_views_of(keyspace: &mut KeyspaceMeta, table: &TableMeta) {
    for index in &table.indexes {
        keyspace.tables.remove(&index.view_name());
    }
}

/// The index named `name` in `keyspace`, with its base table.
pub fn find<'a>(keyspace: &'a KeyspaceMeta, name: &str) -> Option<(&'a Arc<TableMeta>, &'a IndexMeta)> {
    keyspace.tables.values().find_map(|t| t.indexes.iter().find(|i| i.name == name).map(|i| (t, i)))
}

/// Refuses dropping a column an index covers (Cassandra's text).
pub fn check_column_drop(table: &TableMeta, column: &str) -> CqlResult<()> {
    let dependent: Vec<&str> = table.indexes.iter().filter(|i| i.column == column).map(|i| i.name.as_str()).collect();
    if dependent.is_empty() {
        return Ok(());
    }
    Err(invalid(format!(
        "Cannot drop column {column} because it has dependent secondary indexes ({})",
        dependent.join(", ")
    )))
}

/// Cassandra's default name, `<table>_<column>_idx`, made unique in the
/// keyspace with `_1`, `_2`, ...
fn available_name(keyspace: &KeyspaceMeta, table: &str, column: &str) -> String {
    let base: String =
        format!("{table}_{column}_idx").chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    let taken = |name: &str| find(keyspace, name).is_some() || keyspace.tables.contains_key(&index::view_name(name));
    if !taken(&base) {
        return base;
    }
    (1..).map(|i| format!("{base}_{i}")).find(|name| !taken(name)).unwrap_or(base)
}

/// The index kind the target asks for, once it is checked against the
/// column (Cassandra's rules and texts).
fn check_target(base: &TableMeta, s: &CreateIndex) -> CqlResult<IndexKind> {
    let name = &s.target.column;
    let column = base.column(name).ok_or_else(|| invalid(format!("Column '{name}' doesn't exist")))?;
    if crate::durations::references_duration(&column.ty) {
        let what = crate::durations::duration_holder(&column.ty);
        return Err(invalid(format!("Secondary indexes are not supported on {what}")));
    }
    if base.options.compact_storage && column.kind.is_primary_key() {
        return Err(invalid("Secondary indexes are not supported on PRIMARY KEY columns in COMPACT STORAGE tables"));
    }
    if column.kind == ColumnKind::PartitionKey && base.partition_key_len() == 1 && s.target.local_key.is_none() {
        return Err(invalid(format!("Cannot create secondary index on the only partition key column {name}")));
    }
    let kind = s.target.kind;
    let type_name = |kind: IndexKind| match kind {
        IndexKind::Values => "values",
        IndexKind::Keys => "keys",
        IndexKind::Entries => "entries",
        IndexKind::Full => "full",
    };
    let frozen_collection = matches!(&column.ty, CqlType::Frozen(inner) if matches!(inner.as_ref(), CqlType::List(_) | CqlType::Set(_) | CqlType::Map(..)));
    if frozen_collection && kind != IndexKind::Full {
        return Err(invalid(format!("Cannot create {}() index on frozen column {name}. Frozen collections are immutable and must be fully indexed by using the 'full({name})' modifier", type_name(kind))));
    }
    if !frozen_collection && kind == IndexKind::Full {
        return Err(invalid("full() indexes can only be created on frozen collections"));
    }
    let collection = matches!(column.ty.unfrozen(), CqlType::List(_) | CqlType::Set(_) | CqlType::Map(..));
    if !collection && (kind != IndexKind::Values || s.target.kind_named) {
        return Err(invalid(format!(
            "Cannot create {}() index on {name}. Non-collection columns only support simple indexes",
            type_name(kind)
        )));
    }
    let map = matches!(column.ty, CqlType::Map(..));
    if !map && matches!(kind, IndexKind::Keys | IndexKind::Entries) {
        return Err(invalid(format!("Cannot create index on {} of column {name} with non-map type", type_name(kind))));
    }
    if matches!(column.ty, CqlType::Udt(_)) {
        return Err(invalid(format!("Cannot create index on non-frozen UDT column {name}")));
    }
    if s.target.local_key.is_some() && column.kind == ColumnKind::Static {
        return Err(invalid("Local indexes containing static columns are not supported"));
    }
    if s.target.local_key.is_some() && (column.kind.is_primary_key() || column.ty.is_multi_cell()) {
        return Err(invalid(format!(
            "Local index on {name}: only a regular or static column of a simple type can be indexed locally"
        )));
    }
    Ok(kind)
}
