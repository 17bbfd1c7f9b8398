//! Server-side `DESCRIBE`, answered as Cassandra 4+ answers it, so cqlsh 6
//! (which only sends the statement and prints the rows) works unchanged.
//!
//! Listings answer `(keyspace_name, type, name)` rows; descriptions add
//! `create_statement`, the CQL that recreates the object exactly as this
//! node holds it (every table option Shoal keeps, and with `WITH
//! INTERNALS` the table's id). `DESCRIBE CLUSTER` answers `(cluster,
//! partitioner, snitch)`, and `range_ownership` with a non-system keyspace
//! in use. Keyspaces, tables and types come in name order,
//! types in dependency order within a keyspace; missing objects get
//! Cassandra's InvalidRequest texts. The answer is one page: schemas are
//! small.

use std::sync::Arc;

use bytes::Bytes;
use shoal_schema::collection;
use shoal_schema::view::{is_hidden, views_of};
use shoal_schema::{
    ClusteringOrder, ColumnKind, ColumnMeta, CqlType, IndexKind, IndexMeta, KeyspaceMeta, Schema, TableMeta,
    TableOptions, UserAggregate, UserFunction, UserType,
};

use crate::ast::{Describe, DescribeTarget};
use crate::error::{invalid, CqlResult};
use crate::result::{ColumnSpec, Rows};
use crate::{dropped_columns, system, user_types};

/// One schema object of a DESCRIBE answer.
struct Element {
    keyspace: String,
    kind: &'static str,
    name: String,
    create_statement: String,
}

pub fn execute(describe: &Describe, schema: &Schema, session_keyspace: Option<&str>) -> CqlResult<Rows> {
    let internals = describe.with_internals;
    let elements = match &describe.target {
        DescribeTarget::Cluster => return cluster(session_keyspace),
        DescribeTarget::Keyspaces => {
            let keyspaces = schema.keyspaces.values().map(|k| keyspace_element(k));
            return Ok(listing(keyspaces.collect()));
        }
        DescribeTarget::Tables => {
            let tables = |k: &KeyspaceMeta| user_tables(k).map(|t| table_element(t, internals)).collect();
            return Ok(listing(in_keyspaces(schema, session_keyspace, tables)?));
        }
        DescribeTarget::Types => {
            let types = |k: &KeyspaceMeta| k.types.values().map(|t| type_element(t)).collect();
            return Ok(listing(in_keyspaces(schema, session_keyspace, types)?));
        }
        DescribeTarget::Functions => {
            let functions = |k: &KeyspaceMeta| function_elements(k, None);
            return Ok(listing(in_keyspaces(schema, session_keyspace, functions)?));
        }
        DescribeTarget::Aggregates => {
            let aggregates = |k: &KeyspaceMeta| aggregate_elements(k, None);
            return Ok(listing(in_keyspaces(schema, session_keyspace, aggregates)?));
        }
        DescribeTarget::Schema { full } => schema
            .keyspaces
            .values()
            .filter(|k| *full || !system::is_system_keyspace(&k.name))
            .flat_map(|k| keyspace_elements(k, false, internals))
            .collect(),
        DescribeTarget::Keyspace { name, only } => {
            let keyspace = keyspace(schema, name.as_deref().or(session_keyspace))?;
            keyspace_elements(keyspace, *only, internals)
        }
        DescribeTarget::Table(ks, name) => {
            let keyspace = keyspace(schema, ks.as_deref().or(session_keyspace))?;
            let table = keyspace
                .tables
                .get(name)
                .filter(|t| t.view_of.is_none())
                .ok_or_else(|| invalid(format!("Table '{name}' not found in keyspace '{}'", keyspace.name)))?;
            table_elements(keyspace, table, internals)
        }
        DescribeTarget::View(ks, name) => {
            let keyspace = keyspace(schema, ks.as_deref().or(session_keyspace))?;
            let table = keyspace.tables.get(name).filter(|t| t.view_of.is_some());
            match table {
                Some(view) if view.materialized.is_some() => vec![view_element(view, internals)],
                Some(view) => vec![index_view_element(keyspace, view, internals)],
                None => return Err(invalid(format!("Materialized view '{name}' not found in '{}'", keyspace.name))),
            }
        }
        DescribeTarget::Index(ks, name) => {
            let keyspace = keyspace(schema, ks.as_deref().or(session_keyspace))?;
            let (table, index) = crate::index_ddl::find(keyspace, name).ok_or_else(|| {
                invalid(format!("Table for existing index '{name}' not found in '{}'", keyspace.name))
            })?;
            vec![index_element(keyspace, table, index, internals)]
        }
        DescribeTarget::Type(ks, name) => {
            let keyspace = keyspace(schema, ks.as_deref().or(session_keyspace))?;
            let udt = keyspace
                .types
                .get(name)
                .ok_or_else(|| invalid(format!("User defined type '{name}' not found in '{}'", keyspace.name)))?;
            vec![type_element(udt)]
        }
        // Every overload of the name; none is Cassandra's text.
        DescribeTarget::Function(ks, name) | DescribeTarget::Aggregate(ks, name) => {
            let keyspace = keyspace(schema, ks.as_deref().or(session_keyspace))?;
            let (what, found) = match &describe.target {
                DescribeTarget::Function(..) => ("User defined function", function_elements(keyspace, Some(name))),
                _ => ("User defined aggregate", aggregate_elements(keyspace, Some(name))),
            };
            if found.is_empty() {
                return Err(invalid(format!("{what} '{name}' not found in '{}'", keyspace.name)));
            }
            found
        }
        DescribeTarget::Any(ks, name) => any(schema, ks.as_deref(), name, session_keyspace, internals)?,
    };
    Ok(descriptions(elements))
}

/// `DESCRIBE name`: a keyspace, else a table, a materialized view, an
/// index or (ScyllaDB's extension) a user type, of the named or the
/// session's keyspace, looked for in that order.
fn any(
    schema: &Schema,
    ks: Option<&str>,
    name: &str,
    session_keyspace: Option<&str>,
    internals: bool,
) -> CqlResult<Vec<Element>> {
    if ks.is_none() {
        if let Some(keyspace) = schema.keyspace(name) {
            return Ok(keyspace_elements(keyspace, false, internals));
        }
    }
    let keyspace = keyspace(schema, ks.or(session_keyspace).or(Some(name)))?;
    if let Some(table) = keyspace.tables.get(name).filter(|t| t.view_of.is_none()) {
        return Ok(table_elements(keyspace, table, internals));
    }
    if let Some(view) = keyspace.tables.get(name).filter(|t| t.materialized.is_some()) {
        return Ok(vec![view_element(view, internals)]);
    }
    if let Some((table, index)) = crate::index_ddl::find(keyspace, name) {
        return Ok(vec![index_element(keyspace, table, index, internals)]);
    }
    match keyspace.types.get(name) {
        Some(udt) => Ok(vec![type_element(udt)]),
        None => Err(invalid(format!("'{name}' not found in keyspace '{}'", keyspace.name))),
    }
}

fn keyspace<'s>(schema: &'s Schema, name: Option<&str>) -> CqlResult<&'s KeyspaceMeta> {
    let name = name.ok_or_else(|| invalid("No keyspace specified and no current keyspace"))?;
    schema.keyspace(name).map(|k| &**k).ok_or_else(|| invalid(format!("'{name}' not found in keyspaces")))
}

/// The elements `of` each keyspace gives: the session's keyspace only, if
/// it has one, else every keyspace.
fn in_keyspaces(
    schema: &Schema,
    session_keyspace: Option<&str>,
    of: impl Fn(&KeyspaceMeta) -> Vec<Element>,
) -> CqlResult<Vec<Element>> {
    match session_keyspace {
        Some(name) => Ok(of(keyspace(schema, Some(name))?)),
        None => Ok(schema.keyspaces.values().flat_map(|k| of(k)).collect()),
    }
}

/// The keyspace, then (unless `only`) its types, functions, aggregates
/// and tables.
fn keyspace_elements(keyspace: &KeyspaceMeta, only: bool, internals: bool) -> Vec<Element> {
    let mut elements = vec![keyspace_element(keyspace)];
    if !only {
        elements.extend(user_types::in_dependency_order(keyspace).into_iter().map(|t| type_element(t)));
        elements.extend(function_elements(keyspace, None));
        elements.extend(aggregate_elements(keyspace, None));
        elements.extend(user_tables(keyspace).flat_map(|t| table_elements(keyspace, t, internals)));
    }
    elements
}

/// The keyspace's tables as users see them: not views (those holding
/// indexes, materialized views).
fn user_tables(keyspace: &KeyspaceMeta) -> impl Iterator<Item = &Arc<TableMeta>> {
    keyspace.tables.values().filter(|t| t.view_of.is_none() && !t.options.cdc_log)
}

/// The table, then its indexes, then its materialized views, then its CDC
/// log table.
fn table_elements(keyspace: &KeyspaceMeta, table: &TableMeta, internals: bool) -> Vec<Element> {
    let mut elements = vec![table_element(table, internals)];
    elements.extend(table.indexes.iter().map(|index| index_element(keyspace, table, index, internals)));
    elements.extend(views_of(keyspace, &table.name).map(|view| view_element(view, internals)));
    let log = keyspace.tables.get(&crate::cdc::log_name(&table.name)).filter(|t| t.options.cdc_log);
    elements.extend(log.map(|log| table_element(log, internals)));
    elements
}

fn view_element(view: &TableMeta, internals: bool) -> Element {
    let ck: Vec<&ColumnMeta> = view.clustering_key().collect();
    let layout = ViewLayout { newline: "\n    ", with: "\n WITH ", and: "\n    AND " };
    Element {
        keyspace: maybe_quote(&view.keyspace),
        // ScyllaDB's name for the kind (Cassandra's is "materialized_view").
        kind: "view",
        name: maybe_quote(&view.name),
        create_statement: format!("{};", create_view(view, maybe_quote, &table_options(view, internals, &ck), &layout)),
    }
}

/// The table holding an index, as the materialized view it is (ScyllaDB
/// describes it so): its key columns, selected where the indexed value is
/// not null, with its options. Tombstones of an index's view are dropped
/// after `gc_grace_seconds`, what ScyllaDB's `tombstone_gc` mode
/// `timeout` names; ScyllaDB lists that property for the views it makes
/// for indexes. As in ScyllaDB, the statement comes inside a comment that
/// says not to run it: the index recreates its view.
fn index_view_element(keyspace: &KeyspaceMeta, view: &TableMeta, internals: bool) -> Element {
    let base_id = view.view_of.as_ref().and_then(|base| keyspace.tables.get(base)).map_or(view.id, |b| b.id);
    let value = view.partition_key().next().map_or_else(String::new, |c| maybe_quote(&c.name));
    let mut described = view.clone();
    described.materialized = Some(shoal_schema::view::MaterializedView {
        base_id,
        include_all_columns: false,
        where_clause: format!("{value} IS NOT NULL"),
        filter: Vec::new(),
    });
    described.options.tombstone_gc.get_or_insert_with(|| {
        [("mode", "timeout"), ("propagation_delay_in_seconds", "3600")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    });
    let mut element = view_element(&described, internals);
    element.create_statement = format!("{INDEX_VIEW_WARNING}{}\n*/", element.create_statement);
    element
}

/// What ScyllaDB puts before the description of an index's view.
const INDEX_VIEW_WARNING: &str = "/* Do NOT execute this statement! It's only for informational purposes.\n   \
    This materialized view is the underlying materialized view of a secondary\n   \
    index. It can be restored via restoring the index.\n\n";

/// Where CREATE MATERIALIZED VIEW breaks its clauses.
pub(crate) struct ViewLayout {
    /// Before each clause of the SELECT and PRIMARY KEY.
    pub newline: &'static str,
    /// Before the options.
    pub with: &'static str,
    /// Between options.
    pub and: &'static str,
}

/// `CREATE MATERIALIZED VIEW ks.v AS SELECT ... FROM ks.t WHERE ...
/// PRIMARY KEY (...) WITH options`, names written by `quote`.
pub(crate) fn create_view(
    view: &TableMeta,
    quote: fn(&str) -> String,
    options: &[String],
    layout: &ViewLayout,
) -> String {
    // A view's definition is set with its table (`view_ddl`).
    let (Some(definition), Some(base)) = (&view.materialized, &view.view_of) else { return String::new() };
    let selection = match definition.include_all_columns {
        true => "*".to_string(),
        false => {
            let visible = view.columns.iter().filter(|c| !is_hidden(view, &c.name));
            visible.map(|c| quote(&c.name)).collect::<Vec<_>>().join(", ")
        }
    };
    let names = |columns: Vec<&ColumnMeta>| columns.iter().map(|c| quote(&c.name)).collect::<Vec<_>>();
    let pk = names(view.partition_key().collect());
    let partition = match pk.len() {
        1 => pk[0].clone(),
        _ => format!("({})", pk.join(", ")),
    };
    let key: Vec<String> = std::iter::once(partition).chain(names(view.clustering_key().collect())).collect();
    let nl = layout.newline;
    let mut out = format!(
        "CREATE MATERIALIZED VIEW {}.{} AS{nl}SELECT {selection}{nl}FROM {}.{}{nl}WHERE {}{nl}PRIMARY KEY ({})",
        quote(&view.keyspace),
        quote(&view.name),
        quote(&view.keyspace),
        quote(base),
        definition.where_clause,
        key.join(", ")
    );
    // A view's expiry is its base's: it has no default_time_to_live.
    let options: Vec<&String> = options.iter().filter(|o| !o.starts_with("default_time_to_live")).collect();
    if !options.is_empty() {
        out.push_str(layout.with);
        out.push_str(&options.iter().map(|o| o.as_str()).collect::<Vec<_>>().join(layout.and));
    }
    out
}

fn index_element(keyspace: &KeyspaceMeta, table: &TableMeta, index: &IndexMeta, internals: bool) -> Element {
    let mut statement = create_index(table, index, maybe_quote);
    let mut options = Vec::new();
    if internals {
        options.push(format!("ID = {}", index.view_id));
    }
    options.extend(index_options(keyspace, index));
    if !options.is_empty() {
        statement.push_str(" WITH ");
        statement.push_str(&options.join("\n    AND "));
    }
    Element {
        keyspace: maybe_quote(&table.keyspace),
        kind: "index",
        name: maybe_quote(&index.name),
        create_statement: format!("{statement};"),
    }
}

/// The options of the table holding `index` (ScyllaDB's `CREATE INDEX
/// ... WITH`), every one of them, as ScyllaDB describes an index.
pub(crate) fn index_options(keyspace: &KeyspaceMeta, index: &IndexMeta) -> Vec<String> {
    keyspace.tables.get(&index.view_name()).map(|view| option_list(&view.options)).unwrap_or_default()
}

/// `CREATE INDEX name ON ks.table(target)`, names written by `quote`
/// (no space before the target: ScyllaDB's layout).
pub(crate) fn create_index(table: &TableMeta, index: &IndexMeta, quote: fn(&str) -> String) -> String {
    format!(
        "CREATE INDEX {} ON {}.{}({})",
        quote(&index.name),
        quote(&table.keyspace),
        quote(&table.name),
        index_target(table, index, quote)
    )
}

/// The index's target as CREATE INDEX writes it: `v`, `keys(m)`,
/// `values(m)`, `entries(m)`, `full(l)`, or a local index's `(p), v`.
fn index_target(table: &TableMeta, index: &IndexMeta, quote: fn(&str) -> String) -> String {
    let column = quote(&index.column);
    let multi_cell = table.column(&index.column).is_some_and(|c| c.ty.is_multi_cell());
    let target = match index.kind {
        IndexKind::Values if multi_cell => format!("values({column})"),
        IndexKind::Values => column,
        IndexKind::Keys => format!("keys({column})"),
        IndexKind::Entries => format!("entries({column})"),
        IndexKind::Full => format!("full({column})"),
    };
    match index.local {
        true => {
            let pk: Vec<String> = table.partition_key().map(|c| quote(&c.name)).collect();
            format!("({}), {target}", pk.join(", "))
        }
        false => target,
    }
}

/// `system_schema.indexes.options['target']`: the target as Cassandra
/// writes it, and a local index's as ScyllaDB's JSON.
pub(crate) fn index_option_target(table: &TableMeta, index: &IndexMeta) -> String {
    if !index.local {
        return index_target(table, index, maybe_quote);
    }
    let pk: Vec<String> = table.partition_key().map(|c| format!("\"{}\"", c.name)).collect();
    format!("{{\"pk\":[{}],\"ck\":[\"{}\"]}}", pk.join(","), index.column)
}

fn keyspace_element(keyspace: &KeyspaceMeta) -> Element {
    Element {
        keyspace: maybe_quote(&keyspace.name),
        kind: "keyspace",
        name: maybe_quote(&keyspace.name),
        create_statement: create_keyspace(keyspace),
    }
}

/// A table; a CDC log table as ScyllaDB describes it, by its options
/// alone (`ALTER TABLE ... WITH`): its columns come from its base.
fn table_element(table: &TableMeta, internals: bool) -> Element {
    let create_statement = match table.options.cdc_log {
        true => format!(
            "ALTER TABLE {}.{} WITH {};",
            maybe_quote(&table.keyspace),
            maybe_quote(&table.name),
            option_list(&table.options).join("\n    AND ")
        ),
        false => create_table(table, internals),
    };
    Element { keyspace: maybe_quote(&table.keyspace), kind: "table", name: maybe_quote(&table.name), create_statement }
}

fn type_element(udt: &UserType) -> Element {
    Element {
        keyspace: maybe_quote(&udt.keyspace),
        kind: "type",
        name: maybe_quote(&udt.name),
        create_statement: create_type(udt),
    }
}

/// The keyspace's functions (named `name`, if given), ScyllaDB's layout.
fn function_elements(keyspace: &KeyspaceMeta, name: Option<&str>) -> Vec<Element> {
    let functions = keyspace.functions.functions.iter().filter(|f| name.is_none_or(|n| f.name == n));
    functions
        .map(|f| Element {
            keyspace: maybe_quote(&f.keyspace),
            kind: "function",
            name: maybe_quote(&f.name),
            create_statement: format!("{};", create_function(f, maybe_quote, Some(&f.body))),
        })
        .collect()
}

fn aggregate_elements(keyspace: &KeyspaceMeta, name: Option<&str>) -> Vec<Element> {
    let aggregates = keyspace.functions.aggregates.iter().filter(|a| name.is_none_or(|n| a.name == n));
    aggregates
        .map(|a| Element {
            keyspace: maybe_quote(&a.keyspace),
            kind: "aggregate",
            name: maybe_quote(&a.name),
            create_statement: format!("{};", create_aggregate(a, maybe_quote)),
        })
        .collect()
}

/// CREATE FUNCTION, a clause a line (ScyllaDB's layout), without the final
/// `;`; the body in `$$` exactly as created (ScyllaDB adds a newline each
/// side, which a second round trip would keep adding), in quotes if it
/// holds `$$`; `AS ''` when `body` is `None` (the schema file keeps it apart).
pub(crate) fn create_function(f: &UserFunction, quote: impl Fn(&str) -> String, body: Option<&str>) -> String {
    let args: Vec<String> =
        f.arg_names.iter().zip(&f.arg_types).map(|(n, ty)| format!("{} {}", quote(n), function_type(ty))).collect();
    let on_null = if f.called_on_null_input { "CALLED" } else { "RETURNS NULL" };
    let body = match body {
        None => "''".to_string(),
        Some(body) if body.contains("$$") => literal(body),
        Some(body) => format!("$${body}$$"),
    };
    format!(
        "CREATE FUNCTION {}.{}({})\n{on_null} ON NULL INPUT\nRETURNS {}\nLANGUAGE {}\nAS {body}",
        quote(&f.keyspace),
        quote(&f.name),
        args.join(", "),
        function_type(&f.return_type),
        f.language
    )
}

/// A function's argument, result or state type as CREATE FUNCTION takes
/// it: a user type bare (it is frozen implicitly, and `frozen<>` is refused).
fn function_type(ty: &CqlType) -> String {
    match ty {
        CqlType::Frozen(inner) if matches!(**inner, CqlType::Udt(_)) => inner.to_string(),
        other => other.to_string(),
    }
}

/// CREATE AGGREGATE, a clause a line, without the final `;`.
pub(crate) fn create_aggregate(a: &UserAggregate, quote: impl Fn(&str) -> String) -> String {
    let args: Vec<String> = a.arg_types.iter().map(function_type).collect();
    let mut out = format!(
        "CREATE AGGREGATE {}.{}({})\nSFUNC {}\nSTYPE {}",
        quote(&a.keyspace),
        quote(&a.name),
        args.join(", "),
        quote(&a.state_func),
        function_type(&a.state_type)
    );
    if let Some(reduce) = &a.reduce_func {
        out.push_str(&format!("\nREDUCEFUNC {}", quote(reduce)));
    }
    if let Some(finalfunc) = &a.final_func {
        out.push_str(&format!("\nFINALFUNC {}", quote(finalfunc)));
    }
    if let Some(initcond) = &a.initcond {
        out.push_str(&format!("\nINITCOND {initcond}"));
    }
    out
}

fn columns(names: &[&str]) -> Arc<[ColumnSpec]> {
    names
        .iter()
        .map(|name| ColumnSpec {
            keyspace: "system".to_string(),
            table: "describe".to_string(),
            name: name.to_string(),
            ty: CqlType::Text,
        })
        .collect()
}

fn text(value: &str) -> Option<Bytes> {
    Some(Bytes::copy_from_slice(value.as_bytes()))
}

fn listing(elements: Vec<Element>) -> Rows {
    let rows = elements.iter().map(|e| vec![text(&e.keyspace), text(e.kind), text(&e.name)]).collect();
    Rows { columns: columns(&["keyspace_name", "type", "name"]), rows, paging_state: None }
}

fn descriptions(elements: Vec<Element>) -> Rows {
    let rows = elements
        .iter()
        .map(|e| vec![text(&e.keyspace), text(e.kind), text(&e.name), text(&e.create_statement)])
        .collect();
    Rows { columns: columns(&["keyspace_name", "type", "name", "create_statement"]), rows, paging_state: None }
}

/// `DESCRIBE CLUSTER`: the cluster's name, partitioner and snitch; with a
/// non-system keyspace in use, also `range_ownership`: each token range's
/// end token and its replicas' addresses.
fn cluster(session_keyspace: Option<&str>) -> CqlResult<Rows> {
    let node = shoal_coordinator::cluster::node();
    let mut row = vec![text(&node.cluster_name), text("Murmur3Partitioner"), text("GossipingPropertyFileSnitch")];
    let mut specs = columns(&["cluster", "partitioner", "snitch"]).to_vec();
    if let Some(keyspace) = session_keyspace.filter(|k| !system::is_system_keyspace(k)) {
        let ranges = shoal_coordinator::cluster::range_ownership(keyspace)?;
        let entries: Vec<Bytes> = ranges
            .iter()
            .flat_map(|(end, addresses)| {
                let addresses: Vec<String> = addresses.iter().map(ToString::to_string).collect();
                let list = collection::serialize(addresses.iter().map(|a| Some(a.as_bytes())), addresses.len());
                [Bytes::from(end.to_string()), list]
            })
            .collect();
        row.push(Some(collection::serialize_map(entries.iter().map(|e| Some(&e[..])), ranges.len())));
        let ty = CqlType::Map(Box::new(CqlType::Text), Box::new(CqlType::List(Box::new(CqlType::Text))));
        specs.push(ColumnSpec {
            keyspace: "system".to_string(),
            table: "describe".to_string(),
            name: "range_ownership".to_string(),
            ty,
        });
    }
    Ok(Rows { columns: specs.into(), rows: vec![row], paging_state: None })
}

pub use crate::lexer::maybe_quote;

pub(crate) fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

pub(crate) fn map_literal<'a>(entries: impl IntoIterator<Item = (&'a String, &'a String)>) -> String {
    let entries: Vec<String> = entries.into_iter().map(|(k, v)| format!("{}: {}", literal(k), literal(v))).collect();
    format!("{{{}}}", entries.join(", "))
}

/// A double as Cassandra prints one: always with a fraction (`1.0`).
fn double(value: f64) -> String {
    let text = value.to_string();
    if text.contains(['.', 'e', 'E']) || !value.is_finite() {
        text
    } else {
        format!("{text}.0")
    }
}

fn create_keyspace(keyspace: &KeyspaceMeta) -> String {
    // `class` first, as Cassandra writes it; the rest by name.
    let class = keyspace.replication.iter().filter(|(k, _)| *k == "class");
    let rest = keyspace.replication.iter().filter(|(k, _)| *k != "class");
    format!(
        "CREATE KEYSPACE {} WITH replication = {} AND durable_writes = {};",
        maybe_quote(&keyspace.name),
        map_literal(class.chain(rest)),
        keyspace.durable_writes
    )
}

fn create_type(udt: &UserType) -> String {
    let mut out = format!("CREATE TYPE {}.{} (\n", maybe_quote(&udt.keyspace), maybe_quote(&udt.name));
    let fields: Vec<String> = udt.fields.iter().map(|(name, ty)| format!("    {} {ty}", maybe_quote(name))).collect();
    out.push_str(&fields.join(",\n"));
    out.push_str("\n);");
    out
}

/// Cassandra's layout: one column a line (key columns first, then static
/// and regular ones by name), the primary key, then one option a line.
fn create_table(table: &TableMeta, internals: bool) -> String {
    let pk: Vec<&ColumnMeta> = table.partition_key().collect();
    let ck: Vec<&ColumnMeta> = table.clustering_key().collect();
    // With internals, Cassandra declares the dropped columns too and
    // replays their drops after the table (below).
    let gone: Vec<ColumnMeta> = match internals {
        false => Vec::new(),
        true => dropped_columns::columns_with_history(table)
            .into_iter()
            .filter(|(name, ..)| table.column(name).is_none())
            .map(|(name, ty, kind, id)| ColumnMeta {
                id,
                name: name.to_string(),
                ty: ty.clone(),
                kind,
                position: -1,
                order: ClusteringOrder::Asc,
            })
            .collect(),
    };
    let mut rest: Vec<&ColumnMeta> = table.columns.iter().filter(|c| !c.kind.is_primary_key()).chain(&gone).collect();
    rest.sort_by_key(|c| (c.kind != ColumnKind::Static, c.name.as_str()));
    let inline_key = pk.len() == 1 && ck.is_empty();
    let mut lines: Vec<String> = pk
        .iter()
        .chain(&ck)
        .chain(&rest)
        .map(|c| {
            let suffix = match c.kind {
                ColumnKind::Static => " static",
                ColumnKind::PartitionKey if inline_key => " PRIMARY KEY",
                _ => "",
            };
            format!("    {} {}{suffix}", maybe_quote(&c.name), c.ty)
        })
        .collect();
    if !inline_key {
        let names = |columns: &[&ColumnMeta]| columns.iter().map(|c| maybe_quote(&c.name)).collect::<Vec<_>>();
        let partition = match pk.len() {
            1 => names(&pk).remove(0),
            _ => format!("({})", names(&pk).join(", ")),
        };
        let key: Vec<String> = std::iter::once(partition).chain(names(&ck)).collect();
        lines.push(format!("    PRIMARY KEY ({})", key.join(", ")));
    }
    let mut out = format!("CREATE TABLE {}.{} (\n", maybe_quote(&table.keyspace), maybe_quote(&table.name));
    out.push_str(&lines.join(",\n"));
    out.push_str("\n) WITH ");
    out.push_str(&table_options(table, internals, &ck).join("\n    AND "));
    out.push(';');
    if internals {
        let name = format!("{}.{}", maybe_quote(&table.keyspace), maybe_quote(&table.name));
        for statement in dropped_columns::history(table, &name, maybe_quote) {
            out.push('\n');
            out.push_str(&statement);
            out.push(';');
        }
    }
    out
}

fn table_options(table: &TableMeta, internals: bool, ck: &[&ColumnMeta]) -> Vec<String> {
    let mut options = Vec::new();
    if internals {
        options.push(format!("ID = {}", table.id));
    }
    if table.options.compact_storage {
        options.push("COMPACT STORAGE".to_string());
    }
    if !ck.is_empty() {
        let orders: Vec<String> = ck
            .iter()
            .map(|c| {
                format!("{} {}", maybe_quote(&c.name), if c.order == ClusteringOrder::Desc { "DESC" } else { "ASC" })
            })
            .collect();
        options.push(format!("CLUSTERING ORDER BY ({})", orders.join(", ")));
    }
    options.extend(option_list(&table.options));
    options
}

/// A table's options as `name = value`, in Cassandra's (alphabetical)
/// order; the schema file writes the same list.
pub(crate) fn option_list(o: &TableOptions) -> Vec<String> {
    let mut options = vec![
        format!("bloom_filter_fp_chance = {}", double(o.bloom_filter_fp_chance)),
        format!("caching = {}", map_literal(&o.caching)),
        format!("comment = {}", literal(&o.comment)),
        format!("compaction = {}", map_literal(&o.compaction)),
        format!("compression = {}", map_literal(&o.compression)),
        format!("crc_check_chance = {}", double(o.crc_check_chance)),
        format!("default_time_to_live = {}", o.default_time_to_live_s),
        format!("gc_grace_seconds = {}", o.gc_grace_seconds),
        format!("max_index_interval = {}", o.max_index_interval),
        format!("memtable_flush_period_in_ms = {}", o.memtable_flush_period_in_ms),
        format!("min_index_interval = {}", o.min_index_interval),
    ];
    options.extend(o.paxos_grace_seconds.map(|s| format!("paxos_grace_seconds = {s}")));
    options.push(format!("speculative_retry = {}", literal(&o.speculative_retry)));
    if o.in_memory {
        options.push("in_memory = true".to_string());
    }
    options.extend(o.synchronous_updates.map(|on| format!("synchronous_updates = {on}")));
    options.extend(o.tombstone_gc.as_ref().map(|m| format!("tombstone_gc = {}", map_literal(m))));
    options.extend(o.cdc.as_ref().map(|m| format!("cdc = {}", map_literal(m))));
    options
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::Statement;

    fn schema_of(statements: &[&str]) -> Schema {
        let mut schema = Schema::empty();
        for text in statements {
            let parsed = crate::parser::parse_statement(text).expect("parses");
            schema = crate::ddl::apply(&schema, &parsed.statement, Some("ks")).expect("applies").expect("changes").0;
        }
        schema
    }

    fn describe(schema: &Schema, text: &str) -> CqlResult<Rows> {
        let parsed = crate::parser::parse_statement(text).expect("parses");
        let Statement::Describe(d) = parsed.statement else { panic!("not a DESCRIBE: {text}") };
        execute(&d, schema, Some("ks"))
    }

    fn texts(rows: &Rows, column: usize) -> Vec<String> {
        rows.rows.iter().map(|r| String::from_utf8(r[column].clone().expect("set").to_vec()).expect("utf8")).collect()
    }

    const SCHEMA: &[&str] = &[
        "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
        "CREATE TYPE ks.addr (street text, \"Zip\" int)",
    ];

    #[test]
    fn a_described_table_recreates_itself() {
        let schema = schema_of(&[
            SCHEMA[0],
            SCHEMA[1],
            "CREATE TABLE ks.t (k int, a2 text, c int, \"Value\" frozen<addr>, s int static, a text, \
             PRIMARY KEY ((k, a2), c)) WITH CLUSTERING ORDER BY (c DESC) AND comment = 'it''s'",
        ]);
        let rows = describe(&schema, "DESCRIBE TABLE t WITH INTERNALS").expect("described");
        let text = &texts(&rows, 3)[0];
        assert!(
            text.starts_with("CREATE TABLE ks.t (\n    k int,\n    a2 text,\n    c int,\n    s int static,\n"),
            "{text}"
        );
        assert!(text.contains("    \"Value\" frozen<addr>,\n    a text,\n    PRIMARY KEY ((k, a2), c)\n) WITH ID = "));
        assert!(text.contains("\n    AND CLUSTERING ORDER BY (c DESC)\n    AND bloom_filter_fp_chance = 0.01\n"));
        assert!(text.contains("AND comment = 'it''s'") && text.contains("AND crc_check_chance = 1.0"));
        // Dropping it and running the description gives the same table.
        let again = schema_of(&[SCHEMA[0], SCHEMA[1], text]);
        let before = schema.table("ks", "t").expect("table");
        let after = again.table("ks", "t").expect("table");
        // Column ids are internal, as in Cassandra: the rest is the same.
        let shape = |t: &TableMeta| -> Vec<(String, String, ColumnKind, i32, bool)> {
            let mut columns: Vec<_> = t
                .columns
                .iter()
                .map(|c| (c.name.clone(), c.ty.to_string(), c.kind, c.position, c.order == ClusteringOrder::Desc))
                .collect();
            columns.sort_by(|a, b| a.0.cmp(&b.0));
            columns
        };
        assert_eq!((before.id, shape(before), &before.options), (after.id, shape(after), &after.options));
    }

    #[test]
    fn internals_replay_the_drops() {
        let schema = schema_of(&[
            SCHEMA[0],
            "CREATE TABLE ks.t (k int PRIMARY KEY, a int, b list<int>, c text)",
            "ALTER TABLE ks.t DROP (a, b) USING TIMESTAMP 1000",
            "ALTER TABLE ks.t ADD a varint",
        ]);
        let text = &texts(&describe(&schema, "DESCRIBE TABLE t WITH INTERNALS").expect("described"), 3)[0];
        assert!(
            text.starts_with("CREATE TABLE ks.t (\n    k int PRIMARY KEY,\n    a varint,\n    b list<int>,\n"),
            "{text}"
        );
        assert!(
            text.ends_with(
                ";\nALTER TABLE ks.t DROP a USING TIMESTAMP 1000;\nALTER TABLE ks.t ADD a varint;\n\
                 ALTER TABLE ks.t DROP b USING TIMESTAMP 1000;"
            ),
            "{text}"
        );
        let plain = &texts(&describe(&schema, "DESCRIBE TABLE t").expect("described"), 3)[0];
        assert!(!plain.contains("ALTER") && !plain.contains(" b "), "{plain}");
    }

    #[test]
    fn a_keyspace_lists_itself_then_types_then_tables() {
        let schema = schema_of(&[
            SCHEMA[0],
            SCHEMA[1],
            "CREATE TABLE ks.b (k int PRIMARY KEY)",
            "CREATE TABLE ks.a (k int PRIMARY KEY)",
        ]);
        let rows = describe(&schema, "DESCRIBE KEYSPACE").expect("described");
        assert_eq!(texts(&rows, 1), ["keyspace", "type", "table", "table"]);
        assert_eq!(texts(&rows, 2), ["ks", "addr", "a", "b"]);
        assert!(texts(&rows, 3)[0].starts_with(
            "CREATE KEYSPACE ks WITH replication = {'class': 'org.apache.cassandra.locator.SimpleStrategy', 'replication_factor': '1'}"
        ));
        assert_eq!(texts(&rows, 3)[2], "CREATE TABLE ks.a (\n    k int PRIMARY KEY\n) WITH bloom_filter_fp_chance = 0.01\n    AND caching = {'keys': 'ALL', 'rows_per_partition': 'ALL'}\n    AND comment = ''\n    AND compaction = {'class': 'org.apache.cassandra.db.compaction.SizeTieredCompactionStrategy'}\n    AND compression = {'chunk_length_in_kb': '16', 'class': 'org.apache.cassandra.io.compress.LZ4Compressor'}\n    AND crc_check_chance = 1.0\n    AND default_time_to_live = 0\n    AND gc_grace_seconds = 864000\n    AND max_index_interval = 2048\n    AND memtable_flush_period_in_ms = 0\n    AND min_index_interval = 128\n    AND speculative_retry = '99PERCENTILE';");
        assert_eq!(texts(&describe(&schema, "DESCRIBE ONLY KEYSPACE ks").expect("described"), 1), ["keyspace"]);
        assert_eq!(texts(&describe(&schema, "DESC TABLES").expect("listed"), 2), ["a", "b"]);
        assert_eq!(texts(&describe(&schema, "DESC TYPES").expect("listed"), 2), ["addr"]);
        assert_eq!(texts(&describe(&schema, "DESCRIBE a").expect("described"), 2), ["a"]);
        assert_eq!(texts(&describe(&schema, "DESCRIBE ks").expect("described"), 2), ["ks", "addr", "a", "b"]);
    }

    #[test]
    fn missing_objects_get_cassandras_messages() {
        let schema = schema_of(&[SCHEMA[0]]);
        let message = |text| match describe(&schema, text) {
            Err(crate::error::CqlError::Invalid(m)) => m,
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(message("DESCRIBE TABLE nope"), "Table 'nope' not found in keyspace 'ks'");
        assert_eq!(message("DESCRIBE KEYSPACE nope"), "'nope' not found in keyspaces");
        assert_eq!(message("DESCRIBE TYPE nope"), "User defined type 'nope' not found in 'ks'");
        assert_eq!(message("DESCRIBE nope"), "'nope' not found in keyspace 'ks'");
        assert_eq!(message("DESCRIBE MATERIALIZED VIEW ks.v"), "Materialized view 'v' not found in 'ks'");
    }

    #[test]
    fn indexes_are_described_in_scylladbs_layout_with_their_options() {
        let schema = schema_of(&[
            SCHEMA[0],
            "CREATE TABLE ks.t (p int, c int, v int, w int, PRIMARY KEY (p, c))",
            "CREATE INDEX ON ks.t (v)",
            "CREATE INDEX local_w ON ks.t ((p), w)",
            "CREATE INDEX tuned ON ks.t (c) WITH comment = 'x' AND gc_grace_seconds = 13 \
             AND tombstone_gc = {'mode': 'timeout', 'propagation_delay_in_seconds': '9'}",
        ]);
        let text = |statement| texts(&describe(&schema, statement).expect("described"), 3).remove(0);
        let plain = text("DESCRIBE INDEX t_v_idx");
        assert!(plain.starts_with("CREATE INDEX t_v_idx ON ks.t(v) WITH bloom_filter_fp_chance = 0.01\n"), "{plain}");
        assert!(plain.ends_with("\n    AND speculative_retry = '99PERCENTILE';"), "{plain}");
        assert!(text("DESCRIBE INDEX local_w").starts_with("CREATE INDEX local_w ON ks.t((p), w) WITH "));
        let tuned = text("DESCRIBE INDEX tuned");
        assert!(tuned.starts_with("CREATE INDEX tuned ON ks.t(c) WITH bloom_filter_fp_chance = 0.01\n"), "{tuned}");
        assert!(tuned.contains("\n    AND comment = 'x'\n") && tuned.contains("\n    AND gc_grace_seconds = 13\n"));
        assert!(tuned.ends_with("\n    AND tombstone_gc = {'mode': 'timeout', 'propagation_delay_in_seconds': '9'};"));
        // A local index on a frozen collection, whole (ScyllaDB's `full`).
        let local = schema_of(&[
            SCHEMA[0],
            "CREATE TABLE ks.f (p int PRIMARY KEY, l frozen<list<int>>)",
            "CREATE INDEX lf ON ks.f ((p), full(l))",
        ]);
        let lf = texts(&describe(&local, "DESCRIBE INDEX lf").expect("described"), 3).remove(0);
        assert!(lf.starts_with("CREATE INDEX lf ON ks.f((p), full(l)) WITH "), "{lf}");
        // With internals, every index shows the id of the table holding it.
        let id = schema.table("ks", "t_v_idx_index").expect("index table").id;
        assert!(text("DESCRIBE INDEX t_v_idx WITH INTERNALS")
            .starts_with(&format!("CREATE INDEX t_v_idx ON ks.t(v) WITH ID = {id}\n    AND ")));
        // The description recreates the index with its options.
        let again =
            schema_of(&[SCHEMA[0], "CREATE TABLE ks.t (p int, c int, v int, w int, PRIMARY KEY (p, c))", &tuned]);
        let options = |s: &Schema| s.table("ks", "tuned_index").expect("index table").options.clone();
        assert_eq!(options(&again), options(&schema));
        // The index's table is described as ScyllaDB does, commented out.
        let rows = describe(&schema, "DESCRIBE MATERIALIZED VIEW t_v_idx_index").expect("described");
        assert_eq!(texts(&rows, 1), ["view"]);
        let view = &texts(&rows, 3)[0];
        assert!(
            view.starts_with(&format!("{INDEX_VIEW_WARNING}CREATE MATERIALIZED VIEW ks.t_v_idx_index AS")),
            "{view}"
        );
        assert!(view.ends_with("'propagation_delay_in_seconds': '3600'};\n*/"), "{view}");
    }

    #[test]
    fn scylladb_table_options_are_kept_and_described() {
        let create = "CREATE TABLE ks.t (k int PRIMARY KEY) WITH paxos_grace_seconds = 4321 \
                      AND tombstone_gc = {'mode': 'immediate', 'propagation_delay_in_seconds': '5'}";
        let schema = schema_of(&[SCHEMA[0], SCHEMA[1], create]);
        let text = &texts(&describe(&schema, "DESCRIBE TABLE t").expect("described"), 3)[0];
        assert!(text.contains("\n    AND paxos_grace_seconds = 4321\n    AND speculative_retry = "), "{text}");
        assert!(text.ends_with("\n    AND tombstone_gc = {'mode': 'immediate', 'propagation_delay_in_seconds': '5'};"));
        let again = schema_of(&[SCHEMA[0], SCHEMA[1], text]);
        let options = |s: &Schema| s.table("ks", "t").expect("table").options.clone();
        assert_eq!(options(&again), options(&schema));
        // A bare name finds a user type too (ScyllaDB's generic DESCRIBE).
        assert_eq!(texts(&describe(&schema, "DESCRIBE addr").expect("described"), 1), ["type"]);
    }

    #[test]
    fn names_are_quoted_only_when_they_must_be() {
        assert_eq!(maybe_quote("plain_1"), "plain_1");
        assert_eq!(maybe_quote("Upper"), "\"Upper\"");
        assert_eq!(maybe_quote("select"), "\"select\"");
        assert_eq!(maybe_quote("a\"b"), "\"a\"\"b\"");
        assert_eq!(double(1.0), "1.0");
        assert_eq!(double(0.01), "0.01");
    }
}
