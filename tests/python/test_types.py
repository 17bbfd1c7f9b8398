"""Every native type: round trips (prepared and literal), functions, clustering order."""

import datetime
import random
import time
import uuid
from decimal import Decimal

import pytest

from cassandra import InvalidRequest
from cassandra.util import Date, Duration, Time, datetime_from_uuid1, uuid_from_time

NS = 1
US = 1000 * NS
MS = 1000 * US
S = 1000 * MS

BIG = 2 ** 200 + 1
PI50 = Decimal("3.14159265358979323846264338327950288419716939937510")
UUID4 = uuid.UUID("5f4dcc3b-5aa7-4c25-9a1e-0123456789ab")
TIMEUUID = uuid.UUID("2d6a3e1c-0f5a-11ef-9262-0242ac120002")
TS = datetime.datetime(2024, 2, 29, 13, 14, 15, 123000)
DURATION_NS = 5 * 3600 * S + 6 * 60 * S + 7 * S + 8 * MS + 9 * US + 10

# (cql type, python value bound by prepared statements, CQL literal, value read back)
ROUND_TRIPS = [
    ("ascii", "hello ascii ~!", "'hello ascii ~!'", "hello ascii ~!"),
    ("ascii", "it's", "'it''s'", "it's"),
    ("text", "h\u00e9llo w\u00f6rld \u2603 \u65e5\u672c \U0001f389", "'h\u00e9llo w\u00f6rld \u2603 \u65e5\u672c \U0001f389'",
     "h\u00e9llo w\u00f6rld \u2603 \u65e5\u672c \U0001f389"),
    ("text", "", "''", ""),
    ("varchar", "varchar value", "'varchar value'", "varchar value"),
    ("blob", b"\x00\x01\xfe\xff", "0x0001feff", b"\x00\x01\xfe\xff"),
    ("blob", b"", "0x", b""),
    ("boolean", True, "true", True),
    ("boolean", False, "FALSE", False),
    ("tinyint", -128, "-128", -128),
    ("tinyint", 127, "127", 127),
    ("smallint", -32768, "-32768", -32768),
    ("int", -2147483648, "-2147483648", -2147483648),
    ("int", 2147483647, "2147483647", 2147483647),
    ("bigint", 9223372036854775807, "9223372036854775807", 9223372036854775807),
    ("bigint", -9223372036854775808, "-9223372036854775808", -9223372036854775808),
    ("varint", BIG, str(BIG), BIG),
    ("varint", -(10 ** 50), "-" + "1" + "0" * 50, -(10 ** 50)),
    ("varint", 0, "0", 0),
    ("float", 3.5, "3.5", 3.5),
    ("float", -0.15625, "-0.15625", -0.15625),
    ("double", 2.718281828459045, "2.718281828459045", 2.718281828459045),
    ("double", 1.5e300, "1.5E300", 1.5e300),
    ("double", -1e-300, "-1e-300", -1e-300),
    ("decimal", PI50, str(PI50), PI50),
    ("decimal", Decimal("-1E-20"), "-1E-20", Decimal("-1E-20")),
    ("decimal", Decimal("12345678901234567890.5"), "12345678901234567890.5", Decimal("12345678901234567890.5")),
    ("uuid", UUID4, str(UUID4), UUID4),
    ("timeuuid", TIMEUUID, str(TIMEUUID), TIMEUUID),
    ("timestamp", TS, "'2024-02-29 13:14:15.123+0000'", TS),
    ("timestamp", TS, "'2024-02-29T15:14:15.123+0200'", TS),
    ("timestamp", TS, str(1709212455123), TS),
    ("timestamp", datetime.datetime(1960, 6, 1, 0, 0), "'1960-06-01 00:00:00+0000'", datetime.datetime(1960, 6, 1)),
    ("date", datetime.date(2024, 2, 29), "'2024-02-29'", datetime.date(2024, 2, 29)),
    ("date", datetime.date(1900, 1, 1), "'1900-01-01'", datetime.date(1900, 1, 1)),
    ("time", Time("13:14:15.123456789"), "'13:14:15.123456789'", Time("13:14:15.123456789")),
    ("time", datetime.time(0, 0, 1), "'00:00:01'", Time(1 * S)),
    ("duration", Duration(14, 25, DURATION_NS), "1y2mo3w4d5h6m7s8ms9us10ns", Duration(14, 25, DURATION_NS)),
    ("duration", Duration(0, 2, 3 * 3600 * S), "P2DT3H", Duration(0, 2, 3 * 3600 * S)),
    ("duration", Duration(-1, -2, -3 * MS), "-1mo2d3ms", Duration(-1, -2, -3 * MS)),
    ("duration", Duration(14, 3, 89 * 3600 * S), "P0001-02-03T89:00:00", Duration(14, 3, 89 * 3600 * S)),
    ("inet", "192.168.1.10", "'192.168.1.10'", "192.168.1.10"),
    ("inet", "::1", "'::1'", "::1"),
    ("inet", "2001:db8::8a2e:370:7334", "'2001:0db8:0000:0000:0000:8a2e:0370:7334'", "2001:db8::8a2e:370:7334"),
]

# Types the driver returns where they differ from the expected value's type.
EXPECTED_PY_TYPE = {datetime.date: Date}

NATIVE_TYPES = sorted({t for t, _, _, _ in ROUND_TRIPS})


def col(cql_type):
    return "v_" + cql_type


def case_id(case):
    return "%s-%s" % (case[0], case[2][:24])


@pytest.fixture(scope="module")
def types_table(session):
    cols = ", ".join("%s %s" % (col(t), t) for t in NATIVE_TYPES)
    session.execute("CREATE TABLE types_rt (k int PRIMARY KEY, %s)" % cols)
    return "types_rt"


@pytest.mark.parametrize("case", ROUND_TRIPS, ids=[case_id(c) for c in ROUND_TRIPS])
def test_round_trip_prepared(session, types_table, case):
    cql_type, value, _, expected = case
    k = ROUND_TRIPS.index(case)
    ins = session.prepare("INSERT INTO %s (k, %s) VALUES (?, ?)" % (types_table, col(cql_type)))
    session.execute(ins, (k, value))
    sel = session.prepare("SELECT %s FROM %s WHERE k = ?" % (col(cql_type), types_table))
    got = session.execute(sel, (k,)).one()[0]
    assert got == expected
    assert type(got) is EXPECTED_PY_TYPE.get(type(expected), type(expected))


@pytest.mark.parametrize("case", ROUND_TRIPS, ids=[case_id(c) for c in ROUND_TRIPS])
def test_round_trip_literal(session, types_table, case):
    cql_type, _, literal, expected = case
    k = 1000 + ROUND_TRIPS.index(case)
    session.execute("INSERT INTO %s (k, %s) VALUES (%d, %s)" % (types_table, col(cql_type), k, literal))
    got = session.execute("SELECT %s FROM %s WHERE k = %d" % (col(cql_type), types_table, k)).one()[0]
    assert got == expected


def test_nulls_for_every_type(session, types_table):
    cols = [col(t) for t in NATIVE_TYPES]
    ins = session.prepare("INSERT INTO %s (k, %s) VALUES (?, %s)" % (
        types_table, ", ".join(cols), ", ".join("?" for _ in cols)))
    session.execute(ins, [5000] + [None] * len(cols))
    row = session.execute("SELECT * FROM %s WHERE k = 5000" % types_table).one()
    assert row is not None
    assert all(getattr(row, c) is None for c in cols)
    assert set(row._fields) == set(["k"] + cols)


def test_result_metadata_types(session, types_table):
    sel = session.prepare("SELECT %s FROM %s WHERE k = ?" % (
        ", ".join(col(t) for t in NATIVE_TYPES), types_table))
    # result_metadata entries are (keyspace, table, name, type class).
    names = [c[2] for c in sel.result_metadata]
    assert names == [col(t) for t in NATIVE_TYPES]

    def norm(name):
        return "text" if name == "varchar" else name  # varchar is an alias of text

    for _, _, name, typ in sel.result_metadata:
        assert norm(typ.cql_parameterized_type()) == norm(name[2:])


def test_type_validation_errors(session, types_table):
    for cql_type, literal in [("int", "'abc'"), ("tinyint", "128"), ("smallint", "40000"),
                              ("int", "2147483648"), ("uuid", "'not-a-uuid'"),
                              ("timeuuid", str(UUID4)), ("ascii", "'caf\u00e9'"),
                              ("boolean", "1"), ("blob", "'abc'"), ("text", "42")]:
        with pytest.raises(InvalidRequest):
            session.execute("INSERT INTO %s (k, %s) VALUES (9000, %s)" % (types_table, col(cql_type), literal))


# --- functions ------------------------------------------------------------------

@pytest.fixture(scope="module")
def fn_table(session):
    session.execute("CREATE TABLE types_fn (k int PRIMARY KEY, tu timeuuid, u uuid, ts timestamp, "
                    "d date, b blob, i int, s text)")
    return "types_fn"


def test_now_and_uuid_functions(session, fn_table):
    before = time.time()
    session.execute("INSERT INTO %s (k, tu, u) VALUES (1, now(), uuid())" % fn_table)
    session.execute("INSERT INTO %s (k, tu, u) VALUES (2, now(), uuid())" % fn_table)
    r1 = session.execute("SELECT tu, u FROM %s WHERE k = 1" % fn_table).one()
    r2 = session.execute("SELECT tu, u FROM %s WHERE k = 2" % fn_table).one()
    assert r1.tu.version == 1 and r2.tu.version == 1
    assert r1.u.version == 4 and r2.u.version == 4
    assert r1.tu != r2.tu and r1.u != r2.u
    stamp = datetime_from_uuid1(r1.tu).replace(tzinfo=datetime.timezone.utc).timestamp()
    assert abs(stamp - before) < 60
    # Functions over a timeuuid column.
    row = session.execute("SELECT toTimestamp(tu) AS ts, toDate(tu) AS d, toUnixTimestamp(tu) AS ms "
                          "FROM %s WHERE k = 1" % fn_table).one()
    assert abs(row.ts.replace(tzinfo=datetime.timezone.utc).timestamp() - before) < 60
    assert abs(row.ms / 1000.0 - before) < 60
    assert abs((row.d.date() - datetime.datetime.utcfromtimestamp(before).date()).days) <= 1


def test_timestamp_and_date_functions(session, fn_table):
    before = time.time()
    session.execute("INSERT INTO %s (k, ts, d) VALUES (3, toTimestamp(now()), toDate(now()))" % fn_table)
    row = session.execute("SELECT ts, d FROM %s WHERE k = 3" % fn_table).one()
    assert abs(row.ts.replace(tzinfo=datetime.timezone.utc).timestamp() - before) < 60
    today = datetime.datetime.utcfromtimestamp(before).date()
    assert isinstance(row.d, Date)
    assert abs((row.d.date() - today).days) <= 1

    session.execute("INSERT INTO %s (k, ts) VALUES (4, currentTimestamp())" % fn_table)
    ts = session.execute("SELECT ts FROM %s WHERE k = 4" % fn_table).one().ts
    assert abs(ts.replace(tzinfo=datetime.timezone.utc).timestamp() - before) < 60


def test_a_bare_marker_of_an_overloaded_time_conversion_is_ambiguous(session, fn_table):
    """toDate(?) could take a timestamp or a timeuuid: PREPARE refuses it,
    as Cassandra and ScyllaDB do, and a cast says which."""
    with pytest.raises(InvalidRequest, match=r"Ambiguous call to function system.todate .*use type casts"):
        session.prepare("INSERT INTO %s (k, d) VALUES (6, toDate(?))" % fn_table)
    by_timestamp = session.prepare("INSERT INTO %s (k, d) VALUES (6, toDate((timestamp)?))" % fn_table)
    session.execute(by_timestamp, [2 * 86400000])
    assert session.execute("SELECT d FROM %s WHERE k = 6" % fn_table).one().d == Date(2)


def test_blob_conversion_functions(session, fn_table):
    session.execute("INSERT INTO %s (k, b, i, s) VALUES (5, textAsBlob('abc'), blobAsInt(0x00000002), "
                    "blobAsText(0x78797a))" % fn_table)
    row = session.execute("SELECT b, i, s, blobAsText(b) AS bt, intAsBlob(i) AS ib "
                          "FROM %s WHERE k = 5" % fn_table).one()
    assert row.b == b"abc"
    assert row.i == 2
    assert row.s == "xyz"
    assert row.bt == "abc"
    assert row.ib == b"\x00\x00\x00\x02"
    session.execute("INSERT INTO %s (k, b) VALUES (6, intAsBlob(1))" % fn_table)
    assert session.execute("SELECT b FROM %s WHERE k = 6" % fn_table).one().b == b"\x00\x00\x00\x01"
    row = session.execute("SELECT blobAsInt(b) AS n FROM %s WHERE k = 6" % fn_table).one()
    assert row.n == 1


# --- clustering order per type -----------------------------------------------------

def _uuid_v1(seconds):
    return uuid_from_time(seconds, node=0x0242ac120002, clock_seq=0x1262)


ORDERED = {
    "ascii": ["A", "AB", "B", "a", "b~"],
    "text": ["A", "Z", "a", "\u00e9", "\u65e5\u672c", "\U0001f389"],
    "varchar": ["0", "9", "a", "ab", "b"],
    "blob": [b"\x00", b"\x00\x00", b"\x01", b"\x7f", b"\x80", b"\xff"],
    "boolean": [False, True],
    "tinyint": [-128, -1, 0, 1, 127],
    "smallint": [-32768, -2, 0, 5, 32767],
    "int": [-2 ** 31, -256, -1, 0, 1, 256, 2 ** 31 - 1],
    "bigint": [-2 ** 63, -1, 0, 1, 2 ** 32, 2 ** 63 - 1],
    "varint": [-(2 ** 100), -1000, -256, -1, 0, 1, 255, 256, 2 ** 100],
    "float": [-1024.0, -1.5, 0.0, 0.25, 1.5, 1024.0],
    "double": [-1e300, -2.5, 0.0, 1e-300, 3.14, 1e300],
    "decimal": [Decimal("-100.5"), Decimal("-1"), Decimal("0"), Decimal("0.001"), Decimal("1.2"),
                Decimal("1E+3"), Decimal("123456789012345678901234567890")],
    # Cassandra orders uuid by version first, then (v1) by timestamp, then by unsigned bytes.
    "uuid": [_uuid_v1(1_000_000_000)] + sorted(
        [uuid.UUID("00000000-0000-4000-8000-000000000000"), uuid.UUID("7fffffff-ffff-4fff-bfff-ffffffffffff"),
         uuid.UUID("80000000-0000-4000-8000-000000000000"), uuid.UUID("ffffffff-ffff-4fff-bfff-ffffffffffff")]),
    "timeuuid": [_uuid_v1(t) for t in (1.0, 86400.0, 1_000_000_000.0, 1_700_000_000.5, 1_700_000_001.0)],
    "timestamp": [datetime.datetime(1960, 1, 1), datetime.datetime(1969, 12, 31, 23, 59, 59, 999000),
                  datetime.datetime(1970, 1, 1), datetime.datetime(2000, 1, 1, 0, 0, 0, 1000),
                  datetime.datetime(2024, 2, 29, 13, 14, 15, 123000)],
    "date": [datetime.date(1900, 1, 1), datetime.date(1969, 12, 31), datetime.date(1970, 1, 1),
             datetime.date(2024, 2, 29), datetime.date(9999, 12, 31)],
    "time": [Time(0), Time(1), Time("12:00:00"), Time("23:59:59.999999999")],
    "inet": ["1.2.3.4", "10.0.0.1", "127.0.0.1", "192.168.0.1", "255.255.255.255"],
}


@pytest.mark.parametrize("order", ["ASC", "DESC"])
@pytest.mark.parametrize("cql_type", sorted(ORDERED))
def test_clustering_order(session, table, cql_type, order):
    values = ORDERED[cql_type]
    t = table("(k int, c %s, v int, PRIMARY KEY (k, c))" % cql_type,
              options="CLUSTERING ORDER BY (c %s)" % order)
    ins = session.prepare("INSERT INTO %s (k, c, v) VALUES (?, ?, ?)" % t)
    shuffled = list(enumerate(values))
    random.Random(cql_type).shuffle(shuffled)
    for i, v in shuffled:
        session.execute(ins, (0, v, i))
    expected = list(range(len(values)))
    if order == "DESC":
        expected.reverse()
    rows = list(session.execute("SELECT c, v FROM %s WHERE k = 0" % t))
    assert [r.v for r in rows] == expected, [r.c for r in rows]
    assert [r.c for r in rows] == [values[i] for i in expected]
    # Reversed query order.
    rows = list(session.execute("SELECT v FROM %s WHERE k = 0 ORDER BY c %s" % (
        t, "DESC" if order == "ASC" else "ASC")))
    assert [r.v for r in rows] == expected[::-1]
    # A slice uses the type's order.
    lo, hi = values[1], values[-2]
    p = session.prepare("SELECT v FROM %s WHERE k = 0 AND c > ? AND c < ?" % t)
    got = sorted(r.v for r in session.execute(p, (lo, hi)))
    assert got == list(range(2, len(values) - 2))


def test_duration_not_allowed_in_primary_key(session):
    with pytest.raises(InvalidRequest):
        session.execute("CREATE TABLE types_bad_duration (k int, c duration, PRIMARY KEY (k, c))")
    with pytest.raises(InvalidRequest):
        session.execute("CREATE TABLE types_bad_duration2 (k duration PRIMARY KEY, v int)")


def test_tuple_from_a_string_literal(session, table):
    """A string literal for a tuple, as ScyllaDB's and Cassandra's
    `fromString` read it: `:` between fields, `@` a null field, `\\:` a
    colon, missing trailing fields null (TupleTypeTest.testTupleFromString)."""
    t = table("(k int, c int, t frozen<tuple<int, text>>, PRIMARY KEY (k, c))")
    for c, literal in enumerate(["0:0", "0:1", "1", "1:1\\:1", "@:1"]):
        session.execute("INSERT INTO %s (k, c, t) VALUES (0, %d, '%s')" % (t, c, literal))
    assert [r.t for r in session.execute("SELECT t FROM %s WHERE k = 0" % t)] == [
        (0, "0"), (0, "1"), (1, None), (1, "1:1"), (None, "1")]
    with pytest.raises(InvalidRequest, match="Invalid tuple literal: too many elements. "
                       "Type frozen<tuple<int, text>> expects 2 but got 3"):
        session.execute("INSERT INTO %s (k, c, t) VALUES (1, 0, '1:2:3')" % t)
    with pytest.raises(InvalidRequest, match="x"):
        session.execute("INSERT INTO %s (k, c, t) VALUES (1, 0, 'x:2')" % t)


def test_function_results_of_value_compatible_types(session, table):
    """A function's result fills a column of a type whose values it shares,
    as ScyllaDB's `is_value_compatible_with` allows: bigint and timestamp
    (both milliseconds), varint from either (TypeTest.testDateCompatibility)."""
    t = table("(a int, b timestamp, c bigint, d varint, PRIMARY KEY (a, b, c, d))")
    session.execute("INSERT INTO %s (a, b, c, d) VALUES (0, toUnixTimestamp(now()), toTimestamp(now()),"
                    " toTimestamp(now()))" % t)
    session.execute("INSERT INTO %s (a, b, c, d) VALUES (1, toUnixTimestamp(now()), 5,"
                    " blobAsBigint(0x0000000000000007))" % t)
    row = session.execute("SELECT * FROM %s WHERE a = 0 AND b <= toUnixTimestamp(now())" % t).one()
    assert row.c == row.d and abs(row.c - time.time() * 1000) < 60_000
    assert session.execute("SELECT d FROM %s WHERE a = 1" % t).one().d == 7
    # An int is no timestamp's value.
    t2 = table("(k int PRIMARY KEY, x int)")
    with pytest.raises(InvalidRequest, match="cannot assign result of function"):
        session.execute("INSERT INTO %s (k, x) VALUES (0, toTimestamp(now()))" % t2)
