"""How fast node operations move data: bootstrap, decommission and
removenode on nodes of this machine, each `--smp 1`.

    python3 bench/node_ops.py [--shoal target/release/shoal] [--keys 400000] [--value-size 1024]

Three nodes (127.0.0.2-4, pinned to CPU 0) get `--keys` partitions of
`--value-size` bytes at RF=2 (`shoal stress`, sequential keys), flushed to
SSTables. Then, timed:

1. bootstrap: a fourth node (127.0.0.5, pinned to CPU 1, so its core is
   the receiving shard's alone) starts and streams its ranges; the time is
   from its start to its CQL port opening;
2. decommission of that fourth node: its ranges stream to the others;
3. removenode: the third node is killed and removed from the first; its
   ranges stream from the surviving replicas;
4. repair on the first node of the two left, whose replicas agree: the
   cost of comparing every partition's hash.

For each: wall time, what the gaining nodes report streaming (their
`streamed in` log lines: partitions, bytes as sent, seconds), MB/s, and
the CPU the fourth node used over its bootstrap, and the partitions its
row cache holds once it has streamed. MB/s is the streamed
bytes over the streaming seconds (a gaining node's log line, which ends
after its flush): for bootstrap, one receiving shard on its own core; for
decommission and removenode, the receiving nodes sharing CPU 0.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_replication import Node, common_free_port  # noqa: E402
from harness.cpu import TICK_S, process_ticks  # noqa: E402

ADDRESSES = ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")
STREAMED = re.compile(r"streamed in (\d+) range\(s\) of tables: (\d+) partition\(s\), (\d+) bytes in ([\d.]+) s")


def post(node, path, timeout=3600):
    request = urllib.request.Request("http://%s:%d%s" % (node.address, node.api, path), method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.read().decode()
    except urllib.error.HTTPError as e:
        raise RuntimeError("%s on %s: %s" % (path, node.address, e.read().decode().strip())) from e


def seen_down(node, address):
    url = "http://%s:%d/gossiper/endpoint/down" % (node.address, node.api)
    with urllib.request.urlopen(url, timeout=10) as answer:
        return address in answer.read().decode()


def host_id(node):
    with urllib.request.urlopen("http://%s:%d/storage_service/hostid/local" % (node.address, node.api)) as answer:
        return answer.read().decode().strip().strip('"')


def streamed(nodes, since):
    """(partitions, bytes, seconds) over the `streamed in` lines the nodes
    logged after `since` lines of each log (seconds: the longest)."""
    partitions = size = 0
    seconds = 0.0
    for node in nodes:
        lines = open(node.log_path, errors="replace").read().splitlines()[since.get(node.address, 0):]
        for line in lines:
            m = STREAMED.search(line)
            if m:
                partitions += int(m.group(2))
                size += int(m.group(3))
                seconds = max(seconds, float(m.group(4)))
    return partitions, size, seconds


def log_lengths(nodes):
    return {n.address: len(open(n.log_path, errors="replace").read().splitlines()) for n in nodes}


def cache_partitions(node):
    """The partitions in the node's row cache, all shards."""
    with urllib.request.urlopen("http://%s:%d/metrics" % (node.address, node.api), timeout=10) as answer:
        lines = answer.read().decode().splitlines()
    return int(sum(float(line.split()[-1]) for line in lines if line.startswith("shoal_cache_partitions")))


def report(name, wall_s, partitions, size, seconds):
    print("| %s | %.1f | %d | %.0f | %.1f | %.1f |" % (
        name, wall_s, partitions, size / 1e6, seconds, size / 1e6 / max(seconds, 1e-3)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shoal", default="target/release/shoal")
    parser.add_argument("--keys", type=int, default=400000)
    parser.add_argument("--value-size", type=int, default=1024)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="shoal-node-ops-bench-")
    port = common_free_port(ADDRESSES)
    nodes = [Node(args.shoal, root, a, port, cpu=0) for a in ADDRESSES[:3]]
    joiner = Node(args.shoal, root, ADDRESSES[3], port, cpu=1)
    try:
        seeds = "%s:%d" % (nodes[0].address, nodes[0].storage)
        for n in nodes:
            n.start(seeds)
        subprocess.run(["taskset", "-c", "1", args.shoal, "stress", "--host", nodes[0].address, "--port", str(port),
                        "--workload", "write", "--pop", "seq", "--keys", str(args.keys), "--count", str(args.keys),
                        "--value-size", str(args.value_size), "--concurrency", "256", "--replication-factor", "2",
                        "--consistency", "ONE", "--quiet"], check=True, stdout=subprocess.DEVNULL, timeout=1800)
        for n in nodes:
            post(n, "/storage_service/keyspace_flush")
        print("loaded %d partitions of %d bytes at RF=2 into 3 nodes, flushed" % (args.keys, args.value_size))
        print()
        print("| operation | wall s | partitions streamed | MB streamed | streaming s | MB/s per receiving core |")
        print("|---|---:|---:|---:|---:|---:|")

        started = time.monotonic()
        joiner.start(seeds, timeout=1800)
        wall = time.monotonic() - started
        cpu_s = (process_ticks(joiner.proc.pid) or 0) * TICK_S
        join_wall = wall
        report("bootstrap (3 → 4 nodes)", wall, *streamed([joiner], {}))
        joiner_cached = cache_partitions(joiner)

        since = log_lengths(nodes)
        started = time.monotonic()
        post(joiner, "/storage_service/decommission")
        wall = time.monotonic() - started
        joiner.proc.wait(timeout=60)
        report("decommission (4 → 3)", wall, *streamed(nodes, since))

        since = log_lengths(nodes)
        dead = nodes[2]
        dead_id = host_id(dead)
        dead.stop()
        deadline = time.monotonic() + 60
        while not seen_down(nodes[0], dead.address):
            assert time.monotonic() < deadline, "the killed node is not seen down"
            time.sleep(0.5)
        started = time.monotonic()
        post(nodes[0], "/storage_service/remove_node?host_id=%s" % dead_id)
        wall = time.monotonic() - started
        report("removenode (3 → 2)", wall, *streamed(nodes[:2], since))

        started = time.monotonic()
        answer = post(nodes[0], "/storage_service/repair/shoal_stress").strip()
        repair_wall = time.monotonic() - started
        print()
        print("the joining node used %.1f CPU-s over its bootstrap of %.1f s (start-up included)" % (cpu_s, join_wall))
        print("the joining node's row cache held %d partitions once it had streamed" % joiner_cached)
        print("repair of shoal_stress on %s: %.1f s: %s" % (nodes[0].address, repair_wall, answer))
    finally:
        for n in nodes + [joiner]:
            n.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
