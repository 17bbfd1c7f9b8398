"""Empty (zero-length) values of non-text types, as Cassandra accepts them.

Drivers cannot serialize an empty int from a Python value, so the tests bind
a placeholder and replace its serialized bytes with b"" before executing:
the server receives a 0-length [bytes], exactly what a custom serializer
sends. The driver reads an empty value back as cqltypes.EMPTY when
support_empty_values is on (None otherwise), never as a real value.
"""

import datetime
import uuid

import pytest

from cassandra import cqltypes
from cassandra.cqltypes import EMPTY
from cassandra.protocol import InvalidRequest
from cassandra.util import Duration

SCALARS = [
    ("i", "int", 1),
    ("b", "bigint", 1),
    ("s", "smallint", 1),
    ("ti", "tinyint", 1),
    ("bo", "boolean", True),
    ("f", "float", 1.0),
    ("d", "double", 1.0),
    ("vi", "varint", 1),
    ("de", "decimal", 1),
    ("u", "uuid", None),
    ("tu", "timeuuid", None),
    ("ts", "timestamp", None),
    ("dt", "date", None),
    ("tm", "time", None),
    ("ip", "inet", "127.0.0.1"),
]


@pytest.fixture
def empty_values(monkeypatch):
    monkeypatch.setattr(cqltypes._CassandraType, "support_empty_values", True)


def bound_with_empty(prepared, values, empty):
    """prepared bound to `values`, the markers at indexes `empty` sent as 0-length values."""
    bound = prepared.bind(values)
    for i in empty:
        bound.values[i] = b""
    return bound


def placeholder(ty, value):
    """A valid value of `ty` to bind before its bytes are emptied."""
    if value is not None:
        return value
    return {
        "uuid": uuid.uuid4(),
        "timeuuid": uuid.uuid1(),
        "timestamp": datetime.datetime(2020, 1, 1),
        "date": datetime.date(2020, 1, 1),
        "time": 0,
    }[ty]


def test_empty_values_of_every_scalar_type_round_trip(session, table, empty_values):
    columns = ", ".join("%s %s" % (n, t) for n, t, _ in SCALARS)
    t = table("(k int PRIMARY KEY, %s, bl blob, tx text)" % columns)
    names = [n for n, _, _ in SCALARS] + ["bl", "tx"]
    insert = session.prepare(
        "INSERT INTO %s (k, %s) VALUES (?, %s)" % (t, ", ".join(names), ", ".join("?" * len(names)))
    )
    values = [1] + [placeholder(ty, v) for _, ty, v in SCALARS] + [b"x", "x"]
    session.execute(bound_with_empty(insert, values, range(1, len(values))))
    row = session.execute("SELECT %s FROM %s WHERE k = 1" % (", ".join(names), t)).one()
    assert list(row) == [EMPTY] * len(SCALARS) + [b"", ""]
    # Empty is not null: the values are there, with a writetime.
    assert session.execute("SELECT writetime(i) FROM %s WHERE k = 1" % t).one()[0] is not None
    assert session.execute("SELECT intAsBlob(i) FROM %s WHERE k = 1" % t).one()[0] == b""


def test_blob_conversion_makes_an_empty_value(session, table, empty_values):
    t = table("(k int PRIMARY KEY, v int)")
    session.execute("INSERT INTO %s (k, v) VALUES (1, blobAsInt(0x))" % t)
    assert session.execute("SELECT v FROM %s WHERE k = 1" % t).one().v is EMPTY


def test_empty_values_in_updates_conditions_and_aggregates(session, table, empty_values):
    t = table("(k int, c int, v int, PRIMARY KEY (k, c))")
    update = session.prepare("UPDATE %s SET v = ? WHERE k = ? AND c = ?" % t)
    session.execute(bound_with_empty(update, (0, 1, 1), [0]))
    session.execute(update, (5, 1, 2))
    assert [r.v for r in session.execute("SELECT v FROM %s WHERE k = 1" % t)] == [EMPTY, 5]
    # Aggregates skip empty values as nulls; min puts them first.
    row = session.execute("SELECT sum(v), avg(v), count(v), min(v) FROM %s WHERE k = 1" % t).one()
    assert tuple(row) == (5, 5, 2, EMPTY)
    cas = session.prepare("UPDATE %s SET v = ? WHERE k = 1 AND c = 1 IF v = ?" % t)
    assert session.execute(bound_with_empty(cas, (7, 0), [1])).was_applied
    assert session.execute("SELECT v FROM %s WHERE k = 1 AND c = 1" % t).one().v == 7


def test_empty_partition_key_is_refused(session, table):
    t = table("(k int PRIMARY KEY, v int)")
    insert = session.prepare("INSERT INTO %s (k, v) VALUES (?, ?)" % t)
    with pytest.raises(InvalidRequest, match="Key may not be empty"):
        session.execute(bound_with_empty(insert, (1, 1), [0]))
    text_key = table("(k text PRIMARY KEY, v int)")
    with pytest.raises(InvalidRequest, match="Key may not be empty"):
        session.execute("INSERT INTO %s (k, v) VALUES ('', 1)" % text_key)
    # Reading it finds nothing, as in ScyllaDB (Cassandra refuses it too).
    assert list(session.execute("SELECT * FROM %s WHERE k = ''" % text_key)) == []
    assert list(session.execute(session.prepare("SELECT * FROM %s WHERE k = ?" % text_key), [""])) == []


def test_composite_partition_key_may_have_an_empty_component(session, table):
    t = table("(a text, b int, v int, PRIMARY KEY ((a, b)))")
    session.execute("INSERT INTO %s (a, b, v) VALUES ('', 1, 2)" % t)
    assert session.execute("SELECT v FROM %s WHERE a = '' AND b = 1" % t).one().v == 2


def test_empty_clustering_values(session, table, empty_values):
    t = table("(k int, c text, v int, PRIMARY KEY (k, c))")
    for c in ["b", "", "a"]:
        session.execute("INSERT INTO %s (k, c, v) VALUES (1, %%s, 1)" % t, (c,))
    assert [r.c for r in session.execute("SELECT c FROM %s WHERE k = 1" % t)] == ["", "a", "b"]
    assert [r.c for r in session.execute("SELECT c FROM %s WHERE k = 1 AND c > ''" % t)] == ["a", "b"]
    b = table("(k int, c blob, v int, PRIMARY KEY (k, c)) WITH CLUSTERING ORDER BY (c DESC)")
    session.execute("INSERT INTO %s (k, c, v) VALUES (1, 0x, 1)" % b)
    session.execute("INSERT INTO %s (k, c, v) VALUES (1, 0x00, 2)" % b)
    assert [r.v for r in session.execute("SELECT v FROM %s WHERE k = 1" % b)] == [2, 1]
    # Shoal's key encoding has no place for an empty fixed-size value.
    n = table("(k int, c int, v int, PRIMARY KEY (k, c))")
    insert = session.prepare("INSERT INTO %s (k, c, v) VALUES (?, ?, ?)" % n)
    with pytest.raises(InvalidRequest, match="Empty values of type int are not supported in clustering column c"):
        session.execute(bound_with_empty(insert, (1, 1, 1), [1]))


def test_duration_has_no_empty_value(session, table):
    t = table("(k int PRIMARY KEY, du duration)")
    insert = session.prepare("INSERT INTO %s (k, du) VALUES (?, ?)" % t)
    with pytest.raises(InvalidRequest, match="duration"):
        session.execute(bound_with_empty(insert, (1, Duration(1, 1, 1)), [1]))
