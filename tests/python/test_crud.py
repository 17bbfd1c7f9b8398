"""Insert/select/update/delete, prepared statements, TTL/timestamps, query forms."""

import struct
import time

import pytest

from cassandra.murmur3 import murmur3
from cassandra.query import SimpleStatement


def kv_table(table):
    return table("(k int PRIMARY KEY, v text, n int)")


def kcv_table(table):
    return table("(k int, c int, v int, PRIMARY KEY (k, c))")


def rows_kc(rs):
    return [(r.k, r.c) for r in rs]


# --- simple CRUD ----------------------------------------------------------------

def test_insert_select_update_delete(session, table):
    t = kv_table(table)
    session.execute("INSERT INTO %s (k, v, n) VALUES (1, 'one', 10)" % t)
    row = session.execute("SELECT k, v, n FROM %s WHERE k = 1" % t).one()
    assert (row.k, row.v, row.n) == (1, "one", 10)

    session.execute("UPDATE %s SET v = 'uno' WHERE k = 1" % t)
    row = session.execute("SELECT * FROM %s WHERE k = 1" % t).one()
    assert (row.k, row.v, row.n) == (1, "uno", 10)

    # UPDATE is an upsert.
    session.execute("UPDATE %s SET n = 20 WHERE k = 2" % t)
    row = session.execute("SELECT * FROM %s WHERE k = 2" % t).one()
    assert (row.k, row.v, row.n) == (2, None, 20)

    # INSERT overwrites only the named columns.
    session.execute("INSERT INTO %s (k, n) VALUES (1, 11)" % t)
    row = session.execute("SELECT * FROM %s WHERE k = 1" % t).one()
    assert (row.v, row.n) == ("uno", 11)

    session.execute("DELETE FROM %s WHERE k = 1" % t)
    assert session.execute("SELECT * FROM %s WHERE k = 1" % t).one() is None
    assert session.execute("SELECT * FROM %s WHERE k = 2" % t).one() is not None
    assert session.execute("SELECT * FROM %s WHERE k = 999" % t).one() is None


def test_prepared_positional_and_named(session, table):
    t = kv_table(table)
    ins = session.prepare("INSERT INTO %s (k, v, n) VALUES (?, ?, ?)" % t)
    for k in range(10):
        session.execute(ins, (k, "v%d" % k, k * k))
    sel = session.prepare("SELECT v, n FROM %s WHERE k = ?" % t)
    for k in range(10):
        row = session.execute(sel, [k]).one()
        assert (row.v, row.n) == ("v%d" % k, k * k)

    named = session.prepare("UPDATE %s SET v = :val WHERE k = :key" % t)
    session.execute(named, {"key": 3, "val": "three"})
    assert session.execute(sel, [3]).one().v == "three"
    # Named markers can also be bound positionally, in marker order.
    session.execute(named, ("drei", 3))
    assert session.execute(sel, [3]).one().v == "drei"

    # Prepared metadata describes the markers and the result columns.
    assert [c.name for c in ins.column_metadata] == ["k", "v", "n"]
    assert [c[2] for c in sel.result_metadata] == ["v", "n"]  # (keyspace, table, name, type)
    assert ins.routing_key_indexes == [0]


def test_simple_statement_with_parameters(session, table):
    t = kv_table(table)
    session.execute(SimpleStatement("INSERT INTO %s (k, v, n) VALUES (%%s, %%s, %%s)" % t), (5, "it's", 50))
    row = session.execute(SimpleStatement("SELECT v, n FROM %s WHERE k = %%s" % t), (5,)).one()
    assert (row.v, row.n) == ("it's", 50)
    session.execute("UPDATE %s SET n = %%(n)s WHERE k = %%(k)s" % t, {"k": 5, "n": 51})
    assert session.execute("SELECT n FROM %s WHERE k = 5" % t).one().n == 51


def test_null_and_unset_values(session, table):
    t = kv_table(table)
    ins = session.prepare("INSERT INTO %s (k, v, n) VALUES (?, ?, ?)" % t)
    session.execute(ins, (1, "a", 1))
    session.execute(ins, (1, None, 1))  # explicit null deletes the cell
    row = session.execute("SELECT v, n FROM %s WHERE k = 1" % t).one()
    assert (row.v, row.n) == (None, 1)
    from cassandra.query import UNSET_VALUE
    session.execute(ins, (1, "b", 1))
    session.execute(ins, (1, UNSET_VALUE, 2))  # unset leaves the cell alone
    row = session.execute("SELECT v, n FROM %s WHERE k = 1" % t).one()
    assert (row.v, row.n) == ("b", 2)


# --- TTL and timestamps ---------------------------------------------------------

def test_using_ttl_and_ttl_function(session, table):
    t = kv_table(table)
    session.execute("INSERT INTO %s (k, v, n) VALUES (1, 'a', 1) USING TTL 1000" % t)
    row = session.execute("SELECT ttl(v) AS tv, ttl(n) AS tn FROM %s WHERE k = 1" % t).one()
    assert 990 <= row.tv <= 1000
    assert 990 <= row.tn <= 1000
    session.execute("UPDATE %s USING TTL 500 SET v = 'b' WHERE k = 1" % t)
    row = session.execute("SELECT ttl(v) AS tv, ttl(n) AS tn FROM %s WHERE k = 1" % t).one()
    assert 490 <= row.tv <= 500
    assert 990 <= row.tn <= 1000
    # No TTL -> ttl() is null.
    session.execute("INSERT INTO %s (k, v) VALUES (2, 'x')" % t)
    assert session.execute("SELECT ttl(v) AS tv FROM %s WHERE k = 2" % t).one().tv is None
    # Prepared TTL marker.
    p = session.prepare("INSERT INTO %s (k, v) VALUES (?, ?) USING TTL ?" % t)
    session.execute(p, (3, "y", 200))
    assert 190 <= session.execute("SELECT ttl(v) AS tv FROM %s WHERE k = 3" % t).one().tv <= 200


def test_using_timestamp_writetime_and_last_write_wins(session, table):
    t = kv_table(table)
    session.execute("INSERT INTO %s (k, v) VALUES (1, 'new') USING TIMESTAMP 2000" % t)
    # An older write loses, whatever the arrival order.
    session.execute("INSERT INTO %s (k, v) VALUES (1, 'old') USING TIMESTAMP 1000" % t)
    row = session.execute("SELECT v, writetime(v) AS wt FROM %s WHERE k = 1" % t).one()
    assert (row.v, row.wt) == ("new", 2000)
    session.execute("UPDATE %s USING TIMESTAMP 3000 SET v = 'newer' WHERE k = 1" % t)
    row = session.execute("SELECT v, writetime(v) AS wt FROM %s WHERE k = 1" % t).one()
    assert (row.v, row.wt) == ("newer", 3000)

    # A delete with an older timestamp does not remove a newer value.
    session.execute("DELETE FROM %s USING TIMESTAMP 2500 WHERE k = 1" % t)
    assert session.execute("SELECT v FROM %s WHERE k = 1" % t).one().v == "newer"
    # On a timestamp tie, the deletion wins.
    session.execute("DELETE v FROM %s USING TIMESTAMP 3000 WHERE k = 1" % t)
    row = session.execute("SELECT v FROM %s WHERE k = 1" % t).one()
    assert row is None or row.v is None
    # A write older than the cell deletion stays invisible (its row marker is live).
    session.execute("INSERT INTO %s (k, v) VALUES (1, 'older') USING TIMESTAMP 2999" % t)
    row = session.execute("SELECT v FROM %s WHERE k = 1" % t).one()
    assert row is None or row.v is None

    # Default (driver-assigned) timestamps are microseconds since the epoch.
    session.execute("INSERT INTO %s (k, v) VALUES (2, 'now')" % t)
    wt = session.execute("SELECT writetime(v) AS wt FROM %s WHERE k = 2" % t).one().wt
    now_us = int(time.time() * 1e6)
    assert abs(now_us - wt) < 60 * 1e6


def test_client_timestamp_from_driver(session, table):
    t = kv_table(table)
    stmt = SimpleStatement("INSERT INTO %s (k, v) VALUES (1, 'x')" % t)
    session.execute(stmt)
    wt = session.execute("SELECT writetime(v) AS wt FROM %s WHERE k = 1" % t).one().wt
    assert abs(int(time.time() * 1e6) - wt) < 60 * 1e6
    p = session.prepare("INSERT INTO %s (k, v) VALUES (?, ?) USING TIMESTAMP ?" % t)
    session.execute(p, (2, "y", 123456789))
    assert session.execute("SELECT writetime(v) AS wt FROM %s WHERE k = 2" % t).one().wt == 123456789


# --- deletes ----------------------------------------------------------------------

def test_delete_cell_row_range_partition(session, table):
    t = table("(k int, c int, v int, w int, PRIMARY KEY (k, c))")
    ins = session.prepare("INSERT INTO %s (k, c, v, w) VALUES (?, ?, ?, ?)" % t)
    for k in (1, 2):
        for c in range(8):
            session.execute(ins, (k, c, c, c))

    session.execute("DELETE w FROM %s WHERE k = 1 AND c = 0" % t)  # cell
    row = session.execute("SELECT v, w FROM %s WHERE k = 1 AND c = 0" % t).one()
    assert (row.v, row.w) == (0, None)

    session.execute("DELETE FROM %s WHERE k = 1 AND c = 1" % t)  # row
    session.execute("DELETE FROM %s WHERE k = 1 AND c > 2 AND c < 5" % t)  # range
    assert [r.c for r in session.execute("SELECT c FROM %s WHERE k = 1" % t)] == [0, 2, 5, 6, 7]
    session.execute("DELETE FROM %s WHERE k = 1 AND c >= 6" % t)  # open range
    assert [r.c for r in session.execute("SELECT c FROM %s WHERE k = 1" % t)] == [0, 2, 5]

    session.execute("DELETE FROM %s WHERE k = 2" % t)  # partition
    assert list(session.execute("SELECT * FROM %s WHERE k = 2" % t)) == []
    assert [r.c for r in session.execute("SELECT c FROM %s WHERE k = 1" % t)] == [0, 2, 5]

    # Re-inserting into a deleted partition works (new timestamp).
    session.execute(ins, (2, 3, 3, 3))
    assert rows_kc(session.execute("SELECT k, c FROM %s WHERE k = 2" % t)) == [(2, 3)]


def test_row_exists_while_any_cell_or_marker_lives(session, table):
    t = kv_table(table)
    session.execute("INSERT INTO %s (k, v) VALUES (1, 'a')" % t)
    session.execute("DELETE v FROM %s WHERE k = 1" % t)
    # The INSERT wrote a row marker: the row is still there with nulls.
    row = session.execute("SELECT * FROM %s WHERE k = 1" % t).one()
    assert row is not None and (row.k, row.v, row.n) == (1, None, None)
    # An UPDATE writes no row marker: deleting its only cell removes the row.
    session.execute("UPDATE %s SET v = 'b' WHERE k = 2" % t)
    session.execute("DELETE v FROM %s WHERE k = 2" % t)
    assert session.execute("SELECT * FROM %s WHERE k = 2" % t).one() is None


# --- query forms ---------------------------------------------------------------------

def test_in_on_partition_key(session, table):
    t = kv_table(table)
    for k in range(10):
        session.execute("INSERT INTO %s (k, n) VALUES (%d, %d)" % (t, k, k))
    rows = session.execute("SELECT k, n FROM %s WHERE k IN (1, 3, 5, 42)" % t)
    assert sorted((r.k, r.n) for r in rows) == [(1, 1), (3, 3), (5, 5)]
    p = session.prepare("SELECT k FROM %s WHERE k IN ?" % t)
    assert sorted(r.k for r in session.execute(p, [[2, 4, 6]])) == [2, 4, 6]
    p = session.prepare("SELECT k FROM %s WHERE k IN (?, ?)" % t)
    assert sorted(r.k for r in session.execute(p, [7, 8])) == [7, 8]


def test_clustering_slices_order_limit(session, table):
    t = kcv_table(table)
    ins = session.prepare("INSERT INTO %s (k, c, v) VALUES (?, ?, ?)" % t)
    for c in range(10):
        session.execute(ins, (1, c, c * 100))
    q = "SELECT c FROM %s WHERE k = 1" % t

    def cs(where=""):
        return [r.c for r in session.execute(q + where)]

    assert cs() == list(range(10))
    assert cs(" AND c > 2 AND c <= 6") == [3, 4, 5, 6]
    assert cs(" AND c >= 8") == [8, 9]
    assert cs(" AND c < 2") == [0, 1]
    assert cs(" AND c = 4") == [4]
    assert cs(" AND c IN (1, 5, 9)") == [1, 5, 9]
    assert cs(" AND c > 5 AND c < 5") == []
    assert cs(" ORDER BY c DESC") == list(range(9, -1, -1))
    assert cs(" AND c > 2 AND c <= 6 ORDER BY c DESC") == [6, 5, 4, 3]
    assert cs(" LIMIT 3") == [0, 1, 2]
    assert cs(" ORDER BY c DESC LIMIT 2") == [9, 8]
    assert cs(" AND c >= 3 LIMIT 2") == [3, 4]


def test_multi_column_clustering_restrictions(session, table):
    t = table("(k int, a int, b int, v int, PRIMARY KEY (k, a, b))")
    for a in range(3):
        for b in range(3):
            session.execute("INSERT INTO %s (k, a, b, v) VALUES (0, %d, %d, 0)" % (t, a, b))
    rows = session.execute("SELECT a, b FROM %s WHERE k = 0 AND a = 1" % t)
    assert [(r.a, r.b) for r in rows] == [(1, 0), (1, 1), (1, 2)]
    rows = session.execute("SELECT a, b FROM %s WHERE k = 0 AND a = 1 AND b > 0" % t)
    assert [(r.a, r.b) for r in rows] == [(1, 1), (1, 2)]
    rows = session.execute("SELECT a, b FROM %s WHERE k = 0 AND (a, b) > (1, 1)" % t)
    assert [(r.a, r.b) for r in rows] == [(1, 2), (2, 0), (2, 1), (2, 2)]
    rows = session.execute("SELECT a, b FROM %s WHERE k = 0 AND (a, b) >= (0, 2) AND (a, b) < (1, 1)" % t)
    assert [(r.a, r.b) for r in rows] == [(0, 2), (1, 0)]


def test_per_partition_limit_and_distinct(session, table):
    t = table("(k int, c int, v int, s int static, PRIMARY KEY (k, c))")
    for k in range(4):
        for c in range(5):
            session.execute("INSERT INTO %s (k, c, v, s) VALUES (%d, %d, %d, %d)" % (t, k, c, c, k))
    rows = list(session.execute("SELECT k, c FROM %s PER PARTITION LIMIT 2" % t))
    assert len(rows) == 8
    by_k = {}
    for r in rows:
        by_k.setdefault(r.k, []).append(r.c)
    assert by_k == {k: [0, 1] for k in range(4)}
    rows = list(session.execute("SELECT k, c FROM %s PER PARTITION LIMIT 2 LIMIT 3" % t))
    assert len(rows) == 3

    distinct = session.execute("SELECT DISTINCT k FROM %s" % t)
    assert sorted(r.k for r in distinct) == [0, 1, 2, 3]
    distinct = session.execute("SELECT DISTINCT k, s FROM %s" % t)
    assert sorted((r.k, r.s) for r in distinct) == [(k, k) for k in range(4)]
    assert [r.k for r in session.execute("SELECT DISTINCT k FROM %s WHERE k = 2" % t)] == [2]


def test_allow_filtering_on_regular_column(session, table):
    t = kcv_table(table)
    for k in range(5):
        for c in range(4):
            session.execute("INSERT INTO %s (k, c, v) VALUES (%d, %d, %d)" % (t, k, c, (k + c) % 3))
    rows = session.execute("SELECT k, c FROM %s WHERE v = 0 ALLOW FILTERING" % t)
    expected = sorted((k, c) for k in range(5) for c in range(4) if (k + c) % 3 == 0)
    assert sorted(rows_kc(rows)) == expected
    rows = session.execute("SELECT k, c FROM %s WHERE k = 1 AND v > 0 ALLOW FILTERING" % t)
    assert rows_kc(rows) == [(1, c) for c in range(4) if (1 + c) % 3 > 0]
    rows = session.execute("SELECT k, c FROM %s WHERE c = 2 ALLOW FILTERING" % t)
    assert sorted(rows_kc(rows)) == [(k, 2) for k in range(5)]


def test_count_and_aggregates(session, table):
    t = table("(k int, c int, i int, b bigint, d double, PRIMARY KEY (k, c))")
    vals = [1, 2, 4, 10]
    for c, x in enumerate(vals):
        session.execute("INSERT INTO %s (k, c, i, b, d) VALUES (1, %d, %d, %d, %f)" % (t, c, x, x * 10, x / 2))
    session.execute("INSERT INTO %s (k, c) VALUES (1, 99)" % t)  # nulls are skipped by aggregates
    session.execute("INSERT INTO %s (k, c, i) VALUES (2, 0, 1000)" % t)

    row = session.execute("SELECT count(*) FROM %s" % t).one()
    assert row[0] == 6
    assert row._fields == ("count",)
    assert session.execute("SELECT COUNT(1) FROM %s WHERE k = 1" % t).one()[0] == 5
    assert session.execute("SELECT count(i) FROM %s WHERE k = 1" % t).one()[0] == 4

    row = session.execute(
        "SELECT min(i) AS mn, max(i) AS mx, sum(i) AS s, avg(i) AS a, sum(b) AS sb, avg(d) AS ad "
        "FROM %s WHERE k = 1" % t).one()
    assert (row.mn, row.mx, row.s, row.sb) == (1, 10, 17, 170)
    assert row.a == 17 // 4  # avg of int is an int
    assert row.ad == pytest.approx(17 / 2 / 4)
    # Aggregates over no rows.
    row = session.execute("SELECT count(*) AS n, max(i) AS mx, sum(i) AS s FROM %s WHERE k = 77" % t).one()
    assert (row.n, row.mx, row.s) == (0, None, 0)


def _token(k):
    return murmur3(struct.pack(">i", k))


def test_token_function_and_token_ranges(session, table):
    t = kv_table(table)
    keys = list(range(-50, 50))
    ins = session.prepare("INSERT INTO %s (k, n) VALUES (?, ?)" % t)
    for k in keys:
        session.execute(ins, (k, k))

    # token(k) is Murmur3 of the serialized key, as the driver computes it.
    row = session.execute("SELECT k, token(k) AS tk FROM %s WHERE k = 7" % t).one()
    assert row.tk == _token(7)

    rows = list(session.execute("SELECT k, token(k) AS tk FROM %s" % t))
    assert sorted(r.k for r in rows) == keys
    tokens = [r.tk for r in rows]
    assert tokens == sorted(tokens), "full scan must return partitions in token order"
    assert all(r.tk == _token(r.k) for r in rows)

    mid = sorted(tokens)[len(tokens) // 2]
    lo = session.execute("SELECT k FROM %s WHERE token(k) <= %d" % (t, mid))
    hi = session.execute("SELECT k FROM %s WHERE token(k) > %d" % (t, mid))
    lo_keys = sorted(r.k for r in lo)
    hi_keys = sorted(r.k for r in hi)
    assert lo_keys == sorted(k for k in keys if _token(k) <= mid)
    assert hi_keys == sorted(k for k in keys if _token(k) > mid)

    p = session.prepare("SELECT k FROM %s WHERE token(k) > ? AND token(k) <= ?" % t)
    a, b = sorted(tokens)[10], sorted(tokens)[20]
    got = sorted(r.k for r in session.execute(p, (a, b)))
    assert got == sorted(k for k in keys if a < _token(k) <= b)
    # Range starting at the minimum token covers everything.
    allk = session.execute("SELECT k FROM %s WHERE token(k) >= %d" % (t, -(2 ** 63)))
    assert sorted(r.k for r in allk) == keys
    assert [r.k for r in session.execute("SELECT k FROM %s WHERE token(k) = %d" % (t, _token(7)))] == [7]


def test_static_columns(session, table):
    t = table("(k int, c int, v int, s text static, PRIMARY KEY (k, c))")
    session.execute("INSERT INTO %s (k, c, v, s) VALUES (1, 1, 10, 'first')" % t)
    session.execute("INSERT INTO %s (k, c, v) VALUES (1, 2, 20)" % t)
    rows = list(session.execute("SELECT k, c, v, s FROM %s WHERE k = 1" % t))
    assert [(r.c, r.v, r.s) for r in rows] == [(1, 10, "first"), (2, 20, "first")]

    # Updating the static cell changes it for every row of the partition.
    session.execute("UPDATE %s SET s = 'second' WHERE k = 1" % t)
    assert [r.s for r in session.execute("SELECT s FROM %s WHERE k = 1" % t)] == ["second", "second"]

    # A partition with only a static value returns one row with null clustering/regular.
    session.execute("INSERT INTO %s (k, s) VALUES (2, 'lonely')" % t)
    rows = list(session.execute("SELECT k, c, v, s FROM %s WHERE k = 2" % t))
    assert [(r.k, r.c, r.v, r.s) for r in rows] == [(2, None, None, "lonely")]

    # Deleting every row keeps the static content.
    session.execute("DELETE FROM %s WHERE k = 1 AND c = 1" % t)
    session.execute("DELETE FROM %s WHERE k = 1 AND c = 2" % t)
    rows = list(session.execute("SELECT k, c, v, s FROM %s WHERE k = 1" % t))
    assert [(r.k, r.c, r.v, r.s) for r in rows] == [(1, None, None, "second")]
    # DISTINCT on a static column.
    rows = session.execute("SELECT DISTINCT k, s FROM %s" % t)
    assert sorted((r.k, r.s) for r in rows) == [(1, "second"), (2, "lonely")]
    # Deleting the static cell leaves nothing.
    session.execute("DELETE s FROM %s WHERE k = 1" % t)
    assert list(session.execute("SELECT * FROM %s WHERE k = 1" % t)) == []
