"""What replication costs per core: three nodes at RF=3 and QUORUM against
one node at RF=1 and ONE, the same loader, the same server core.

    python3 bench/cluster_replication.py [--shoal target/release/shoal] [--duration 10]

Every server runs `--smp 1` pinned to CPU 1 (all three cluster nodes share
it, so the cluster figures are per core of cluster work: each write is
applied three times, each read asks two replicas); `shoal stress` runs on
CPU 0. The cluster's nodes listen on 127.0.0.2-4 with one CQL port, so the
Rust driver, given the first node, finds the others in `system.peers` and
routes token-aware. Phases, each `--duration` seconds after a 2 s warm-up:
writes of `--keys` partitions (uniform), then reads of them (uniform); with
`--phases write,read,lwt` also conditional writes (`INSERT ... IF NOT
EXISTS` at serial consistency SERIAL, into a table of their own so most
apply: on one node the shard's partition lock, on the cluster a Paxos round
each), and `counter`: counter increments (`UPDATE ... SET n = n + 1`, a
table of their own), each led by one replica, which reads its own shard
under the partition's lock before it writes; `mc-set` and `mc-get`:
memcached text `set`s and then `get`s of `--keys` items through the
memcached port of the first node (`--connections 40 --pipeline 16`), the
cluster's `memcache.items` altered to RF 3 with
`--memcache-write-consistency QUORUM` (reads at ONE: each key's leading
replica answers from its copy), so every set is applied three times and a
key another node leads is forwarded to it. `--stress BIN` runs the
loader from another build (one whose `shoal stress` knows `--counter`,
against a server that predates it).

Reported per phase: ops/s, p50/p99 (µs), the server core's busy share
(from /proc: the servers' CPU time over the phase), and ops per
server-core-second; then cluster/single ratios. The loader's own CPU is
reported too: a phase whose loader core is saturated is loader-bound.
Then the kernel's side per operation, summed over the nodes (from /proc,
every thread of each server): user and system CPU µs, page faults, context switches
(voluntary: a reactor that waited; involuntary: one preempted by a node
sharing its core), and the read/write system calls the servers made
(`syscr`/`syscw` of /proc/<pid>/io; io_uring's operations are not
counted there). And what else each node did over each phase, from its
/metrics: memtable flushes, read repair's writes, hints stored.

PORT_BASE=N gives every node the ports N..N+4 (the same on each address:
one CQL port), for runs beside others' on one machine; by default the
ports are any free ones.
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness.cpu import TICK_S, process_ticks  # noqa: E402
from harness.cqlload import Connection  # noqa: E402
from harness.node import free_ports  # noqa: E402

ADDRESSES = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
SERVER_CPU, LOADER_CPU = 1, 0
PORT_BASE = int(os.environ["PORT_BASE"]) if os.environ.get("PORT_BASE") else None


# Counters of each node's /metrics noted per phase: what else a phase
# made the nodes do (memtable flushes, read repair's writes, hints).
NODE_METRICS = ("shoal_memtable_flushes_total", "shoal_reconcile_writes_total", "shoal_hints_stored_total")


def node_metrics(node):
    """NODE_METRICS of `node`, summed over its shards (empty if unreadable)."""
    try:
        text = urllib.request.urlopen("http://%s:%d/metrics" % (node.address, node.api), timeout=5).read().decode()
    except OSError:
        return {}
    counts = {}
    for line in text.splitlines():
        name = line.split("{")[0].split(" ")[0]
        if name in NODE_METRICS:
            counts[name] = counts.get(name, 0) + float(line.split()[-1])
    return counts


def kernel_counters(pid):
    """A server's counters, summed over its threads: user and system clock
    ticks, minor page faults, voluntary and involuntary context switches,
    read and write system calls (zeros where /proc cannot be read)."""
    counts = {"utime": 0, "stime": 0, "minflt": 0, "cs_vol": 0, "cs_invol": 0, "syscr": 0, "syscw": 0}
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return counts
    for task in tasks:
        try:
            with open("/proc/%d/task/%s/stat" % (pid, task)) as f:
                stat = f.read()
            fields = stat[stat.rfind(")") + 2:].split()
            counts["minflt"] += int(fields[7])
            counts["utime"] += int(fields[11])
            counts["stime"] += int(fields[12])
            with open("/proc/%d/task/%s/status" % (pid, task)) as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches"):
                        counts["cs_vol"] += int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches"):
                        counts["cs_invol"] += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue
    try:
        with open("/proc/%d/io" % pid) as f:
            for line in f:
                key, value = line.split(":")
                if key in ("syscr", "syscw"):
                    counts[key] = int(value)
    except OSError:
        pass
    return counts


def common_free_port(addresses):
    """A port free on every address (the driver uses one CQL port)."""
    for _ in range(50):
        probe = socket.socket()
        probe.bind((addresses[0], 0))
        port = probe.getsockname()[1]
        probe.close()
        try:
            for address in addresses:
                s = socket.socket()
                s.bind((address, port))
                s.close()
            return port
        except OSError:
            continue
    raise RuntimeError("no port free on every address")


class Node:
    def __init__(self, binary, root, address, cql_port, cpu=SERVER_CPU):
        self.binary, self.address, self.cql, self.cpu = binary, address, cql_port, cpu
        self.workdir = tempfile.mkdtemp(dir=root)
        if PORT_BASE is None:
            self.aware, self.api, self.memcache, self.storage = free_ports(4)
        else:
            self.aware, self.api, self.memcache, self.storage = range(cql_port + 1, cql_port + 5)
        self.proc = None

    @property
    def log_path(self):
        return os.path.join(self.workdir, "shoal.log")

    def start(self, seeds, timeout=30, extra=(), wrapper=()):
        """`wrapper`: a command the node runs under (valgrind, for one)."""
        log = open(self.log_path, "a")
        self.proc = subprocess.Popen(
            ["taskset", "-c", str(self.cpu), *wrapper, self.binary, "--smp", "1", "--memory", "1G",
             "--workdir", self.workdir, "--listen-address", self.address, "--api-address", self.address,
             "--native-transport-port", str(self.cql), "--native-shard-aware-transport-port", str(self.aware),
             "--api-port", str(self.api), "--memcache-port", str(self.memcache), "--storage-port", str(self.storage),
             "--seeds", seeds, *extra],
            stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection((self.address, self.cql), timeout=0.5).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("node %s did not start" % self.address)
                time.sleep(0.1)

    def stop(self):
        if self.proc:
            self.proc.kill()
            self.proc.wait()


# The memcached phases: the stress workload, over the memcached port.
MEMCACHE_PHASES = {"mc-set": "write", "mc-get": "read"}
MEMCACHE_LOAD = ["--protocol", "memcache", "--connections", "40", "--pipeline", "16"]


def stress(binary, node, phase_name, args, rf, consistency, out):
    # Conditional writes and counters into tables of their own: new keys,
    # so most conditional writes apply.
    workload, extra = {
        "lwt": ("write", ["--conditional", "--table", "lwt"]),
        "counter": ("write", ["--counter", "--table", "counts"]),
    }.get(phase_name, (phase_name, []))
    port = node.cql
    cql_args = ["--concurrency", str(args.concurrency), "--replication-factor", str(rf), "--consistency", consistency]
    if phase_name in MEMCACHE_PHASES:
        workload, port, extra, cql_args = MEMCACHE_PHASES[phase_name], node.memcache, MEMCACHE_LOAD, []
    cmd = ["taskset", "-c", str(LOADER_CPU), binary, "stress", "--host", node.address, "--port", str(port), *extra,
           "--workload", workload, "--pop", "uniform", "--keys", str(args.keys), "--value-size", str(args.value_size),
           "--duration", str(args.duration), "--warmup", "2", *cql_args, "--json", out, "--quiet"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, timeout=args.duration + 120)
    with open(out) as f:
        return json.load(f)


def phase(binary, nodes, workload, args, rf, consistency, tmp):
    pids = [n.proc.pid for n in nodes]
    before = sum(process_ticks(p) or 0 for p in pids)
    kernel_before = [kernel_counters(p) for p in pids]
    metrics_before = [node_metrics(n) for n in nodes]
    started = time.monotonic()
    summary = stress(args.stress or binary, nodes[0], workload, args, rf, consistency,
                     os.path.join(tmp, "%s-%d.json" % (workload, len(nodes))))
    elapsed = time.monotonic() - started
    server_s = (sum(process_ticks(p) or 0 for p in pids) - before) * TICK_S
    kernel_after = [kernel_counters(p) for p in pids]
    node_counts = [{name.replace("shoal_", "").replace("_total", ""): after.get(name, 0) - before.get(name, 0)
                    for name in NODE_METRICS}
                   for before, after in zip(metrics_before, [node_metrics(n) for n in nodes])]
    # Per operation over the whole stress run (its warm-up's operations
    # counted at the measured rate).
    ops = max(summary["ops_per_s"] * elapsed, 1)
    kernel = {key: sum(a[key] - b[key] for a, b in zip(kernel_after, kernel_before)) / ops
              for key in kernel_before[0]}
    kernel["utime"] *= TICK_S * 1e6
    kernel["stime"] *= TICK_S * 1e6
    # The servers' CPU over the whole stress run (warm-up included) against
    # its wall time: the share of CPU 1 they kept busy.
    busy = server_s / elapsed
    return {
        "ops_per_s": summary["ops_per_s"],
        "p50_us": summary["latency_us"]["p50"],
        "p99_us": summary["latency_us"]["p99"],
        "errors": summary["errors"],
        "busy": busy,
        "ops_per_core_s": summary["ops_per_s"] / max(busy, 1e-9),
        "loader_cpu": summary.get("loader_cpu"),
        "kernel": kernel,
        "nodes": node_counts,
    }


def run(args, count):
    root = tempfile.mkdtemp(prefix="shoal-cluster-bench-")
    port = common_free_port(ADDRESSES[:count]) if PORT_BASE is None else PORT_BASE
    nodes = [Node(args.shoal, root, a, port) for a in ADDRESSES[:count]]
    try:
        seeds = "%s:%d" % (nodes[0].address, nodes[0].storage)
        rf, consistency = (3, "QUORUM") if count > 1 else (1, "ONE")
        for n in nodes:
            n.start(seeds, extra=["--memcache-write-consistency", consistency])
        time.sleep(3 if count > 1 else 0.5)
        if count > 1 and any(w in MEMCACHE_PHASES for w in args.phases):
            cql = Connection(nodes[0].cql, nodes[0].address)
            cql.query("ALTER KEYSPACE memcache WITH replication = "
                      "{'class': 'SimpleStrategy', 'replication_factor': %d}" % rf)
            cql.close()
        results = {}
        for workload in args.phases:
            results[workload] = phase(args.shoal, nodes, workload, args, rf, consistency, root)
        return results
    finally:
        for n in nodes:
            n.stop()
        shutil.rmtree(root, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shoal", default="target/release/shoal")
    parser.add_argument("--duration", type=float, default=10)
    parser.add_argument("--keys", type=int, default=100000)
    parser.add_argument("--value-size", type=int, default=256)
    parser.add_argument("--concurrency", type=int, default=512)
    parser.add_argument("--phases", type=lambda v: v.split(","), default=["write", "read"],
                        help="comma-separated, of write, read, lwt, counter, mc-set, mc-get")
    parser.add_argument("--stress", help="the build whose `shoal stress` loads (default: --shoal)")
    args = parser.parse_args()
    single = run(args, 1)
    cluster = run(args, 3)
    print("| phase | setup | ops/s | p50 µs | p99 µs | errors | server core busy | ops per core-s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for workload in args.phases:
        for name, r in (("1 node RF=1 ONE", single[workload]), ("3 nodes RF=3 QUORUM writes", cluster[workload])):
            print("| %s | %s | %.0f | %.0f | %.0f | %d | %.0f%% | %.0f |" % (
                workload, name, r["ops_per_s"], r["p50_us"], r["p99_us"], r["errors"], 100 * r["busy"],
                r["ops_per_core_s"]))
    for workload in args.phases:
        print("%s: cluster/single per core-second %.2f×, p99 %.1f×" % (
            workload, cluster[workload]["ops_per_core_s"] / single[workload]["ops_per_core_s"],
            cluster[workload]["p99_us"] / max(single[workload]["p99_us"], 1)))
    print()
    print("| phase | setup | user µs/op | system µs/op | page faults/op | voluntary cs/op | involuntary cs/op "
          "| syscr/op | syscw/op |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for workload in args.phases:
        for name, r in (("1 node", single[workload]), ("3 nodes", cluster[workload])):
            k = r["kernel"]
            print("| %s | %s | %.1f | %.1f | %.3f | %.3f | %.3f | %.3f | %.3f |" % (
                workload, name, k["utime"], k["stime"], k["minflt"], k["cs_vol"], k["cs_invol"], k["syscr"],
                k["syscw"]))
    for workload in args.phases:
        print("%s, each node's counts over the phase: 1 node %s; 3 nodes %s" % (
            workload, json.dumps(single[workload]["nodes"]), json.dumps(cluster[workload]["nodes"])))
    print("loader CPU:", json.dumps({w: [single[w]["loader_cpu"], cluster[w]["loader_cpu"]] for w in args.phases}))


if __name__ == "__main__":
    main()
