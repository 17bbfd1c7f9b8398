//! The settings `system.config` lists, and the ones a client may change
//! there while the node runs (`UPDATE system.config SET value = '50'
//! WHERE name = 'select_internal_page_size'`), as in ScyllaDB:
//! `select_internal_page_size`, `query_tombstone_page_limit`, the
//! switches to Cassandra's readings of named and IN bind markers, the
//! compact storage guardrail, and the replication guardrails (kept in
//! `replication_guardrails`).
//!
//! A live setting is a per-shard copy: an UPDATE sets it on every shard of
//! the node it reaches (by message, like the trace probability), and lasts
//! until the node stops; no lock sits on the data path.

use std::cell::Cell;
use std::thread::LocalKey;

use shoal_schema::CqlType;

use crate::ast::{Assignment, Operator, Relation, Update};
use crate::error::{invalid, CqlError, CqlResult};
use crate::values::{eval_required, Bindings, Receiver};

/// Rows per internal page of a statement that reads everything to answer
/// (aggregates, GROUP BY), unless changed: ScyllaDB's default.
const SELECT_INTERNAL_PAGE_SIZE_DEFAULT: usize = 10_000;

/// Tombstones a replica passes before it cuts a page short, unless
/// changed: ScyllaDB's default.
const QUERY_TOMBSTONE_PAGE_LIMIT_DEFAULT: u64 = 10_000;

thread_local! {
    static SELECT_INTERNAL_PAGE_SIZE: Cell<usize> = const { Cell::new(SELECT_INTERNAL_PAGE_SIZE_DEFAULT) };
    static QUERY_TOMBSTONE_PAGE_LIMIT: Cell<u64> = const { Cell::new(QUERY_TOMBSTONE_PAGE_LIMIT_DEFAULT) };
    static SAME_NAME_SAME_VARIABLE: Cell<bool> = const { Cell::new(true) };
    static UPPERCASE_IN_MARKER_NAME: Cell<bool> = const { Cell::new(true) };
    static COMPACT_STORAGE_ALLOWED: Cell<bool> = const { Cell::new(true) };
}

/// This shard's `select_internal_page_size`.
pub fn select_internal_page_size() -> usize {
    SELECT_INTERNAL_PAGE_SIZE.with(Cell::get)
}

/// This shard's `query_tombstone_page_limit`, as a read command's
/// tombstone limit: 0 (no limit, as ScyllaDB reads it) is `usize::MAX`.
pub fn query_tombstone_page_limit() -> usize {
    match QUERY_TOMBSTONE_PAGE_LIMIT.with(Cell::get) {
        0 => usize::MAX,
        limit => usize::try_from(limit).unwrap_or(usize::MAX),
    }
}

/// `cql_duplicate_bind_variable_names_refer_to_same_variable`: whether
/// `p = :x AND c = :x` has one variable (ScyllaDB's default) or two
/// (Cassandra's way, chosen by setting it false).
pub fn same_name_same_variable() -> bool {
    SAME_NAME_SAME_VARIABLE.with(Cell::get)
}

/// `cql_in_bind_variable_name_uses_uppercase_operator`: whether the marker
/// of `c IN ?` is named `IN(c)` (ScyllaDB's default) or `in(c)` (Cassandra's).
pub fn uppercase_in_marker_name() -> bool {
    UPPERCASE_IN_MARKER_NAME.with(Cell::get)
}

/// `enable_create_table_with_compact_storage`: whether CREATE TABLE may
/// say WITH COMPACT STORAGE (ScyllaDB's guardrail; true, Cassandra's way,
/// unless changed).
pub fn compact_storage_allowed() -> bool {
    COMPACT_STORAGE_ALLOWED.with(Cell::get)
}

/// The live boolean settings: name and this shard's cell.
const BOOL_SETTINGS: [(&str, &LocalKey<Cell<bool>>); 3] = [
    ("cql_duplicate_bind_variable_names_refer_to_same_variable", &SAME_NAME_SAME_VARIABLE),
    ("cql_in_bind_variable_name_uses_uppercase_operator", &UPPERCASE_IN_MARKER_NAME),
    ("enable_create_table_with_compact_storage", &COMPACT_STORAGE_ALLOWED),
];

/// The rows of `system.config` (name, source, type, value), as text for
/// `system` to serve. Schema changes always go through group 0 (Raft), so
/// `consistent_cluster_management` is true and fixed; so is
/// `restrict_future_timestamp`, false.
pub(crate) fn rows() -> Vec<[String; 4]> {
    let page_size = select_internal_page_size();
    let source = if page_size == SELECT_INTERNAL_PAGE_SIZE_DEFAULT { "default" } else { "cql" };
    let row = |cells: [&str; 4]| cells.map(str::to_string);
    let bools = BOOL_SETTINGS.iter().map(|(name, cell)| {
        // All default to true.
        let value = cell.with(Cell::get);
        row([name, if value { "default" } else { "cql" }, "bool", if value { "true" } else { "false" }])
    });
    let tombstone_limit = QUERY_TOMBSTONE_PAGE_LIMIT.with(Cell::get);
    let tombstone_source = if tombstone_limit == QUERY_TOMBSTONE_PAGE_LIMIT_DEFAULT { "default" } else { "cql" };
    let mut rows = vec![
        row(["consistent_cluster_management", "default", "bool", "true"]),
        row(["select_internal_page_size", source, "unsigned", &page_size.to_string()]),
        row(["query_tombstone_page_limit", tombstone_source, "integer", &tombstone_limit.to_string()]),
        // ScyllaDB refuses USING TIMESTAMP more than 3 days ahead when this
        // is true; Shoal takes any timestamp, as Cassandra does.
        row(["restrict_future_timestamp", "default", "bool", "false"]),
        // This node's vnodes (fixed once it joined).
        row(["num_tokens", "default", "unsigned", &shoal_coordinator::cluster::tokens().len().to_string()]),
        // JSON, as ScyllaDB's values: Shoal runs Lua functions, which
        // ScyllaDB gates behind its experimental `udf` feature, and refuses
        // DateTieredCompactionStrategy (`restrict_dtcs: true`).
        row(["experimental_features", "default", "experimental features", "[\"udf\"]"]),
        row(["restrict_dtcs", "default", "tri_mode_restriction", "\"true\""]),
    ];
    rows.extend(bools);
    rows.extend(crate::replication_guardrails::rows());
    rows
}

/// The cell of live boolean setting `name`, if it is one.
fn bool_setting(name: &str) -> Option<&'static LocalKey<Cell<bool>>> {
    BOOL_SETTINGS.iter().find(|(known, _)| *known == name).map(|(_, cell)| *cell)
}

/// Whether `statement` writes `system.config` (`session` is the session's
/// keyspace).
pub(crate) fn is_config_update(statement: &Update, session: Option<&str>) -> bool {
    statement.keyspace.as_deref().or(session) == Some("system") && statement.table == "config"
}

/// Runs `UPDATE system.config SET value = v WHERE name = n`: sets the live
/// setting `n` on every shard of this node.
pub(crate) async fn update(statement: &Update, bindings: Bindings<'_>) -> CqlResult<()> {
    let text_of = |term, name| -> CqlResult<String> {
        let value = eval_required(term, Receiver { name, ty: &CqlType::Text }, bindings)?;
        Ok(String::from_utf8_lossy(&value).into_owned())
    };
    let (value, name) = match (&statement.assignments[..], &statement.where_clause[..]) {
        ([Assignment::Set { column, value }], [Relation::Simple { column: key, op: Operator::Eq, value: name }])
            if column == "value" && key == "name" =>
        {
            (text_of(value, "value")?, text_of(name, "name")?)
        }
        _ => return Err(invalid("Only UPDATE system.config SET value = ? WHERE name = ? is supported")),
    };
    if let Some(cell) = bool_setting(&name) {
        let on = match value.trim() {
            "true" | "1" => true,
            "false" | "0" => false,
            _ => return Err(invalid(format!("Invalid value '{value}' for {name}"))),
        };
        return shoal_coordinator::on_every_shard(move |_| async move { cell.with(|c| c.set(on)) })
            .await
            .map(drop)
            .map_err(|e| CqlError::Server(e.to_string()));
    }
    if let Some(parsed) = crate::replication_guardrails::parse(&name, &value) {
        let parsed = parsed?;
        return shoal_coordinator::on_every_shard(move |_| {
            let parsed = parsed.clone();
            async move { parsed.set() }
        })
        .await
        .map(drop)
        .map_err(|e| CqlError::Server(e.to_string()));
    }
    match name.as_str() {
        "select_internal_page_size" => {
            let rows = value
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|rows| *rows > 0)
                .ok_or_else(|| invalid(format!("Invalid value '{value}' for select_internal_page_size")))?;
            shoal_coordinator::on_every_shard(move |_| async move { SELECT_INTERNAL_PAGE_SIZE.with(|s| s.set(rows)) })
                .await
                .map_err(|e| CqlError::Server(e.to_string()))?;
            Ok(())
        }
        "query_tombstone_page_limit" => {
            let limit = value
                .trim()
                .parse::<u64>()
                .map_err(|_| invalid(format!("Invalid value '{value}' for query_tombstone_page_limit")))?;
            shoal_coordinator::on_every_shard(
                move |_| async move { QUERY_TOMBSTONE_PAGE_LIMIT.with(|s| s.set(limit)) },
            )
            .await
            .map_err(|e| CqlError::Server(e.to_string()))?;
            Ok(())
        }
        "consistent_cluster_management"
        | "restrict_future_timestamp"
        | "num_tokens"
        | "experimental_features"
        | "restrict_dtcs" => Err(invalid(format!("Option {name} is not live-updatable"))),
        _ => Err(invalid(format!("Unknown configuration option {name}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter_relations::in_marker_name;

    #[test]
    fn the_marker_switches_give_cassandras_readings() {
        let listed = |name: &str| rows().into_iter().find(|r| r[0] == name).map(|r| r[3].clone());
        assert_eq!(listed("cql_in_bind_variable_name_uses_uppercase_operator").as_deref(), Some("true"));
        assert_eq!(in_marker_name(false, "C"), "IN(C)");
        let parsed = |text: &str| crate::parser::parse_statement(text).expect("parses").bind_markers.len();
        assert_eq!(parsed("SELECT * FROM t WHERE p = :x AND c = :x"), 1);
        // This test's thread only: the cells are per thread (per shard).
        UPPERCASE_IN_MARKER_NAME.with(|c| c.set(false));
        SAME_NAME_SAME_VARIABLE.with(|c| c.set(false));
        assert_eq!(in_marker_name(true, "C"), "not in(C)");
        assert_eq!(parsed("SELECT * FROM t WHERE p = :x AND c = :x"), 2);
        assert_eq!(listed("cql_duplicate_bind_variable_names_refer_to_same_variable").as_deref(), Some("false"));
    }
}
