//! The schema file's format: what the coordinator's schema service writes
//! after each change ([`render`], registered at start) and what a starting
//! node reads back ([`load`]).
//!
//! The schema file is CQL: one CREATE KEYSPACE / TYPE / TABLE per line, with
//! table ids kept in `WITH id = ...`, re-read through the parser at start.
//! Stored cells are keyed by column id, and ids follow declaration order only
//! until a column is dropped, so each CREATE TABLE also lists its column ids
//! and next column id in options only this file's loader accepts (see
//! `COLUMN_IDS`); to clients they are unknown options like any other.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use shoal_schema::view::views_of;
use shoal_schema::{ClusteringOrder, ColumnKind, KeyspaceMeta, Schema, TableMeta, UserType};

use crate::ast::{OptionValue, Statement};
use crate::describe::{self, literal, map_literal, ViewLayout};
use crate::error::{CqlError, CqlResult};
use crate::{ddl, dropped_columns, system, user_types};

/// Schema-file-only table option: each column's id, by column name.
const COLUMN_IDS: &str = "shoal_column_ids";
/// Schema-file-only table option: the table's `next_column_id`, which is
/// above every dropped column's id, so none is reused after a restart.
const NEXT_COLUMN_ID: &str = "shoal_next_column_id";

/// Schema-file-only table option: the table is a CDC log table. Its base's
/// CREATE TABLE, read first, made a new log table of that name; this
/// line replaces it with the saved one (id, column ids, options).
const CDC_LOG: &str = "shoal_cdc_log";

/// The first line of a schema agreed through group 0: the index of its
/// schema entry, which gives its version (`Schema::version_at`).
const GROUP0_INDEX: &str = "-- group0 schema entry ";

/// The line before each CREATE INDEX: the id of the table holding the
/// index, so its data is found again after a restart.
const INDEX_VIEW_ID: &str = "-- index view id ";

/// The line before each CREATE FUNCTION: its body in hex, as the body may
/// span lines (the CREATE FUNCTION line itself says `AS ''`).
const FUNCTION_BODY: &str = "-- function body ";

/// Reads the schema file (if any) and returns the node's starting schema,
/// system keyspaces included. Call once at start, before shards run (so
/// the blocking read stalls no shard).
pub fn load(path: &Path) -> CqlResult<Schema> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(CqlError::Server(format!("cannot read schema file {}: {e}", path.display()))),
    };
    parse(&text, path)
}

/// The schema that the schema file's `text` describes, system keyspaces
/// included; `path` is for error messages.
fn parse(text: &str, path: &Path) -> CqlResult<Schema> {
    let mut schema = Schema::empty();
    for keyspace in system::system_keyspaces() {
        schema.keyspaces.insert(keyspace.name.clone(), Arc::new(keyspace));
    }
    let mut version = uuid::Uuid::new_v4();
    let mut view_id = None;
    let mut function_body = None;
    let mut cdc_logs = Vec::new();
    for (number, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let failed =
            |e: &dyn std::fmt::Display| CqlError::Server(format!("schema file {}:{}: {e}", path.display(), number + 1));
        if let Some(index) = line.strip_prefix(GROUP0_INDEX) {
            version = Schema::version_at(index.trim().parse::<u64>().map_err(|e| failed(&e))?);
            continue;
        }
        if let Some(id) = line.strip_prefix(INDEX_VIEW_ID) {
            view_id = Some(id.trim().parse::<uuid::Uuid>().map_err(|e| failed(&e))?);
            continue;
        }
        if let Some(hex) = line.strip_prefix(FUNCTION_BODY) {
            let bytes = shoal_schema::literal::parse_hex(hex.trim()).map_err(|e| failed(&e))?;
            function_body = Some(String::from_utf8(bytes).map_err(|e| failed(&e))?);
            continue;
        }
        let mut parsed = crate::parser::parse_statement(line).map_err(|e| failed(&e))?;
        if let Statement::CreateFunction(create) = &mut parsed.statement {
            create.body = function_body.take().unwrap_or_default();
        }
        if crate::auth::restore(&mut schema, &parsed.statement).map_err(|e| failed(&e))? {
            continue;
        }
        if let Statement::CreateIndex(create) = &mut parsed.statement {
            create.view_id = view_id.take();
        }
        // Taken out before `ddl::apply`, which (as for clients) rejects them.
        if let Some(log) = take_cdc_log_mark(&mut parsed.statement) {
            let mut meta = schema.keyspaces.get(&log.0).ok_or_else(|| failed(&"no keyspace"))?.as_ref().clone();
            meta.tables.remove(&log.1);
            schema.keyspaces.insert(log.0.clone(), Arc::new(meta));
            cdc_logs.push(log);
        }
        let ids = take_column_ids(&mut parsed.statement).map_err(|e| failed(&e))?;
        if let Some((next, _)) = ddl::apply(&schema, &parsed.statement, None).map_err(|e| failed(&e))? {
            schema = next;
        }
        let created = match &parsed.statement {
            Statement::CreateTable(table) => Some((table.keyspace.as_deref(), &table.name)),
            Statement::CreateView(view) => Some((view.keyspace.as_deref(), &view.name)),
            _ => None,
        };
        if let (Some(ids), Some((keyspace, name))) = (ids, created) {
            let keyspace = ddl::qualify(keyspace, None).map_err(|e| failed(&e))?;
            restore_column_ids(&mut schema, keyspace, name, ids).map_err(|e| failed(&e))?;
        }
    }
    // Marked last: the log's saved column drops replay as ALTER TABLEs,
    // which a log table refuses.
    for (keyspace, name) in cdc_logs {
        let Some(table) = schema.table(&keyspace, &name) else { continue };
        let mut table = table.as_ref().clone();
        table.options.cdc_log = true;
        let mut meta = schema.keyspaces[&keyspace].as_ref().clone();
        meta.tables.insert(name, Arc::new(table));
        schema.keyspaces.insert(keyspace, Arc::new(meta));
    }
    schema.version = version;
    Ok(schema)
}

/// Removes the CDC log mark from a CREATE TABLE; the table's keyspace and
/// name when it was there.
fn take_cdc_log_mark(statement: &mut Statement) -> Option<(String, String)> {
    let Statement::CreateTable(create) = statement else { return None };
    let before = create.options.len();
    create.options.retain(|(name, _)| !name.eq_ignore_ascii_case(CDC_LOG));
    let keyspace = create.keyspace.clone()?;
    (create.options.len() != before).then(|| (keyspace, create.name.clone()))
}

/// The schema `text` (what [`render`] wrote) describes; for schemas that
/// reach a node through group 0.
pub fn parse_text(text: &str) -> Result<Schema, String> {
    parse(text, Path::new("(group 0 schema entry)")).map_err(|e| e.to_string())
}

/// A table's column ids as the schema file keeps them.
struct ColumnIds {
    by_name: BTreeMap<String, u32>,
    next: u32,
}

/// Removes the schema-file-only options from a CREATE TABLE or CREATE
/// MATERIALIZED VIEW and returns
/// them; `None` for other statements and for files written before ids were
/// kept, whose tables get ids in declaration order, as they always did.
fn take_column_ids(statement: &mut Statement) -> CqlResult<Option<ColumnIds>> {
    let options = match statement {
        Statement::CreateTable(create) => &mut create.options,
        Statement::CreateView(create) => &mut create.options,
        _ => return Ok(None),
    };
    let ours = |name: &str| name.eq_ignore_ascii_case(COLUMN_IDS) || name.eq_ignore_ascii_case(NEXT_COLUMN_ID);
    let (taken, kept): (Vec<_>, Vec<_>) = std::mem::take(options).into_iter().partition(|(n, _)| ours(n));
    *options = kept;
    let bad = |what: &str| CqlError::Server(format!("invalid {what}"));
    let id = |text: &str, what: &str| text.parse::<u32>().map_err(|_| bad(what));
    let (mut by_name, mut next) = (None, None);
    for (name, value) in taken {
        match (name.to_ascii_lowercase().as_str(), value) {
            (COLUMN_IDS, OptionValue::Map(entries)) => {
                let mut map = BTreeMap::new();
                for (column, text) in entries {
                    let column_id = id(&text, COLUMN_IDS)?;
                    if map.insert(column, column_id).is_some() {
                        return Err(bad(COLUMN_IDS));
                    }
                }
                by_name = Some(map);
            }
            (NEXT_COLUMN_ID, OptionValue::Number(text)) => next = Some(id(&text, NEXT_COLUMN_ID)?),
            (other, _) => return Err(bad(other)),
        }
    }
    match (by_name, next) {
        (Some(by_name), Some(next)) => Ok(Some(ColumnIds { by_name, next })),
        (None, None) => Ok(None),
        _ => Err(CqlError::Server(format!("{COLUMN_IDS} and {NEXT_COLUMN_ID} go together"))),
    }
}

/// Gives the just-created table its saved column ids. Refuses ids that do
/// not match the columns one to one, or that `next` would hand out again:
/// loading them would read stored cells under the wrong columns.
fn restore_column_ids(schema: &mut Schema, keyspace: &str, name: &str, ids: ColumnIds) -> CqlResult<()> {
    let bad = |why: String| CqlError::Server(format!("{COLUMN_IDS} of {keyspace}.{name}: {why}"));
    let mut table = schema.table(keyspace, name).ok_or_else(|| bad("no such table".to_string()))?.as_ref().clone();
    if ids.by_name.len() != table.columns.len() {
        return Err(bad(format!("{} ids for {} columns", ids.by_name.len(), table.columns.len())));
    }
    let mut seen = BTreeSet::new();
    for column in &mut table.columns {
        let id = *ids.by_name.get(&column.name).ok_or_else(|| bad(format!("no id for column {}", column.name)))?;
        if id >= ids.next || !seen.insert(id) {
            return Err(bad(format!("id {id} of column {} is reused or not below {NEXT_COLUMN_ID}", column.name)));
        }
        column.id = id;
    }
    table.next_column_id = ids.next;
    let mut meta = schema.keyspaces[keyspace].as_ref().clone();
    meta.tables.insert(name.to_string(), Arc::new(table));
    schema.keyspaces.insert(keyspace.to_string(), Arc::new(meta));
    Ok(())
}

/// The user keyspaces and tables as CQL, one statement per line.
pub fn render(schema: &Schema) -> String {
    let mut out = String::new();
    if let Some(index) = schema.group0_index() {
        let _ = writeln!(out, "{GROUP0_INDEX}{index}");
    }
    for keyspace in schema.keyspaces.values().filter(|k| !system::is_system_keyspace(&k.name)) {
        let _ = writeln!(out, "{}", create_keyspace(keyspace));
        for udt in user_types::in_dependency_order(keyspace) {
            let _ = writeln!(out, "{}", create_type(udt));
        }
        for function in &keyspace.functions.functions {
            let hex: String = function.body.bytes().map(|b| format!("{b:02x}")).collect();
            let _ = writeln!(out, "{FUNCTION_BODY}{hex}");
            let _ = writeln!(out, "{}", describe::create_function(function, quote, None).replace('\n', " "));
        }
        for aggregate in &keyspace.functions.aggregates {
            let _ = writeln!(out, "{}", describe::create_aggregate(aggregate, quote).replace('\n', " "));
        }
        for table in keyspace.tables.values().filter(|t| t.view_of.is_none()) {
            let _ = writeln!(out, "{}", create_table(table));
            for index in &table.indexes {
                let _ = writeln!(out, "{INDEX_VIEW_ID}{}", index.view_id);
                let options = describe::index_options(keyspace, index);
                let with = if options.is_empty() { String::new() } else { format!(" WITH {}", options.join(" AND ")) };
                let _ = writeln!(out, "{}{with}", describe::create_index(table, index, quote));
            }
            for view in views_of(keyspace, &table.name) {
                let layout = ViewLayout { newline: " ", with: " WITH ", and: " AND " };
                let mut options = internal_options(view, view.columns.iter().map(|c| (c.name.as_str(), c.id)));
                options.extend(describe::option_list(&view.options));
                let _ = writeln!(out, "{}", describe::create_view(view, quote, &options, &layout));
            }
        }
    }
    out.push_str(&crate::auth::render(&schema.roles));
    out
}

fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn create_keyspace(keyspace: &KeyspaceMeta) -> String {
    format!(
        "CREATE KEYSPACE {} WITH replication = {} AND durable_writes = {}",
        quote(&keyspace.name),
        map_literal(&keyspace.replication),
        keyspace.durable_writes
    )
}

fn create_type(udt: &UserType) -> String {
    let fields: Vec<String> = udt.fields.iter().map(|(name, ty)| format!("{} {ty}", quote(name))).collect();
    format!("CREATE TYPE {}.{} ({})", quote(&udt.keyspace), quote(&udt.name), fields.join(", "))
}

/// The CREATE TABLE that rebuilds `table`, dropped columns included, and
/// the drops (and re-adds) that follow it, one statement per line.
fn create_table(table: &TableMeta) -> String {
    let declared = dropped_columns::columns_with_history(table);
    let mut columns: Vec<String> = declared
        .iter()
        .map(|(name, ty, kind, _)| {
            format!("{} {ty}{}", quote(name), if *kind == ColumnKind::Static { " static" } else { "" })
        })
        .collect();
    let pk: Vec<String> = table.partition_key().map(|c| quote(&c.name)).collect();
    let ck: Vec<String> = table.clustering_key().map(|c| quote(&c.name)).collect();
    let mut key = format!("({})", pk.join(", "));
    for c in &ck {
        key.push_str(", ");
        key.push_str(c);
    }
    columns.push(format!("PRIMARY KEY ({key})"));
    let ids = declared.iter().map(|(name, _, _, id)| (*name, *id));
    let mut with = internal_options(table, ids);
    with.extend(describe::option_list(&table.options));
    let name = format!("{}.{}", quote(&table.keyspace), quote(&table.name));
    let mut lines = vec![format!("CREATE TABLE {name} ({}) WITH {}", columns.join(", "), with.join(" AND "))];
    lines.extend(dropped_columns::history(table, &name, quote));
    lines.join("\n")
}

/// A table's or view's options that keep its identity: its id, column
/// ids, next column id, and clustering order.
fn internal_options<'t>(table: &TableMeta, ids: impl Iterator<Item = (&'t str, u32)>) -> Vec<String> {
    let ids: Vec<String> = ids.map(|(name, id)| format!("{}: {id}", literal(name))).collect();
    let mut with = vec![
        format!("id = {}", table.id),
        format!("{COLUMN_IDS} = {{{}}}", ids.join(", ")),
        format!("{NEXT_COLUMN_ID} = {}", table.next_column_id),
    ];
    if table.options.cdc_log {
        with.push(format!("{CDC_LOG} = true"));
    }
    if table.options.compact_storage {
        with.push("COMPACT STORAGE".to_string());
    }
    if table.clustering_key_len() > 0 {
        let orders: Vec<String> = table
            .clustering_key()
            .map(|c| format!("{} {}", quote(&c.name), if c.order == ClusteringOrder::Desc { "DESC" } else { "ASC" }))
            .collect();
        with.push(format!("CLUSTERING ORDER BY ({})", orders.join(", ")));
    }
    with
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(schema: &Schema, statements: &[&str]) -> Schema {
        statements.iter().zip(1_000..).fold(schema.clone(), |schema, (text, now_us)| {
            let mut parsed = crate::parser::parse_statement(text).expect("test statement parses");
            dropped_columns::stamp(&mut parsed.statement, || now_us);
            ddl::apply(&schema, &parsed.statement, None).expect("test statement applies").expect("not a no-op").0
        })
    }

    fn reload(text: &str) -> CqlResult<Schema> {
        parse(text, Path::new("schema.cql"))
    }

    fn ids(table: &TableMeta) -> Vec<(&str, u32)> {
        table.columns.iter().map(|c| (c.name.as_str(), c.id)).collect()
    }

    const KEYSPACE: &str = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}";

    #[test]
    fn compact_storage_survives_the_schema_file() {
        let before = run(
            &Schema::empty(),
            &[
                KEYSPACE,
                "CREATE TABLE ks.d (k int, c int, v int, PRIMARY KEY (k, c)) WITH COMPACT STORAGE",
                "CREATE TABLE ks.s (k int PRIMARY KEY, a int) WITH COMPACT STORAGE",
                "CREATE TABLE ks.t (k int PRIMARY KEY, a int)",
            ],
        );
        let after = reload(&render(&before)).expect("rendered schema loads");
        let compact = |name: &str| after.table("ks", name).expect("table").options.compact_storage;
        assert!(compact("d") && compact("s") && !compact("t"));
        assert_eq!(after.keyspaces["ks"].tables, before.keyspaces["ks"].tables);
    }

    #[test]
    fn column_ids_survive_the_schema_file_after_drop_and_add() {
        let before = run(
            &Schema::empty(),
            &[
                KEYSPACE,
                "CREATE TABLE ks.t (k int, c text, s int static, a int, b int, PRIMARY KEY (k, c))",
                "ALTER TABLE ks.t DROP a",
                "ALTER TABLE ks.t ADD d int",
                "ALTER TABLE ks.t DROP (d, b)",
                "ALTER TABLE ks.t ADD (b blob, \"odd 'name\" int)",
                "ALTER TABLE ks.t RENAME c TO c2",
                "CREATE TABLE ks.u (k int PRIMARY KEY, v int)",
                "ALTER TABLE ks.u DROP v",
            ],
        );
        let table = before.table("ks", "t").expect("table t");
        // b, dropped and added again as text, takes its id back.
        assert_eq!(ids(table), [("k", 0), ("c2", 1), ("s", 2), ("b", 4), ("odd 'name", 6)]);
        assert_eq!(table.next_column_id, 7);
        let dropped: Vec<(&str, u32, i64)> =
            table.dropped_columns.iter().map(|(n, d)| (n.as_str(), d.id, d.dropped_at_us)).collect();
        assert_eq!(dropped, [("a", 3, 1_002), ("b", 4, 1_004), ("d", 5, 1_004)]);
        let text = render(&before);
        let after = reload(&text).expect("rendered schema loads");
        for name in ["t", "u"] {
            assert_eq!(after.table("ks", name), before.table("ks", name));
        }
        assert_eq!(after.table("ks", "u").expect("table u").next_column_id, 2);
        // A dropped column's id comes back with its name only.
        let after = run(&after, &["ALTER TABLE ks.t ADD a int", "ALTER TABLE ks.t ADD e int"]);
        assert_eq!(after.table("ks", "t").and_then(|t| t.column("a")).map(|c| c.id), Some(3));
        assert_eq!(after.table("ks", "t").and_then(|t| t.column("e")).map(|c| c.id), Some(7));
        assert_eq!(render(&reload(&text).expect("rendered schema loads")), text);
    }

    #[test]
    fn materialized_views_survive_the_schema_file() {
        let before = run(
            &Schema::empty(),
            &[
                KEYSPACE,
                "CREATE TABLE ks.t (p int, c int, v int, w int, PRIMARY KEY (p, c)) WITH CLUSTERING ORDER BY (c DESC)",
                "CREATE MATERIALIZED VIEW ks.mv AS SELECT * FROM ks.t WHERE v IS NOT NULL AND p IS NOT NULL \
                 AND c IS NOT NULL PRIMARY KEY (v, p, c) WITH comment = 'by v'",
                "CREATE MATERIALIZED VIEW ks.filtered AS SELECT * FROM ks.t WHERE v >= 5 AND p IN (1, 2) \
                 AND c != 3 PRIMARY KEY (v, p, c)",
                "ALTER TABLE ks.t ADD x int",
            ],
        );
        let filtered = before.table("ks", "filtered").and_then(|v| v.materialized.as_ref()).expect("view filtered");
        assert_eq!(filtered.where_clause, "v >= 5 AND p IN (1, 2) AND c != 3");
        assert_eq!(filtered.filter.len(), 3);
        let view = before.table("ks", "mv").expect("view mv");
        assert_eq!(view.column("x").map(|c| c.id), Some(5), "an added base column joins a SELECT * view");
        assert_eq!(view.column("c").map(|c| c.order), Some(ClusteringOrder::Desc), "the base's order is kept");
        let text = render(&before);
        let after = reload(&text).expect("rendered schema loads");
        assert_eq!(after.table("ks", "mv"), before.table("ks", "mv"));
        assert_eq!(after.table("ks", "filtered"), before.table("ks", "filtered"));
        assert_eq!(render(&after), text);
    }

    #[test]
    fn files_without_column_ids_load_in_declaration_order() {
        let text = format!("{KEYSPACE}\nCREATE TABLE ks.t (k int, v int, c int, PRIMARY KEY (k, c))\n");
        let schema = reload(&text).expect("schema file loads");
        let table = schema.table("ks", "t").expect("table t");
        assert_eq!(ids(table), [("k", 0), ("c", 2), ("v", 1)]);
        assert_eq!(table.next_column_id, 3);
    }

    #[test]
    fn clients_cannot_set_column_ids() {
        let schema = run(&Schema::empty(), &[KEYSPACE, "CREATE TABLE ks.t (k int PRIMARY KEY)"]);
        for text in [
            "CREATE TABLE ks.u (k int PRIMARY KEY) WITH shoal_column_ids = {'k': 5} AND shoal_next_column_id = 6",
            "CREATE TABLE ks.u (k int PRIMARY KEY) WITH shoal_next_column_id = 6",
            "ALTER TABLE ks.t WITH shoal_column_ids = {'k': 5}",
        ] {
            let parsed = crate::parser::parse_statement(text).expect("test statement parses");
            let e = ddl::apply(&schema, &parsed.statement, None).expect_err("client option refused");
            assert!(matches!(&e, CqlError::Syntax(m) if m.starts_with("Unknown property 'shoal_")), "{text}: {e:?}");
        }
    }

    #[test]
    fn inconsistent_column_ids_are_refused() {
        let table = "CREATE TABLE ks.t (k int, v int, PRIMARY KEY (k)) WITH";
        for with in [
            "shoal_column_ids = {'k': 0, 'v': 1}",
            "shoal_next_column_id = 2",
            "shoal_column_ids = {'k': 0} AND shoal_next_column_id = 2",
            "shoal_column_ids = {'k': 0, 'w': 1} AND shoal_next_column_id = 2",
            "shoal_column_ids = {'k': 0, 'v': 0} AND shoal_next_column_id = 2",
            "shoal_column_ids = {'k': 0, 'v': 2} AND shoal_next_column_id = 2",
            "shoal_column_ids = {'k': 0, 'v': -1} AND shoal_next_column_id = 2",
            "shoal_column_ids = {'k': 0, 'k': 1, 'v': 2} AND shoal_next_column_id = 3",
            "shoal_column_ids = 1 AND shoal_next_column_id = 2",
        ] {
            let text = format!("{KEYSPACE}\n{table} {with}\n");
            assert!(reload(&text).is_err(), "{with}");
        }
        let text = format!("{KEYSPACE}\n{table} shoal_column_ids = {{'k': 3, 'v': 1}} AND shoal_next_column_id = 4\n");
        let schema = reload(&text).expect("schema file loads");
        let table = schema.table("ks", "t").expect("table t");
        assert_eq!(ids(table), [("k", 3), ("v", 1)]);
        assert_eq!(table.next_column_id, 4);
    }

    #[test]
    fn user_types_survive_the_schema_file_in_dependency_order() {
        let before = run(
            &Schema::empty(),
            &[
                KEYSPACE,
                "CREATE TYPE ks.z (a int)",
                "CREATE TYPE ks.\"B\" (z frozen<z>, l list<text>)",
                "CREATE TYPE ks.a (b frozen<\"B\">)",
                "ALTER TYPE ks.z ADD c text",
                "ALTER TYPE ks.z RENAME a TO a2",
                "CREATE TABLE ks.t (k frozen<a> PRIMARY KEY, v z, m map<int, frozen<\"B\">>)",
            ],
        );
        let text = render(&before);
        let order: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("CREATE TYPE ")).collect();
        assert_eq!(order[0], "\"ks\".\"z\" (\"a2\" int, \"c\" text)");
        assert!(order[1].starts_with("\"ks\".\"B\" "), "{text}");
        assert!(order[2].starts_with("\"ks\".\"a\" "), "{text}");
        let after = reload(&text).expect("rendered schema loads");
        assert_eq!(after.keyspace("ks").map(|k| &k.types), before.keyspace("ks").map(|k| &k.types));
        assert_eq!(after.table("ks", "t"), before.table("ks", "t"));
        // The table's column carries the renamed and added fields, nested.
        let column = before.table("ks", "t").and_then(|t| t.column("k")).expect("column k");
        let frozen = |name: &str| format!("{:?}", column.ty).contains(name);
        assert!(frozen("\"a2\"") && frozen("\"c\""), "{:?}", column.ty);
    }

    #[test]
    fn functions_and_aggregates_survive_the_schema_file() {
        let before = run(
            &Schema::empty(),
            &[
                KEYSPACE,
                "CREATE FUNCTION ks.\"Add\"(s int, \"V\" int) CALLED ON NULL INPUT RETURNS int LANGUAGE lua AS $$\n-- it's 'two' lines\nreturn s + (V or 0)$$",
                "CREATE FUNCTION ks.fin(s int) RETURNS NULL ON NULL INPUT RETURNS text LANGUAGE lua AS 'return s'",
                "CREATE AGGREGATE ks.agg(int) SFUNC \"Add\" STYPE int FINALFUNC fin INITCOND 7",
            ],
        );
        let text = render(&before);
        let after = reload(&text).expect("rendered schema loads");
        let functions = |s: &Schema| s.keyspace("ks").map(|k| k.functions.clone());
        assert_eq!(functions(&after), functions(&before), "{text}");
        assert_eq!(before.keyspace("ks").map(|k| k.functions.functions.len()), Some(2));
        assert_eq!(before.keyspace("ks").map(|k| k.functions.aggregates.len()), Some(1));
    }
}
