"""ScyllaDB's Change Data Capture, as its applications and connectors read it.

`WITH cdc = {'enabled': true}` makes `<table>_scylla_cdc_log` beside the
table, with ScyllaDB's columns; every write to the table adds log rows
(operation codes, `cdc$time` from the write timestamp, `cdc$batch_seq_no`,
pre- and post-images when asked for); the streams a log row lands in are
listed in `system_distributed.cdc_streams_descriptions_v2`.

Runs its own server (from SHOAL_BIN) so it can restart it.
"""
import re
import uuid

import pytest
from cassandra import InvalidRequest
from cassandra.protocol import ConfigurationException

from node import skip_reason, temp_node

if skip_reason():
    pytest.skip(skip_reason(), allow_module_level=True)

# ScyllaDB's cdc::operation codes.
PRE_IMAGE, UPDATE, INSERT, ROW_DELETE, PARTITION_DELETE = 0, 1, 2, 3, 4
RANGE_START_INCLUSIVE, RANGE_START_EXCLUSIVE, RANGE_END_INCLUSIVE, RANGE_END_EXCLUSIVE = 5, 6, 7, 8
POST_IMAGE = 9


@pytest.fixture(scope="module")
def node():
    with temp_node("shoal-cdc-") as n:
        cluster, session = n.session()
        session.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        cluster.shutdown()
        yield n


@pytest.fixture
def session(node):
    cluster, session = node.session()
    session.set_keyspace("ks")
    yield session
    cluster.shutdown()


def log(session, table, columns="*"):
    """The log rows of `table`, in write order (time, then batch_seq_no)."""
    rows = list(session.execute(f"SELECT {columns}, \"cdc$time\", \"cdc$batch_seq_no\" FROM {table}_scylla_cdc_log"))
    return sorted(rows, key=lambda r: (r[-2].time, r[-1]))


def test_log_table_schema(session):
    session.execute("CREATE TABLE sch (p int, c text, v int, s int static, m map<int, text>, l list<int>, "
                    "PRIMARY KEY (p, c)) WITH cdc = {'enabled': true, 'ttl': 3600}")
    columns = {(r.column_name, r.kind, r.type) for r in session.execute(
        "SELECT column_name, kind, type FROM system_schema.columns "
        "WHERE keyspace_name = 'ks' AND table_name = 'sch_scylla_cdc_log'")}
    assert columns == {
        ("cdc$stream_id", "partition_key", "blob"),
        ("cdc$time", "clustering", "timeuuid"),
        ("cdc$batch_seq_no", "clustering", "int"),
        ("cdc$operation", "regular", "tinyint"),
        ("cdc$ttl", "regular", "bigint"),
        ("cdc$end_of_batch", "regular", "boolean"),
        ("p", "regular", "int"),
        ("c", "regular", "text"),
        ("v", "regular", "int"),
        ("cdc$deleted_v", "regular", "boolean"),
        ("s", "regular", "int"),
        ("cdc$deleted_s", "regular", "boolean"),
        ("m", "regular", "frozen<map<int, text>>"),
        ("cdc$deleted_m", "regular", "boolean"),
        ("cdc$deleted_elements_m", "regular", "frozen<set<int>>"),
        ("l", "regular", "frozen<map<timeuuid, int>>"),
        ("cdc$deleted_l", "regular", "boolean"),
        ("cdc$deleted_elements_l", "regular", "frozen<set<timeuuid>>"),
    }
    table = session.execute("SELECT comment, gc_grace_seconds, compaction FROM system_schema.tables "
                            "WHERE keyspace_name = 'ks' AND table_name = 'sch_scylla_cdc_log'").one()
    assert table.comment == "CDC log for ks.sch"
    assert table.gc_grace_seconds == 0
    assert table.compaction["class"].endswith("TimeWindowCompactionStrategy")
    assert table.compaction["compaction_window_size"] == "3"


def test_describe_shows_options_and_log(session):
    session.execute("CREATE TABLE descr (p int PRIMARY KEY, v int) WITH cdc = {'enabled': true, 'preimage': true}")
    described = {r.name: r.create_statement for r in session.execute("DESCRIBE KEYSPACE ks")}
    assert ("cdc = {'delta': 'full', 'enabled': 'true', 'postimage': 'false', 'preimage': 'true', 'ttl': '86400'}"
            in described["descr"])
    log_statement = described["descr_scylla_cdc_log"]
    assert log_statement.startswith("ALTER TABLE ks.descr_scylla_cdc_log WITH ")
    # The log's description runs, and describes the same table again.
    session.execute(log_statement)
    again = {r.name: r.create_statement for r in session.execute("DESCRIBE KEYSPACE ks")}
    assert again["descr_scylla_cdc_log"] == log_statement


def test_bad_options_are_refused(session):
    with pytest.raises(ConfigurationException, match='Invalid value for CDC option "preimage": maybe'):
        session.execute("CREATE TABLE badopt (p int PRIMARY KEY) WITH cdc = {'enabled': true, 'preimage': 'maybe'}")
    with pytest.raises(ConfigurationException, match="Invalid CDC option: colour"):
        session.execute("CREATE TABLE badopt (p int PRIMARY KEY) WITH cdc = {'enabled': true, 'colour': 'red'}")
    with pytest.raises(InvalidRequest, match="Counter support not implemented"):
        session.execute("CREATE TABLE badopt (p int PRIMARY KEY, n counter) WITH cdc = {'enabled': true}")


def test_delta_rows_of_insert_update_and_deletes(session):
    session.execute("CREATE TABLE ops (p int, c int, v int, s int static, PRIMARY KEY (p, c)) "
                    "WITH cdc = {'enabled': true}")
    session.execute("INSERT INTO ops (p, c, v) VALUES (1, 1, 10) USING TIMESTAMP 1000")
    session.execute("UPDATE ops USING TIMESTAMP 2000 AND TTL 500 SET v = 20 WHERE p = 1 AND c = 1")
    session.execute("UPDATE ops USING TIMESTAMP 3000 SET s = 7 WHERE p = 1")
    session.execute("UPDATE ops USING TIMESTAMP 4000 SET v = null WHERE p = 1 AND c = 1")
    session.execute("DELETE FROM ops USING TIMESTAMP 5000 WHERE p = 1 AND c = 1")
    session.execute("DELETE FROM ops USING TIMESTAMP 6000 WHERE p = 1 AND c >= 2 AND c < 5")
    session.execute("DELETE FROM ops USING TIMESTAMP 7000 WHERE p = 1")
    rows = log(session, "ops", '"cdc$operation", p, c, v, s, "cdc$deleted_v", "cdc$ttl", "cdc$end_of_batch"')
    got = [tuple(r[:8]) for r in rows]
    assert got == [
        (INSERT, 1, 1, 10, None, None, None, True),
        (UPDATE, 1, 1, 20, None, None, 500, True),
        (UPDATE, 1, None, None, 7, None, None, True),
        (UPDATE, 1, 1, None, None, True, None, True),
        (ROW_DELETE, 1, 1, None, None, None, None, True),
        # (Bound rows carry no clustering values yet, and `c > x`, `c <= x`
        # are logged by the bounds they are stored as: the key after x,
        # inclusive, and exclusive.)
        (RANGE_START_INCLUSIVE, 1, None, None, None, None, None, None),
        (RANGE_END_EXCLUSIVE, 1, None, None, None, None, None, True),
        (PARTITION_DELETE, 1, None, None, None, None, None, True),
    ]
    # cdc$time carries the write timestamp (µs; a timeuuid counts 100 ns
    # from 1582-10-15).
    times = [r[-2] for r in rows]
    assert [(t.time - 0x01B21DD213814000) // 10 for t in times] == [1000, 2000, 3000, 4000, 5000, 6000, 6000, 7000]
    assert [r[-1] for r in rows][5:7] == [0, 1]


def test_collections_are_logged_frozen_with_deleted_elements(session):
    session.execute("CREATE TABLE colls (p int PRIMARY KEY, m map<int, text>, st set<int>) "
                    "WITH cdc = {'enabled': true}")
    session.execute("UPDATE colls SET m = m + {1: 'a', 2: 'b'}, st = st - {5} WHERE p = 1")
    session.execute("UPDATE colls SET m = {3: 'c'} WHERE p = 1")
    rows = log(session, "colls", '"cdc$operation", m, "cdc$deleted_m", st, "cdc$deleted_elements_st"')
    assert [tuple(r[:5]) for r in rows] == [
        (UPDATE, {1: 'a', 2: 'b'}, None, None, {5}),
        (UPDATE, {3: 'c'}, True, None, None),
    ]


def test_batch_rows_share_a_time_and_are_numbered(session):
    session.execute("CREATE TABLE bat (p int, c int, v int, PRIMARY KEY (p, c)) WITH cdc = {'enabled': true}")
    session.execute("BEGIN UNLOGGED BATCH USING TIMESTAMP 100 "
                    "INSERT INTO bat (p, c, v) VALUES (1, 1, 1); INSERT INTO bat (p, c, v) VALUES (1, 2, 2); "
                    "APPLY BATCH")
    rows = log(session, "bat", '"cdc$operation", c, "cdc$end_of_batch"')
    assert [tuple(r[:3]) for r in rows] == [(INSERT, 1, None), (INSERT, 2, True)]
    assert rows[0][-2] == rows[1][-2]
    assert [r[-1] for r in rows] == [0, 1]


def test_preimage_and_postimage(session):
    session.execute("CREATE TABLE img (p int, c int, v int, w int, PRIMARY KEY (p, c)) "
                    "WITH cdc = {'enabled': true, 'preimage': true, 'postimage': true}")
    session.execute("INSERT INTO img (p, c, v, w) VALUES (1, 1, 10, 100)")
    session.execute("UPDATE img SET v = 11 WHERE p = 1 AND c = 1")
    rows = log(session, "img", '"cdc$operation", v, w, "cdc$end_of_batch"')
    got = [tuple(r[:4]) for r in rows]
    assert got == [
        # The insert: nothing before it; its post-image is the whole row.
        (INSERT, 10, 100, None),
        (POST_IMAGE, 10, 100, True),
        # The update: the pre-image shows the columns it writes, the
        # post-image the whole row.
        (PRE_IMAGE, 10, None, None),
        (UPDATE, 11, None, None),
        (POST_IMAGE, 11, 100, True),
    ]
    assert [r[-1] for r in rows] == [0, 1, 0, 1, 2]


def test_full_preimage_and_keys_delta(session):
    session.execute("CREATE TABLE fullimg (p int PRIMARY KEY, v int, w int) "
                    "WITH cdc = {'enabled': true, 'preimage': 'full', 'delta': 'keys'}")
    session.execute("INSERT INTO fullimg (p, v, w) VALUES (1, 10, 100)")
    session.execute("UPDATE fullimg SET v = 11 WHERE p = 1")
    rows = log(session, "fullimg", '"cdc$operation", p, v, w')
    assert [tuple(r[:4]) for r in rows] == [
        (INSERT, 1, None, None),
        (PRE_IMAGE, 1, 10, 100),
        (UPDATE, 1, None, None),
    ]


def test_log_rows_expire_after_the_cdc_ttl(session):
    session.execute("CREATE TABLE short (p int PRIMARY KEY, v int) WITH cdc = {'enabled': true, 'ttl': 1000}")
    session.execute("INSERT INTO short (p, v) VALUES (1, 1)")
    row = session.execute('SELECT TTL(v), TTL("cdc$operation") FROM short_scylla_cdc_log').one()
    assert 990 <= row[0] <= 1000 and 990 <= row[1] <= 1000
    session.execute("CREATE TABLE forever (p int PRIMARY KEY, v int) WITH cdc = {'enabled': true, 'ttl': 0}")
    session.execute("INSERT INTO forever (p, v) VALUES (1, 1)")
    assert session.execute('SELECT TTL(v) FROM forever_scylla_cdc_log').one()[0] is None


def test_streams_from_the_generation_tables_cover_the_log(session):
    session.execute("CREATE TABLE streams (p int PRIMARY KEY, v int) WITH cdc = {'enabled': true}")
    insert = session.prepare("INSERT INTO streams (p, v) VALUES (?, ?)")
    for i in range(200):
        session.execute(insert, (i, i))
    generations = list(session.execute(
        "SELECT time FROM system_distributed.cdc_generation_timestamps WHERE key = 'timestamps'"))
    assert len(generations) == 1
    generation = generations[0].time
    described = list(session.execute(
        "SELECT range_end, streams FROM system_distributed.cdc_streams_descriptions_v2 WHERE time = %s",
        (generation,)))
    streams = set()
    for row in described:
        streams.update(row.streams)
    # One stream per vnode and shard (this node runs 2 shards).
    assert len(streams) == 2 * len(described)
    for stream in streams:
        assert len(stream) == 16
        assert int.from_bytes(stream[8:], "big") & 0xF == 1  # version 1
    logged = {r[0] for r in session.execute('SELECT "cdc$stream_id" FROM streams_scylla_cdc_log')}
    assert logged <= streams
    assert len(logged) > 10
    # Every base row is found by reading its stream.
    found = set()
    for stream in logged:
        found.update(r.p for r in session.execute(
            'SELECT p FROM streams_scylla_cdc_log WHERE "cdc$stream_id" = %s', (stream,)))
    assert found == set(range(200))
    # A stream's first 8 bytes are a token of the vnode it is listed for.
    ends = sorted(r.range_end for r in described)
    by_end = {r.range_end: set(r.streams) for r in described}
    for stream in list(logged)[:20]:
        token = int.from_bytes(stream[:8], "big", signed=True)
        end = next((e for e in ends if e >= token), ends[0])
        assert stream in by_end[end]


def test_disable_keeps_the_log_and_drop_removes_it(session):
    session.execute("CREATE TABLE life (p int PRIMARY KEY, v int, u int) WITH cdc = {'enabled': true}")
    session.execute("INSERT INTO life (p, v) VALUES (1, 1)")
    session.execute("ALTER TABLE life WITH cdc = {'enabled': false}")
    session.execute("INSERT INTO life (p, v) VALUES (2, 2)")
    assert [r.p for r in session.execute("SELECT p FROM life_scylla_cdc_log")] == [1]
    with pytest.raises(InvalidRequest, match="Although the base table has deactivated CDC"):
        session.execute("ALTER TABLE life_scylla_cdc_log ADD x int")
    session.execute("ALTER TABLE life WITH cdc = {'enabled': true}")
    session.execute("ALTER TABLE life DROP u")
    session.execute("ALTER TABLE life ADD n text")
    session.execute("INSERT INTO life (p, v, n) VALUES (3, 3, 'x')")
    assert sorted((r.p, r.n) for r in session.execute("SELECT p, n FROM life_scylla_cdc_log")) == [
        (1, None), (3, 'x')]
    with pytest.raises(InvalidRequest, match=re.escape("Modify the base table instead.")):
        session.execute("ALTER TABLE life_scylla_cdc_log DROP v")
    session.execute("DROP TABLE life")
    names = [r.table_name for r in session.execute(
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = 'ks'")]
    assert "life_scylla_cdc_log" not in names


def test_taken_log_name(session):
    session.execute("CREATE TABLE taken_scylla_cdc_log (p int PRIMARY KEY)")
    with pytest.raises(InvalidRequest, match="Cannot create CDC log table for table ks.taken because a table of "
                                             "name ks.taken_scylla_cdc_log already exists"):
        session.execute("CREATE TABLE taken (p int PRIMARY KEY) WITH cdc = {'enabled': true}")


def test_log_survives_restart(node):
    cluster, session = node.session()
    session.set_keyspace("ks")
    session.execute("CREATE TABLE kept (p int PRIMARY KEY, v int, u int) WITH cdc = {'enabled': true}")
    session.execute("INSERT INTO kept (p, v, u) VALUES (1, 1, 1)")
    session.execute("ALTER TABLE kept DROP u")
    before = sorted(tuple(r) for r in session.execute('SELECT "cdc$stream_id", p, v FROM kept_scylla_cdc_log'))
    cluster.shutdown()
    node.kill()
    node.start()
    cluster, session = node.session()
    try:
        session.set_keyspace("ks")
        after = sorted(tuple(r) for r in session.execute('SELECT "cdc$stream_id", p, v FROM kept_scylla_cdc_log'))
        assert after == before
        with pytest.raises(InvalidRequest, match="Modify the base table instead."):
            session.execute("ALTER TABLE kept_scylla_cdc_log DROP v")
        session.execute("INSERT INTO kept (p, v) VALUES (2, 2)")
        assert len(list(session.execute("SELECT p FROM kept_scylla_cdc_log"))) == 2
    finally:
        cluster.shutdown()
