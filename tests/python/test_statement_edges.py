"""Statements whose answers Shoal once got wrong: range deletes over empty
clustering ranges, and statements that write one cell twice.

Cassandra and ScyllaDB delete nothing for an empty slice (it used to delete
the whole partition, static row included), and merge a statement's writes
of one cell by the rules that merge two writes (one timestamp: a deletion
beats a value, then the greater value), whatever the order of the
assignments. The randomized model test (test_model.py) covers these through
flush, compaction and restart; these are the cases in plain sight.
"""
import pytest
from cassandra import InvalidRequest
from cassandra.query import UNSET_VALUE


@pytest.fixture
def five_rows(session, table):
    t = table("(p int, c int, s int static, v int, PRIMARY KEY (p, c))")
    for c in range(5):
        session.execute("INSERT INTO %s (p, c, s, v) VALUES (1, %d, 7, %d)" % (t, c, c))
    return t


def rows(session, t, where="p = 1"):
    return [tuple(r) for r in session.execute("SELECT c, s, v FROM %s WHERE %s" % (t, where))]


ALL_FIVE = [(c, 7, c) for c in range(5)]


@pytest.mark.parametrize("where", [
    "c > 5 AND c < 3", "c > 2 AND c < 2", "c > 1 AND c < 2", "c >= 3 AND c < 3", "c > 3 AND c <= 3",
    "c > 2147483647", "c < -2147483648", "c IN ()",
])
def test_a_delete_of_an_empty_slice_deletes_nothing(session, five_rows, where):
    session.execute("DELETE FROM %s WHERE p = 1 AND %s" % (five_rows, where))
    assert rows(session, five_rows) == ALL_FIVE


def test_an_empty_slice_on_a_descending_column_deletes_nothing(session, table):
    t = table("(p int, c int, s int static, v int, PRIMARY KEY (p, c))", options="CLUSTERING ORDER BY (c DESC)")
    for c in range(5):
        session.execute("INSERT INTO %s (p, c, s, v) VALUES (1, %d, 7, %d)" % (t, c, c))
    session.execute("DELETE FROM %s WHERE p = 1 AND c > 4 AND c < 1" % t)
    assert sorted(rows(session, t)) == ALL_FIVE


def test_a_delete_of_every_row_by_a_slice_keeps_the_static_row(session, five_rows):
    session.execute("DELETE FROM %s WHERE p = 1 AND c <= 2147483647" % five_rows)
    assert rows(session, five_rows) == [(None, 7, None)]
    # A query restricted to the slice finds no row, not the static one.
    assert rows(session, five_rows, "p = 1 AND c <= 2147483647") == []


def test_a_delete_of_a_slice_deletes_only_the_slice(session, five_rows):
    session.execute("DELETE FROM %s WHERE p = 1 AND c > 1 AND c <= 3" % five_rows)
    assert rows(session, five_rows) == [(0, 7, 0), (1, 7, 1), (4, 7, 4)]


def test_an_empty_slice_selects_nothing(session, five_rows):
    assert rows(session, five_rows, "p = 1 AND c > 5 AND c < 3") == []
    assert session.execute("SELECT count(*) FROM %s WHERE p = 1 AND c > 3 AND c < 3" % five_rows).one()[0] == 0


def test_a_cell_set_twice_in_one_statement_keeps_the_greater_value(session, table):
    t = table("(p int, c int, v int, m map<int, int>, PRIMARY KEY (p, c))")
    session.execute("UPDATE %s SET m[2] = 9, m[2] = 6 WHERE p = 1 AND c = 1" % t)
    session.execute("UPDATE %s SET m[2] = 6, m[2] = 9 WHERE p = 1 AND c = 2" % t)
    session.execute("UPDATE %s SET v = 3, v = 8 WHERE p = 1 AND c = 3" % t)
    session.execute("UPDATE %s SET v = 8, v = 3 WHERE p = 1 AND c = 4" % t)
    got = [(r.c, r.v, dict(r.m) if r.m else None) for r in session.execute("SELECT c, v, m FROM %s WHERE p = 1" % t)]
    assert got == [(1, None, {2: 9}), (2, None, {2: 9}), (3, 8, None), (4, 8, None)]


def test_a_removal_and_an_addition_of_one_element_keep_the_removal(session, table):
    t = table("(p int PRIMARY KEY, s set<int>, l list<int>)")
    session.execute("UPDATE %s SET s = {1, 3} WHERE p = 1" % t)
    session.execute("UPDATE %s SET s = s - {3}, s = s + {3, 4} WHERE p = 1" % t)
    assert set(session.execute("SELECT s FROM %s WHERE p = 1" % t).one().s) == {1, 4}
    session.execute("UPDATE %s SET s = s + {5}, s = s - {5} WHERE p = 1" % t)
    assert set(session.execute("SELECT s FROM %s WHERE p = 1" % t).one().s) == {1, 4}
    # List elements set by index twice: the greater value, either order.
    session.execute("UPDATE %s SET l = [0, 0] WHERE p = 1" % t)
    session.execute("UPDATE %s SET l[0] = 2, l[0] = 1, l[1] = 1, l[1] = 2 WHERE p = 1" % t)
    assert list(session.execute("SELECT l FROM %s WHERE p = 1" % t).one().l) == [2, 2]


def test_deleting_a_collection_shadows_elements_of_its_timestamp(session, table):
    t = table("(p int PRIMARY KEY, m map<int, int>)")
    session.execute("UPDATE %s USING TIMESTAMP 5 SET m[1] = 1 WHERE p = 1" % t)
    session.execute("DELETE m FROM %s USING TIMESTAMP 5 WHERE p = 1" % t)
    # The row had nothing else: it is gone.
    assert list(session.execute("SELECT m FROM %s WHERE p = 1" % t)) == []
    # Setting a new value replaces it from one microsecond below: its own
    # elements survive.
    session.execute("UPDATE %s USING TIMESTAMP 9 SET m = {2: 2} WHERE p = 1" % t)
    assert dict(session.execute("SELECT m FROM %s WHERE p = 1" % t).one().m) == {2: 2}


def test_oversized_keys_and_mutations_are_invalid_requests(session, table):
    from cassandra import InvalidRequest
    t = table("(p blob, c blob, v blob, PRIMARY KEY (p, c))")
    insert = session.prepare("INSERT INTO %s (p, c, v) VALUES (?, ?, ?)" % t)
    with pytest.raises(InvalidRequest, match="Key length of 70000 is longer than maximum of 65535"):
        session.execute(insert, [b"p" * 70_000, b"c", b"v"])
    with pytest.raises(InvalidRequest, match="Key length of 70000 is longer than maximum of 65535"):
        session.execute(insert, [b"p", b"c" * 70_000, b"v"])
    # Past the commitlog's entry limit: the client is told the limit.
    with pytest.raises(InvalidRequest, match=r"mutation of \d+ bytes is too large for the commitlog \(at most \d+\)"):
        session.execute(insert, [b"p", b"c", b"v" * (20 << 20)])


def test_an_unset_limit_is_no_limit(session, table):
    from cassandra import InvalidRequest
    from cassandra.query import UNSET_VALUE
    t = table("(p int, c int, PRIMARY KEY (p, c))")
    for c in range(3):
        session.execute("INSERT INTO %s (p, c) VALUES (1, %d)" % (t, c))
    limited = session.prepare("SELECT c FROM %s WHERE p = ? LIMIT ?" % t)
    assert len(list(session.execute(limited, [1, UNSET_VALUE]))) == 3
    assert len(list(session.execute(limited, [1, 2]))) == 2
    per_partition = session.prepare("SELECT c FROM %s PER PARTITION LIMIT ?" % t)
    assert len(list(session.execute(per_partition, [UNSET_VALUE]))) == 3
    with pytest.raises(InvalidRequest, match="Invalid null value of limit"):
        session.execute(limited, [1, None])


def test_a_comparison_with_null_matches_nothing(session, table):
    # ScyllaDB's reading (as SQL's): nothing equals null, not even an unset
    # cell; the filter still needs ALLOW FILTERING.
    t = table("(p int, c int, v int, s set<int>, m map<int, int>, PRIMARY KEY (p, c))")
    session.execute("INSERT INTO %s (p, c, v, s, m) VALUES (1, 1, 7, {1}, {1: 2})" % t)
    session.execute("INSERT INTO %s (p, c) VALUES (1, 2)" % t)
    for where in ["v = NULL", "v > NULL", "v <= NULL", "s CONTAINS NULL", "m CONTAINS KEY NULL", "m[NULL] = 2", "m[1] = NULL"]:
        with pytest.raises(InvalidRequest, match="ALLOW FILTERING"):
            session.execute("SELECT c FROM %s WHERE p = 1 AND %s" % (t, where))
        assert list(session.execute("SELECT c FROM %s WHERE p = 1 AND %s ALLOW FILTERING" % (t, where))) == []
    prepared = session.prepare("SELECT c FROM %s WHERE p = 1 AND c IN ?" % t)
    assert list(session.execute(prepared, [None])) == []


def test_select_star_shows_static_columns_before_regular_ones(session, table):
    t = table("(p int, c int, a int, z int static, PRIMARY KEY (p, c))")
    session.execute("INSERT INTO %s (p, c, a, z) VALUES (1, 2, 3, 4)" % t)
    result = session.execute("SELECT * FROM %s" % t)
    assert list(result.column_names) == ["p", "c", "z", "a"]
    assert tuple(result.one()) == (1, 2, 4, 3)


def test_token_of_values_on_the_right_of_a_token_relation(session, table):
    t = table("(k1 int, k2 int, v int, PRIMARY KEY ((k1, k2)))")
    for k2 in range(4):
        session.execute("INSERT INTO %s (k1, k2, v) VALUES (0, %d, %d)" % (t, k2, k2))
    assert [r.v for r in session.execute("SELECT v FROM %s WHERE token(k1, k2) = token(0, 1)" % t)] == [1]
    prepared = session.prepare("SELECT v FROM %s WHERE token(k1, k2) >= token(?, ?)" % t)
    # The markers are typed as the key's columns but named as the function's
    # arguments, as ScyllaDB names them (a driver must not take them for the
    # routing key: cqlpy's testFunctionCallWithUnset).
    assert [c.name for c in prepared.column_metadata] == ["arg0(system.token)", "arg1(system.token)"]
    assert [c.type.typename for c in prepared.column_metadata] == ["int", "int"]
    everything = [r.v for r in session.execute("SELECT v FROM %s" % t)]
    assert [r.v for r in session.execute(prepared, [0, everything[1]])] == everything[1:]


def test_a_function_argument_marker_is_not_a_key_column(session, table):
    t = table("(k int PRIMARY KEY, v int)")
    prepared = session.prepare("SELECT * FROM %s WHERE k = blobAsInt(?)" % t)
    assert [c.name for c in prepared.column_metadata] == ["arg0(system.blobasint)"]
    with pytest.raises(InvalidRequest, match="unset"):
        session.execute(prepared, [UNSET_VALUE])


def test_ascii_casts_into_text_but_not_back(session, table):
    t = table("(k int PRIMARY KEY, t text, a ascii)")
    session.execute("UPDATE %s SET t = (ascii)'foo' WHERE k = 0" % t)
    session.execute("UPDATE %s SET t = (text)(ascii)'foo' WHERE k = 0" % t)
    with pytest.raises(InvalidRequest):
        session.execute("UPDATE %s SET a = (text)'foo' WHERE k = 0" % t)


def test_a_cast_value_goes_to_a_blob_as_its_bytes(session, table):
    """ScyllaDB's casts (cqlpy test_cast.py): a blob reads any single-cell
    value, so `(int)1234` is assignable to a blob, as `(blob)(int)1234` is;
    an untyped constant is not, nor a blob where an int belongs."""
    t = table("(k int PRIMARY KEY, b blob, i int)")
    session.execute("INSERT INTO %s (k, b) VALUES (1, (int)1234)" % t)
    assert session.execute("SELECT b FROM %s WHERE k = 1" % t).one().b == (1234).to_bytes(4, "big")
    session.execute("INSERT INTO %s (k, b) VALUES (2, (blob)(blob)(tinyint)42)" % t)
    assert session.execute("SELECT b FROM %s WHERE k = 2" % t).one().b == bytes([42])
    session.execute("INSERT INTO %s (k, b) VALUES (3, blobasint((int)123432))" % t)
    assert session.execute("SELECT b FROM %s WHERE k = 3" % t).one().b == (123432).to_bytes(4, "big")
    assert [r.k for r in session.execute(
        "SELECT k FROM %s WHERE k = 1 AND b = (blob)(int)1234 ALLOW FILTERING" % t)] == [1]
    with pytest.raises(InvalidRequest, match="blob"):
        session.execute("INSERT INTO %s (k, b) VALUES (4, (blob)123)" % t)
    with pytest.raises(InvalidRequest, match="Cannot assign a value of type blob to i of type int"):
        session.execute("INSERT INTO %s (k, i) VALUES (4, (int)(blob)0xBAAAAAAD)" % t)


def test_deleting_a_list_element_at_an_unset_index_deletes_nothing(session, table):
    t = table("(k int PRIMARY KEY, l list<text>)")
    session.execute("INSERT INTO %s (k, l) VALUES (1, ['a', 'b'])" % t)
    session.execute(session.prepare("DELETE l[?] FROM %s WHERE k = 1" % t), [UNSET_VALUE])
    assert session.execute("SELECT l FROM %s WHERE k = 1" % t).one().l == ["a", "b"]


def test_a_multi_column_in_takes_one_marker_for_its_tuples(session, table):
    t = table("(p int, c1 int, c2 int, v int, PRIMARY KEY (p, c1, c2))")
    for c1, c2 in [(0, 0), (0, 1), (1, 0), (1, 1)]:
        session.execute("INSERT INTO %s (p, c1, c2, v) VALUES (0, %d, %d, %d)" % (t, c1, c2, 10 * c1 + c2))
    prepared = session.prepare("SELECT v FROM %s WHERE p = 0 AND (c1, c2) IN ?" % t)
    assert [r.v for r in session.execute(prepared, [[(1, 1), (0, 1)]])] == [1, 11]
    assert list(session.execute(prepared, [None])) == []


def test_a_column_name_as_a_value_cannot_be_resolved(session, table):
    """`VALUES (k, a)`: a column where a value belongs parses, and is refused
    as ScyllaDB refuses it (InvalidRequest, not a syntax error)."""
    t = table("(k int PRIMARY KEY, t text, a text)")
    with pytest.raises(InvalidRequest, match="Cannot resolve column a without schema"):
        session.execute(f"INSERT INTO {t} (k, t) VALUES (1, a)")
    with pytest.raises(InvalidRequest, match="Cannot resolve column a without schema"):
        session.execute(f"UPDATE {t} SET t = a WHERE k = 1")
    with pytest.raises(InvalidRequest):
        session.execute(f"INSERT INTO {t} (k, t) VALUES (1, WRITETIME(a))")
    with pytest.raises(InvalidRequest, match='Cannot resolve column A without schema'):
        session.execute(f'INSERT INTO {t} (k, t) VALUES (1, "A")')
