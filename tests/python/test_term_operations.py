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


def test_timestamps_and_dates_move_by_durations(session, table):
    from datetime import datetime
    from cassandra.util import Date
    t = table("(pk int, time timestamp, v int, PRIMARY KEY (pk, time))")
    for v, minute in enumerate([10, 14, 15, 21, 22]):
        session.execute("INSERT INTO %s (pk, time, v) VALUES (1, '2016-09-27 16:%02d:00+0000', %d)" % (t, minute, v))
    at = datetime(2016, 9, 27, 16, 20, 0)
    assert [r.v for r in session.execute(session.prepare("SELECT v FROM %s WHERE pk = 1 AND time >= ? - 5m" % t),
                                         [at])] == [2, 3, 4]
    assert [r.v for r in session.execute(session.prepare("SELECT v FROM %s WHERE pk = 1 AND time >= ? + 1m" % t),
                                         [at])] == [3, 4]
    # A selection moves each row's value; '%' and friends take no duration.
    assert [r[0] for r in session.execute("SELECT time - 10m FROM %s WHERE pk = 1 LIMIT 1" % t)] == \
        [datetime(2016, 9, 27, 16, 0, 0)]
    with pytest.raises(InvalidRequest, match="the '%' operation is not supported between time and 10m"):
        session.execute("SELECT time %% 10m FROM %s WHERE pk = 1" % t)
    with pytest.raises(FunctionFailure, match="the operation 'timestamp - duration' failed: The duration must "
                                              "have a millisecond precision. Was: 10us"):
        session.execute(session.prepare("SELECT * FROM %s WHERE pk = 1 AND time > ? - 10us" % t), [at])
    d = table("(pk int, day date, PRIMARY KEY (pk, day))")
    for day in ["2016-09-29", "2016-09-30", "2016-10-04"]:
        session.execute("INSERT INTO %s (pk, day) VALUES (1, '%s')" % (d, day))
    assert [str(r.day) for r in session.execute(session.prepare("SELECT day FROM %s WHERE pk = 1 AND day > ? - 5d" % d),
                                                [Date("2016-10-04")])] == ["2016-09-30", "2016-10-04"]
    # Months move the calendar; the day is clamped to the month's last.
    assert [str(r[0]) for r in session.execute("SELECT day + 1mo FROM %s WHERE pk = 1 LIMIT 1" % d)] == ["2016-10-29"]
    with pytest.raises(FunctionFailure, match="the operation 'date - duration' failed: The duration must have a "
                                              "day precision. Was: 10m"):
        session.execute(session.prepare("SELECT * FROM %s WHERE pk = 1 AND day > ? - 10m" % d), [Date("2016-10-04")])


def test_cast_where_a_value_is_expected(session, table):
    t = table("(k int PRIMARY KEY, v int, s text)")
    session.execute("INSERT INTO %s (k, v) VALUES (1, CAST(1.3 AS int))" % t)
    session.execute("INSERT INTO %s (k, v) VALUES (2, CAST(CAST(CAST(2.3 AS int) AS float) AS int))" % t)
    session.execute(session.prepare("INSERT INTO %s (k, v) VALUES (3, CAST((float) ? AS int))" % t), [3.4])
    session.execute("UPDATE %s SET v = (int) CAST(4.9 AS int), s = CAST(12 AS text) WHERE k = 4" % t)
    assert sorted(rows(session, "SELECT k, v, s FROM %s" % t)) == [(1, 1, None), (2, 2, None), (3, 3, None),
                                                                  (4, 4, '12')]
    assert rows(session, "SELECT v FROM %s WHERE k = CAST(2.7 AS int)" % t) == [(2,)]
    session.execute("DELETE FROM %s WHERE k = CAST(1.1 AS int)" % t)
    assert rows(session, "SELECT v FROM %s WHERE k = 1" % t) == []
    # A marker tells no type: Cassandra's text, at PREPARE.
    with pytest.raises(InvalidRequest, match="Ambiguous call to function system.castAsInt"):
        session.prepare("SELECT v FROM %s WHERE k = CAST(? AS int)" % t)
    with pytest.raises(InvalidRequest, match=r"cannot assign result of function system.castAsText \(type text\) "
                                             r"to v \(type int\)"):
        session.execute("UPDATE %s SET v = CAST(1 AS text) WHERE k = 1" % t)
