"""What repair moves when a few rows of wide partitions differ.

    python3 bench/repair_rows.py [--shoal target/release/shoal] [--partitions 50] [--rows 2000] [--value-size 512]

Three nodes (127.0.0.2-4, `--smp 1`, sharing CPU 0 and 1 as the kernel
places them) and a table at RF=3 of `--partitions` partitions of `--rows`
rows of `--value-size` bytes, written at ALL and flushed. The third node
is killed; `--changed` rows of every partition are updated at QUORUM
(hints off, so the third node misses them); it comes back, and the first
node repairs the keyspace. Timed: the repair's wall time and the CPU the
three nodes used over it, with repair's own report (partitions compared,
differing, reconciled whole, rows in the others, copies written).

Row-level repair reads and writes only the differing rows; repair at the
grain of partitions read every replica's whole partition and wrote it
back whole, so the difference grows with `--rows`.
"""
import argparse
import os
import shutil
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_replication import Node, common_free_port  # noqa: E402
from harness.cpu import TICK_S, process_ticks  # noqa: E402
from node_ops import post, seen_down  # noqa: E402

ADDRESSES = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
NO_HINTS = ("--max-hint-window-in-ms", "0")


def live(node, address):
    url = "http://%s:%d/gossiper/endpoint/live" % (node.address, node.api)
    with urllib.request.urlopen(url, timeout=10) as answer:
        return address in answer.read().decode()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shoal", default="target/release/shoal")
    parser.add_argument("--partitions", type=int, default=50)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--value-size", type=int, default=512)
    parser.add_argument("--changed", type=int, default=1)
    args = parser.parse_args()
    from cassandra import ConsistencyLevel as CL
    from cassandra.cluster import Cluster
    from cassandra.concurrent import execute_concurrent_with_args
    from cassandra.policies import WhiteListRoundRobinPolicy

    root = tempfile.mkdtemp(prefix="shoal-repair-bench-")
    port = common_free_port(ADDRESSES)
    nodes = [Node(args.shoal, root, a, port, cpu="0,1") for a in ADDRESSES]
    cluster = None
    try:
        seeds = "%s:%d" % (nodes[0].address, nodes[0].storage)
        for n in nodes:
            n.start(seeds, extra=NO_HINTS)
        time.sleep(3)
        cluster = Cluster([nodes[0].address], port=port, protocol_version=4,
                          load_balancing_policy=WhiteListRoundRobinPolicy([nodes[0].address]))
        session = cluster.connect()
        session.execute("CREATE KEYSPACE rr WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        session.execute("CREATE TABLE rr.t (k int, c int, v blob, PRIMARY KEY (k, c))")
        insert = session.prepare("INSERT INTO rr.t (k, c, v) VALUES (?, ?, ?)")
        insert.consistency_level = CL.ALL
        value = os.urandom(args.value_size)
        rows = [(k, c, value) for k in range(args.partitions) for c in range(args.rows)]
        for ok, answer in execute_concurrent_with_args(session, insert, rows, concurrency=128):
            assert ok, answer
        for n in nodes:
            post(n, "/storage_service/keyspace_flush")
        mb = args.partitions * args.rows * args.value_size / 1e6
        print("loaded %d partitions x %d rows of %d bytes (%.0f MB per replica) at RF=3, flushed"
              % (args.partitions, args.rows, args.value_size, mb))

        nodes[2].stop()
        deadline = time.monotonic() + 60
        while not seen_down(nodes[0], nodes[2].address):
            assert time.monotonic() < deadline, "the killed node is not seen down"
            time.sleep(0.5)
        insert.consistency_level = CL.QUORUM
        changed = [(k, c, os.urandom(args.value_size)) for k in range(args.partitions) for c in range(args.changed)]
        for ok, answer in execute_concurrent_with_args(session, insert, changed, concurrency=64):
            assert ok, answer
        nodes[2].start(seeds, extra=NO_HINTS)
        deadline = time.monotonic() + 60
        while not live(nodes[0], nodes[2].address):
            assert time.monotonic() < deadline, "the restarted node is not seen up"
            time.sleep(0.5)

        pids = [n.proc.pid for n in nodes]
        before = sum(process_ticks(p) or 0 for p in pids)
        started = time.monotonic()
        answer = post(nodes[0], "/storage_service/repair/rr").strip()
        wall = time.monotonic() - started
        cpu_s = (sum(process_ticks(p) or 0 for p in pids) - before) * TICK_S
        print("repair: %.2f s wall, %.2f CPU-s over the three nodes: %s" % (wall, cpu_s, answer))
    finally:
        if cluster:
            cluster.shutdown()
        for n in nodes:
            n.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
