"""Serving a data set several times the memtable budget, through a real driver.

Starts shoal (SHOAL_BIN, default target/release/shoal) with a small memory
budget, writes MB megabytes of 1 KiB rows with the Python cassandra-driver
(prepared, concurrent), then reads back a random sample and checks every
value. Reports write throughput, the server's peak RSS while writing, the
bytes on disk, and client-side point-read latency (the driver dominates those
figures; they show the data is served, not how fast Shoal is).

    .venv/bin/python bench/larger_than_memory.py [MB] [MEMTABLE_MB]

Bounded: writing stops after MB or 300 s, whichever comes first.
"""
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from cassandra.cluster import Cluster
from cassandra.concurrent import execute_concurrent_with_args

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness.node import du  # noqa: E402

MB = int(sys.argv[1]) if len(sys.argv) > 1 else 512
MEMTABLE_MB = int(sys.argv[2]) if len(sys.argv) > 2 else 32
SHOAL_BIN = os.environ.get("SHOAL_BIN", "target/release/shoal")
VALUE = 1024
WRITE_LIMIT_S = 300


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def value_of(k):
    # Incompressible, and checkable without keeping it.
    return random.Random(k).randbytes(VALUE)


def main():
    workdir = tempfile.mkdtemp(prefix="shoal-ltm-")
    cql, aware, api, memcache, storage = free_port(), free_port(), free_port(), free_port(), free_port()
    log = open(os.path.join(workdir, "server.log"), "wb")
    proc = subprocess.Popen(
        [SHOAL_BIN, "--workdir", os.path.join(workdir, "w"), "--smp", "2", "--memory", "1G",
         "--memtable-space-in-mb", str(MEMTABLE_MB), "--native-transport-port", str(cql),
         "--native-shard-aware-transport-port", str(aware), "--api-port", str(api),
         "--memcache-port", str(memcache), "--storage-port", str(storage)],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", cql), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        cluster = Cluster(["127.0.0.1"], port=cql)
        session = cluster.connect()
        session.execute("CREATE KEYSPACE ltm WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        session.execute("CREATE TABLE ltm.kv (k int PRIMARY KEY, v blob)")
        insert = session.prepare("INSERT INTO ltm.kv (k, v) VALUES (?, ?)")
        rows = MB * 1024 * 1024 // VALUE
        peak_rss = 0
        start = time.time()
        written = 0
        batch = 5000
        while written < rows and time.time() - start < WRITE_LIMIT_S:
            n = min(batch, rows - written)
            args = [(k, value_of(k)) for k in range(written, written + n)]
            for ok, result in execute_concurrent_with_args(session, insert, args, concurrency=128):
                if not ok:
                    raise result
            written += n
            peak_rss = max(peak_rss, rss_kb(proc.pid))
        elapsed = time.time() - start
        time.sleep(1)
        disk = du(os.path.join(workdir, "w"))
        select = session.prepare("SELECT v FROM ltm.kv WHERE k = ?")
        latencies = []
        for k in random.sample(range(written), min(2000, written)):
            t = time.perf_counter()
            row = session.execute(select, (k,)).one()
            latencies.append((time.perf_counter() - t) * 1e6)
            assert row is not None and row.v == value_of(k), f"row {k} wrong or missing"
        latencies.sort()
        print(f"wrote {written} rows ({written * VALUE / 2**20:.0f} MiB of values) in {elapsed:.1f} s: "
              f"{written / elapsed:.0f} writes/s, {written * VALUE / 2**20 / elapsed:.1f} MiB/s")
        print(f"memtable budget {MEMTABLE_MB} MiB (all shards); data written is "
              f"{written * VALUE / 2**20 / MEMTABLE_MB:.1f}x the budget")
        print(f"server peak RSS while writing: {peak_rss / 1024:.0f} MiB; on disk: {disk / 2**20:.0f} MiB")
        print(f"{len(latencies)} random point reads, all correct: client-side p50 "
              f"{statistics.median(latencies):.0f} us, p99 {latencies[int(len(latencies) * 0.99)]:.0f} us")
        cluster.shutdown()
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
