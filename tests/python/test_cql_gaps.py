"""Corners of CQL that Cassandra and ScyllaDB agree on: `c = value + c`
(list prepend, refused on counters), conditions on one field of a user type
in lightweight transactions, `WHERE pk IN (...) ORDER BY ck`, whose rows
come sorted across partitions (unpaged only), and multi-column slices over
clustering columns of mixed order (`(b, c) > (1, 1)` with `b ASC, c DESC`),
which select the rows after the tuple in CQL's order, whatever the storage
order.
"""
import uuid

import pytest

from cassandra import InvalidRequest
from cassandra.protocol import SyntaxException
from cassandra.query import SimpleStatement

from conftest import IS_CASSANDRA


def rows(session, cql, params=None, fetch_size=None):
    return [tuple(r) for r in session.execute(SimpleStatement(cql, fetch_size=fetch_size), params)]


# --- c = value + c -----------------------------------------------------------


def test_list_prepend_plain_and_prepared(session, table):
    t = table("(k int PRIMARY KEY, l list<int>, f frozen<list<int>>)")
    session.execute(f"UPDATE {t} SET l = [3] + l WHERE k = 1")  # onto no list at all
    session.execute(f"UPDATE {t} SET l = [1, 2] + l WHERE k = 1")
    prepend = session.prepare(f"UPDATE {t} SET l = ? + l WHERE k = ?")
    session.execute(prepend, ([-1, 0], 1))
    assert rows(session, f"SELECT l FROM {t} WHERE k = 1") == [([-1, 0, 1, 2, 3],)]
    with pytest.raises(InvalidRequest, match=r"Invalid operation \(f = \[1\] [+-] f\) for frozen list column f"):
        session.execute(f"UPDATE {t} SET f = [1] + f WHERE k = 1")


def test_value_plus_counter_is_refused_like_cassandra(session, table):
    # Cassandra and ScyllaDB parse `c = 5 + c` as a list prepend, which a
    # counter is not (Cassandra's message prints the `+` as `-`).
    t = table("(k int PRIMARY KEY, c counter)")
    with pytest.raises(InvalidRequest, match=r"Invalid operation \(c = 5 [+-] c\) for non list column c"):
        session.execute(f"UPDATE {t} SET c = 5 + c WHERE k = 1")
    plain = table("(k int PRIMARY KEY, v int)")
    with pytest.raises(InvalidRequest, match=r"for non list column v"):
        session.execute(f"UPDATE {plain} SET v = 5 + v WHERE k = 1")
    # Subtracting a column from a value is not CQL at all.
    with pytest.raises(SyntaxException):
        session.execute(f"UPDATE {t} SET c = 5 - c WHERE k = 1")
    # Nothing was written; the forms counters do take still work.
    assert rows(session, f"SELECT c FROM {t} WHERE k = 1") == []
    session.execute(f"UPDATE {t} SET c = c + 5 WHERE k = 1")
    session.execute(f"UPDATE {t} SET c = c - 2 WHERE k = 1")
    assert rows(session, f"SELECT c FROM {t} WHERE k = 1") == [(3,)]


# --- IF u.field op value ---------------------------------------------------------


@pytest.fixture
def point(session):
    """A fresh type `(x int, y int, tag text)` unique to the test; its name."""
    name = "pt_" + uuid.uuid4().hex[:12]
    session.execute(f"CREATE TYPE {name} (x int, y int, tag text)")
    return name


@pytest.mark.parametrize("frozen", [False, True])
@pytest.mark.parametrize(
    "condition, applied",
    [
        ("u.x = 3", True),
        ("u.x = 4", False),
        ("u.x != 4", True),
        ("u.x != 3", False),
        ("u.x < 4", True),
        ("u.x < 3", False),
        ("u.x <= 3", True),
        ("u.x > 2", True),
        ("u.x > 3", False),
        ("u.x >= 4", False),
        ("u.x IN (1, 3)", True),
        ("u.x IN (1, 2)", False),
        ("u.y = null", True),  # a field never set is null
        ("u.y != null", False),
        ("u.y IN (null, 7)", True),
        ("u.tag > 'a'", True),
        ("u.tag = 'b'", False),
        ("u.x = 3 AND u.tag = 'b'", False),
        ("u.x = 3 AND v = 1", True),
    ],
)
def test_field_condition_operators(session, table, point, frozen, condition, applied):
    ty = f"frozen<{point}>" if frozen else point
    t = table(f"(k int PRIMARY KEY, u {ty}, v int)")
    session.execute(f"INSERT INTO {t} (k, u, v) VALUES (1, {{x: 3, tag: 'abc'}}, 1)")
    rs = session.execute(f"UPDATE {t} SET v = 100 WHERE k = 1 IF {condition}")
    assert rs.was_applied is applied
    assert rows(session, f"SELECT v FROM {t} WHERE k = 1") == [(100 if applied else 1,)]


def test_field_condition_result_shows_the_whole_column(session, table, point):
    t = table(f"(k int, c int, u {point}, v int, PRIMARY KEY (k, c))")
    session.execute(f"INSERT INTO {t} (k, c, u, v) VALUES (1, 1, {{x: 3, y: 4, tag: 'a'}}, 0)")
    rs = session.execute(f"UPDATE {t} SET v = 1 WHERE k = 1 AND c = 1 IF u.x = 5")
    assert not rs.was_applied
    assert rs.column_names == ["[applied]", "u"]
    u = rs.one()[1]
    assert (u.x, u.y, u.tag) == (3, 4, "a")
    # On a row that does not exist every field is null, and the column comes
    # back null (ScyllaDB's LWT result).
    rs = session.execute(f"UPDATE {t} SET v = 1 WHERE k = 1 AND c = 2 IF u.x = 5")
    assert (rs.column_names, list(rs.one())) == (["[applied]", "u"], [False, None])
    assert session.execute(f"UPDATE {t} SET v = 1 WHERE k = 1 AND c = 2 IF u.x = null").was_applied


def test_field_condition_after_field_update_and_delete(session, table, point):
    t = table(f"(k int PRIMARY KEY, u {point}, v int)")
    session.execute(f"UPDATE {t} SET u.x = 1 WHERE k = 1")
    assert session.execute(f"UPDATE {t} SET u.y = 2 WHERE k = 1 IF u.x = 1").was_applied
    assert session.execute(f"DELETE u.x FROM {t} WHERE k = 1 IF u.y = 2").was_applied
    assert session.execute(f"UPDATE {t} SET v = 9 WHERE k = 1 IF u.x = null AND u.y = 2").was_applied
    assert rows(session, f"SELECT u.x, u.y, v FROM {t} WHERE k = 1") == [(None, 2, 9)]


def test_field_condition_prepared_and_in_a_batch(session, table, point):
    t = table(f"(k int, c int, u {point}, v int, PRIMARY KEY (k, c))")
    session.execute(f"INSERT INTO {t} (k, c, u) VALUES (1, 1, {{x: 3, tag: 't'}})")
    update = session.prepare(f"UPDATE {t} SET v = ? WHERE k = 1 AND c = 1 IF u.x = ? AND u.tag IN ?")
    # The markers are typed by the field: an int and a list of text.
    assert [c.type.typename for c in update.column_metadata] == ["int", "int", "list"]
    assert session.execute(update, (1, 3, ["s", "t"])).was_applied
    assert not session.execute(update, (2, 4, ["t"])).was_applied
    batch = (f"BEGIN BATCH UPDATE {t} SET v = 5 WHERE k = 1 AND c = 1 IF u.x > 2; "
             f"INSERT INTO {t} (k, c, v) VALUES (1, 2, 6) APPLY BATCH")
    assert session.execute(batch).one()[0] is True
    assert rows(session, f"SELECT c, v FROM {t} WHERE k = 1") == [(1, 5), (2, 6)]


def test_field_condition_errors(session, table, point):
    t = table(f"(k int PRIMARY KEY, u {point}, v int, m map<int, int>)")
    with pytest.raises(InvalidRequest, match="Unknown field nope for column u"):
        session.execute(f"UPDATE {t} SET v = 1 WHERE k = 1 IF u.nope = 1")
    with pytest.raises(InvalidRequest):
        session.execute(f"UPDATE {t} SET v = 1 WHERE k = 1 IF u.x = 'text'")
    with pytest.raises(InvalidRequest, match='Invalid comparison with null for operator "<"'):
        session.execute(f"UPDATE {t} SET v = 1 WHERE k = 1 IF u.x < null")
    if not IS_CASSANDRA:  # Cassandra fails with a server error (a cast) here
        with pytest.raises(InvalidRequest, match="column v of type int is not a user type"):
            session.execute(f"UPDATE {t} SET v = 1 WHERE k = 1 IF v.x = 1")


# --- WHERE pk IN (...) ORDER BY ck -------------------------------------------------------


@pytest.fixture
def events(table, session):
    """Three partitions of (k, t) rows, t clustering ascending."""
    t = table("(k int, t int, v text, PRIMARY KEY (k, t))")
    data = {1: [10, 40, 70], 2: [20, 50], 3: [30, 60, 80, 90]}
    insert = session.prepare(f"INSERT INTO {t} (k, t, v) VALUES (?, ?, ?)")
    for k, ts in data.items():
        for ts_ in ts:
            session.execute(insert, (k, ts_, f"{k}@{ts_}"))
    return t


def test_in_order_by_sorts_across_partitions(session, events):
    q = f"SELECT k, t FROM {events} WHERE k IN (1, 2, 3) ORDER BY t"
    everything = [(1, 10), (2, 20), (3, 30), (1, 40), (2, 50), (3, 60), (1, 70), (3, 80), (3, 90)]
    assert rows(session, q + " ASC") == everything
    assert rows(session, q + " DESC") == everything[::-1]
    # LIMIT applies to the sorted rows, not per partition.
    assert rows(session, q + " DESC LIMIT 4") == [(3, 90), (3, 80), (1, 70), (3, 60)]
    assert rows(session, q + " ASC LIMIT 2") == [(1, 10), (2, 20)]
    # With a clustering range, a bound IN list, and the ordering column not selected.
    ranged = session.prepare(f"SELECT v FROM {events} WHERE k IN ? AND t > 15 AND t < 65 ORDER BY t DESC")
    ranged.fetch_size = None
    assert [tuple(r) for r in session.execute(ranged, ([2, 1],))] == [("2@50",), ("1@40",), ("2@20",)]
    prepared = session.prepare(f"SELECT k, t FROM {events} WHERE k IN (?, ?) ORDER BY t DESC LIMIT ?")
    prepared.fetch_size = None
    assert [tuple(r) for r in session.execute(prepared, (3, 2, 3))] == [(3, 90), (3, 80), (3, 60)]


def test_in_order_by_on_a_descending_table_and_a_clustering_prefix(session, table):
    t = table("(k int, a int, b int, PRIMARY KEY (k, a, b)) WITH CLUSTERING ORDER BY (a DESC, b ASC)")
    for k, a, b in [(1, 1, 1), (1, 1, 2), (1, 3, 0), (2, 1, 0), (2, 2, 5), (2, 2, 6)]:
        session.execute(f"INSERT INTO {t} (k, a, b) VALUES ({k}, {a}, {b})")
    q = f"SELECT k, a, b FROM {t} WHERE k IN (1, 2) ORDER BY a"
    assert rows(session, q + " DESC") == [(1, 3, 0), (2, 2, 5), (2, 2, 6), (1, 1, 1), (1, 1, 2), (2, 1, 0)]
    assert rows(session, q + " ASC, b DESC") == [(1, 1, 2), (1, 1, 1), (2, 1, 0), (2, 2, 6), (2, 2, 5), (1, 3, 0)]


def test_in_order_by_cannot_be_paged(session, events):
    q = f"SELECT k, t FROM {events} WHERE k IN (1, 2) ORDER BY t DESC"
    message = "Cannot page queries with both ORDER BY and a IN restriction on the partition key"
    with pytest.raises(InvalidRequest, match=message):
        rows(session, q, fetch_size=2)
    with pytest.raises(InvalidRequest, match=message):
        rows(session, q + " LIMIT 5", fetch_size=100)
    if not IS_CASSANDRA:
        # ScyllaDB reads unpaged when at most one row can come back; Cassandra refuses it too.
        assert rows(session, q + " LIMIT 1", fetch_size=2) == [(1, 70)]
    # Without ORDER BY, IN pages as usual.
    assert sorted(rows(session, f"SELECT k, t FROM {events} WHERE k IN (1, 2)", fetch_size=2)) == [
        (1, 10), (1, 40), (1, 70), (2, 20), (2, 50)]


def test_order_by_needs_the_partition_key(session, events):
    with pytest.raises(InvalidRequest, match="ORDER BY is only supported when the partition key is restricted"):
        rows(session, f"SELECT * FROM {events} ORDER BY t DESC")


# --- multi-column slices over clustering columns of mixed order ---------------


@pytest.mark.parametrize("order", ["b ASC, c DESC", "b DESC, c ASC"])
def test_multi_column_slices_over_mixed_order_columns(session, table, order):
    t = table(f"(a int, b int, c int, v int, PRIMARY KEY (a, b, c)) WITH CLUSTERING ORDER BY ({order})")
    for b in range(3):
        for c in range(3):
            session.execute(f"INSERT INTO {t} (a, b, c, v) VALUES (0, {b}, {c}, {b * 3 + c})")

    def selected(where, params=None, fetch_size=None):
        got = rows(session, f"SELECT b, c FROM {t} WHERE a = 0 AND {where}", params, fetch_size)
        # Rows come in the table's order; compare them as CQL tuples.
        b_desc = order.startswith("b DESC")
        assert [r[0] for r in got] == sorted((r[0] for r in got), reverse=b_desc)
        return sorted(got)

    every = [(b, c) for b in range(3) for c in range(3)]
    cases = {
        "(b, c) > (1, 1)": [k for k in every if k > (1, 1)],
        "(b, c) >= (1, 1)": [k for k in every if k >= (1, 1)],
        "(b, c) < (1, 1)": [k for k in every if k < (1, 1)],
        "(b, c) <= (1, 1)": [k for k in every if k <= (1, 1)],
        "(b, c) > (0, 1) AND (b, c) <= (2, 1)": [k for k in every if (0, 1) < k <= (2, 1)],
        "(b, c) > (2, 0) AND (b, c) < (0, 0)": [],
        "(b) > (0) AND (b, c) < (2, 1)": [k for k in every if k[0] > 0 and k < (2, 1)],
    }
    for where, expected in cases.items():
        assert selected(where) == expected, where
        # Paged one row at a time, the same rows.
        assert selected(where, fetch_size=1) == expected, where
    prepared = session.prepare(f"SELECT b, c FROM {t} WHERE a = 0 AND (b, c) > (?, ?)")
    assert sorted(tuple(r) for r in session.execute(prepared, (1, 1))) == cases["(b, c) > (1, 1)"]
