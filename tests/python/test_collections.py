"""Collections: list/set/map (non-frozen operations), frozen, tuples, nesting."""

import pytest

from cassandra import InvalidRequest
from conftest import IS_CASSANDRA


def one(session, cql, *params):
    return session.execute(cql, params or None).one()


def test_list_operations(session, table):
    t = table("(k int PRIMARY KEY, l list<int>)")
    q = "SELECT l FROM %s WHERE k = 1" % t
    session.execute("INSERT INTO %s (k, l) VALUES (1, [1, 2, 3])" % t)
    assert one(session, q).l == [1, 2, 3]
    session.execute("UPDATE %s SET l = l + [4, 5] WHERE k = 1" % t)  # append
    assert one(session, q).l == [1, 2, 3, 4, 5]
    session.execute("UPDATE %s SET l = [-1, 0] + l WHERE k = 1" % t)  # prepend
    assert one(session, q).l == [-1, 0, 1, 2, 3, 4, 5]
    session.execute("UPDATE %s SET l = l - [0, 3] WHERE k = 1" % t)  # remove by value
    assert one(session, q).l == [-1, 1, 2, 4, 5]
    session.execute("UPDATE %s SET l[1] = 100 WHERE k = 1" % t)  # set element by index
    assert one(session, q).l == [-1, 100, 2, 4, 5]
    session.execute("DELETE l[0] FROM %s WHERE k = 1" % t)  # delete element by index
    assert one(session, q).l == [100, 2, 4, 5]
    # Duplicates are allowed in lists; removal removes every occurrence.
    session.execute("UPDATE %s SET l = l + [2, 2] WHERE k = 1" % t)
    assert one(session, q).l == [100, 2, 4, 5, 2, 2]
    session.execute("UPDATE %s SET l = l - [2] WHERE k = 1" % t)
    assert one(session, q).l == [100, 4, 5]
    # Out-of-range index is an error.
    with pytest.raises(InvalidRequest):
        session.execute("UPDATE %s SET l[10] = 1 WHERE k = 1" % t)
    # Overwrite, then empty -> null.
    session.execute("UPDATE %s SET l = [7] WHERE k = 1" % t)
    assert one(session, q).l == [7]
    session.execute("UPDATE %s SET l = l - [7] WHERE k = 1" % t)
    assert one(session, q).l is None
    session.execute("UPDATE %s SET l = [] WHERE k = 1" % t)
    assert one(session, q).l is None
    # Appending to a missing list creates it.
    session.execute("UPDATE %s SET l = l + [9] WHERE k = 2" % t)
    assert one(session, "SELECT l FROM %s WHERE k = 2" % t).l == [9]


def test_list_prepared(session, table):
    t = table("(k int PRIMARY KEY, l list<text>)")
    ins = session.prepare("INSERT INTO %s (k, l) VALUES (?, ?)" % t)
    app = session.prepare("UPDATE %s SET l = l + ? WHERE k = ?" % t)
    setidx = session.prepare("UPDATE %s SET l[?] = ? WHERE k = ?" % t)
    session.execute(ins, (1, ["a", "b"]))
    session.execute(app, (["c"], 1))
    session.execute(setidx, (0, "A", 1))
    assert one(session, "SELECT l FROM %s WHERE k = 1" % t).l == ["A", "b", "c"]


def test_set_operations(session, table):
    t = table("(k int PRIMARY KEY, s set<text>)")
    q = "SELECT s FROM %s WHERE k = 1" % t
    session.execute("INSERT INTO %s (k, s) VALUES (1, {'b', 'a', 'c'})" % t)
    assert list(one(session, q).s) == ["a", "b", "c"]
    session.execute("UPDATE %s SET s = s + {'d', 'a'} WHERE k = 1" % t)
    assert set(one(session, q).s) == {"a", "b", "c", "d"}
    session.execute("UPDATE %s SET s = s - {'a', 'zzz'} WHERE k = 1" % t)
    assert list(one(session, q).s) == ["b", "c", "d"]
    session.execute("UPDATE %s SET s = {'x'} WHERE k = 1" % t)
    assert list(one(session, q).s) == ["x"]
    session.execute("UPDATE %s SET s = s - {'x'} WHERE k = 1" % t)
    assert one(session, q).s is None
    p = session.prepare("UPDATE %s SET s = s + ? WHERE k = ?" % t)
    session.execute(p, ({"p", "q"}, 1))
    assert set(one(session, q).s) == {"p", "q"}
    session.execute("DELETE s FROM %s WHERE k = 1" % t)
    assert one(session, q).s is None


def test_set_of_ints_sorted_numerically(session, table):
    t = table("(k int PRIMARY KEY, s set<int>)")
    session.execute("INSERT INTO %s (k, s) VALUES (1, {10, -5, 3, 100})" % t)
    assert list(one(session, "SELECT s FROM %s WHERE k = 1" % t).s) == [-5, 3, 10, 100]


def test_map_operations(session, table):
    t = table("(k int PRIMARY KEY, m map<text, int>)")
    q = "SELECT m FROM %s WHERE k = 1" % t
    session.execute("INSERT INTO %s (k, m) VALUES (1, {'b': 2, 'a': 1})" % t)
    m = one(session, q).m
    assert list(m.items()) == [("a", 1), ("b", 2)]  # sorted by key
    session.execute("UPDATE %s SET m['c'] = 3 WHERE k = 1" % t)  # put
    session.execute("UPDATE %s SET m['a'] = 10 WHERE k = 1" % t)  # overwrite
    assert dict(one(session, q).m) == {"a": 10, "b": 2, "c": 3}
    session.execute("UPDATE %s SET m = m + {'d': 4, 'b': 20} WHERE k = 1" % t)
    assert dict(one(session, q).m) == {"a": 10, "b": 20, "c": 3, "d": 4}
    session.execute("UPDATE %s SET m = m - {'a', 'c'} WHERE k = 1" % t)  # remove keys
    assert dict(one(session, q).m) == {"b": 20, "d": 4}
    session.execute("DELETE m['b'] FROM %s WHERE k = 1" % t)
    assert dict(one(session, q).m) == {"d": 4}
    p = session.prepare("UPDATE %s SET m[?] = ? WHERE k = ?" % t)
    session.execute(p, ("z", 26, 1))
    assert dict(one(session, q).m) == {"d": 4, "z": 26}
    session.execute("UPDATE %s SET m = {} WHERE k = 1" % t)
    assert one(session, q).m is None


def test_collection_ttl_per_element(session, table):
    t = table("(k int PRIMARY KEY, m map<text, int>)")
    session.execute("UPDATE %s SET m['keep'] = 1 WHERE k = 1" % t)
    session.execute("UPDATE %s USING TTL 1000 SET m['ttl'] = 2 WHERE k = 1" % t)
    assert dict(one(session, "SELECT m FROM %s WHERE k = 1" % t).m) == {"keep": 1, "ttl": 2}


def test_frozen_collections_as_values(session, table):
    t = table("(k int PRIMARY KEY, fl frozen<list<int>>, fs frozen<set<text>>, fm frozen<map<int, text>>)")
    session.execute("INSERT INTO %s (k, fl, fs, fm) VALUES (1, [3, 1, 3], {'z', 'a'}, {2: 'two', 1: 'one'})" % t)
    row = one(session, "SELECT fl, fs, fm FROM %s WHERE k = 1" % t)
    assert row.fl == [3, 1, 3]
    assert list(row.fs) == ["a", "z"]
    assert list(row.fm.items()) == [(1, "one"), (2, "two")]
    # A frozen collection is replaced whole.
    session.execute("UPDATE %s SET fl = [9] WHERE k = 1" % t)
    assert one(session, "SELECT fl FROM %s WHERE k = 1" % t).fl == [9]
    # An empty frozen collection is a value, not null.
    session.execute("INSERT INTO %s (k, fl) VALUES (2, [])" % t)
    assert one(session, "SELECT fl FROM %s WHERE k = 2" % t).fl == []
    # Element operations are rejected on frozen collections.
    with pytest.raises(InvalidRequest):
        session.execute("UPDATE %s SET fl = fl + [1] WHERE k = 1" % t)
    # Prepared.
    p = session.prepare("INSERT INTO %s (k, fl, fs, fm) VALUES (?, ?, ?, ?)" % t)
    session.execute(p, (3, [5, 4], {"q"}, {7: "seven"}))
    row = one(session, "SELECT fl, fs, fm FROM %s WHERE k = 3" % t)
    assert (row.fl, set(row.fs), dict(row.fm)) == ([5, 4], {"q"}, {7: "seven"})


def test_frozen_collections_as_keys(session, table):
    t = table("(k frozen<map<text, int>>, c frozen<set<int>>, v int, PRIMARY KEY (k, c))")
    session.execute("INSERT INTO %s (k, c, v) VALUES ({'a': 1}, {3, 4}, 1)" % t)
    session.execute("INSERT INTO %s (k, c, v) VALUES ({'a': 1}, {1, 2, 3}, 2)" % t)
    session.execute("INSERT INTO %s (k, c, v) VALUES ({'a': 1}, {}, 0)" % t)
    session.execute("INSERT INTO %s (k, c, v) VALUES ({'b': 2}, {1}, 3)" % t)
    rows = list(session.execute("SELECT c, v FROM %s WHERE k = {'a': 1}" % t))
    # Clustering order of frozen sets: element-wise, shorter prefix first.
    assert [(sorted(r.c) if r.c is not None else [], r.v) for r in rows] == [([], 0), ([1, 2, 3], 2), ([3, 4], 1)]
    p = session.prepare("SELECT v FROM %s WHERE k = ? AND c = ?" % t)
    assert session.execute(p, ({"b": 2}, {1})).one().v == 3
    assert session.execute(p, ({"a": 1}, {4, 3})).one().v == 1

    t2 = table("(k frozen<list<int>>, c frozen<list<text>>, v int, PRIMARY KEY (k, c)) "
               "WITH CLUSTERING ORDER BY (c DESC)")
    for c in (["a"], ["a", "b"], ["b"], []):
        session.execute("INSERT INTO %s (k, c, v) VALUES ([1, 2], %%s, 1)" % t2, (c,))
    rows = session.execute("SELECT c FROM %s WHERE k = [1, 2]" % t2)
    assert [list(r.c) if r.c is not None else [] for r in rows] == [["b"], ["a", "b"], ["a"], []]


def test_tuples(session, table):
    t = table("(k int PRIMARY KEY, t tuple<int, text, boolean>, n tuple<int, tuple<text, double>>)")
    session.execute("INSERT INTO %s (k, t, n) VALUES (1, (1, 'one', true), (2, ('x', 1.5)))" % t)
    row = one(session, "SELECT t, n FROM %s WHERE k = 1" % t)
    assert row.t == (1, "one", True)
    assert row.n == (2, ("x", 1.5))
    p = session.prepare("INSERT INTO %s (k, t) VALUES (?, ?)" % t)
    session.execute(p, (2, (7, None, False)))
    assert one(session, "SELECT t FROM %s WHERE k = 2" % t).t == (7, None, False)
    # Tuples as clustering keys order component-wise.
    t2 = table("(k int, c tuple<int, text>, PRIMARY KEY (k, c))")
    # Literal tuples: the driver would send a Python tuple parameter as a list.
    for c in ((2, "a"), (1, "b"), (1, "a"), (-1, "z")):
        session.execute("INSERT INTO %s (k, c) VALUES (0, (%d, '%s'))" % (t2, c[0], c[1]))
    assert [r.c for r in session.execute("SELECT c FROM %s WHERE k = 0" % t2)] == [
        (-1, "z"), (1, "a"), (1, "b"), (2, "a")]


def test_nested_collections(session, table):
    t = table("(k int PRIMARY KEY, m map<text, frozen<list<int>>>, s set<frozen<map<int, int>>>, "
              "l list<frozen<set<text>>>)")
    session.execute(
        "INSERT INTO %s (k, m, s, l) VALUES (1, {'a': [1, 2], 'b': []}, {{1: 1}, {0: 5, 2: 2}}, [{'x'}, {'y', 'z'}])" % t)
    row = one(session, "SELECT m, s, l FROM %s WHERE k = 1" % t)
    assert dict(row.m) == {"a": [1, 2], "b": []}
    assert sorted(sorted(dict(x).items()) for x in row.s) == [[(0, 5), (2, 2)], [(1, 1)]]
    assert [sorted(x) for x in row.l] == [["x"], ["y", "z"]]
    session.execute("UPDATE %s SET m['c'] = [3] WHERE k = 1" % t)
    session.execute("UPDATE %s SET m = m - {'a'} WHERE k = 1" % t)
    assert dict(one(session, "SELECT m FROM %s WHERE k = 1" % t).m) == {"b": [], "c": [3]}
    p = session.prepare("UPDATE %s SET m = m + ? WHERE k = ?" % t)
    session.execute(p, ({"d": [4, 4]}, 1))
    assert dict(one(session, "SELECT m FROM %s WHERE k = 1" % t).m) == {"b": [], "c": [3], "d": [4, 4]}


def test_set_and_map_values_are_the_same_whatever_order_a_client_sends(session, table):
    # A driver sends a set's elements (a map's entries) in its own order: a
    # list bound to a set is serialized as listed. The server keeps one
    # normal form (sorted by the element type, no duplicates), so a frozen
    # set written as {1, 2, 3} is found when bound as [3, 1, 2].
    t = table("(k frozen<set<int>> PRIMARY KEY, v int)")
    insert = session.prepare("INSERT INTO %s (k, v) VALUES (?, ?)" % t)
    select = session.prepare("SELECT k, v FROM %s WHERE k = ?" % t)
    session.execute(insert, ([1, 2, 3], 7))
    for order in ([3, 1, 2], [2, 3, 1], [3, 3, 2, 1, 1]):
        row = session.execute(select, (order,)).one()
        assert row is not None and row.v == 7, order
    session.execute(insert, ([30, 10, 20, 10], 8))
    assert session.execute(select, ([10, 20, 30],)).one().v == 8
    assert sorted(r.k for r in session.execute("SELECT k FROM %s" % t)) == [sortedset_of(1, 2, 3), sortedset_of(10, 20, 30)]

    # Clustering keys, nested sets and frozen maps too.
    t2 = table("(p int, c frozen<list<frozen<set<int>>>>, m frozen<map<int, text>>, PRIMARY KEY (p, c))")
    insert2 = session.prepare("INSERT INTO %s (p, c, m) VALUES (?, ?, ?)" % t2)
    select2 = session.prepare("SELECT m FROM %s WHERE p = 1 AND c = ?" % t2)
    from collections import OrderedDict
    session.execute(insert2, (1, [[2, 1], [4, 3]], OrderedDict([(2, "b"), (1, "a")])))
    row = session.execute(select2, ([[1, 2], [3, 4]],)).one()
    assert row is not None and list(row.m.items()) == [(1, "a"), (2, "b")]
    assert session.execute("SELECT m FROM %s WHERE p = 1 AND c = [{2, 1}, {3, 4}]" % t2).one() is not None


def sortedset_of(*values):
    from cassandra.util import SortedSet
    return SortedSet(values)


def test_filtering_on_a_map_entry(session, table):
    t = table("(p int, c int, m map<text, int>, l list<int>, PRIMARY KEY (p, c))")
    session.execute("INSERT INTO %s (p, c, m) VALUES (1, 1, {'a': 1, 'b': 2})" % t)
    session.execute("INSERT INTO %s (p, c, m) VALUES (1, 2, {'a': 2})" % t)
    session.execute("INSERT INTO %s (p, c, m) VALUES (2, 1, {'b': 1})" % t)
    rows = session.execute("SELECT p, c FROM %s WHERE m['a'] = 1 ALLOW FILTERING" % t)
    assert [tuple(r) for r in rows] == [(1, 1)]
    prepared = session.prepare("SELECT p, c FROM %s WHERE p = ? AND m[?] = ? ALLOW FILTERING" % t)
    assert [tuple(r) for r in session.execute(prepared, [1, "a", 2])] == [(1, 2)]
    with pytest.raises(InvalidRequest, match="ALLOW FILTERING"):
        session.execute("SELECT p FROM %s WHERE m['a'] = 1" % t)
    # Cassandra's text, then ScyllaDB's.
    with pytest.raises(InvalidRequest, match="Only EQ relations are supported on map(/list)? entries"):
        session.execute("SELECT p FROM %s WHERE m['a'] > 1 ALLOW FILTERING" % t)
    # A list's element: ScyllaDB filters on it (test_filters.py), Cassandra refuses.
    if IS_CASSANDRA:
        with pytest.raises(InvalidRequest, match="non-map column l"):
            session.execute("SELECT p FROM %s WHERE l[0] = 1 ALLOW FILTERING" % t)
    else:
        assert list(session.execute("SELECT p FROM %s WHERE l[0] = 1 ALLOW FILTERING" % t)) == []


def test_element_assignment_on_a_frozen_collection(session, table):
    # cqlpy's testMapItem (ScyllaDB #13657): ScyllaDB's text names the operation.
    t = table("(k int PRIMARY KEY, m frozen<map<text, text>>, l frozen<list<int>>)")
    with pytest.raises(InvalidRequest, match=r"Invalid operation \(m\['foo'\] = 'bar'\) for frozen collection column m"):
        session.execute("UPDATE %s SET m['foo'] = 'bar' WHERE k = 1" % t)
    with pytest.raises(InvalidRequest, match=r"Invalid operation \(l\[0\] = 1\) for frozen collection column l"):
        session.execute("UPDATE %s SET l[0] = 1 WHERE k = 1" % t)


def test_a_set_element_weighs_what_a_text_does(session, table):
    # A set element (a map key) is stored as its sort key and its value;
    # the mutation size limit (half a 32 MiB commitlog segment) counts it
    # once, as Cassandra does, so 9 MB fits both ways.
    t = table("(k int PRIMARY KEY, s set<text>, m map<text, int>, v text)")
    big = "e" * (9 << 20)
    session.execute(session.prepare("UPDATE %s SET v = ? WHERE k = 1" % t), [big])
    session.execute(session.prepare("UPDATE %s SET s = s + ? WHERE k = 2" % t), [{big}])
    session.execute(session.prepare("UPDATE %s SET m[?] = 1 WHERE k = 3" % t), [big])
    assert session.execute("SELECT v FROM %s WHERE k = 1" % t).one().v == big
    assert set(session.execute("SELECT s FROM %s WHERE k = 2" % t).one().s) == {big}
    assert dict(session.execute("SELECT m FROM %s WHERE k = 3" % t).one().m) == {big: 1}
    # Past the limit, both are refused with the limit named.
    huge = "e" * (17 << 20)
    for cql, value in [("UPDATE %s SET v = ? WHERE k = 4", huge), ("UPDATE %s SET s = s + ? WHERE k = 4", {huge})]:
        with pytest.raises(InvalidRequest, match=r"too large for the commitlog \(at most 16777216\)"):
            session.execute(session.prepare(cql % t), [value])
