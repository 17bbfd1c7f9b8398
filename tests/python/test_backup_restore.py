"""Backup and restore (issue 30 item 4), with real processes: a three-node
cluster's data, snapshotted (`nodetool snapshot`) and copied off each node
(`shoal backup`), comes back on a new three-node cluster: its schema from
the backup's schema.cql, each old node's SSTables copied into the new
tables' upload/ directories (`shoal restore`) and loaded by `nodetool
refresh`, which writes every partition to the replicas that own it on the
new ring. Every row is compared, with its write time: the table had a
column dropped and one added, so the new table's column ids differ from
the old ones and the backup's column list maps them; deleted rows stay
deleted, and a secondary index is rebuilt from the loaded rows.

The same through an S3-compatible object store (moto's server, on this
machine): a node's backup sent to s3://bucket/prefix and restored from
there onto a new node.
"""
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from cassandra import ConsistencyLevel as CL
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.query import SimpleStatement

from node import SHOAL_BIN, free_port, skip_reason, start_cluster, temp_node

if skip_reason():
    pytest.skip(skip_reason(), allow_module_level=True)

ROWS = 1500


def everything(session):
    """Every row of both tables, read at ALL, with write times."""
    def read(query):
        return sorted(tuple(r) for r in session.execute(SimpleStatement(query, consistency_level=CL.ALL)))
    return {
        "t": read("SELECT k, c, a, b, writetime(a) FROM bk.t"),
        "p": read("SELECT x, y, tags FROM bk.p"),
    }


def fill(session):
    session.execute("CREATE KEYSPACE bk WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
    session.execute("CREATE TABLE bk.t (k int, c int, z text, a int, PRIMARY KEY (k, c))")
    session.execute("CREATE TABLE bk.p (x text, y int, tags set<text>, PRIMARY KEY ((x, y)))")
    insert = session.prepare("INSERT INTO bk.t (k, c, z, a) VALUES (?, ?, ?, ?) USING TIMESTAMP ?")
    insert.consistency_level = CL.ALL
    rows = [(k % 300, k, "z%d" % k, k * 7, 1_000_000 + k) for k in range(ROWS)]
    for ok, answer in execute_concurrent_with_args(session, insert, rows, concurrency=32):
        assert ok, answer
    # Column ids: z (2) dropped, b added (4); a keeps 3.
    session.execute("ALTER TABLE bk.t DROP z")
    session.execute("ALTER TABLE bk.t ADD b text")
    for k in range(0, 300, 10):
        session.execute(SimpleStatement("UPDATE bk.t SET b = 'b%d' WHERE k = %d AND c = %d" % (k, k, k),
                                        consistency_level=CL.ALL))
    for k in range(0, 300, 7):
        session.execute(SimpleStatement("DELETE FROM bk.t WHERE k = %d" % k, consistency_level=CL.ALL))
    for x in range(100):
        session.execute(SimpleStatement("INSERT INTO bk.p (x, y, tags) VALUES ('x%d', %d, {'a%d', 'b'})" % (x, x, x),
                                        consistency_level=CL.ALL))
    session.execute("CREATE INDEX p_tags ON bk.p (tags)")


def test_a_three_node_clusters_data_comes_back_on_a_new_cluster(tmp_path):
    backup_dir = tmp_path / "backup"
    with contextlib.ExitStack() as old_stack:
        old = start_cluster(old_stack, "shoal-backup-old-")
        cluster, session = old[0].session()
        old_stack.callback(cluster.shutdown)
        fill(session)
        expected = everything(session)
        assert len(expected["t"]) > ROWS // 2 and len(expected["p"]) == 100
        host_dirs = []
        for n in old:
            n.nodetool("snapshot", "-t", "nightly", "bk")
            workdir = os.path.join(n.workdir, "data")
            out = subprocess.run([SHOAL_BIN, "backup", "--workdir", workdir, "--tag", "nightly",
                                  "--to", str(backup_dir)], capture_output=True, text=True, timeout=60)
            assert out.returncode == 0, out.stderr
            assert "of 2 table(s)" in out.stdout, out.stdout
            host_dirs.append(backup_dir / open(os.path.join(workdir, "host_id")).read().strip())
    # The old cluster is gone; a new one, on new tokens, from the backup.
    with contextlib.ExitStack() as new_stack:
        new = start_cluster(new_stack, "shoal-backup-new-")
        cluster, session = new[0].session()
        new_stack.callback(cluster.shutdown)
        schema = (host_dirs[0] / "schema.cql").read_text()
        for statement in schema.split(";\n"):
            if statement.strip():
                session.execute(statement)
        assert everything(session) == {"t": [], "p": []}
        for n, backed_up in zip(new, host_dirs):
            out = subprocess.run([SHOAL_BIN, "restore", "--from", str(backed_up),
                                  "--workdir", os.path.join(n.workdir, "data")],
                                 capture_output=True, text=True, timeout=60)
            assert out.returncode == 0, out.stderr
            assert "shoal nodetool refresh bk t" in out.stdout, out.stdout
            for table in ("t", "p"):
                loaded = n.nodetool("refresh", "bk", table)
                assert loaded.startswith("loaded "), loaded
        assert everything(session) == expected
        indexed = session.execute(SimpleStatement("SELECT x FROM bk.p WHERE tags CONTAINS 'b'", consistency_level=CL.ALL))
        assert len(list(indexed)) == 100


def moto_server():
    """The moto_server command (tests/requirements.txt installs it), or
    SHOAL_MOTO_SERVER."""
    return os.environ.get("SHOAL_MOTO_SERVER") or shutil.which("moto_server") \
        or shutil.which("moto_server", path=os.path.dirname(sys.executable))


@contextlib.contextmanager
def s3_store():
    """A moto S3 server on a free port with bucket `backups`; the
    environment `shoal backup` and `restore` read it from."""
    port = free_port()
    server = subprocess.Popen([moto_server(), "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, "moto_server did not start"
                time.sleep(0.1)
        create = urllib.request.Request("http://127.0.0.1:%d/backups" % port, method="PUT")
        urllib.request.urlopen(create, timeout=10).close()
        yield dict(os.environ, AWS_ENDPOINT="http://127.0.0.1:%d" % port, AWS_ALLOW_HTTP="true",
                   AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test", AWS_REGION="us-east-1")
    finally:
        server.kill()
        server.wait(timeout=10)


@pytest.mark.skipif(not moto_server(), reason="needs moto_server (pip install 'moto[server]')")
def test_a_backup_goes_to_an_s3_store_and_comes_back_from_it():
    with contextlib.ExitStack() as stack:
        env = stack.enter_context(s3_store())
        old = stack.enter_context(temp_node("shoal-backup-s3-old-"))
        cluster, session = old.session()
        stack.callback(cluster.shutdown)
        session.execute("CREATE KEYSPACE s3 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        session.execute("CREATE TABLE s3.t (k int PRIMARY KEY, v text)")
        for k in range(500):
            session.execute("INSERT INTO s3.t (k, v) VALUES (%s, %s)", (k, "v%d" % k))
        expected = sorted(tuple(r) for r in session.execute("SELECT k, v FROM s3.t"))
        old.nodetool("snapshot", "-t", "s3snap", "s3")
        workdir = os.path.join(old.workdir, "data")
        out = subprocess.run([SHOAL_BIN, "backup", "--workdir", workdir, "--tag", "s3snap",
                              "--to", "s3://backups/nightly"], capture_output=True, text=True, timeout=60, env=env)
        assert out.returncode == 0, out.stderr
        assert "to s3://backups/nightly/" in out.stdout, out.stdout
        host = open(os.path.join(workdir, "host_id")).read().strip()

        new = stack.enter_context(temp_node("shoal-backup-s3-new-"))
        cluster, session = new.session()
        stack.callback(cluster.shutdown)
        schema = subprocess.run([SHOAL_BIN, "restore", "--from", "s3://backups/nightly/%s" % host,
                                 "--workdir", os.path.join(new.workdir, "data")],
                                capture_output=True, text=True, timeout=60, env=env)
        assert schema.returncode != 0 and "create the schema first" in schema.stderr, schema.stderr
        session.execute("CREATE KEYSPACE s3 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        session.execute("CREATE TABLE s3.t (k int PRIMARY KEY, v text)")
        out = subprocess.run([SHOAL_BIN, "restore", "--from", "s3://backups/nightly/%s" % host,
                              "--workdir", os.path.join(new.workdir, "data")],
                             capture_output=True, text=True, timeout=60, env=env)
        assert out.returncode == 0, out.stderr
        assert new.nodetool("refresh", "s3", "t").startswith("loaded ")
        assert sorted(tuple(r) for r in session.execute("SELECT k, v FROM s3.t")) == expected
