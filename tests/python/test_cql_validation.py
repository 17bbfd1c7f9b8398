"""Statements applications get wrong, refused with ScyllaDB's error class and text.

Each check is one ScyllaDB (or Cassandra) refusal Shoal once let through or
worded differently; the statements come from ScyllaDB's cqlpy suite.
"""

import re

import pytest

from cassandra import InvalidRequest
from cassandra.protocol import ConfigurationException, SyntaxException
from cassandra.query import UNSET_VALUE


def assert_refused(run, statement, message):
    """`run(statement)` fails with InvalidRequest whose text holds `message` (taken literally)."""
    with pytest.raises(InvalidRequest) as ei:
        run(statement)
    assert message in str(ei.value)


# --- restrictions (SELECT WHERE) ---------------------------------------------

@pytest.mark.parametrize("column_type, literal, holder", [
    ("duration", "1s", "duration columns"),
    ("frozen<list<duration>>", "[1s]", "collections containing durations"),
    ("frozen<map<int, duration>>", "{1: 1s}", "collections containing durations"),
    ("tuple<int, duration>", "(1, 1s)", "tuples containing durations"),
])
def test_durations_have_no_order(session, table, column_type, literal, holder):
    t = table("(k int PRIMARY KEY, d %s)" % column_type)
    session.execute("INSERT INTO %s (k, d) VALUES (0, %s)" % (t, literal))
    assert len(list(session.execute("SELECT * FROM %s WHERE d = %s ALLOW FILTERING" % (t, literal)))) == 1
    for op in [">", ">=", "<", "<="]:
        with pytest.raises(InvalidRequest, match="Slice restrictions are not supported on %s" % holder):
            session.execute("SELECT * FROM %s WHERE d %s %s ALLOW FILTERING" % (t, op, literal))


def test_map_entry_of_a_frozen_map_is_refused(session, table):
    t = table("(k int PRIMARY KEY, e frozen<map<int, int>>)")
    with pytest.raises(InvalidRequest, match="Map-entry equality predicates on frozen map column e are not supported"):
        session.execute("SELECT * FROM %s WHERE e[1] = 6 ALLOW FILTERING" % t)


def test_a_counter_compared_with_null_is_refused(session, table):
    t = table("(k int PRIMARY KEY, a counter, b counter)")
    session.execute("UPDATE %s SET a = a + 1 WHERE k = 1" % t)
    assert list(session.execute("SELECT k FROM %s WHERE b = 1 ALLOW FILTERING" % t)) == []
    with pytest.raises(InvalidRequest, match="Invalid null value for counter increment/decrement"):
        session.execute("SELECT * FROM %s WHERE b = null ALLOW FILTERING" % t)


def test_clustering_restrictions_without_allow_filtering_say_why(session, table):
    t = table("(a int, b int, c int, d int, PRIMARY KEY (a, b, c, d))")
    with pytest.raises(InvalidRequest, match=r'Clustering column "d" cannot be restricted \(preceding column "c" '
                                             r'is restricted by a non-EQ relation\)'):
        session.execute("SELECT * FROM %s WHERE a = 11 AND b = 12 AND c > 13 AND d = 14" % t)
    with pytest.raises(InvalidRequest, match='PRIMARY KEY column "d" cannot be restricted as preceding column "c" '
                                             'is not restricted'):
        session.execute("SELECT * FROM %s WHERE a = 11 AND b = 12 AND d = 14" % t)
    assert list(session.execute("SELECT * FROM %s WHERE a = 11 AND b = 12 AND c > 13 AND d = 14 ALLOW FILTERING" % t)) == []
    f = table("(a int, b int, c frozen<list<int>>, d int, PRIMARY KEY (a, b, c))")
    with pytest.raises(InvalidRequest, match="CONTAINS relation"):
        session.execute("SELECT * FROM %s WHERE a = 21 AND c CONTAINS 2" % f)
    with pytest.raises(InvalidRequest, match=r'Clustering column "c" cannot be restricted \(preceding column "b"'):
        session.execute("SELECT * FROM %s WHERE b > 20 AND c CONTAINS 2" % f)


def test_an_index_on_a_clustering_column_past_a_slice_needs_filtering(session, table):
    t = table("(a text, b int, c text, d int, PRIMARY KEY (a, b, c))")
    session.execute("CREATE INDEX ON %s (c)" % t)
    session.execute("INSERT INTO %s (a, b, c, d) VALUES ('a', 1, 'b', 2)" % t)
    with pytest.raises(InvalidRequest, match="ALLOW FILTERING"):
        session.execute("SELECT * FROM %s WHERE a = 'a' AND b > 0 AND c = 'b'" % t)
    rows = session.execute("SELECT d FROM %s WHERE a = 'a' AND b > 0 AND c = 'b' ALLOW FILTERING" % t)
    assert [r.d for r in rows] == [2]


def test_token_arguments_are_checked(session, table):
    t = table("(k1 uuid, k2 text, PRIMARY KEY ((k1, k2)))")
    with pytest.raises(InvalidRequest, match="Type error: k2 cannot be passed as argument 0 of function system.token "
                                             "of type uuid"):
        session.execute("SELECT token(k2, k1) FROM %s" % t)
    with pytest.raises(InvalidRequest, match="Invalid number of arguments in call to function system.token: "
                                             "2 required but 1 provided"):
        session.execute("SELECT token(k1) FROM %s" % t)


def test_order_by(session, table):
    t = table("(a int, b int, c int, d int, PRIMARY KEY (a, b, c))")
    for b in range(2):
        for c in range(3):
            session.execute("INSERT INTO %s (a, b, c, d) VALUES (0, %d, %d, %d)" % (t, b, c, 3 * b + c))
    for order in ["d DESC", "b ASC, c ASC, d ASC"]:
        with pytest.raises(InvalidRequest, match="Order by is currently only supported on the clustered columns of "
                                                 "the PRIMARY KEY, got d"):
            session.execute("SELECT * FROM %s WHERE a = 0 ORDER BY %s" % (t, order))
    # A column restricted to one value may be skipped (CASSANDRA-10271).
    rows = session.execute("SELECT c FROM %s WHERE a = 0 AND b = 0 ORDER BY c DESC" % t)
    assert [r.c for r in rows] == [2, 1, 0]
    rows = session.execute("SELECT c FROM %s WHERE a = 0 AND (b, c) = (1, 1) ORDER BY c DESC" % t)
    assert [r.c for r in rows] == [1]
    with pytest.raises(InvalidRequest, match="rder by"):
        session.execute("SELECT * FROM %s WHERE a = 0 AND b < 1 ORDER BY c DESC" % t)


# --- writes ------------------------------------------------------------------

def test_element_operations_on_frozen_collections_are_refused_at_prepare(session, table):
    t = table("(k int PRIMARY KEY, l frozen<list<int>>, m frozen<map<int, int>>, s frozen<set<int>>, "
              "f frozen<list<int>>)")
    for cql, message in [
        ("UPDATE %s SET l[?] = ? WHERE k = ?", "Invalid operation (l[?] = ?) for frozen collection column l"),
        ("UPDATE %s SET l = l + ? WHERE k = ?", "Invalid operation (l = l + ?) for frozen collection column l"),
        ("UPDATE %s SET s = s - ? WHERE k = ?", "Invalid operation (s = s - ?) for frozen collection column s"),
        ("UPDATE %s SET m[?] = ? WHERE k = ?", "Invalid operation (m[?] = ?) for frozen collection column m"),
        ("DELETE l[?] FROM %s WHERE k = ?", "Invalid deletion operation for frozen collection column l"),
        ("DELETE m[?] FROM %s WHERE k = ?", "Invalid deletion operation for frozen collection column m"),
        ("SELECT * FROM %s WHERE f CONTAINS KEY ? ALLOW FILTERING", "Cannot use CONTAINS KEY on non-map column f"),
    ]:
        assert_refused(session.prepare, cql % t, message)
        # Unprepared, the same refusal.
        assert_refused(session.execute, (cql % t).replace("?", "1"), message.replace("?", "1"))


def test_unset_inside_a_tuple_or_user_type_literal_is_refused(session, table, keyspace):
    session.execute("CREATE TYPE IF NOT EXISTS xy (x int, y text)")
    t = table("(k int PRIMARY KEY, t tuple<int, text, double>, u frozen<xy>)")
    with pytest.raises(InvalidRequest, match="unset"):
        session.execute(session.prepare("INSERT INTO %s (k, t) VALUES (0, (3, ?, 2.1))" % t), [UNSET_VALUE])
    with pytest.raises(InvalidRequest, match="unset"):
        session.execute(session.prepare("INSERT INTO %s (k, u) VALUES (0, {x: ?, y: ?})" % t), [1, UNSET_VALUE])


def test_tuple_literal_lengths(session, table):
    t = table("(k int PRIMARY KEY, t frozen<tuple<int, text, double>>, n frozen<tuple<int, tuple<int, text, double>>>)")
    with pytest.raises(InvalidRequest, match=r"Invalid tuple literal for t: too many elements. "
                                             r"Type frozen<tuple<int, text, double>> expects 3 but got 4"):
        session.execute("INSERT INTO %s (k, t) VALUES (0, (2, 'foo', 3.1, 'bar'))" % t)
    with pytest.raises(InvalidRequest, match=r"Invalid tuple literal for n: component 1 is not of type "
                                             r"frozen<tuple<int, text, double>>"):
        session.execute("INSERT INTO %s (k, n) VALUES (0, (1, (1, '1', 1.0, 1)))" % t)


def test_batches(session, table):
    c = table("(k int PRIMARY KEY, v counter)")
    with pytest.raises(InvalidRequest, match="Cannot provide custom timestamp for counter BATCH"):
        session.execute("BEGIN COUNTER BATCH USING TIMESTAMP 3 UPDATE %s SET v = v + 1 WHERE k = 0; APPLY BATCH" % c)
    t = table("(a int, b int, c int, PRIMARY KEY (a, b))")
    for in_clause in ["()", "(1, 2)"]:
        for statement, what in [("UPDATE %s SET c = 200 WHERE a = 1 AND b IN %s IF c = 1", "updates"),
                                ("DELETE FROM %s WHERE a = 1 AND b IN %s IF c = 1", "deletions")]:
            with pytest.raises(InvalidRequest, match="IN on the clustering key columns is not supported with "
                                                     "conditional " + what):
                session.execute("BEGIN BATCH UPDATE %s SET c = 100 WHERE a = 1 AND b = 1 IF c = 1; %s; APPLY BATCH"
                                % (t, statement % (t, in_clause)))
        with pytest.raises(InvalidRequest, match="IN on the partition key is not supported with conditional updates"):
            session.execute("BEGIN BATCH UPDATE %s SET c = 100 WHERE a IN %s AND b = 1 IF c = 1; APPLY BATCH"
                            % (t, in_clause))


# --- schema statements -------------------------------------------------------

def test_trailing_comma_in_definitions(session, tname):
    session.execute("CREATE TABLE %s (k int, c int, PRIMARY KEY (k),)" % tname)
    session.execute("CREATE TYPE %s_type (a int, b text,)" % tname)


def test_create_table_errors(session, tname):
    with pytest.raises(InvalidRequest, match=r"Multiple PRIMARY KEYs specified \(exactly one required\)"):
        session.execute("CREATE TABLE %s (key1 text PRIMARY KEY, key2 text PRIMARY KEY)" % tname)
    with pytest.raises(InvalidRequest, match="frozen<> is only allowed on collections, tuples, and user-defined types"):
        session.execute("CREATE TABLE %s (k int PRIMARY KEY, t frozen<text>)" % tname)
    for cql in ["CREATE KEYSPACE WITH WITH DURABLE_WRITES = true",
                "CREATE KEYSPACE ks WITH WITH DURABLE_WRITES = true"]:
        with pytest.raises(SyntaxException, match="no viable alternative at input 'WITH'"):
            session.execute(cql)


def test_option_maps(session, table, keyspace):
    t = table("(id text PRIMARY KEY)")
    with pytest.raises(SyntaxException, match="Invalid property value: ALL"):
        session.execute("ALTER TABLE %s WITH caching = {'keys': 'all', 'rows_per_partition': ALL}" % t)
    session.execute("ALTER TABLE %s WITH caching = {'keys': 'all', 'rows_per_partition': 'ALL'}" % t)
    for verb in ["CREATE KEYSPACE nts_dup_dc", "ALTER KEYSPACE %s" % keyspace]:
        with pytest.raises(SyntaxException, match="Multiple definition for property datacenter1"):
            session.execute("%s WITH replication = {'class': 'NetworkTopologyStrategy', 'datacenter1': 2, "
                            "'datacenter1': 1}" % verb)
    with pytest.raises(ConfigurationException, match="Configuration for at least one datacenter must be present"):
        session.execute("ALTER KEYSPACE %s WITH replication = {'class': 'NetworkTopologyStrategy'}" % keyspace)


def test_user_type_changes(session, table, keyspace, tname):
    session.execute("CREATE TYPE %s_a (foo int)" % tname)
    session.execute("CREATE TYPE %s_b (bar frozen<list<%s_a>>)" % (tname, tname))
    with pytest.raises(InvalidRequest, match="would create a circular reference"):
        session.execute("ALTER TYPE %s_a ADD needs_to_fail frozen<%s_b>" % (tname, tname))
    t = table("(pk frozen<%s_b>, v int, PRIMARY KEY (pk))" % tname)
    with pytest.raises(InvalidRequest, match=r"partition key column pk of table %s\.%s" % (keyspace, t)):
        session.execute("ALTER TYPE %s_a ADD v2 int" % tname)
    with pytest.raises(InvalidRequest, match=r"Non-frozen UDTs are not allowed inside collections: "
                                             r"list<%s\.%s_a>" % (keyspace, tname)):
        session.execute("CREATE TABLE %s_wrong (k int PRIMARY KEY, v list<%s_a>)" % (tname, tname))
    session.execute("CREATE TYPE %s_c (bar int, foo list<int>)" % tname)
    with pytest.raises(InvalidRequest, match="Non-frozen UDTs with nested non-frozen collections are not supported"):
        session.execute("CREATE TABLE %s_wrong (k int PRIMARY KEY, v %s_c)" % (tname, tname))
    u = table("(a int PRIMARY KEY, b frozen<%s_a>, c int)" % tname)
    for cql, message in [
        ("DELETE b.foo FROM %s WHERE a = 0", "Frozen UDT column b does not support field deletion"),
        ("DELETE c.foo FROM %s WHERE a = 0", "Invalid field deletion operation for non-UDT column c"),
        ("UPDATE %s SET b.foo = 0 WHERE a = 0", "Invalid operation (b.foo = 0) for frozen UDT column b"),
        ("UPDATE %s SET c.foo = 0 WHERE a = 0", "Invalid operation (c.foo = 0) for non-UDT column c"),
    ]:
        assert_refused(session.execute, cql % u, message)


def test_index_statements(session, table, keyspace):
    t = table("(pk int, c int, s int static, v1 int, v2 int, x int, l list<int>, PRIMARY KEY (pk, c))")
    with pytest.raises(InvalidRequest, match="Local indexes containing static columns are not supported"):
        session.execute("CREATE INDEX ON %s ((pk), s)" % t)
    session.execute("CREATE INDEX %s_idx ON %s (v1)" % (t, t))
    session.execute("CREATE INDEX IF NOT EXISTS %s_idx ON %s (v1)" % (t, t))
    with pytest.raises(InvalidRequest, match="already exists"):
        session.execute("CREATE INDEX IF NOT EXISTS %s_idx ON %s (v2)" % (t, t))
    for function in ["keys", "entries", "values"]:
        with pytest.raises(InvalidRequest, match=r"%s\(\)" % function):
            session.execute("CREATE INDEX ON %s (%s(x))" % (t, function))
    session.execute("CREATE INDEX ON %s (values(l))" % t)
    session.execute("CREATE TABLE %s_taken_index (k int PRIMARY KEY)" % t)
    with pytest.raises(InvalidRequest, match="already exists"):
        session.execute("CREATE INDEX %s_taken ON %s (v2)" % (t, t))


# --- key length (ScyllaDB's test_key_length.py) ------------------------------

KEY_TOO_LONG = "is longer than maximum of 65535"


def test_oversized_keys_are_refused_everywhere(session, table):
    t = table("(p text, c text, v int, PRIMARY KEY (p, c))")
    big = "x" * (65 * 1024)
    statements = {
        "INSERT INTO %s (p, c, v) VALUES (?, ?, 1)": [[big, "c"], ["p", big]],
        "UPDATE %s SET v = 1 WHERE p = ? AND c = ?": [[big, "c"], ["p", big]],
        "DELETE FROM %s WHERE p = ? AND c = ?": [[big, "c"], ["p", big]],
        "DELETE FROM %s WHERE p = ?": [[big]],
        "SELECT * FROM %s WHERE p = ?": [[big]],
        "SELECT * FROM %s WHERE p IN ?": [[[big]]],
        "INSERT INTO %s (p, c, v) VALUES (?, ?, 1) IF NOT EXISTS": [[big, "c"], ["p", big]],
    }
    for cql, bindings in statements.items():
        prepared = session.prepare(cql % t)
        for values in bindings:
            with pytest.raises(InvalidRequest, match="Key length of 66560 " + KEY_TOO_LONG):
                session.execute(prepared, values)
    # Unprepared, and in a batch.
    with pytest.raises(InvalidRequest, match="Key length of 66560 " + KEY_TOO_LONG):
        session.execute("INSERT INTO %s (p, c) VALUES ('%s', 'c')" % (t, big))
    with pytest.raises(InvalidRequest, match="Key length of 66560 " + KEY_TOO_LONG):
        session.execute("BEGIN BATCH INSERT INTO %s (p, c) VALUES ('p', 'c') "
                        "INSERT INTO %s (p, c) VALUES ('p', '%s') APPLY BATCH" % (t, t, big))
    # A read by an oversized clustering key is refused too (Cassandra finds
    # nothing; ScyllaDB's test takes either).
    with pytest.raises(InvalidRequest, match=KEY_TOO_LONG):
        session.execute(session.prepare("SELECT * FROM %s WHERE p = ? AND c = ?" % t), ["p", big])
    # Nothing was written.
    assert list(session.execute("SELECT * FROM %s" % t)) == []


def test_keys_of_exactly_65535_bytes_are_kept(session, table):
    t = table("(p text, c text, v int, PRIMARY KEY (p, c))")
    insert = session.prepare("INSERT INTO %s (p, c, v) VALUES (?, ?, ?)" % t)
    read = session.prepare("SELECT p, c, v FROM %s WHERE p = ?" % t)
    longest = "y" * 65535
    session.execute(insert, [longest, "c", 1])
    session.execute(insert, ["p", longest, 2])
    assert list(session.execute(read, [longest])) == [(longest, "c", 1)]
    assert list(session.execute(read, ["p"])) == [("p", longest, 2)]


def test_compound_key_length_is_the_whole_key(session, table):
    t = table("(p1 text, p2 text, c1 text, c2 text, PRIMARY KEY ((p1, p2), c1, c2))")
    insert = session.prepare("INSERT INTO %s (p1, p2, c1, c2) VALUES (?, ?, ?, ?)" % t)
    read = session.prepare("SELECT * FROM %s WHERE p1 = ? AND p2 = ?" % t)
    big = "x" * (65 * 1024)
    # Each component of a compound key too long. As literals: a driver
    # cannot build the routing key of a bound component past 65535 bytes.
    for values in [[big, "a", "b", "c"], ["a", big, "b", "c"], ["a", "b", big, "c"], ["a", "b", "c", big]]:
        with pytest.raises(InvalidRequest, match=KEY_TOO_LONG):
            session.execute("INSERT INTO %s (p1, p2, c1, c2) VALUES ('%s', '%s', '%s', '%s')" % (t, *values))
    # The whole compound partition key: 3 bytes per component besides the
    # values (Cassandra's CompositeType), so two reach 65535 - 6.
    p1, p2 = "a" * 100, "b" * (65535 - 6 - 100)
    session.execute(insert, [p1, p2, "c1", "c2"])
    assert list(session.execute(read, [p1, p2])) == [(p1, p2, "c1", "c2")]
    half = "h" * (65536 // 2)
    with pytest.raises(InvalidRequest, match=KEY_TOO_LONG):
        session.execute(insert, [half, half, "c1", "c2"])
    # The whole composite clustering key: the values add up to 65535 at most.
    c1, c2 = "c" * 100, "d" * (65535 - 4 - 100)
    session.execute(insert, ["q1", "q2", c1, c2])
    assert list(session.execute(read, ["q1", "q2"])) == [("q1", "q2", c1, c2)]
    with pytest.raises(InvalidRequest, match="Key length of 65536 " + KEY_TOO_LONG):
        session.execute(insert, ["r1", "r2", half, half])
    with pytest.raises(InvalidRequest, match="Key length of 65536 " + KEY_TOO_LONG):
        session.execute(session.prepare("DELETE FROM %s WHERE p1 = 'r1' AND p2 = 'r2' AND c1 = ? AND c2 = ?" % t), [half, half])
    assert list(session.execute(read, ["r1", "r2"])) == []


def test_collection_elements_are_no_keys(session, table):
    # Set elements and map keys order like clustering keys, but are not
    # limited to 64 KiB (CASSANDRA-10374).
    t = table("(p int PRIMARY KEY, s set<text>, m map<text, text>)")
    big = "z" * (65 * 1024)
    session.execute(session.prepare("UPDATE %s SET s = s + ?, m[?] = ? WHERE p = 1" % t), [{big}, big, big])
    row = session.execute("SELECT s, m FROM %s WHERE p = 1" % t).one()
    assert set(row.s) == {big} and dict(row.m) == {big: big}


# --- token() arity, refused at PREPARE ----------------------------------------

def test_token_arity_is_checked_at_prepare(session, table):
    t = table("(a int, b int, c int, PRIMARY KEY ((a, b), c))")
    for where in ["token(a) > 0", "token(a, b) > token(1)", "token(a, b) = token(1, 2, 3)"]:
        provided = 1 if "token(a) " in where or "token(1)" in where else 3
        with pytest.raises(InvalidRequest, match=re.escape(
                "Invalid number of arguments in call to function system.token: 2 required but %d provided" % provided)):
            session.prepare("SELECT * FROM %s WHERE %s" % (t, where))
    # The right number prepares and runs.
    prepared = session.prepare("SELECT * FROM %s WHERE token(a, b) > token(?, ?)" % t)
    assert list(session.execute(prepared, [1, 2])) == []
