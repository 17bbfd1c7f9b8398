"""Server-side DESCRIBE, as Cassandra 4+ answers it: through the driver (the
rows cqlsh 6 prints) and through both cqlsh builds, and the CQL it prints
recreates the object exactly."""
import os
import subprocess
from pathlib import Path

import pytest
from cassandra import InvalidRequest
from cassandra.protocol import ConfigurationException

from conftest import HOST, PORT, unique_name

ROOT = Path(__file__).resolve().parents[2]
CQLSHS = {
    "apache": Path(os.environ.get("SHOAL_CQLSH", ROOT / ".venv" / "bin" / "cqlsh")),
    "scylla": Path(os.environ.get("SHOAL_SCYLLA_CQLSH", ROOT / ".venv-scylla" / "bin" / "cqlsh")),
}


@pytest.fixture
def described(session, keyspace, request):
    """A type and a table using it, in the module's keyspace."""
    udt = unique_name(request, prefix="ty")
    table = unique_name(request, prefix="tb")
    session.execute("CREATE TYPE %s (street text, \"Zip\" int)" % udt)
    session.execute(
        "CREATE TABLE %s (k int, k2 text, c int, \"Value\" frozen<%s>, s int static, m map<text, int>, "
        "PRIMARY KEY ((k, k2), c)) WITH CLUSTERING ORDER BY (c DESC) AND comment = 'it''s described' "
        "AND default_time_to_live = 77 AND compaction = {'class': 'LeveledCompactionStrategy'}" % (table, udt))
    return udt, table


def test_describe_keyspaces_lists_every_keyspace(session, keyspace):
    rows = list(session.execute("DESCRIBE KEYSPACES"))
    assert rows[0]._fields == ("keyspace_name", "type", "name")
    names = [r.name for r in rows]
    assert keyspace in names and "system" in names and "system_schema" in names
    assert names == sorted(names)
    assert {r.type for r in rows} == {"keyspace"}


def test_describe_tables_and_types_list_the_session_keyspace(session, keyspace, described):
    udt, table = described
    assert (keyspace, "table", table) in [tuple(r) for r in session.execute("DESCRIBE TABLES")]
    assert [tuple(r) for r in session.execute("DESC TYPES")] == [(keyspace, "type", udt)]
    assert list(session.execute("DESCRIBE FUNCTIONS")) == []


def test_describe_table_recreates_the_table(session, keyspace, described):
    udt, table = described
    rows = list(session.execute("DESCRIBE TABLE %s.%s" % (keyspace, table)))
    assert len(rows) == 1
    row = rows[0]
    assert row._fields == ("keyspace_name", "type", "name", "create_statement")
    assert (row.keyspace_name, row.type, row.name) == (keyspace, "table", table)
    text = row.create_statement
    assert text.startswith("CREATE TABLE %s.%s (\n    k int,\n    k2 text,\n    c int,\n    s int static,\n"
                           % (keyspace, table)), text
    assert "    \"Value\" frozen<%s>,\n" % udt in text
    assert "    PRIMARY KEY ((k, k2), c)\n) WITH CLUSTERING ORDER BY (c DESC)\n" in text
    assert "AND comment = 'it''s described'" in text and "AND default_time_to_live = 77" in text
    before = session.cluster.metadata.keyspaces[keyspace].tables[table].export_as_string()
    session.execute("DROP TABLE %s" % table)
    session.execute(text)
    session.cluster.refresh_schema_metadata()
    after = session.cluster.metadata.keyspaces[keyspace].tables[table].export_as_string()
    assert after == before
    assert session.execute("DESCRIBE TABLE %s.%s" % (keyspace, table)).one().create_statement == text


def test_describe_keyspace_gives_the_keyspace_then_types_then_tables(session, keyspace, described):
    udt, table = described
    rows = list(session.execute("DESCRIBE KEYSPACE %s" % keyspace))
    assert rows[0].type == "keyspace" and rows[0].name == keyspace
    assert rows[0].create_statement.startswith("CREATE KEYSPACE %s WITH replication = {'class': " % keyspace)
    kinds = [r.type for r in rows]
    assert kinds == sorted(kinds, key=["keyspace", "type", "table"].index)
    assert ("type", udt) in [(r.type, r.name) for r in rows]
    only = list(session.execute("DESCRIBE ONLY KEYSPACE %s" % keyspace))
    assert [r.type for r in only] == ["keyspace"]
    # A bare name is a keyspace first, then a table of the session's keyspace.
    assert [r.type for r in session.execute("DESCRIBE %s" % keyspace)] == kinds
    assert [r.name for r in session.execute("DESCRIBE %s" % table)] == [table]
    schema = [r.keyspace_name for r in session.execute("DESCRIBE SCHEMA")]
    assert keyspace in schema and "system" not in schema
    assert "system" in [r.keyspace_name for r in session.execute("DESCRIBE FULL SCHEMA")]


def test_describe_cluster(session, admin):
    row = session.execute("DESCRIBE CLUSTER").one()
    assert row.partitioner == "Murmur3Partitioner"
    assert row.cluster == session.execute("SELECT cluster_name FROM system.local").one().cluster_name
    # With a keyspace in use: which node replicates each token range.
    local = session.execute("SELECT tokens, rpc_address FROM system.local").one()
    ownership = row.range_ownership
    assert set(ownership) == set(local.tokens)
    assert all(replicas == [str(local.rpc_address)] for replicas in ownership.values())
    # Without one, no range_ownership column.
    assert "range_ownership" not in admin.execute("DESCRIBE CLUSTER").one()._fields


@pytest.mark.parametrize("statement, message", [
    ("DESCRIBE TABLE nope", "Table 'nope' not found in keyspace '%s'"),
    ("DESCRIBE KEYSPACE nope", "'nope' not found in keyspaces"),
    ("DESCRIBE TYPE nope", "User defined type 'nope' not found in '%s'"),
    ("DESCRIBE nope", "'nope' not found in keyspace '%s'"),
])
def test_describe_of_a_missing_object_is_an_invalid_request(session, keyspace, statement, message):
    with pytest.raises(InvalidRequest) as e:
        session.execute(statement)
    assert (message % keyspace if "%s" in message else message) in str(e.value)


@pytest.mark.parametrize("flavour", sorted(CQLSHS))
def test_cqlsh_describe_output_recreates_the_keyspace(flavour, admin, tmp_path, request):
    path = CQLSHS[flavour]
    if not path.exists():
        pytest.skip("%s not installed (run scripts/venv.sh)" % path)
    env = dict(os.environ, HOME=str(tmp_path))
    env.pop("PYTHONPATH", None)

    def cqlsh(statement):
        proc = subprocess.run([str(path), HOST, str(PORT), "--protocol-version=4", "--connect-timeout=10",
                               "--request-timeout=30", "-e", statement],
                              capture_output=True, text=True, timeout=90, env=env, cwd=str(tmp_path))
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
        return proc.stdout

    ks = unique_name(request, prefix="dk")
    admin.execute("CREATE KEYSPACE %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}" % ks)
    admin.execute("CREATE TYPE %s.point (x int, y int)" % ks)
    admin.execute("CREATE TABLE %s.t (k int PRIMARY KEY, p frozen<point>, v text) WITH comment = 'kept'" % ks)
    try:
        listed = cqlsh("DESCRIBE KEYSPACES")
        assert ks in listed.split()
        out = cqlsh("DESCRIBE KEYSPACE %s" % ks)
        assert "CREATE KEYSPACE %s WITH replication" % ks in out
        assert "CREATE TYPE %s.point (" % ks in out and "CREATE TABLE %s.t (" % ks in out
        admin.execute("DROP KEYSPACE %s" % ks)
        script = tmp_path / "schema.cql"
        script.write_text(out)
        cqlsh("SOURCE '%s'" % script)
        assert cqlsh("DESCRIBE KEYSPACE %s" % ks) == out
        assert "Cluster:" in cqlsh("DESCRIBE CLUSTER")
    finally:
        admin.execute("DROP KEYSPACE IF EXISTS %s" % ks)


def test_scylladb_table_options_come_back_from_describe(session, keyspace, table):
    """ScyllaDB's paxos_grace_seconds and tombstone_gc are kept and printed,
    so running the description makes the same table (they were refused, or
    dropped from the description)."""
    t = table("(k int PRIMARY KEY, v int)", options="paxos_grace_seconds = 4321 AND "
              "tombstone_gc = {'mode': 'timeout', 'propagation_delay_in_seconds': '73'}")
    text = session.execute("DESCRIBE TABLE %s" % t).one().create_statement
    assert "\n    AND paxos_grace_seconds = 4321\n" in text, text
    assert text.endswith("\n    AND tombstone_gc = {'mode': 'timeout', 'propagation_delay_in_seconds': '73'};")
    copy = t + "_copy"
    session.execute(text.replace("%s.%s " % (keyspace, t), "%s.%s " % (keyspace, copy)))
    again = session.execute("DESCRIBE TABLE %s" % copy).one().create_statement
    assert again == text.replace("%s.%s " % (keyspace, t), "%s.%s " % (keyspace, copy))


def test_indexes_are_described_as_scylladb_writes_them(session, keyspace, table):
    """DESCRIBE INDEX in ScyllaDB's layout (no space before the target),
    with the options of the index's table (ScyllaDB's CREATE INDEX ...
    WITH), which the description recreates; WITH INTERNALS adds the id.
    A local index may index a frozen collection whole."""
    t = table("(p int, c int, v int, w int, PRIMARY KEY (p, c))")
    session.execute("CREATE INDEX ON %s (v)" % t)
    session.execute("CREATE INDEX %s_local ON %s ((p), w)" % (t, t))
    session.execute("CREATE INDEX %s_tuned ON %s (c) WITH comment = 'tuned' AND gc_grace_seconds = 13" % (t, t))
    one = lambda statement: session.execute(statement).one().create_statement
    # Every option of the index's table is printed, as ScyllaDB does.
    plain = one("DESCRIBE INDEX %s_v_idx" % t)
    assert plain.startswith("CREATE INDEX %s_v_idx ON %s.%s(v) WITH bloom_filter_fp_chance = " % (t, keyspace, t))
    assert "\n    AND default_time_to_live = 0\n" in plain and plain.endswith(";"), plain
    assert one("DESCRIBE INDEX %s_local" % t).startswith("CREATE INDEX %s_local ON %s.%s((p), w) WITH " % (t, keyspace, t))
    tuned = one("DESCRIBE INDEX %s_tuned" % t)
    assert tuned.startswith("CREATE INDEX %s_tuned ON %s.%s(c) WITH " % (t, keyspace, t)), tuned
    assert "\n    AND comment = 'tuned'\n" in tuned and "\n    AND gc_grace_seconds = 13\n" in tuned
    internal = one("DESCRIBE INDEX %s_v_idx WITH INTERNALS" % t)
    assert internal.startswith("CREATE INDEX %s_v_idx ON %s.%s(v) WITH ID = " % (t, keyspace, t)), internal
    assert "\n    AND gc_grace_seconds = 864000\n" in internal
    session.execute("DROP INDEX %s_tuned" % t)
    session.execute(tuned)
    assert one("DESCRIBE INDEX %s_tuned" % t) == tuned
    f = table("(p int PRIMARY KEY, l frozen<list<int>>)")
    session.execute("CREATE INDEX %s_lf ON %s ((p), full(l))" % (f, f))
    session.execute("INSERT INTO %s (p, l) VALUES (1, [1, 2])" % f)
    assert list(session.execute("SELECT p FROM %s WHERE p = 1 AND l = [1, 2]" % f)) == [(1,)]
    assert one("DESCRIBE INDEX %s_lf" % f).startswith("CREATE INDEX %s_lf ON %s.%s((p), full(l)) WITH " % (f, keyspace, f))
    # A bare name finds a user type too (ScyllaDB's generic DESCRIBE).
    session.execute("CREATE TYPE %s_ty (a int)" % t)
    assert list(session.execute("DESCRIBE %s_ty" % t)) == list(session.execute("DESCRIBE TYPE %s_ty" % t))


def test_type_names_and_nested_frozen(session, keyspace, request):
    """A user type may have any quoted name, and frozen<frozen<T>> is
    frozen<T>, as in ScyllaDB; DESCRIBE quotes the name wherever it is used."""
    name = "ty @ %s" % unique_name(request, prefix="q")
    session.execute('CREATE TYPE "%s" (a int)' % name)
    session.execute('CREATE TYPE %s_outer (f frozen<frozen<list<frozen<"%s">>>>)' % (
        unique_name(request, prefix="o"), name))
    text = session.execute('DESCRIBE TYPE %s_outer' % unique_name(request, prefix="o")).one().create_statement
    assert '    f frozen<list<frozen<"%s">>>\n' % name in text, text


def test_a_keyspace_without_tablets_is_described_and_recreated(session, request):
    """ScyllaDB's `tablets = {'enabled': false}` is accepted (token ranges
    are all Shoal has); asking for tablets is refused."""
    ks = unique_name(request, prefix="kt")
    session.execute("CREATE KEYSPACE %s WITH replication = {'class': 'NetworkTopologyStrategy', "
                    "'replication_factor': 1} AND tablets = {'enabled': false}" % ks)
    try:
        text = session.execute("DESCRIBE ONLY KEYSPACE %s" % ks).one().create_statement
        session.execute("DROP KEYSPACE %s" % ks)
        session.execute(text)
        assert session.execute("DESCRIBE ONLY KEYSPACE %s" % ks).one().create_statement == text
    finally:
        session.execute("DROP KEYSPACE IF EXISTS %s" % ks)
    with pytest.raises(ConfigurationException, match="Tablets are not supported"):
        session.execute("CREATE KEYSPACE %s_t WITH replication = {'class': 'NetworkTopologyStrategy', "
                        "'replication_factor': 1} AND tablets = {'enabled': true}" % ks)
