"""The vector type (Cassandra 5): DDL, driver metadata, list literals and
bound values of every element kind, vectors in the primary key, errors, and
a restart.

A vector is one cell of exactly N non-null elements; fixed-length elements
(float, int, bigint, double, boolean, timestamp, uuid, timeuuid) are packed,
others carry an unsigned vint length. In protocol v4 its type travels as the
custom class `org.apache.cassandra.db.marshal.VectorType(... , N)`, which
the driver turns into cassandra.cqltypes.VectorType.
"""
import re
import uuid
from decimal import Decimal

import pytest

from cassandra import InvalidRequest
from cassandra.protocol import SyntaxException

from conftest import IS_CASSANDRA
from node import skip_reason, temp_node


def one(session, cql, *params):
    return session.execute(cql, params or None).one()


def columns(cluster, keyspace, table):
    return cluster.metadata.keyspaces[keyspace].tables[table].columns


def test_ddl_metadata_and_schema_text(cluster, session, keyspace, table):
    t = table("(k int PRIMARY KEY, f vector<float, 3>, s vector<text, 2>, l vector<list<int>, 2>)")
    session.execute("ALTER TABLE %s ADD n vector<vector<bigint, 2>, 1>" % t)
    cluster.refresh_table_metadata(keyspace, t)
    cols = columns(cluster, keyspace, t)
    assert cols["f"].cql_type == "vector<float, 3>"
    assert cols["s"].cql_type == "vector<text, 2>"
    # Collections inside a vector are frozen, as Cassandra stores them.
    assert cols["l"].cql_type == "vector<frozen<list<int>>, 2>"
    assert cols["n"].cql_type == "vector<vector<bigint, 2>, 1>"
    row = one(session, "SELECT type FROM system_schema.columns WHERE keyspace_name = %s AND table_name = %s "
              "AND column_name = 'f'", keyspace, t)
    assert row.type == "vector<float, 3>"


def test_literals_and_result_metadata(session, table):
    t = table("(k int PRIMARY KEY, f vector<float, 3>, s vector<text, 2>)")
    session.execute("INSERT INTO %s (k, f, s) VALUES (1, [1.0, 2.5, -3], ['a', ''])" % t)
    rs = session.execute("SELECT f, s FROM %s WHERE k = 1" % t)
    row = rs.one()
    assert row.f == [1.0, 2.5, -3.0]
    assert row.s == ["a", ""]
    # The driver parsed the custom type class into its VectorType.
    f_type, s_type = rs.column_types
    assert (f_type.typename, f_type.vector_size, f_type.subtype.typename) == (
        "org.apache.cassandra.db.marshal.VectorType", 3, "float")
    assert (s_type.vector_size, s_type.subtype.typename) == (2, "text")
    session.execute("UPDATE %s SET f = [0, 0, 1] WHERE k = 1" % t)
    assert one(session, "SELECT f FROM %s WHERE k = 1" % t).f == [0.0, 0.0, 1.0]
    session.execute("UPDATE %s SET f = null WHERE k = 1" % t)
    assert one(session, "SELECT f FROM %s WHERE k = 1" % t).f is None


ELEMENTS = [
    # (element type, dimension, values) — fixed-length first, then variable.
    ("float", 2, [1.5, -2.0]),
    ("double", 3, [1.0, 2.0, 3.0]),
    ("int", 3, [1, -2, 3]),
    ("bigint", 2, [2**40, -1]),
    ("boolean", 2, [True, False]),
    ("uuid", 2, [uuid.UUID(int=1), uuid.UUID(int=2)]),
    ("timeuuid", 1, [uuid.UUID("f4a7c45e-220e-11f0-8a95-325096b39f47")]),
    ("smallint", 2, [1, -300]),
    ("tinyint", 4, [1, 2, 3, -4]),
    ("text", 2, ["foo", "bär"]),
    ("ascii", 2, ["x", "yz"]),
    ("blob", 2, [b"\x00\x01", b""]),
    ("varint", 2, [10**30, -5]),
    ("decimal", 2, [Decimal("1.25"), Decimal("-3")]),
    ("inet", 2, ["127.0.0.1", "::1"]),
    ("list<int>", 2, [[1, 2], [3]]),
    ("set<int>", 2, [{1, 2}, {3}]),
    ("map<int, text>", 2, [{1: "a"}, {2: "b", 3: "c"}]),
    ("tuple<int, text>", 2, [(1, "a"), (2, "b")]),
    ("vector<int, 2>", 2, [[1, 2], [3, 4]]),
    ("vector<text, 2>", 1, [["a", "bc"]]),
    ("list<vector<int, 2>>", 2, [[[1, 2]], [[5, 6], [7, 8]]]),
]


@pytest.mark.parametrize("elem,dim,values", ELEMENTS, ids=[e[0] for e in ELEMENTS])
def test_prepared_round_trip_of_every_element_kind(session, table, elem, dim, values):
    t = table("(k int PRIMARY KEY, v vector<%s, %d>)" % (elem, dim))
    insert = session.prepare("INSERT INTO %s (k, v) VALUES (?, ?)" % t)
    session.execute(insert, (1, values))
    got = one(session, "SELECT v FROM %s WHERE k = 1" % t).v
    if elem == "inet":
        assert got == values
    else:
        assert list(got) == list(values)


def test_bind_markers_inside_a_vector_literal(session, table):
    t = table("(k int PRIMARY KEY, v vector<int, 3>)")
    insert = session.prepare("INSERT INTO %s (k, v) VALUES (?, [?, 7, ?])" % t)
    assert [c.type.typename for c in insert.column_metadata] == ["int", "int", "int"]
    session.execute(insert, (1, 5, 9))
    assert one(session, "SELECT v FROM %s WHERE k = 1" % t).v == [5, 7, 9]


def test_vectors_in_the_primary_key(session, table):
    t = table("(k vector<int, 2>, c vector<text, 2>, v int, PRIMARY KEY (k, c))")
    for c, v in [(["b", "a"], 2), (["a", "zz"], 1), (["a", "b"], 0)]:
        session.execute("INSERT INTO %s (k, c, v) VALUES ([1, 2], %%s, %%s)" % t, (c, v))
    rows = session.execute("SELECT c, v FROM %s WHERE k = [1, 2]" % t)
    assert [(r.c, r.v) for r in rows] == [(["a", "b"], 0), (["a", "zz"], 1), (["b", "a"], 2)]
    select = session.prepare("SELECT v FROM %s WHERE k = ? AND c = ?" % t)
    assert session.execute(select, ([1, 2], ["a", "zz"])).one().v == 1


def test_wrong_literals_are_invalid_and_name_the_column(session, table):
    t = table("(k int PRIMARY KEY, f vector<float, 3>)")
    # Cassandra's texts (ScyllaDB's cqlpy port of CQLVectorTest matches
    # "Invalid vector literal").
    with pytest.raises(InvalidRequest, match=r"Invalid vector literal for f of type vector<float, 3>; expected 3 elements, but given 2"):
        session.execute("INSERT INTO %s (k, f) VALUES (1, [1.0, 2.0])" % t)
    with pytest.raises(InvalidRequest, match=r"Invalid vector literal for f of type vector<float, 3>; expected 3 elements, but given 4"):
        session.execute("INSERT INTO %s (k, f) VALUES (1, [1.0, 2.0, 3.0, 4.0])" % t)
    with pytest.raises(InvalidRequest, match=r"Invalid vector literal for f: value 'x' is not of type float"):
        session.execute("INSERT INTO %s (k, f) VALUES (1, [1.0, 2.0, 'x'])" % t)
    with pytest.raises(InvalidRequest, match=r"^Error from server: code=2200 \[Invalid query\] message=\"null is not supported inside vectors\"$"):
        session.execute("INSERT INTO %s (k, f) VALUES (1, [1.0, null, 2.0])" % t)
    i = table("(k int PRIMARY KEY, v vector<int, 2>, s vector<text, 2>)")
    for literal, message in [("[(bigint) 1, (bigint) 2]", "value (bigint)1 is not of type int"), ("['a', 'b']", "value 'a' is not of type int")]:
        with pytest.raises(InvalidRequest, match=re.escape("Invalid vector literal for v: " + message)):
            session.execute("INSERT INTO %s (k, v) VALUES (1, %s)" % (i, literal))
    with pytest.raises(InvalidRequest, match=re.escape("Invalid vector literal for s: value 1 is not of type text")):
        session.execute("INSERT INTO %s (k, s) VALUES (1, [1, 2])" % i)
    assert list(session.execute("SELECT * FROM %s" % i)) == []
    with pytest.raises(InvalidRequest, match=r"Invalid set literal for f of type vector<float, 3>"):
        session.execute("INSERT INTO %s (k, f) VALUES (1, {1.0, 2.0, 3.0})" % t)
    with pytest.raises(InvalidRequest, match="f"):
        session.execute("UPDATE %s SET f = f + [1.0] WHERE k = 1" % t)


def test_wrong_bound_values_are_invalid_and_name_the_column(session, table):
    t = table("(k int PRIMARY KEY, f vector<float, 3>, s vector<text, 2>)")
    insert = session.prepare("INSERT INTO %s (k, f, s) VALUES (?, ?, ?)" % t)

    def execute_with_raw(index, raw):
        # The driver checks values itself, so replace the serialized bytes.
        bound = insert.bind((1, [1.0, 2.0, 3.0], ["a", "b"]))
        bound.values[index] = raw
        session.execute(bound)

    with pytest.raises(InvalidRequest, match=r"binding column f: expected 12 bytes for a vector<float, 3> value, got 8"):
        execute_with_raw(1, b"\x00" * 8)
    with pytest.raises(InvalidRequest, match=r"binding column s: .*truncated"):
        execute_with_raw(2, b"\x01a")
    with pytest.raises(InvalidRequest, match=r"binding column s: .*unexpected bytes"):
        execute_with_raw(2, b"\x01a\x01b\x00")


@pytest.mark.parametrize("column,message", [
    ("v vector<float, 0>", "Vectors must have a dimension greater than 0"),
    ("v vector<float, -18>", "Vectors must have a dimension greater than 0"),
    ("v vector<float, 16001>", "Vectors must have a dimension less than or equal to 16000"),
    ("v vector<counter, 2>", "Counters are not allowed inside vectors"),
    ("v vector<duration, 1>, PRIMARY KEY (k, v)", "duration type is not supported for PRIMARY KEY column 'v'"),
])
def test_bad_vector_types_are_invalid(session, tname, column, message):
    if IS_CASSANDRA and "16001" in column:
        pytest.skip("Cassandra has no upper bound")
    with pytest.raises(InvalidRequest, match=message):
        key = "" if "PRIMARY KEY" in column else " PRIMARY KEY"
        session.execute("CREATE TABLE %s (k int%s, %s)" % (tname, key, column))


@pytest.mark.parametrize("dimension", ["dog", "1.5"])
def test_non_integer_dimensions_are_syntax_errors(session, tname, dimension):
    with pytest.raises(SyntaxException):
        session.execute("CREATE TABLE %s (k int PRIMARY KEY, v vector<float, %s>)" % (tname, dimension))


def test_vector_fields_of_user_types(session, table):
    session.execute("CREATE TYPE embedding (label text, v vector<float, 2>)")
    t = table("(k int PRIMARY KEY, e frozen<embedding>, vs vector<frozen<embedding>, 1>)")
    session.execute("INSERT INTO %s (k, e, vs) VALUES (1, {label: 'a', v: [1, 2]}, [{label: 'b', v: [3, 4]}])" % t)
    row = one(session, "SELECT e, vs FROM %s WHERE k = 1" % t)
    assert (row.e.label, list(row.e.v)) == ("a", [1.0, 2.0])
    assert (row.vs[0].label, list(row.vs[0].v)) == ("b", [3.0, 4.0])


@pytest.mark.skipif(bool(skip_reason()) or IS_CASSANDRA, reason=skip_reason() or "Shoal's own node")
def test_vectors_survive_restart():
    with temp_node("shoal-vector-") as node:
        cluster, session = node.session()
        session.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        session.execute("CREATE TABLE ks.t (k vector<int, 2> PRIMARY KEY, v vector<frozen<set<text>>, 2>)")
        session.execute("INSERT INTO ks.t (k, v) VALUES ([1, 2], [{'a'}, {'b', 'c'}])")
        cluster.shutdown()
        node.kill()
        node.start()
        cluster, session = node.session()
        try:
            row = one(session, "SELECT k, v FROM ks.t")
            assert (row.k, row.v) == ([1, 2], [{"a"}, {"b", "c"}])
            cols = cluster.metadata.keyspaces["ks"].tables["t"].columns
            assert cols["v"].cql_type == "vector<frozen<set<text>>, 2>"
        finally:
            cluster.shutdown()


def test_a_hex_constant_for_a_vector_is_refused_naming_the_constant(session, table):
    # ScyllaDB's text names the constant (cqlpy cql_vector_test.py::test_emptyValues).
    t = table("(k int PRIMARY KEY, v vector<int, 2>)")
    with pytest.raises(InvalidRequest, match=re.escape('Invalid HEX constant (0x) for "v" of type vector<int, 2>')):
        session.execute(f"INSERT INTO {t} (k, v) VALUES (0, 0x)")
    with pytest.raises(InvalidRequest, match=re.escape('Invalid HEX constant (0x01ab) for "v"')):
        session.execute(f"INSERT INTO {t} (k, v) VALUES (0, 0x01AB)")
