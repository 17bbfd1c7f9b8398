"""How fast node operations move data: bootstrap, decommission and
removenode on nodes of this machine, each `--smp 1`.

    python3 bench/node_ops.py [--shoal target/release/shoal] [--keys 400000] [--value-size 1024]

Three nodes (127.0.0.2-4, pinned to CPU 0) get `--keys` partitions of
`--value-size` bytes at RF=2 (`shoal stress`, sequential keys), flushed and
compacted to one SSTable each, so no compaction left from the load competes
with the operations. Then, timed:

1. bootstrap: a fourth node (127.0.0.5, pinned to CPU 1, so its core is
   the receiving shard's alone) starts and streams its ranges; the time is
   from its start to its CQL port opening;
2. decommission of that fourth node: its ranges stream to the others;
3. replace: the third node is killed, and a new node (127.0.0.6, CPU 1)
   started with `--replace-node-first-boot <its host id>` takes its
   tokens, streaming them from the surviving replicas; the time is from
   its start to its CQL port opening;
4. removenode: that replacement is killed and removed from the first;
   its ranges stream from the surviving replicas;
5. repair on the first node of the two left, whose replicas agree: the
   cost of comparing every partition's hash.

For each: wall time, what the gaining nodes report streaming (their
`streamed in` log lines: partitions, bytes as sent, seconds), MB/s, and
the partitions the fourth node's row cache holds once it has streamed.
MB/s is the streamed bytes over the streaming seconds (a gaining node's
log line, which ends after its flush): for bootstrap and replace, one
receiving shard on its own core; for decommission and removenode, the
receiving nodes sharing CPU 0.

Whether that rate is the receiver's limit: a thread samples every node's
CPU time (/proc/<pid>/stat) every 20 ms, and over each streaming window
(the log line's time, less its seconds) the table gives the receiving
nodes' CPU busy % of their core(s), the MB streamed per CPU-second they
spent (the rate a saturated receiving shard would reach), and the CPU
seconds the sending nodes spent. A receiver below ~95% busy was waiting
on its senders (or the network), not on itself.
"""
import argparse
import datetime
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_replication import Node, common_free_port  # noqa: E402
from harness.cpu import TICK_S, process_ticks  # noqa: E402

ADDRESSES = ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6")
STREAMED = re.compile(r"streamed in (\d+) range\(s\) of tables: (\d+) partition\(s\), (\d+) bytes in ([\d.]+) s")
LOG_TIME = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
SAMPLE_S = 0.02


class CpuSampler(threading.Thread):
    """Every node's CPU ticks over wall-clock time, so the CPU spent in a
    window known only afterwards (from a log line) can be read back."""

    def __init__(self):
        super().__init__(daemon=True)
        self.pids = set()
        self.samples = {}       # pid -> [(epoch s, ticks)]
        self.done = threading.Event()

    def watch(self, node):
        self.pids.add(node.proc.pid)

    def run(self):
        while not self.done.wait(SAMPLE_S):
            now = time.time()
            for pid in list(self.pids):
                ticks = process_ticks(pid)
                if ticks is not None:
                    self.samples.setdefault(pid, []).append((now, ticks))

    def cpu_s(self, pid, start, end):
        """CPU seconds `pid` spent between two epoch times, interpolated
        linearly between the samples around each (waits for one past
        `end` while the process lives)."""
        deadline = time.monotonic() + 5
        while not any(t >= end for (t, _) in self.samples.get(pid, [])):
            if process_ticks(pid) is None or time.monotonic() > deadline:
                break
            time.sleep(SAMPLE_S)
        samples = self.samples.get(pid, [])
        if not samples:
            return 0.0
        return (ticks_at(samples, end) - ticks_at(samples, start)) * TICK_S


def ticks_at(samples, when):
    """A process's CPU ticks at epoch time `when`, between its samples."""
    if when <= samples[0][0]:
        return samples[0][1]
    for (t0, ticks0), (t1, ticks1) in zip(samples, samples[1:]):
        if t0 <= when <= t1:
            return ticks0 + (ticks1 - ticks0) * (when - t0) / max(t1 - t0, 1e-9)
    return samples[-1][1]


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
    """(partitions, bytes, seconds, window) over the `streamed in` lines
    the nodes logged after `since` lines of each log (seconds: the
    longest; window: epoch times from the first start to the last end)."""
    partitions = size = 0
    seconds = 0.0
    starts, ends = [], []
    for node in nodes:
        lines = open(node.log_path, errors="replace").read().splitlines()[since.get(node.address, 0):]
        for line in lines:
            m = STREAMED.search(line)
            if m:
                partitions += int(m.group(2))
                size += int(m.group(3))
                seconds = max(seconds, float(m.group(4)))
                stamp = LOG_TIME.search(ANSI.sub("", line))
                if stamp is None:
                    raise RuntimeError("no time on the log line %r" % line)
                end = datetime.datetime.fromisoformat(stamp.group(1)).replace(tzinfo=datetime.timezone.utc).timestamp()
                starts.append(end - float(m.group(4)))
                ends.append(end)
    return partitions, size, seconds, (min(starts, default=0.0), max(ends, default=0.0))


def log_lengths(nodes):
    return {n.address: len(open(n.log_path, errors="replace").read().splitlines()) for n in nodes}


def cache_partitions(node):
    """The partitions in the node's row cache, all shards."""
    with urllib.request.urlopen("http://%s:%d/metrics" % (node.address, node.api), timeout=10) as answer:
        lines = answer.read().decode().splitlines()
    return int(sum(float(line.split()[-1]) for line in lines if line.startswith("shoal_cache_partitions")))


def report(name, wall_s, streamed_in, sampler, receivers, senders):
    """One row; `receivers` share one core (bootstrap: the joiner alone)."""
    partitions, size, seconds, (start, end) = streamed_in
    received_cpu = sum(sampler.cpu_s(n.proc.pid, start, end) for n in receivers)
    sent_cpu = sum(sampler.cpu_s(n.proc.pid, start, end) for n in senders)
    print("| %s | %.1f | %d | %.0f | %.2f | %.1f | %.0f%% | %.1f | %.2f |" % (
        name, wall_s, partitions, size / 1e6, seconds, size / 1e6 / max(seconds, 1e-3),
        100 * received_cpu / max(end - start, 1e-3), size / 1e6 / max(received_cpu, 1e-3), sent_cpu))


def kill(node, observer):
    """Kills `node` with -9 and waits until `observer` sees it down; its host id."""
    dead_id = host_id(node)
    node.stop()
    deadline = time.monotonic() + 60
    while not seen_down(observer, node.address):
        assert time.monotonic() < deadline, "the killed node is not seen down"
        time.sleep(0.5)
    return dead_id


def start_watched(node, sampler, seeds, extra=()):
    """Starts `node` with the sampler watching it from its first tick (a
    thread adds it as soon as it is spawned, while start() waits for its
    CQL port); the seconds until the port opened."""
    def watch_when_spawned():
        while node.proc is None:
            time.sleep(SAMPLE_S / 4)
        sampler.watch(node)
    started = time.monotonic()
    threading.Thread(target=watch_when_spawned, daemon=True).start()
    node.start(seeds, timeout=1800, extra=extra)
    return time.monotonic() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shoal", default="target/release/shoal")
    parser.add_argument("--keys", type=int, default=400000)
    parser.add_argument("--value-size", type=int, default=1024)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="shoal-node-ops-bench-")
    sampler = CpuSampler()
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
            post(n, "/storage_service/keyspace_compaction/shoal_stress")
        print("loaded %d partitions of %d bytes at RF=2 into 3 nodes, flushed and compacted" % (
            args.keys, args.value_size))
        print()
        print("| operation | wall s | partitions streamed | MB streamed | streaming s | MB/s "
              "| receiving CPU busy | MB per receiving CPU-s | sending CPU-s |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        sampler.start()
        for n in nodes:
            sampler.watch(n)

        wall = start_watched(joiner, sampler, seeds)
        report("bootstrap (3 → 4 nodes)", wall, streamed([joiner], {}), sampler, [joiner], nodes)
        joiner_cached = cache_partitions(joiner)

        since = log_lengths(nodes)
        started = time.monotonic()
        post(joiner, "/storage_service/decommission")
        wall = time.monotonic() - started
        joiner.proc.wait(timeout=60)
        report("decommission (4 → 3)", wall, streamed(nodes, since), sampler, nodes, [joiner])

        dead_id = kill(nodes[2], nodes[0])
        replacement = Node(args.shoal, root, ADDRESSES[4], port, cpu=1)
        # Stopped with the others, whether or not it starts.
        nodes.append(replacement)
        wall = start_watched(replacement, sampler, seeds, extra=("--replace-node-first-boot", dead_id))
        report("replace (a dead node's tokens)", wall, streamed([replacement], {}), sampler, [replacement], nodes[:2])
        nodes[2] = nodes.pop()

        since = log_lengths(nodes)
        dead_id = kill(nodes[2], nodes[0])
        started = time.monotonic()
        post(nodes[0], "/storage_service/remove_node?host_id=%s" % dead_id)
        wall = time.monotonic() - started
        report("removenode (3 → 2)", wall, streamed(nodes[:2], since), sampler, nodes[:2], nodes[:2])

        started = time.monotonic()
        answer = post(nodes[0], "/storage_service/repair/shoal_stress").strip()
        repair_wall = time.monotonic() - started
        print()
        print("removenode's receivers are also its senders: both CPU columns count the same two nodes")
        print("the joining node's row cache held %d partitions once it had streamed" % joiner_cached)
        print("repair of shoal_stress on %s: %.1f s: %s" % (nodes[0].address, repair_wall, answer))
    finally:
        sampler.done.set()
        for n in nodes + [joiner]:
            n.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
