"""Materialized views through the driver: CREATE / ALTER / DROP
MATERIALIZED VIEW with Cassandra's checks and texts, a view following
inserts, updates that move a row to another view partition, deletes of
cells, rows, ranges and partitions, TTLs and client timestamps; building
from existing data; schema metadata (system_schema.views and columns, the
driver's metadata, DESCRIBE, system.built_views); what base-table DDL does
with views; and a view kept across flush, kill -9 and restart. The
randomized comparison with a model is in test_model.py."""
import time

import pytest
from cassandra import AlreadyExists, InvalidRequest
from cassandra.protocol import ConfigurationException
from cassandra.query import SimpleStatement

from conftest import wait_until
from node import skip_reason, temp_node


def rows(session, query, fetch_size=None):
    return sorted(tuple(r) for r in session.execute(SimpleStatement(query, fetch_size=fetch_size)))


def invalid(session, query, message, error=InvalidRequest):
    with pytest.raises(error) as e:
        session.execute(query)
    assert message in str(e.value), str(e.value)


def views_built(session):
    return not list(session.execute("SELECT * FROM system.views_builds_in_progress"))


def create_view(session, name, base, key, select="*", extra=""):
    not_null = " AND ".join("%s IS NOT NULL" % c for c in key.replace("(", "").replace(")", "").split(", "))
    session.execute("CREATE MATERIALIZED VIEW %s AS SELECT %s FROM %s WHERE %s PRIMARY KEY (%s)%s"
                    % (name, select, base, not_null, key, extra))


def test_a_view_keyed_by_a_regular_column_follows_writes(session, table):
    t = table("(p int, c int, v int, w text, PRIMARY KEY (p, c))")
    mv = t + "_by_v"
    create_view(session, mv, t, "v, p, c")
    for p in range(10):
        for c in range(4):
            session.execute("INSERT INTO %s (p, c, v, w) VALUES (%d, %d, %d, 'w%d')" % (t, p, c, (p + c) % 3, c))
    want = sorted((1, p, c, "w%d" % c) for p in range(10) for c in range(4) if (p + c) % 3 == 1)
    assert rows(session, "SELECT v, p, c, w FROM %s WHERE v = 1" % mv) == want
    assert rows(session, "SELECT v, p, c, w FROM %s WHERE v = 1" % mv, fetch_size=3) == want
    # An update of the key column moves the row; of another column, follows.
    session.execute("UPDATE %s SET v = 2 WHERE p = 0 AND c = 1" % t)
    session.execute("UPDATE %s SET w = 'changed' WHERE p = 1 AND c = 0" % t)
    assert (1, 0, 1, "w1") not in rows(session, "SELECT v, p, c, w FROM %s WHERE v = 1" % mv)
    assert (2, 0, 1, "w1") in rows(session, "SELECT v, p, c, w FROM %s WHERE v = 2" % mv)
    assert (1, 1, 0, "changed") in rows(session, "SELECT v, p, c, w FROM %s WHERE v = 1" % mv)
    # Back to where it was: the row returns whole, with what changed meanwhile.
    session.execute("UPDATE %s SET w = 'moved' WHERE p = 0 AND c = 1" % t)
    session.execute("UPDATE %s SET v = 1 WHERE p = 0 AND c = 1" % t)
    assert (1, 0, 1, "moved") in rows(session, "SELECT v, p, c, w FROM %s WHERE v = 1" % mv)
    assert (2, 0, 1, "moved") not in rows(session, "SELECT v, p, c, w FROM %s WHERE v = 2" % mv)
    # A null key column: no view row. Cell, row, range and partition deletes.
    session.execute("DELETE v FROM %s WHERE p = 2 AND c = 2" % t)
    session.execute("DELETE FROM %s WHERE p = 3 AND c = 1" % t)
    session.execute("DELETE FROM %s WHERE p = 4 AND c >= 0 AND c < 3" % t)
    session.execute("DELETE FROM %s WHERE p = 5" % t)
    left = {(p, c) for (_, p, c) in rows(session, "SELECT v, p, c FROM %s" % mv)}
    assert not left & ({(2, 2), (3, 1), (4, 0), (4, 1), (4, 2)} | {(5, c) for c in range(4)})
    assert (4, 3) in left
    # A deleted selected cell is null in the view, the row stays.
    session.execute("DELETE w FROM %s WHERE p = 6 AND c = 0" % t)
    assert rows(session, "SELECT p, c, w FROM %s WHERE v = 0 AND p = 6 AND c = 0" % mv) == [(6, 0, None)]
    # The whole view equals what the base says it should hold.
    base = [tuple(r) for r in session.execute("SELECT v, p, c, w FROM %s" % t) if r.v is not None]
    assert rows(session, "SELECT v, p, c, w FROM %s" % mv) == sorted(base)


def test_a_view_keyed_by_base_key_columns_lives_with_the_row(session, table):
    t = table("(p int, c int, v int, w int, PRIMARY KEY (p, c))")
    mv = t + "_by_c"
    create_view(session, mv, t, "c, p", select="p, c, v")
    session.execute("INSERT INTO %s (p, c) VALUES (1, 1)" % t)
    session.execute("UPDATE %s SET w = 5 WHERE p = 2 AND c = 1" % t)
    session.execute("INSERT INTO %s (p, c, v) VALUES (3, 1, 7)" % t)
    # A row with only its marker, or only an unselected cell, is a row.
    assert rows(session, "SELECT c, p, v FROM %s WHERE c = 1" % mv) == [(1, 1, None), (1, 2, None), (1, 3, 7)]
    session.execute("DELETE w FROM %s WHERE p = 2 AND c = 1" % t)
    session.execute("DELETE FROM %s WHERE p = 3 AND c = 1" % t)
    assert rows(session, "SELECT c, p, v FROM %s WHERE c = 1" % mv) == [(1, 1, None)]


def test_ttls_and_timestamps_carry_into_the_view(session, table):
    t = table("(p int, c int, v int, w int, PRIMARY KEY (p, c))")
    mv = t + "_ttl"
    create_view(session, mv, t, "v, p, c")
    session.execute("INSERT INTO %s (p, c, v, w) VALUES (1, 1, 1, 1) USING TIMESTAMP 1000" % t)
    session.execute("INSERT INTO %s (p, c, v, w) VALUES (2, 1, 1, 1) USING TTL 1" % t)
    session.execute("UPDATE %s USING TTL 100 SET w = 2 WHERE p = 1 AND c = 1" % t)
    row = session.execute("SELECT writetime(w), ttl(w) FROM %s WHERE v = 1 AND p = 1 AND c = 1" % mv).one()
    assert row[0] > 1000 and 90 < row[1] <= 100
    assert wait_until(lambda: rows(session, "SELECT p FROM %s WHERE v = 1" % mv) == [(1,)], timeout=5)
    # An older write of the key column changes nothing.
    session.execute("UPDATE %s USING TIMESTAMP 10 SET v = 5 WHERE p = 1 AND c = 1" % t)
    assert rows(session, "SELECT p FROM %s WHERE v = 5" % mv) == []
    # A key value replaced at its own timestamp leaves no row behind.
    session.execute("INSERT INTO %s (p, c, v) VALUES (9, 9, 3) USING TIMESTAMP 5000" % t)
    session.execute("UPDATE %s USING TIMESTAMP 5000 SET v = 4 WHERE p = 9 AND c = 9" % t)
    assert rows(session, "SELECT v, p FROM %s WHERE v IN (3, 4)" % mv) == [(4, 9)]


def test_a_view_is_built_from_existing_data(session, table):
    t = table("(p int, c int, v int, PRIMARY KEY (p, c))")
    for p in range(50):
        session.execute("INSERT INTO %s (p, c, v) VALUES (%d, 0, %d)" % (t, p, p % 5))
    mv = t + "_built"
    create_view(session, mv, t, "v, p, c")
    assert wait_until(lambda: views_built(session), timeout=30)
    assert [r.view_name for r in session.execute("SELECT view_name FROM system.built_views")].count(mv) == 1
    assert rows(session, "SELECT p FROM %s WHERE v = 2" % mv) == [(p,) for p in range(50) if p % 5 == 2]


def test_create_view_checks(session, keyspace, table):
    t = table("(p int, c int, s int static, v int, w int, m map<int, int>, PRIMARY KEY (p, c))")
    base = "CREATE MATERIALIZED VIEW mv_bad AS SELECT %s FROM " + t + " WHERE %s PRIMARY KEY (%s)"
    nn = "p IS NOT NULL AND c IS NOT NULL AND v IS NOT NULL"
    invalid(session, base % ("*", nn, "v, p, c"), "Cannot include static column 's' in materialized view 'mv_bad'")
    invalid(session, base % ("p, c", "p IS NOT NULL AND c IS NOT NULL", "p"),
            "Cannot create materialized view 'mv_bad' without primary key columns c from base table")
    invalid(session, base % ("p, c, v, w", nn + " AND w IS NOT NULL", "(v, w), p, c"),
            "Cannot include more than one non-primary key column in materialized view primary key")
    invalid(session, base % ("p, c, v", "p IS NOT NULL AND c IS NOT NULL", "v, p, c"),
            "Primary key columns v must be restricted with 'IS NOT NULL' or otherwise")
    invalid(session, base % ("p, c, v", nn + " AND w = 1", "v, p, c"),
            "Non-primary key columns cannot be restricted in the SELECT statement used for materialized view "
            "mv_bad creation (got restrictions on: w)")
    invalid(session, base % ("p, c, m", "p IS NOT NULL AND c IS NOT NULL AND m IS NOT NULL", "m, p, c"),
            "Invalid non-frozen collection type")
    invalid(session, base % ("p, c, v AS x", nn, "v, p, c"), "Cannot use aliases when defining a materialized view")
    invalid(session, base % ("p, c, v", nn, "z, p, c"), "Unknown column 'z' referenced in PRIMARY KEY")
    invalid(session, base % ("p, c, v", nn, "v, p, c") + " WITH default_time_to_live = 5",
            "Cannot set default_time_to_live for a materialized view")
    invalid(session, "CREATE MATERIALIZED VIEW mv_bad AS SELECT * FROM nosuch WHERE p IS NOT NULL PRIMARY KEY (p)",
            "Base table 'nosuch' doesn't exist")
    plain = table("(p int, c int, v int, PRIMARY KEY (p, c))")
    mv = plain + "_v"
    create_view(session, mv, plain, "v, p, c")
    invalid(session, "CREATE MATERIALIZED VIEW %s AS SELECT * FROM %s WHERE v IS NOT NULL AND p IS NOT NULL "
            "AND c IS NOT NULL PRIMARY KEY (v, p, c)" % (mv, plain), mv, error=AlreadyExists)
    session.execute("CREATE MATERIALIZED VIEW IF NOT EXISTS %s AS SELECT * FROM %s WHERE v IS NOT NULL "
                    "AND p IS NOT NULL AND c IS NOT NULL PRIMARY KEY (v, p, c)" % (mv, plain))
    invalid(session, "CREATE MATERIALIZED VIEW mv2 AS SELECT * FROM %s WHERE v IS NOT NULL AND p IS NOT NULL "
            "AND c IS NOT NULL PRIMARY KEY (v, p, c)" % mv,
            "Materialized views cannot be created against other materialized views")
    # Writes to a view, and base DDL the view cannot follow, are refused.
    invalid(session, "INSERT INTO %s (v, p, c) VALUES (1, 1, 1)" % mv, "Cannot directly modify a materialized view")
    invalid(session, "DROP TABLE %s" % plain, "Cannot drop a table when materialized views still depend on it")
    invalid(session, "ALTER TABLE %s DROP v" % plain,
            "Cannot drop column v from base table %s.%s: materialized view %s needs this column" % (keyspace, plain, mv))
    invalid(session, "DROP TABLE %s" % mv, "Cannot use DROP TABLE on Materialized View")
    invalid(session, "DROP MATERIALIZED VIEW nosuch", "Materialized view '%s.nosuch' doesn't exist" % keyspace)
    session.execute("DROP MATERIALIZED VIEW IF EXISTS nosuch")


def test_a_base_column_drops_unless_a_view_needs_it(session, keyspace, table):
    """ScyllaDB's rule: a view needs the columns it holds, and every regular
    column when its key has none of the base's regular columns (each such
    cell keeps a view row alive); the others drop."""
    t = table("(p int, c int, v int, w int, x int, PRIMARY KEY (p, c))")
    create_view(session, t + "_by_v", t, "v, p, c", select="v, p, c, w")
    session.execute("INSERT INTO %s (p, c, v, w, x) VALUES (1, 1, 5, 6, 7)" % t)
    for column in ("v", "w"):
        invalid(session, "ALTER TABLE %s DROP %s" % (t, column),
                "Cannot drop column %s from base table %s.%s: materialized view %s_by_v needs this column"
                % (column, keyspace, t, t))
    session.execute("ALTER TABLE %s DROP x" % t)
    assert list(session.execute("SELECT v, p, c, w FROM %s_by_v" % t)) == [(5, 1, 1, 6)]
    # A view keyed by base key columns alone needs every regular column.
    u = table("(p int, c int, v int, PRIMARY KEY (p, c))")
    create_view(session, u + "_by_c", u, "c, p", select="c, p")
    invalid(session, "ALTER TABLE %s DROP v" % u, "materialized view %s_by_c needs this column" % u)


def test_a_filtered_view_holds_the_rows_its_where_clause_passes(session, keyspace, table):
    """ScyllaDB's view filters: base key columns restricted as a SELECT
    with ALLOW FILTERING would restrict them, and the view's key column."""
    t = table("(p int, c int, v int, w text, PRIMARY KEY (p, c))")
    session.execute("INSERT INTO %s (p, c, v, w) VALUES (1, 1, 5, 'old')" % t)
    session.execute("INSERT INTO %s (p, c, v, w) VALUES (9, 1, 5, 'outside')" % t)
    mv = t + "_five"
    session.execute("CREATE MATERIALIZED VIEW %s AS SELECT * FROM %s WHERE v = 5 AND p IN (1, 2, 3) AND c >= 1 "
                    "PRIMARY KEY (v, p, c)" % (mv, t))
    # Built over existing data: only the row the filter passes.
    assert wait_until(lambda: views_built(session), timeout=30)
    select = "SELECT v, p, c, w FROM %s" % mv
    assert rows(session, select) == [(5, 1, 1, "old")]
    # New rows: in, and out on each restriction.
    for p, c, v in [(2, 1, 5), (2, 0, 5), (4, 1, 5), (3, 2, 6), (3, 3, 5)]:
        session.execute("INSERT INTO %s (p, c, v, w) VALUES (%d, %d, %d, 'w')" % (t, p, c, v))
    assert rows(session, select) == [(5, 1, 1, "old"), (5, 2, 1, "w"), (5, 3, 3, "w")]
    # Out of the filter and back in: the row leaves, then returns whole.
    session.execute("UPDATE %s SET v = 6 WHERE p = 1 AND c = 1" % t)
    session.execute("UPDATE %s SET w = 'changed' WHERE p = 1 AND c = 1" % t)
    assert (1, 1) not in {(p, c) for (_, p, c, _) in rows(session, select)}
    session.execute("UPDATE %s SET v = 5 WHERE p = 1 AND c = 1" % t)
    session.execute("UPDATE %s SET v = 5 WHERE p = 3 AND c = 2" % t)
    assert rows(session, select) == [(5, 1, 1, "changed"), (5, 2, 1, "w"), (5, 3, 2, "w"), (5, 3, 3, "w")]
    # Deletes: the key cell, a row, a range, with a TTL running out.
    session.execute("DELETE v FROM %s WHERE p = 1 AND c = 1" % t)
    session.execute("DELETE FROM %s WHERE p = 2 AND c = 1" % t)
    session.execute("UPDATE %s USING TTL 1 SET v = 5 WHERE p = 3 AND c = 4" % t)
    assert (5, 3, 4, None) in rows(session, select)
    session.execute("DELETE FROM %s WHERE p = 3 AND c >= 3 AND c < 4" % t)
    assert wait_until(lambda: rows(session, select) == [(5, 3, 2, "w")], timeout=10)
    # The schema and DESCRIBE show the restrictions as written.
    row = session.execute("SELECT where_clause FROM system_schema.views WHERE keyspace_name = %s "
                          "AND view_name = %s", (keyspace, mv)).one()
    assert row.where_clause == "v = 5 AND p IN (1, 2, 3) AND c >= 1"
    text = session.execute("DESCRIBE MATERIALIZED VIEW %s" % mv).one().create_statement
    assert "WHERE v = 5 AND p IN (1, 2, 3) AND c >= 1\n" in text, text


def test_a_view_filtered_on_clustering_tuples(session, table):
    t = table("(p int, c1 int, c2 text, v int, PRIMARY KEY (p, c1, c2))")
    mv = t + "_tuples"
    session.execute("CREATE MATERIALIZED VIEW %s AS SELECT * FROM %s WHERE p IS NOT NULL AND (c1, c2) > (1, 'b') "
                    "AND (c1, c2) IN ((1, 'c'), (2, 'a'), (0, 'z')) PRIMARY KEY ((c1, p), c2)" % (mv, t))
    for c1, c2 in [(0, "z"), (1, "b"), (1, "c"), (2, "a"), (2, "b")]:
        session.execute("INSERT INTO %s (p, c1, c2, v) VALUES (7, %d, '%s', 1)" % (t, c1, c2))
    assert rows(session, "SELECT c1, c2 FROM %s" % mv) == [(1, "c"), (2, "a")]


def test_view_filters_refused_as_scylladb_refuses_them(session, table):
    t = table("(p int, c int, s int static, v int, w int, PRIMARY KEY (p, c))")
    base = "CREATE MATERIALIZED VIEW mv_bad AS SELECT p, c, v FROM " + t + " WHERE %s PRIMARY KEY (%s)"
    nn = "p IS NOT NULL AND c IS NOT NULL"
    prefix = "Non-primary key columns cannot be restricted in the SELECT statement used for materialized view " \
             "mv_bad creation (got restrictions on: "
    # A regular column only where it is the view's key column, alone.
    invalid(session, base % (nn + " AND v = 1 AND w = 2", "v, p, c"), prefix + "v, w)")
    invalid(session, base % (nn + " AND w = 2", "p, c"), prefix + "w)")
    invalid(session, base % (nn + " AND v = 2", "p, c"), prefix + "v)")
    invalid(session, base % (nn + " AND s = 6 AND v IS NOT NULL", "v, p, c"), prefix + "s)")
    invalid(session, base % ("p IS NOT NULL AND (p, c) > (1, 1) AND v IS NOT NULL", "v, p, c"),
            "Multi-column relations can only be applied to clustering columns but was applied to: p")
    invalid(session, base % (nn + " AND token(p) > 0 AND v IS NOT NULL", "v, p, c"),
            "Cannot use token relation when defining a materialized view")
    invalid(session, base % (nn + " AND v IS NOT NULL AND nosuch = 1", "v, p, c"), "Undefined column name nosuch")
    bound = base % ("p = ? AND c IS NOT NULL AND v IS NOT NULL", "v, p, c")
    invalid(session, bound, "Cannot use query parameters in CREATE MATERIALIZED VIEW statements")
    with pytest.raises(InvalidRequest, match="Cannot use query parameters in CREATE MATERIALIZED VIEW"):
        session.prepare(bound)
    # A key column restricted otherwise needs no IS NOT NULL ("or otherwise").
    session.execute(base.replace("mv_bad", "mv_ok") % ("p = 1 AND c IS NOT NULL AND v > 0", "v, p, c"))
    session.execute("DROP MATERIALIZED VIEW mv_ok")


def test_schema_metadata_describe_and_ddl(cluster, session, keyspace, table):
    t = table("(p int, c int, v int, w int, PRIMARY KEY (p, c))")
    mv = t + "_meta"
    create_view(session, mv, t, "v, p, c", extra=" WITH CLUSTERING ORDER BY (p DESC, c ASC) AND comment = 'hi'")
    row = session.execute("SELECT * FROM system_schema.views WHERE keyspace_name = %s AND view_name = %s",
                          (keyspace, mv)).one()
    assert row.base_table_name == t and row.include_all_columns and row.comment == "hi"
    assert row.where_clause == "v IS NOT NULL AND p IS NOT NULL AND c IS NOT NULL"
    columns = {r.column_name: r.kind for r in session.execute(
        "SELECT column_name, kind FROM system_schema.columns WHERE keyspace_name = %s AND table_name = %s",
        (keyspace, mv))}
    assert columns == {"v": "partition_key", "p": "clustering", "c": "clustering", "w": "regular"}
    assert not list(session.execute(
        "SELECT * FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s", (keyspace, mv)))
    # SELECT * shows the view's columns only, in Cassandra's order.
    session.execute("INSERT INTO %s (p, c, v, w) VALUES (1, 2, 3, 4)" % t)
    result = session.execute("SELECT * FROM %s" % mv)
    assert list(result.column_names) == ["v", "p", "c", "w"] and list(result.one()) == [3, 1, 2, 4]
    # The driver's metadata.
    cluster.refresh_schema_metadata()
    meta = cluster.metadata.keyspaces[keyspace]
    assert mv in meta.views and meta.views[mv].base_table_name == t
    assert mv in meta.tables[t].views
    assert [c.name for c in meta.views[mv].partition_key] == ["v"]
    # DESCRIBE.
    text = session.execute("DESCRIBE MATERIALIZED VIEW %s" % mv).one().create_statement
    assert text.startswith("CREATE MATERIALIZED VIEW %s.%s AS\n    SELECT *\n    FROM %s.%s\n" % (keyspace, mv, keyspace, t)), text
    assert "PRIMARY KEY (v, p, c)" in text and "CLUSTERING ORDER BY (p DESC, c ASC)" in text
    assert "default_time_to_live" not in text
    # A table's description includes its views, as Cassandra's.
    described = [r.name for r in session.execute("DESCRIBE TABLE %s" % t)]
    assert described == [t, mv]
    described = [r.name for r in session.execute("DESCRIBE KEYSPACE %s" % keyspace)]
    assert described.index(mv) == described.index(t) + 1
    # ALTER MATERIALIZED VIEW; a column added to the base joins a SELECT * view.
    session.execute("ALTER MATERIALIZED VIEW %s WITH comment = 'there'" % mv)
    assert session.execute("SELECT comment FROM system_schema.views WHERE keyspace_name = %s AND view_name = %s",
                           (keyspace, mv)).one().comment == "there"
    session.execute("ALTER TABLE %s ADD x int" % t)
    session.execute("UPDATE %s SET x = 8 WHERE p = 1 AND c = 2" % t)
    assert session.execute("SELECT x FROM %s WHERE v = 3" % mv).one().x == 8
    # Dropped: the view, then the base.
    session.execute("DROP MATERIALIZED VIEW %s" % mv)
    assert not list(session.execute(
        "SELECT * FROM system_schema.views WHERE keyspace_name = %s AND view_name = %s", (keyspace, mv)))
    session.execute("DROP TABLE %s" % t)


def test_a_table_id_in_use_is_refused(session, keyspace, table):
    """WITH ID = an id another table or view holds is refused (two tables
    with one id would share data); an id that is no uuid is a configuration
    error, as in ScyllaDB."""
    t = table("(p int PRIMARY KEY, v int)")
    mv = t + "_id"
    create_view(session, mv, t, "v, p")
    table_id = session.execute("SELECT id FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
                               (keyspace, t)).one().id
    view_id = session.execute("SELECT id FROM system_schema.views WHERE keyspace_name = %s AND view_name = %s",
                              (keyspace, mv)).one().id
    invalid(session, "CREATE TABLE %s_dup (p int PRIMARY KEY) WITH ID = %s" % (t, table_id),
            "Table with ID %s already exists: %s.%s" % (table_id, keyspace, t))
    invalid(session, "CREATE MATERIALIZED VIEW %s_dup AS SELECT * FROM %s WHERE v IS NOT NULL AND p IS NOT NULL "
            "PRIMARY KEY (v, p) WITH ID = %s" % (mv, t, view_id),
            "Table with ID %s already exists: %s.%s" % (view_id, keyspace, mv))
    invalid(session, "CREATE INDEX ON %s (v) WITH ID = %s" % (t, table_id),
            "Table with ID %s already exists: %s.%s" % (table_id, keyspace, t))
    invalid(session, "CREATE TABLE %s_bad (p int PRIMARY KEY) WITH ID = 'nope'" % t, "Invalid table id",
            error=ConfigurationException)


def test_view_definitions_as_scylladb_takes_them(session, keyspace, table):
    """The view's key columns are selected whether named or not; COMPACT
    STORAGE is refused with Cassandra's text; synchronous_updates is kept
    and shown; system_distributed.view_build_status reports the build."""
    t = table("(p int, c int, v1 int, v2 int, v3 int, PRIMARY KEY (p, c))")
    mv = t + "_keys"
    session.execute("CREATE MATERIALIZED VIEW %s AS SELECT v2 FROM %s WHERE v1 IS NOT NULL AND p IS NOT NULL "
                    "AND c IS NOT NULL PRIMARY KEY (v1, p, c) WITH synchronous_updates = true" % (mv, t))
    session.execute("INSERT INTO %s (p, c, v1, v2, v3) VALUES (1, 2, 3, 4, 5)" % t)
    result = session.execute("SELECT * FROM %s WHERE v1 = 3" % mv)
    assert list(result.column_names) == ["v1", "p", "c", "v2"] and list(result.one()) == [3, 1, 2, 4]
    described = session.execute("DESCRIBE MATERIALIZED VIEW %s" % mv).one()
    assert described.type == "view"
    assert "\n    AND synchronous_updates = true" in described.create_statement
    assert wait_until(lambda: [r.status for r in session.execute(
        "SELECT status FROM system_distributed.view_build_status WHERE keyspace_name = %s AND view_name = %s",
        (keyspace, mv))] == ["SUCCESS"])
    invalid(session, "CREATE MATERIALIZED VIEW %s_cs AS SELECT * FROM %s WHERE v1 IS NOT NULL AND p IS NOT NULL "
            "AND c IS NOT NULL PRIMARY KEY (v1, p, c) WITH COMPACT STORAGE" % (mv, t),
            "Cannot use 'COMPACT STORAGE' when defining a materialized view")


def test_truncate_of_the_base_empties_its_views(session, table):
    t = table("(p int PRIMARY KEY, v int)")
    mv = t + "_tr"
    create_view(session, mv, t, "v, p")
    session.execute("INSERT INTO %s (p, v) VALUES (1, 1)" % t)
    assert rows(session, "SELECT p FROM %s" % mv) == [(1,)]
    session.execute("TRUNCATE %s" % t)
    assert rows(session, "SELECT p FROM %s" % mv) == []


@pytest.mark.skipif(bool(skip_reason()), reason=skip_reason() or "")
def test_a_view_survives_flush_kill_and_restart():
    with temp_node("shoal-mv-", args=["--commitlog-sync", "batch"]) as node:
        cluster, session = node.session()
        session.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        session.execute("CREATE TABLE ks.t (p int, c int, v int, w int, PRIMARY KEY (p, c))")
        for p in range(20):
            session.execute("INSERT INTO ks.t (p, c, v, w) VALUES (%d, 0, %d, %d)" % (p, p % 4, p))
        session.execute("CREATE MATERIALIZED VIEW ks.mv AS SELECT p, c, v, w FROM ks.t WHERE v IS NOT NULL "
                        "AND p IS NOT NULL AND c IS NOT NULL PRIMARY KEY (v, p, c)")
        assert wait_until(lambda: views_built(session), timeout=30)
        node.nodetool("flush")
        session.execute("UPDATE ks.t SET v = 9 WHERE p = 1 AND c = 0")
        want = rows(session, "SELECT v, p, c, w FROM ks.mv")
        assert (9, 1, 0, 1) in want and len(want) == 20
        cluster.shutdown()
        node.kill()
        node.start()
        cluster, session = node.session()
        assert rows(session, "SELECT v, p, c, w FROM ks.mv") == want
        text = session.execute("DESCRIBE MATERIALIZED VIEW ks.mv").one().create_statement
        assert "SELECT p, c, v, w" in text or "SELECT v, p, c, w" in text, text
        session.execute("UPDATE ks.t SET v = 8 WHERE p = 2 AND c = 0")
        assert (8, 2, 0, 2) in rows(session, "SELECT v, p, c, w FROM ks.mv WHERE v = 8")
        cluster.shutdown()
