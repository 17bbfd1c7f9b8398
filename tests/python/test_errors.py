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
    for statement, cql in [("DELETE", "DELETE FROM errs WHERE token(k) = token(?)"),
                           ("UPDATE", "UPDATE errs SET v = 1 WHERE token(k) > ? AND c = 1")]:
        message = "The token function cannot be used in WHERE clauses for %s statements" % statement
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
