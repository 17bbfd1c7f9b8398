"""Secondary indexes (ScyllaDB's global kind, and local ones) through the
driver: CREATE/DROP INDEX with Cassandra's checks and texts, queries by
every kind of target, consistency with writes, deletes and TTLs, building
from existing data, paging and LIMIT, schema metadata (system_schema.indexes,
the driver's metadata, DESCRIBE), and an index kept across flush, kill -9
and restart. The randomized comparison with a model is in test_model.py."""
import json
import os
import time
import urllib.request

import pytest
from cassandra import InvalidRequest
from cassandra.query import SimpleStatement

from conftest import HOST, IS_CASSANDRA, wait_until
from node import skip_reason, temp_node

FILTERING = "ALLOW FILTERING"


def rows(session, query, *args, fetch_size=None):
    statement = SimpleStatement(query, fetch_size=fetch_size)
    return sorted(tuple(r) for r in session.execute(statement, args))


def builds_done(session):
    return not list(session.execute("SELECT * FROM system.index_builds_in_progress"))


def invalid(session, query, message):
    with pytest.raises(InvalidRequest) as e:
        session.execute(query)
    assert message in str(e.value), str(e.value)


def test_index_on_a_regular_column_follows_writes_deletes_and_ttls(session, table):
    t = table("(p int, c int, v int, w int, PRIMARY KEY (p, c))")
    session.execute("CREATE INDEX ON %s (v)" % t)
    for p in range(20):
        for c in range(5):
            session.execute("INSERT INTO %s (p, c, v, w) VALUES (%d, %d, %d, %d)" % (t, p, c, (p + c) % 3, c))
    query = "SELECT p, c FROM %s WHERE v = 1" % t
    want = sorted((p, c) for p in range(20) for c in range(5) if (p + c) % 3 == 1)
    assert rows(session, query) == want
    # Paged in pages that end inside partitions, and limited.
    assert rows(session, query, fetch_size=3) == want
    assert len(rows(session, query + " LIMIT 7", fetch_size=2)) == 7
    assert session.execute("SELECT count(*) FROM %s WHERE v = 1" % t).one()[0] == len(want)
    # A changed value moves the row; a deleted cell, row or partition leaves.
    session.execute("UPDATE %s SET v = 1 WHERE p = 0 AND c = 0" % t)
    session.execute("UPDATE %s SET v = 2 WHERE p = 0 AND c = 1" % t)
    session.execute("DELETE v FROM %s WHERE p = 1 AND c = 0" % t)
    session.execute("DELETE FROM %s WHERE p = 2 AND c = 2" % t)
    session.execute("DELETE FROM %s WHERE p = 3" % t)
    session.execute("DELETE FROM %s WHERE p = 4 AND c >= 1 AND c < 4" % t)
    want = sorted(set(want) - {(0, 1), (1, 0), (2, 2), (4, 1), (4, 2), (4, 3)} - {(3, c) for c in range(5)} | {(0, 0)})
    assert rows(session, query) == want
    # Other columns of the row do not disturb the entry.
    session.execute("UPDATE %s SET w = 9 WHERE p = 0 AND c = 0" % t)
    assert (0, 0) in rows(session, query)
    # An entry lives as long as its cell.
    session.execute("INSERT INTO %s (p, c, v) VALUES (100, 0, 7) USING TTL 1" % t)
    assert rows(session, "SELECT p, c FROM %s WHERE v = 7" % t) == [(100, 0)]
    time.sleep(2.1)
    assert rows(session, "SELECT p, c FROM %s WHERE v = 7" % t) == []


def test_conditional_writes_and_batches_update_indexes(session, table):
    t = table("(p int, c int, v int, l list<int>, PRIMARY KEY (p, c))")
    session.execute("CREATE INDEX ON %s (v)" % t)
    session.execute("CREATE INDEX ON %s (l)" % t)
    assert session.execute("INSERT INTO %s (p, c, v) VALUES (1, 1, 1) IF NOT EXISTS" % t).one()[0]
    assert session.execute("UPDATE %s SET v = 2 WHERE p = 1 AND c = 1 IF v = 1" % t).one()[0]
    assert not session.execute("UPDATE %s SET v = 3 WHERE p = 1 AND c = 1 IF v = 1" % t).one()[0]
    assert rows(session, "SELECT p, c FROM %s WHERE v = 2" % t) == [(1, 1)]
    assert rows(session, "SELECT p, c FROM %s WHERE v = 1" % t) == []
    session.execute("BEGIN BATCH INSERT INTO %s (p, c, v) VALUES (2, 1, 2); "
                    "UPDATE %s SET v = 5 WHERE p = 1 AND c = 1; APPLY BATCH" % (t, t))
    assert rows(session, "SELECT p, c FROM %s WHERE v = 2" % t) == [(2, 1)]
    # List operations that read before they write, under the same lock.
    session.execute("UPDATE %s SET l = [7, 8] WHERE p = 3 AND c = 1" % t)
    session.execute("UPDATE %s SET l[0] = 9 WHERE p = 3 AND c = 1" % t)
    assert rows(session, "SELECT p FROM %s WHERE l CONTAINS 7" % t) == []
    assert rows(session, "SELECT p FROM %s WHERE l CONTAINS 9" % t) == [(3,)]
    session.execute("UPDATE %s SET l = l - [8] WHERE p = 3 AND c = 1" % t)
    assert rows(session, "SELECT p FROM %s WHERE l CONTAINS 8" % t) == []


def test_index_is_built_from_existing_data(session, table):
    t = table("(p int, c int, v text, PRIMARY KEY (p, c))")
    for p in range(300):
        session.execute("INSERT INTO %s (p, c, v) VALUES (%d, 0, '%s')" % (t, p, "even" if p % 2 == 0 else "odd"))
    session.execute("CREATE INDEX built ON %s (v)" % t)
    assert wait_until(lambda: builds_done(session), timeout=30)
    built = {r.index_name for r in session.execute("SELECT * FROM system.built_indexes")}
    assert "built" in built
    assert rows(session, "SELECT p FROM %s WHERE v = 'odd'" % t) == [(p,) for p in range(1, 300, 2)]


def test_indexes_on_collections(session, table):
    t = table("(p int PRIMARY KEY, m map<text, int>, s set<int>, l list<text>, f frozen<list<int>>)")
    session.execute("CREATE INDEX ON %s (keys(m))" % t)
    session.execute("CREATE INDEX m_values ON %s (m)" % t)
    session.execute("CREATE INDEX ON %s (entries(m))" % t)
    session.execute("CREATE INDEX ON %s (s)" % t)
    session.execute("CREATE INDEX ON %s (values(l))" % t)
    session.execute("CREATE INDEX ON %s (full(f))" % t)
    session.execute("INSERT INTO %s (p, m, s, l, f) VALUES (1, {'a': 1, 'b': 2}, {10, 20}, ['x', 'y', 'x'], [1, 2])" % t)
    session.execute("INSERT INTO %s (p, m, s, l, f) VALUES (2, {'b': 1}, {20}, ['y'], [2, 1])" % t)
    assert rows(session, "SELECT p FROM %s WHERE m CONTAINS KEY 'b'" % t) == [(1,), (2,)]
    assert rows(session, "SELECT p FROM %s WHERE m CONTAINS 1" % t) == [(1,), (2,)]
    assert rows(session, "SELECT p FROM %s WHERE m['b'] = 1" % t) == [(2,)]
    assert rows(session, "SELECT p FROM %s WHERE s CONTAINS 10" % t) == [(1,)]
    assert rows(session, "SELECT p FROM %s WHERE l CONTAINS 'x'" % t) == [(1,)]
    assert rows(session, "SELECT p FROM %s WHERE f = [2, 1]" % t) == [(2,)]
    # Element changes: one of two equal list elements removed keeps the entry.
    session.execute("UPDATE %s SET l[0] = 'z' WHERE p = 1" % t)
    assert rows(session, "SELECT p FROM %s WHERE l CONTAINS 'x'" % t) == [(1,)]
    session.execute("UPDATE %s SET l = l - ['x'] WHERE p = 1" % t)
    assert rows(session, "SELECT p FROM %s WHERE l CONTAINS 'x'" % t) == []
    session.execute("UPDATE %s SET m['a'] = 5, s = s - {20} WHERE p = 1" % t)
    assert rows(session, "SELECT p FROM %s WHERE m CONTAINS 1" % t) == [(2,)]
    assert rows(session, "SELECT p FROM %s WHERE m['a'] = 5" % t) == [(1,)]
    assert rows(session, "SELECT p FROM %s WHERE s CONTAINS 20" % t) == [(2,)]
    session.execute("DELETE m FROM %s WHERE p = 2" % t)
    assert rows(session, "SELECT p FROM %s WHERE m CONTAINS KEY 'b'" % t) == [(1,)]


def test_indexes_on_static_and_key_columns(session, table):
    t = table("(a int, b int, c int, s int static, v int, PRIMARY KEY ((a, b), c))")
    session.execute("CREATE INDEX ON %s (s)" % t)
    session.execute("CREATE INDEX ON %s (b)" % t)
    session.execute("CREATE INDEX ON %s (c)" % t)
    for a in range(4):
        for b in range(3):
            session.execute("UPDATE %s SET s = %d WHERE a = %d AND b = %d" % (t, (a + b) % 2, a, b))
            for c in range(3):
                session.execute("INSERT INTO %s (a, b, c, v) VALUES (%d, %d, %d, 0)" % (t, a, b, c))
    assert rows(session, "SELECT a, b, c FROM %s WHERE s = 1" % t, fetch_size=4) == sorted(
        (a, b, c) for a in range(4) for b in range(3) for c in range(3) if (a + b) % 2 == 1)
    assert rows(session, "SELECT a, c FROM %s WHERE b = 2" % t) == sorted((a, c) for a in range(4) for c in range(3))
    assert rows(session, "SELECT a, b FROM %s WHERE c = 1" % t) == sorted((a, b) for a in range(4) for b in range(3))
    # A row lives in a key column's index while any part of it does.
    session.execute("DELETE v FROM %s WHERE a = 0 AND b = 0 AND c = 1" % t)
    assert (0, 0) in rows(session, "SELECT a, b FROM %s WHERE c = 1" % t)
    session.execute("DELETE FROM %s WHERE a = 0 AND b = 0 AND c = 1" % t)
    assert (0, 0) not in rows(session, "SELECT a, b FROM %s WHERE c = 1" % t)
    session.execute("UPDATE %s SET v = 3 WHERE a = 0 AND b = 0 AND c = 1" % t)
    assert (0, 0) in rows(session, "SELECT a, b FROM %s WHERE c = 1" % t)


def test_which_restrictions_need_allow_filtering(session, table):
    t = table("(p int, c int, v int, w int, PRIMARY KEY (p, c))")
    session.execute("CREATE INDEX ON %s (v)" % t)
    session.execute("INSERT INTO %s (p, c, v, w) VALUES (1, 1, 1, 1)" % t)
    session.execute("INSERT INTO %s (p, c, v, w) VALUES (1, 2, 1, 2)" % t)
    assert rows(session, "SELECT c FROM %s WHERE p = 1 AND v = 1" % t) == [(1,), (2,)]
    # An index scan with a clustering restriction checks every entry's row:
    # filtering, as Cassandra and ScyllaDB count it.
    invalid(session, "SELECT c FROM %s WHERE v = 1 AND c = 2" % t, "ALLOW FILTERING")
    assert rows(session, "SELECT c FROM %s WHERE v = 1 AND c = 2 ALLOW FILTERING" % t) == [(2,)]
    invalid(session, "SELECT c FROM %s WHERE v = 1 AND w = 2" % t, "ALLOW FILTERING")
    assert rows(session, "SELECT c FROM %s WHERE v = 1 AND w = 2 ALLOW FILTERING" % t) == [(2,)]
    invalid(session, "SELECT c FROM %s WHERE w = 2" % t, "ALLOW FILTERING")


def test_a_partition_key_index_does_not_serve_a_restricted_partition(session, table):
    # With the whole partition key given, an index on one of its columns has
    # nothing to narrow: the index on the clustering column serves, with no
    # filtering (ScyllaDB's choice; cassandra_tests testIndexesOnComplexPrimaryKey).
    t = table("(pk0 int, pk1 int, ck0 int, ck1 int, v int, PRIMARY KEY ((pk0, pk1), ck0, ck1))")
    session.execute("CREATE INDEX ON %s (pk0)" % t)
    session.execute("CREATE INDEX ON %s (ck1)" % t)
    for i in range(4):
        session.execute("INSERT INTO %s (pk0, pk1, ck0, ck1, v) VALUES (3, 4, %d, %d, %d)" % (t, i, i % 2, i))
    session.execute("INSERT INTO %s (pk0, pk1, ck0, ck1, v) VALUES (3, 5, 0, 0, 9)" % t)
    assert rows(session, "SELECT v FROM %s WHERE pk0 = 3 AND pk1 = 4 AND ck1 = 0" % t) == [(0,), (2,)]
    assert rows(session, "SELECT v FROM %s WHERE pk0 = 3" % t) == [(0,), (1,), (2,), (3,), (9,)]
    invalid(session, "SELECT v FROM %s WHERE pk0 = 3 AND pk1 = 4 AND v = 0" % t, "ALLOW FILTERING")


def test_local_index(session, table):
    t = table("(p int, c int, v int, PRIMARY KEY (p, c))")
    session.execute("CREATE INDEX local_v ON %s ((p), v)" % t)
    for c in range(10):
        session.execute("INSERT INTO %s (p, c, v) VALUES (1, %d, %d)" % (t, c, c % 2))
    assert rows(session, "SELECT c FROM %s WHERE p = 1 AND v = 1" % t) == [(c,) for c in range(1, 10, 2)]
    invalid(session, "SELECT c FROM %s WHERE v = 1" % t, "ALLOW FILTERING")
    target = session.execute("SELECT options FROM system_schema.indexes WHERE keyspace_name = %s "
                             "AND table_name = %s AND index_name = 'local_v'", (session.keyspace, t)).one()
    assert target.options == {"target": '{"pk":["p"],"ck":["v"]}'}


def test_index_ddl_refusals(session, table):
    t = table("(p int, q int, c int, v int, m map<int, int>, f frozen<list<int>>, d duration, "
              "PRIMARY KEY ((p, q), c))")
    session.execute("CREATE INDEX i1 ON %s (v)" % t)
    invalid(session, "CREATE INDEX i1 ON %s (c)" % t, "Index 'i1' already exists")
    # IF NOT EXISTS forgives only the same index (ScyllaDB's reading).
    invalid(session, "CREATE INDEX IF NOT EXISTS i1 ON %s (c)" % t, "Index 'i1' already exists")
    session.execute("CREATE INDEX IF NOT EXISTS i1 ON %s (v)" % t)
    invalid(session, "CREATE INDEX i2 ON %s (v)" % t, "Index i2 is a duplicate of existing index i1")
    invalid(session, "CREATE INDEX ON %s (nope)" % t, "Column 'nope' doesn't exist")
    invalid(session, "CREATE INDEX ON missing_table (v)", "Table 'missing_table' doesn't exist")
    invalid(session, "CREATE INDEX ON %s (f)" % t, "Cannot create values() index on frozen column f")
    invalid(session, "CREATE INDEX ON %s (full(m))" % t, "full() indexes can only be created on frozen collections")
    invalid(session, "CREATE INDEX ON %s (keys(v))" % t, "Non-collection columns only support simple indexes")
    invalid(session, "CREATE INDEX ON %s (d)" % t, "Secondary indexes are not supported on duration columns")
    single = table("(k int PRIMARY KEY, n counter)")
    invalid(session, "CREATE INDEX ON %s (k)" % single, "Secondary indexes on counter tables aren't supported")
    plain = table("(k int PRIMARY KEY, v int)")
    invalid(session, "CREATE INDEX ON %s (k)" % plain, "Cannot create secondary index on the only partition key column k")
    invalid(session, "DROP INDEX nope", "doesn't exist")
    session.execute("DROP INDEX IF EXISTS nope")
    invalid(session, "ALTER TABLE %s DROP v" % t, "Cannot drop column v because it has dependent secondary indexes (i1)")
    invalid(session, "INSERT INTO i1_index (v, idx_token, p, q, c) VALUES (1, 1, 1, 1, 1)",
            "Cannot directly modify a materialized view")
    invalid(session, "DROP TABLE i1_index", "Cannot use DROP TABLE on Materialized View")
    # Dropped, the index no longer serves queries, and may be created again.
    session.execute("DROP INDEX i1")
    invalid(session, "SELECT * FROM %s WHERE v = 1" % t, "ALLOW FILTERING")
    session.execute("CREATE INDEX i1 ON %s (v)" % t)


def test_index_metadata_describe_and_drop_table(cluster, session, table):
    t = table("(p int, c int, v int, m map<text, int>, PRIMARY KEY (p, c))")
    session.execute("CREATE INDEX ON %s (v)" % t)
    session.execute("CREATE INDEX mk ON %s (keys(m))" % t)
    indexes = {r.index_name: (r.kind, r.options["target"]) for r in session.execute(
        "SELECT * FROM system_schema.indexes WHERE keyspace_name = %s AND table_name = %s", (session.keyspace, t))}
    assert indexes == {"%s_v_idx" % t: ("COMPOSITES", "v"), "mk": ("COMPOSITES", "keys(m)")}
    tables = {r.table_name for r in session.execute(
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (session.keyspace,))}
    assert "mk_index" not in tables and t in tables
    cluster.refresh_table_metadata(session.keyspace, t)
    meta = cluster.metadata.keyspaces[session.keyspace].tables[t]
    assert sorted(meta.indexes) == sorted(["%s_v_idx" % t, "mk"])
    statements = [r.create_statement for r in session.execute("DESCRIBE TABLE %s" % t)]
    assert statements[1].startswith("CREATE INDEX mk ON %s.%s(keys(m)) WITH " % (session.keyspace, t))
    assert statements[2].startswith("CREATE INDEX %s_v_idx ON %s.%s(v) WITH " % (t, session.keyspace, t))
    described = session.execute("DESCRIBE INDEX mk").one()
    assert (described.type, described.create_statement) == ("index", statements[1])
    session.execute("INSERT INTO %s (p, c, v) VALUES (1, 1, 1)" % t)
    session.execute("TRUNCATE %s" % t)
    assert rows(session, "SELECT * FROM %s WHERE v = 1" % t) == []
    session.execute("DROP TABLE %s" % t)
    assert not list(session.execute(
        "SELECT * FROM system_schema.indexes WHERE keyspace_name = %s AND table_name = %s", (session.keyspace, t)))
    invalid(session, "DROP INDEX mk", "doesn't exist")


def test_index_finds_the_empty_value_and_nothing_for_null(session, table):
    """The empty value is indexed like any other (ScyllaDB's
    test_index_empty_string), before and after the index is built; `= null`
    on an indexed column selects nothing (ScyllaDB's answer, not an error)."""
    t = table("(p int PRIMARY KEY, v text, b blob)")
    session.execute("INSERT INTO %s (p, v, b) VALUES (1, 'hello', 0x01)" % t)
    session.execute("INSERT INTO %s (p, v, b) VALUES (2, '', 0x)" % t)
    session.execute("CREATE INDEX ON %s (v)" % t)
    session.execute("CREATE INDEX ON %s (b)" % t)
    assert wait_until(lambda: builds_done(session))
    session.execute("INSERT INTO %s (p, v, b) VALUES (3, '', 0x)" % t)
    assert rows(session, "SELECT p FROM %s WHERE v = ''" % t) == [(2,), (3,)]
    assert rows(session, "SELECT p FROM %s WHERE b = 0x" % t) == [(2,), (3,)]
    assert rows(session, "SELECT p FROM %s WHERE v = 'hello'" % t) == [(1,)]
    session.execute("UPDATE %s SET v = 'x' WHERE p = 2" % t)
    assert rows(session, "SELECT p FROM %s WHERE v = ''" % t) == [(3,)]
    assert rows(session, "SELECT p FROM %s WHERE v = null" % t) == []
    assert list(session.execute(session.prepare("SELECT p FROM %s WHERE v = ?" % t), (None,))) == []


def test_paged_group_by_over_an_index_ends(session, table):
    """GROUP BY over an index, paged: a full page carries a paging state even
    when it holds the last group, so a client that pages while pages come
    back full gets a last, short page rather than the first page again
    (ScyllaDB's test_index_paging_group_by looped forever)."""
    t = table("(p int, c1 int, c2 int, PRIMARY KEY (p, c1, c2))")
    session.execute("CREATE INDEX ON %s (c1)" % t)
    for i in range(10):
        session.execute("INSERT INTO %s (p, c1, c2) VALUES (%d, 1, %d)" % (t, i, i))
    session.execute("INSERT INTO %s (p, c1, c2) VALUES (17, 17, 2)" % t)
    for page_size in (1, 2, 3, 5, 100):
        statement = SimpleStatement("SELECT p FROM %s WHERE c1 = 1 GROUP BY p" % t, fetch_size=page_size)
        result = session.execute(statement)
        got, pages = [], 1
        while len(result.current_rows) == page_size:
            got.extend(result.current_rows)
            assert result.paging_state is not None
            result = session.execute(statement, paging_state=result.paging_state)
            pages += 1
            assert pages <= 12
        got.extend(result.current_rows)
        assert sorted(tuple(r) for r in got) == [(i,) for i in range(10)], page_size
        assert result.paging_state is None


def test_built_indexes_and_the_index_view(session, table):
    """A built index is listed in system."IndexInfo" (table_name holds the
    keyspace, as in Cassandra and ScyllaDB), in system.built_indexes and
    system.built_views (its view), and its view is described as the
    materialized view ScyllaDB makes for it, tombstone_gc included."""
    t = table("(p int PRIMARY KEY, v int)")
    name = "%s_named" % t
    session.execute("CREATE INDEX %s ON %s (v)" % (name, t))
    ks = session.keyspace
    assert wait_until(lambda: list(session.execute(
        'SELECT index_name FROM system."IndexInfo" WHERE table_name = %s AND index_name = %s', (ks, name))))
    assert (ks, name) in [(r.table_name, r.index_name) for r in session.execute('SELECT * FROM system."IndexInfo"')]
    assert (ks, name + "_index") in [(r.keyspace_name, r.view_name)
                                     for r in session.execute("SELECT * FROM system.built_views")]
    described = session.execute("DESCRIBE MATERIALIZED VIEW %s.%s_index" % (ks, name)).one()
    assert described.type == "view"
    statement = described.create_statement
    # ScyllaDB's: commented out, as the index (not this) recreates it.
    assert statement.startswith("/* Do NOT execute this statement! It's only for informational purposes.\n"), statement
    assert "\n\nCREATE MATERIALIZED VIEW %s.%s_index AS\n" % (ks, name) in statement and statement.endswith(";\n*/")
    assert "FROM %s.%s\n    WHERE v IS NOT NULL\n    PRIMARY KEY (v, idx_token, p)" % (ks, t) in statement
    assert "tombstone_gc = {" in statement and "idx_live" not in statement
    if os.environ.get("SHOAL_API_PORT") and not IS_CASSANDRA:
        url = "http://%s:%s/column_family/built_indexes/%s:%s" % (HOST, os.environ["SHOAL_API_PORT"], ks, t)
        with urllib.request.urlopen(url) as response:
            assert json.loads(response.read()) == [name]


def test_select_internal_page_size_is_live(admin, session, table):
    """system.config lists select_internal_page_size, which an UPDATE changes
    on the node while it runs (ScyllaDB's cqlpy fixture
    small_select_internal_page_size); aggregates over an index then page
    internally by it and still count every row."""
    select = admin.prepare("SELECT value FROM system.config WHERE name = ?")
    update = admin.prepare("UPDATE system.config SET value = ? WHERE name = ?")
    original = admin.execute(select, ("select_internal_page_size",)).one().value
    assert original == "10000"
    t = table("(id int PRIMARY KEY, v int)")
    session.execute("CREATE INDEX ON %s (v)" % t)
    for i in range(142):
        session.execute("INSERT INTO %s (id, v) VALUES (%d, %d)" % (t, i + 1, i % 2))
    try:
        admin.execute(update, ("50", "select_internal_page_size"))
        assert admin.execute(select, ("select_internal_page_size",)).one().value == "50"
        assert session.execute("SELECT sum(id) FROM %s WHERE v = 1" % t).one()[0] == 71 * 72
        assert session.execute("SELECT count(*) FROM %s" % t).one()[0] == 142
        with pytest.raises(InvalidRequest, match="select_internal_page_size"):
            admin.execute(update, ("none", "select_internal_page_size"))
    finally:
        admin.execute(update, (original, "select_internal_page_size"))
    assert admin.execute(select, ("select_internal_page_size",)).one().value == original


@pytest.mark.skipif(bool(skip_reason()), reason=skip_reason() or "")
def test_index_survives_flush_kill_and_restart():
    with temp_node("shoal-index-", args=["--commitlog-sync", "batch"]) as node:
        cluster, session = node.session()
        session.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        session.execute("CREATE TABLE ks.t (p int, c int, v int, PRIMARY KEY (p, c))")
        session.execute("CREATE INDEX ON ks.t (v)")
        for p in range(50):
            session.execute("INSERT INTO ks.t (p, c, v) VALUES (%d, 0, %d)" % (p, p % 5))
        node.nodetool("flush")
        for p in range(50):
            session.execute("UPDATE ks.t SET v = %d WHERE p = %d AND c = 0" % ((p + 1) % 5, p))
        want = [(p,) for p in range(50) if (p + 1) % 5 == 0]
        assert rows(session, "SELECT p FROM ks.t WHERE v = 0") == want
        cluster.shutdown()
        node.kill()
        node.start()
        cluster, session = node.session()
        assert rows(session, "SELECT p FROM ks.t WHERE v = 0") == want
        node.nodetool("compact")
        assert rows(session, "SELECT p FROM ks.t WHERE v = 0") == want
        cluster.shutdown()


@pytest.mark.skipif(bool(skip_reason()), reason=skip_reason() or "")
def test_a_build_cut_short_by_kill_completes_after_restart():
    from cassandra.concurrent import execute_concurrent_with_args
    with temp_node("shoal-index-build-", args=["--commitlog-sync", "batch"]) as node:
        cluster, session = node.session()
        session.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        session.execute("CREATE TABLE ks.t (p int PRIMARY KEY, v int)")
        insert = session.prepare("INSERT INTO ks.t (p, v) VALUES (?, ?)")
        execute_concurrent_with_args(session, insert, [(p, p % 10) for p in range(20_000)], concurrency=100)
        node.nodetool("flush")
        session.execute("CREATE INDEX ON ks.t (v)")
        # Killed while (or just after) it builds: the restart completes it.
        node.kill()
        cluster.shutdown()
        node.start()
        cluster, session = node.session()
        assert wait_until(lambda: builds_done(session), timeout=60)
        assert session.execute("SELECT count(*) FROM ks.t WHERE v = 3").one()[0] == 2_000
        cluster.shutdown()


if IS_CASSANDRA:
    # Shoal-only: Cassandra has no index build tables of these names, and
    # answers some refusals in other words.
    pytestmark = pytest.mark.skip("Shoal's index semantics (ScyllaDB's global indexes)")


def test_plain_index_on_a_frozen_user_type(session, table):
    # cqlpy's testIndexOnUDT: a plain index on a frozen user type indexes
    # the whole value (full() is for frozen collections), static or not.
    session.execute("CREATE TYPE IF NOT EXISTS addr (street text, city text)")
    for n, static in enumerate(("", " static")):
        t = table("(id int, company text, home frozen<addr>%s, PRIMARY KEY (id, company))" % static)
        session.execute("CREATE INDEX udt_home_%d ON %s (home)" % (n, t))
        session.execute("INSERT INTO %s (id, company, home) VALUES (1, 'R', {street: 'Centre', city: 'C'})" % t)
        query = "SELECT id, company FROM %s WHERE home = %s"
        assert rows(session, query % (t, "{street: 'Centre', city: 'C'}")) == [(1, "R")]
        session.execute("UPDATE %s SET home = {street: 'Fifth', city: 'P'} WHERE id = 1%s" % (t, "" if static else " AND company = 'R'"))
        assert rows(session, query % (t, "{street: 'Centre', city: 'C'}")) == []
        assert rows(session, query % (t, "{street: 'Fifth', city: 'P'}")) == [(1, "R")]


def test_a_clustering_prefix_in_a_restricted_partition_leaves_the_index_to_another_column(session, table):
    # cqlpy's testMultiplePartitionKeyWithIndex: with the partition key given,
    # clustering restrictions that form a prefix select by range, so an index
    # on one of those columns is not used; the index on f serves, with no
    # filtering (ScyllaDB indexes clustering restrictions only when they
    # would need filtering).
    t = table("(a int, b int, c int, d int, e int, f int, PRIMARY KEY ((a, b), c, d, e))")
    session.execute("CREATE INDEX ON %s (c)" % t)
    session.execute("CREATE INDEX ON %s (f)" % t)
    for (c, d, e, f) in [(0, 0, 0, 0), (0, 1, 0, 1), (0, 1, 1, 2), (1, 0, 0, 3), (1, 1, 0, 4), (1, 1, 1, 5), (2, 0, 0, 5)]:
        session.execute("INSERT INTO %s (a, b, c, d, e, f) VALUES (0, 0, %d, %d, %d, %d)" % (t, c, d, e, f))
    assert rows(session, "SELECT c, d, e FROM %s WHERE a = 0 AND b = 0 AND c = 1 AND d >= 1 AND f = 5" % t) == [(1, 1, 1)]
    assert rows(session, "SELECT c, d, e FROM %s WHERE a = 0 AND b = 0 AND c >= 1 AND f = 5" % t) == [(1, 1, 1), (2, 0, 0)]
    # Without the whole partition key the index scan must check each row.
    invalid(session, "SELECT * FROM %s WHERE a = 0 AND c = 1 AND d >= 1 AND f = 5" % t, "ALLOW FILTERING")
    # A clustering restriction that is no prefix still takes c's index.
    assert rows(session, "SELECT c, d, e FROM %s WHERE a = 0 AND b = 0 AND c = 1 AND e = 1 ALLOW FILTERING" % t) == [(1, 1, 1)]
