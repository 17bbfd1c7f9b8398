"""Where ScyllaDB's answer is the one applications see: a key `= null` in a
read matches nothing, ALTER KEYSPACE moves a NetworkTopologyStrategy
keyspace's replication by one replica at a time, a timestamp literal with
more than milliseconds is refused, cells of one timestamp reconcile with an
expiring value winning, a view keeps a base row whose key column is the
empty string and refuses IS NOT NULL on a column outside its key (rather
than ignore it), a bind marker name given twice is one variable, a
non-frozen user type keeps one cell per field (reconciled one by one, each
with its own write time), and the texts of duration, UTF-8, date and
`blobAs*` errors and the names of `IN ?` markers are ScyllaDB's
(applications match on them). Checks Cassandra answers differently are
skipped against it.
"""
import time
import uuid
from datetime import datetime

import pytest

from cassandra import FunctionFailure, InvalidRequest
from cassandra.protocol import SyntaxException

from conftest import IS_CASSANDRA, wait_until

scylla_only = pytest.mark.skipif(IS_CASSANDRA, reason="ScyllaDB's behaviour, not Cassandra's")


def rows(session, cql, params=None):
    return [tuple(r) for r in session.execute(cql, params)]


# --- a key = null in a read ---------------------------------------------------


@scylla_only
def test_key_equal_null_reads_nothing_and_counts_zero(session, table):
    t = table("(p int, c int, v int, PRIMARY KEY (p, c))")
    session.execute(f"INSERT INTO {t} (p, c, v) VALUES (1, 1, 1)")
    assert rows(session, f"SELECT count(*) FROM {t} WHERE p = null") == [(0,)]
    assert rows(session, f"SELECT count(*), count(v), min(v), sum(v) FROM {t} WHERE p = null") == [(0, 0, None, 0)]
    assert rows(session, f"SELECT * FROM {t} WHERE p = 1 AND c = null") == []
    prepared = session.prepare(f"SELECT * FROM {t} WHERE p = ?")
    assert rows(session, prepared, [None]) == []
    # A write of a null key is still refused.
    with pytest.raises(InvalidRequest, match="null value"):
        session.execute(f"DELETE FROM {t} WHERE p = null")


# --- ALTER KEYSPACE -----------------------------------------------------------


def dc(session):
    return session.execute("SELECT data_center FROM system.local").one()[0]


def test_nts_replication_changes_by_any_amount(session):
    """Keyspaces live on the token ring (vnodes): an ALTER may move a
    replication factor by more than one, and use the shorthand, as a
    ScyllaDB keyspace without tablets may."""
    here = dc(session)
    ks = "ks_rf_" + uuid.uuid4().hex[:8]
    session.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'NetworkTopologyStrategy', '{here}': 1}}")
    try:
        session.execute(f"ALTER KEYSPACE {ks} WITH replication = {{'class': 'NetworkTopologyStrategy', '{here}': 3}}")
        rep = session.execute(f"SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = '{ks}'").one()[0]
        assert rep[here] == "3"
        session.execute(
            f"ALTER KEYSPACE {ks} WITH replication = {{'class': 'NetworkTopologyStrategy', 'replication_factor': 1}}")
        rep = session.execute(f"SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = '{ks}'").one()[0]
        assert rep[here] == "1"
    finally:
        session.execute(f"DROP KEYSPACE {ks}")


@scylla_only
def test_keyspace_storage_option_local(session):
    ks = "ks_storage_" + uuid.uuid4().hex[:8]
    rep = "{'class': 'NetworkTopologyStrategy', 'replication_factor': 1}"
    session.execute(f"CREATE KEYSPACE {ks} WITH replication = {rep} AND storage = {{'type': 'LOCAL'}}")
    session.execute(f"DROP KEYSPACE {ks}")
    with pytest.raises(InvalidRequest, match="Unknown storage type: S4"):
        session.execute(f"CREATE KEYSPACE {ks} WITH replication = {rep} AND storage = {{'type': 'S4'}}")


# --- literals and their errors ------------------------------------------------


@scylla_only
def test_timestamp_beyond_milliseconds_is_refused(session, table):
    t = table("(p int PRIMARY KEY, ts timestamp)")
    with pytest.raises(InvalidRequest, match=r"Milliseconds length exceeds expected \(6\)"):
        session.execute(f"INSERT INTO {t} (p, ts) VALUES (1, '2011-02-03 04:05:12.345678+0000')")
    insert_json = session.prepare(f"INSERT INTO {t} (p, ts) VALUES (?, fromJson(?))")
    with pytest.raises(FunctionFailure, match="Milliseconds"):
        session.execute(insert_json, [1, '"2014-01-01 12:15:45.0000000Z"'])
    session.execute(f"INSERT INTO {t} (p, ts) VALUES (1, '2011-02-03 04:05:12.345+0000')")
    session.execute(f"INSERT INTO {t} (p, ts) VALUES (2, '2011-02-03  Z ')")
    assert sorted(rows(session, f"SELECT p, ts FROM {t}")) == [
        (1, datetime(2011, 2, 3, 4, 5, 12, 345000)), (2, datetime(2011, 2, 3))]


def refused(session, table, column, cases):
    """Each (value, error class, message pattern) written to `column` is refused so."""
    t = table(f"(k int PRIMARY KEY, {column})")
    name = column.split()[0]
    for value, error, pattern in cases:
        with pytest.raises(error, match=pattern):
            session.execute(f"INSERT INTO {t} (k, {name}) VALUES (1, {value})")


def test_duration_unit_errors(session, table):
    refused(session, table, "d duration", [
        ("2m3m", InvalidRequest, "The minutes are specified multiple times"),
        ("12s3m", InvalidRequest, "The seconds should be after minutes"),
        ("1y-2mo", SyntaxException, "-2mo"),
    ])


@scylla_only
def test_value_validation_texts(session, table):
    refused(session, table, "t text", [
        ("blobAsText(0xc0)", InvalidRequest, "value 0xc0 is not a valid binary representation for type text")])
    refused(session, table, "i int", [
        ("blobAsInt(0x0000000000)", InvalidRequest,
         "value 0x0000000000 is not a valid binary representation for type int")])
    refused(session, table, "a ascii", [("'שלום'", InvalidRequest, "Invalid ASCII character")])
    refused(session, table, "d date", [("-123", InvalidRequest, r"Unable to make unsigned int \(for date\) from: '-123'")])


# --- bind marker names --------------------------------------------------------


def two_rows(session, table):
    """A table holding the rows (1, 1) and (1, 2)."""
    t = table("(p int, c int, PRIMARY KEY (p, c))")
    for c in (1, 2):
        session.execute(f"INSERT INTO {t} (p, c) VALUES (1, {c})")
    return t


@scylla_only
def test_in_markers_are_named_like_scylla(session, table):
    t = two_rows(session, table)
    prepared = session.prepare(f"SELECT * FROM {t} WHERE p = ? AND c IN ?")
    assert [col.name for col in prepared.column_metadata] == ["p", "IN(c)"]
    assert rows(session, prepared, {"p": 1, "IN(c)": [1, 3]}) == [(1, 1)]
    prepared = session.prepare(f"SELECT * FROM {t} WHERE p = ? AND c NOT IN ? ALLOW FILTERING")
    assert [col.name for col in prepared.column_metadata] == ["p", "NOT IN(c)"]
    assert rows(session, prepared, {"p": 1, "NOT IN(c)": [2]}) == [(1, 1)]


# --- cells of one timestamp ---------------------------------------------------


def test_equal_timestamps_prefer_the_expiring_then_the_later_expiry(session, table):
    t = table("(k int PRIMARY KEY, v int, w int)")
    for k, first, second, expected in [
        (1, "", " AND TTL 100", (2, 1)),  # expiring beats not expiring
        (2, " AND TTL 100", "", (1, 2)),
        (3, " AND TTL 100", " AND TTL 200", (2, 1)),  # the later expiry
        (4, " AND TTL 200", " AND TTL 100", (1, 2)),
    ]:
        session.execute(f"INSERT INTO {t} (k, v, w) VALUES ({k}, 1, 2) USING TIMESTAMP 1000{first}")
        session.execute(f"INSERT INTO {t} (k, v, w) VALUES ({k}, 2, 1) USING TIMESTAMP 1000{second}")
        assert rows(session, f"SELECT v, w FROM {t} WHERE k = {k}") == [expected], k


@scylla_only
def test_system_config_says_future_timestamps_are_not_restricted(session, table):
    [(value,)] = rows(session, "SELECT value FROM system.config WHERE name = 'restrict_future_timestamp'")
    assert value == "false"
    t = table("(k int PRIMARY KEY, v int)")
    future = int(time.time() * 1e9)
    session.execute(f"INSERT INTO {t} (k, v) VALUES (1, 1) USING TIMESTAMP {future}")
    assert rows(session, f"SELECT writetime(v) FROM {t} WHERE k = 1") == [(future,)]


# --- materialized views -------------------------------------------------------


@scylla_only
def test_view_keeps_a_row_under_the_empty_partition_key(session, table, keyspace):
    t = table("(p int PRIMARY KEY, v text)")
    mv = f"{keyspace}.mv_{uuid.uuid4().hex[:8]}"
    session.execute(f"CREATE MATERIALIZED VIEW {mv} AS SELECT * FROM {t} "
                    "WHERE v IS NOT NULL AND p IS NOT NULL PRIMARY KEY (v, p)")
    try:
        for p, v in [(123, ""), (1, "dog"), (2, "cat")]:
            session.execute(f"INSERT INTO {t} (p, v) VALUES ({p}, '{v}')")
        wait_until(lambda: len(rows(session, f"SELECT * FROM {mv}")) == 3)
        assert sorted(rows(session, f"SELECT * FROM {mv}")) == [("", 123), ("cat", 2), ("dog", 1)]
        assert rows(session, f"SELECT * FROM {mv} WHERE v = ''") == [("", 123)]
        session.execute(f"UPDATE {t} SET v = 'cow' WHERE p = 123")
        assert rows(session, f"SELECT * FROM {mv} WHERE v = ''") == []
    finally:
        session.execute(f"DROP MATERIALIZED VIEW {mv}")


def test_view_where_clause_is_optional_in_the_grammar(session, table, keyspace):
    t = table("(p int, c int, s int static, PRIMARY KEY (p, c))")
    with pytest.raises(InvalidRequest, match="[Ss]tatic column"):
        session.execute(f"CREATE MATERIALIZED VIEW {keyspace}.mv_static AS SELECT p, s FROM {t} PRIMARY KEY (p)")


@scylla_only
def test_a_bind_marker_name_given_twice_is_one_variable(session, table):
    t = two_rows(session, table)
    prepared = session.prepare(f"SELECT * FROM {t} WHERE p = :x AND c = :x")
    assert [col.name for col in prepared.column_metadata] == ["x"]
    assert prepared.routing_key_indexes == [0]
    assert rows(session, prepared, {"x": 1}) == [(1, 1)]


# --- non-frozen user types: one cell per field ---------------------------------


def test_udt_fields_reconcile_one_by_one_and_have_write_times(session, keyspace, table):
    session.execute(f"CREATE TYPE IF NOT EXISTS {keyspace}.two_ints (a int, b int)")
    t = table("(p int PRIMARY KEY, x two_ints)")
    session.execute(f"INSERT INTO {t} (p) VALUES (1) USING TIMESTAMP 1")
    # A field written with an older timestamp than the other one is kept.
    session.execute(f"UPDATE {t} USING TIMESTAMP 2000 SET x.b = 17 WHERE p = 1")
    session.execute(f"UPDATE {t} USING TIMESTAMP 1000 SET x.a = 42 WHERE p = 1")
    [(x,)] = rows(session, f"SELECT x FROM {t} WHERE p = 1")
    assert (x.a, x.b) == (42, 17)
    assert rows(session, f"SELECT writetime(x.a), writetime(x.b) FROM {t} WHERE p = 1") == [(1000, 2000)]
    session.execute(f"UPDATE {t} USING TTL 3600 SET x.a = 1 WHERE p = 1")
    [(ttl_a, ttl_b)] = rows(session, f"SELECT ttl(x.a), ttl(x.b) FROM {t} WHERE p = 1")
    assert 3500 < ttl_a <= 3600 and ttl_b is None
    # Deleting every field leaves no value; a whole value replaces them all.
    session.execute(f"DELETE x.a, x.b FROM {t} WHERE p = 1")
    assert rows(session, f"SELECT x FROM {t} WHERE p = 1") == [(None,)]
    session.execute(f"UPDATE {t} SET x = {{b: 5}} WHERE p = 1")
    [(x,)] = rows(session, f"SELECT x FROM {t} WHERE p = 1")
    assert (x.a, x.b) == (None, 5)
    with pytest.raises(InvalidRequest, match="has no field c"):
        session.execute(f"SELECT writetime(x.c) FROM {t}")


def test_view_refuses_is_not_null_on_a_column_outside_its_key(session, table, keyspace):
    t = table("(p int PRIMARY KEY, xyz int)")
    with pytest.raises(InvalidRequest, match="Non-primary key columns cannot be restricted.*xyz"):
        session.execute(f"CREATE MATERIALIZED VIEW {keyspace}.mv_xyz AS SELECT * FROM {t} "
                        "WHERE p IS NOT NULL AND xyz IS NOT NULL PRIMARY KEY (p)")


@scylla_only
def test_null_compaction_strategy_is_accepted(session, keyspace, table):
    # ScyllaDB's strategy that never compacts on its own (tests use it to
    # keep SSTables apart).
    name = table("(p int PRIMARY KEY)", "compaction = {'class': 'NullCompactionStrategy'}")
    [(compaction,)] = rows(
        session, f"SELECT compaction FROM system_schema.tables WHERE keyspace_name = '{keyspace}' AND table_name = '{name}'")
    assert compaction["class"] == "NullCompactionStrategy"
