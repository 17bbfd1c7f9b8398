"""How big group 0's files grow with schema changes, and how long a restart takes.

    python3 bench/group0_log.py [--shoal target/release/shoal] [--tables 400] [--every 100] [--extra "--group0-snapshot-threshold 64"]

One node (a group 0 of one, `--smp 1`) makes `--tables` tables through CQL,
one CREATE TABLE each; every `--every` tables it reports the bytes under
`<workdir>/raft` (the log, and the snapshot where there is one) and the
seconds the last `--every` DDL statements took. Then the node is killed
(-9) and started again, timed until it serves every table: a restart
replays what its log holds, so without snapshots it reads every schema
entry ever agreed.

Each schema entry carries the whole schema, compressed: without
snapshots the log grows with the square of the tables; with them it
stays near the size of one schema.
"""
import argparse
import os
import shlex
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_replication import Node, common_free_port  # noqa: E402

ADDRESS = "127.0.0.2"


def raft_bytes(node):
    raft = os.path.join(node.workdir, "raft")
    return sum(os.path.getsize(os.path.join(raft, f)) for f in os.listdir(raft))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shoal", default="target/release/shoal")
    parser.add_argument("--tables", type=int, default=400)
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--extra", default="", help="more server flags, e.g. --group0-snapshot-threshold 64")
    args = parser.parse_args()
    from cassandra.cluster import Cluster

    root = tempfile.mkdtemp(prefix="shoal-group0-bench-")
    node = Node(args.shoal, root, ADDRESS, common_free_port((ADDRESS,)), cpu="0")
    extra = shlex.split(args.extra)
    cluster = None
    try:
        seeds = "%s:%d" % (node.address, node.storage)
        node.start(seeds, extra=extra)
        cluster = Cluster([node.address], port=node.cql, protocol_version=4)
        session = cluster.connect()
        session.execute("CREATE KEYSPACE b WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        print("tables  raft_bytes  ddl_s_per_%d" % args.every)
        started = time.monotonic()
        for i in range(1, args.tables + 1):
            session.execute("CREATE TABLE b.t%d (k int PRIMARY KEY, v text, w int)" % i)
            if i % args.every == 0:
                print("%6d  %10d  %.2f" % (i, raft_bytes(node), time.monotonic() - started))
                started = time.monotonic()
        cluster.shutdown()
        cluster = None
        node.stop()
        started = time.monotonic()
        node.start(seeds, timeout=120, extra=extra)
        # Until the node answers a query that needs its whole schema.
        while True:
            try:
                cluster = Cluster([node.address], port=node.cql, protocol_version=4)
                rows = cluster.connect().execute("SELECT table_name FROM system_schema.tables WHERE keyspace_name = 'b'")
                if len(list(rows)) == args.tables:
                    break
            except Exception:  # noqa: BLE001 - not up yet
                pass
            cluster.shutdown()
            cluster = None
            time.sleep(0.05)
        print("restart until its %d tables are served: %.2f s" % (args.tables, time.monotonic() - started))
    finally:
        if cluster:
            cluster.shutdown()
        node.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
