#!/usr/bin/env python3
"""What a materialized view costs: reads of a view partition against reads
by the base's partition key and by a secondary index on the same column,
writes to a table with a view against the same table without, and the
build rate of a view over existing data.

    SHOAL_BIN=target/release/shoal .venv/bin/python bench/materialized_view.py [--rounds 3]

One node, one shard (`--smp 1`, pinned to CPU 0; the client runs on the
others). Figures are per second of the server's CPU (utime + stime of its
process), as in bench/secondary_index.py, whose request batches (100 QUERY
frames written at once on one connection) this uses.

- Reads: `SELECT * FROM ks.r WHERE p = n` against `SELECT * FROM ks.rv
  WHERE v = n` (the view keyed by v, one row per value) and `SELECT * FROM
  ks.r WHERE v = n` (an index on v): server CPU per row returned.
- Writes: `INSERT INTO ks.w0 (p, v, x) VALUES (n, n, 0)` against the same
  into ks.w1, which has a view keyed by v (new rows), then UPDATEs that
  change v of existing rows (the view row moves): writes per server-core-s.
- Build: `--build-rows` rows (in memtables), then CREATE MATERIALIZED VIEW;
  rows per second of the build (one shard) until
  system.views_builds_in_progress is empty.
"""
import argparse
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from secondary_index import batch, run, write_rounds  # noqa: E402
from tls import cql_connect, read_frames, start  # noqa: E402

ROWS = 10_000


def view(name, base, select="*"):
    return ("CREATE MATERIALIZED VIEW ks.%s AS SELECT %s FROM ks.%s WHERE v IS NOT NULL AND p IS NOT NULL "
            "PRIMARY KEY (v, p)" % (name, select, base))


def reads(table, column, count):
    return [batch([b"SELECT * FROM ks.%s WHERE %s = %d" % (table.encode(), column.encode(),
                                                          ((j * 100 + i) * 7919) % ROWS)
                   for i in range(100)]) for j in range(count)]


def fill(sock, table, rows, value):
    for j in range(rows // 100):
        sock.sendall(batch([b"INSERT INTO ks.%s (p, v, x) VALUES (%d, %d, %d)" % (table.encode(), p, value(p), p)
                            for p in range(j * 100, j * 100 + 100)]))
        read_frames(sock, 100)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=300, help="batches of 100 requests per round and side")
    parser.add_argument("--build-rows", type=int, default=200_000)
    opts = parser.parse_args()
    binary = os.environ.get("SHOAL_BIN", "target/release/shoal")
    dir = tempfile.mkdtemp(prefix="shoal-bench-mv-")
    proc = None
    try:
        proc, cql, _ = start(binary, dir, "node", [])
        from cassandra.cluster import Cluster
        cluster = Cluster(["127.0.0.1"], port=cql, protocol_version=4)
        s = cluster.connect()
        s.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        for t in ("r", "w0", "w1", "b"):
            s.execute("CREATE TABLE ks.%s (p int PRIMARY KEY, v int, x int)" % t)
        s.execute(view("rv", "r"))
        s.execute("CREATE INDEX ON ks.r (v)")
        s.execute(view("w1v", "w1"))
        sock = cql_connect(socket.create_connection(("127.0.0.1", cql)))
        fill(sock, "r", ROWS, lambda p: p)

        sides = {"key": ("r", "p"), "view": ("rv", "v"), "index": ("r", "v")}
        read_us = {side: [] for side in sides}
        run(sock, [b for side in sides.values() for b in reads(*side, 20)], proc.pid)
        for _ in range(opts.rounds):
            for side, (table, column) in sides.items():
                cpu = run(sock, reads(table, column, opts.batches), proc.pid)
                read_us[side].append(cpu * 1e6 / (100 * opts.batches))

        writes = write_rounds(sock, proc.pid, opts.rounds, opts.batches, b"(p, v, x) VALUES (%d, %d, 0)")

        fill(sock, "b", opts.build_rows, lambda p: p % 1000)
        s.execute(view("bv", "b"))
        started = time.monotonic()
        while list(s.execute("SELECT * FROM system.views_builds_in_progress")):
            time.sleep(0.05)
        build_s = time.monotonic() - started
        check = s.execute("SELECT count(*) FROM ks.bv WHERE v = 7").one()[0]
        assert check == opts.build_rows // 1000, check
        cluster.shutdown()

        med = {k: statistics.median(v) for k, v in read_us.items()}
        print("| read | server µs per row returned | vs by partition key |")
        print("| --- | ---: | ---: |")
        for side, label in (("key", "base WHERE p = n (partition key)"), ("view", "view WHERE v = n"),
                            ("index", "base WHERE v = n (index on v)")):
            print("| %s | %.1f | %.2fx |" % (label, med[side], med[side] / med["key"]))
        w = {k: statistics.median(v) for k, v in writes.items()}
        print()
        print("| write | no view /server-core-s | one view /server-core-s | with view / plain |")
        print("| --- | ---: | ---: | ---: |")
        print("| INSERT new rows | %.0f | %.0f | %.2f |" % (w["w0"], w["w1"], w["w1"] / w["w0"]))
        print("| UPDATE the view's key column | %.0f | %.0f | %.2f |" % (
            w["w0 update"], w["w1 update"], w["w1 update"] / w["w0 update"]))
        print()
        print("view build: %d rows in %.2f s = %.0f rows/s on one shard" % (
            opts.build_rows, build_s, opts.build_rows / build_s))
        print("\nrounds: reads (µs/row) %s; writes (/core-s) %s" % (
            {k: [round(x, 1) for x in v] for k, v in read_us.items()},
            {k: [round(x) for x in v] for k, v in writes.items()}))
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
        shutil.rmtree(dir, ignore_errors=True)


if __name__ == "__main__":
    main()
