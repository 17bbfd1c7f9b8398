"""The schema survives a restart, including kill -9 right after the DDL returns.

Runs its own server (from SHOAL_BIN, as tests/run.sh sets it) on fresh ports and
a fresh workdir, so it can kill and restart it without disturbing other tests.
"""
import os

import pytest

from node import skip_reason, temp_node

if skip_reason():
    pytest.skip(skip_reason(), allow_module_level=True)


@pytest.fixture
def node():
    with temp_node("shoal-restart-") as n:
        yield n


def test_schema_survives_kill_9(node):
    cluster, session = node.session()
    session.execute("CREATE KEYSPACE ks WITH replication = {'class': 'NetworkTopologyStrategy', 'replication_factor': 1}")
    session.execute("CREATE TABLE ks.t (k int, c text, s int static, m map<text, int>, PRIMARY KEY (k, c)) "
                    "WITH CLUSTERING ORDER BY (c DESC) AND comment = 'it''s kept' AND default_time_to_live = 77")
    session.execute("ALTER TABLE ks.t ADD extra frozen<list<int>>")
    table_id = session.execute(
        "SELECT id FROM system_schema.tables WHERE keyspace_name = 'ks' AND table_name = 't'").one().id
    cluster.shutdown()
    node.kill()
    node.start()
    cluster, session = node.session()
    try:
        meta = cluster.metadata.keyspaces["ks"].tables["t"]
        assert [c.name for c in meta.partition_key] == ["k"]
        assert [c.name for c in meta.clustering_key] == ["c"]
        assert meta.clustering_key[0].is_reversed
        assert meta.columns["s"].is_static
        assert meta.columns["extra"].cql_type == "frozen<list<int>>"
        assert meta.options["comment"] == "it's kept"
        assert meta.options["default_time_to_live"] == 77
        row = session.execute(
            "SELECT id FROM system_schema.tables WHERE keyspace_name = 'ks' AND table_name = 't'").one()
        assert row.id == table_id
        # The table is usable after the restart.
        session.execute("INSERT INTO ks.t (k, c, s) VALUES (1, 'a', 2)")
        assert session.execute("SELECT s FROM ks.t WHERE k = 1").one().s == 2
    finally:
        cluster.shutdown()


def test_column_ids_survive_restart(node):
    """Cells are stored under column ids, so the ids (and the next id, past
    dropped columns) must be the same after a restart: the schema file
    written after the restart shows the table exactly as before it."""
    schema_file = os.path.join(node.workdir, "data", "schema.cql")

    def table_line():
        lines = [line for line in open(schema_file).read().splitlines() if line.startswith('CREATE TABLE "ks"."t"')]
        assert len(lines) == 1
        return lines[0]

    cluster, session = node.session()
    session.execute("CREATE KEYSPACE ks WITH replication = {'class': 'NetworkTopologyStrategy', 'replication_factor': 1}")
    session.execute("CREATE TABLE ks.t (k int PRIMARY KEY, a int, b int)")
    session.execute("ALTER TABLE ks.t DROP a")
    session.execute("ALTER TABLE ks.t ADD c int")
    before = table_line()
    assert "shoal_column_ids = {'k': 0, 'b': 2, 'c': 3, 'a': 1} AND shoal_next_column_id = 4" in before
    cluster.shutdown()
    node.kill()
    node.start()
    cluster, session = node.session()
    try:
        # Any DDL rewrites the schema file from the schema loaded at start.
        session.execute("CREATE TABLE ks.other (k int PRIMARY KEY)")
        assert table_line() == before
        session.execute("INSERT INTO ks.t (k, b, c) VALUES (1, 2, 3)")
        row = session.execute("SELECT b, c FROM ks.t WHERE k = 1").one()
        assert (row.b, row.c) == (2, 3)
    finally:
        cluster.shutdown()


def test_direct_io_off_is_a_flag_and_data_survives_kill_9():
    """`--direct-io off` (contrast runs only) sends files through the page
    cache: the node says so at start, and flushed and unflushed writes both
    come back after kill -9."""
    with temp_node("shoal-restart-buffered-", args=["--direct-io", "off"]) as node:
        assert "direct I/O is off" in node.last_start_log()
        cluster, session = node.session()
        session.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        session.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v text)")
        insert = session.prepare("INSERT INTO ks.t (k, v) VALUES (?, ?)")
        for k in range(200):
            session.execute(insert, (k, "flushed-%d" % k))
        assert "flushed" in node.nodetool("flush", "ks", "t")
        for k in range(200, 400):
            session.execute(insert, (k, "logged-%d" % k))
        cluster.shutdown()
        node.kill()
        node.start()
        cluster, session = node.session()
        try:
            rows = {r.k: r.v for r in session.execute("SELECT k, v FROM ks.t")}
            assert rows == {k: ("flushed-%d" if k < 200 else "logged-%d") % k for k in range(400)}
        finally:
            cluster.shutdown()
