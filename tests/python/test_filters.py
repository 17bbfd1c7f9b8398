"""ALLOW FILTERING's relations beyond comparisons: LIKE, NOT IN, list and map
subscripts, and several restrictions on one column, as ScyllaDB has them
(Cassandra refuses most of these, so the whole module is ScyllaDB's).

The last test checks LIKE and NOT IN filters on a few hundred random rows
against a Python model of the table, in memtables and again after a flush.
"""

import random
import re

import pytest

from cassandra.protocol import InvalidRequest
from cassandra.query import UNSET_VALUE

from conftest import IS_CASSANDRA
from test_lwt import flush

pytestmark = pytest.mark.skipif(IS_CASSANDRA, reason="LIKE, NOT IN and list subscripts in filters are ScyllaDB's")

NEEDS_FILTERING = "Cannot execute this query as it might involve data filtering"


def rows(session, query, *args):
    return sorted(tuple(r) for r in session.execute(query, *args))


@pytest.fixture
def words(session, table):
    """p: partition, c: clustering (text, descending), s: static, v: regular, a: ascii, n: int."""
    t = table("(p text, c text, s text static, v text, a ascii, n int, PRIMARY KEY (p, c))",
              options="CLUSTERING ORDER BY (c DESC)")
    data = [
        ("p1", "apple", "red", "banana split", "x_y", 1),
        ("p1", "apricot", "red", "cherry", "x%y", 2),
        ("p2", "avocado", "green", "abc", "xyz", 3),
        ("p2", "b_c", "green", "a.c", "xy", 4),
        ("p3", "100%", "blue", "ABC", "x\\y", 5),
        ("p3", "ünïcode", "blue", "", None, None),
    ]
    for row in data:
        session.execute("INSERT INTO " + t + " (p, c, s, v, a, n) VALUES (%s, %s, %s, %s, %s, %s)", row)
    return t


@pytest.mark.parametrize("column,pattern,expected", [
    # Regular column: prefix, suffix, infix, exact, empty.
    ("v", "ban%", ["apple"]),
    ("v", "%rry", ["apricot"]),
    ("v", "%an%", ["apple"]),
    ("v", "abc", ["avocado"]),
    ("v", "", ["ünïcode"]),
    ("v", "%", ["100%", "apple", "apricot", "avocado", "b_c", "ünïcode"]),
    # `_` is one character; `.` is literal.
    ("v", "a_c", ["avocado", "b_c"]),
    ("v", "a.c", ["b_c"]),
    ("v", "___", ["100%", "avocado", "b_c"]),
    # Clustering column (descending), partition key, static column.
    ("c", "ap%", ["apple", "apricot"]),
    ("c", "%o", ["avocado"]),
    ("c", "_n_code", ["ünïcode"]),
    ("c", "b\\_c", ["b_c"]),
    ("c", "100\\%", ["100%"]),
    ("p", "%2", ["avocado", "b_c"]),
    ("s", "gr%", ["avocado", "b_c"]),
    # Ascii column; escapes; a trailing backslash matches itself.
    ("a", "x\\%y", ["apricot"]),
    ("a", "x\\_y", ["apple"]),
    ("a", "x_y", ["apple", "apricot", "100%"]),
    ("a", "x\\\\y", ["100%"]),
    ("a", "x\\", []),
])
def test_like(session, words, column, pattern, expected):
    got = [r.c for r in session.execute(
        "SELECT c FROM " + words + " WHERE " + column + " LIKE %s ALLOW FILTERING", [pattern])]
    assert sorted(got) == sorted(expected)


def test_like_prepared_and_null(session, words):
    stmt = session.prepare("SELECT c FROM " + words + " WHERE v LIKE ? ALLOW FILTERING")
    assert [r.c for r in session.execute(stmt, ["che%"])] == ["apricot"]
    # LIKE null is null: no row.
    assert list(session.execute(stmt, [None])) == []
    with pytest.raises(InvalidRequest, match="unset"):
        session.execute(stmt, [UNSET_VALUE])


def test_like_refusals(session, words):
    with pytest.raises(InvalidRequest, match=NEEDS_FILTERING):
        session.execute("SELECT * FROM " + words + " WHERE v LIKE 'a%'")
    with pytest.raises(InvalidRequest, match=NEEDS_FILTERING):
        session.execute("SELECT * FROM " + words + " WHERE p = 'p1' AND c LIKE 'a%'")
    with pytest.raises(InvalidRequest, match="LIKE is allowed only on string types, which n is not"):
        session.execute("SELECT * FROM " + words + " WHERE n LIKE '1%' ALLOW FILTERING")


def test_like_on_collections_is_refused(session, table):
    t = table("(p int PRIMARY KEY, l list<text>)")
    with pytest.raises(InvalidRequest, match="LIKE is allowed only on string types, which l is not"):
        session.execute("SELECT * FROM " + t + " WHERE l LIKE 'a%' ALLOW FILTERING")


@pytest.fixture
def grid(session, table):
    t = table("(p1 int, p2 int, c int, v int, PRIMARY KEY ((p1, p2), c))")
    for p1, p2, c, v in [(1, 2, 3, 4), (2, 3, 4, 5), (3, 4, 5, 6), (4, 5, 6, 7)]:
        session.execute("INSERT INTO " + t + " (p1, p2, c, v) VALUES (%s, %s, %s, %s)", (p1, p2, c, v))
    session.execute("INSERT INTO " + t + " (p1, p2, c) VALUES (5, 6, 7)")  # v is null
    return t


def test_not_in(session, grid):
    everything = [(1, 2, 3, 4), (2, 3, 4, 5), (3, 4, 5, 6), (4, 5, 6, 7), (5, 6, 7, None)]
    q = "SELECT * FROM " + grid + " WHERE %s ALLOW FILTERING"
    assert rows(session, q % "p1 NOT IN (2, 4)") == [everything[0], everything[2], everything[4]]
    assert rows(session, q % "p2 NOT IN (2, 4)") == [everything[1], everything[3], everything[4]]
    assert rows(session, q % "c NOT IN (3, 5)") == [everything[1], everything[3], everything[4]]
    # A null v is not NOT IN anything: that is unknown, as in SQL.
    assert rows(session, q % "v NOT IN (5, 7)") == [everything[0], everything[2]]
    assert rows(session, q % "v NOT IN ()") == everything[:4]
    # A null in the list makes every row's answer unknown.
    assert rows(session, q % "v NOT IN (5, null)") == []
    assert rows(session, q % "v NOT IN (5, 7) AND c NOT IN (3)") == [everything[2]]
    assert rows(session, q % "p1 = 1 AND p2 = 2 AND c NOT IN (3)") == []


def test_not_in_bound(session, grid):
    stmt = session.prepare("SELECT c FROM " + grid + " WHERE v NOT IN ? ALLOW FILTERING")
    assert rows(session, stmt, [[4, 5, 6]]) == [(6,)]
    assert rows(session, stmt, [[]]) == [(3,), (4,), (5,), (6,)]
    assert rows(session, stmt, [None]) == []
    with pytest.raises(InvalidRequest, match="unset"):
        session.execute(stmt, [UNSET_VALUE])
    stmt = session.prepare("SELECT c FROM " + grid + " WHERE v NOT IN (?, 7) ALLOW FILTERING")
    assert rows(session, stmt, [4]) == [(4,), (5,)]


def test_not_in_refusals(session, grid, table):
    with pytest.raises(InvalidRequest, match=NEEDS_FILTERING):
        session.execute("SELECT * FROM " + grid + " WHERE v NOT IN (1, 2)")
    # Within one partition a clustering NOT IN needs none (ScyllaDB's
    # test_prepare.py runs `p = ? AND c NOT IN ?` so).
    assert rows(session, "SELECT c FROM " + grid + " WHERE p1 = 1 AND p2 = 2 AND c NOT IN (1, 2)") == [(3,)]
    t = table("(p int PRIMARY KEY, s set<int>)")
    with pytest.raises(InvalidRequest, match="cannot be restricted by a 'NOT IN' relation"):
        session.execute("SELECT * FROM " + t + " WHERE s NOT IN ({1}) ALLOW FILTERING")


def test_list_subscript(session, table):
    t = table("(p int PRIMARY KEY, l list<text>, fl frozen<list<text>>, m map<int, int>, s set<int>)")
    session.execute("INSERT INTO " + t + " (p, l, m) VALUES (1, ['zero', 'one', 'two'], {1: 2})")
    session.execute("INSERT INTO " + t + " (p, l, m) VALUES (2, ['one', 'zero'], {1: 3})")
    session.execute("INSERT INTO " + t + " (p) VALUES (3)")
    q = "SELECT p FROM " + t + " WHERE %s ALLOW FILTERING"
    assert rows(session, q % "l[1] = 'one'") == [(1,)]
    assert rows(session, q % "l[0] = 'one'") == [(2,)]
    assert rows(session, q % "l[2] = 'two' AND m[1] = 2") == [(1,)]
    assert rows(session, q % "l[3] = 'three'") == []
    assert rows(session, q % "l[-1] = 'two'") == []
    assert rows(session, q % "l[null] = 'one'") == []
    assert rows(session, q % "l[0] = null") == []
    stmt = session.prepare("SELECT p FROM " + t + " WHERE l[?] = ? ALLOW FILTERING")
    assert rows(session, stmt, [1, "zero"]) == [(2,)]
    assert rows(session, stmt, [None, "zero"]) == []
    with pytest.raises(InvalidRequest, match="unset"):
        session.execute(stmt, [UNSET_VALUE, "zero"])
    with pytest.raises(InvalidRequest, match="Invalid STRING constant"):
        session.execute(q % "l['hi'] = 'hi'")
    with pytest.raises(InvalidRequest, match="Invalid INTEGER constant"):
        session.execute(q % "l[1] = 3")
    with pytest.raises(InvalidRequest, match="Only EQ relations are supported on map/list entries"):
        session.execute(q % "l[1] > 'a'")
    with pytest.raises(InvalidRequest, match="List element equality predicates on frozen list column fl"):
        session.execute(q % "fl[1] = 'a'")
    with pytest.raises(InvalidRequest, match="cannot be subscripted"):
        session.execute(q % "s[1] = 1")
    with pytest.raises(InvalidRequest, match=NEEDS_FILTERING):
        session.execute("SELECT p FROM " + t + " WHERE l[1] = 'one'")


def test_several_restrictions_on_a_clustering_column(session, table):
    t = table("(p int, c int, v int, PRIMARY KEY (p, c))")
    for c in range(3):
        session.execute("INSERT INTO " + t + " (p, c, v) VALUES (1, %s, %s)", (c, c))
    q = "SELECT c FROM " + t + " WHERE p = 1 AND %s"
    for where, expected in [
        ("c = 0 AND c > 0", []),
        ("c > 0 AND c = 0", []),
        ("c = 1 AND c > 0", [1]),
        ("c > 0 AND c = 1", [1]),
        ("c = 1 AND c = 1", [1]),
        ("c = 0 AND c = 1", []),
        ("c > 0 AND c > 1", [2]),
        ("c > 1 AND c > 0", [2]),
        ("c = 1 AND c >= 1", [1]),
        ("c > 1 AND c < 1", []),
        ("c >= 1 AND c <= 2", [1, 2]),
        ("c = 1 AND c IN (2, 3)", []),
        ("c = 2 AND c IN (2, 3)", [2]),
        ("c IN (0, 1, 2) AND c IN (2, 1)", [1, 2]),
        ("c IN (0, 1, 2) AND c < 2", [0, 1]),
    ]:
        assert [r.c for r in session.execute(q % where)] == expected, where
    # Regular columns, with ALLOW FILTERING.
    q = "SELECT c FROM " + t + " WHERE v > 0 AND %s ALLOW FILTERING"
    assert [r.c for r in session.execute(q % "v = 1")] == [1]
    assert [r.c for r in session.execute(q % "v IN (0, 1, 2) AND v < 2")] == [1]


def test_several_equalities_on_the_partition_key(session, table):
    t = table("(p int PRIMARY KEY, v int)")
    session.execute("INSERT INTO " + t + " (p, v) VALUES (1, 10)")
    assert rows(session, "SELECT * FROM " + t + " WHERE p = 1 AND p = 1") == [(1, 10)]
    assert rows(session, "SELECT * FROM " + t + " WHERE p = 1 AND p = 2") == []
    assert rows(session, "SELECT * FROM " + t + " WHERE p IN (1, 2) AND p = 1") == [(1, 10)]


def test_like_and_not_in_against_a_model(session, table, keyspace):
    """Random rows, random LIKE and NOT IN filters, compared with Python's answer."""
    rng = random.Random(20261129)
    t = table("(p int, c text, v text, n int, PRIMARY KEY (p, c))")
    alphabet = "ab_%\\é"
    model = {}
    insert = session.prepare("INSERT INTO " + t + " (p, c, v, n) VALUES (?, ?, ?, ?)")
    for _ in range(300):
        p = rng.randrange(20)
        c = "".join(rng.choice(alphabet) for _ in range(rng.randrange(5)))
        v = None if rng.random() < 0.1 else "".join(rng.choice(alphabet) for _ in range(rng.randrange(6)))
        n = None if rng.random() < 0.1 else rng.randrange(10)
        session.execute(insert, (p, c, v, n))
        model[(p, c)] = (v, n)

    def like(pattern, text):
        # The model: LIKE as a regular expression.
        out, escaping = "", False
        for ch in pattern:
            if escaping:
                out += re.escape(ch)
                escaping = False
            elif ch == "\\":
                escaping = True
            elif ch == "%":
                out += ".*"
            elif ch == "_":
                out += "."
            else:
                out += re.escape(ch)
        if escaping:
            out += re.escape("\\")
        return text is not None and re.fullmatch(out, text, re.S) is not None

    def check(stage):
        like_stmt = session.prepare("SELECT p, c FROM " + t + " WHERE v LIKE ? ALLOW FILTERING")
        ck_like_stmt = session.prepare("SELECT p, c FROM " + t + " WHERE c LIKE ? ALLOW FILTERING")
        not_in_stmt = session.prepare("SELECT p, c FROM " + t + " WHERE n NOT IN ? ALLOW FILTERING")
        for _ in range(40):
            pattern = "".join(rng.choice(alphabet + "%%__") for _ in range(rng.randrange(5)))
            want = sorted(k for k, (v, _) in model.items() if like(pattern, v))
            assert rows(session, like_stmt, [pattern]) == want, (stage, pattern)
            want = sorted(k for k in model if like(pattern, k[1]))
            assert rows(session, ck_like_stmt, [pattern]) == want, (stage, "c", pattern)
            excluded = rng.sample(range(10), rng.randrange(4))
            want = sorted(k for k, (_, n) in model.items() if n is not None and n not in excluded)
            assert rows(session, not_in_stmt, [excluded]) == want, (stage, excluded)

    check("memtable")
    flush(keyspace, t)
    check("flushed")


def test_clustering_not_in_within_a_partition_needs_no_allow_filtering(session, table):
    """`c NOT IN ...` with the partition key given is checked within that
    partition, as a skipped clustering column is: no ALLOW FILTERING (as in
    ScyllaDB); across partitions it still needs it, as on a regular column."""
    t = table("(p int, c int, v int, PRIMARY KEY (p, c))")
    for c in range(4):
        session.execute(f"INSERT INTO {t} (p, c, v) VALUES (1, {c}, {c})")
    assert rows(session, f"SELECT c FROM {t} WHERE p = 1 AND c NOT IN (1, 3)") == [(0,), (2,)]
    prepared = session.prepare(f"SELECT c FROM {t} WHERE p = ? AND c NOT IN ?")
    assert [c.name for c in prepared.column_metadata] == ["p", "NOT IN(c)"]
    assert rows(session, prepared, {"p": 1, "NOT IN(c)": [0]}) == [(1,), (2,), (3,)]
    with pytest.raises(InvalidRequest, match=NEEDS_FILTERING):
        session.execute(f"SELECT c FROM {t} WHERE c NOT IN (1, 3)")
    with pytest.raises(InvalidRequest, match=NEEDS_FILTERING):
        session.execute(f"SELECT c FROM {t} WHERE p = 1 AND v NOT IN (1, 3)")
