"""JSON in CQL: SELECT JSON (every type, aliases, case-sensitive names,
aggregates, paging), INSERT JSON (round trips, DEFAULT NULL / UNSET, bind
marker, IF NOT EXISTS, USING, batches), toJson() and fromJson(), and the
errors, as Cassandra answers them.

Renderings follow Cassandra's `toJSONString`: numbers bare (floats as Java
prints them, NaN and infinities as null), timestamps
`yyyy-MM-dd HH:mm:ss.SSSZ` in UTC, blobs `"0x..."`, inet as Java's
`getHostAddress` (IPv6 never `::`-compressed), map keys always strings.
"""
import json
from decimal import Decimal

import pytest

from cassandra import FunctionFailure, InvalidRequest
from cassandra.query import BatchStatement, SimpleStatement


def json_rows(session, cql, *params):
    """The `[json]` texts of a SELECT JSON, after checking the one column."""
    rs = session.execute(cql, params or None)
    assert rs.column_names == ["[json]"]
    assert rs.column_types[0].typename == "varchar"
    return [row[0] for row in rs]


def json_one(session, cql, *params):
    rows = json_rows(session, cql, *params)
    assert len(rows) == 1, rows
    return rows[0]


# Every native type: (column, type, CQL literal, exact JSON Cassandra renders).
NATIVE = [
    ("a", "ascii", "'ascii ~!'", '"ascii ~!"'),
    ("b", "bigint", "-9223372036854775808", "-9223372036854775808"),
    ("bl", "blob", "0xcafe00", '"0xcafe00"'),
    ("bo", "boolean", "true", "true"),
    ("da", "date", "'2024-02-29'", '"2024-02-29"'),
    ("de", "decimal", "12345678901234567890.12345678901234567890", "12345678901234567890.12345678901234567890"),
    ("do", "double", "1.5E300", "1.5E300"),
    ("du", "duration", "1h30m", '"1h30m"'),
    ("f", "float", "2.5", "2.5"),
    ("i", "int", "-2147483648", "-2147483648"),
    ("in4", "inet", "'192.168.1.10'", '"192.168.1.10"'),
    ("in6", "inet", "'2001:db8::ff'", '"2001:db8:0:0:0:0:0:ff"'),
    ("s", "smallint", "-32768", "-32768"),
    ("te", "text", "'quote \" backslash \\ tab \t é ☃'", '"quote \\" backslash \\\\ tab \\t é ☃"'),
    ("ti", "time", "'13:14:15.123456789'", '"13:14:15.123456789"'),
    ("ts", "timestamp", "'2024-02-29 13:14:15.123+0000'", '"2024-02-29 13:14:15.123Z"'),
    ("tu", "timeuuid", "2d6a3e1c-0f5a-11ef-9262-0242ac120002", '"2d6a3e1c-0f5a-11ef-9262-0242ac120002"'),
    ("ty", "tinyint", "127", "127"),
    ("u", "uuid", "5f4dcc3b-5aa7-4c25-9a1e-0123456789ab", '"5f4dcc3b-5aa7-4c25-9a1e-0123456789ab"'),
    ("va", "varint", str(2 ** 200 + 1), str(2 ** 200 + 1)),
]


@pytest.fixture
def native_table(session, table):
    t = table("(k int PRIMARY KEY, %s)" % ", ".join("%s %s" % (c, ty) for c, ty, _, _ in NATIVE))
    session.execute("INSERT INTO %s (k, %s) VALUES (1, %s)"
                    % (t, ", ".join(c for c, _, _, _ in NATIVE), ", ".join(lit for _, _, lit, _ in NATIVE)))
    session.execute("INSERT INTO %s (k) VALUES (2)" % t)
    return t


def test_select_json_renders_every_native_type(session, native_table):
    text = json_one(session, "SELECT JSON k, %s FROM %s WHERE k = 1"
                    % (", ".join(c for c, _, _, _ in NATIVE), native_table))
    expected = "{\"k\": 1, %s}" % ", ".join('"%s": %s' % (c, js) for c, _, _, js in NATIVE)
    assert text == expected
    # The text is valid JSON, big numbers included.
    parsed = json.loads(text, parse_float=Decimal)
    assert parsed["va"] == 2 ** 200 + 1
    assert parsed["de"] == Decimal("12345678901234567890.12345678901234567890")


def test_select_json_star_and_nulls(session, native_table):
    parsed = json.loads(json_one(session, "SELECT JSON * FROM %s WHERE k = 2" % native_table))
    assert parsed == dict({c: None for c, _, _, _ in NATIVE}, k=2)
    rows = [json.loads(r) for r in json_rows(session, "SELECT JSON * FROM %s" % native_table)]
    assert sorted(r["k"] for r in rows) == [1, 2]


def test_float_specials_and_java_number_forms(session, table):
    t = table("(k int PRIMARY KEY, f float, d double, e double, g double)")
    session.execute("INSERT INTO %s (k, f, d, e, g) VALUES (1, NaN, -Infinity, 100, 0.0001)" % t)
    # JSON has no NaN or infinities: Cassandra writes null.
    assert json_one(session, "SELECT JSON f, d, e, g FROM %s" % t) == \
        '{"f": null, "d": null, "e": 100.0, "g": 1.0E-4}'


def test_select_json_collections_tuple_udt_vector(session, table):
    session.execute("CREATE TYPE IF NOT EXISTS json_addr (street text, \"Zip\" int)")
    t = table("(k int PRIMARY KEY, l list<int>, s set<text>, m map<text, int>, mi map<int, boolean>,"
              " ml map<frozen<list<int>>, text>, tu tuple<int, text, double>, ad frozen<json_addr>,"
              " al list<frozen<json_addr>>, v vector<float, 3>, e list<int>)")
    session.execute(
        "INSERT INTO %s (k, l, s, m, mi, ml, tu, ad, al, v) VALUES (1, [3, 1, 2], {'b', 'a'}, {'x': 1, 'y': 2},"
        " {2: true, 1: false}, {[1, 2]: 'p'}, (7, null, 0.5), {street: 'Main', \"Zip\": 12345},"
        " [{street: 'A'}], [1.5, 2, -3])" % t)
    text = json_one(session, "SELECT JSON l, s, m, mi, ml, tu, ad, al, v, e FROM %s WHERE k = 1" % t)
    assert text == (
        '{"l": [3, 1, 2], "s": ["a", "b"], "m": {"x": 1, "y": 2}, "mi": {"1": false, "2": true},'
        ' "ml": {"[1, 2]": "p"}, "tu": [7, null, 0.5], "ad": {"street": "Main", "\\"Zip\\"": 12345},'
        ' "al": [{"street": "A", "\\"Zip\\"": null}], "v": [1.5, 2.0, -3.0], "e": null}'
    )


def test_aliases_case_sensitive_names_and_functions(session, table):
    t = table("(k int PRIMARY KEY, \"Mixed\" int, v text)")
    session.execute("INSERT INTO %s (k, \"Mixed\", v) VALUES (1, 2, 'x')" % t)
    assert json_one(session, "SELECT JSON * FROM %s" % t) == '{"k": 1, "\\"Mixed\\"": 2, "v": "x"}'
    assert json_one(session, "SELECT JSON k AS key, v AS \"Val\", \"Mixed\" FROM %s" % t) == \
        '{"key": 1, "\\"Val\\"": "x", "\\"Mixed\\"": 2}'
    assert json_one(session, "SELECT JSON writetime(v) AS w, blobAsText(textAsBlob(v)) FROM %s" % t) \
        .endswith(', "system.blobastext(system.textasblob(v))": "x"}')


def test_select_json_aggregates_and_distinct(session, table):
    t = table("(k int, c int, v int, PRIMARY KEY (k, c))")
    for c in range(3):
        session.execute("INSERT INTO %s (k, c, v) VALUES (1, %d, %d)" % (t, c, c * 10))
    assert json_one(session, "SELECT JSON count(*) FROM %s" % t) == '{"count": 3}'
    assert json_one(session, "SELECT JSON max(v), count(*) AS n FROM %s" % t) == \
        '{"system.max(v)": 20, "n": 3}'
    assert json_rows(session, "SELECT JSON DISTINCT k FROM %s" % t) == ['{"k": 1}']
    assert json_rows(session, "SELECT JSON c FROM %s WHERE k = 1 ORDER BY c DESC LIMIT 2" % t) == \
        ['{"c": 2}', '{"c": 1}']


def test_select_json_pages(session, table):
    t = table("(k int, c int, v text, PRIMARY KEY (k, c))")
    insert = session.prepare("INSERT INTO %s (k, c, v) VALUES (?, ?, ?)" % t)
    for i in range(1000):
        session.execute(insert, (i % 7, i, "v%d" % i))
    rs = session.execute(SimpleStatement("SELECT JSON c, v FROM %s" % t, fetch_size=100))
    assert rs.has_more_pages
    assert len(rs.current_rows) == 100
    seen = [json.loads(row[0]) for row in rs]
    assert sorted(r["c"] for r in seen) == list(range(1000))
    assert all(r["v"] == "v%d" % r["c"] for r in seen)
    # A prepared SELECT JSON describes its one column and pages alike.
    prepared = session.prepare("SELECT JSON * FROM %s WHERE k = ?" % t)
    assert [c[2] for c in prepared.result_metadata] == ["[json]"]
    prepared.fetch_size = 50
    rows = list(session.execute(prepared, (3,)))
    assert len(rows) == len([i for i in range(1000) if i % 7 == 3])


def test_insert_json_round_trips_every_type(session, native_table, table):
    columns = ", ".join("%s %s" % (c, ty) for c, ty, _, _ in NATIVE)
    copy = table("(k int PRIMARY KEY, %s)" % columns)
    original = json_one(session, "SELECT JSON * FROM %s WHERE k = 1" % native_table)
    session.execute("INSERT INTO %s JSON '%s'" % (copy, original.replace("'", "''")))
    assert json_one(session, "SELECT JSON * FROM %s" % copy) == original
    # And the values are the ones a plain INSERT writes.
    names = ", ".join(c for c, _, _, _ in NATIVE)
    assert session.execute("SELECT %s FROM %s" % (names, copy)).one() == \
        session.execute("SELECT %s FROM %s WHERE k = 1" % (names, native_table)).one()


def test_insert_json_collections_and_other_input_forms(session, table):
    session.execute("CREATE TYPE IF NOT EXISTS json_pt (x int, \"Y\" int)")
    t = table("(k int PRIMARY KEY, l list<int>, s set<int>, m map<int, text>, tu tuple<int, text>,"
              " p frozen<json_pt>, v vector<int, 2>, b bigint, ts timestamp, bo boolean, d decimal)")
    doc = {"k": "1", "l": [2, 1], "s": [3, 1, 3], "m": {"2": "b", "1": "a"}, "tu": [1, None],
           "p": {"X": 1, "\"Y\"": 2}, "v": "[5, 6]", "b": "42", "ts": 1000, "bo": "TRUE",
           "d": 0.10}
    session.execute("INSERT INTO %s JSON %%s" % t, (json.dumps(doc),))
    assert json_one(session, "SELECT JSON * FROM %s" % t) == (
        '{"k": 1, "b": 42, "bo": true, "d": 0.1, "l": [2, 1], "m": {"1": "a", "2": "b"},'
        ' "p": {"x": 1, "\\"Y\\"": 2}, "s": [1, 3], "ts": "1970-01-01 00:00:01.000Z", "tu": [1, null],'
        ' "v": [5, 6]}')
    # Numbers keep every digit: no float rounding on the way in.
    session.execute("INSERT INTO %s JSON '{\"k\": 2, \"d\": 3.14159265358979323846264338327950288}'" % t)
    assert session.execute("SELECT d FROM %s WHERE k = 2" % t).one().d == \
        Decimal("3.14159265358979323846264338327950288")


def test_default_null_and_default_unset(session, table):
    t = table("(k int PRIMARY KEY, a int, b text)")
    session.execute("INSERT INTO %s (k, a, b) VALUES (1, 1, 'one')" % t)
    session.execute("INSERT INTO %s JSON '{\"k\": 1, \"a\": 2}' DEFAULT UNSET" % t)
    assert json_one(session, "SELECT JSON * FROM %s" % t) == '{"k": 1, "a": 2, "b": "one"}'
    session.execute("INSERT INTO %s JSON '{\"k\": 1, \"a\": 3}'" % t)
    assert json_one(session, "SELECT JSON * FROM %s" % t) == '{"k": 1, "a": 3, "b": null}'
    session.execute("INSERT INTO %s (k, a, b) VALUES (1, 1, 'one')" % t)
    session.execute("INSERT INTO %s JSON '{\"k\": 1, \"a\": 4}' DEFAULT NULL" % t)
    assert json_one(session, "SELECT JSON * FROM %s" % t) == '{"k": 1, "a": 4, "b": null}'
    # An explicit null is null whatever the default.
    session.execute("INSERT INTO %s JSON '{\"k\": 1, \"a\": null}' DEFAULT UNSET" % t)
    assert json_one(session, "SELECT JSON * FROM %s" % t) == '{"k": 1, "a": null, "b": null}'


def test_prepared_insert_json(session, table):
    t = table("(k int, c text, v frozen<map<text, int>>, PRIMARY KEY (k, c))")
    prepared = session.prepare("INSERT INTO %s JSON ? DEFAULT UNSET USING TTL ?" % t)
    assert [(c.name, c.type.typename) for c in prepared.column_metadata] == [("[json]", "varchar"), ("[ttl]", "int")]
    session.execute(prepared, ('{"k": 1, "c": "a", "v": {"x": 1}}', 1000))
    session.execute(prepared, ('{"k": 1, "c": "b"}', 1000))
    assert json_rows(session, "SELECT JSON * FROM %s" % t) == \
        ['{"k": 1, "c": "a", "v": {"x": 1}}', '{"k": 1, "c": "b", "v": null}']
    ttl = session.execute("SELECT ttl(v) FROM %s WHERE k = 1 AND c = 'a'" % t).one()[0]
    assert 0 < ttl <= 1000
    with pytest.raises(InvalidRequest, match="unrecognized column: nope"):
        session.execute(prepared, ('{"k": 1, "c": "a", "nope": 1}', 10))


def test_insert_json_if_not_exists_and_batch(session, table):
    t = table("(k int PRIMARY KEY, v int)")
    assert session.execute("INSERT INTO %s JSON '{\"k\": 1, \"v\": 1}' IF NOT EXISTS" % t).one()[0] is True
    row = session.execute("INSERT INTO %s JSON '{\"k\": 1, \"v\": 2}' IF NOT EXISTS" % t).one()
    assert row[0] is False and row.v == 1
    session.execute("BEGIN BATCH INSERT INTO %s JSON '{\"k\": 2, \"v\": 2}';"
                    " INSERT INTO %s (k, v) VALUES (3, 3); APPLY BATCH" % (t, t))
    # Kept referenced: the driver finds a prepared statement to re-prepare
    # (on a shard that has not seen it) through a weak reference.
    prepared = session.prepare("INSERT INTO %s JSON ?" % t)
    batch = BatchStatement()
    batch.add(prepared, ('{"k": 4, "v": 4}',))
    session.execute(batch)
    assert sorted(json.loads(r)["k"] for r in json_rows(session, "SELECT JSON k FROM %s" % t)) == [1, 2, 3, 4]


def test_to_json_and_from_json(session, table):
    t = table("(k int PRIMARY KEY, m map<text, frozen<list<int>>>, ts timestamp, v int)")
    session.execute("INSERT INTO %s (k, m, ts, v) VALUES (1, fromJson('{\"a\": [1, 2]}'),"
                    " fromJson('\"2024-01-02 03:04:05.678Z\"'), fromJson('7'))" % t)
    row = session.execute("SELECT k, toJson(m), toJson(ts), toJson(v) FROM %s" % t).one()
    assert list(row) == [1, '{"a": [1, 2]}', '"2024-01-02 03:04:05.678Z"', "7"]
    rs = session.execute("SELECT toJson(v) AS j, toJson(k) FROM %s" % t)
    assert rs.column_names == ["j", "system.tojson(k)"]
    session.execute("UPDATE %s SET v = fromJson('\"8\"') WHERE k = fromJson('1')" % t)
    assert session.execute("SELECT v FROM %s WHERE k = fromJson(%%s)" % t, ("1",)).one().v == 8
    prepared = session.prepare("UPDATE %s SET v = fromJson(?) WHERE k = 1" % t)
    assert prepared.column_metadata[0].type.typename == "varchar"
    session.execute(prepared, ("null",))
    assert session.execute("SELECT v FROM %s WHERE k = 1" % t).one().v is None
    with pytest.raises(InvalidRequest, match="toJson"):
        session.execute("INSERT INTO %s (k, v) VALUES (2, toJson(1))" % t)
    # A null renders as JSON's null, as text (Cassandra's toJson(null)).
    assert session.execute("SELECT toJson(v) FROM %s WHERE k = 1" % t).one()[0] == "null"
    with pytest.raises(InvalidRequest, match="fromJson\\(\\) cannot be used in the selection clause"):
        session.execute("SELECT fromJson(v) FROM %s" % t)


@pytest.mark.parametrize("doc, message", [
    ('{"v": 1}', "Invalid null value in condition for column k"),
    ('{"k": 1, "nope": 2}', "JSON values map contains unrecognized column: nope"),
    ('{"k": 1, "v": }', "Could not decode JSON string"),
    ('[1, 2]', "JSON object"),
    ('{"k": 1, "v": "abc"}', "Error decoding JSON value for v"),
    ('{"k": 1, "v": 1.5}', "Error decoding JSON value for v"),
    ('{"k": 1, "l": {"a": 1}}', "Error decoding JSON value for l"),
    ('{"k": 1, "l": [1, null]}', "null"),
    ('{"k": 1, "b": "cafe"}', "0x"),
    ('{"K": 1, "\\"V\\"": 2}', "unrecognized column: V"),
])
def test_insert_json_errors(session, table, doc, message):
    t = table("(k int PRIMARY KEY, v int, l list<int>, b blob)")
    with pytest.raises(InvalidRequest, match=message):
        session.execute("INSERT INTO %s JSON %%s" % t, (doc,))


def test_insert_json_missing_key_with_default_unset(session, table):
    t = table("(k int, c int, v int, PRIMARY KEY (k, c))")
    with pytest.raises(InvalidRequest, match="c"):
        session.execute("INSERT INTO %s JSON '{\"k\": 1, \"v\": 1}' DEFAULT UNSET" % t)
    with pytest.raises(InvalidRequest, match="k"):
        session.execute("INSERT INTO %s JSON '{\"c\": 1}' DEFAULT UNSET" % t)


@pytest.mark.parametrize("column, text", [
    ("v", "dog"),               # not JSON
    ("v", '"dog"'),             # a string that is no number
    ("v", "1.2"),               # not whole
    ("v", "2147483648"),        # int overflow
    ("b", "9223372036854775808"),  # bigint overflow
    ("v", '""'),                # the empty string is no int
    ("a", '"שלום"'),            # not ASCII
    ("a", "3"),                 # a number for ascii
    ("m", "{17: 3}"),           # a map key must be a string
    ("l", '["a", null]'),       # no null inside a list
])
def test_from_json_failures_are_function_failures(session, table, column, text):
    """A fromJson() whose JSON is no value of its receiver's type fails the
    function (FunctionFailure, ScyllaDB's `function_execution_exception`),
    prepared or not; the statement itself was valid."""
    t = table("(k int PRIMARY KEY, v int, b bigint, a ascii, m map<int, int>, l list<text>)")
    with pytest.raises(FunctionFailure, match="(?i)execution of fromjson failed"):
        session.execute("INSERT INTO %s (k, %s) VALUES (1, fromJson('%s'))" % (t, column, text.replace("'", "''")))
    prepared = session.prepare("INSERT INTO %s (k, %s) VALUES (?, fromJson(?))" % (t, column))
    with pytest.raises(FunctionFailure, match="(?i)execution of fromjson failed"):
        session.execute(prepared, (1, text))
    assert session.execute("SELECT * FROM %s" % t).one() is None


def test_from_json_whole_numbers_in_scientific_notation(session, table):
    """A JSON number in scientific notation (or with a zero fraction) that is
    whole fills an integer column, as ScyllaDB reads it (its issue #10100)."""
    t = table("(k int PRIMARY KEY, v int, b bigint)")
    prepared = session.prepare("INSERT INTO %s (k, v, b) VALUES (?, fromJson(?), fromJson(?))" % t)
    session.execute(prepared, (1, "1e6", "1.23456789E+9"))
    session.execute("INSERT INTO %s (k, v, b) VALUES (2, fromJson('12.50e1'), fromJson('-4.0'))" % t)
    session.execute(prepared, (3, "5000e-3", "115292150460684697.5e1"))
    assert sorted(session.execute("SELECT k, v, b FROM %s" % t)) == [
        (1, 1000000, 1234567890), (2, 125, -4), (3, 5, 1152921504606846975)]
    with pytest.raises(FunctionFailure):
        session.execute(prepared, (4, "1.5e0", "1"))
    with pytest.raises(FunctionFailure):
        session.execute(prepared, (4, "1e10", "1"))


def test_select_json_of_empty_values(session, table):
    """An empty blob renders as "0x" in SELECT JSON as in toJson(), empty
    strings as "" (Cassandra's JsonTest)."""
    t = table("(k int PRIMARY KEY, s text, a ascii, bl blob)")
    session.execute("INSERT INTO %s JSON '{\"k\": 0, \"bl\": \"0x\", \"s\": \"\", \"a\": \"\"}'" % t)
    assert json_one(session, "SELECT JSON * FROM %s" % t) == '{"k": 0, "a": "", "bl": "0x", "s": ""}'
    assert session.execute("SELECT toJson(bl) FROM %s" % t).one()[0] == '"0x"'
