"""Selectors as Cassandra 4+ and ScyllaDB take them: collection elements
and slices, functions of aggregates, function argument checks, and the
vector similarity functions."""
import math

import pytest
from cassandra import FunctionFailure, InvalidRequest
from cassandra.protocol import SyntaxException


@pytest.fixture
def coll(session, table):
    t = table("(p int, c int, m map<text, int>, s set<int>, l list<int>, fm frozen<map<int, text>>, "
              "PRIMARY KEY (p, c))")
    session.execute("INSERT INTO %s (p, c, m, s, l, fm) VALUES (1, 1, {'a': 1, 'b': 2, 'c': 3}, {1, 3, 5, 7}, "
                    "[10, 20, 30], {1: 'x', 2: 'y'})" % t)
    session.execute("INSERT INTO %s (p, c) VALUES (1, 2)" % t)
    return t


def one(session, query):
    return tuple(session.execute(query).one())


def test_elements_of_maps_sets_and_lists(session, coll):
    assert one(session, "SELECT m['b'], m['z'], s[3], s[4], l[1], l[7], fm[2] FROM %s WHERE p = 1 AND c = 1"
               % coll) == (2, None, 3, None, 20, None, 'y')
    # A row without the collection: null.
    assert one(session, "SELECT m['a'], s[1] FROM %s WHERE p = 1 AND c = 2" % coll) == (None, None)
    # A null subscript: null (ScyllaDB's answer; Cassandra refuses it).
    assert one(session, "SELECT m[null], s[null] FROM %s WHERE p = 1 AND c = 1" % coll) == (None, None)


def test_slices_of_maps_and_sets(session, coll):
    row = session.execute("SELECT m['a'..'b'] AS ab, m['b'..] AS b_on, s[3..5] AS mid, s[..3] AS low, "
                          "s[8..] AS none FROM %s WHERE p = 1 AND c = 1" % coll).one()
    assert dict(row.ab) == {'a': 1, 'b': 2}
    assert dict(row.b_on) == {'b': 2, 'c': 3}
    assert set(row.mid) == {3, 5} and set(row.low) == {1, 3}
    assert row.none is None


def test_bind_markers_as_subscripts(session, coll):
    # `m[?]`, `s[?]`, `l[?]` and slice bounds take each execution's values,
    # typed by the collection they index.
    prepared = session.prepare("SELECT m[?], s[?], l[?], m[?..?], s[..?] FROM %s WHERE p = 1 AND c = ?" % coll)
    assert len(prepared.column_metadata) == 7
    row = session.execute(prepared, ["b", 3, 1, "a", "b", 5, 1]).one()
    assert tuple(row[:3]) == (2, 3, 20)
    assert dict(row[3]) == {'a': 1, 'b': 2} and set(row[4]) == {1, 3, 5}
    row = session.execute(prepared, ["z", 4, 0, "c", "z", 1, 1]).one()
    assert tuple(row[:3]) == (None, None, 10)
    assert dict(row[3]) == {'c': 3} and set(row[4]) == {1}
    # A null key selects nothing, as a null literal does.
    assert tuple(session.execute(prepared, [None, None, None, "a", "a", 1, 1]).one()[:3]) == (None, None, None)


def test_element_selection_needs_a_collection(session, coll):
    with pytest.raises(InvalidRequest, match="is not a collection"):
        session.execute("SELECT c[1] FROM %s WHERE p = 1" % coll)
    with pytest.raises(InvalidRequest, match="Slice selection is only allowed on sets and maps"):
        session.execute("SELECT l[1..2] FROM %s WHERE p = 1" % coll)


def test_functions_of_aggregates(session, table):
    t = table("(p int, c int, ts timestamp, b int, PRIMARY KEY (p, c))")
    for c, ts in enumerate([86400000, 3 * 86400000, 2 * 86400000]):
        session.execute("INSERT INTO %s (p, c, ts, b) VALUES (1, %d, %d, %d)" % (t, c, ts, c))
    row = session.execute("SELECT todate(max(ts)), blobasint(intasblob(max(b))), count(*) FROM %s" % t).one()
    assert str(row[0]) == "1970-01-04" and row[1] == 2 and row[2] == 3
    # todate of an int is refused at PREPARE time, as by Cassandra.
    with pytest.raises(InvalidRequest, match="none of its type signatures match"):
        session.execute("SELECT todate(min(b)) FROM %s" % t)
    with pytest.raises(InvalidRequest, match="cannot be passed as argument 0 of function system.blobasint"):
        session.execute("SELECT blobasint(b) FROM %s" % t)


def test_count_streams_over_many_pages(session, table):
    t = table("(p int, c int, PRIMARY KEY (p, c))")
    insert = session.prepare("INSERT INTO %s (p, c) VALUES (?, ?)" % t)
    from cassandra.concurrent import execute_concurrent_with_args
    execute_concurrent_with_args(session, insert, [(p % 7, p) for p in range(25_000)], concurrency=64)
    assert session.execute("SELECT count(*), max(c), min(p) FROM %s" % t).one() == (25_000, 24_999, 0)


def test_vector_similarity(session, table):
    t = table("(p int PRIMARY KEY, v vector<float, 3>)")
    session.execute("INSERT INTO %s (p, v) VALUES (1, [1.0, 2.0, 3.0])" % t)
    row = session.execute("SELECT similarity_cosine(v, [2.0, 4.0, 6.0]), similarity_euclidean(v, [1, 2, 4]), "
                          "similarity_dot_product(v, [0.1, 0.1, 0.1]) FROM %s WHERE p = 1" % t).one()
    assert math.isclose(row[0], 1.0, rel_tol=1e-6)
    assert math.isclose(row[1], 0.5, rel_tol=1e-6)
    assert math.isclose(row[2], (1 + 0.6) / 2, rel_tol=1e-6)
    # A list literal is a float vector of its own size (Cassandra's
    # VectorFctsTest): a wrong size is told as differing dimensions.
    with pytest.raises(InvalidRequest, match="All arguments must have the same vector dimensions"):
        session.execute("SELECT similarity_cosine(v, [1.0, 2.0]) FROM %s WHERE p = 1" % t)
    with pytest.raises(InvalidRequest, match="all-zero vectors"):
        session.execute("SELECT similarity_cosine(v, [0, 0, 0]) FROM %s WHERE p = 1" % t)


def test_the_least_timestamp_is_out_of_bounds(session, table):
    t = table("(p int PRIMARY KEY, v int)")
    with pytest.raises(InvalidRequest, match=r"Out of bound timestamp, must be in \[-9223372036854775807, "):
        session.execute("INSERT INTO %s (p, v) VALUES (1, 1) USING TIMESTAMP -9223372036854775808" % t)
    session.execute("INSERT INTO %s (p, v) VALUES (1, 1) USING TIMESTAMP -9223372036854775807" % t)


def test_a_timestamp_outside_every_timeuuid_is_refused_not_wrapped(session, table):
    # ScyllaDB's test_mintimeuuid_extreme: a far timestamp has no timeuuid;
    # giving one that names another time is a wrong answer.
    t = table("(p int PRIMARY KEY, t timestamp)")
    for p, ts in enumerate([-2**63 + 123, -2**62, 2**62, 2**63 - 123]):
        session.execute("INSERT INTO %s (p, t) VALUES (%d, %d)" % (t, p, ts))
        for function in ("mintimeuuid", "maxtimeuuid"):
            with pytest.raises(InvalidRequest, match="outside the range of a timeuuid"):
                session.execute("SELECT tounixtimestamp(%s(t)) FROM %s WHERE p = %d" % (function, t, p))
    session.execute("INSERT INTO %s (p, t) VALUES (9, 1700000000123)" % t)
    row = session.execute("SELECT tounixtimestamp(mintimeuuid(t)), tounixtimestamp(maxtimeuuid(t)) "
                          "FROM %s WHERE p = 9" % t).one()
    assert tuple(row) == (1700000000123, 1700000000123)


def test_casts_between_numbers_times_and_text(session, table):
    t = table("(p int PRIMARY KEY, i int, d double, dec decimal, ts timestamp, dt date, u timeuuid)")
    session.execute("INSERT INTO %s (p, i, d, dec, ts, dt, u) VALUES (1, 300, 2.75, 12.34, "
                    "'2020-01-02 03:04:05', '2020-01-02', maxTimeuuid('2021-05-06 00:00:00+0000'))" % t)
    row = session.execute(
        "SELECT CAST(i AS tinyint), CAST(i AS double), CAST(d AS int), CAST(d AS text), CAST(dec AS int), "
        "CAST(dec AS double), CAST(i AS decimal), CAST(ts AS date), CAST(ts AS text), CAST(dt AS timestamp), "
        "CAST(u AS date), CAST(p AS ascii) FROM %s WHERE p = 1" % t).one()
    assert row[0] == 44 and row[1] == 300.0 and row[2] == 2 and row[3] == "2.75"
    assert row[4] == 12 and row[5] == 12.34 and str(row[6]) == "300"
    assert str(row[7]) == "2020-01-02" and row[8] == "2020-01-02T03:04:05.000Z"
    assert row[9].isoformat() == "2020-01-02T00:00:00" and str(row[10]) == "2021-05-06" and row[11] == "1"
    with pytest.raises(InvalidRequest, match="ts cannot be cast to int"):
        session.execute("SELECT CAST(ts AS int) FROM %s" % t)


def test_a_bind_marker_takes_the_type_of_its_function_parameter(session, table):
    t = table("(p int PRIMARY KEY, v int)")
    session.execute("INSERT INTO %s (p, v) VALUES (1, 5)" % t)
    prepared = session.prepare("SELECT v FROM %s WHERE p = blobAsInt(?)" % t)
    assert prepared.column_metadata and session.execute(prepared, [b"\x00\x00\x00\x01"]).one().v == 5


def test_arithmetic_in_the_selection(session, table):
    t = table("(p int PRIMARY KEY, i int, b bigint, d double, dec decimal, t text)")
    session.execute("INSERT INTO %s (p, i, b, d, dec, t) VALUES (1, 7, 10, 2.5, 1.25, 'x')" % t)
    session.execute("INSERT INTO %s (p, i) VALUES (2, 3)" % t)
    row = session.execute("SELECT i + b, i - 1, i * 2, i / 2, i %% 4, -i, i * d, dec + 1, dec * dec, i + 2 * 3 "
                          "FROM %s WHERE p = 1" % t).one()
    assert tuple(row)[:8] == (17, 6, 14, 3, 3, -7, 17.5, __import__("decimal").Decimal("2.25"))
    assert str(row[8]) == "1.5625" and row[9] == 13
    # A negation is named as written, and keeps its operand's type.
    result = session.execute("SELECT -i, -b, i - 1 FROM %s WHERE p = 1" % t)
    assert list(result.column_names) == ["-i", "-b", "i - 1"]
    assert [c.typename for c in result.column_types] == ["int", "bigint", "int"]
    # With a null operand the result is null; aggregates take part.
    assert session.execute("SELECT i + b FROM %s WHERE p = 2" % t).one()[0] is None
    assert tuple(session.execute("SELECT count(*) + 1, max(i) * 2 FROM %s" % t).one()) == (3, 14)
    # A failed operation is a FunctionFailure (Cassandra's
    # OperationExecutionException), not an invalid request.
    with pytest.raises(FunctionFailure, match=r"the operation 'int / int' failed: / by zero"):
        session.execute("SELECT i / 0 FROM %s WHERE p = 1" % t)
    with pytest.raises(InvalidRequest, match=r"the '\+' operation is not supported between t and 1"):
        session.execute("SELECT t + 1 FROM %s WHERE p = 1" % t)


def test_decimal_division_and_division_by_zero_of_each_type(session, table):
    """Decimal / as Cassandra's (32 significant digits, half up, trailing
    zeros stripped) and % as Java's BigDecimal; by zero, each type's Java
    error, and for float and double an infinity or NaN."""
    from decimal import Decimal
    t = table("(p int PRIMARY KEY, a decimal, b decimal, i int, v varint, f float, d double, s smallint)")
    session.execute("INSERT INTO %s (p, a, b, i, v, f, d, s) VALUES (1, 1, 3, 7, 7, 1.5, 1.5, 7)" % t)
    session.execute("INSERT INTO %s (p, a, b) VALUES (2, 7.5, 2)" % t)
    session.execute("INSERT INTO %s (p, a, b) VALUES (3, 100, 0.001)" % t)
    row = session.execute("SELECT a / b, a %% b, a / 2, i / a FROM %s WHERE p = 1" % t).one()
    assert tuple(row) == (Decimal("0.33333333333333333333333333333333"), Decimal("1"), Decimal("0.5"), Decimal("7"))
    row = session.execute("SELECT a / b, a %% b, b / a FROM %s WHERE p = 2" % t).one()
    assert tuple(row) == (Decimal("3.75"), Decimal("1.5"), Decimal("0.26666666666666666666666666666667"))
    assert str(session.execute("SELECT a / b FROM %s WHERE p = 3" % t).one()[0]) == "1E+5"
    row = session.execute("SELECT f / 0, d / 0, d %% 0 FROM %s WHERE p = 1" % t).one()
    assert row[0] == float("inf") and row[1] == float("inf") and row[2] != row[2]
    for selector, message in [("i / 0", "the operation 'int / int' failed: / by zero"),
                              ("i % 0", "the operation 'int % int' failed: / by zero"),
                              ("s / 0", "the operation 'smallint / smallint' failed: / by zero"),
                              ("v / 0", "the operation 'varint / varint' failed: BigInteger divide by zero"),
                              ("v % 0", "the operation 'varint % varint' failed: BigInteger divide by zero"),
                              ("a / 0", "the operation 'decimal / decimal' failed: BigInteger divide by zero"),
                              ("a % 0", "the operation 'decimal % decimal' failed: Division by zero")]:
        with pytest.raises(FunctionFailure) as e:
            session.execute("SELECT %s FROM %s WHERE p = 1" % (selector, t))
        assert message in str(e.value), (selector, str(e.value))


def test_decimal_sums_of_any_size_and_literals_past_a_32_bit_scale(session, table):
    """Decimal + and - are exact at any size (Cassandra 5 rounds to 10,000
    digits); a literal whose scale does not fit 32 bits is refused with
    Cassandra's text, not wrapped."""
    from decimal import Decimal
    t = table("(p int PRIMARY KEY, a decimal, b decimal)")
    big = "1" * 60
    session.execute("INSERT INTO %s (p, a, b) VALUES (1, %s, %s.5)" % (t, big, big))
    row = session.execute("SELECT a + b, a - b FROM %s WHERE p = 1" % t).one()
    assert tuple(row) == (Decimal("2" * 59 + "2.5"), Decimal("-0.5"))
    session.execute("INSERT INTO %s (p, a, b) VALUES (2, 1e1000, 1e-1000)" % t)
    total = session.execute("SELECT a + b FROM %s WHERE p = 2" % t).one()[0]
    assert total == Decimal("1" + "0" * 1000 + "." + "0" * 999 + "1")
    with pytest.raises(InvalidRequest, match="BigDecimal"):
        session.execute("INSERT INTO %s (p, a) VALUES (3, 1e2147483649)" % t)


def test_nan_infinity_and_cast_markers_in_selector_arithmetic(session, table):
    t = table("(p int PRIMARY KEY, a int, d double, s text)")
    session.execute("INSERT INTO %s (p, a, d, s) VALUES (1, 1, 1.5, 'x')" % t)
    row = session.execute("SELECT d + NaN, d - Infinity, a + (int) 1 FROM %s WHERE p = 1" % t).one()
    assert math.isnan(row[0]) and row[1] == float("-inf") and row[2] == 2
    # A cast types its marker.
    prepared = session.prepare("SELECT a + (int) ?, a * (tinyint) ? FROM %s WHERE p = 1" % t)
    assert tuple(session.execute(prepared, [1, 3]).one()) == (2, 3)


def test_writetime_and_ttl_of_collections_are_refused_as_by_scylladb(session, table):
    t = table("(p int PRIMARY KEY, m map<int, int>, l list<int>, fm frozen<map<int, int>>)")
    session.execute("INSERT INTO %s (p, m, l, fm) VALUES (1, {1: 2}, [3], {4: 5}) USING TIMESTAMP 1000 AND TTL 500"
                    % t)
    row = session.execute("SELECT writetime(fm), ttl(fm) FROM %s WHERE p = 1" % t).one()
    assert row[0] == 1000 and 0 < row[1] <= 500
    for selector, message in [("writetime(m)", "WRITETIME expects an atomic column, but m is a non-frozen collection"),
                              ("ttl(l)", "TTL expects an atomic column, but l is a non-frozen collection")]:
        with pytest.raises(InvalidRequest) as e:
            session.execute("SELECT %s FROM %s WHERE p = 1" % (selector, t))
        assert message in str(e.value), str(e.value)


def test_math_functions_keep_their_argument_type(session, table):
    """Cassandra 5's abs, exp, log, log10 and round, on each numeric type."""
    from decimal import Decimal
    t = table("(k int PRIMARY KEY, i int, b bigint, d double, f float, m decimal, v varint, s smallint)")
    session.execute("INSERT INTO %s (k, i, b, d, f, m, v, s) VALUES (1, -3, 1000, -2.5, 1.4, -12.34, -5, 2)" % t)
    row = session.execute("SELECT abs(i), log10(b), round(d), round(f), abs(m), round(m), abs(v), exp(s), "
                          "exp(i), log(b) FROM %s WHERE k = 1" % t).one()
    assert tuple(row) == (3, 3, -2.0, 1.0, Decimal("12.34"), Decimal("-12"), 5, 7, 0, 6)
    columns = session.execute("SELECT abs(i), abs(m), round(d) FROM %s WHERE k = 1" % t).column_types
    assert [c.typename for c in columns] == ["int", "decimal", "double"]
    with pytest.raises(InvalidRequest, match="none of its type signatures match"):
        session.execute("SELECT abs(textasblob('x')) FROM %s" % t)
    session.execute("INSERT INTO %s (k, i) VALUES (2, abs(-7))" % t)
    assert session.execute("SELECT i FROM %s WHERE k = 2" % t).one().i == 7


def test_count_of_a_column_is_named_like_other_aggregates(session, table):
    # COUNT(*) and COUNT(1) are `count`; COUNT(v) is `system.count(v)`.
    t = table("(p int PRIMARY KEY, v int)")
    session.execute("INSERT INTO %s (p, v) VALUES (1, 5)" % t)
    session.execute("INSERT INTO %s (p) VALUES (2)" % t)
    result = session.execute("SELECT COUNT(*), COUNT(1), COUNT(v), max(v) FROM %s" % t)
    assert list(result.column_names) == ["count", "count", "system.count(v)", "system.max(v)"]
    assert tuple(result.one()) == (2, 2, 1, 5)


def test_a_cast_to_the_value_s_own_type_is_dropped_name_and_all(session, table):
    t = table("(p int PRIMARY KEY, c counter)")
    session.execute("UPDATE %s SET c = c + 7 WHERE p = 1" % t)
    row = session.execute("SELECT CAST(p AS int), CAST(c AS counter), CAST(p AS bigint) FROM %s WHERE p = 1" % t).one()
    assert row._fields == ("p", "c", "cast_p_as_bigint") and tuple(row) == (1, 7, 1)
    with pytest.raises(InvalidRequest, match="c cannot be cast to blob"):
        session.execute("SELECT CAST(c AS blob) FROM %s" % t)


def test_writetime_and_ttl_of_a_field_or_an_element_are_checked(session, table):
    session.execute("CREATE TYPE IF NOT EXISTS wt_pair (a int, b int)")
    udt = "wt_pair"
    t = table("(p int PRIMARY KEY, v int, tu tuple<int, int>, l list<int>, fm frozen<map<int, int>>, "
              "fu frozen<%s>)" % udt)
    k = table("(pk frozen<map<int, int>> PRIMARY KEY)")
    for fn in ("WRITETIME", "TTL"):
        for selector, message in [
            ("v[3]", "Invalid element selection: v is of type int is not a collection"),
            ("tu[0]", " tu is of type"),
            ("v.a", "Invalid field selection: v of type int is not a user type"),
            ("tu.a", "tu of type .* is not a user type"),
            ("l[0]", fn + " on a subscript is only valid for non-frozen map or set columns"),
            ("fm[1]", fn + " on a subscript is only valid for non-frozen map or set columns"),
            ("fu.a", fn + " on a field selection is only valid for non-frozen UDT columns"),
        ]:
            with pytest.raises(InvalidRequest, match=message):
                session.execute("SELECT %s(%s) FROM %s" % (fn, selector, t))
        with pytest.raises(InvalidRequest, match="on PRIMARY KEY part pk"):
            session.execute("SELECT %s(pk[1]) FROM %s" % (fn, k))


def test_writetime_and_ttl_of_a_map_or_set_element(session, table):
    t = table("(p int PRIMARY KEY, m map<int, int>, s set<text>)")
    session.execute("INSERT INTO %s (p, m, s) VALUES (1, {1: 10, 2: 20}, {'a'}) USING TIMESTAMP 1000" % t)
    session.execute("UPDATE %s USING TIMESTAMP 2000 AND TTL 500 SET m = m + {2: 30, 3: 40}, s = s + {'b'} "
                    "WHERE p = 1" % t)
    row = session.execute("SELECT m, WRITETIME(m[1]), WRITETIME(m[2]), WRITETIME(m[9]), WRITETIME(m[null]), "
                          "WRITETIME(s['a']), WRITETIME(s['b']) FROM %s WHERE p = 1" % t).one()
    assert tuple(row) == ({1: 10, 2: 30, 3: 40}, 1000, 2000, None, None, 1000, 2000)
    assert row._fields[1] == "writetime_m_1"
    ttl = session.execute("SELECT TTL(m[1]), TTL(m[3]), TTL(s['a']), TTL(s['b']) FROM %s WHERE p = 1" % t).one()
    assert ttl[0] is None and 400 < ttl[1] <= 500 and ttl[2] is None and 400 < ttl[3] <= 500
    # A row without the collection: null; no row: no result.
    session.execute("INSERT INTO %s (p) VALUES (2)" % t)
    assert tuple(session.execute("SELECT WRITETIME(m[1]), TTL(s['a']) FROM %s WHERE p = 2" % t).one()) == (None, None)
    assert list(session.execute("SELECT WRITETIME(m[1]) FROM %s WHERE p = 3" % t)) == []


def test_a_constant_selector_has_the_type_it_says(session, table):
    """A cast names its constant's type, and a bare literal has the type
    ScyllaDB infers for it (text, double, a tuple of its elements' types);
    a user type literal or `{}` tells none."""
    t = table("(p int PRIMARY KEY)")
    session.execute("INSERT INTO %s (p) VALUES (1)" % t)
    result = session.execute("SELECT (text)'a const', (smallint)42, 'b', 1.5, (1, 'foo'), (list<int>)[1, 2] FROM %s" % t)
    assert tuple(result.one()) == ("a const", 42, "b", 1.5, (1, "foo"), [1, 2])
    assert [c.typename for c in result.column_types][:4] == ["varchar", "smallint", "varchar", "double"]
    for constant in ["{a: 4}", "{}"]:
        with pytest.raises(InvalidRequest, match="Cannot infer type for term"):
            session.execute("SELECT %s FROM %s" % (constant, t))


def test_a_cast_operand_keeps_its_type(session, table):
    """`b + (tinyint) 1`: the cast's type, not the other operand's (a
    counter here, which a tinyint is not assignable to)."""
    t = table("(k int PRIMARY KEY, b counter)")
    session.execute("UPDATE %s SET b = b + 2 WHERE k = 1" % t)
    row = session.execute("SELECT b + (tinyint) 1, b * (smallint) 2, (int) 3 - b FROM %s WHERE k = 1" % t).one()
    assert tuple(row) == (3, 4, 1)


def test_strings_concatenate_with_plus(session, table):
    t = table("(a text, b ascii, c text, PRIMARY KEY (a, b, c))")
    session.execute("INSERT INTO %s (a, b, c) VALUES ('जॉन', 'Doe', 'x')" % t)
    row = session.execute("SELECT a + ' ' + a, a + ' ' + b, b + ' ' + a, b + ' ' + b FROM %s" % t).one()
    assert tuple(row) == ("जॉन जॉन", "जॉन Doe", "Doe जॉन", "Doe Doe")
    assert tuple(session.execute("SELECT a + b, b + b FROM %s" % t).one()) == ("जॉनDoe", "DoeDoe")


def test_a_float_constant_is_a_double_beside_an_integer(session, table):
    import math
    t = table("(a int PRIMARY KEY, b boolean, f float)")
    session.execute("INSERT INTO %s (a, b, f) VALUES (1, true, 0.5)" % t)
    row = session.execute("SELECT a + 1.5, a + NaN, f + 1.5 FROM %s" % t).one()
    assert row[0] == 2.5 and math.isnan(row[1]) and row[2] == 2.0
    # An integer constant too big for the column's type is a bigint.
    assert session.execute("SELECT a + 3000000000 FROM %s" % t).one()[0] == 3000000001
    with pytest.raises(InvalidRequest, match="the '\\+' operation is not supported between b and NaN"):
        session.execute("SELECT b + NaN FROM %s" % t)
    # Two constants, one a bare marker: Cassandra's Ambiguous, at PREPARE.
    with pytest.raises(InvalidRequest, match=r"Ambiguous '\+' operation with args 1 and \?: use type hint"):
        session.prepare("SELECT 1 + ? FROM %s" % t)


def test_operation_column_names_keep_their_parentheses(session, table):
    t = table("(a int, b int, c int, d int, PRIMARY KEY (a, b))")
    session.execute("INSERT INTO %s (a, b, c, d) VALUES (2, 5, 25, 4)" % t)
    for text, value in [("a - c / b + d", 1), ("(c - b) / a + d", 14), ("(c - a) % d / a", 1),
                        ("-(c - a) % d / a + d", 3), ("(-c - a) % d / a + d", 3), ("c - (a - d)", 27)]:
        result = session.execute("SELECT %s FROM %s" % (text, t))
        assert result.column_names == [text]
        assert result.one()[0] == value


def test_literal_arguments_of_aggregates_have_their_own_types(session):
    # ScyllaDB infers a literal's type (cqlpy test_selector_literals.py).
    row = session.execute("SELECT count('abc') AS c, min('hello') AS mn, max('hello') AS mx, sum(5) AS s, "
                          "avg(5) AS a FROM system.local").one()
    assert (row.c, row.mn, row.mx, row.s, row.a) == (1, 'hello', 'hello', 5, 5)
    # A marker standing alone tells no type, prepared or not.
    for query in ("SELECT ? AS qm FROM system.local", "SELECT :bindvar AS bv FROM system.local"):
        with pytest.raises(InvalidRequest, match="infer type"):
            session.execute(query)


def test_a_marker_in_count_min_or_max_is_refused_as_untyped(session):
    for function in ("count", "min", "max"):
        message = f"{function}\\(\\) function is only valid when argument types are known"
        with pytest.raises(InvalidRequest, match=message):
            session.prepare(f"SELECT {function}(?) FROM system.local")
        # Unprepared too: the statement is typed before values are counted.
        with pytest.raises(InvalidRequest, match=message):
            session.execute(f"SELECT {function}(?) FROM system.local")


def test_set_intersection(session, table):
    t = table("(p int PRIMARY KEY, s1 set<int>, s2 set<int>, s3 set<tinyint>, s4 frozen<set<int>>)")
    session.execute(f"INSERT INTO {t} (p, s1, s2, s3, s4) VALUES (1, {{1, 2, 3}}, {{2, 3, 4}}, {{1}}, {{-1, 2}})")
    session.execute(f"INSERT INTO {t} (p, s1) VALUES (2, {{1}})")
    assert session.execute(f"SELECT set_intersection(s1, s2) FROM {t} WHERE p = 1").one()[0] == {2, 3}
    assert session.execute(f"SELECT set_intersection(s1, set_intersection(s2, s4)) FROM {t} WHERE p = 1").one()[0] == {2}
    assert session.execute(f"SELECT set_intersection(s1, {{3, 5}}) FROM {t} WHERE p = 1").one()[0] == {3}
    assert session.execute(f"SELECT set_intersection(s1, s2) FROM {t} WHERE p = 2").one()[0] is None
    for call, message in (("s1, s2, s3", "accepts 2 arguments"), ("s1, p", "both arguments are of set type"),
                          ("s1, s3", "both arguments are of the same set type")):
        with pytest.raises(InvalidRequest, match=message):
            session.execute(f"SELECT set_intersection({call}) FROM {t} WHERE p = 1")


def test_select_without_from_reads_one_row(session):
    """ScyllaDB's SELECT without FROM: constants, functions and aggregates
    over `system.one_row`."""
    assert session.execute("SELECT 1 AS one, 'hi' AS greeting").one() == (1, "hi")
    assert session.execute("SELECT toTimestamp(now()) AS ts").one().ts is not None
    assert session.execute("SELECT count(*) AS cnt, max(5) AS mx").one() == (1, 5)
    assert session.execute("SELECT JSON 1 AS one").one()[0] == '{"one": 1}'
    # Its one row has the empty key, which a restriction finds.
    assert session.execute("SELECT 1 WHERE \"system$dummy\" = ''").one()[0] == 1
    assert list(session.execute("SELECT 1 WHERE \"system$dummy\" = 'no'")) == []
    with pytest.raises(InvalidRequest, match="FROM"):
        session.execute("SELECT *")
    with pytest.raises(SyntaxException):
        session.execute("SELECT DISTINCT 1")
