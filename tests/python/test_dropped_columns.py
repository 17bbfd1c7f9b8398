"""Dropped columns as ScyllaDB and Cassandra keep them.

`ALTER TABLE t DROP c [USING TIMESTAMP n]` leaves a record in
`system_schema.dropped_columns`; a column added again under the name reads
its cells written after the drop time, never those at or before it —
through the memtable, SSTables, compaction, the row cache and a restart.
Re-adding with a type or kind the old cells do not fit is refused with
ScyllaDB's (then Cassandra's) text.

Runs its own server (from SHOAL_BIN) so it can flush, compact and restart.
"""
import datetime
import re

import pytest
from cassandra import InvalidRequest

from node import skip_reason, temp_node

if skip_reason():
    pytest.skip(skip_reason(), allow_module_level=True)


@pytest.fixture(scope="module")
def node():
    with temp_node("shoal-dropcol-") as n:
        cluster, session = n.session()
        session.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        cluster.shutdown()
        yield n


@pytest.fixture
def session(node):
    cluster, session = node.session()
    session.set_keyspace("ks")
    yield session
    cluster.shutdown()


def rows(session, query):
    return sorted(tuple(r) for r in session.execute(query))


def fill(session, table, columns=("todrop",)):
    """Rows c = 0..4 written at timestamps 0, 10000, ..., 40000."""
    names = ", ".join(columns)
    marks = ", ".join("?" for _ in columns)
    insert = session.prepare(f"INSERT INTO {table} (id, c1, v1, {names}) VALUES (?, ?, ?, {marks}) USING TIMESTAMP ?")
    for i in range(5):
        session.execute(insert, (1, i, i, *([i] * len(columns)), 10000 * i))


EXPECTED = [(1, 0, 0, None), (1, 1, 1, None), (1, 2, 2, None), (1, 3, 3, 3), (1, 4, 4, 4), (1, 100, 100, 100)]


@pytest.mark.parametrize("flush_at", ["never", "before_drop", "after_readd"])
def test_readded_column_returns_only_cells_newer_than_the_drop(node, session, flush_at):
    table = "t_" + flush_at
    session.execute(f"CREATE TABLE {table} (id int, c1 int, v1 int, todrop int, PRIMARY KEY (id, c1))")
    fill(session, table)
    if flush_at == "before_drop":
        node.nodetool("flush", "ks", table)
    session.execute(f"ALTER TABLE {table} DROP todrop USING TIMESTAMP 20000")
    assert rows(session, f"SELECT * FROM {table}") == [(1, i, i) for i in range(5)]
    session.execute(f"ALTER TABLE {table} ADD todrop int")
    session.execute(f"INSERT INTO {table} (id, c1, v1, todrop) VALUES (1, 100, 100, 100) USING TIMESTAMP 30000")
    if flush_at == "after_readd":
        node.nodetool("flush", "ks", table)
    query = f"SELECT id, c1, v1, todrop FROM {table}"
    assert rows(session, query) == EXPECTED
    # Twice: the second read may come from the row cache.
    assert rows(session, query) == EXPECTED
    assert rows(session, f"SELECT id, c1, v1, todrop FROM {table} WHERE id = 1 AND c1 = 2") == [(1, 2, 2, None)]
    node.nodetool("flush", "ks", table)
    node.nodetool("compact", "ks", table)
    assert rows(session, query) == EXPECTED


def test_drop_time_from_a_bind_marker(node, session):
    # ScyllaDB takes `USING TIMESTAMP ?` in ALTER TABLE ... DROP (cqlpy
    # test_alter_table.py), and prepares it before the table exists.
    drop = session.prepare("ALTER TABLE tm DROP todrop USING TIMESTAMP ?")
    assert [v.type.typename for v in drop.column_metadata] == ["bigint"]
    session.execute("CREATE TABLE tm (id int, c1 int, v1 int, todrop int, PRIMARY KEY (id, c1))")
    fill(session, "tm")
    session.execute(drop, [20000])
    session.execute("ALTER TABLE tm ADD todrop int")
    session.execute("INSERT INTO tm (id, c1, v1, todrop) VALUES (1, 100, 100, 100) USING TIMESTAMP 30000")
    assert rows(session, "SELECT id, c1, v1, todrop FROM tm") == EXPECTED
    with pytest.raises(InvalidRequest, match=r"Invalid null value for \[timestamp\]"):
        session.execute(drop, [None])


def test_static_and_multiple_columns(node, session):
    session.execute("CREATE TABLE st (id int, c1 int, v1 int, todrop int static, PRIMARY KEY (id, c1))")
    fill(session, "st")
    node.nodetool("flush", "ks", "st")
    session.execute("ALTER TABLE st DROP todrop USING TIMESTAMP 20000")
    session.execute("ALTER TABLE st ADD todrop int static")
    session.execute("INSERT INTO st (id, c1, v1, todrop) VALUES (1, 100, 100, 100) USING TIMESTAMP 30000")
    # The static value with the greatest timestamp (40000) comes back.
    assert rows(session, "SELECT id, c1, v1, todrop FROM st") == [(1, c, c, 4) for c in (0, 1, 2, 3, 4, 100)]

    session.execute("CREATE TABLE mt (id int, c1 int, v1 int, a int, b int, PRIMARY KEY (id, c1))")
    fill(session, "mt", ("a", "b"))
    session.execute("ALTER TABLE mt DROP (a, b) USING TIMESTAMP 20000")
    session.execute("ALTER TABLE mt ADD a int")
    session.execute("ALTER TABLE mt ADD b int")
    session.execute("INSERT INTO mt (id, c1, v1, a, b) VALUES (1, 100, 100, 100, 100) USING TIMESTAMP 40000")
    assert rows(session, "SELECT id, c1, v1, a, b FROM mt") == [(1, 0, 0, None, None), (1, 1, 1, None, None),
                                                               (1, 2, 2, None, None), (1, 3, 3, 3, 3),
                                                               (1, 4, 4, 4, 4), (1, 100, 100, 100, 100)]


def test_drop_without_timestamp_hides_all_earlier_cells(node, session):
    session.execute("CREATE TABLE plain (k int PRIMARY KEY, v int, l list<text>, w int)")
    session.execute("INSERT INTO plain (k, v, l, w) VALUES (1, 1, ['a'], 1)")
    session.execute("UPDATE plain SET v = 2 WHERE k = 2")
    node.nodetool("flush", "ks", "plain")
    session.execute("ALTER TABLE plain DROP (v, l)")
    # A row that only lived by the dropped column is gone.
    assert rows(session, "SELECT * FROM plain") == [(1, 1)]
    session.execute("ALTER TABLE plain ADD v int")
    session.execute("ALTER TABLE plain ADD l list<text>")
    assert rows(session, "SELECT k, l, v, w FROM plain") == [(1, None, None, 1)]
    session.execute("UPDATE plain SET l = l + ['b'], v = 3 WHERE k = 1")
    assert rows(session, "SELECT k, l, v, w FROM plain") == [(1, ["b"], 3, 1)]
    node.nodetool("flush", "ks", "plain")
    node.nodetool("compact", "ks", "plain")
    assert rows(session, "SELECT k, l, v, w FROM plain") == [(1, ["b"], 3, 1)]


def test_dropped_columns_table(session):
    session.execute("CREATE TYPE IF NOT EXISTS pair (a int, b text)")
    session.execute("CREATE TABLE shown (k int, c int, s int static, u frozen<pair>, m map<int, text>, "
                    "PRIMARY KEY (k, c))")
    session.execute("ALTER TABLE shown DROP s USING TIMESTAMP 1234567")
    session.execute("ALTER TABLE shown DROP (u, m)")
    found = {r.column_name: r for r in session.execute(
        "SELECT * FROM system_schema.dropped_columns WHERE keyspace_name = 'ks' AND table_name = 'shown'")}
    assert sorted(found) == ["m", "s", "u"]
    assert (found["s"].kind, found["s"].type) == ("static", "int")
    assert found["s"].dropped_time == datetime.datetime(1970, 1, 1, 0, 0, 1, 234000)
    assert (found["u"].kind, found["u"].type) == ("regular", "frozen<tuple<int, text>>")
    assert found["m"].type == "map<int, text>"
    assert found["m"].dropped_time > datetime.datetime(2020, 1, 1)
    # The user type is no longer used, so it may be dropped; the record stays.
    session.execute("DROP TYPE pair")
    session.execute("ALTER TABLE shown ADD u frozen<tuple<int, text>>")


@pytest.mark.parametrize("create, drop, add, message", [
    ("(id text PRIMARY KEY, content text, myCollection list<text>)", "myCollection", "myCollection map<int, int>",
     "Cannot add a collection with the name mycollection because a collection with the same name and a different "
     "type has already been used in the past"),
    ("(k int PRIMARY KEY, v int)", "v", "v text",
     "Cannot re-add previously dropped column 'v' of type text, incompatible with previous type int"),
    ("(k int PRIMARY KEY, l list<int>)", "l", "l frozen<list<int>>",
     "Cannot re-add previously dropped column 'l' of type frozen<list<int>>, incompatible with previous type list<int>"),
    ("(a int, b int, c int, PRIMARY KEY (a, b))", "c", "c int static",
     "Cannot re-add previously dropped column 'c' of kind STATIC, incompatible with previous kind REGULAR"),
    ("(a int, b int, d int static, PRIMARY KEY (a, b))", "d", "d int",
     "Cannot re-add previously dropped column 'd' of kind REGULAR, incompatible with previous kind STATIC"),
    ("(k int PRIMARY KEY, c counter, d counter)", "c", "c counter", "Cannot re-add previously dropped counter column c"),
])
def test_incompatible_readd_is_refused(session, create, drop, add, message):
    session.execute(f"CREATE TABLE incompatible {create}")
    try:
        session.execute(f"ALTER TABLE incompatible DROP {drop}")
        with pytest.raises(InvalidRequest, match=re.escape(f'message="{message}"')):
            session.execute(f"ALTER TABLE incompatible ADD {add}")
    finally:
        session.execute("DROP TABLE incompatible")


def test_compatible_readd_reads_old_cells(session):
    session.execute("CREATE TABLE widened (k int PRIMARY KEY, v int)")
    session.execute("INSERT INTO widened (k, v) VALUES (1, 7) USING TIMESTAMP 5000")
    session.execute("ALTER TABLE widened DROP v USING TIMESTAMP 1000")
    session.execute("ALTER TABLE widened ADD v varint")
    assert session.execute("SELECT v FROM widened WHERE k = 1").one().v == 7


@pytest.mark.parametrize("create, extra, statement, message", [
    ("(k int, c int, v int, PRIMARY KEY (k, c))", None, "DROP k", "Cannot drop PRIMARY KEY part k"),
    ("(k int, c int, v int, PRIMARY KEY (k, c))", None, "DROP c", "Cannot drop PRIMARY KEY part c"),
    ("(k int, c int, v int, PRIMARY KEY (k, c))", None, "DROP nosuch", "Column nosuch was not found in table rules"),
    ("(k int, c int, v int, PRIMARY KEY (k, c))", "CREATE INDEX rules_v ON rules (v)", "DROP v",
     "Cannot drop column v because it has dependent secondary indexes (rules_v)"),
    ("(k int, c int, v int, PRIMARY KEY (k, c)) WITH COMPACT STORAGE", None, "DROP v",
     "Cannot drop columns from a non-CQL3 table"),
    ("(k int, c int, v int, PRIMARY KEY (k, c))", None, "ADD k int",
     "Invalid column name k because it conflicts with a PRIMARY KEY part"),
])
def test_drop_rules(session, create, extra, statement, message):
    session.execute(f"CREATE TABLE rules {create}")
    try:
        if extra:
            session.execute(extra)
        with pytest.raises(InvalidRequest, match=re.escape(f'message="{message}"')):
            session.execute(f"ALTER TABLE rules {statement}")
    finally:
        session.execute("DROP TABLE rules")


def test_drop_history_survives_restart(node):
    cluster, session = node.session()
    session.set_keyspace("ks")
    session.execute("CREATE TYPE IF NOT EXISTS pair2 (a int, b text)")
    session.execute("CREATE TABLE kept (id int, c1 int, v1 int, todrop int, gone frozen<pair2>, s int static, "
                    "PRIMARY KEY (id, c1))")
    fill(session, "kept")
    session.execute("ALTER TABLE kept DROP (todrop, gone) USING TIMESTAMP 20000")
    session.execute("ALTER TABLE kept ADD todrop int")
    session.execute("ALTER TABLE kept DROP s")
    session.execute("INSERT INTO kept (id, c1, v1, todrop) VALUES (1, 100, 100, 100) USING TIMESTAMP 30000")
    query = "SELECT * FROM system_schema.dropped_columns WHERE keyspace_name = 'ks' AND table_name = 'kept'"
    before = rows(session, query)
    assert [r[2] for r in before] == ["gone", "s", "todrop"]
    cluster.shutdown()
    node.kill()
    node.start()
    cluster, session = node.session()
    try:
        session.set_keyspace("ks")
        assert rows(session, query) == before
        assert rows(session, "SELECT id, c1, v1, todrop FROM kept") == EXPECTED
        node.nodetool("flush", "ks", "kept")
        node.nodetool("compact", "ks", "kept")
        assert rows(session, "SELECT id, c1, v1, todrop FROM kept") == EXPECTED
        # The history keeps refusing what it refused before the restart.
        with pytest.raises(InvalidRequest, match="Cannot re-add previously dropped column 'gone' of type int"):
            session.execute("ALTER TABLE kept ADD gone int")
        session.execute("ALTER TABLE kept ADD s int static")
        assert rows(session, "SELECT s FROM kept WHERE id = 1 LIMIT 1") == [(None,)]
    finally:
        cluster.shutdown()


def test_list_and_field_updates_ignore_cells_from_before_the_drop(session):
    """`SET l[i]` and `SET u.f` read the stored value first: the cells from
    before the drop are no part of the re-added column."""
    session.execute("CREATE TYPE IF NOT EXISTS duo (a int, b int)")
    session.execute("CREATE TABLE rmw (k int PRIMARY KEY, l list<text>, u duo)")
    session.execute("INSERT INTO rmw (k, l, u) VALUES (1, ['a', 'b'], {a: 1, b: 2}) USING TIMESTAMP 1000")
    session.execute("ALTER TABLE rmw DROP (l, u) USING TIMESTAMP 2000")
    session.execute("ALTER TABLE rmw ADD l list<text>")
    session.execute("ALTER TABLE rmw ADD u duo")
    with pytest.raises(InvalidRequest, match="List index 0 out of bound, list has size 0"):
        session.execute("UPDATE rmw SET l[0] = 'x' WHERE k = 1")
    session.execute("UPDATE rmw SET u.a = 5 WHERE k = 1")
    row = session.execute("SELECT l, u FROM rmw WHERE k = 1").one()
    assert row.l is None and (row.u.a, row.u.b) == (5, None)


def test_describe_with_internals_replays_the_drops(session):
    session.execute("CREATE TABLE described (k int PRIMARY KEY, a int, b list<int>)")
    session.execute("ALTER TABLE described DROP (a, b) USING TIMESTAMP 1000")
    session.execute("ALTER TABLE described ADD a varint")
    text = session.execute("DESCRIBE TABLE described WITH INTERNALS").one().create_statement
    assert "    a varint,\n    b list<int>\n) WITH ID = " in text
    assert text.endswith(";\nALTER TABLE ks.described DROP a USING TIMESTAMP 1000;\n"
                         "ALTER TABLE ks.described ADD a varint;\n"
                         "ALTER TABLE ks.described DROP b USING TIMESTAMP 1000;"), text
    assert "ALTER" not in session.execute("DESCRIBE TABLE described").one().create_statement
