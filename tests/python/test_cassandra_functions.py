"""Cassandra's newer native functions through the driver: the collection
functions of Cassandra 5 (`map_keys`, `collection_count`, `collection_sum`,
...), the length and format functions of Cassandra 6 (`length`,
`octet_length`, `format_bytes`, `format_time`), a float cast to decimal
keeping its own digits, INSERT JSON's empty string as an empty value, the
similarity functions of two list literals, and ScyllaDB's `tombstone_gc`
table option.
"""
from decimal import Decimal
import re

import pytest

from cassandra import InvalidRequest

from conftest import IS_CASSANDRA


def one(session, cql, *params):
    return session.execute(cql, params or None).one()


def test_collection_functions(session, table):
    t = table("(k int PRIMARY KEY, l list<int>, s set<text>, m map<int, text>, fl frozen<list<decimal>>)")
    session.execute(
        f"INSERT INTO {t} (k, l, s, m, fl) VALUES (1, [3, 1, 2], {{'b', 'a'}}, {{1: 'x', 2: 'y'}}, [1.5, 2.25])"
    )
    row = one(session, f"SELECT map_keys(m), map_values(m), collection_count(l), collection_count(m) FROM {t}")
    assert (set(row[0]), list(row[1]), row[2], row[3]) == ({1, 2}, ["x", "y"], 3, 2)
    row = one(session, f"SELECT collection_min(l), collection_max(l), collection_min(s), collection_max(s) FROM {t}")
    assert tuple(row) == (1, 3, "a", "b")
    row = one(session, f"SELECT collection_sum(l), collection_avg(l), collection_sum(fl), collection_avg(fl) FROM {t}")
    assert tuple(row) == (6, 2, Decimal("3.75"), Decimal("1.88"))
    # A non-frozen collection with no elements is null; so is its count.
    session.execute(f"INSERT INTO {t} (k, fl) VALUES (2, [])")
    row = one(session, f"SELECT collection_count(l), collection_min(fl), collection_sum(fl) FROM {t} WHERE k = 2")
    assert tuple(row) == (None, None, Decimal(0))
    with pytest.raises(InvalidRequest, match=re.escape(
            "Function system.collection_sum requires a numeric set/list argument, but found argument s of type set<text>")):
        session.execute(f"SELECT collection_sum(s) FROM {t}")
    with pytest.raises(InvalidRequest, match="requires a map argument"):
        session.execute(f"SELECT map_keys(l) FROM {t}")


@pytest.mark.skipif(IS_CASSANDRA, reason="Cassandra 6's functions")
def test_length_functions(session, table):
    t = table("(k text PRIMARY KEY, b blob, d decimal)")
    session.execute(f"INSERT INTO {t} (k, b, d) VALUES ('こんにちは😀', 0x0102, 6.3)")
    row = one(session, f"SELECT length(k), octet_length(k), octet_length(b), octet_length(d) FROM {t}")
    # length counts UTF-16 code units, as Java's String.length().
    assert tuple(row) == (7, 19, 2, 5)
    with pytest.raises(InvalidRequest, match="Invalid number of arguments in call to function system.length"):
        session.execute(f"SELECT length(k, k) FROM {t}")


@pytest.mark.skipif(IS_CASSANDRA, reason="Cassandra 6's functions")
def test_format_functions(session, table):
    t = table("(k int PRIMARY KEY, n bigint, s text)")
    session.execute(f"INSERT INTO {t} (k, n, s) VALUES (1, 1563401650, '7200001')")
    row = one(session, f"SELECT format_bytes(n), format_bytes(n, 'KiB'), format_bytes(n, 'GiB', 'B') FROM {t}")
    assert tuple(row) == ("1.46 GiB", "1526759.42 KiB", "1678689739315609600 B")
    row = one(session, f"SELECT format_time(s), format_time(n, 's'), format_time(n, 'us', 'ms') FROM {t}")
    assert tuple(row) == ("2 h", "1563401.65 s", "1563401.65 ms")
    with pytest.raises(InvalidRequest, match=re.escape("Unsupported data storage unit: x. Supported units are: B, KiB, MiB, GiB")):
        session.execute(f"SELECT format_bytes(n, 'x') FROM {t}")
    with pytest.raises(InvalidRequest, match="none of the arguments may be null"):
        session.execute(f"SELECT format_time(n, null) FROM {t}")
    with pytest.raises(InvalidRequest, match=re.escape("Invalid number of arguments for function system.format_bytes(")):
        session.execute(f"SELECT format_bytes() FROM {t}")
    session.execute(f"INSERT INTO {t} (k, n, s) VALUES (2, -1, 'abc')")
    with pytest.raises(InvalidRequest, match="value must be non-negative"):
        session.execute(f"SELECT format_bytes(n) FROM {t} WHERE k = 2")
    with pytest.raises(InvalidRequest, match="unable to convert string 'abc' to a value of type long"):
        session.execute(f"SELECT format_time(s) FROM {t} WHERE k = 2")


@pytest.mark.skipif(IS_CASSANDRA, reason="Cassandra widens the float to a double first (CASSANDRA-18647)")
def test_float_cast_to_decimal_keeps_its_digits(session, table):
    t = table("(k int PRIMARY KEY, f float)")
    session.execute(f"INSERT INTO {t} (k, f) VALUES (1, 5.2)")
    assert one(session, f"SELECT CAST(f AS decimal) FROM {t}")[0] == Decimal("5.2")


def test_insert_json_empty_string_is_an_empty_value(session, table):
    t = table("(k int PRIMARY KEY, u uuid, i inet, ts timestamp, d double)")
    session.execute(f"""INSERT INTO {t} JSON '{{"k": 1, "u": "", "i": "", "ts": "", "d": ""}}'""")
    row = one(session, f"SELECT uuidAsBlob(u), inetAsBlob(i), timestampAsBlob(ts), doubleAsBlob(d) FROM {t}")
    assert tuple(row) == (b"", b"", b"", b"")
    text = one(session, f"SELECT JSON u, i FROM {t}")[0]
    assert re.search(r'"u": "".*"i": ""', text), text


def test_similarity_of_two_list_literals(session, table):
    t = table("(k int PRIMARY KEY, v vector<float, 2>, l list<float>)")
    session.execute(f"INSERT INTO {t} (k, v) VALUES (1, [1, 2])")
    assert one(session, f"SELECT similarity_dot_product([1, 2], [1, 2]) FROM {t}")[0] == 3.0
    with pytest.raises(InvalidRequest, match="All arguments must have the same vector dimensions"):
        session.execute(f"SELECT similarity_cosine(v, [1]) FROM {t}")
    # Beside a list column the literal stays a vector: the refusal names the column.
    with pytest.raises(InvalidRequest, match=re.escape("requires a float vector argument, but found argument l of type list<float>")):
        session.execute(f"SELECT similarity_cosine([1, 2], l) FROM {t}")


@pytest.mark.skipif(IS_CASSANDRA, reason="ScyllaDB's table option")
def test_tombstone_gc_option_is_accepted(session, table):
    t = table("(k int PRIMARY KEY, v int)", options="tombstone_gc = {'mode': 'disabled'}")
    session.execute(f"INSERT INTO {t} (k, v) VALUES (1, 1)")
    assert one(session, f"SELECT v FROM {t}")[0] == 1


def test_similarity_with_a_bound_vector(session, table):
    t = table("(k int PRIMARY KEY, v vector<float, 2>)")
    session.execute(f"INSERT INTO {t} (k, v) VALUES (1, [1, 2])")
    stmt = session.prepare(f"SELECT similarity_euclidean(v, ?) FROM {t}")
    assert session.execute(stmt, [[1.0, 2.0]]).one()[0] == 1.0
    assert session.execute(stmt, [[1.0, 1.0]]).one()[0] == 0.5
    # Beside a list literal, the marker takes the literal's vector type.
    stmt = session.prepare(f"SELECT similarity_euclidean([1, 2], ?) FROM {t}")
    assert session.execute(stmt, [[1.0, 2.0]]).one()[0] == 1.0
    # Two markers: nothing tells their type (Cassandra's refusal).
    with pytest.raises(InvalidRequest, match=re.escape("Cannot infer type of argument ?")):
        session.prepare(f"SELECT similarity_euclidean(?, ?) FROM {t}")


def test_marker_operand_takes_the_column_type(session, table):
    t = table("(k int PRIMARY KEY, v int)")
    session.execute(f"INSERT INTO {t} (k, v) VALUES (1, 5)")
    stmt = session.prepare(f"SELECT v + ?, ? * v FROM {t}")
    assert tuple(session.execute(stmt, [3, 2]).one()) == (8, 10)


def test_format_bytes_prints_javas_digits_past_a_long(session, table):
    """Cassandra formats sizes as Java's DecimalFormat does: past 10^15 an
    integral value keeps the digits Java's old double printing gives, not
    the shortest ones (2305843008139952000)."""
    t = table("(k int PRIMARY KEY, n int, b bigint)")
    session.execute(f"INSERT INTO {t} (k, n, b) VALUES (1, 2147483647, 1099511628801)")
    row = one(session, f"SELECT format_bytes(n, 'GiB', 'B'), format_bytes(b, 'GiB', 'B') FROM {t}")
    assert tuple(row) == ("2305843008139952130 B", "9223372036854776000 B")


def test_similarity_arguments_refused_as_by_scylladb(session, table):
    t = table("(k int PRIMARY KEY, v vector<float, 2>)")
    session.execute(f"INSERT INTO {t} (k, v) VALUES (1, [1, 2])")
    assert one(session, f"SELECT similarity_cosine(v, null) FROM {t}")[0] is None
    for function in ["similarity_cosine", "similarity_euclidean", "similarity_dot_product"]:
        message = f"Cannot infer type of argument null for function system.{function}(vector<float, n>"
        with pytest.raises(InvalidRequest, match=re.escape(message)):
            session.execute(f"SELECT {function}(null, null) FROM {t}")
        # A constant that is no list of numbers is no float vector (ScyllaDB's text).
        for constant in ["5", "'dog'", "[1.1, 'dog']", "{1.0, 2.0}"]:
            with pytest.raises(InvalidRequest, match=f"Function system.{function} requires a float vector argument"):
                session.execute(f"SELECT {function}(v, {constant}) FROM {t}")
        with pytest.raises(InvalidRequest, match=re.escape(f"Invalid number of arguments for function system.{function}(")):
            session.execute(f"SELECT {function}(v) FROM {t}")


def test_similarity_of_null_and_a_list_literal_is_null(session, table):
    """A null beside a list literal takes the literal's vector type, as one
    beside a vector column does: the similarity is null."""
    t = table("(k int PRIMARY KEY, v vector<float, 3>)")
    session.execute(f"INSERT INTO {t} (k, v) VALUES (1, [1, 2, 3])")
    for function in ["similarity_cosine", "similarity_euclidean", "similarity_dot_product"]:
        row = one(session, f"SELECT {function}(null, [1.1, 1.2, 20.25]), {function}([1.1, 1.2, 20.25], null) FROM {t}")
        assert tuple(row) == (None, None)
