"""Instructions per QUORUM operation on one node of three, counted by callgrind.

    python3 bench/callgrind_cluster.py BIN write|read [COUNT]

Three nodes on 127.0.0.2-4 (`--smp 1`, RF 3, QUORUM), node 1 under
`valgrind --tool=callgrind`; `shoal stress` (BIN's own) with one thread, one
connection and 16 in flight, 256-byte values, 10,000 keys uniform, the driver
routing token-aware (so node 1 coordinates about a third of the operations
and is a replica of all of them). The counters are zeroed after a
3,000-write warm-up (reads: after loading every key and 2,000 reads), then
two loader runs are counted, each a fresh `shoal stress` process: one of
BASE (default 10) operations, then one of COUNT (default 3,000). Each new
loader connects, reads the cluster's metadata (system.local, system.peers,
system_schema), creates its keyspace and table IF NOT EXISTS and prepares
its statements: a fixed cost that is not the operations'. So the figure is
(Ir of the COUNT run - Ir of the BASE run) / (COUNT - BASE), Ir summed over
every thread of node 1; the fixed cost is printed beside it. NODES=1 runs one node (RF 1, ONE) instead, for the
single-node figure on the same loader. Instruction counts are exact
whatever else the machine runs; a run differs from the next by up to ±2K
per write (which node coordinates which write, when memtables flush).

The ports are PORT_BASE (default 24000) and the 7 after it, the same on
every address. TOP=FILE keeps node 1's dump as FILE for
`callgrind_annotate --inclusive=yes FILE` (the COUNT run's, the loader's
fixed cost included).
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_replication as cr  # noqa: E402

START_TIMEOUT_S = 300   # valgrind starts a node in tens of seconds on a loaded machine


def total_ir(dump):
    ir = 0
    for line in open(dump, errors="replace"):
        if line.startswith(("summary:", "totals:")):
            ir = max(ir, int(line.split()[1]))
    return ir


def main():
    binary, workload = os.path.realpath(sys.argv[1]), sys.argv[2]
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 3000
    base_ops = int(os.environ.get("BASE", "10"))
    assert 0 < base_ops < count, "BASE must be at least 1 and under COUNT"
    nodes_n = int(os.environ.get("NODES", "3"))
    base = int(os.environ.get("PORT_BASE", "24000"))
    root = tempfile.mkdtemp(prefix="shoal-callgrind-cluster-")
    # Not pinned: valgrind is slow, and the counts do not depend on the core.
    nodes = [cr.Node(binary, root, address, base, cpu="0-1") for address in cr.ADDRESSES[:nodes_n]]
    for n in nodes:
        n.aware, n.api, n.memcache, n.storage = base + 1, base + 2, base + 3, base + 4
    out = os.path.join(root, "callgrind.out")
    try:
        seeds = "%s:%d" % (nodes[0].address, nodes[0].storage)
        rf, consistency = (3, "QUORUM") if nodes_n > 1 else (1, "ONE")
        nodes[0].start(seeds, timeout=START_TIMEOUT_S,
                       wrapper=["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out])
        for n in nodes[1:]:
            n.start(seeds, timeout=START_TIMEOUT_S)
        time.sleep(5)
        stress = [binary, "stress", "--host", nodes[0].address, "--port", str(base), "--threads", "1",
                  "--connections", "1", "--keys", "10000", "--value-size", "256", "--concurrency", "16",
                  "--replication-factor", str(rf), "--consistency", consistency, "--quiet"]

        def run(*args):
            subprocess.run(stress + list(args), check=True, stdout=subprocess.DEVNULL, timeout=1800)

        run("--workload", "write", "--pop", "uniform", "--count", "3000")
        if workload == "read":
            run("--workload", "write", "--pop", "seq", "--count", "10000")
            run("--workload", "read", "--pop", "uniform", "--count", "2000")
        pid = str(nodes[0].proc.pid)

        def counted(ops):
            """Node 1's Ir over one loader run of `ops` operations, and its dump."""
            subprocess.run(["callgrind_control", "-z", pid], check=True, stdout=subprocess.DEVNULL)
            run("--workload", workload, "--pop", "uniform", "--count", str(ops))
            subprocess.run(["callgrind_control", "-d", pid], check=True, stdout=subprocess.DEVNULL)
            time.sleep(1)
            dump = max((os.path.join(root, f) for f in os.listdir(root) if f.startswith("callgrind.out.")),
                       key=os.path.getmtime)
            return total_ir(dump), dump

        base_ir, _ = counted(base_ops)
        ir, dump = counted(count)
        per_op = (ir - base_ir) // (count - base_ops)
        print("build: %s\n%s on %d node(s): Ir per operation on node 1: %d "
              "(a loader's fixed cost, subtracted: %d; all counted over %d: %d)" % (
                  binary, workload, nodes_n, per_op, base_ir - base_ops * per_op, count, ir // count))
        if os.environ.get("TOP"):
            shutil.copy(dump, os.environ["TOP"])
    finally:
        for n in nodes:
            n.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
