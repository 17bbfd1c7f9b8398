"""Lightweight transactions: INSERT IF NOT EXISTS, UPDATE/DELETE IF EXISTS or
IF conditions, conditional batches, prepared LWT, SERIAL consistencies.

Results are compared column by column with what Cassandra returns: a ROWS
result with `[applied]` first and, when not applied, the current values of
the condition columns (the whole row for IF NOT EXISTS).
"""

import os
import threading
import urllib.request

import pytest

from cassandra import ConsistencyLevel
from cassandra.protocol import InvalidRequest, SyntaxException
from cassandra.query import UNSET_VALUE, BatchStatement, SimpleStatement

from conftest import HOST, IS_CASSANDRA


def flush(keyspace, table):
    """Flushes `table` through the REST API when the node is Shoal (run.sh sets SHOAL_API_PORT)."""
    if IS_CASSANDRA or not os.environ.get("SHOAL_API_PORT"):
        return
    url = "http://%s:%s/storage_service/keyspace_flush/%s?cf=%s" % (HOST, os.environ["SHOAL_API_PORT"], keyspace, table)
    urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=30).read()


def columns_and_row(rs):
    return rs.column_names, list(rs.one())


# NOT IN in a condition is ScyllaDB's grammar, not Cassandra's.
SCYLLA_GRAMMAR = pytest.mark.skipif(IS_CASSANDRA, reason="NOT IN in a condition is ScyllaDB's grammar")


def kv(table):
    return table("(k int PRIMARY KEY, v int, w text)")


def test_insert_if_not_exists(session, table):
    t = table("(k int, c int, v int, w text, PRIMARY KEY (k, c))")
    rs = session.execute("INSERT INTO %s (k, c, v, w) VALUES (1, 1, 10, 'a') IF NOT EXISTS" % t)
    assert rs.was_applied
    # As ScyllaDB answers (its "LWT differences"): the row checked, applied
    # or not; nulls where there was none.
    assert columns_and_row(rs) == (["[applied]", "k", "c", "v", "w"], [True, None, None, None, None])
    rs = session.execute("INSERT INTO %s (k, c, v) VALUES (1, 1, 20) IF NOT EXISTS" % t)
    assert not rs.was_applied
    assert columns_and_row(rs) == (["[applied]", "k", "c", "v", "w"], [False, 1, 1, 10, "a"])
    # Another row of the same partition does not exist yet.
    assert session.execute("INSERT INTO %s (k, c, v) VALUES (1, 2, 30) IF NOT EXISTS" % t).was_applied
    assert sorted(tuple(r) for r in session.execute("SELECT k, c, v FROM %s" % t)) == [(1, 1, 10), (1, 2, 30)]


def test_insert_if_not_exists_with_ttl(session, table):
    t = kv(table)
    assert session.execute("INSERT INTO %s (k, v) VALUES (1, 1) IF NOT EXISTS USING TTL 1000" % t).was_applied
    ttl = session.execute("SELECT ttl(v) FROM %s WHERE k = 1" % t).one()[0]
    assert 990 < ttl <= 1000


def test_custom_timestamp_is_refused(session, table):
    t = kv(table)
    with pytest.raises(InvalidRequest, match="Cannot provide custom timestamp for conditional updates"):
        session.execute("INSERT INTO %s (k, v) VALUES (1, 1) IF NOT EXISTS USING TIMESTAMP 5" % t)
    with pytest.raises(InvalidRequest, match="Cannot provide custom timestamp for conditional updates"):
        session.execute("UPDATE %s USING TIMESTAMP 5 SET v = 1 WHERE k = 1 IF EXISTS" % t)
    with pytest.raises(InvalidRequest, match="Cannot provide custom timestamp for conditional BATCH"):
        session.execute(
            "BEGIN BATCH USING TIMESTAMP 5 INSERT INTO %s (k, v) VALUES (1, 1) IF NOT EXISTS APPLY BATCH" % t
        )


def test_update_if_exists(session, table):
    t = kv(table)
    rs = session.execute("UPDATE %s SET v = 1 WHERE k = 1 IF EXISTS" % t)
    assert columns_and_row(rs) == (["[applied]", "k", "v", "w"], [False, None, None, None])
    assert session.execute("SELECT * FROM %s WHERE k = 1" % t).one() is None
    session.execute("INSERT INTO %s (k, v, w) VALUES (1, 0, 'x')" % t)
    rs = session.execute("UPDATE %s SET v = 2 WHERE k = 1 IF EXISTS" % t)
    assert columns_and_row(rs) == (["[applied]", "k", "v", "w"], [True, 1, 0, "x"])
    assert session.execute("SELECT v FROM %s WHERE k = 1" % t).one().v == 2


def test_update_if_condition(session, table):
    t = kv(table)
    # No row: not applied, and the values shown are nulls.
    rs = session.execute("UPDATE %s SET v = 2 WHERE k = 1 IF v = 1" % t)
    assert columns_and_row(rs) == (["[applied]", "v"], [False, None])
    session.execute("INSERT INTO %s (k, v, w) VALUES (1, 1, 'a')" % t)
    rs = session.execute("UPDATE %s SET v = 2 WHERE k = 1 IF v = 5" % t)
    assert columns_and_row(rs) == (["[applied]", "v"], [False, 1])
    rs = session.execute("UPDATE %s SET v = 2 WHERE k = 1 IF v = 1" % t)
    assert columns_and_row(rs) == (["[applied]", "v"], [True, 1])
    rs = session.execute("UPDATE %s SET v = 3 WHERE k = 1 IF v = 2 AND w = 'b'" % t)
    assert columns_and_row(rs) == (["[applied]", "v", "w"], [False, 2, "a"])
    assert session.execute("UPDATE %s SET v = 3, w = 'c' WHERE k = 1 IF v = 2 AND w = 'a'" % t).was_applied
    assert tuple(session.execute("SELECT v, w FROM %s WHERE k = 1" % t).one()) == (3, "c")


@pytest.mark.parametrize(
    "condition, applied",
    [
        ("v != 5", True),
        ("v != 3", False),
        ("v < 4", True),
        ("v < 3", False),
        ("v <= 3", True),
        ("v <= 2", False),
        ("v > 2", True),
        ("v > 3", False),
        ("v >= 3", True),
        ("v >= 4", False),
        ("v IN (1, 3)", True),
        ("v IN (1, 2)", False),
        ("v = null", False),
        ("v != null", True),
        ("w = null", True),
        ("w != null", False),
        ("w IN ('x', null)", True),
        # ScyllaDB's NOT IN: null is a candidate like any other.
        pytest.param("v NOT IN (1, 2)", True, marks=SCYLLA_GRAMMAR),
        pytest.param("v NOT IN (2, 3)", False, marks=SCYLLA_GRAMMAR),
        pytest.param("v NOT IN ()", True, marks=SCYLLA_GRAMMAR),
        pytest.param("v NOT IN (null, 7)", True, marks=SCYLLA_GRAMMAR),
        pytest.param("w NOT IN ('x')", True, marks=SCYLLA_GRAMMAR),
        pytest.param("w NOT IN ('x', null)", False, marks=SCYLLA_GRAMMAR),
    ],
)
def test_condition_operators(session, table, condition, applied):
    t = kv(table)
    session.execute("INSERT INTO %s (k, v) VALUES (1, 3)" % t)
    rs = session.execute("UPDATE %s SET v = 100 WHERE k = 1 IF %s" % (t, condition))
    assert rs.was_applied is applied
    assert session.execute("SELECT v FROM %s WHERE k = 1" % t).one().v == (100 if applied else 3)


@SCYLLA_GRAMMAR
def test_prepared_not_in_condition(session, table):
    t = kv(table)
    session.execute("INSERT INTO %s (k, v) VALUES (1, 3)" % t)
    update = session.prepare("UPDATE %s SET v = ? WHERE k = 1 IF v NOT IN ?" % t)
    assert not session.execute(update, (4, [1, 3])).was_applied
    assert session.execute(update, (4, [1, 2])).was_applied
    assert session.execute("SELECT v FROM %s WHERE k = 1" % t).one().v == 4


def test_condition_on_text_compares_values(session, table):
    t = kv(table)
    session.execute("INSERT INTO %s (k, w) VALUES (1, 'b')" % t)
    assert session.execute("UPDATE %s SET v = 1 WHERE k = 1 IF w > 'a'" % t).was_applied
    assert not session.execute("UPDATE %s SET v = 2 WHERE k = 1 IF w > 'b'" % t).was_applied


def test_map_element_condition(session, table):
    t = table("(k int PRIMARY KEY, m map<text, int>, v int)")
    session.execute("INSERT INTO %s (k, m) VALUES (1, {'a': 1, 'b': 2})" % t)
    assert session.execute("UPDATE %s SET v = 1 WHERE k = 1 IF m['a'] = 1" % t).was_applied
    rs = session.execute("UPDATE %s SET v = 2 WHERE k = 1 IF m['b'] = 5" % t)
    assert columns_and_row(rs) == (["[applied]", "m"], [False, {"a": 1, "b": 2}])
    assert session.execute("UPDATE %s SET v = 3 WHERE k = 1 IF m['zz'] = null" % t).was_applied
    assert session.execute("SELECT v FROM %s WHERE k = 1" % t).one().v == 3


def test_contains_conditions_on_collections(session, table):
    """Cassandra 5's IF c CONTAINS x and IF m CONTAINS KEY k."""
    t = table("(k int PRIMARY KEY, s set<int>, l list<text>, m map<text, int>, f frozen<set<int>>, v int)")
    session.execute("INSERT INTO %s (k, s, l, m, f) VALUES (1, {1, 2}, ['a'], {'x': 7}, {3})" % t)
    for condition, applied in [("s CONTAINS 2", True), ("s CONTAINS 5", False), ("l CONTAINS 'a'", True),
                               ("m CONTAINS 7", True), ("m CONTAINS 8", False), ("m CONTAINS KEY 'x'", True),
                               ("m CONTAINS KEY 'y'", False), ("f CONTAINS 3", True),
                               ("s CONTAINS 1 AND m CONTAINS KEY 'x'", True)]:
        rs = session.execute("UPDATE %s SET v = 1 WHERE k = 1 IF %s" % (t, condition))
        assert rs.was_applied == applied, condition
    # A missing collection contains nothing.
    assert not session.execute("UPDATE %s SET v = 1 WHERE k = 2 IF s CONTAINS 1" % t).was_applied
    for condition, message in [("v CONTAINS 1", "Cannot use CONTAINS on non-collection column v"),
                               ("s CONTAINS KEY 1", "Cannot use CONTAINS KEY on non-map column s"),
                               ("s CONTAINS null", "Invalid comparison with null for operator \"CONTAINS\"")]:
        with pytest.raises(InvalidRequest, match=message):
            session.execute("UPDATE %s SET v = 1 WHERE k = 1 IF %s" % (t, condition))


def test_condition_errors(session, table):
    t = table("(k int, c int, v int, PRIMARY KEY (k, c))")
    with pytest.raises(InvalidRequest, match="PRIMARY KEY column 'c' cannot have IF conditions"):
        session.execute("UPDATE %s SET v = 1 WHERE k = 1 AND c = 1 IF c = 1" % t)
    with pytest.raises(InvalidRequest, match="Undefined column name nope"):
        session.execute("UPDATE %s SET v = 1 WHERE k = 1 AND c = 1 IF nope = 1" % t)
    with pytest.raises(InvalidRequest, match="IN on the partition key"):
        session.execute("UPDATE %s SET v = 1 WHERE k IN (1, 2) AND c = 1 IF v = 1" % t)
    with pytest.raises(InvalidRequest, match="DELETE statements must restrict all PRIMARY KEY columns"):
        session.execute("DELETE FROM %s WHERE k = 1 IF EXISTS" % t)


def test_delete_if_exists_and_if_condition(session, table):
    t = kv(table)
    rs = session.execute("DELETE FROM %s WHERE k = 1 IF EXISTS" % t)
    assert columns_and_row(rs) == (["[applied]", "k", "v", "w"], [False, None, None, None])
    session.execute("INSERT INTO %s (k, v, w) VALUES (1, 1, 'a')" % t)
    rs = session.execute("DELETE FROM %s WHERE k = 1 IF v = 2" % t)
    assert columns_and_row(rs) == (["[applied]", "v"], [False, 1])
    rs = session.execute("DELETE w FROM %s WHERE k = 1 IF v = 1" % t)
    assert rs.was_applied
    assert tuple(session.execute("SELECT v, w FROM %s WHERE k = 1" % t).one()) == (1, None)
    assert session.execute("DELETE FROM %s WHERE k = 1 IF EXISTS" % t).was_applied
    assert session.execute("SELECT * FROM %s WHERE k = 1" % t).one() is None


def test_static_column_condition(session, table):
    t = table("(k int, c int, s int STATIC, v int, PRIMARY KEY (k, c))")
    session.execute("INSERT INTO %s (k, s) VALUES (1, 7)" % t)
    assert session.execute("UPDATE %s SET s = 8 WHERE k = 1 IF s = 7" % t).was_applied
    rs = session.execute("UPDATE %s SET v = 1 WHERE k = 1 AND c = 1 IF s = 7" % t)
    assert columns_and_row(rs) == (["[applied]", "s"], [False, 8])


def batch_table(table):
    return table("(k int, c int, v int, PRIMARY KEY (k, c))")


def rows(session, t):
    return sorted(tuple(r) for r in session.execute("SELECT k, c, v FROM %s" % t))


def test_conditional_batch_applied(session, table):
    t = batch_table(table)
    session.execute("INSERT INTO %s (k, c, v) VALUES (1, 1, 1)" % t)
    rs = session.execute(
        """BEGIN BATCH
             UPDATE %(t)s SET v = 2 WHERE k = 1 AND c = 1 IF v = 1;
             INSERT INTO %(t)s (k, c, v) VALUES (1, 2, 20) IF NOT EXISTS;
             INSERT INTO %(t)s (k, c, v) VALUES (1, 3, 30);
           APPLY BATCH""" % {"t": t}
    )
    assert rs.column_names[:2] == ["[applied]", "k"]
    if not IS_CASSANDRA:
        # ScyllaDB: one row per statement, each the row it names as read
        # (nulls for rows not there), applied or not.
        assert [tuple(r) for r in rs] == [(True, 1, 1, 1), (True, None, None, None), (True, None, None, None)]
    assert rows(session, t) == [(1, 1, 2), (1, 2, 20), (1, 3, 30)]


def test_conditional_batch_not_applied_changes_nothing(session, table):
    t = batch_table(table)
    session.execute("INSERT INTO %s (k, c, v) VALUES (1, 1, 1)" % t)
    session.execute("INSERT INTO %s (k, c, v) VALUES (1, 2, 5)" % t)
    rs = session.execute(
        """BEGIN BATCH
             UPDATE %(t)s SET v = 2 WHERE k = 1 AND c = 1 IF v = 1;
             UPDATE %(t)s SET v = 6 WHERE k = 1 AND c = 2 IF v = 4;
             INSERT INTO %(t)s (k, c, v) VALUES (1, 3, 30);
           APPLY BATCH""" % {"t": t}
    )
    # Cassandra: one row per row read. ScyllaDB: one per statement, the
    # unconditional INSERT's row (not read) null. (A driver's was_applied
    # refuses several rows outside a BatchStatement, with either.)
    assert rs.column_names == ["[applied]", "k", "c", "v"]
    expected = [(False, 1, 1, 1), (False, 1, 2, 5)]
    assert [tuple(r) for r in rs] == expected + ([] if IS_CASSANDRA else [(False, None, None, None)])
    assert rows(session, t) == [(1, 1, 1), (1, 2, 5)]


def test_conditional_batch_statement_with_prepared(session, table):
    t = batch_table(table)
    insert = session.prepare("INSERT INTO %s (k, c, v) VALUES (?, ?, ?) IF NOT EXISTS" % t)
    batch = BatchStatement()
    batch.add(insert, (1, 1, 1))
    batch.add(insert, (1, 2, 2))
    assert session.execute(batch).was_applied
    batch = BatchStatement(serial_consistency_level=ConsistencyLevel.SERIAL)
    batch.add(insert, (1, 2, 2))
    batch.add(insert, (1, 1, 1))
    rs = session.execute(batch)
    assert not rs.was_applied
    assert rs.column_names == ["[applied]", "k", "c", "v"]
    # Cassandra: the rows read, in clustering order; ScyllaDB: the
    # statements' rows, in statement order.
    expected = [(False, 1, 1, 1), (False, 1, 2, 2)]
    assert [tuple(r) for r in rs] == (expected if IS_CASSANDRA else expected[::-1])


@pytest.mark.skipif(IS_CASSANDRA, reason="ScyllaDB's per-statement batch result")
def test_conditional_batch_answers_one_row_per_statement(session, table):
    t = table("(k int, c text, s int static, v text, PRIMARY KEY (k, c))")
    session.execute("INSERT INTO %s (k, c, s, v) VALUES (0, 'a', 2, 'x')" % t)
    session.execute("INSERT INTO %s (k, c, v) VALUES (0, 'b', 'y')" % t)

    def batch(*statements):
        rs = session.execute("BEGIN BATCH %s APPLY BATCH" % "; ".join(s % t for s in statements))
        return rs.column_names, [tuple(r) for r in rs]

    # Unconditional statements answer too: the row they name when it was
    # read (a condition on the static row reads the partition's first row),
    # else the static row (key and static columns).
    assert batch("UPDATE %s SET v = 'p' WHERE k = 0 AND c = 'a'",
                 "UPDATE %s SET v = 'q' WHERE k = 0 AND c = 'b'",
                 "UPDATE %s SET s = 3 WHERE k = 0 IF s = 1") == (
        ["[applied]", "k", "c", "s"], [(False, 0, "a", 2), (False, 0, None, 2), (False, 0, None, 2)])
    # Conditions on rows and on the static row, each statement its own row.
    assert batch("UPDATE %s SET s = 3 WHERE k = 0 IF s = 2",
                 "UPDATE %s SET v = 'p' WHERE k = 0 AND c = 'a' IF v = 'x'",
                 "UPDATE %s SET v = 'q' WHERE k = 0 AND c = 'b' IF v = 'z'") == (
        ["[applied]", "k", "c", "s", "v"],
        [(False, 0, None, 2, None), (False, 0, "a", 2, "x"), (False, 0, "b", 2, "y")])
    # IF NOT EXISTS of a row not there: nulls, not the static row.
    assert batch("INSERT INTO %s (k, c, v) VALUES (0, 'b', 'n') IF NOT EXISTS",
                 "INSERT INTO %s (k, c, v) VALUES (0, 'c', 'n') IF NOT EXISTS") == (
        ["[applied]", "k", "c", "s", "v"], [(False, 0, "b", 2, "y"), (False, None, None, None, None)])
    # Two statements on one row: the row twice.
    assert batch("UPDATE %s SET v = 'p' WHERE k = 0 AND c = 'a' IF v = 'x'",
                 "UPDATE %s SET v = 'q' WHERE k = 0 AND c = 'a' IF v = 'x'")[1] == [
        (True, 0, "a", "x"), (True, 0, "a", "x")]
    assert [tuple(r) for r in session.execute("SELECT c, s, v FROM %s WHERE k = 0" % t)] == [
        ("a", 2, "q"), ("b", 2, "y")]


def test_conditional_batch_must_stay_on_one_partition(session, table):
    t = batch_table(table)
    other = kv(table)
    with pytest.raises(InvalidRequest, match="Batch with conditions cannot span multiple partitions"):
        session.execute(
            """BEGIN BATCH
                 INSERT INTO %(t)s (k, c, v) VALUES (1, 1, 1) IF NOT EXISTS;
                 INSERT INTO %(t)s (k, c, v) VALUES (2, 1, 1);
               APPLY BATCH""" % {"t": t}
        )
    with pytest.raises(InvalidRequest, match="Batch with conditions cannot span multiple tables"):
        session.execute(
            """BEGIN BATCH
                 INSERT INTO %s (k, c, v) VALUES (1, 1, 1) IF NOT EXISTS;
                 INSERT INTO %s (k, v) VALUES (1, 1);
               APPLY BATCH""" % (t, other)
        )
    assert rows(session, t) == []


def test_prepared_lwt(session, table):
    t = kv(table)
    insert = session.prepare("INSERT INTO %s (k, v) VALUES (?, ?) IF NOT EXISTS" % t)
    cas = session.prepare("UPDATE %s SET v = ? WHERE k = ? IF v = ?" % t)
    cas_in = session.prepare("UPDATE %s SET v = ? WHERE k = ? IF v IN ?" % t)
    assert [c.name for c in cas.column_metadata] == ["v", "k", "v"]
    assert [c.name for c in cas_in.column_metadata] == ["v", "k", "IN(v)"]
    assert session.execute(insert, (1, 0)).was_applied
    assert not session.execute(insert, (1, 5)).was_applied
    assert session.execute(cas, (1, 1, 0)).was_applied
    rs = session.execute(cas, (2, 1, 0))
    assert columns_and_row(rs) == (["[applied]", "v"], [False, 1])
    assert session.execute(cas_in, (7, 1, [3, 1])).was_applied
    # A null element of the bound list (the driver sends it empty) matches
    # no value; the others still count.
    assert not session.execute(cas_in, (9, 1, [None, 3])).was_applied
    assert session.execute(cas_in, (7, 1, [5, None, 7])).was_applied
    with pytest.raises(InvalidRequest, match="Invalid 'unset' value in condition"):
        session.execute(cas, (8, 1, UNSET_VALUE))
    assert session.execute("SELECT v FROM %s WHERE k = 1" % t).one().v == 7


def test_serial_consistency(session, table):
    t = kv(table)
    stmt = SimpleStatement(
        "INSERT INTO %s (k, v) VALUES (1, 1) IF NOT EXISTS" % t, serial_consistency_level=ConsistencyLevel.LOCAL_SERIAL
    )
    assert session.execute(stmt).was_applied
    for level in (ConsistencyLevel.SERIAL, ConsistencyLevel.LOCAL_SERIAL):
        read = SimpleStatement("SELECT v FROM %s WHERE k = 1" % t, consistency_level=level)
        assert session.execute(read).one().v == 1


def test_serial_levels_are_only_for_the_serial_phase(session, table):
    t = kv(table)
    serial_write = SimpleStatement(
        "INSERT INTO %s (k, v) VALUES (1, 1)" % t, consistency_level=ConsistencyLevel.SERIAL
    )
    with pytest.raises(InvalidRequest, match="You must use conditional updates for serializable writes"):
        session.execute(serial_write)
    serial_commit = SimpleStatement(
        "INSERT INTO %s (k, v) VALUES (1, 1) IF NOT EXISTS" % t, consistency_level=ConsistencyLevel.LOCAL_SERIAL
    )
    with pytest.raises(InvalidRequest, match="LOCAL_SERIAL is not supported as conditional update commit consistency"):
        session.execute(serial_commit)
    wrong_serial = SimpleStatement("INSERT INTO %s (k, v) VALUES (1, 1) IF NOT EXISTS" % t)
    # The driver itself refuses to set it; a raw client may still send it.
    wrong_serial._serial_consistency_level = ConsistencyLevel.QUORUM
    with pytest.raises(InvalidRequest, match="Must be one of SERIAL or LOCAL_SERIAL"):
        session.execute(wrong_serial)
    assert session.execute("SELECT * FROM %s" % t).one() is None


def test_concurrent_compare_and_set_is_atomic(session, table):
    """8 threads each run 50 read/compare-and-set loops on one counter row: the
    final value equals the number of applied updates (no lost update)."""
    t = kv(table)
    session.execute("INSERT INTO %s (k, v) VALUES (1, 0)" % t)
    # With the row in an SSTable, each conditional read awaits I/O, so
    # without the partition lock another update could slip in between.
    flush(session.keyspace, t)
    read = session.prepare("SELECT v FROM %s WHERE k = 1" % t)
    cas = session.prepare("UPDATE %s SET v = ? WHERE k = 1 IF v = ?" % t)
    applied = [0] * 8
    errors = []

    def worker(i):
        try:
            for _ in range(50):
                current = session.execute(read).one().v
                rs = session.execute(cas, (current + 1, current))
                if rs.was_applied:
                    applied[i] += 1
                else:
                    # The failed CAS shows the value that won.
                    assert rs.one()[1] != current
        except Exception as e:  # reported below, in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert sum(applied) > 0
    assert session.execute(read).one().v == sum(applied)


def test_row_conditions_ignore_a_static_only_partition(session, table):
    t = table("(k int, c int, s int STATIC, v int, PRIMARY KEY (k, c))")
    session.execute("INSERT INTO %s (k, s) VALUES (1, 7)" % t)
    assert not session.execute("UPDATE %s SET v = 1 WHERE k = 1 AND c = 1 IF EXISTS" % t).was_applied
    assert not session.execute("DELETE FROM %s WHERE k = 1 AND c = 1 IF EXISTS" % t).was_applied
    assert session.execute("INSERT INTO %s (k, c, v) VALUES (1, 1, 1) IF NOT EXISTS" % t).was_applied
    assert tuple(session.execute("SELECT c, s, v FROM %s WHERE k = 1" % t).one()) == (1, 7, 1)
    # With a row present, a condition on a static column and one on the row.
    rs = session.execute("UPDATE %s SET v = 2 WHERE k = 1 AND c = 1 IF s = 7 AND v = 5" % t)
    assert columns_and_row(rs) == (["[applied]", "s", "v"], [False, 7, 1])
    assert session.execute("UPDATE %s SET v = 2 WHERE k = 1 AND c = 1 IF s = 7 AND v = 1" % t).was_applied


def test_static_only_insert_if_not_exists_tests_the_static_row(session, table):
    t = table("(k int, c int, s int STATIC, v int, PRIMARY KEY (k, c))")
    assert session.execute("INSERT INTO %s (k, s) VALUES (1, 7) IF NOT EXISTS" % t).was_applied
    rs = session.execute("INSERT INTO %s (k, s) VALUES (1, 8) IF NOT EXISTS" % t)
    assert not rs.was_applied
    assert session.execute("SELECT s FROM %s WHERE k = 1" % t).one().s == 7


def test_static_insert_if_not_exists_ignores_clustering_rows(session, table):
    # cqlpy's testStaticColumnsCas: the static row does not exist until a
    # static cell is written, whatever rows the partition holds; ScyllaDB
    # shows the partition key of the row it read.
    t = table("(id int, k text, version int STATIC, v text, PRIMARY KEY (id, k))")
    session.execute("INSERT INTO %s (id, k, v) VALUES (1, 'foo', 'foo')" % t)
    rs = session.execute("INSERT INTO %s (id, version) VALUES (1, 1) IF NOT EXISTS" % t)
    assert columns_and_row(rs) == (["[applied]", "id", "k", "version", "v"], [True, 1, None, None, None])
    rs = session.execute("INSERT INTO %s (id, version) VALUES (1, 2) IF NOT EXISTS" % t)
    assert columns_and_row(rs) == (["[applied]", "id", "k", "version", "v"], [False, 1, None, 1, None])
    assert [tuple(r) for r in session.execute("SELECT * FROM %s" % t)] == [(1, "foo", 1, "foo")]


def test_static_update_and_delete_if_exists_test_the_static_row(session, table):
    # cqlpy's testStaticColumnsCas{Update,Delete}WithNullStaticColumn: a
    # statement writing static columns alone needs no clustering key, and
    # its IF EXISTS tests the static row.
    t = table("(pk int, ck int, s1 int STATIC, s2 int STATIC, v int, PRIMARY KEY (pk, ck))")
    session.execute("INSERT INTO %s (pk, s1, s2) VALUES (2, 1, 1)" % t)
    session.execute("DELETE s1 FROM %s WHERE pk = 2" % t)
    rs = session.execute("UPDATE %s SET s1 = 2 WHERE pk = 2 IF EXISTS" % t)
    assert columns_and_row(rs) == (["[applied]", "pk", "ck", "s1", "s2", "v"], [True, 2, None, None, 1, None])
    assert tuple(session.execute("SELECT * FROM %s WHERE pk = 2" % t).one()) == (2, None, 2, 1, None)
    assert session.execute("DELETE s1, s2 FROM %s WHERE pk = 2 IF EXISTS" % t).was_applied
    assert session.execute("SELECT * FROM %s WHERE pk = 2" % t).one() is None
    assert not session.execute("DELETE s2 FROM %s WHERE pk = 2 IF EXISTS" % t).was_applied
    assert not session.execute("UPDATE %s SET s1 = 3 WHERE pk = 2 IF EXISTS" % t).was_applied
    # A row's columns still need the clustering key.
    with pytest.raises(InvalidRequest, match="ck"):
        session.execute("UPDATE %s SET s1 = 3, v = 1 WHERE pk = 2 IF EXISTS" % t)
    with pytest.raises(InvalidRequest, match="in order to delete non static columns"):
        session.execute("DELETE s1, v FROM %s WHERE pk = 2 IF EXISTS" % t)


def test_static_only_statement_refuses_a_clustering_key(session, table):
    # cqlpy's testStaticColumnsCas{Update,Delete}: ScyllaDB and Cassandra
    # take a clustering key on a statement that writes and tests static
    # columns alone as a mistake; a condition on the row makes it needed.
    t = table("(pk int, ck int, s int STATIC, v int, PRIMARY KEY (pk, ck))")
    session.execute("INSERT INTO %s (pk, ck, s, v) VALUES (1, 1, 1, 1)" % t)
    for statement, kind in [
        ("UPDATE %s SET s = 2 WHERE pk = 1 AND ck = 1", "UPDATE"),
        ("UPDATE %s SET s = 2 WHERE pk = 1 AND ck = 1 IF s = 1", "UPDATE"),
        ("DELETE s FROM %s WHERE pk = 1 AND ck = 1", "DELETE"),
        ("DELETE s FROM %s WHERE pk = 1 AND ck = 1 IF s = 1", "DELETE"),
    ]:
        message = "Invalid restrictions on clustering columns since the %s statement modifies only static columns"
        with pytest.raises(InvalidRequest, match=message % kind):
            session.execute(statement % t)
    assert session.execute("UPDATE %s SET s = 2 WHERE pk = 1 AND ck = 1 IF v = 1" % t).was_applied
    assert session.execute("DELETE s FROM %s WHERE pk = 1 AND ck = 1 IF v = 1" % t).was_applied
    assert tuple(session.execute("SELECT pk, ck, s, v FROM %s" % t).one()) == (1, 1, None, 1)


def test_static_write_with_a_row_condition_reads_the_row(session, table):
    # cqlpy's testStaticColumnsCas{Update,Delete}: a condition on the row's
    # columns makes a static-only write name its row.
    t = table("(pk int, ck int, s int STATIC, v int, PRIMARY KEY (pk, ck))")
    session.execute("INSERT INTO %s (pk, ck, s, v) VALUES (1, 5, 1, 6)" % t)
    rs = session.execute("UPDATE %s SET s = 2 WHERE pk = 1 AND ck = 5 IF v = 10" % t)
    assert columns_and_row(rs) == (["[applied]", "v"], [False, 6])
    assert session.execute("UPDATE %s SET s = 2 WHERE pk = 1 AND ck = 5 IF v = 6" % t).was_applied
    assert session.execute("DELETE s FROM %s WHERE pk = 1 AND ck = 5 IF v = 6" % t).was_applied
    assert tuple(session.execute("SELECT pk, ck, s, v FROM %s" % t).one()) == (1, 5, None, 6)
    with pytest.raises(InvalidRequest, match="ck"):
        session.execute("UPDATE %s SET s = 3 WHERE pk = 1 IF v = 6 AND s = 2" % t)
    message = "DELETE statements must restrict all PRIMARY KEY columns with equality relations in order to use IF"
    with pytest.raises(InvalidRequest, match=message):
        session.execute("DELETE s FROM %s WHERE pk = 1 IF v = 6 AND s = 2" % t)
    with pytest.raises(InvalidRequest, match="in order to delete non static columns"):
        session.execute("DELETE s, v FROM %s WHERE pk = 1 IF s = 2" % t)


def test_prepared_element_conditions_on_frozen_collections(session, table):
    # cqlpy's testListItem / testMapItem: the markers of `l[?] = ?` and
    # `m[?] = ?` take the element's types, frozen collection or not.
    t = table("(k int PRIMARY KEY, l frozen<list<text>>, m frozen<map<text, text>>)")
    session.execute("INSERT INTO %s (k, l, m) VALUES (0, ['foo', 'bar'], {'a': 'b'})" % t)
    on_list = session.prepare("UPDATE %s SET l = ['x'] WHERE k = 0 IF l[?] = ?" % t)
    on_map = session.prepare("UPDATE %s SET m = {'x': 'y'} WHERE k = 0 IF m[?] = ?" % t)
    assert not session.execute(on_list, [1, None]).was_applied
    assert not session.execute(on_map, ["a", None]).was_applied
    assert session.execute(on_list, [1, "bar"]).was_applied
    assert session.execute(on_map, ["a", "b"]).was_applied
    assert tuple(session.execute("SELECT l, m FROM %s WHERE k = 0" % t).one()) == (["x"], {"x": "y"})


def test_contains_on_an_element_does_not_parse(session, table):
    # cqlpy's testListItem / testMapItem: CONTAINS tests a whole column.
    t = table("(k int PRIMARY KEY, l list<text>, m map<text, text>)")
    for condition in ["l[0] CONTAINS 'a'", "l[0] CONTAINS KEY 'a'", "m['a'] CONTAINS 'b'"]:
        with pytest.raises(SyntaxException):
            session.execute("DELETE FROM %s WHERE k = 0 IF %s" % (t, condition))


def test_conditions_on_list_elements(session, table):
    t = table("(p int PRIMARY KEY, l list<int>, v int)")
    session.execute("INSERT INTO %s (p, l, v) VALUES (1, [10, 20, 30], 0)" % t)
    assert session.execute("UPDATE %s SET v = 1 WHERE p = 1 IF l[1] = 20" % t).one()[0] is True
    assert session.execute("UPDATE %s SET v = 2 WHERE p = 1 IF l[1] > 25" % t).one()[0] is False
    # Past the end the element is null.
    assert session.execute("UPDATE %s SET v = 3 WHERE p = 1 IF l[7] = null" % t).one()[0] is True
    prepared = session.prepare("UPDATE %s SET v = ? WHERE p = ? IF l[?] IN ?" % t)
    assert session.execute(prepared, [4, 1, 0, [5, 10]]).one()[0] is True
    assert session.execute("SELECT v FROM %s WHERE p = 1" % t).one().v == 4
    with pytest.raises(InvalidRequest, match="Invalid negative list index -1"):
        session.execute("UPDATE %s SET v = 5 WHERE p = 1 IF l[-1] = 10" % t)


def test_slice_condition_on_a_duration_is_refused(session, table):
    # cqlpy's testConditionalOnDurationColumns: durations have no order
    # (ScyllaDB's text); equality and IN still compare them.
    t = table("(k int PRIMARY KEY, v int, d duration, l frozen<list<duration>>)")
    for op in [">", ">=", "<", "<="]:
        with pytest.raises(InvalidRequest, match="Duration type is unordered for d"):
            session.execute(f"UPDATE {t} SET v = 3 WHERE k = 0 IF d {op} 1s")
    with pytest.raises(InvalidRequest, match="Duration type is unordered for l"):
        session.execute(f"UPDATE {t} SET v = 3 WHERE k = 0 IF l > [1s]")
    session.execute(f"INSERT INTO {t} (k, v, d) VALUES (1, 1, 2s)")
    assert list(session.execute(f"UPDATE {t} SET v = 3 WHERE k = 1 IF d = 2s"))[0][0] is True
    assert list(session.execute(f"UPDATE {t} SET v = 4 WHERE k = 1 IF d IN (1s, 5s)"))[0][0] is False
