//! ScyllaDB's Change Data Capture, schema side: the `cdc` table option and
//! the CDC log table it keeps beside its base (`<table>_scylla_cdc_log`),
//! as `cdc/log.cc` builds it.
//!
//! Invariants:
//! - A base table whose `cdc` options say `enabled` has a log table of
//!   that name in its keyspace with `TableOptions::cdc_log` set, whose
//!   columns follow the base's: `cdc$stream_id` (partition key),
//!   `cdc$time`, `cdc$batch_seq_no` (clustering), `cdc$operation`,
//!   `cdc$ttl`, `cdc$end_of_batch`, then each base column under its own
//!   name (non-frozen collections frozen, a non-frozen list as
//!   `map<timeuuid, T>`), a `cdc$deleted_<c>` boolean for each static and
//!   regular column and a `cdc$deleted_elements_<c>` set for each
//!   non-frozen one.
//! - Disabling CDC keeps the log table (inactive); re-enabling reattaches
//!   it, its id, column ids and its own options kept. Dropping the base
//!   drops its log. A log table's columns change only through its base.

use std::collections::BTreeMap;
use std::sync::Arc;

use shoal_schema::{ClusteringOrder, ColumnKind, ColumnMeta, CqlType, KeyspaceMeta, TableMeta, TableOptions};
use uuid::Uuid;

use crate::ast::AlterTableOp;
use crate::dropped_columns;
use crate::error::{invalid, CqlError, CqlResult};

/// The log table's name suffix.
pub const LOG_SUFFIX: &str = "_scylla_cdc_log";
/// ScyllaDB's default `ttl` of log rows: a day.
const DEFAULT_TTL_S: i32 = 86_400;

/// The log table of base table `table`.
pub fn log_name(table: &str) -> String {
    format!("{table}{LOG_SUFFIX}")
}

/// A table's CDC options, parsed from the normalized map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CdcOptions {
    pub enabled: bool,
    /// `false`, `true` or `full` (ScyllaDB's image modes).
    pub preimage: String,
    pub postimage: bool,
    /// `delta = 'full'` (else `keys`: only key columns in delta rows).
    pub delta_full: bool,
    /// Seconds a log row lives; 0: forever.
    pub ttl_s: i32,
}

impl CdcOptions {
    /// The options of `table`, when it sets any.
    pub fn of(table: &TableMeta) -> Option<CdcOptions> {
        let map = table.options.cdc.as_ref()?;
        let get = |k: &str| map.get(k).map(String::as_str).unwrap_or("");
        Some(CdcOptions {
            enabled: get("enabled") == "true",
            preimage: get("preimage").to_string(),
            postimage: get("postimage") == "true",
            delta_full: get("delta") != "keys",
            ttl_s: get("ttl").parse().unwrap_or(DEFAULT_TTL_S),
        })
    }

    pub fn preimage(&self) -> bool {
        self.preimage != "false"
    }
}

/// Whether writes to `table` are logged.
pub fn enabled(table: &TableMeta) -> bool {
    CdcOptions::of(table).is_some_and(|o| o.enabled)
}

/// The `cdc = {...}` map checked and normalized as ScyllaDB's
/// `cdc::options` does (its texts, all configuration errors): every key
/// shown, values lower case; nothing kept unless `enabled` is given.
pub fn options(entries: &[(String, String)]) -> CqlResult<Option<BTreeMap<String, String>>> {
    let config = |m: String| Err(CqlError::Config(m));
    let (mut enabled, mut preimage, mut postimage, mut delta, mut ttl) = (None, "false", false, "full", DEFAULT_TTL_S);
    for (key, raw) in entries {
        let value = raw.to_ascii_lowercase();
        let is_true = value == "true" || value == "1";
        let is_false = value == "false" || value == "0";
        match key.to_ascii_lowercase().as_str() {
            "enabled" if is_true || is_false => enabled = Some(is_true),
            "enabled" => return config(format!("Invalid value for CDC option \"enabled\": {raw}")),
            "preimage" if is_true => preimage = "true",
            "preimage" if is_false => preimage = "false",
            "preimage" if value == "full" => preimage = "full",
            "preimage" => return config(format!("Invalid value for CDC option \"preimage\": {raw}")),
            "postimage" if is_true || is_false => postimage = is_true,
            "postimage" => return config(format!("Invalid value for CDC option \"postimage\": {raw}")),
            "delta" if value == "keys" || value == "full" => delta = if value == "keys" { "keys" } else { "full" },
            "delta" => return config(format!("Invalid value for CDC option \"delta\": {raw}")),
            "ttl" => {
                let parsed: i64 = raw
                    .trim()
                    .parse()
                    .map_err(|_| CqlError::Config(format!("Invalid value for CDC option \"ttl\": {raw}")))?;
                if parsed > i64::from(i32::MAX) {
                    return config("Invalid CDC option: ttl too large".to_string());
                }
                if parsed < 0 {
                    return config("Invalid CDC option: ttl must be >= 0".to_string());
                }
                ttl = parsed as i32;
            }
            _ => return config(format!("Invalid CDC option: {key}")),
        }
    }
    let Some(enabled) = enabled else { return Ok(None) };
    let map = [
        ("enabled", enabled.to_string()),
        ("preimage", preimage.to_string()),
        ("postimage", postimage.to_string()),
        ("delta", delta.to_string()),
        ("ttl", ttl.to_string()),
    ];
    Ok(Some(map.into_iter().map(|(k, v)| (k.to_string(), v)).collect()))
}

/// Brings the log table of `base` (just created or altered in `keyspace`)
/// in line with it: created when CDC is turned on, its columns rebuilt
/// while it is on; left alone (inactive) while it is off.
pub fn follow_base(keyspace: &mut KeyspaceMeta, base: &TableMeta) -> CqlResult<()> {
    let Some(options) = CdcOptions::of(base).filter(|o| o.enabled) else { return Ok(()) };
    let name = log_name(&base.name);
    let existing = keyspace.tables.get(&name).cloned();
    if let Some(existing) = &existing {
        // A table of that name the user made (never a log) stays theirs.
        if !existing.options.cdc_log {
            return Err(invalid(format!(
                "Cannot create CDC log table for table {ks}.{t} because a table of name {ks}.{name} already exists",
                ks = base.keyspace,
                t = base.name
            )));
        }
    }
    if base.name.ends_with(LOG_SUFFIX) && keyspace.tables.get(&base.name).is_some_and(|t| t.options.cdc_log) {
        return Err(invalid(format!(
            "Cannot create a CDC log for a table {}.{}, because creating nested CDC logs is not allowed",
            base.keyspace, base.name
        )));
    }
    // A counter table (as `ddl::is_counter_table`, which names this module).
    if base.columns.iter().any(|c| !c.kind.is_primary_key() && c.ty.is_counter()) {
        return Err(invalid(format!(
            "Cannot create CDC log for table {}.{}. Counter support not implemented",
            base.keyspace, base.name
        )));
    }
    let log = log_table(base, &options, existing.as_deref());
    keyspace.tables.insert(name, Arc::new(log));
    Ok(())
}

/// Drops the log table of `base`, if it has one (a user table of that
/// name stays).
pub fn drop_log_of(keyspace: &mut KeyspaceMeta, base: &str) {
    let name = log_name(base);
    if keyspace.tables.get(&name).is_some_and(|t| t.options.cdc_log) {
        keyspace.tables.remove(&name);
    }
}

/// Refuses an ALTER TABLE of a log table's columns, with ScyllaDB's texts
/// (which differ while its base has CDC off).
pub fn check_log_alter(keyspace: &KeyspaceMeta, table: &TableMeta, op: &AlterTableOp) -> CqlResult<()> {
    if !table.options.cdc_log {
        return Ok(());
    }
    let base = table.name.strip_suffix(LOG_SUFFIX).and_then(|b| keyspace.tables.get(b));
    let active = base.is_some_and(|b| enabled(b));
    let message = match op {
        AlterTableOp::With(_) => return Ok(()),
        AlterTableOp::Rename(_) if active => "Cannot rename a column of a CDC log table.",
        AlterTableOp::Rename(_) => {
            "You cannot rename a column of a CDC log table. Although the base table has deactivated CDC, this \
             table will continue being a CDC log table until it is dropped."
        }
        _ if active => {
            "You cannot modify the set of columns of a CDC log table directly. Modify the base table instead."
        }
        _ => {
            "You cannot modify the set of columns of a CDC log table directly. Although the base table has \
             deactivated CDC, this table will continue being a CDC log table until it is dropped. If you want to \
             modify the columns in it, you can only do that by reenabling CDC on the base table, which will \
             reattach this log table. Then you will be able to modify the columns in the base table, and that \
             will have effect on the log table too. Modifying the columns of a CDC log table directly is never \
             allowed."
        }
    };
    Err(invalid(message))
}

/// The log table's column of base column `name`, whether it was deleted,
/// and which of its elements were.
pub fn deleted_column(name: &str) -> String {
    format!("cdc$deleted_{name}")
}

pub fn deleted_elements_column(name: &str) -> String {
    format!("cdc$deleted_elements_{name}")
}

/// The type a base column's value has in the log: non-frozen collections
/// and user types frozen, a non-frozen list as `map<timeuuid, T>` (so a
/// delta can name its elements).
pub fn log_type(ty: &CqlType) -> CqlType {
    match ty {
        CqlType::List(element) if ty.is_multi_cell() => {
            CqlType::Frozen(Box::new(CqlType::Map(Box::new(CqlType::Timeuuid), element.clone())))
        }
        _ if multi_cell(ty) => CqlType::Frozen(Box::new(ty.clone())),
        _ => ty.clone(),
    }
}

/// The type of `cdc$deleted_elements_<c>`: the set of the keys removed
/// (timeuuids for a list, field indexes for a user type).
fn deleted_elements_type(ty: &CqlType) -> CqlType {
    let key = match ty.unfrozen() {
        CqlType::List(_) => CqlType::Timeuuid,
        CqlType::Set(element) => element.as_ref().clone(),
        CqlType::Map(key, _) => key.as_ref().clone(),
        _ => CqlType::Smallint,
    };
    CqlType::Frozen(Box::new(CqlType::Set(Box::new(key))))
}

/// Whether a base column is non-frozen (logged element by element).
fn multi_cell(ty: &CqlType) -> bool {
    ty.is_multi_cell() || matches!(ty, CqlType::Udt(_))
}

/// The log table of `base`: a fresh one, or `old` with its columns
/// rebuilt (ids kept by name, the columns gone recorded as dropped).
fn log_table(base: &TableMeta, options: &CdcOptions, old: Option<&TableMeta>) -> TableMeta {
    let mut wanted: Vec<(String, CqlType, ColumnKind)> = vec![
        ("cdc$stream_id".into(), CqlType::Blob, ColumnKind::PartitionKey),
        ("cdc$time".into(), CqlType::Timeuuid, ColumnKind::Clustering),
        ("cdc$batch_seq_no".into(), CqlType::Int, ColumnKind::Clustering),
        ("cdc$operation".into(), CqlType::Tinyint, ColumnKind::Regular),
        ("cdc$ttl".into(), CqlType::Bigint, ColumnKind::Regular),
        ("cdc$end_of_batch".into(), CqlType::Boolean, ColumnKind::Regular),
    ];
    let keys = base.partition_key().chain(base.clustering_key());
    wanted.extend(keys.map(|c| (c.name.clone(), c.ty.clone(), ColumnKind::Regular)));
    let mut data: Vec<&ColumnMeta> = base.columns.iter().filter(|c| !c.kind.is_primary_key()).collect();
    data.sort_by_key(|c| (c.kind != ColumnKind::Static, c.id));
    for column in data {
        wanted.push((column.name.clone(), log_type(&column.ty), ColumnKind::Regular));
        wanted.push((deleted_column(&column.name), CqlType::Boolean, ColumnKind::Regular));
        if multi_cell(&column.ty) {
            wanted.push((
                deleted_elements_column(&column.name),
                deleted_elements_type(&column.ty),
                ColumnKind::Regular,
            ));
        }
    }
    let mut table = match old {
        Some(old) => old.clone(),
        None => TableMeta {
            id: Uuid::new_v4(),
            keyspace: base.keyspace.clone(),
            name: log_name(&base.name),
            columns: Vec::new(),
            options: new_log_options(base, options),
            next_column_id: 0,
            indexes: Vec::new(),
            view_of: None,
            materialized: None,
            dropped_columns: BTreeMap::new(),
        },
    };
    let now_us = shoal_runtime::clock::now_us();
    let gone: Vec<ColumnMeta> =
        table.columns.iter().filter(|c| !wanted.iter().any(|(n, ..)| n == &c.name)).cloned().collect();
    for column in &gone {
        dropped_columns::record(&mut table, column, now_us);
    }
    let (mut partition, mut clustering) = (0, 0);
    let mut columns = Vec::new();
    for (name, ty, kind) in wanted {
        let id = match table.columns.iter().find(|c| c.name == name && c.ty == ty) {
            Some(c) => c.id,
            None => {
                table.next_column_id += 1;
                table.next_column_id - 1
            }
        };
        let counter = match kind {
            ColumnKind::PartitionKey => Some(&mut partition),
            ColumnKind::Clustering => Some(&mut clustering),
            _ => None,
        };
        let position = counter.map_or(-1, |n| {
            *n += 1;
            *n - 1
        });
        columns.push(ColumnMeta { id, name, ty, kind, position, order: ClusteringOrder::Asc });
    }
    table.columns = columns;
    table.options.cdc_log = true;
    table.normalize_columns();
    table
}

/// ScyllaDB's options of a new log table: time-window compaction in at
/// most 24 windows of the log's TTL, no grace for tombstones when rows
/// expire anyway, no caching.
fn new_log_options(base: &TableMeta, cdc: &CdcOptions) -> TableOptions {
    let mut options = TableOptions {
        comment: format!("CDC log for {}.{}", base.keyspace, base.name),
        caching: [("enabled".to_string(), "false".to_string())].into(),
        ..TableOptions::default()
    };
    let mut compaction: BTreeMap<String, String> =
        [("class".to_string(), "org.apache.cassandra.db.compaction.TimeWindowCompactionStrategy".to_string())].into();
    if cdc.ttl_s > 0 {
        options.gc_grace_seconds = 0;
        let window_s = (cdc.ttl_s + 23) / 24;
        let window_min = (window_s + 59) / 60;
        compaction.insert("compaction_window_unit".into(), "MINUTES".into());
        compaction.insert("compaction_window_size".into(), window_min.to_string());
        compaction.insert("expired_sstable_check_frequency_seconds".into(), (window_s / 2).max(1).to_string());
    }
    options.compaction = compaction;
    options
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn options_are_normalized_as_scylladb_shows_them() {
        let map = options(&entries(&[("enabled", "TRUE"), ("preimage", "full"), ("ttl", "60")]))
            .expect("test value")
            .expect("test value");
        let shown: Vec<(&str, &str)> = map.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            shown,
            [("delta", "full"), ("enabled", "true"), ("postimage", "false"), ("preimage", "full"), ("ttl", "60")]
        );
        assert_eq!(options(&entries(&[("preimage", "true")])).expect("test value"), None);
        let bad = options(&entries(&[("enabled", "yes")])).expect_err("refused");
        assert!(bad.to_string().contains("Invalid value for CDC option \"enabled\": yes"), "{bad}");
        let bad = options(&entries(&[("enabled", "true"), ("colour", "red")])).expect_err("refused");
        assert!(bad.to_string().contains("Invalid CDC option: colour"), "{bad}");
        let bad = options(&entries(&[("enabled", "true"), ("ttl", "-1")])).expect_err("refused");
        assert!(bad.to_string().contains("ttl must be >= 0"), "{bad}");
    }

    fn apply(schema: &shoal_schema::Schema, text: &str) -> CqlResult<shoal_schema::Schema> {
        let mut parsed = crate::parser::parse_statement(text).expect("test statement parses");
        crate::dropped_columns::stamp(&mut parsed.statement, || 1_000);
        Ok(crate::ddl::apply(schema, &parsed.statement, None)?.expect("not a no-op").0)
    }

    fn schema_of(statements: &[&str]) -> shoal_schema::Schema {
        statements.iter().fold(shoal_schema::Schema::empty(), |s, text| apply(&s, text).expect("applies"))
    }

    const KS: &str = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}";

    fn column_list(table: &TableMeta) -> Vec<String> {
        table.columns.iter().map(|c| format!("{} {} {}", c.name, c.ty, c.kind.as_str())).collect()
    }

    #[test]
    fn a_log_table_has_scylladbs_columns() {
        let schema = schema_of(&[
            KS,
            "CREATE TABLE ks.t (p int, c text, v int, s int static, l list<int>, m map<int, text>, \
             PRIMARY KEY (p, c)) WITH cdc = {'enabled': true}",
        ]);
        let log = schema.table("ks", "t_scylla_cdc_log").expect("log table");
        assert!(log.options.cdc_log);
        assert_eq!(log.options.comment, "CDC log for ks.t");
        assert_eq!(log.options.gc_grace_seconds, 0);
        let mut columns = column_list(log);
        columns.sort();
        let mut expected = [
            "cdc$stream_id blob partition_key",
            "cdc$time timeuuid clustering",
            "cdc$batch_seq_no int clustering",
            "cdc$operation tinyint regular",
            "cdc$ttl bigint regular",
            "cdc$end_of_batch boolean regular",
            "p int regular",
            "c text regular",
            "s int regular",
            "cdc$deleted_s boolean regular",
            "v int regular",
            "cdc$deleted_v boolean regular",
            "l frozen<map<timeuuid, int>> regular",
            "cdc$deleted_l boolean regular",
            "cdc$deleted_elements_l frozen<set<timeuuid>> regular",
            "m frozen<map<int, text>> regular",
            "cdc$deleted_m boolean regular",
            "cdc$deleted_elements_m frozen<set<int>> regular",
        ]
        .map(String::from)
        .to_vec();
        expected.sort();
        assert_eq!(columns, expected);
    }

    #[test]
    fn the_log_follows_its_base_and_refuses_direct_changes() {
        let schema =
            schema_of(&[KS, "CREATE TABLE ks.t (p int PRIMARY KEY, v int, u int) WITH cdc = {'enabled': true}"]);
        let id = schema.table("ks", "t_scylla_cdc_log").expect("log").id;
        let refused = apply(&schema, "ALTER TABLE ks.t_scylla_cdc_log ADD c int").expect_err("refused");
        assert!(refused.to_string().contains("Modify the base table instead."), "{refused}");
        let refused = apply(&schema, "ALTER TABLE ks.t_scylla_cdc_log RENAME p TO q").expect_err("refused");
        assert!(refused.to_string().contains("Cannot rename a column of a CDC log table."), "{refused}");
        let schema = apply(&schema, "ALTER TABLE ks.t DROP u").expect("drop");
        let log = schema.table("ks", "t_scylla_cdc_log").expect("log");
        assert!(log.column("u").is_none() && log.column("cdc$deleted_u").is_none());
        assert!(log.dropped_columns.contains_key("cdc$deleted_u"));
        let schema = apply(&schema, "ALTER TABLE ks.t WITH cdc = {'enabled': false}").expect("disable");
        let log = schema.table("ks", "t_scylla_cdc_log").expect("inactive log kept");
        let refused = apply(&schema, "ALTER TABLE ks.t_scylla_cdc_log DROP v").expect_err("refused");
        assert!(refused.to_string().contains("Although the base table has deactivated CDC"), "{refused}");
        let schema = apply(&schema, "ALTER TABLE ks.t_scylla_cdc_log WITH comment = 'mine'").expect("options");
        let schema = apply(&schema, "ALTER TABLE ks.t WITH cdc = {'enabled': true}").expect("reattach");
        let reattached = schema.table("ks", "t_scylla_cdc_log").expect("log");
        assert_eq!((reattached.id, reattached.options.comment.as_str()), (log.id, "mine"));
        assert_eq!(reattached.id, id);
        let schema = apply(&schema, "DROP TABLE ks.t").expect("drop base");
        assert!(schema.table("ks", "t_scylla_cdc_log").is_none());
    }

    #[test]
    fn a_taken_log_name_is_refused() {
        let schema = schema_of(&[KS, "CREATE TABLE ks.t_scylla_cdc_log (p int PRIMARY KEY, v int)"]);
        let refused =
            apply(&schema, "CREATE TABLE ks.t (p int PRIMARY KEY) WITH cdc = {'enabled': true}").expect_err("refused");
        assert!(
            refused.to_string().contains(
                "Cannot create CDC log table for table ks.t because a table of name ks.t_scylla_cdc_log already exists"
            ),
            "{refused}"
        );
        let schema = apply(&schema, "CREATE TABLE ks.t (p int PRIMARY KEY)").expect("plain");
        assert!(apply(&schema, "ALTER TABLE ks.t WITH cdc = {'enabled': true}").is_err());
        // A user table of a log's name is an ordinary table.
        apply(&schema, "ALTER TABLE ks.t_scylla_cdc_log DROP v").expect("ordinary table");
    }

    #[test]
    fn log_tables_survive_the_schema_file() {
        let schema =
            schema_of(&[KS, "CREATE TABLE ks.t (p int PRIMARY KEY, v int, u int) WITH cdc = {'enabled': true}"]);
        let schema = apply(&schema, "ALTER TABLE ks.t DROP u").expect("drop");
        let schema = apply(&schema, "ALTER TABLE ks.t_scylla_cdc_log WITH comment = 'kept'").expect("options");
        let text = crate::schema_file::render(&schema);
        let back = crate::schema_file::parse_text(&text).expect("reloads");
        let (before, after) = (
            schema.table("ks", "t_scylla_cdc_log").expect("test value"),
            back.table("ks", "t_scylla_cdc_log").expect("test value"),
        );
        assert_eq!(after.id, before.id);
        assert!(after.options.cdc_log);
        assert_eq!(after.options.comment, "kept");
        assert_eq!(column_list(after), column_list(before));
        let ids = |t: &TableMeta| t.columns.iter().map(|c| c.id).collect::<Vec<_>>();
        assert_eq!(ids(after), ids(before));
        assert_eq!(
            back.table("ks", "t").expect("test value").options.cdc,
            schema.table("ks", "t").expect("test value").options.cdc
        );
    }
}
