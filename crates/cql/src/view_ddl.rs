//! CREATE, ALTER and DROP MATERIALIZED VIEW, and what changes to a base
//! table do to its views: from the current schema to the next, with
//! Cassandra's checks and texts. A view is a table of its keyspace whose
//! `materialized` definition names its base ([`shoal_schema::view`]).

use std::sync::Arc;

use bytes::Bytes;
use shoal_schema::index::LIVENESS_COLUMN;
use shoal_schema::view::{views_of, Comparison, MaterializedView, ViewRestriction};
use shoal_schema::{ClusteringOrder, ColumnKind, ColumnMeta, CqlType, KeyspaceMeta, Schema, TableMeta, TableOptions};
use uuid::Uuid;

use crate::ast::{AlterView, CreateView, DropView, InValues, Operator, Order, Relation, SelectorExpr, Term};
use crate::describe::maybe_quote;
use crate::error::{invalid, CqlError, CqlResult};
use crate::values::{Bindings, Receiver};

/// Adds the view `s` asks for to `schema`; `false` when `IF NOT EXISTS`
/// found it there.
pub fn create(schema: &mut Schema, keyspace: &str, s: &CreateView) -> CqlResult<bool> {
    if s.base_keyspace.as_deref().is_some_and(|base| base != keyspace) {
        return Err(invalid("Cannot create a materialized view on a table in a separate keyspace"));
    }
    let ks = schema.keyspace(keyspace).ok_or_else(|| invalid(format!("Keyspace '{keyspace}' doesn't exist")))?;
    let base = ks.tables.get(&s.base).ok_or_else(|| invalid(format!("Base table '{}' doesn't exist", s.base)))?;
    if let Some(existing) = ks.tables.get(&s.name) {
        if existing.materialized.is_none() {
            return Err(invalid(format!(
                "Cannot create materialized view '{}' - a table with the same name already exists",
                s.name
            )));
        }
        if s.if_not_exists {
            return Ok(false);
        }
        return Err(CqlError::AlreadyExists {
            keyspace: keyspace.to_string(),
            table: s.name.clone(),
            message: format!("Cannot add already existing table \"{}\" to keyspace \"{keyspace}\"", s.name),
        });
    }
    crate::ddl::check_name(&s.name, "View")?;
    if s.compact_storage {
        return Err(invalid("Cannot use 'COMPACT STORAGE' when defining a materialized view"));
    }
    if crate::ddl::is_counter_table(base) {
        return Err(invalid("Materialized views are not supported on counter tables"));
    }
    if base.view_of.is_some() {
        return Err(invalid("Materialized views cannot be created against other materialized views"));
    }
    if base.options.gc_grace_seconds == 0 {
        return Err(invalid(format!("Cannot create materialized view '{}' for base table '{}' with gc_grace_seconds of 0, since this value is used to TTL undelivered updates. Setting gc_grace_seconds too low might cause undelivered updates to expire before being replayed.", s.name, s.base)));
    }
    let selected = selected_columns(base, s)?;
    let key = check_primary_key(base, s, &selected)?;
    let (where_clause, filter) = check_where_clause(base, s, &key)?;
    if s.options.iter().any(|(name, _)| name.eq_ignore_ascii_case("default_time_to_live")) {
        return Err(invalid("Cannot set default_time_to_live for a materialized view. Data in a materialized view always expire at the same time than the corresponding data in the parent table."));
    }
    let (options, id) = crate::ddl::table_options(&s.options, TableOptions::default())?;
    let definition =
        MaterializedView { base_id: base.id, include_all_columns: s.selectors.is_empty(), where_clause, filter };
    let view = view_table(base, s, &selected, definition, options, id.unwrap_or_else(Uuid::new_v4));
    crate::ddl::check_unused_id(schema, view.id)?;
    let mut ks = ks.as_ref().clone();
    ks.tables.insert(view.name.clone(), Arc::new(view));
    schema.keyspaces.insert(ks.name.clone(), Arc::new(ks));
    Ok(true)
}

/// Changes view `s.name`'s options.
pub fn alter(schema: &mut Schema, keyspace: &str, s: &AlterView) -> CqlResult<()> {
    let view = find(schema, keyspace, &s.name)?
        .ok_or_else(|| invalid(format!("Materialized view '{keyspace}.{}' doesn't exist", s.name)))?;
    if s.options.iter().any(|(name, _)| name.eq_ignore_ascii_case("default_time_to_live")) {
        return Err(invalid("Cannot set or alter default_time_to_live for a materialized view. Data in a materialized view always expire at the same time than the corresponding data in the parent table."));
    }
    let (options, id) = crate::ddl::table_options(&s.options, view.options.clone())?;
    if id.is_some() {
        return Err(invalid("Cannot alter table id."));
    }
    let view = TableMeta { options, ..view.as_ref().clone() };
    put(schema, view);
    Ok(())
}

/// Removes view `s.name`; `false` when `IF EXISTS` did not find it.
pub fn drop(schema: &mut Schema, keyspace: &str, s: &DropView) -> CqlResult<bool> {
    if find(schema, keyspace, &s.name)?.is_none() {
        return match s.if_exists {
            true => Ok(false),
            false => Err(invalid(format!("Materialized view '{keyspace}.{}' doesn't exist", s.name))),
        };
    }
    let mut ks = schema.keyspaces[keyspace].as_ref().clone();
    ks.tables.remove(&s.name);
    schema.keyspaces.insert(ks.name.clone(), Arc::new(ks));
    Ok(true)
}

/// Refuses dropping a table its views still depend on (Cassandra's text).
pub fn check_table_drop(keyspace: &KeyspaceMeta, table: &TableMeta) -> CqlResult<()> {
    let views: Vec<&str> = views_of(keyspace, &table.name).map(|v| v.name.as_str()).collect();
    if views.is_empty() {
        return Ok(());
    }
    Err(invalid(format!(
        "Cannot drop a table when materialized views still depend on it ({}.{{{}}})",
        keyspace.name,
        views.join(", ")
    )))
}

/// Refuses dropping a base table's column that one of its views needs,
/// in ScyllaDB's words: a column the view holds, or any regular column
/// when the view's key has none of the base's regular columns, since then
/// every regular cell keeps a view row alive (ScyllaDB's virtual columns).
/// A column no view needs drops as in a table without views.
pub fn check_column_drop(keyspace: &KeyspaceMeta, table: &TableMeta, column: &str) -> CqlResult<()> {
    let regular = table.column(column).is_some_and(|c| c.kind == ColumnKind::Regular);
    let needs = |view: &TableMeta| {
        let keyed_by_regular = view
            .columns
            .iter()
            .filter(|c| c.kind.is_primary_key())
            .any(|c| table.column(&c.name).is_some_and(|b| b.kind == ColumnKind::Regular));
        view.column(column).is_some() || (regular && !keyed_by_regular)
    };
    match views_of(keyspace, &table.name).find(|view| needs(view)) {
        None => Ok(()),
        Some(view) => Err(invalid(format!(
            "Cannot drop column {column} from base table {}.{}: materialized view {} needs this column",
            keyspace.name, table.name, view.name
        ))),
    }
}

/// Refuses renaming a column of a base table with views (Cassandra's
/// text): the views would not follow.
pub fn check_column_rename(keyspace: &KeyspaceMeta, table: &TableMeta, column: &str) -> CqlResult<()> {
    match views_of(keyspace, &table.name).next() {
        None => Ok(()),
        Some(_) => {
            Err(invalid(format!("Cannot rename column {column} on base table {} with materialized views.", table.name)))
        }
    }
}

/// Refuses options a base table with views cannot take: a
/// `gc_grace_seconds` of 0 (Cassandra's text).
pub fn check_base_options(keyspace: &KeyspaceMeta, table: &TableMeta) -> CqlResult<()> {
    if table.options.gc_grace_seconds != 0 || views_of(keyspace, &table.name).next().is_none() {
        return Ok(());
    }
    Err(invalid("Cannot alter gc_grace_seconds of the base table of a materialized view to 0, since this value is used to TTL undelivered updates. Setting gc_grace_seconds too low might cause undelivered updates to expire before being replayed."))
}

/// Adds the columns `added` (just added to base table `base`) to its views
/// defined with `SELECT *`, as Cassandra does.
pub fn follow_added_columns(keyspace: &mut KeyspaceMeta, base: &TableMeta, added: &[String]) {
    let views: Vec<Arc<TableMeta>> = views_of(keyspace, &base.name)
        .filter(|v| v.materialized.as_ref().is_some_and(|m| m.include_all_columns))
        .cloned()
        .collect();
    for view in views {
        let mut view = view.as_ref().clone();
        for column in added.iter().filter_map(|name| base.column(name)) {
            view.columns.push(ColumnMeta {
                id: view.next_column_id,
                name: column.name.clone(),
                ty: column.ty.clone(),
                kind: ColumnKind::Regular,
                position: -1,
                order: ClusteringOrder::Asc,
            });
            view.next_column_id += 1;
        }
        view.normalize_columns();
        keyspace.tables.insert(view.name.clone(), Arc::new(view));
    }
}

/// The materialized view `name` in `keyspace`; `None` where there is none
/// (an error where the name is a table's).
fn find<'s>(schema: &'s Schema, keyspace: &str, name: &str) -> CqlResult<Option<&'s Arc<TableMeta>>> {
    let Some(table) = schema.table(keyspace, name) else { return Ok(None) };
    if table.materialized.is_none() {
        return Err(invalid(format!("Cannot use DROP MATERIALIZED VIEW or ALTER MATERIALIZED VIEW on table {name}")));
    }
    Ok(Some(table))
}

fn put(schema: &mut Schema, table: TableMeta) {
    let mut keyspace = schema.keyspaces[&table.keyspace].as_ref().clone();
    keyspace.tables.insert(table.name.clone(), Arc::new(table));
    schema.keyspaces.insert(keyspace.name.clone(), Arc::new(keyspace));
}

/// The base columns the view selects, in the base's order: those named,
/// and the view's key columns whether named or not (ScyllaDB's rule, and
/// Cassandra 3's: "all primary key columns are automatically included").
fn selected_columns<'b>(base: &'b TableMeta, s: &CreateView) -> CqlResult<Vec<&'b ColumnMeta>> {
    let mut names = Vec::new();
    for selector in &s.selectors {
        if let Some(alias) = &selector.alias {
            return Err(invalid(format!(
                "Cannot use aliases when defining a materialized view (got {} AS {alias})",
                selector.expr
            )));
        }
        let SelectorExpr::Column(name) = &selector.expr else {
            return Err(invalid(format!(
                "Can only select columns by name when defining a materialized view (got {})",
                selector.expr
            )));
        };
        if base.column(name).is_none() {
            return Err(invalid(format!("Undefined column name {name} in table {}.{}", base.keyspace, base.name)));
        }
        names.push(name.as_str());
    }
    let in_key = |name: &String| s.partition_key.contains(name) || s.clustering_key.contains(name);
    let selected: Vec<&ColumnMeta> = base
        .columns
        .iter()
        .filter(|c| s.selectors.is_empty() || names.contains(&c.name.as_str()) || in_key(&c.name))
        .collect();
    if let Some(column) = selected.iter().find(|c| c.kind == ColumnKind::Static) {
        return Err(invalid(format!(
            "Cannot include static column '{}' in materialized view '{}'",
            column.name, s.name
        )));
    }
    if let Some(column) = selected.iter().find(|c| c.name == LIVENESS_COLUMN) {
        return Err(invalid(format!(
            "Cannot include column '{}' in materialized view '{}': the name is reserved for the view's own use",
            column.name, s.name
        )));
    }
    Ok(selected)
}

/// Checks the view's PRIMARY KEY and CLUSTERING ORDER BY; returns the key's
/// columns.
fn check_primary_key<'s>(base: &TableMeta, s: &'s CreateView, selected: &[&ColumnMeta]) -> CqlResult<Vec<&'s str>> {
    if s.partition_key.is_empty() {
        return Err(invalid(format!(
            "Must provide at least one partition key column for materialized view '{}'",
            s.name
        )));
    }
    let mut key: Vec<&str> = Vec::new();
    for name in s.partition_key.iter().chain(&s.clustering_key) {
        let Some(column) = selected.iter().find(|c| &c.name == name) else {
            return Err(invalid(format!(
                "Unknown column '{name}' referenced in PRIMARY KEY for materialized view '{}'",
                s.name
            )));
        };
        if key.contains(&name.as_str()) {
            return Err(invalid(format!(
                "Duplicate column '{name}' in PRIMARY KEY clause for materialized view '{}'",
                s.name
            )));
        }
        match &column.ty {
            ty @ (CqlType::List(_) | CqlType::Set(_) | CqlType::Map(..)) => {
                return Err(invalid(format!(
                    "Invalid non-frozen collection type '{ty}' for PRIMARY KEY column '{name}'"
                )))
            }
            ty @ CqlType::Udt(_) => {
                return Err(invalid(format!(
                    "Invalid non-frozen user-defined type '{ty}' for PRIMARY KEY column '{name}'"
                )))
            }
            ty if ty.is_counter() => {
                return Err(invalid(format!("counter type is not supported for PRIMARY KEY column '{name}'")))
            }
            ty if crate::durations::references_duration(ty) => {
                return Err(invalid(format!("duration type is not supported for PRIMARY KEY column '{name}'")))
            }
            _ => {}
        }
        key.push(name);
    }
    let ordered: Vec<&String> = s.clustering_order.iter().map(|(name, _)| name).collect();
    if !ordered.is_empty() && !ordered.iter().copied().eq(s.clustering_key.iter()) {
        return Err(invalid("Clustering key columns must exactly match columns in CLUSTERING ORDER BY directive"));
    }
    let missing: Vec<&str> = base
        .columns
        .iter()
        .filter(|c| c.kind.is_primary_key() && !key.contains(&c.name.as_str()))
        .map(|c| c.name.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(invalid(format!(
            "Cannot create materialized view '{}' without primary key columns {} from base table '{}'",
            s.name,
            missing.join(", "),
            base.name
        )));
    }
    let regular: Vec<&str> =
        key.iter().copied().filter(|name| base.column(name).is_some_and(|c| !c.kind.is_primary_key())).collect();
    if regular.len() > 1 {
        return Err(invalid(format!(
            "Cannot include more than one non-primary key column in materialized view primary key (got {})",
            regular.join(", ")
        )));
    }
    Ok(key)
}

/// Checks the WHERE clause; returns it as CQL (as
/// `system_schema.views.where_clause` shows it) and its restrictions other
/// than `IS NOT NULL`. As ScyllaDB: base key columns may be restricted as a
/// SELECT with ALLOW FILTERING restricts them; a regular column only where
/// it is the view's key column and the only one restricted.
fn check_where_clause(base: &TableMeta, s: &CreateView, key: &[&str]) -> CqlResult<(String, Vec<ViewRestriction>)> {
    let mut restricted: Vec<&str> = Vec::new();
    let mut non_key: Vec<&str> = Vec::new();
    for relation in &s.where_clause {
        let columns: Vec<&String> = match relation {
            Relation::Token { .. } => {
                return Err(invalid("Cannot use token relation when defining a materialized view"));
            }
            Relation::IsNotNull { column } | Relation::Element { column, .. } => vec![column],
            Relation::Simple { column, .. } | Relation::In { column, .. } | Relation::NotIn { column, .. } => {
                vec![column]
            }
            Relation::MultiColumn { columns, .. } | Relation::MultiColumnIn { columns, .. } => columns.iter().collect(),
        };
        for column in &columns {
            let Some(meta) = base.column(column) else {
                return Err(invalid(format!("Undefined column name {column}")));
            };
            // `IS NOT NULL` on a column outside the view's key would be a
            // filter, which ScyllaDB refuses rather than ignore (#10365).
            let filtered = !matches!(relation, Relation::IsNotNull { .. }) || !key.contains(&column.as_str());
            if filtered && !meta.kind.is_primary_key() && !non_key.contains(&column.as_str()) {
                non_key.push(column);
            }
            restricted.push(column);
        }
    }
    let only_the_key_column = matches!(&non_key[..], [column] if key.contains(column));
    if !non_key.is_empty() && !only_the_key_column {
        return Err(invalid(format!(
            "Non-primary key columns cannot be restricted in the SELECT statement used for materialized view {} creation (got restrictions on: {})",
            s.name,
            non_key.join(", ")
        )));
    }
    let unrestricted: Vec<&str> = key.iter().copied().filter(|name| !restricted.contains(name)).collect();
    if !unrestricted.is_empty() {
        return Err(invalid(format!(
            "Primary key columns {} must be restricted with 'IS NOT NULL' or otherwise",
            unrestricted.join(", ")
        )));
    }
    let mut filter = Vec::new();
    for relation in &s.where_clause {
        filter.extend(restriction(base, relation)?);
    }
    let relations: Vec<String> = s.where_clause.iter().map(render_relation).collect();
    Ok((relations.join(" AND "), filter))
}

/// `relation` as a view's filter holds it; `None` for `IS NOT NULL`.
fn restriction(base: &TableMeta, relation: &Relation) -> CqlResult<Option<ViewRestriction>> {
    let one = |column: &String, term: &Term| -> CqlResult<Vec<Bytes>> { Ok(vec![filter_value(base, column, term)?]) };
    let tuple = |columns: &[String], term: &Term| -> CqlResult<Vec<Bytes>> {
        let Term::Tuple(items) = term else {
            return Err(invalid(format!("Expected a tuple of {} values, got {term}", columns.len())));
        };
        if items.len() != columns.len() {
            return Err(invalid(format!(
                "Expected {} elements in value tuple, but got {}: {term}",
                columns.len(),
                items.len()
            )));
        }
        columns.iter().zip(items).map(|(column, item)| filter_value(base, column, item)).collect()
    };
    let (columns, op, values) = match relation {
        Relation::IsNotNull { .. } => return Ok(None),
        Relation::Simple { column, op, value } => (vec![column.clone()], comparison(*op)?, vec![one(column, value)?]),
        Relation::In { column, values } => {
            let values = in_terms(values)?.iter().map(|t| one(column, t)).collect::<CqlResult<_>>()?;
            (vec![column.clone()], Comparison::In, values)
        }
        Relation::MultiColumn { columns, op, value } => {
            clustering_only(base, columns)?;
            (columns.clone(), comparison(*op)?, vec![tuple(columns, value)?])
        }
        Relation::MultiColumnIn { columns, values } => {
            clustering_only(base, columns)?;
            let values = in_terms(values)?.iter().map(|t| tuple(columns, t)).collect::<CqlResult<_>>()?;
            (columns.clone(), Comparison::In, values)
        }
        // comparison() refuses NOT IN, with the text that names it.
        Relation::NotIn { column, .. } => (vec![column.clone()], comparison(Operator::NotIn)?, Vec::new()),
        Relation::Element { .. } | Relation::Token { .. } => {
            return Err(invalid("Only comparisons (=, !=, <, <=, >, >=, IN) can restrict a materialized view"))
        }
    };
    Ok(Some(ViewRestriction { columns, op, values }))
}

fn comparison(op: Operator) -> CqlResult<Comparison> {
    Ok(match op {
        Operator::Eq => Comparison::Eq,
        Operator::Ne => Comparison::Ne,
        Operator::Lt => Comparison::Lt,
        Operator::Le => Comparison::Le,
        Operator::Gt => Comparison::Gt,
        Operator::Ge => Comparison::Ge,
        Operator::In | Operator::NotIn | Operator::Contains | Operator::ContainsKey | Operator::Like => {
            return Err(invalid(format!(
                "Only comparisons (=, !=, <, <=, >, >=, IN) can restrict a materialized view (got {})",
                op.text()
            )))
        }
    })
}

fn in_terms(values: &InValues) -> CqlResult<&[Term]> {
    match values {
        InValues::Terms(terms) => Ok(terms),
        // The processor refuses markers in a view's definition first.
        InValues::Bind(_) => Err(invalid("Cannot use query parameters in CREATE MATERIALIZED VIEW statements")),
    }
}

/// Refuses a multi-column relation on other than clustering columns (the
/// text of Cassandra's SELECT).
fn clustering_only(base: &TableMeta, columns: &[String]) -> CqlResult<()> {
    match columns.iter().find(|c| base.column(c).is_none_or(|c| c.kind != ColumnKind::Clustering)) {
        None => Ok(()),
        Some(column) => Err(invalid(format!(
            "Multi-column relations can only be applied to clustering columns but was applied to: {column}"
        ))),
    }
}

/// The value `term` gives base column `column`, a constant.
fn filter_value(base: &TableMeta, column: &str, term: &Term) -> CqlResult<Bytes> {
    // check_where_clause found the column.
    let ty = base.column(column).map_or(CqlType::Blob, |c| c.ty.clone());
    let receiver = Receiver { name: column, ty: &ty };
    crate::values::eval_required(term, receiver, Bindings::NONE)
}

/// `relation` as CQL, for `system_schema.views.where_clause` and DESCRIBE.
fn render_relation(relation: &Relation) -> String {
    let names = |columns: &[String]| columns.iter().map(|c| maybe_quote(c)).collect::<Vec<_>>().join(", ");
    let list = |terms: &InValues| match terms {
        InValues::Terms(terms) => terms.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", "),
        InValues::Bind(_) => "?".to_string(),
    };
    match relation {
        Relation::IsNotNull { column } => format!("{} IS NOT NULL", maybe_quote(column)),
        Relation::Simple { column, op, value } => format!("{} {} {value}", maybe_quote(column), op.text()),
        Relation::In { column, values } => format!("{} IN ({})", maybe_quote(column), list(values)),
        Relation::NotIn { column, values } => format!("{} NOT IN ({})", maybe_quote(column), list(values)),
        Relation::MultiColumn { columns, op, value } => format!("({}) {} {value}", names(columns), op.text()),
        Relation::MultiColumnIn { columns, values } => format!("({}) IN ({})", names(columns), list(values)),
        Relation::Element { column, key, op, value } => {
            format!("{}[{key}] {} {value}", maybe_quote(column), op.text())
        }
        Relation::Token { columns, op, value } => format!("token({}) {} {value}", names(columns), op.text()),
    }
}

/// The view's table: its key as declared, the selected columns, and the
/// liveness column.
fn view_table(
    base: &TableMeta,
    s: &CreateView,
    selected: &[&ColumnMeta],
    definition: MaterializedView,
    options: TableOptions,
    id: Uuid,
) -> TableMeta {
    let mut columns = Vec::new();
    let mut push = |name: &str, ty: CqlType, kind: ColumnKind, position: i32, order: ClusteringOrder| {
        let id = columns.len() as u32;
        columns.push(ColumnMeta { id, name: name.to_string(), ty, kind, position, order });
    };
    for (i, name) in s.partition_key.iter().enumerate() {
        // check_primary_key found every key column among the selected.
        let ty = selected.iter().find(|c| &c.name == name).map_or(CqlType::Blob, |c| c.ty.clone());
        push(name, ty, ColumnKind::PartitionKey, i as i32, ClusteringOrder::Asc);
    }
    for (i, name) in s.clustering_key.iter().enumerate() {
        let ty = selected.iter().find(|c| &c.name == name).map_or(CqlType::Blob, |c| c.ty.clone());
        // Without CLUSTERING ORDER BY, a base clustering column keeps its
        // order (Cassandra keeps its reversed type).
        let declared = s.clustering_order.iter().find(|(c, _)| c == name).map(|(_, order)| *order);
        let order = match declared {
            Some(Order::Desc) => ClusteringOrder::Desc,
            Some(_) => ClusteringOrder::Asc,
            None => {
                base.column(name).filter(|c| c.kind == ColumnKind::Clustering).map_or(ClusteringOrder::Asc, |c| c.order)
            }
        };
        push(name, ty, ColumnKind::Clustering, i as i32, order);
    }
    let key: Vec<&String> = s.partition_key.iter().chain(&s.clustering_key).collect();
    for column in selected.iter().filter(|c| !key.contains(&&c.name)) {
        push(&column.name, column.ty.clone(), ColumnKind::Regular, -1, ClusteringOrder::Asc);
    }
    push(LIVENESS_COLUMN, CqlType::Set(Box::new(CqlType::Blob)), ColumnKind::Regular, -1, ClusteringOrder::Asc);
    let next_column_id = columns.len() as u32;
    let mut view = TableMeta {
        id,
        keyspace: base.keyspace.clone(),
        name: s.name.clone(),
        columns,
        options,
        next_column_id,
        indexes: Vec::new(),
        view_of: Some(base.name.clone()),
        materialized: Some(definition),
        dropped_columns: Default::default(),
    };
    view.normalize_columns();
    view
}
