"""Errors as the driver surfaces them: classes and the parts of messages clients rely on."""

import pytest

from cassandra import InvalidRequest
from cassandra.protocol import SyntaxException
from cassandra.query import UNSET_VALUE


@pytest.fixture(scope="module")
def t(session):
    session.execute("CREATE TABLE errs (k int, c int, v int, s text, PRIMARY KEY (k, c))")
    return "errs"


@pytest.mark.parametrize("cql", [
    # Errors in the middle of the statement: Cassandra reports ANTLR positions as
    # "line 1:<col>" there (an error at end of input may read "line 0:-1").
    "SELEC * FROM errs",
    "SELECT * FORM errs",
    "SELECT * FROM errs WHERE AND k = 1",
    "INSERT INTO errs (k, c) VALUES (1,, 2)",
    "CREATE TABLE (k int PRIMARY KEY)",
    "UPDATE errs SET WHERE k = 1",
])
def test_syntax_error(session, t, cql):
    with pytest.raises(SyntaxException) as ei:
        session.execute(cql)
    assert "line 1:" in str(ei.value)
    assert ei.value.code == 0x2000


def test_syntax_error_on_prepare(session, t):
    with pytest.raises(SyntaxException) as ei:
        session.prepare("SELEC * FROM errs WHERE k = ?")
    assert "line 1:" in str(ei.value)


def test_unknown_table_and_keyspace(session, t):
    for cql in ["SELECT * FROM no_such_table",
                "SELECT * FROM no_such_keyspace.errs",
                "INSERT INTO no_such_table (k) VALUES (1)",
                "UPDATE no_such_keyspace.t SET v = 1 WHERE k = 1",
                "DELETE FROM no_such_table WHERE k = 1"]:
        with pytest.raises(InvalidRequest) as ei:
            session.execute(cql)
        assert "code=2200" in str(ei.value), cql
    with pytest.raises(InvalidRequest):
        session.prepare("SELECT * FROM no_such_table WHERE k = ?")


def test_unknown_column_names_the_column(session, t):
    for cql in ["SELECT nosuchcol FROM errs WHERE k = 1",
                "SELECT * FROM errs WHERE k = 1 AND nosuchcol = 2 ALLOW FILTERING",
                "INSERT INTO errs (k, c, nosuchcol) VALUES (1, 1, 1)",
                "UPDATE errs SET nosuchcol = 1 WHERE k = 1 AND c = 1"]:
        with pytest.raises(InvalidRequest) as ei:
            session.execute(cql)
        assert "nosuchcol" in str(ei.value), cql
        # PREPARE refuses it too, rather than typing its marker.
        with pytest.raises(InvalidRequest) as ei:
            session.prepare(cql.replace("2 ALLOW", "? ALLOW").replace("VALUES (1, 1, 1)", "VALUES (1, 1, ?)")
                            .replace("SET nosuchcol = 1", "SET nosuchcol = ?"))
        assert "nosuchcol" in str(ei.value), cql


def test_wrong_type_value(session, t):
    with pytest.raises(InvalidRequest) as ei:
        session.execute("INSERT INTO errs (k, c, v) VALUES (1, 1, 'not an int')")
    assert "v" in str(ei.value)
    with pytest.raises(InvalidRequest):
        session.execute("INSERT INTO errs (k, c, s) VALUES (1, 1, 5)")
    with pytest.raises(InvalidRequest):
        session.execute("SELECT * FROM errs WHERE k = 'one'")
    # Through a prepared statement the driver refuses to encode the value.
    p = session.prepare("INSERT INTO errs (k, c, v) VALUES (?, ?, ?)")
    with pytest.raises(TypeError):
        session.execute(p, (1, 1, "not an int"))


def test_too_many_and_too_few_bind_values(session, t):
    p = session.prepare("INSERT INTO errs (k, c, v) VALUES (?, ?, ?)")
    with pytest.raises(ValueError):  # the driver checks the count it got from PREPARE
        session.execute(p, (1, 1, 1, 1))
    # Protocol v4 fills missing trailing values with UNSET; an unset primary key is refused.
    with pytest.raises(InvalidRequest):
        session.execute(p, (1,))
    with pytest.raises(InvalidRequest):
        session.execute(p, (1, UNSET_VALUE, 1))
    # A QUERY whose markers get no values is refused by the server.
    with pytest.raises(InvalidRequest):
        session.execute("SELECT * FROM errs WHERE k = ?")


def test_missing_partition_key_needs_allow_filtering(session, t):
    with pytest.raises(InvalidRequest) as ei:
        session.execute("SELECT * FROM errs WHERE v = 1")
    assert "ALLOW FILTERING" in str(ei.value)
    with pytest.raises(InvalidRequest) as ei:
        session.execute("SELECT * FROM errs WHERE c = 1")
    assert "ALLOW FILTERING" in str(ei.value)
    session.execute("SELECT * FROM errs WHERE v = 1 ALLOW FILTERING")


def test_invalid_modifications(session, t):
    # Missing clustering key in an INSERT.
    with pytest.raises(InvalidRequest):
        session.execute("INSERT INTO errs (k, v) VALUES (1, 1)")
    # UPDATE of a primary key column.
    with pytest.raises(InvalidRequest):
        session.execute("UPDATE errs SET c = 2 WHERE k = 1 AND c = 1")
    # UPDATE without the full primary key.
    with pytest.raises(InvalidRequest):
        session.execute("UPDATE errs SET v = 2 WHERE k = 1")
    # Null partition key.
    with pytest.raises(InvalidRequest):
        session.execute("INSERT INTO errs (k, c, v) VALUES (null, 1, 1)")
    # Column given twice.
    with pytest.raises(InvalidRequest):
        session.execute("INSERT INTO errs (k, c, v, v) VALUES (1, 1, 1, 2)")
    # Wrong number of values.
    with pytest.raises(InvalidRequest):
        session.execute("INSERT INTO errs (k, c, v) VALUES (1, 1)")
    # token() names ranges, which UPDATE and DELETE do not take: refused
    # when prepared too, before a bind marker gets a type.
    message = "The token function cannot be used in WHERE clauses for UPDATE and DELETE statements"
    for cql in ["DELETE FROM errs WHERE token(k) = token(?)", "UPDATE errs SET v = 1 WHERE token(k) > ? AND c = 1"]:
        with pytest.raises(InvalidRequest, match=message):
            session.prepare(cql)
        with pytest.raises(InvalidRequest, match=message):
            session.execute(cql.replace("?", "0"))


def test_invalid_ddl(session, t):
    with pytest.raises(InvalidRequest):  # no primary key
        session.execute("CREATE TABLE errs_nopk (k int, v int)")
    with pytest.raises(InvalidRequest):  # unknown type
        session.execute("CREATE TABLE errs_badtype (k int PRIMARY KEY, v nosuchtype)")
    with pytest.raises(InvalidRequest):  # duplicate column
        session.execute("ALTER TABLE errs ADD v int")
    with pytest.raises(InvalidRequest):  # dropping a primary key column
        session.execute("ALTER TABLE errs DROP k")
    with pytest.raises(InvalidRequest):  # dropping an unknown column
        session.execute("ALTER TABLE errs DROP nosuchcol")


def test_session_usable_after_errors(session, t):
    for _ in range(3):
        with pytest.raises(SyntaxException):
            session.execute("NOT CQL AT ALL")
        with pytest.raises(InvalidRequest):
            session.execute("SELECT * FROM no_such_table")
    session.execute("INSERT INTO errs (k, c, v) VALUES (42, 1, 1)")
    assert session.execute("SELECT v FROM errs WHERE k = 42 AND c = 1").one().v == 1


@pytest.mark.parametrize("cql, message", [
    ("UPDATE errs SET v = 1 WHERE token(k) = token(1) AND c = 1",
     "The token function cannot be used in WHERE clauses for UPDATE and DELETE statements"),
    ("DELETE FROM errs WHERE token(k) = token(1)",
     "The token function cannot be used in WHERE clauses for UPDATE and DELETE statements"),
    ("UPDATE errs SET v = 1 WHERE k > 1 AND c = 1",
     "Only EQ and IN relation are supported on the partition key (unless you use the token() function)"),
    ("DELETE FROM errs WHERE k > 1",
     "Only EQ and IN relation are supported on the partition key (unless you use the token() function)"),
    ("UPDATE errs SET v = 1 WHERE k = 1 AND c = 1 AND v = 2", "Invalid where clause contains non PRIMARY KEY columns: v"),
    ("DELETE FROM errs WHERE k = 1 AND c = 1 AND s = 'x'", "Invalid where clause contains non PRIMARY KEY columns: s"),
])
def test_a_write_names_its_rows_by_primary_key(session, t, cql, message):
    with pytest.raises(InvalidRequest) as ei:
        session.execute(cql)
    assert message in str(ei.value)


def test_clustering_restrictions_of_a_write_form_a_prefix(session):
    session.execute("CREATE TABLE IF NOT EXISTS errs2 (k int, c1 int, c2 int, f frozen<map<int, int>>, v int, "
                    "PRIMARY KEY (k, c1, c2, f))")
    with pytest.raises(InvalidRequest, match='PRIMARY KEY column "c2" cannot be restricted as preceding column "c1" is not restricted'):
        session.execute("DELETE FROM errs2 WHERE k = 1 AND c2 = 1")
    with pytest.raises(InvalidRequest, match='Clustering column "c2" cannot be restricted'):
        session.execute("DELETE FROM errs2 WHERE k = 1 AND c1 > 1 AND c2 = 1")
    with pytest.raises(InvalidRequest, match="CONTAINS relation"):
        session.execute("DELETE FROM errs2 WHERE k = 1 AND c1 = 1 AND c2 = 1 AND f CONTAINS 1")
    # Single- and multi-column relations on the clustering key do not mix
    # (ScyllaDB refuses them too); one was ignored, deleting more rows.
    with pytest.raises(InvalidRequest, match="Mixing single column relations and multi column relations"):
        session.execute("DELETE FROM errs2 WHERE k = 1 AND (c1) IN ((1), (2)) AND c2 = 3")


def test_restrictions_refused_as_scylla_refuses_them(session, t):
    session.execute("CREATE TABLE IF NOT EXISTS errs3 (k int, k2 int, c int, d int, s set<int>, m map<int, int>, v int, "
                    "PRIMARY KEY ((k, k2), c, d))")
    cases = [
        ("SELECT * FROM errs3 WHERE k = 0 AND k2 = 0 AND s = {1} ALLOW FILTERING",
         "Collection column 's' (set<int>) cannot be restricted by a '=' relation"),
        ("SELECT * FROM errs3 WHERE m > {1: 1} ALLOW FILTERING",
         "Collection column 'm' (map<int, int>) cannot be restricted by a '>' relation"),
        ("SELECT * FROM errs3 WHERE s IN ({1}) ALLOW FILTERING",
         "Collection column 's' (set<int>) cannot be restricted by a 'IN' relation"),
        ("SELECT * FROM errs3 WHERE v != 5 ALLOW FILTERING", 'Unsupported "!=" relation: v != 5'),
        ("SELECT * FROM errs3 WHERE token(k, k2) != 0", 'Unsupported "!=" relation: token(k, k2) != 0'),
        ("SELECT * FROM errs3 WHERE v IS NOT NULL ALLOW FILTERING", "IS NOT NULL' is only supported in materialized view creation"),
        ("SELECT * FROM errs3 WHERE token(k) = 0", "Invalid number of arguments in call to function system.token"),
        ("SELECT * FROM errs3 WHERE token(k, k) = 0", "duplicate partition key"),
        ("SELECT * FROM errs3 WHERE token(k2, k) = 0", "partition key order"),
        ("SELECT * FROM errs3 WHERE k = 0 AND k2 = 0 AND (c, d) IN ((1, 2), (null, 1))",
         "Invalid null value in condition for column c"),
        ("SELECT * FROM errs3 WHERE k = 0 AND k2 = 0 AND (c, d) IN ((1, 2), (1))", "Expected 2 elements in value tuple, but got 1"),
        ("SELECT * FROM errs3 WHERE k = 0 AND k2 = 0 AND (c, d) IN ((1, 2, 3), (1, 2))",
         "Invalid list literal for IN((c,d)): value (1, 2, 3) is not of type frozen<tuple<int, int>>"),
        ("SELECT DISTINCT k FROM errs3", "SELECT DISTINCT queries must request all the partition key columns (missing k2)"),
        ("SELECT DISTINCT k, k2 FROM errs3 WHERE c > 1 ALLOW FILTERING",
         "SELECT DISTINCT with WHERE clause only supports restriction by partition key and/or static columns."),
        ("SELECT * FROM errs3 WHERE s[1] = 2 ALLOW FILTERING", "cannot be subscripted"),
    ]
    for cql, message in cases:
        with pytest.raises(InvalidRequest) as ei:
            session.execute(cql)
        assert message in str(ei.value), cql


def test_unset_values_in_restrictions_name_the_column(session, t):
    with pytest.raises(InvalidRequest, match="Invalid unset value for column c"):
        session.execute(session.prepare("INSERT INTO errs (k, c) VALUES (1, ?)"), [UNSET_VALUE])
    with pytest.raises(InvalidRequest, match="Invalid unset value for column v"):
        session.execute(session.prepare("SELECT * FROM errs WHERE k = 1 AND v = ? ALLOW FILTERING"), [UNSET_VALUE])


def test_batch_too_large(session, t):
    big = "'%s'" % ("x" * 1024)
    statements = ["INSERT INTO errs (k, c, s) VALUES (%d, 1, %s)" % (i, big) for i in range(1100)]
    with pytest.raises(InvalidRequest, match="Batch too large"):
        session.execute("BEGIN UNLOGGED BATCH %s APPLY BATCH" % "; ".join(statements))


def test_multi_column_relations_refused_as_scylla_refuses_them(session, t):
    cases = [
        ("SELECT * FROM errs WHERE (k, c) = (0, 0)",
         "Multi-column relations can only be applied to clustering columns but was applied to: k"),
        ("SELECT * FROM errs WHERE k = 0 AND (c) = (0) AND (c) > (0)", 'cannot be restricted by both an equality and an inequality relation'),
        ("SELECT * FROM errs WHERE k = 0 AND (c) > (0) AND (c) >= (1)", "More than one restriction was found for the start bound on c"),
        ("SELECT * FROM errs WHERE k = 0 AND (c) < (0) AND (c) <= (1)", "More than one restriction was found for the end bound on c"),
    ]
    for cql, message in cases:
        with pytest.raises(InvalidRequest) as ei:
            session.execute(cql)
        assert message in str(ei.value), cql
    # A start and an end bound together are one range.
    session.execute("SELECT * FROM errs WHERE k = 0 AND (c) > (0) AND (c) < (5)")


def test_use_with_a_bind_marker(session, t):
    # cqlpy's testUseStatementWithBindVariable (ScyllaDB's grammar).
    with pytest.raises(SyntaxException, match="Bind variables cannot be used for keyspace names"):
        session.execute("USE ?")


def test_unsupported_relations_refused_at_prepare(session, t):
    # cqlpy's testInvalidNonFrozenUDTRelation: ScyllaDB refuses these when
    # preparing, so a driver never binds values to a statement that cannot run.
    session.execute("CREATE TABLE IF NOT EXISTS errs4 (k int PRIMARY KEY, v int)")
    for cql, message in [("SELECT * FROM errs4 WHERE v != ? ALLOW FILTERING", 'Unsupported "!=" relation: v != ?'),
                         ("SELECT * FROM errs4 WHERE token(k) != ?", 'Unsupported "!=" relation: token(k) != ?'),
                         ("SELECT * FROM errs4 WHERE v IS NOT NULL ALLOW FILTERING",
                          "restriction 'v IS NOT NULL' is only supported in materialized view creation")]:
        with pytest.raises(InvalidRequest) as ei:
            session.prepare(cql)
        assert message in str(ei.value), cql
    # A multi-column != is refused the same way, before the check that its
    # columns are clustering columns (cqlpy's testNonEqualsRelation).
    for cql, message in [("SELECT * FROM errs WHERE k = 0 AND (c) != (0)", 'Unsupported "!=" relation: (c) != (0)'),
                         ("SELECT * FROM errs4 WHERE k = 0 AND (v) != (0)", 'Unsupported "!=" relation: (v) != (0)')]:
        with pytest.raises(InvalidRequest) as ei:
            session.execute(cql)
        assert message in str(ei.value), cql
    # A column the table lacks is named as such, not as an unsupported relation.
    with pytest.raises(InvalidRequest, match="nosuchcol"):
        session.prepare("SELECT * FROM errs4 WHERE nosuchcol != ? ALLOW FILTERING")


def test_range_deletion_of_specific_columns(session, t):
    # cqlpy's delete_test.py::testDeleteWithRangeAndOneClusteringColumn.
    for cql in ["DELETE v FROM errs WHERE k = 1 AND c >= 1", "DELETE v FROM errs WHERE k = 1 AND (c) > (1)",
                "DELETE v, s FROM errs WHERE k = 1 AND c < 5 AND c > 1"]:
        with pytest.raises(InvalidRequest, match="^.*Range deletions are not supported for specific columns"):
            session.execute(cql)
    # A whole row range is fine, and so is a column of a named row.
    session.execute("DELETE FROM errs WHERE k = 1 AND c >= 1")
    session.execute("DELETE v FROM errs WHERE k = 1 AND c = 1")


def test_token_markers_are_named_as_function_arguments(session, t):
    # cqlpy's testFunctionCallWithUnset: the markers of token(?) are named
    # arg0(system.token), not after the key, so a driver does not take them
    # as the routing key (and refuse an unset one before sending it).
    prepared = session.prepare("SELECT * FROM errs WHERE token(k) >= token(?)")
    assert [c.name for c in prepared.column_metadata] == ["arg0(system.token)"]
    assert not prepared.routing_key_indexes
    with pytest.raises(InvalidRequest, match="unset"):
        session.execute(prepared, [UNSET_VALUE])
