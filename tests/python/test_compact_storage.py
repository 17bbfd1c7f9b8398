"""COMPACT STORAGE tables, as ScyllaDB still serves them: the two layouts
("static compact" without clustering columns, "dense" with them and at
most one regular column), their rows living only by their cells (no row
marker), ScyllaDB's refusals at CREATE, ALTER, INSERT and CREATE INDEX,
the schema tables' flags and hidden columns as Cassandra 3 writes them
(which the drivers read to know the layout), DESCRIBE, and the layout kept
across a restart."""
import pytest
from cassandra import InvalidRequest

from conftest import wait_until
from node import skip_reason, temp_node


def rows(session, query):
    return sorted(tuple(r) for r in session.execute(query))


def invalid(session, query, message):
    with pytest.raises(InvalidRequest) as e:
        session.execute(query)
    assert message in str(e.value), str(e.value)


def test_a_static_compact_table_keeps_rows_only_while_a_cell_lives(session, table):
    t = table("(k int PRIMARY KEY, a int, b text)", options="COMPACT STORAGE")
    session.execute("INSERT INTO %s (k, a, b) VALUES (1, 10, 'x')" % t)
    session.execute("INSERT INTO %s (k, a) VALUES (2, 20)" % t)
    # Only the key: no cell, so no row (a CQL table would keep it).
    session.execute("INSERT INTO %s (k) VALUES (3)" % t)
    session.execute("UPDATE %s SET b = 'y' WHERE k = 4" % t)
    assert rows(session, "SELECT * FROM %s" % t) == [(1, 10, "x"), (2, 20, None), (4, None, "y")]
    # Deleting the last live cell deletes the row.
    session.execute("DELETE a FROM %s WHERE k = 2" % t)
    session.execute("INSERT INTO %s (k, a, b) VALUES (1, null, null)" % t)
    assert rows(session, "SELECT * FROM %s" % t) == [(4, None, "y")]
    session.execute("INSERT INTO %s (k, a) VALUES (5, 50) USING TTL 1" % t)
    assert wait_until(lambda: rows(session, "SELECT k FROM %s WHERE k = 5" % t) == [], timeout=5)


def test_a_dense_table_is_its_key_and_one_value(session, table):
    t = table("(k int, c1 int, c2 text, v int, PRIMARY KEY (k, c1, c2))",
              options="COMPACT STORAGE AND CLUSTERING ORDER BY (c1 DESC, c2 ASC)")
    for c1 in range(3):
        session.execute("INSERT INTO %s (k, c1, c2, v) VALUES (0, %d, 'a', %d)" % (t, c1, c1 * 10))
    assert list(session.execute("SELECT c1, v FROM %s WHERE k = 0" % t)) == [(2, 20), (1, 10), (0, 0)]
    assert rows(session, "SELECT v FROM %s WHERE k = 0 AND c1 > 0 AND c1 < 2" % t) == [(10,)]
    session.execute("UPDATE %s SET v = 7 WHERE k = 0 AND c1 = 5 AND c2 = 'b'" % t)
    assert rows(session, "SELECT v FROM %s WHERE k = 0 AND c1 = 5" % t) == [(7,)]
    # The value is the row: without it there is nothing to insert, and
    # deleting it deletes the row.
    invalid(session, "INSERT INTO %s (k, c1, c2) VALUES (0, 9, 'a')" % t,
            "Column v is mandatory for this COMPACT STORAGE table")
    session.execute("DELETE v FROM %s WHERE k = 0 AND c1 = 1 AND c2 = 'a'" % t)
    session.execute("INSERT INTO %s (k, c1, c2, v) VALUES (0, 2, 'a', null)" % t)
    assert rows(session, "SELECT c1 FROM %s WHERE k = 0" % t) == [(0,), (5,)]
    # A dense table's single clustering column takes no empty value.
    blobs = table("(k int, c blob, v int, PRIMARY KEY (k, c))", options="COMPACT STORAGE")
    invalid(session, "INSERT INTO %s (k, c, v) VALUES (0, 0x, 1)" % blobs, "Missing PRIMARY KEY part c")
    invalid(session, "UPDATE %s SET v = 1 WHERE k = 0 AND c = 0x" % blobs, "Missing PRIMARY KEY part c")
    # Range deletes on a clustering prefix.
    session.execute("DELETE FROM %s WHERE k = 0 AND c1 >= 5" % t)
    assert rows(session, "SELECT c1 FROM %s WHERE k = 0" % t) == [(0,)]


def test_a_dense_table_takes_rows_at_a_clustering_prefix(session, table):
    # CASSANDRA-7990: trailing clustering columns may be left out; they
    # read as null, and the prefix row sorts before the rows under it.
    t = table("(k int, c1 int, c2 int, v int, PRIMARY KEY (k, c1, c2))", options="COMPACT STORAGE")
    session.execute("INSERT INTO %s (k, c1, v) VALUES (0, 0, 0)" % t)
    session.execute("INSERT INTO %s (k, c1, c2, v) VALUES (0, 0, 0, 1)" % t)
    session.execute("INSERT INTO %s (k, c1, c2, v) VALUES (0, 0, 1, 2)" % t)
    assert list(session.execute("SELECT * FROM %s" % t)) == [(0, 0, None, 0), (0, 0, 0, 1), (0, 0, 1, 2)]
    # UPDATE names a prefix row too; DELETE of a prefix deletes its range.
    session.execute("UPDATE %s SET v = 5 WHERE k = 1 AND c1 = 3" % t)
    session.execute("INSERT INTO %s (k, c1, c2, v) VALUES (1, 3, 0, 6)" % t)
    assert list(session.execute("SELECT * FROM %s WHERE k = 1" % t)) == [(1, 3, None, 5), (1, 3, 0, 6)]
    session.execute("DELETE FROM %s WHERE k = 1 AND c1 = 3" % t)
    assert list(session.execute("SELECT * FROM %s WHERE k = 1" % t)) == []
    invalid(session, "INSERT INTO %s (k, c2, v) VALUES (0, 0, 0)" % t,
            'PRIMARY KEY column "c2" cannot be restricted as preceding column "c1" is not restricted')
    invalid(session, "INSERT INTO %s (k, v) VALUES (0, 0)" % t, "Missing PRIMARY KEY part c1")


def test_a_dense_table_without_a_value_keeps_rows_by_their_key(session, table):
    t = table("(k int, c int, PRIMARY KEY (k, c))", options="COMPACT STORAGE")
    session.execute("INSERT INTO %s (k, c) VALUES (1, 1)" % t)
    session.execute("INSERT INTO %s (k, c) VALUES (1, 2)" % t)
    session.execute("DELETE FROM %s WHERE k = 1 AND c = 1" % t)
    assert rows(session, "SELECT * FROM %s" % t) == [(1, 2)]


def test_compact_storage_refusals_are_scylladbs(session, table, tname):
    cases = [
        ("(k int PRIMARY KEY)", "No definition found that is not part of the PRIMARY KEY"),
        ("(k int PRIMARY KEY, l list<int>)", "Non-frozen collections and UDTs are not supported with COMPACT STORAGE"),
        ("(k int, c int, s int static, v int, PRIMARY KEY (k, c))",
         "Static columns are not supported in COMPACT STORAGE tables"),
        ("(k int, c int, v int, w int, PRIMARY KEY (k, c))",
         "COMPACT STORAGE with composite PRIMARY KEY allows no more than one column not part of the PRIMARY KEY "
         "(got: v, w)"),
    ]
    for columns, message in cases:
        invalid(session, "CREATE TABLE %s %s WITH COMPACT STORAGE" % (tname, columns), message)
    dense = table("(k int, c int, v int, PRIMARY KEY (k, c))", options="COMPACT STORAGE")
    invalid(session, "ALTER TABLE %s ADD w int" % dense, "Cannot add new column to a COMPACT STORAGE table")
    invalid(session, "ALTER TABLE %s DROP v" % dense, "Cannot drop columns from a non-CQL3 table")
    invalid(session, "CREATE INDEX ON %s (v)" % dense,
            "Secondary indexes are not supported on COMPACT STORAGE tables that have clustering columns")
    static = table("(k int PRIMARY KEY, a int)", options="COMPACT STORAGE")
    invalid(session, "ALTER TABLE %s ADD l list<int>" % static,
            "Cannot use non-frozen collections in COMPACT STORAGE tables")
    invalid(session, "CREATE INDEX ON %s (k)" % static,
            "Secondary indexes are not supported on PRIMARY KEY columns in COMPACT STORAGE tables")
    # A static compact table takes new columns, and indexes.
    session.execute("ALTER TABLE %s ADD b text" % static)
    session.execute("INSERT INTO %s (k, a, b) VALUES (1, 2, 'z')" % static)
    session.execute("CREATE INDEX ON %s (a)" % static)
    assert wait_until(lambda: rows(session, "SELECT k, b FROM %s WHERE a = 2" % static) == [(1, "z")], timeout=10)


def test_schema_tables_and_drivers_see_the_layout(session, keyspace, table, cluster):
    static = table("(k int PRIMARY KEY, a int, b text)", options="COMPACT STORAGE")
    dense = table("(k int, c int, v blob, PRIMARY KEY (k, c))", options="COMPACT STORAGE")
    compound = table("(k int, c1 int, c2 int, PRIMARY KEY (k, c1, c2))", options="COMPACT STORAGE")
    plain = table("(k int PRIMARY KEY, a int)")

    def flags(t):
        row = session.execute("SELECT flags FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
                              (keyspace, t)).one()
        return set(row.flags or ())

    assert flags(static) == set()
    assert flags(dense) == {"dense"}
    assert flags(compound) == {"compound", "dense"}
    assert flags(plain) == {"compound"}

    def columns(t):
        return sorted((r.column_name, r.kind, r.type) for r in session.execute(
            "SELECT column_name, kind, type FROM system_schema.columns WHERE keyspace_name = %s AND table_name = %s",
            (keyspace, t)))

    # Cassandra 3's hidden columns: a static compact table's clustering
    # column and value, a dense table's empty value.
    assert columns(static) == [("a", "static", "int"), ("b", "static", "text"), ("column1", "clustering", "text"),
                               ("k", "partition_key", "int"), ("value", "regular", "blob")]
    assert ("", "regular", "empty") in columns(compound)

    cluster.refresh_schema_metadata()
    tables = cluster.metadata.keyspaces[keyspace].tables
    for t in (static, dense, compound):
        assert tables[t].is_compact_storage, t
        assert "WITH COMPACT STORAGE" in tables[t].export_as_string(), tables[t].export_as_string()
    assert not tables[plain].is_compact_storage
    assert list(tables[static].columns) == ["k", "a", "b"]
    assert [c.name for c in tables[dense].clustering_key] == ["c"]
    assert list(tables[compound].columns) == ["k", "c1", "c2"]

    text = session.execute("DESCRIBE TABLE %s" % dense).one().create_statement
    assert ") WITH COMPACT STORAGE\n    AND CLUSTERING ORDER BY (c ASC)\n" in text, text
    # What DESCRIBE prints recreates the table.
    session.execute("DROP TABLE %s" % dense)
    session.execute(text)
    assert flags(dense) == {"dense"}


@pytest.mark.skipif(bool(skip_reason()), reason=skip_reason() or "")
def test_the_layout_survives_a_restart():
    with temp_node("shoal-compact-", args=["--commitlog-sync", "batch"]) as node:
        cluster, session = node.session()
        session.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        session.execute("CREATE TABLE ks.d (k int, c int, v int, PRIMARY KEY (k, c)) WITH COMPACT STORAGE")
        session.execute("INSERT INTO ks.d (k, c, v) VALUES (1, 1, 1)")
        node.nodetool("flush")
        session.execute("INSERT INTO ks.d (k, c, v) VALUES (1, 2, 2)")
        cluster.shutdown()
        node.kill()
        node.start()
        cluster, session = node.session()
        assert rows(session, "SELECT * FROM ks.d") == [(1, 1, 1), (1, 2, 2)]
        invalid(session, "INSERT INTO ks.d (k, c) VALUES (1, 3)", "Column v is mandatory")
        session.execute("DELETE v FROM ks.d WHERE k = 1 AND c = 1")
        assert rows(session, "SELECT * FROM ks.d") == [(1, 2, 2)]
        cluster.shutdown()
