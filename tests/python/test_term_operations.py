"""Arithmetic in terms, as Cassandra 4+ takes it (`WHERE c = 1 + 2`,
`VALUES (2 * 3)`, `SET v = -(1 + 1)`): operands typed from the receiver,
a bind marker typed when one operation fits, Cassandra's "Ambiguous"
error (asking for a cast) when several do."""
from decimal import Decimal

import pytest
from cassandra import FunctionFailure, InvalidRequest


@pytest.fixture
def small(session, table):
    t = table("(pk int, c1 tinyint, c2 smallint, v text, PRIMARY KEY (pk, c1, c2))")
    session.execute("INSERT INTO %s (pk, c1, c2, v) VALUES (2, 2, 2, 'test')" % t)
    return t


def rows(session, query, *args):
    return [tuple(r) for r in session.execute(query, args or None)]


def test_operations_in_where_take_the_columns_types(session, small):
    t = small
    expected = [(2, 2, 2, 'test')]
    assert rows(session, "SELECT * FROM %s WHERE pk = 2 AND c1 = 1 + 1" % t) == expected
    assert rows(session, "SELECT * FROM %s WHERE pk = 1 + 1 AND c1 = 2" % t) == expected
    assert rows(session, "SELECT * FROM %s WHERE pk = 2 AND c1 = 2 AND c2 = 1 * (1 + 1)" % t) == expected
    assert rows(session, "SELECT * FROM %s WHERE pk = 5 - 3 AND c1 > 3 - 2" % t) == expected
    assert rows(session, "SELECT * FROM %s WHERE pk = 23 %% 7 AND c1 = 12 / 6" % t) == expected
    assert rows(session, "SELECT * FROM %s WHERE pk = -(-2)" % t) == expected
    assert rows(session, "SELECT * FROM %s WHERE token(pk) = token(1 + 1)" % t) == expected


def test_a_marker_is_typed_by_the_only_operation_that_fits(session, small):
    t = small
    # Only tinyint + tinyint gives a tinyint: the marker is a tinyint.
    prepared = session.prepare("SELECT * FROM %s WHERE pk = 2 AND c1 = 1 + ?" % t)
    assert [tuple(r) for r in session.execute(prepared, [1])] == [(2, 2, 2, 'test')]
    # A cast picks the operation.
    prepared = session.prepare("SELECT * FROM %s WHERE pk = (int) ? + 1 AND c1 = 2" % t)
    assert [tuple(r) for r in session.execute(prepared, [1])] == [(2, 2, 2, 'test')]
    for where in ["pk = ? + 1 AND c1 = 2", "pk = 2 AND c1 = 2 AND c2 = 1 * (? + 1)"]:
        with pytest.raises(InvalidRequest, match=r"Ambiguous '\+' operation with args \? and 1: use type hint "
                                                 r"to disambiguate, example '\(int\) \?'"):
            session.prepare("SELECT * FROM %s WHERE %s" % (t, where))


def test_inserts_and_updates_compute_their_values(session, table):
    t = table("(p int PRIMARY KEY, i int, b bigint, d double, m decimal, v varint, c text)")
    session.execute("INSERT INTO %s (p, i, b, d, m, v) VALUES (1, 2 * 3 + 1, 4294967296 * 2, 1.5 * 3, "
                    "1.5 + 1, 10 %% 4)" % t)
    assert rows(session, "SELECT i, b, d, m, v FROM %s WHERE p = 1" % t) == [(7, 8589934592, 4.5, Decimal("2.5"), 2)]
    session.execute("UPDATE %s SET i = -(1 + 1), d = 1 / 4.0 WHERE p = 1" % t)
    assert rows(session, "SELECT i, d FROM %s WHERE p = 1" % t) == [(-2, 0.25)]
    # A marker beside a literal is ambiguous for an int; cast, it is not.
    with pytest.raises(InvalidRequest, match="Ambiguous"):
        session.prepare("UPDATE %s SET i = ? * 2 WHERE p = 1" % t)
    prepared = session.prepare("UPDATE %s SET i = (int) ? * 2 WHERE p = 1" % t)
    assert prepared.column_metadata[0].type.typename == 'int'
    session.execute(prepared, [21])
    assert rows(session, "SELECT i FROM %s WHERE p = 1" % t) == [(42,)]
    # A null operand gives null.
    session.execute("UPDATE %s SET i = null + 1 WHERE p = 1" % t)
    assert rows(session, "SELECT i FROM %s WHERE p = 1" % t) == [(None,)]


def test_bad_operations_are_refused(session, table):
    t = table("(p int PRIMARY KEY, i int, c text)")
    with pytest.raises(FunctionFailure, match="/ by zero"):
        session.execute("INSERT INTO %s (p, i) VALUES (1, 1 / 0)" % t)
    with pytest.raises(InvalidRequest, match=r"cannot assign result of operation 1 \+ 1 to c \(type text\)"):
        session.execute("INSERT INTO %s (p, c) VALUES (1, 1 + 1)" % t)
    assert rows(session, "SELECT * FROM %s" % t) == []
