"""Native aggregates: sum() and avg() of floating-point values, and what may
be aggregated (cqlpy's aggregation_test)."""

import math
import struct

import pytest
from cassandra import InvalidRequest


def as_float(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def test_float_sums_are_compensated(session, table):
    # testSumPrecision: Kahan summation, as Cassandra's (Java's
    # DoubleSummaryStatistics): 0.1 + ... + 1.7 is 15.3, not 15.299999999999999.
    t = table("(k int PRIMARY KEY, f float, d double)")
    for i in range(1, 18):
        session.execute("INSERT INTO %s (k, f, d) VALUES (%d, %r, %r)" % (t, i, i / 10.0, i / 10.0))
    assert tuple(session.execute("SELECT sum(f), sum(d) FROM %s" % t).one()) == (as_float(15.3), 15.3)
    assert session.execute("SELECT avg(d) FROM %s" % t).one()[0] == 15.3 / 17


def test_infinite_and_nan_float_sums(session, table):
    # testInfinity / testNan: an infinite value gives an infinite sum and
    # average (compensation alone would make them NaN); NaN stays NaN.
    t = table("(k int PRIMARY KEY, d double)")
    insert = session.prepare("INSERT INTO %s (k, d) VALUES (?, ?)" % t)
    for i in range(1, 5):
        session.execute(insert, [i, float(i)])
    session.execute(insert, [5, -math.inf])
    assert tuple(session.execute("SELECT sum(d), avg(d) FROM %s" % t).one()) == (-math.inf, -math.inf)
    session.execute(insert, [6, math.nan])
    assert math.isnan(session.execute("SELECT sum(d) FROM %s" % t).one()[0])


def test_aggregate_of_an_aggregate_is_refused(session, table):
    # testInvalidCalls: an InvalidRequest, not a server error.
    t = table("(a int, b int, c int, PRIMARY KEY (a, b))")
    session.execute("INSERT INTO %s (a, b, c) VALUES (1, 1, 10)" % t)
    with pytest.raises(InvalidRequest, match="aggregate functions cannot be used as arguments of aggregate functions"):
        session.execute("SELECT max(sum(c)) FROM %s" % t)
