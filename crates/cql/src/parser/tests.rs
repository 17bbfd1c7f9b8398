//! Parser tests: one or more per statement form, error positions and
//! messages, and a no-panic sweep over prefixes of valid statements.

use shoal_schema::arithmetic::NumericOp;
use shoal_schema::{CqlType, UserType};

use super::{parse_statement, ParseError};
use crate::ast::*;

fn parse(text: &str) -> Parsed {
    match parse_statement(text) {
        Ok(parsed) => parsed,
        Err(e) => panic!("parsing {text:?} failed: {e}"),
    }
}

fn stmt(text: &str) -> Statement {
    parse(text).statement
}

fn err(text: &str) -> ParseError {
    match parse_statement(text) {
        Ok(parsed) => panic!("parsing {text:?} should fail, got {parsed:?}"),
        Err(e) => e,
    }
}

fn select(text: &str) -> Select {
    match stmt(text) {
        Statement::Select(s) => s,
        other => panic!("not a select: {other:?}"),
    }
}

fn insert(text: &str) -> Insert {
    match stmt(text) {
        Statement::Insert(s) => s,
        other => panic!("not an insert: {other:?}"),
    }
}

fn update(text: &str) -> Update {
    match stmt(text) {
        Statement::Update(s) => s,
        other => panic!("not an update: {other:?}"),
    }
}

fn create_table(text: &str) -> CreateTable {
    match stmt(text) {
        Statement::CreateTable(s) => s,
        other => panic!("not a create table: {other:?}"),
    }
}

fn alter_op(text: &str) -> AlterTableOp {
    match stmt(text) {
        Statement::AlterTable(s) => s.op,
        other => panic!("not an alter table: {other:?}"),
    }
}

fn lit_int(s: &str) -> Term {
    Term::Literal(Literal::Integer(s.into()))
}

fn lit_str(s: &str) -> Term {
    Term::Literal(Literal::String(s.into()))
}

fn col(name: &str) -> SelectorExpr {
    SelectorExpr::Column(name.into())
}

fn simple(column: &str, op: Operator, value: Term) -> Relation {
    Relation::Simple { column: column.into(), op, value }
}

/// The value of `k = <term>` in `SELECT * FROM t WHERE k = <term>`.
fn term(text: &str) -> Term {
    let s = select(&format!("SELECT * FROM t WHERE k = {text}"));
    match s.where_clause.into_iter().next() {
        Some(Relation::Simple { value, .. }) => value,
        other => panic!("unexpected relation {other:?}"),
    }
}

#[test]
fn use_statement() {
    assert_eq!(stmt("USE ks"), Statement::Use("ks".into()));
    assert_eq!(stmt("use \"MyKs\";"), Statement::Use("MyKs".into()));
    assert_eq!(err("USE ?").to_string(), "line 1:5 Bind variables cannot be used for keyspace names");
}

#[test]
fn create_keyspace() {
    let text = "CREATE KEYSPACE IF NOT EXISTS ks WITH replication = \
                {'class': 'SimpleStrategy', 'replication_factor': 1} AND durable_writes = true";
    let Statement::CreateKeyspace(ks) = stmt(text) else { panic!("wrong statement") };
    assert_eq!(ks.name, "ks");
    assert!(ks.if_not_exists);
    let map =
        vec![("class".to_string(), "SimpleStrategy".to_string()), ("replication_factor".to_string(), "1".to_string())];
    assert_eq!(
        ks.options,
        vec![
            ("replication".to_string(), OptionValue::Map(map)),
            ("durable_writes".to_string(), OptionValue::Bool(true)),
        ]
    );
    let e = err("CREATE KEYSPACE ks");
    assert_eq!(e.to_string(), "line 1:19 mismatched input '<EOF>' expecting WITH");
}

#[test]
fn alter_and_drop_keyspace() {
    let Statement::AlterKeyspace(ks) = stmt("ALTER KEYSPACE ks WITH durable_writes = false") else {
        panic!("wrong statement")
    };
    assert_eq!(ks.options, vec![("durable_writes".into(), OptionValue::Bool(false))]);
    assert_eq!(
        stmt("DROP KEYSPACE IF EXISTS ks"),
        Statement::DropKeyspace(DropKeyspace { name: "ks".into(), if_exists: true })
    );
    assert_eq!(stmt("drop schema ks;"), Statement::DropKeyspace(DropKeyspace { name: "ks".into(), if_exists: false }));
}

#[test]
fn create_table_inline_key() {
    let t = create_table("CREATE TABLE ks.t (k int PRIMARY KEY, v text, s int static)");
    assert_eq!(t.keyspace.as_deref(), Some("ks"));
    assert_eq!(t.name, "t");
    assert_eq!(t.partition_key, vec!["k"]);
    assert!(t.clustering_key.is_empty());
    assert_eq!(
        t.columns,
        vec![
            ColumnDef { name: "k".into(), ty: CqlType::Int, is_static: false },
            ColumnDef { name: "v".into(), ty: CqlType::Text, is_static: false },
            ColumnDef { name: "s".into(), ty: CqlType::Int, is_static: true },
        ]
    );
}

#[test]
fn create_table_compound_key_and_options() {
    let t = create_table(
        "CREATE TABLE IF NOT EXISTS t (a int, b text, c timeuuid, d bigint, v map<text, \
         frozen<list<int>>>, PRIMARY KEY ((a, b), c, d)) WITH CLUSTERING ORDER BY (c DESC, d ASC) \
         AND comment = 'x' AND compaction = {'class': 'LeveledCompactionStrategy'} \
         AND default_time_to_live = 10 AND COMPACT STORAGE",
    );
    assert!(t.if_not_exists);
    assert_eq!(t.partition_key, vec!["a", "b"]);
    assert_eq!(t.clustering_key, vec!["c", "d"]);
    assert_eq!(t.clustering_order, vec![("c".into(), Order::Desc), ("d".into(), Order::Asc)]);
    assert!(t.compact_storage);
    let v = CqlType::Map(
        Box::new(CqlType::Text),
        Box::new(CqlType::Frozen(Box::new(CqlType::List(Box::new(CqlType::Int))))),
    );
    assert_eq!(t.columns[4].ty, v);
    let names: Vec<_> = t.options.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, vec!["comment", "compaction", "default_time_to_live"]);
    assert_eq!(t.options[2].1, OptionValue::Number("10".into()));
}

#[test]
fn create_table_single_key_clause_and_types() {
    let t = create_table(
        "create table \"MyTable\" (\"Key\" uuid, type text, value blob, count counter, \
         timestamp timestamp, date date, time time, text varchar, key int, \
         t tuple<int, text>, s set<inet>, PRIMARY KEY (\"Key\"))",
    );
    assert_eq!(t.name, "MyTable");
    assert_eq!(t.partition_key, vec!["Key"]);
    let names: Vec<_> = t.columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, vec!["Key", "type", "value", "count", "timestamp", "date", "time", "text", "key", "t", "s"]);
    assert_eq!(t.columns[7].ty, CqlType::Text);
    assert_eq!(t.columns[9].ty, CqlType::Tuple(vec![CqlType::Int, CqlType::Text]));
}

#[test]
fn create_table_errors() {
    // Parses; the executor refuses it (Invalid, as in Cassandra).
    assert!(parse_statement("CREATE TABLE t (k int, v int)").is_ok());
    assert!(create_table("CREATE TABLE t (k int PRIMARY KEY, v int, PRIMARY KEY (v))").multiple_primary_keys);
    assert!(!create_table("CREATE TABLE t (k int PRIMARY KEY, v int)").multiple_primary_keys);
    // A comma may go without a definition, as in ScyllaDB's grammar.
    assert_eq!(create_table("CREATE TABLE t (k int, c int, PRIMARY KEY (k),)").columns.len(), 2);
    assert!(parse_statement("CREATE TYPE ty (a int, b text,)").is_ok());
    assert!(err("CREATE TABLE t (k int PRIMARY KEY) WITH caching = {'keys': 'all', 'rows_per_partition': ALL}")
        .message
        .contains("Invalid property value: ALL"));
    assert!(err("CREATE KEYSPACE ks WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': 2, 'dc1': 1}")
        .message
        .contains("Multiple definition for property dc1"));
    assert!(err("CREATE KEYSPACE WITH WITH durable_writes = true")
        .message
        .contains("no viable alternative at input 'WITH'"));
    assert!(err("CREATE KEYSPACE ks WITH WITH durable_writes = true")
        .message
        .contains("no viable alternative at input 'WITH'"));
    assert!(err("CREATE TABLE t (k int PRIMARY KEY, v map<int>)").message.contains("','"));
    assert!(err("CREATE TABLE t (k int PRIMARY KEY) WITH comment = 'a' AND comment = 'b'")
        .message
        .contains("multiple definitions"));
}

#[test]
fn create_table_skips_empty_elements_after_commas() {
    // ScyllaDB's grammar: `'(' cfamColumns (',' cfamColumns?)* ')'`.
    let t = create_table("CREATE TABLE t (k int, , v int, PRIMARY KEY (k), )");
    assert_eq!(t.columns.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["k", "v"]);
    assert_eq!(t.partition_key, ["k"]);
    assert!(err("CREATE TABLE t (, k int PRIMARY KEY)").message.contains("column name"));
}

#[test]
fn alter_table_forms() {
    let add = alter_op("ALTER TABLE ks.t ADD v list<int>");
    let list = CqlType::List(Box::new(CqlType::Int));
    assert_eq!(add, AlterTableOp::Add(vec![ColumnDef { name: "v".into(), ty: list, is_static: false }]));
    match alter_op("ALTER TABLE t ADD (a int, b text static)") {
        AlterTableOp::Add(cols) => {
            assert_eq!(cols.len(), 2);
            assert!(cols[1].is_static);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        alter_op("ALTER TABLE t DROP v"),
        AlterTableOp::Drop { columns: vec!["v".into()], timestamp: None, timestamp_marker: None }
    );
    assert_eq!(
        alter_op("ALTER TABLE t DROP (a, b) USING TIMESTAMP 20000"),
        AlterTableOp::Drop { columns: vec!["a".into(), "b".into()], timestamp: Some(20000), timestamp_marker: None }
    );
    assert_eq!(
        alter_op("ALTER TABLE t DROP a USING TIMESTAMP ?"),
        AlterTableOp::Drop { columns: vec!["a".into()], timestamp: None, timestamp_marker: Some(0) }
    );
    assert_eq!(
        alter_op("ALTER TABLE t DROP a USING TIMESTAMP -5"),
        AlterTableOp::Drop { columns: vec!["a".into()], timestamp: Some(-5), timestamp_marker: None }
    );
    assert!(crate::parser::parse_statement("ALTER TABLE t DROP a USING TIMESTAMP x").is_err());
    assert!(crate::parser::parse_statement("ALTER TABLE t DROP a USING TTL 5").is_err());
    let drop = |text: &str| match crate::parser::parse_statement(text).expect("parses").statement {
        Statement::DropFunction(d) => d,
        other => panic!("{text}: {other:?}"),
    };
    let d = drop("DROP AGGREGATE IF EXISTS ks.a(int,text)");
    assert_eq!((d.keyspace.as_deref(), d.name.as_str(), d.if_exists), (Some("ks"), "a", true));
    assert_eq!(d.args, Some(vec![CqlType::Int, CqlType::Text]));
    assert!(d.aggregate);
    assert!(!drop("DROP FUNCTION f").aggregate);
    assert_eq!(drop("DROP FUNCTION f").args, None);
    assert_eq!(drop("DROP FUNCTION f()").args, Some(Vec::new()));
    assert_eq!(
        alter_op("ALTER TABLE t RENAME a TO b AND c TO d"),
        AlterTableOp::Rename(vec![("a".into(), "b".into()), ("c".into(), "d".into())])
    );
    assert_eq!(
        alter_op("ALTER TABLE t WITH gc_grace_seconds = 0"),
        AlterTableOp::With(vec![("gc_grace_seconds".into(), OptionValue::Number("0".into()))])
    );
    let uuid = "5a1c395e-b41f-11e5-9f22-ba0be0483c18";
    assert_eq!(
        alter_op(&format!("ALTER TABLE t WITH id = {uuid} AND cdc = {{'enabled': true}}")),
        AlterTableOp::With(vec![
            ("id".into(), OptionValue::String(uuid.into())),
            ("cdc".into(), OptionValue::Map(vec![("enabled".into(), "true".into())])),
        ])
    );
    assert_eq!(
        alter_op("ALTER TABLE t ALTER v TYPE blob"),
        AlterTableOp::AlterType { column: "v".into(), ty: CqlType::Blob }
    );
    assert!(err("ALTER TABLE t MODIFY v").message.contains("expecting ADD"));
}

#[test]
fn drop_and_truncate() {
    assert_eq!(
        stmt("DROP TABLE IF EXISTS ks.t"),
        Statement::DropTable(DropTable { keyspace: Some("ks".into()), name: "t".into(), if_exists: true })
    );
    let expected = Statement::Truncate(Truncate { keyspace: Some("ks".into()), name: "t".into(), timeout: None });
    assert_eq!(stmt("TRUNCATE ks.t"), expected);
    assert_eq!(stmt("TRUNCATE TABLE ks.t;"), expected);
    let Statement::Truncate(t) = stmt("TRUNCATE TABLE ks.t USING TIMEOUT 1000s") else { panic!("a truncate") };
    assert_eq!(t.timeout, Some(Term::Literal(Literal::Duration("1000s".into()))));
    assert!(err("TRUNCATE TABLE ks.t USING TTL 1").message.contains("USING TTL is not allowed in TRUNCATE"));
    assert!(err("TRUNCATE TABLE ks.t USING TIMESTAMP 1").message.contains("not allowed"));
    assert!(err("TRUNCATE TABLE ks.t USING TIMEOUT 1h AND TTL 42").message.contains("not allowed"));
}

#[test]
fn materialized_view_statements() {
    let Statement::CreateView(v) = stmt(
        "CREATE MATERIALIZED VIEW IF NOT EXISTS ks.mv AS SELECT p, c, v FROM ks.t \
         WHERE v IS NOT NULL AND p IS NOT NULL AND c IS NOT NULL PRIMARY KEY ((v, p), c) \
         WITH CLUSTERING ORDER BY (c DESC) AND comment = 'x'",
    ) else {
        panic!("not a CREATE MATERIALIZED VIEW")
    };
    assert!(v.if_not_exists);
    assert_eq!((v.keyspace.as_deref(), v.name.as_str(), v.base.as_str()), (Some("ks"), "mv", "t"));
    assert_eq!(v.selectors.len(), 3);
    assert_eq!(v.where_clause.len(), 3);
    assert_eq!((v.partition_key, v.clustering_key), (vec!["v".to_string(), "p".into()], vec!["c".to_string()]));
    assert_eq!(v.clustering_order, vec![("c".to_string(), Order::Desc)]);
    assert_eq!(v.options, vec![("comment".to_string(), OptionValue::String("x".into()))]);
    let Statement::CreateView(all) =
        stmt("CREATE MATERIALIZED VIEW mv AS SELECT * FROM t WHERE p IS NOT NULL PRIMARY KEY (p)")
    else {
        panic!("not a CREATE MATERIALIZED VIEW")
    };
    assert!(all.selectors.is_empty());
    assert_eq!(
        stmt("DROP MATERIALIZED VIEW IF EXISTS ks.mv"),
        Statement::DropView(DropView { keyspace: Some("ks".into()), name: "mv".into(), if_exists: true })
    );
    assert!(matches!(stmt("ALTER MATERIALIZED VIEW mv WITH comment = 'y'"), Statement::AlterView(_)));
    // WHERE is optional in the grammar (Cassandra's and ScyllaDB's); the
    // view's DDL then asks for its key columns' IS NOT NULL.
    let Statement::CreateView(v) = stmt("CREATE MATERIALIZED VIEW mv AS SELECT * FROM t PRIMARY KEY (p)") else {
        panic!("a view")
    };
    assert!(v.where_clause.is_empty());
}

#[test]
fn unsupported_statements_fail_clearly() {
    for (text, what) in [("ALTER INDEX i", "ALTER INDEX"), ("CREATE TRIGGER t ON ks.t USING 'c'", "CREATE TRIGGER")] {
        let e = err(text);
        assert_eq!(e.message, format!("{what} statements are not supported"), "{text}");
        assert_eq!((e.line, e.column), (1, 1));
    }
}

#[test]
fn insert_forms() {
    let i =
        insert("INSERT INTO ks.t (k, v, \"Mixed\") VALUES (1, 'a', ?) IF NOT EXISTS USING TTL 10 AND TIMESTAMP 123");
    assert_eq!(i.keyspace.as_deref(), Some("ks"));
    assert_eq!(i.columns, vec!["k", "v", "Mixed"]);
    assert_eq!(i.values, vec![lit_int("1"), lit_str("a"), Term::Bind(0)]);
    assert!(i.if_not_exists);
    assert_eq!(i.using.ttl, Some(lit_int("10")));
    assert_eq!(i.using.timestamp, Some(lit_int("123")));
    let i = insert("INSERT INTO t (k) VALUES (1) USING TIMEOUT 500ms AND TTL ?");
    assert_eq!(i.using.timeout, Some(Term::Literal(Literal::Duration("500ms".into()))));
    assert_eq!(i.using.ttl, Some(Term::Bind(0)));
    // Parses; the executor refuses it (Invalid, as in Cassandra).
    assert!(parse_statement("INSERT INTO t (a, b) VALUES (1)").is_ok());
    assert!(err("INSERT INTO t (a) VALUES (1) USING TTL 1 AND TTL 2").message.contains("given twice"));
}

#[test]
fn insert_json() {
    let Statement::InsertJson(i) = stmt("INSERT INTO t JSON '{\"k\": 1}' DEFAULT UNSET IF NOT EXISTS") else {
        panic!("wrong statement")
    };
    assert_eq!(i.json, lit_str("{\"k\": 1}"));
    assert!(i.default_unset && i.if_not_exists);
    let Statement::InsertJson(i) = stmt("INSERT INTO t JSON ?") else { panic!("wrong statement") };
    assert_eq!(i.json, Term::Bind(0));
}

#[test]
fn update_assignments() {
    let u = update(
        "UPDATE ks.t USING TTL 5 SET a = 1, b = b + 2, c = [1] + c, d = d - {'x'}, \
         m['k'] = 'v', n += 3, o -= 4 WHERE k = 1 AND c = 2",
    );
    assert_eq!(u.using.ttl, Some(lit_int("5")));
    let v = |s: &str| s.to_string();
    assert_eq!(
        u.assignments,
        vec![
            Assignment::Set { column: v("a"), value: lit_int("1") },
            Assignment::Add { column: v("b"), value: lit_int("2") },
            Assignment::Prepend { column: v("c"), value: Term::List(vec![lit_int("1")]) },
            Assignment::Subtract { column: v("d"), value: Term::Set(vec![lit_str("x")]) },
            Assignment::SetElement { column: v("m"), key: lit_str("k"), value: lit_str("v") },
            Assignment::Add { column: v("n"), value: lit_int("3") },
            Assignment::Subtract { column: v("o"), value: lit_int("4") },
        ]
    );
    assert_eq!(u.where_clause.len(), 2);
    assert_eq!(u.condition, Condition::None);
    let u = update("UPDATE t SET count = count -1, \"Q\" = \"Q\" + ? WHERE k = ?");
    assert_eq!(u.assignments[0], Assignment::Subtract { column: v("count"), value: lit_int("1") });
    assert_eq!(u.assignments[1], Assignment::Add { column: v("Q"), value: Term::Bind(0) });
    let u = update("UPDATE t SET a.zip = ?, \"B\".\"F\" = 1 WHERE k = ?");
    assert_eq!(u.assignments[0], Assignment::SetField { column: v("a"), field: v("zip"), value: Term::Bind(0) });
    assert_eq!(u.assignments[1], Assignment::SetField { column: v("B"), field: v("F"), value: lit_int("1") });
    assert!(err("UPDATE t SET a = b + 1 WHERE k = 1").message.contains("X = X + <value>"));
    // A value before the column adds (prepends); subtracting the column from
    // a value is a syntax error, as in Cassandra.
    let u = update("UPDATE t SET c = 5 + c WHERE k = 1");
    assert_eq!(u.assignments[0], Assignment::Prepend { column: v("c"), value: lit_int("5") });
    assert!(err("UPDATE t SET c = 5 - c WHERE k = 1").message.contains("X = <value> + X"));
}

#[test]
fn update_conditions() {
    let u = update("UPDATE t SET v = 1 WHERE k = 1 IF EXISTS");
    assert_eq!(u.condition, Condition::IfExists);
    let u = update("UPDATE t SET v = 1 WHERE k = 1 IF v = 2 AND m['a'] != null AND w IN (1, 2)");
    let Condition::IfColumns(conds) = u.condition else { panic!("no conditions") };
    assert_eq!(conds.len(), 3);
    assert_eq!(conds[1].target.element, Some(lit_str("a")));
    assert_eq!(conds[1].op, Operator::Ne);
    assert_eq!(conds[1].value, Term::Literal(Literal::Null));
    assert_eq!(conds[2].op, Operator::In);
    assert_eq!(conds[2].value, Term::List(vec![lit_int("1"), lit_int("2")]));
    let u = update("UPDATE t SET v = 1 WHERE k = 1 IF u.f < 3 AND \"U\".\"G\" IN ?");
    let Condition::IfColumns(conds) = u.condition else { panic!("no conditions") };
    assert_eq!(conds[0].target, ColumnTarget { column: "u".into(), element: None, field: Some("f".into()) });
    assert_eq!((conds[0].op, &conds[0].value), (Operator::Lt, &lit_int("3")));
    assert_eq!(conds[1].target, ColumnTarget { column: "U".into(), element: None, field: Some("G".into()) });
    assert_eq!((conds[1].op, &conds[1].value), (Operator::In, &Term::Bind(0)));
    let e = err("UPDATE t SET v = 1 WHERE k = 1 IF NOT EXISTS");
    assert_eq!(e.to_string(), "line 1:35 IF NOT EXISTS is only valid for INSERT");
    // CONTAINS [KEY] only tests a whole column (ScyllaDB's grammar).
    let e = err("DELETE FROM t WHERE k = 0 IF l[0] CONTAINS 'a'");
    assert_eq!(e.to_string(), "line 1:35 no viable alternative at input 'CONTAINS'");
    assert!(err("DELETE FROM t WHERE k = 0 IF m['a'] CONTAINS KEY 'b'").message.contains("no viable"));
}

#[test]
fn delete_forms() {
    let Statement::Delete(d) = stmt("DELETE a, m['k'], l[0], u.f FROM ks.t USING TIMESTAMP 10 WHERE k = 1 IF a = 3")
    else {
        panic!("wrong statement")
    };
    assert_eq!(d.columns.len(), 4);
    assert_eq!(d.columns[1], ColumnTarget { column: "m".into(), element: Some(lit_str("k")), field: None });
    assert_eq!(d.columns[3], ColumnTarget { column: "u".into(), element: None, field: Some("f".into()) });
    assert_eq!(d.using.timestamp, Some(lit_int("10")));
    assert!(matches!(d.condition, Condition::IfColumns(_)));
    let Statement::Delete(d) = stmt("DELETE FROM t WHERE k IN ? IF EXISTS") else { panic!("wrong statement") };
    assert!(d.columns.is_empty());
    assert_eq!(d.where_clause, vec![Relation::In { column: "k".into(), values: InValues::Bind(0) }]);
    assert_eq!(d.condition, Condition::IfExists);
    let e = err("DELETE FROM t USING TTL 3 WHERE k = 1");
    assert_eq!(e.to_string(), "line 1:21 USING TTL is not allowed in DELETE");
    assert!(err("DELETE FROM t").message.contains("expecting WHERE"));
}

#[test]
fn batches() {
    let text = "BEGIN UNLOGGED BATCH USING TIMESTAMP 5 \
                INSERT INTO t (k) VALUES (?); UPDATE t SET v = ? WHERE k = ?; \
                DELETE FROM t WHERE k = :key APPLY BATCH;";
    let parsed = parse(text);
    let Statement::Batch(b) = parsed.statement else { panic!("not a batch") };
    assert_eq!(b.kind, BatchKind::Unlogged);
    assert_eq!(b.using.timestamp, Some(lit_int("5")));
    assert_eq!(b.statements.len(), 3);
    assert_eq!(parsed.bind_markers.len(), 4);
    assert_eq!(parsed.bind_markers[3].name.as_deref(), Some("key"));
    let Statement::Batch(b) = stmt("BEGIN BATCH APPLY BATCH") else { panic!("not a batch") };
    assert_eq!((b.kind, b.statements.len()), (BatchKind::Logged, 0));
    let Statement::Batch(b) = stmt("BEGIN COUNTER BATCH UPDATE t SET c = c + 1 WHERE k = 1 APPLY BATCH") else {
        panic!("not a batch")
    };
    assert_eq!(b.kind, BatchKind::Counter);
    assert!(err("BEGIN BATCH SELECT * FROM t APPLY BATCH").message.contains("INSERT, UPDATE"));
    assert!(err("BEGIN BATCH USING TTL 1 APPLY BATCH").message.contains("not allowed in BATCH"));
    assert!(err("BEGIN BATCH INSERT INTO t (k) VALUES (1)").message.contains("<EOF>"));
}

#[test]
fn select_driver_queries() {
    let s = select("SELECT * FROM system.local WHERE key='local'");
    assert_eq!((s.keyspace.as_deref(), s.table.as_str()), (Some("system"), "local"));
    assert_eq!(s.selection, Selection::Wildcard);
    assert_eq!(s.where_clause, vec![simple("key", Operator::Eq, lit_str("local"))]);

    let s = select("SELECT peer, rpc_address FROM system.peers");
    let exprs: Vec<_> = match s.selection {
        Selection::Selectors(sel) => sel.into_iter().map(|s| s.expr).collect(),
        Selection::Wildcard => panic!("wildcard"),
    };
    assert_eq!(exprs, vec![col("peer"), col("rpc_address")]);

    let s = select("SELECT * FROM system_schema.tables WHERE keyspace_name = 'k' AND table_name = 't'");
    assert_eq!(s.where_clause.len(), 2);

    let parsed = parse("SELECT * FROM system_schema.keyspaces WHERE keyspace_name IN ?");
    assert_eq!(parsed.bind_markers, vec![BindMarker { name: None }]);

    let s = select("SELECT * FROM \"MyKs\".\"MyTable\"");
    assert_eq!((s.keyspace.as_deref(), s.table.as_str()), (Some("MyKs"), "MyTable"));

    let s = select("SELECT * FROM system_schema.keyspaces USING TIMEOUT 2000ms");
    assert_eq!(s.timeout, Some(Term::Literal(Literal::Duration("2000ms".into()))));
    let s = select("SELECT * FROM t WHERE k = 1 LIMIT 5 ALLOW FILTERING USING TIMEOUT 2s;");
    assert!(s.allow_filtering);
    assert_eq!(s.timeout, Some(Term::Literal(Literal::Duration("2s".into()))));
    let s = select("SELECT * FROM t USING TIMEOUT ? WHERE k = 1");
    assert_eq!((s.timeout, s.where_clause.len()), (Some(Term::Bind(0)), 1));
    assert!(err("SELECT * FROM t USING TIMEOUT 1s WHERE k = 1 USING TIMEOUT 2s").message.contains("twice"));
    assert!(err("SELECT * FROM t USING TTL 1").message.contains("not allowed in SELECT"));
}

#[test]
fn select_selectors() {
    let exprs = |text: &str| match select(text).selection {
        Selection::Selectors(sel) => sel,
        Selection::Wildcard => panic!("wildcard"),
    };
    assert_eq!(exprs("SELECT count(*) FROM t")[0].expr, SelectorExpr::CountStar);
    assert_eq!(exprs("SELECT COUNT(1) AS n FROM t")[0].alias.as_deref(), Some("n"));
    let sel = exprs("SELECT writetime(v), ttl(v) FROM t WHERE k = 1");
    assert_eq!(sel[0].expr, SelectorExpr::WriteTime("v".into()));
    assert_eq!(sel[1].expr, SelectorExpr::Ttl("v".into()));
    let sel = exprs("SELECT writetime(m[1]), TTL(u.f) FROM t");
    assert!(
        matches!(&sel[0].expr, SelectorExpr::WriteTimeOfPart { ttl: false, part } if matches!(**part, SelectorExpr::Element { .. }))
    );
    assert_eq!((sel[0].expr.to_string(), sel[1].expr.to_string()), ("writetime(m[1])".into(), "ttl(u.f)".into()));
    let sel = exprs("SELECT token(a, b), CAST(v AS text), system.now(), count(v), max(\"V\") FROM t");
    assert_eq!(sel[0].expr, SelectorExpr::FunctionCall { name: "token".into(), args: vec![col("a"), col("b")] });
    assert_eq!(sel[1].expr, SelectorExpr::Cast { expr: Box::new(col("v")), ty: CqlType::Text });
    assert_eq!(sel[2].expr, SelectorExpr::FunctionCall { name: "system.now".into(), args: vec![] });
    assert_eq!(sel[3].expr.to_string(), "count(v)");
    assert_eq!(sel[4].expr.to_string(), "max(V)");
    let sel = exprs("SELECT a.b.c AS x, ks.f(v).g FROM t");
    let field = |expr: SelectorExpr, field: &str| SelectorExpr::Field { expr: Box::new(expr), field: field.into() };
    assert_eq!(sel[0].expr, field(field(col("a"), "b"), "c"));
    assert_eq!(sel[0].alias.as_deref(), Some("x"));
    assert_eq!(sel[1].expr, field(SelectorExpr::FunctionCall { name: "ks.f".into(), args: vec![col("v")] }, "g"));
    let sel = exprs("SELECT key, type, value, count, timestamp, date, time, text, ttl, writetime, \"token\" FROM t");
    assert_eq!(sel.len(), 11);
    assert!(sel.iter().all(|s| matches!(s.expr, SelectorExpr::Column(_))));
    let sel = exprs("SELECT 'a', 1, json, distinct FROM t");
    assert_eq!(sel[0].expr, SelectorExpr::Term(lit_str("a")));
    assert_eq!(sel[2].expr, col("json"));
    assert_eq!(sel[3].expr, col("distinct"));
}

#[test]
fn select_clauses() {
    let s = select(
        "SELECT k, v AS x FROM t WHERE k IN (1,2,3) AND c > 5 AND c <= 10 ORDER BY c DESC \
         PER PARTITION LIMIT 2 LIMIT 10 ALLOW FILTERING",
    );
    let in_values = InValues::Terms(vec![lit_int("1"), lit_int("2"), lit_int("3")]);
    assert_eq!(
        s.where_clause,
        vec![
            Relation::In { column: "k".into(), values: in_values },
            simple("c", Operator::Gt, lit_int("5")),
            simple("c", Operator::Le, lit_int("10")),
        ]
    );
    assert_eq!(s.order_by, vec![("c".into(), Order::Desc)]);
    assert_eq!(s.per_partition_limit, Some(lit_int("2")));
    assert_eq!(s.limit, Some(lit_int("10")));
    assert!(s.allow_filtering);
    let s = select("SELECT DISTINCT k FROM t");
    assert!(s.distinct && !s.json);
    let s = select("SELECT JSON * FROM t GROUP BY a, b BYPASS CACHE");
    assert!(s.json && s.bypass_cache);
    assert_eq!(s.group_by, vec!["a", "b"]);
}

#[test]
fn token_and_multi_column_relations() {
    let s = select("SELECT * FROM t WHERE token(k) > -9223372036854775808 AND token(k) <= 0");
    assert_eq!(
        s.where_clause[0],
        Relation::Token { columns: vec!["k".into()], op: Operator::Gt, value: lit_int("-9223372036854775808") }
    );
    let s = select("SELECT * FROM t WHERE token(a, b) > ? AND token(a, b) <= token(1, 2)");
    assert_eq!(s.where_clause.len(), 2);
    let s = select("SELECT * FROM t WHERE k = 0 AND (c1, c2) > (1, 2) AND (c1,c2) IN ((1,2),(3,4))");
    assert_eq!(
        s.where_clause[1],
        Relation::MultiColumn {
            columns: vec!["c1".into(), "c2".into()],
            op: Operator::Gt,
            value: Term::Tuple(vec![lit_int("1"), lit_int("2")])
        }
    );
    assert!(matches!(&s.where_clause[2], Relation::MultiColumnIn { values: InValues::Terms(t), .. } if t.len() == 2));
    let s = select(
        "SELECT * FROM t WHERE m CONTAINS KEY 'a' AND l CONTAINS 3 AND n LIKE 'a%' AND v IS NOT NULL AND x != 1 AND \"token\" = 4",
    );
    let ops: Vec<_> = s
        .where_clause
        .iter()
        .filter_map(|r| if let Relation::Simple { op, .. } = r { Some(*op) } else { None })
        .collect();
    assert_eq!(ops, vec![Operator::ContainsKey, Operator::Contains, Operator::Like, Operator::Ne, Operator::Eq]);
    assert!(s.where_clause.contains(&Relation::IsNotNull { column: "v".into() }));
    let s = select("SELECT * FROM t WHERE v NOT IN (1, 2) AND w NOT IN ? AND l[1] = 'x' ALLOW FILTERING");
    assert_eq!(
        s.where_clause[0],
        Relation::NotIn { column: "v".into(), values: InValues::Terms(vec![lit_int("1"), lit_int("2")]) }
    );
    assert_eq!(s.where_clause[1], Relation::NotIn { column: "w".into(), values: InValues::Bind(0) });
    assert!(matches!(&s.where_clause[2], Relation::Element { column, op: Operator::Eq, .. } if column == "l"));
}

#[test]
fn literal_terms() {
    let l = |t: Literal| Term::Literal(t);
    assert_eq!(term("'it''s'"), lit_str("it's"));
    assert_eq!(term("$$a'b$$"), lit_str("a'b"));
    assert_eq!(term("123456789012345678901234567890"), lit_int("123456789012345678901234567890"));
    assert_eq!(term("-5"), lit_int("-5"));
    assert_eq!(term("1.5"), l(Literal::Float("1.5".into())));
    assert_eq!(term("-2e10"), l(Literal::Float("-2e10".into())));
    assert_eq!(term("NaN"), l(Literal::Float("NaN".into())));
    assert_eq!(term("Infinity"), l(Literal::Float("Infinity".into())));
    assert_eq!(term("-Infinity"), l(Literal::Float("-Infinity".into())));
    assert_eq!(term("0xCAFE"), l(Literal::Blob(vec![0xca, 0xfe])));
    let uuid = "123e4567-e89b-12d3-a456-426655440000";
    assert_eq!(term(uuid), l(Literal::Uuid(uuid.into())));
    assert_eq!(term("TRUE"), l(Literal::Boolean(true)));
    assert_eq!(term("false"), l(Literal::Boolean(false)));
    assert_eq!(term("null"), l(Literal::Null));
    for d in ["1h30m", "12mo3d", "P1DT2H", "3w", "10µs", "7ns", "1y2mo3w4d5h6m7s8ms9us10ns"] {
        assert_eq!(term(d), l(Literal::Duration(d.into())), "{d}");
    }
    assert_eq!(term("-5s"), l(Literal::Duration("-5s".into())));
}

#[test]
fn collection_and_function_terms() {
    assert_eq!(term("[1, 2]"), Term::List(vec![lit_int("1"), lit_int("2")]));
    assert_eq!(term("[]"), Term::List(vec![]));
    assert_eq!(term("{}"), Term::EmptyBraces);
    assert_eq!(term("{'a'}"), Term::Set(vec![lit_str("a")]));
    assert_eq!(term("{'a': 1, 'b': ?}"), Term::Map(vec![(lit_str("a"), lit_int("1")), (lit_str("b"), Term::Bind(0))]));
    assert_eq!(term("(1, 'a')"), Term::Tuple(vec![lit_int("1"), lit_str("a")]));
    assert_eq!(term("(1)"), Term::Tuple(vec![lit_int("1")]));
    assert_eq!(term("now()"), Term::FunctionCall { name: "now".into(), args: vec![] });
    assert_eq!(
        term("toTimestamp(now())"),
        Term::FunctionCall {
            name: "totimestamp".into(),
            args: vec![Term::FunctionCall { name: "now".into(), args: vec![] }]
        }
    );
    assert_eq!(term("system.uuid()").to_string(), "system.uuid()");
    assert_eq!(term("blobAsText(0xcafe)").to_string(), "blobastext(0xcafe)");
    assert_eq!(term("minTimeuuid('2013-01-01')").to_string(), "mintimeuuid('2013-01-01')");
    assert_eq!(term("(int) ?"), Term::Cast { ty: CqlType::Int, term: Box::new(Term::Bind(0)) });
    assert_eq!(
        term("CAST(1.3 AS int)"),
        Term::CastAs { term: Box::new(Term::Literal(Literal::Float("1.3".into()))), ty: CqlType::Int }
    );
    let nested = "(int)CAST(CAST((float)? AS int) AS float)";
    assert_eq!(term("(int) CAST(cast((float) ? as int) AS float)").to_string(), nested);
    let frozen = CqlType::Frozen(Box::new(CqlType::List(Box::new(CqlType::Int))));
    assert_eq!(term("(frozen<list<int>>) [1]").to_string(), format!("({frozen})[1]"));
    // frozen<frozen<T>> is frozen<T>, as Cassandra and ScyllaDB read it.
    assert_eq!(term("(frozen<frozen<list<int>>>) [1]").to_string(), format!("({frozen})[1]"));
    assert_eq!(term("(uuid())"), Term::Tuple(vec![Term::FunctionCall { name: "uuid".into(), args: vec![] }]));
    // A name that is no native type is a user type, resolved on execution.
    let cast = Term::Cast {
        ty: UserType::reference(None, "foo".into()),
        term: Box::new(Term::Literal(Literal::Integer("1".into()))),
    };
    assert_eq!(term("(foo) 1"), cast);
}

#[test]
fn bind_markers_in_order() {
    let parsed = parse("UPDATE t USING TTL ? SET a = :a, b = ? WHERE k = :k AND c IN (?, :a)");
    let names: Vec<_> = parsed.bind_markers.iter().map(|m| m.name.as_deref()).collect();
    // The second `:a` is the first one's variable, as in ScyllaDB.
    assert_eq!(names, vec![None, Some("a"), None, Some("k"), None]);
    let Statement::Update(u) = &parsed.statement else { panic!("{parsed:?}") };
    let Some(Relation::In { values: InValues::Terms(terms), .. }) = u.where_clause.last() else { panic!("{u:?}") };
    assert_eq!(terms, &vec![Term::Bind(4), Term::Bind(1)]);
    let parsed = parse("SELECT * FROM t WHERE k = :\"Key\"");
    assert_eq!(parsed.bind_markers[0].name.as_deref(), Some("Key"));
}

#[test]
fn comments_case_and_semicolons() {
    let s = select("/* a */ select -- b\n * // c\n FrOm T where K = 1;");
    assert_eq!(s.table, "t");
    assert_eq!(s.where_clause, vec![simple("k", Operator::Eq, lit_int("1"))]);
    assert!(err("SELECT * FROM t;;").message.contains("expecting <EOF>"));
}

#[test]
fn error_positions_and_messages() {
    let e = err("SELECT * FORM t");
    assert_eq!(e.to_string(), "line 1:10 mismatched input 'FORM' expecting FROM");
    let e = err("SELECT * FROM t WHERE k = 1;\n x");
    assert_eq!(e.to_string(), "line 2:2 mismatched input 'x' expecting <EOF>");
    let e = err("SELEC * FROM t");
    assert_eq!(e.to_string(), "line 1:1 no viable alternative at input 'SELEC'");
    let e = err("");
    assert_eq!(e.to_string(), "line 1:1 no viable alternative at input '<EOF>'");
    let e = err("SELECT * FROM t WHERE k = 'é' AND\n  v > ;");
    assert_eq!((e.line, e.column), (2, 7));
    assert!(e.message.starts_with("mismatched input ';' expecting a value"), "{e}");
    let e = err("SELECT * FROM from");
    assert!(e.message.contains("reserved keyword"), "{e}");
    // ScyllaDB's reserved words and not: `is` and `materialized` are,
    // `desc`, `describe` and `execute` are not.
    assert!(err("ALTER TABLE t ADD is text").message.contains("reserved keyword"));
    assert!(err("CREATE TABLE materialized (k int PRIMARY KEY)").message.contains("reserved keyword"));
    parse("CREATE TABLE desc (describe text, execute text PRIMARY KEY)");
    let e = err("INSERT INTO t (k) VALUES (1) garbage");
    assert_eq!((e.line, e.column), (1, 30));
}

#[test]
fn arithmetic_terms_bind_products_first_and_leave_update_operations_alone() {
    let op = |op, left, right| Term::Operation { op, left: Box::new(left), right: Box::new(right) };
    assert_eq!(term("1 + 2 * 3"), op(NumericOp::Add, lit_int("1"), op(NumericOp::Mul, lit_int("2"), lit_int("3"))));
    assert_eq!(term("4 - 1 - 1"), op(NumericOp::Sub, op(NumericOp::Sub, lit_int("4"), lit_int("1")), lit_int("1")));
    // A parenthesized operation groups; a parenthesized value is a 1-tuple.
    assert_eq!(term("2 * (1 + ?)"), op(NumericOp::Mul, lit_int("2"), op(NumericOp::Add, lit_int("1"), Term::Bind(0))));
    assert_eq!(term("-?"), Term::Negation(Box::new(Term::Bind(0))));
    assert_eq!(term("-(-2)"), Term::Negation(Box::new(lit_int("-2"))));
    // A cast binds tighter than an operator.
    let cast = Term::Cast { ty: CqlType::Int, term: Box::new(Term::Bind(0)) };
    assert_eq!(term("(int) ? + 1"), op(NumericOp::Add, cast, lit_int("1")));
    assert_eq!(term("-1"), lit_int("-1"));
    assert_eq!(term("(1 + 1)").to_string(), "1 + 1");
    // Selectors group with parentheses too; a tuple stays a term.
    let selected = |text: &str| match select(&format!("SELECT {text} FROM t")).selection {
        Selection::Selectors(selectors) => selectors[0].expr.to_string(),
        other => panic!("unexpected selection {other:?}"),
    };
    assert_eq!(selected("(c - b) / a + d"), "(c - b) / a + d");
    assert_eq!(selected("(1, ?)"), "(1, ?)");
    assert_eq!(selected("(int) ? + a"), "(int)? + a");
    for text in ["1 * (2 + 3)", "(1 + 2) * 3", "1 - (2 - 3)", "1 - 2 - 3", "-(1 + ?)"] {
        assert_eq!(term(text).to_string(), text);
    }
    // `+` and `-` beside a column or a collection literal stay an UPDATE's.
    assert!(matches!(&update("UPDATE t SET l = [1] + l WHERE k = 0").assignments[0], Assignment::Prepend { .. }));
    assert!(matches!(&update("UPDATE t SET v = 1 + 2 WHERE k = 0").assignments[0], Assignment::Set { .. }));
    assert!(err("UPDATE t SET c = 5 - c WHERE k = 0").message.contains("X = X + <value>"));
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let deep = format!("SELECT * FROM t WHERE k = {}1{}", "[".repeat(100), "]".repeat(100));
    assert!(err(&deep).message.contains("nested too deeply"));
    let ok = format!("SELECT * FROM t WHERE k = {}1{}", "[".repeat(60), "]".repeat(60));
    assert!(parse_statement(&ok).is_ok());
    let deep_type = format!("CREATE TABLE t (k {}int{} PRIMARY KEY)", "frozen<".repeat(100), ">".repeat(100));
    assert!(err(&deep_type).message.contains("nested too deeply"));
    let deep_sel = format!("SELECT {}k{} FROM t", "f(".repeat(100), ")".repeat(100));
    assert!(err(&deep_sel).message.contains("nested too deeply"));
    // A chain of operators builds a tree as deep as it is long.
    let long_sum = format!("SELECT * FROM t WHERE k = 1{}", " + 1".repeat(100_000));
    assert!(err(&long_sum).message.contains("nested too deeply"));
    let long_selector = format!("SELECT 1{} FROM t", " * k".repeat(100_000));
    assert!(err(&long_selector).message.contains("nested too deeply"));
}

/// Valid statements covering every form; their prefixes, single-character
/// deletions and multibyte substitutions feed the no-panic sweep.
const CORPUS: &[&str] = &[
    "USE ks;",
    "CREATE KEYSPACE IF NOT EXISTS ks WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': 3} AND durable_writes = false;",
    "ALTER KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
    "DROP KEYSPACE IF EXISTS \"Ks\"",
    "CREATE TABLE ks.t (a int, b text, c timeuuid, v map<text, frozen<list<int>>>, s int static, PRIMARY KEY ((a, b), c)) WITH CLUSTERING ORDER BY (c DESC) AND comment = 'x' AND bloom_filter_fp_chance = 0.01",
    "CREATE TABLE t (k int PRIMARY KEY, t tuple<int, text>, e set<uuid>) WITH COMPACT STORAGE",
    "ALTER TABLE t ADD (a int, b text static)",
    "ALTER TABLE t DROP (a, b)",
    "ALTER TABLE t RENAME a TO b AND c TO d",
    "ALTER TABLE t ALTER v TYPE blob",
    "ALTER TABLE t WITH default_time_to_live = -1",
    "DROP TABLE IF EXISTS ks.t",
    "TRUNCATE TABLE ks.t",
    "INSERT INTO ks.t (k, v, m) VALUES (1, 'a''b', {'x': [1, 2]}) IF NOT EXISTS USING TTL 10 AND TIMESTAMP 123",
    "INSERT INTO t JSON '{\"k\": 1}' DEFAULT UNSET",
    "INSERT INTO t (k, u, b, d, f) VALUES (?, 123e4567-e89b-12d3-a456-426655440000, 0xCAFE, 1h30m, -2.5e3) USING TIMEOUT 500ms",
    "UPDATE t USING TTL 5 SET a = a + 1, b = [1] + b, c = c - {'x'}, m['k'] = 'v', n += 3 WHERE k = 1 IF a = 1 AND b IN (1, 2)",
    "UPDATE t SET v = (int) ? WHERE k = :k IF EXISTS",
    "DELETE a, m['k'] FROM t USING TIMESTAMP 1 WHERE k IN (1, 2) IF EXISTS",
    "BEGIN UNLOGGED BATCH USING TIMESTAMP 1 INSERT INTO t (k) VALUES (1); DELETE FROM t WHERE k = 2; APPLY BATCH;",
    "BEGIN BATCH APPLY BATCH",
    "SELECT * FROM system.local WHERE key='local'",
    "SELECT peer, rpc_address FROM system.peers",
    "SELECT * FROM system_schema.keyspaces WHERE keyspace_name IN ? USING TIMEOUT 2000ms",
    "SELECT count(*), writetime(v), ttl(v), token(k), CAST(v AS text), toTimestamp(now()) AS ts FROM \"MyKs\".\"MyTable\"",
    "SELECT DISTINCT k FROM t",
    "SELECT JSON k, v AS x FROM t WHERE k IN (1,2,3) AND c > 5 AND c <= 10 ORDER BY c DESC PER PARTITION LIMIT 2 LIMIT 10 ALLOW FILTERING BYPASS CACHE",
    "SELECT * FROM t WHERE token(k) > -9223372036854775808 AND token(k) <= 0",
    "SELECT * FROM t WHERE k = 0 AND (c1, c2) > (1, 2) AND (c1, c2) IN ((1, 2), (3, 4)) AND m CONTAINS KEY 'a'",
    "SELECT * FROM t WHERE k = NaN AND f = -Infinity AND d = P1DT2H /* c */ -- end",
    "SELECT * FROM t WHERE k = $$dollar$$ AND e = {} GROUP BY k",
];

#[test]
fn corpus_parses() {
    for text in CORPUS {
        if let Err(e) = parse_statement(text) {
            panic!("{text:?}: {e}");
        }
    }
}

#[test]
fn prefixes_and_mutations_never_panic() {
    let mut errors = 0;
    for text in CORPUS {
        let boundaries: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
        for &end in &boundaries {
            errors += usize::from(parse_statement(&text[..end]).is_err());
        }
        for (n, &start) in boundaries.iter().enumerate() {
            let next = boundaries.get(n + 1).copied().unwrap_or(text.len());
            let deleted = format!("{}{}", &text[..start], &text[next..]);
            let _ = parse_statement(&deleted);
            let replaced = format!("{}é{}", &text[..start], &text[next..]);
            let _ = parse_statement(&replaced);
        }
    }
    assert!(errors > 0);
}

#[test]
fn display_round_trips_terms() {
    for text in ["[1, 'a''b', {1: 2}, {3}, (4, 5), {}]", "f(0xcafe, -1.5, null, true)", "(int)?"] {
        let t = term(text);
        assert_eq!(term(&t.to_string()), t, "{text}");
    }
}

/// Maximum nesting must fit in a modest thread stack even in debug builds
/// (about 320 KiB measured), since statements may be parsed on executor
/// threads with small stacks.
#[test]
fn maximum_nesting_fits_a_small_stack() {
    let inputs = [
        format!("SELECT * FROM t WHERE k = {}1{}", "f(".repeat(63), ")".repeat(63)),
        format!("SELECT * FROM t WHERE k = {}1{}", "{".repeat(63), "}".repeat(63)),
        format!("SELECT * FROM t WHERE k = {}1{}", "((".repeat(63), "))".repeat(63)),
        format!("SELECT * FROM t WHERE k = {}?", "(int)".repeat(40)),
        format!("SELECT {}k{} FROM t", "cast(".repeat(63), " AS int)".repeat(63)),
        format!("SELECT * FROM t WHERE k = {}1{}", "[".repeat(1000), "]".repeat(1000)),
    ];
    let handle = std::thread::Builder::new()
        .stack_size(512 * 1024)
        .spawn(move || inputs.iter().map(|i| parse_statement(i).is_ok()).collect::<Vec<_>>());
    let results = handle.map(|h| h.join());
    assert!(matches!(results, Ok(Ok(_))), "parsing overflowed a 512 KiB stack");
}

#[test]
fn user_type_statements() {
    let expected = Statement::CreateType(CreateType {
        keyspace: Some("ks".into()),
        name: "addr".into(),
        if_not_exists: true,
        fields: vec![("street".into(), CqlType::Text), ("zip".into(), CqlType::Int)],
    });
    assert_eq!(stmt("CREATE TYPE IF NOT EXISTS ks.addr (street text, zip int)"), expected);
    let add = AlterTypeOp::Add("city".into(), UserType::reference(Some("ks".into()), "town".into()));
    assert_eq!(
        stmt("ALTER TYPE addr ADD city ks.town"),
        Statement::AlterType(AlterType { keyspace: None, name: "addr".into(), op: add })
    );
    let rename = AlterTypeOp::Rename(vec![("a".into(), "b".into()), ("c".into(), "d".into())]);
    assert_eq!(
        stmt("ALTER TYPE ks.addr RENAME a TO b AND c TO d"),
        Statement::AlterType(AlterType { keyspace: Some("ks".into()), name: "addr".into(), op: rename })
    );
    assert_eq!(
        stmt("DROP TYPE IF EXISTS addr"),
        Statement::DropType(DropType { keyspace: None, name: "addr".into(), if_exists: true })
    );
    assert!(err("ALTER TYPE addr DROP zip").message.contains("ADD or RENAME"));
    let Statement::CreateTable(table) =
        stmt("CREATE TABLE t (k frozen<addr> PRIMARY KEY, v \"Addr\", l list<frozen<addr>>)")
    else {
        panic!("not a create table")
    };
    let addr = UserType::reference(None, "addr".into());
    assert_eq!(table.columns[0].ty, CqlType::Frozen(Box::new(addr.clone())));
    assert_eq!(table.columns[1].ty, UserType::reference(None, "Addr".into()));
    assert_eq!(table.columns[2].ty, CqlType::List(Box::new(CqlType::Frozen(Box::new(addr)))));
}

#[test]
fn user_type_literals() {
    let expected = Term::UserType(vec![
        ("street".into(), Term::Literal(Literal::String("x".into()))),
        ("Zip".into(), Term::Bind(0)),
    ]);
    assert_eq!(term("{street: 'x', \"Zip\": ?}"), expected);
    assert_eq!(term("{street: 'x', \"Zip\": ?}").to_string(), "{street: 'x', Zip: ?}");
    // A map whose keys are terms stays a map.
    assert!(matches!(term("{'street': 1}"), Term::Map(_)));
    assert!(matches!(term("{true: 1}"), Term::Map(_)));
    assert!(matches!(term("{a: {b: 1}}"), Term::UserType(_)));
}

#[test]
fn vector_types() {
    let t = create_table(
        "CREATE TABLE t (k int PRIMARY KEY, a vector<float, 3>, b VECTOR<list<vector<int, 2>>, 2>, \
         z vector<int, 0>, n vector<int, -18>, h vector<int, 99999999999>, vector int)",
    );
    let vector = |elem: CqlType, n| CqlType::Vector(Box::new(elem), n);
    assert_eq!(t.columns[1].ty, vector(CqlType::Float, 3));
    assert_eq!(t.columns[2].ty, vector(CqlType::List(Box::new(vector(CqlType::Int, 2))), 2));
    // Out-of-range dimensions parse (clamped) for DDL to refuse as Invalid.
    assert_eq!(t.columns[3].ty, vector(CqlType::Int, 0));
    assert_eq!(t.columns[4].ty, vector(CqlType::Int, 0));
    assert_eq!(t.columns[5].ty, vector(CqlType::Int, u32::MAX));
    // `vector` is not reserved: a column may be named so.
    assert_eq!(t.columns[6].name, "vector");
    for bad in ["vector<int>", "vector<int, x>", "vector<int, 1.5>", "vector<int, 2"] {
        assert!(parse_statement(&format!("CREATE TABLE t (k int PRIMARY KEY, v {bad})")).is_err(), "{bad}");
    }
}

#[test]
fn index_statements() {
    use crate::ast::{CreateIndex, DropIndex, IndexTarget};
    use shoal_schema::IndexKind;
    let create = |text: &str| match parse_statement(text).expect("parses").statement {
        Statement::CreateIndex(c) => c,
        other => panic!("{text}: {other:?}"),
    };
    let target = |column: &str, kind, local_key: Option<Vec<String>>| IndexTarget {
        column: column.to_string(),
        kind,
        kind_named: kind != IndexKind::Values,
        local_key,
    };
    assert_eq!(
        create("CREATE INDEX ON ks.t (v)"),
        CreateIndex {
            keyspace: Some("ks".into()),
            table: "t".into(),
            name: None,
            if_not_exists: false,
            target: target("v", IndexKind::Values, None),
            custom_class: None,
            options: Vec::new(),
            view_id: None,
        }
    );
    let c = create("CREATE INDEX IF NOT EXISTS i ON t (keys(m))");
    assert_eq!((c.name.as_deref(), c.if_not_exists, c.target), (Some("i"), true, target("m", IndexKind::Keys, None)));
    assert_eq!(create("create index on t (entries(m))").target, target("m", IndexKind::Entries, None));
    assert_eq!(create("create index on t (full(l))").target, target("l", IndexKind::Full, None));
    assert_eq!(
        create("create index on t (values(m))").target,
        IndexTarget { kind_named: true, ..target("m", IndexKind::Values, None) }
    );
    assert_eq!(
        create("create index on t ((p1, p2), v)").target,
        target("v", IndexKind::Values, Some(vec!["p1".into(), "p2".into()]))
    );
    // A column may be named like a target function.
    assert_eq!(create("create index on t (keys)").target, target("keys", IndexKind::Values, None));
    let c = create("CREATE CUSTOM INDEX i ON t (v) USING 'sai' WITH OPTIONS = {'a': 'b'}");
    assert_eq!(c.custom_class.as_deref(), Some("sai"));
    assert_eq!(
        parse_statement("DROP INDEX IF EXISTS ks.i").expect("parses").statement,
        Statement::DropIndex(DropIndex { keyspace: Some("ks".into()), name: "i".into(), if_exists: true })
    );
}

#[test]
fn a_column_name_where_a_value_belongs_parses_as_a_column() {
    let values = insert("INSERT INTO t (k, a) VALUES (1, a)").values;
    assert_eq!(values[1], Term::Column("a".into()));
    let values = insert(r#"INSERT INTO t (k, a) VALUES (1, "A")"#).values;
    assert_eq!(values[1], Term::Column("A".into()));
    // Reserved words and constants keep their meaning.
    err("INSERT INTO t (k, a) VALUES (1, select)");
    assert_eq!(insert("INSERT INTO t (k, a) VALUES (1, null)").values[1], Term::Literal(Literal::Null));
    // `count(*)` where a value belongs parses (a call no function answers).
    let values = insert("INSERT INTO t (k, a) VALUES (1, count(*))").values;
    assert_eq!(values[1], Term::FunctionCall { name: "count".into(), args: Vec::new() });
}

#[test]
fn token_and_set_are_reserved_but_keep_their_meaning() {
    err("ALTER TABLE t ADD token text");
    err("ALTER TABLE t ADD set text");
    err("CREATE TABLE t (k int PRIMARY KEY, token int)");
    stmt(r#"CREATE TABLE t (k int PRIMARY KEY, "token" int, "set" set<int>)"#);
    stmt("SELECT token(k) FROM t WHERE token(k) > 0");
    stmt("UPDATE t SET s = {1} WHERE k = 1");
}

#[test]
fn a_name_given_twice_is_one_bind_variable() {
    let parsed = parse("SELECT * FROM t WHERE p = :x AND c = :x");
    assert_eq!(parsed.bind_markers.len(), 1);
}

#[test]
fn create_function_and_aggregate() {
    let parsed = parse_statement(
        "CREATE OR REPLACE FUNCTION ks.f(a int, \"B\" text) RETURNS NULL ON NULL INPUT RETURNS int LANGUAGE lua AS 'return a'",
    )
    .expect("parses")
    .statement;
    let Statement::CreateFunction(f) = parsed else { panic!("{parsed:?}") };
    assert_eq!((f.keyspace.as_deref(), f.name.as_str(), f.or_replace, f.if_not_exists), (Some("ks"), "f", true, false));
    assert_eq!(f.args, vec![("a".to_string(), CqlType::Int), ("B".to_string(), CqlType::Text)]);
    assert_eq!((f.called_on_null_input, &f.return_type, f.language.as_str()), (false, &CqlType::Int, "lua"));
    assert_eq!(f.body, "return a");
    let parsed = parse_statement(
        "CREATE FUNCTION IF NOT EXISTS g() CALLED ON NULL INPUT RETURNS text LANGUAGE lua AS $$ return 'x' $$",
    )
    .expect("parses")
    .statement;
    let Statement::CreateFunction(g) = parsed else { panic!("{parsed:?}") };
    assert!(g.if_not_exists && g.called_on_null_input && g.args.is_empty());
    let parsed =
        parse_statement("CREATE AGGREGATE ks.a(int, text) SFUNC s STYPE int REDUCEFUNC r FINALFUNC f INITCOND 0")
            .expect("parses")
            .statement;
    let Statement::CreateAggregate(a) = parsed else { panic!("{parsed:?}") };
    assert_eq!(a.arg_types, vec![CqlType::Int, CqlType::Text]);
    assert_eq!((a.state_func.as_str(), a.reduce_func.as_deref(), a.final_func.as_deref()), ("s", Some("r"), Some("f")));
    assert!(a.initcond.is_some());
    assert!(parse_statement("CREATE FUNCTION f(a int) RETURNS int LANGUAGE lua AS 'x'").is_err());
}
