"""User-defined functions and aggregates in Lua, as ScyllaDB has them.

CREATE [OR REPLACE] FUNCTION / AGGREGATE, DROP, calls in a selection
(qualified and in the table's keyspace), ScyllaDB's Lua <-> CQL type
mapping, null input handling, run-time failures as FunctionFailure, a bound
on runaway scripts, system_schema.functions / aggregates, DESCRIBE output
that recreates each object, and persistence across a restart.
"""
import decimal
import re

import pytest
from cassandra import FunctionFailure, InvalidRequest

from conftest import IS_CASSANDRA
from node import skip_reason, temp_node

if IS_CASSANDRA:
    pytest.skip("Lua user-defined functions are ScyllaDB's (Cassandra runs Java ones)", allow_module_level=True)


@pytest.fixture
def fname(request):
    return "f_" + re.sub(r"[^a-z0-9_]", "_", request.node.name.lower())[:40]


def test_create_call_replace_drop(session, keyspace, table, fname):
    t = table("(k int PRIMARY KEY, v int)")
    session.execute(f"INSERT INTO {t} (k, v) VALUES (1, 41)")
    session.execute(f"CREATE FUNCTION {keyspace}.{fname}(a int) RETURNS NULL ON NULL INPUT RETURNS int "
                    "LANGUAGE lua AS 'return a + 1'")
    row = session.execute(f"SELECT {keyspace}.{fname}(v) AS r FROM {t} WHERE k = 1").one()
    assert row.r == 42
    # Unqualified, in the table's keyspace; the column is named ks.f(v).
    rows = session.execute(f"SELECT {fname}(v) FROM {t}")
    assert rows.column_names == [f"{keyspace}.{fname}(v)"]
    assert rows.one()[0] == 42
    # A constant argument takes the function's type.
    assert session.execute(f"SELECT {fname}(9) FROM {t}").one()[0] == 10
    with pytest.raises(InvalidRequest, match="already exists"):
        session.execute(f"CREATE FUNCTION {fname}(a int) RETURNS NULL ON NULL INPUT RETURNS int "
                        "LANGUAGE lua AS 'return a'")
    session.execute(f"CREATE FUNCTION IF NOT EXISTS {fname}(a int) RETURNS NULL ON NULL INPUT RETURNS int "
                    "LANGUAGE lua AS 'return a'")
    assert session.execute(f"SELECT {fname}(v) FROM {t}").one()[0] == 42
    session.execute(f"CREATE OR REPLACE FUNCTION {fname}(a int) RETURNS NULL ON NULL INPUT RETURNS int "
                    "LANGUAGE lua AS 'return a * 2'")
    assert session.execute(f"SELECT {fname}(v) FROM {t}").one()[0] == 82
    rows = list(session.execute("SELECT function_name, argument_types, argument_names, body, language, return_type, "
                                "called_on_null_input FROM system_schema.functions WHERE keyspace_name = %s",
                                [keyspace]))
    mine = [r for r in rows if r.function_name == fname]
    assert len(mine) == 1
    assert (mine[0].argument_types, mine[0].argument_names) == (["int"], ["a"])
    assert (mine[0].body, mine[0].language, mine[0].return_type) == ("return a * 2", "lua", "int")
    assert mine[0].called_on_null_input is False
    session.execute(f"DROP FUNCTION {fname}")
    with pytest.raises(InvalidRequest, match=f"No function named {keyspace}.{fname} found"):
        session.execute(f"DROP FUNCTION {fname}")
    session.execute(f"DROP FUNCTION IF EXISTS {fname}")
    with pytest.raises(InvalidRequest, match="Unknown function"):
        session.execute(f"SELECT {keyspace}.{fname}(v) FROM {t}")


def test_overloads_need_the_signature_to_drop(session, keyspace, fname):
    session.execute(f"CREATE FUNCTION {fname}(i int) CALLED ON NULL INPUT RETURNS bigint LANGUAGE lua AS 'return 42'")
    session.execute(f"CREATE FUNCTION {fname}(i int, j int) CALLED ON NULL INPUT RETURNS bigint "
                    "LANGUAGE lua AS 'return 43'")
    with pytest.raises(InvalidRequest, match="multiple function"):
        session.execute(f"DROP FUNCTION {fname}")
    with pytest.raises(InvalidRequest, match="doesn't exist"):
        session.execute(f"DROP FUNCTION {fname}(text)")
    session.execute(f"DROP FUNCTION {fname}(int, int)")
    session.execute(f"DROP FUNCTION {fname}")


def test_null_input(session, table, fname):
    t = table("(k int PRIMARY KEY, v int)")
    session.execute(f"INSERT INTO {t} (k) VALUES (1)")
    session.execute(f"CREATE FUNCTION {fname}_strict(a int) RETURNS NULL ON NULL INPUT RETURNS text "
                    "LANGUAGE lua AS 'return \"ran\"'")
    session.execute(f"CREATE FUNCTION {fname}_called(a int) CALLED ON NULL INPUT RETURNS text "
                    "LANGUAGE lua AS 'if a == nil then return \"nil\" end return \"value\"'")
    row = session.execute(f"SELECT {fname}_strict(v) AS s, {fname}_called(v) AS c FROM {t}").one()
    assert (row.s, row.c) == (None, "nil")


@pytest.mark.parametrize("cql_type, value, body, expected", [
    ("tinyint", 5, "return a + 1", 6),
    ("smallint", 5, "return a + 1", 6),
    ("int", 5, "return a + 1", 6),
    ("bigint", 2**40, "return a + 1", 2**40 + 1),
    ("varint", 2**70, "return a", 2**70),
    ("varint", 7, "return a * 6", 42),
    ("decimal", decimal.Decimal("1.5"), "return a + 1", decimal.Decimal("2.5")),
    ("double", 1.5, "return a * 2", 3.0),
    ("float", 1.5, "return a * 2", 3.0),
    ("text", "abc", "return a .. '!'", "abc!"),
    ("ascii", "abc", "return string.upper(a)", "ABC"),
    ("blob", b"\x00\x01", "return a .. '\\2'", b"\x00\x01\x02"),
    ("boolean", True, "return not a", False),
    ("list<int>", [1, 2, 3], "local r = {} for i, v in ipairs(a) do r[i] = v * 10 end return r", [10, 20, 30]),
    ("set<text>", {"x", "y"}, "a['z'] = true return a", {"x", "y", "z"}),
    ("map<text, int>", {"a": 1}, "a['b'] = 2 return a", {"a": 1, "b": 2}),
    ("frozen<tuple<int, text>>", (1, "x"), "return {a[1] + 1, a[2] .. 'y'}", (2, "xy")),
])
def test_type_mapping(session, table, fname, cql_type, value, body, expected):
    t = table(f"(k int PRIMARY KEY, v {cql_type})")
    if isinstance(value, tuple):  # the driver writes a tuple parameter as a list literal
        session.execute(f"INSERT INTO {t} (k, v) VALUES (1, (1, 'x'))")
    else:
        session.execute(f"INSERT INTO {t} (k, v) VALUES (1, %s)", [value])
    arg_type = "tuple<int, text>" if cql_type.startswith("frozen<tuple") else cql_type
    session.execute(f"CREATE FUNCTION {fname}(a {arg_type}) RETURNS NULL ON NULL INPUT RETURNS {arg_type} "
                    f"LANGUAGE lua AS $${body}$$")
    got = session.execute(f"SELECT {fname}(v) FROM {t}").one()[0]
    if isinstance(expected, set):
        got = set(got)
    if isinstance(expected, list):
        got = list(got)
    if isinstance(expected, dict):
        got = dict(got)
    assert got == expected


def test_result_of_the_wrong_kind_and_runtime_errors_are_function_failures(session, table, fname):
    t = table("(k int PRIMARY KEY, v int)")
    session.execute(f"INSERT INTO {t} (k, v) VALUES (1, 1)")
    session.execute(f"CREATE FUNCTION {fname}_err(a int) CALLED ON NULL INPUT RETURNS int "
                    "LANGUAGE lua AS 'error(\"boom\")'")
    with pytest.raises(FunctionFailure, match="lua execution failed: .*boom"):
        session.execute(f"SELECT {fname}_err(v) FROM {t}")
    session.execute(f"CREATE FUNCTION {fname}_str(a int) CALLED ON NULL INPUT RETURNS int "
                    "LANGUAGE lua AS 'return \"nope\"'")
    with pytest.raises(FunctionFailure, match="value is not a number"):
        session.execute(f"SELECT {fname}_str(v) FROM {t}")


def test_markers_and_constants_take_the_parameter_types(session, keyspace, fname):
    # cqlpy test_selector_literals.py: a marker of a user function has its
    # parameter's type; a constant it cannot hold is a type error.
    session.execute(f"CREATE FUNCTION {keyspace}.{fname}(i int, j int) RETURNS NULL ON NULL INPUT RETURNS int "
                    "LANGUAGE lua AS 'return i + j;'")
    prepared = session.prepare(f"SELECT {keyspace}.{fname}(?, ?) AS s FROM system.local")
    assert [c.type.typename for c in prepared.column_metadata] == ["int", "int"]
    assert session.execute(prepared, (10, 20)).one().s == 30
    with pytest.raises(InvalidRequest, match="Type error: 'asf' cannot be passed as argument 1"):
        session.execute(f"SELECT {keyspace}.{fname}(1, 'asf') FROM system.local")


def test_calls_in_terms(session, keyspace, table, fname):
    """A user function called where a value belongs: a column's value, a
    key, a map key in an UPDATE, a subscript, an element of a collection
    literal; qualified or in the table's keyspace. Its result must fit the
    receiver, as a system function's must."""
    t = table("(k int PRIMARY KEY, v int, m map<int, int>, l list<int>)")
    session.execute(f"CREATE FUNCTION {keyspace}.{fname}(a int) RETURNS NULL ON NULL INPUT RETURNS int "
                    "LANGUAGE lua AS 'return a + 1'")
    session.execute(f"INSERT INTO {t} (k, v, m) VALUES ({keyspace}.{fname}(0), {fname}(41), {{1: 10, 2: 20}})")
    assert session.execute(f"SELECT v FROM {t} WHERE k = 1").one().v == 42
    session.execute(f"UPDATE {t} SET m = m + {{{fname}(2): 30}}, l = [{fname}(5), 7] WHERE k = {fname}(0)")
    row = session.execute(f"SELECT m[{fname}(1)] AS two, m[3] AS three, l FROM {t} WHERE k = {fname}(0)").one()
    assert (row.two, row.three, row.l) == (20, 30, [6, 7])
    # A marker argument takes the parameter's type.
    insert = session.prepare(f"INSERT INTO {t} (k, v) VALUES (?, {fname}(?))")
    session.execute(insert, (2, 99))
    assert session.execute(f"SELECT v FROM {t} WHERE k = 2").one().v == 100
    # A function of another function's result, in a selector's list.
    session.execute(f"CREATE FUNCTION {keyspace}.{fname}_head(l list<int>) RETURNS NULL ON NULL INPUT "
                    "RETURNS int LANGUAGE lua AS 'return l[1]'")
    assert session.execute(f"SELECT {fname}_head([{fname}(9), 2]) FROM {t} WHERE k = 1").one()[0] == 10
    # Without FROM, an unqualified call names a function of the session's keyspace.
    assert session.execute(f"SELECT {fname}(1) AS r").one().r == 2
    session.execute(f"CREATE FUNCTION {keyspace}.{fname}_text(a int) RETURNS NULL ON NULL INPUT RETURNS text "
                    "LANGUAGE lua AS 'return \"x\"'")
    with pytest.raises(InvalidRequest, match="Type error: cannot assign result of function"):
        session.execute(f"INSERT INTO {t} (k, v) VALUES (5, {fname}_text(1))")
    with pytest.raises(InvalidRequest, match="Unknown function"):
        session.execute(f"INSERT INTO {t} (k, v) VALUES (5, {keyspace}.no_such_{fname}(1))")


def test_text_results_are_validated_as_values(session, table, fname):
    """A result that is no value of the return type (bytes that are not
    UTF-8 for text, not ASCII for ascii) is ScyllaDB's InvalidRequest, not
    a failed run."""
    t = table("(k int PRIMARY KEY)")
    session.execute(f"INSERT INTO {t} (k) VALUES (1)")
    session.execute(f"CREATE FUNCTION {fname}_t(k int) CALLED ON NULL INPUT RETURNS text "
                    "LANGUAGE lua AS 'return \"\\xff\"'")
    with pytest.raises(InvalidRequest, match="value is not valid utf8"):
        session.execute(f"SELECT {fname}_t(k) FROM {t}")
    session.execute(f"CREATE FUNCTION {fname}_a(k int) CALLED ON NULL INPUT RETURNS ascii "
                    "LANGUAGE lua AS 'return \"\u05e9\"'")
    with pytest.raises(InvalidRequest, match="value is not valid ascii"):
        session.execute(f"SELECT {fname}_a(k) FROM {t}")


def test_an_endless_loop_is_cut_off(session, table, fname):
    t = table("(k int PRIMARY KEY, v int)")
    session.execute(f"INSERT INTO {t} (k, v) VALUES (1, 1)")
    session.execute(f"CREATE FUNCTION {fname}(a int) CALLED ON NULL INPUT RETURNS int "
                    "LANGUAGE lua AS 'while true do end'")
    with pytest.raises(FunctionFailure, match="lua execution timeout"):
        session.execute(f"SELECT {fname}(v) FROM {t}")
    # The shard is still serving.
    assert session.execute(f"SELECT v FROM {t}").one().v == 1


def test_creation_errors_use_scyllas_texts(session, keyspace, fname):
    with pytest.raises(InvalidRequest, match="Language 'java' is not supported"):
        session.execute(f"CREATE FUNCTION {fname}(i int) CALLED ON NULL INPUT RETURNS int "
                        "LANGUAGE java AS 'return 42;'")
    with pytest.raises(InvalidRequest, match="could not compile"):
        session.execute(f"CREATE FUNCTION {fname}(i int) CALLED ON NULL INPUT RETURNS int "
                        "LANGUAGE lua AS 'return ('")
    with pytest.raises(InvalidRequest, match="Cannot use both 'OR REPLACE' and 'IF NOT EXISTS'"):
        session.execute(f"CREATE OR REPLACE FUNCTION IF NOT EXISTS {fname}(i int) CALLED ON NULL INPUT "
                        "RETURNS int LANGUAGE lua AS 'return 1'")
    with pytest.raises(InvalidRequest, match="doesn't exist"):
        session.execute(f"DROP FUNCTION {fname}(int)")


def test_drop_and_aggregate_creation_errors_in_scyllas_texts(session, keyspace, fname):
    """DROP looks a name up among functions and aggregates both (an
    overloaded scalar makes DROP AGGREGATE ambiguous; the other kind is
    refused once found); CREATE AGGREGATE names a missing state or final
    function by its short name and signature ("... not found")."""
    session.execute(f"CREATE FUNCTION {fname}(s int, v int) CALLED ON NULL INPUT RETURNS int "
                    "LANGUAGE lua AS 'return v'")
    session.execute(f"CREATE FUNCTION {fname}(s double, v double) CALLED ON NULL INPUT RETURNS text "
                    "LANGUAGE lua AS 'return v'")
    with pytest.raises(InvalidRequest, match=f"There are multiple functions named {keyspace}.{fname}"):
        session.execute(f"DROP AGGREGATE {fname}")
    with pytest.raises(InvalidRequest, match=re.escape(f"'{keyspace}.{fname} : (int, int) -> int' is not a user defined aggregate")):
        session.execute(f"DROP AGGREGATE {fname}(int, int)")
    with pytest.raises(InvalidRequest, match=re.escape(f"State function {fname}(int, text) not found")):
        session.execute(f"CREATE AGGREGATE {fname}_a(text) SFUNC {fname} STYPE int")
    with pytest.raises(InvalidRequest, match=re.escape(f"State function '{fname}' doesn't return state (double)")):
        session.execute(f"CREATE AGGREGATE {fname}_a(double) SFUNC {fname} STYPE double")
    with pytest.raises(InvalidRequest, match=re.escape("Final function nosuch(int) not found")):
        session.execute(f"CREATE AGGREGATE {fname}_a(int) SFUNC {fname} STYPE int FINALFUNC nosuch")
    session.execute(f"CREATE AGGREGATE {fname}_a(int) SFUNC {fname} STYPE int")
    with pytest.raises(InvalidRequest, match=re.escape(f"'{keyspace}.{fname}_a : (int) -> int' is not a user defined function")):
        session.execute(f"DROP FUNCTION {fname}_a")
    session.execute(f"DROP AGGREGATE {fname}_a")
    session.execute(f"DROP FUNCTION {fname}(int, int)")
    session.execute(f"DROP FUNCTION {fname}")


def test_user_types_as_arguments_results_and_state(session, keyspace, table, fname):
    """A user type (named bare, taken frozen) crosses into Lua as a table
    keyed by field names and comes back from one; it can be an
    aggregate's state. frozen<> around it, a type of another keyspace, a
    field the type lacks or one left out are refused in ScyllaDB's texts."""
    session.execute(f"CREATE TYPE {keyspace}.{fname}_t (f int, g text)")
    t = table(f"(k int PRIMARY KEY, u frozen<{fname}_t>)")
    for k in range(1, 4):
        session.execute(f"INSERT INTO {t} (k, u) VALUES ({k}, {{f: {k}, g: 'x{k}'}})")
    session.execute(f"CREATE FUNCTION {fname}(u {fname}_t) CALLED ON NULL INPUT RETURNS {fname}_t "
                    "LANGUAGE lua AS 'return {f = u.f * 10, g = u.g .. \"!\"}'")
    row = session.execute(f"SELECT {fname}(u) AS r FROM {t} WHERE k = 2").one()
    assert (row.r.f, row.r.g) == (20, "x2!")
    rows = list(session.execute("SELECT argument_types, return_type FROM system_schema.functions "
                                "WHERE keyspace_name = %s AND function_name = %s", [keyspace, fname]))
    assert rows[0].argument_types == [f"frozen<{fname}_t>"]
    session.execute(f"CREATE FUNCTION {fname}_acc(s {fname}_t, u {fname}_t) CALLED ON NULL INPUT RETURNS {fname}_t "
                    "LANGUAGE lua AS 'if s == nil then return u end return {f = s.f + u.f, g = s.g .. u.g}'")
    session.execute(f"CREATE AGGREGATE {fname}_agg({fname}_t) SFUNC {fname}_acc STYPE {fname}_t")
    total = session.execute(f"SELECT {fname}_agg(u) AS a FROM {t} WHERE k IN (1, 2, 3)").one().a
    assert (total.f, sorted(total.g)) == (6, sorted("x1x2x3"))
    with pytest.raises(InvalidRequest, match="User defined argument and return types should not be frozen"):
        session.execute(f"CREATE FUNCTION {fname}_z(u frozen<{fname}_t>) CALLED ON NULL INPUT RETURNS int "
                        "LANGUAGE lua AS 'return 1'")
    with pytest.raises(InvalidRequest, match="should not be frozen"):
        session.execute(f"CREATE AGGREGATE {fname}_z({fname}_t) SFUNC {fname}_acc STYPE frozen<{fname}_t>")
    with pytest.raises(InvalidRequest, match=f"cannot refer to a user type in keyspace system_auth"):
        session.execute(f"CREATE FUNCTION {fname}_z(u system_auth.{fname}_t) CALLED ON NULL INPUT RETURNS int "
                        "LANGUAGE lua AS 'return 1'")
    session.execute(f"CREATE FUNCTION {fname}_bad(u {fname}_t) CALLED ON NULL INPUT RETURNS {fname}_t "
                    "LANGUAGE lua AS 'return {f = 1, h = 2}'")
    with pytest.raises(FunctionFailure, match="invalid UDT field 'h'"):
        session.execute(f"SELECT {fname}_bad(u) FROM {t} WHERE k = 1")
    session.execute(f"CREATE FUNCTION {fname}_short(u {fname}_t) CALLED ON NULL INPUT RETURNS {fname}_t "
                    "LANGUAGE lua AS 'return {f = 1}'")
    with pytest.raises(FunctionFailure, match=f"key g missing in udt {fname}_t"):
        session.execute(f"SELECT {fname}_short(u) FROM {t} WHERE k = 1")
    session.execute(f"DROP AGGREGATE {fname}_agg")
    for f in (fname, f"{fname}_acc", f"{fname}_bad", f"{fname}_short"):
        session.execute(f"DROP FUNCTION {f}")


def test_counter_arguments_and_collections_inside_a_frozen_tuple(session, keyspace, table, fname):
    """A counter is passed as an integer; a frozen tuple column (whose
    collections are frozen inside) matches a function that names them bare."""
    t = table("(k int PRIMARY KEY, c counter)")
    session.execute(f"UPDATE {t} SET c = c + 4 WHERE k = 1")
    session.execute(f"CREATE FUNCTION {fname}(c counter) CALLED ON NULL INPUT RETURNS bigint "
                    "LANGUAGE lua AS 'return c + 1'")
    assert session.execute(f"SELECT {fname}(c) FROM {t} WHERE k = 1").one()[0] == 5
    t2 = table("(k int PRIMARY KEY, tup frozen<tuple<double, list<double>, map<int, boolean>>>)")
    session.execute(f"INSERT INTO {t2} (k, tup) VALUES (1, (1.5, [2.5], {{3: true}}))")
    session.execute(f"CREATE FUNCTION {fname}_t(tup tuple<double, list<double>, map<int, boolean>>) "
                    "CALLED ON NULL INPUT RETURNS list<double> LANGUAGE lua AS 'return tup[2]'")
    assert session.execute(f"SELECT {fname}_t(tup) FROM {t2} WHERE k = 1").one()[0] == [2.5]
    session.execute(f"DROP FUNCTION {fname}")
    session.execute(f"DROP FUNCTION {fname}_t")


def test_reduce_functions_listed_in_scylla_aggregates(session, keyspace, fname):
    """ScyllaDB's system_schema.scylla_aggregates has a row for each
    aggregate with a REDUCEFUNC (and none for one without)."""
    session.execute(f"CREATE FUNCTION {fname}(acc bigint, v int) RETURNS NULL ON NULL INPUT RETURNS bigint "
                    "LANGUAGE lua AS 'return acc + v'")
    session.execute(f"CREATE FUNCTION {fname}_r(a bigint, b bigint) RETURNS NULL ON NULL INPUT RETURNS bigint "
                    "LANGUAGE lua AS 'return a + b'")
    session.execute(f"CREATE AGGREGATE {fname}_a(int) SFUNC {fname} STYPE bigint REDUCEFUNC {fname}_r INITCOND 0")
    session.execute(f"CREATE AGGREGATE {fname}_b(int) SFUNC {fname} STYPE bigint INITCOND 0")
    rows = list(session.execute("SELECT aggregate_name, argument_types, reduce_func, state_type "
                                "FROM system_schema.scylla_aggregates WHERE keyspace_name = %s", [keyspace]))
    mine = [tuple(r) for r in rows if r.aggregate_name.startswith(fname)]
    assert mine == [(f"{fname}_a", ["int"], f"{fname}_r", "bigint")]
    for a in ("_a", "_b"):
        session.execute(f"DROP AGGREGATE {fname}{a}")
    session.execute(f"DROP FUNCTION {fname}_r")
    session.execute(f"DROP FUNCTION {fname}")


def test_aggregates(session, keyspace, table, fname):
    t = table("(k int, c int, v int, PRIMARY KEY (k, c))")
    for c in range(1, 5):
        session.execute(f"INSERT INTO {t} (k, c, v) VALUES (1, %s, %s)", [c, c * 10])
    session.execute(f"INSERT INTO {t} (k, c) VALUES (1, 5)")
    session.execute(f"CREATE FUNCTION {fname}_acc(s int, v int) RETURNS NULL ON NULL INPUT RETURNS int "
                    "LANGUAGE lua AS 'return s + v'")
    session.execute(f"CREATE FUNCTION {fname}_cnt(s tuple<int, int>, v int) CALLED ON NULL INPUT "
                    "RETURNS tuple<int, int> LANGUAGE lua AS "
                    "'if v == nil then return s end return {s[1] + v, s[2] + 1}'")
    session.execute(f"CREATE FUNCTION {fname}_avg(s tuple<int, int>) CALLED ON NULL INPUT RETURNS double "
                    "LANGUAGE lua AS 'return s[1] / s[2]'")
    # Without FINALFUNC; the NULL state of no INITCOND makes a strict
    # state function answer null.
    session.execute(f"CREATE AGGREGATE {fname}_sum(int) SFUNC {fname}_acc STYPE int INITCOND 0")
    session.execute(f"CREATE AGGREGATE {fname}_nosum(int) SFUNC {fname}_acc STYPE int")
    session.execute(f"CREATE AGGREGATE {fname}_mean(int) SFUNC {fname}_cnt STYPE tuple<int, int> "
                    f"FINALFUNC {fname}_avg INITCOND (0, 0)")
    # v of the row without one is null: a strict state function makes the state null there.
    row = session.execute(f"SELECT {fname}_sum(v) AS s, {fname}_nosum(v) AS n, {keyspace}.{fname}_mean(v) AS m "
                          f"FROM {t} WHERE k = 1 AND c < 5").one()
    assert (row.s, row.n, row.m) == (100, None, 25.0)
    assert session.execute(f"SELECT {fname}_mean(v) FROM {t} WHERE k = 1").one()[0] == 25.0
    rows = list(session.execute("SELECT aggregate_name, argument_types, state_func, state_type, final_func, "
                                "initcond, return_type FROM system_schema.aggregates WHERE keyspace_name = %s",
                                [keyspace]))
    mean = [r for r in rows if r.aggregate_name == f"{fname}_mean"][0]
    assert (mean.argument_types, mean.state_func, mean.final_func) == (["int"], f"{fname}_cnt", f"{fname}_avg")
    assert "tuple<int, int>" in mean.state_type
    assert (mean.return_type, mean.initcond) == ("double", "(0, 0)")
    with pytest.raises(InvalidRequest, match="used by user-defined aggregate"):
        session.execute(f"DROP FUNCTION {fname}_acc")
    with pytest.raises(InvalidRequest, match="State function .* not found"):
        session.execute(f"CREATE AGGREGATE {fname}_bad(text) SFUNC {fname}_acc STYPE int")
    session.execute(f"DROP AGGREGATE {fname}_sum")
    session.execute(f"DROP AGGREGATE {fname}_nosum(int)")
    session.execute(f"DROP FUNCTION {fname}_acc")


def test_describe_recreates_functions_and_aggregates(session, keyspace, fname):
    session.execute(f"CREATE FUNCTION {fname}_s(s int, v int) CALLED ON NULL INPUT RETURNS int "
                    "LANGUAGE lua AS $$\nif v == nil then return s end\nreturn s + v\n$$")
    session.execute(f"CREATE AGGREGATE {fname}_a(int) SFUNC {fname}_s STYPE int INITCOND 0")
    listed = {(r.type, r.name) for r in session.execute("DESCRIBE FUNCTIONS")}
    assert ("function", f"{fname}_s") in listed
    assert ("aggregate", f"{fname}_a") in {(r.type, r.name) for r in session.execute("DESCRIBE AGGREGATES")}
    function = session.execute(f"DESCRIBE FUNCTION {fname}_s").one().create_statement
    assert function == (f"CREATE FUNCTION {keyspace}.{fname}_s(s int, v int)\nCALLED ON NULL INPUT\nRETURNS int\n"
                        "LANGUAGE lua\nAS $$\nif v == nil then return s end\nreturn s + v\n$$;")
    aggregate = session.execute(f"DESCRIBE AGGREGATE {keyspace}.{fname}_a").one().create_statement
    assert aggregate == f"CREATE AGGREGATE {keyspace}.{fname}_a(int)\nSFUNC {fname}_s\nSTYPE int\nINITCOND 0;"
    keyspace_statements = [r.create_statement for r in session.execute(f"DESCRIBE KEYSPACE {keyspace}")]
    assert function in keyspace_statements and aggregate in keyspace_statements
    with pytest.raises(InvalidRequest, match="not found"):
        session.execute("DESCRIBE FUNCTION no_such_function")
    # The output recreates both.
    session.execute(f"DROP AGGREGATE {fname}_a")
    session.execute(f"DROP FUNCTION {fname}_s")
    session.execute(function)
    session.execute(aggregate)
    assert session.execute(f"DESCRIBE FUNCTION {fname}_s").one().create_statement == function
    assert session.execute(f"DESCRIBE AGGREGATE {fname}_a").one().create_statement == aggregate


@pytest.mark.skipif(bool(skip_reason()), reason=skip_reason() or "")
def test_functions_and_aggregates_survive_restart():
    with temp_node("shoal-udf-") as node:
        cluster, session = node.session()
        session.execute("CREATE KEYSPACE ks WITH replication = {'class': 'NetworkTopologyStrategy', "
                        "'replication_factor': 1}")
        session.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v int)")
        session.execute("INSERT INTO ks.t (k, v) VALUES (1, 20)")
        session.execute("CREATE FUNCTION ks.plus(s int, v int) RETURNS NULL ON NULL INPUT RETURNS int "
                        "LANGUAGE lua AS $$\n-- two lines, 'quoted'\nreturn s + v$$")
        session.execute("CREATE AGGREGATE ks.total(int) SFUNC plus STYPE int INITCOND 1")
        cluster.shutdown()
        node.kill()
        node.start()
        cluster, session = node.session()
        try:
            row = session.execute("SELECT ks.plus(v, 1) AS p, ks.total(v) AS t FROM ks.t").one()
            assert (row.p, row.t) == (21, 21)
            body = session.execute("SELECT body FROM system_schema.functions WHERE keyspace_name = 'ks'").one().body
            assert body == "\n-- two lines, 'quoted'\nreturn s + v"
        finally:
            cluster.shutdown()
