//! The settings `system.config` lists, and the ones a client may change
//! there while the node runs (`UPDATE system.config SET value = '50'
//! WHERE name = 'select_internal_page_size'`), as in ScyllaDB.
//!
//! A live setting is a per-shard copy: an UPDATE sets it on every shard of
//! the node it reaches (by message, like the trace probability), and lasts
//! until the node stops; no lock sits on the data path.

use std::cell::Cell;

use shoal_schema::CqlType;

use crate::ast::{Assignment, Operator, Relation, Update};
use crate::error::{invalid, CqlError, CqlResult};
use crate::values::{eval_required, Bindings, Receiver};

/// Rows per internal page of a statement that reads everything to answer
/// (aggregates, GROUP BY), unless changed: ScyllaDB's default.
const SELECT_INTERNAL_PAGE_SIZE_DEFAULT: usize = 10_000;

thread_local! {
    static SELECT_INTERNAL_PAGE_SIZE: Cell<usize> = const { Cell::new(SELECT_INTERNAL_PAGE_SIZE_DEFAULT) };
}

/// This shard's `select_internal_page_size`.
pub fn select_internal_page_size() -> usize {
    SELECT_INTERNAL_PAGE_SIZE.with(Cell::get)
}

/// The rows of `system.config` (name, source, type, value), as text for
/// `system` to serve. Schema changes always go through group 0 (Raft), so
/// `consistent_cluster_management` is true and fixed; so is
/// `restrict_future_timestamp`, false.
pub(crate) fn rows() -> Vec<[String; 4]> {
    let page_size = select_internal_page_size();
    let source = if page_size == SELECT_INTERNAL_PAGE_SIZE_DEFAULT { "default" } else { "cql" };
    let row = |cells: [&str; 4]| cells.map(str::to_string);
    vec![
        row(["consistent_cluster_management", "default", "bool", "true"]),
        row(["select_internal_page_size", source, "unsigned", &page_size.to_string()]),
        // ScyllaDB refuses USING TIMESTAMP more than 3 days ahead when this
        // is true; Shoal takes any timestamp, as Cassandra does.
        row(["restrict_future_timestamp", "default", "bool", "false"]),
    ]
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
        "consistent_cluster_management" | "restrict_future_timestamp" => {
            Err(invalid(format!("Option {name} is not live-updatable")))
        }
        _ => Err(invalid(format!("Unknown configuration option {name}"))),
    }
}
