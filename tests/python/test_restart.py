"""The schema survives a restart, including kill -9 right after the DDL returns.

Runs its own server (from SHOAL_BIN, as tests/run.sh sets it) on fresh ports and
a fresh workdir, so it can kill and restart it without disturbing other tests.
"""
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time

import pytest
from cassandra.cluster import Cluster

SHOAL_BIN = os.environ.get("SHOAL_BIN")
if not SHOAL_BIN or os.environ.get("SHOAL_PEER") == "cassandra":
    pytest.skip("needs SHOAL_BIN (a shoal binary to start and kill)", allow_module_level=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Node:
    def __init__(self, workdir):
        self.workdir = workdir
        self.ports = [free_port(), free_port(), free_port()]
        self.proc = None

    def start(self):
        cql, aware, api = self.ports
        self.log = open(os.path.join(self.workdir, "server.log"), "ab")
        self.proc = subprocess.Popen(
            [SHOAL_BIN, "--workdir", os.path.join(self.workdir, "data"), "--smp", "2",
             "--native-transport-port", str(cql), "--native-shard-aware-transport-port", str(aware),
             "--api-port", str(api), "--listen-address", "127.0.0.1"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while time.time() < deadline:
            # A real OPTIONS round trip: right after a kill -9 the old
            # process's listener may still accept for a few milliseconds.
            try:
                with socket.create_connection(("127.0.0.1", cql), timeout=1) as s:
                    s.sendall(struct.pack(">BBhBI", 4, 0, 0, 0x05, 0))
                    if len(s.recv(9)) == 9:
                        return
            except OSError:
                pass
            assert self.proc.poll() is None, "server exited during startup"
            time.sleep(0.1)
        raise AssertionError("server did not start within 30 s")

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.log.close()

    def session(self):
        cluster = Cluster(["127.0.0.1"], port=self.ports[0], protocol_version=4)
        return cluster, cluster.connect()


@pytest.fixture
def node():
    workdir = tempfile.mkdtemp(prefix="shoal-restart-")
    n = Node(workdir)
    n.start()
    yield n
    if n.proc and n.proc.poll() is None:
        n.kill()
    if os.environ.get("SHOAL_KEEP_RESTART_LOG"):
        print(open(os.path.join(workdir, "server.log")).read())
    shutil.rmtree(workdir, ignore_errors=True)


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
