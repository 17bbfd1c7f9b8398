"""The `system.config` switches between ScyllaDB's and Cassandra's readings of
bind markers, changed live (`UPDATE system.config SET value = 'false' WHERE
name = ...`) on every shard, as ScyllaDB's cqlpy test_prepare.py sets them.
"""
from contextlib import contextmanager

import pytest

from conftest import IS_CASSANDRA

pytestmark = pytest.mark.skipif(IS_CASSANDRA, reason="system.config is ScyllaDB's")

SAME_NAME = "cql_duplicate_bind_variable_names_refer_to_same_variable"
UPPERCASE_IN = "cql_in_bind_variable_name_uses_uppercase_operator"


@contextmanager
def config(admin, name, value):
    select = admin.prepare("SELECT value FROM system.config WHERE name = ?")
    update = admin.prepare("UPDATE system.config SET value = ? WHERE name = ?")
    original = admin.execute(select, (name,)).one().value
    admin.execute(update, (value, name))
    try:
        yield
    finally:
        admin.execute(update, (original, name))


def test_both_switches_default_to_scylladb(admin):
    rows = {r.name: r.value for r in admin.execute("SELECT name, value FROM system.config")}
    assert rows[SAME_NAME] == "true" and rows[UPPERCASE_IN] == "true"


def test_a_name_given_twice_is_two_variables_in_cassandra_mode(admin, session, table):
    t = table("(p int, c int, PRIMARY KEY (p, c))")
    session.execute(f"INSERT INTO {t} (p, c) VALUES (1, 1)")
    session.execute(f"INSERT INTO {t} (p, c) VALUES (1, 2)")
    # ScyllaDB's reading: one variable.
    one = session.prepare(f"SELECT c FROM {t} WHERE c = :x AND p = :x")
    assert one.routing_key_indexes == [0]
    assert [r.c for r in session.execute(one, {"x": 1})] == [1]
    with config(admin, SAME_NAME, "false"):
        assert admin.execute(f"SELECT value FROM system.config WHERE name = '{SAME_NAME}'").one().value == "false"
        two = session.prepare(f"SELECT c FROM {t} WHERE c = :x AND p = :x")
        assert two.routing_key_indexes == [1]
        assert [r.c for r in session.execute(two, (2, 1))] == [2]
        assert [r.c for r in session.execute(two, {"x": 1})] == [1]
    with pytest.raises(Exception):
        admin.execute(f"UPDATE system.config SET value = 'maybe' WHERE name = '{SAME_NAME}'")


def test_in_markers_are_named_in_lowercase_in_cassandra_mode(admin, session, table):
    t = table('(p int, "C" int, PRIMARY KEY (p, "C"))')
    session.execute(f'INSERT INTO {t} (p, "C") VALUES (1, 1)')
    query = f'SELECT * FROM {t} WHERE p = ? AND "C" IN ?'
    assert [c.name for c in session.prepare(query).column_metadata] == ["p", "IN(C)"]
    with config(admin, UPPERCASE_IN, "false"):
        prepared = session.prepare(query)
        assert [c.name for c in prepared.column_metadata] == ["p", "in(C)"]
        assert list(session.execute(prepared, {"p": 1, "in(C)": [1, 2]})) == [(1, 1)]
        not_in = session.prepare(f'SELECT * FROM {t} WHERE p = ? AND "C" NOT IN ?')
        assert [c.name for c in not_in.column_metadata] == ["p", "not in(C)"]


def test_fixed_settings_are_listed_as_scylladb_encodes_them(admin):
    """Values are JSON, as ScyllaDB's: the experimental features Shoal
    runs (Lua functions: ScyllaDB's `udf`) and `restrict_dtcs`
    (DateTieredCompactionStrategy is refused); neither changes live."""
    import json
    rows = {r.name: r.value for r in admin.execute("SELECT name, value FROM system.config")}
    assert json.loads(rows["experimental_features"]) == ["udf"]
    assert json.loads(rows["restrict_dtcs"]) == "true"
    with pytest.raises(Exception, match="not live-updatable"):
        admin.execute("UPDATE system.config SET value = 'false' WHERE name = 'restrict_dtcs'")


def test_the_compact_storage_guardrail(admin, session, keyspace):
    # ScyllaDB's enable_create_table_with_compact_storage (cqlpy
    # test_guardrail_compact_storage.py): allowed unless set false.
    from cassandra import InvalidRequest
    name = "enable_create_table_with_compact_storage"
    rows = {r.name: r.value for r in admin.execute("SELECT name, value FROM system.config")}
    assert rows[name] == "true"
    with config(admin, name, "false"):
        with pytest.raises(InvalidRequest, match="'CREATE TABLE WITH COMPACT STORAGE' is disabled"):
            session.execute(f"CREATE TABLE {keyspace}.guarded (p int PRIMARY KEY, v int) WITH COMPACT STORAGE")
    session.execute(f"CREATE TABLE {keyspace}.guarded (p int PRIMARY KEY, v int) WITH COMPACT STORAGE")
    session.execute(f"DROP TABLE {keyspace}.guarded")


def test_the_replication_guardrails_refuse_what_their_fail_settings_forbid(admin, session):
    # ScyllaDB's replication guardrails (cqlpy
    # test_guardrail_replication_strategy.py): its defaults listed as it
    # lists them, lists read with or without brackets and quotes, and
    # CREATE/ALTER KEYSPACE refused past a fail setting, with its texts.
    from cassandra.protocol import ConfigurationException
    rows = {r.name: r.value for r in admin.execute("SELECT name, value FROM system.config")}
    assert rows["replication_strategy_warn_list"] == '["SimpleStrategy"]'
    assert rows["replication_strategy_fail_list"] == "[]"
    assert rows["minimum_replication_factor_warn_threshold"] == "3"
    assert rows["minimum_replication_factor_fail_threshold"] == "-1"
    assert rows["restrict_replication_simplestrategy"] == '"false"'
    simple = "WITH replication = {'class': 'SimpleStrategy', 'replication_factor': %d}"
    with config(admin, "replication_strategy_fail_list", "SimpleStrategy, LocalStrategy"):
        with pytest.raises(ConfigurationException, match="SimpleStrategy replication class is not recommended, "
                           "and forbidden by the current configuration, but was used for keyspace guarded"):
            session.execute("CREATE KEYSPACE guarded " + simple % 3)
    with config(admin, "minimum_replication_factor_fail_threshold", "3"):
        with pytest.raises(ConfigurationException, match="Replication Factor replication_factor=1 is forbidden"):
            session.execute("CREATE KEYSPACE guarded " + simple % 1)
        session.execute("CREATE KEYSPACE guarded " + simple % 3)
        with pytest.raises(ConfigurationException, match="minimum_replication_factor_fail_threshold=3"):
            session.execute("ALTER KEYSPACE guarded " + simple % 2)
    with config(admin, "restrict_replication_simplestrategy", "true"):
        with pytest.raises(ConfigurationException, match="replication_strategy_fail_list"):
            session.execute("ALTER KEYSPACE guarded " + simple % 1)
    session.execute("ALTER KEYSPACE guarded " + simple % 1)
    session.execute("DROP KEYSPACE guarded")
    admin.execute("UPDATE system.config SET value = '[SimpleStrategy]' WHERE name = 'replication_strategy_warn_list'")
    admin.execute("UPDATE system.config SET value = '[\"SimpleStrategy\"]' WHERE name = 'replication_strategy_warn_list'")
