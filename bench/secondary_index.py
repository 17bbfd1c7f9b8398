#!/usr/bin/env python3
"""What a secondary index costs: reads by indexed value against reads by
partition key, writes to an indexed table against the same table without,
and the build rate of an index over existing data.

    SHOAL_BIN=target/release/shoal .venv/bin/python bench/secondary_index.py [--rounds 3]

One node, one shard (`--smp 1`, pinned to CPU 0; the client runs on the
others). Figures are per second of the server's CPU (utime + stime of its
process), so they do not depend on the Python client's speed; rounds
alternate the two sides of each comparison, so drift on a shared machine
hits both alike. Requests go as batches of 100 QUERY frames written at
once on one connection (the client from bench/tls.py).

- Reads: `SELECT * FROM ks.r WHERE p = n` against `... WHERE v = n`
  (index on v, one row per value), and `... WHERE v10 = n` (ten rows per
  value): server CPU per row returned.
- Writes: `INSERT INTO ks.w0 (p, v) VALUES (n, n)` against the same into
  ks.w1, which has an index on v (new rows), then UPDATEs that change v
  of existing rows (the index moves the entry): writes per server-core-s.
- Build: `--build-rows` rows (in memtables), then CREATE INDEX; rows per
  second of the build (one shard) until system.index_builds_in_progress
  is empty.
"""
import argparse
import os
import shutil
import socket
import statistics
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tls import cpu_s, cql_connect, frame, read_frames, start  # noqa: E402

ROWS = 10_000


def batch(texts):
    """QUERY frames (consistency ONE), one per text, as one write."""
    return b"".join(frame(i, 0x07, struct.pack(">I", len(t)) + t + struct.pack(">HB", 1, 0))
                    for i, t in enumerate(texts))


def run(sock, batches, pid):
    """Sends each batch, reads its answers; server CPU seconds spent."""
    before = cpu_s(pid)
    for b in batches:
        sock.sendall(b)
        read_frames(sock, 100)
    return max(cpu_s(pid) - before, 1e-9)


def write_rounds(sock, pid, rounds, batches, values):
    """Writes per server-core-second into ks.w0 and ks.w1, rounds
    alternating them: INSERTs of new rows (`values` formats the key twice),
    then UPDATEs changing v of those rows. Keyed "w0", "w1", "w0 update",
    "w1 update", a figure per round."""
    writes = {"w0": [], "w1": [], "w0 update": [], "w1 update": []}
    next_key = 0
    for r in range(rounds):
        for table in ("w0", "w1"):
            keys = range(next_key, next_key + 100 * batches)
            inserts = [batch([b"INSERT INTO ks.%s " % table.encode() + values % (p, p)
                              for p in keys[j * 100:(j + 1) * 100]]) for j in range(batches)]
            writes[table].append(100 * batches / run(sock, inserts, pid))
            updates = [batch([b"UPDATE ks.%s SET v = %d WHERE p = %d" % (table.encode(), p + 1 + r, p)
                              for p in keys[j * 100:(j + 1) * 100]]) for j in range(batches)]
            writes[table + " update"].append(100 * batches / run(sock, updates, pid))
        next_key += 100 * batches
    return writes


def read_batches(column, count):
    """Reads of values spread over the column's range (v10 has ROWS / 10)."""
    values = ROWS // 10 if column == "v10" else ROWS
    return [batch([b"SELECT * FROM ks.r WHERE %s = %d" % (column.encode(), ((j * 100 + i) * 7919) % values)
                   for i in range(100)]) for j in range(count)]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=300, help="batches of 100 requests per round and side")
    parser.add_argument("--build-rows", type=int, default=200_000)
    opts = parser.parse_args()
    binary = os.environ.get("SHOAL_BIN", "target/release/shoal")
    dir = tempfile.mkdtemp(prefix="shoal-bench-index-")
    proc = None
    try:
        proc, cql, _ = start(binary, dir, "node", [])
        from cassandra.cluster import Cluster
        cluster = Cluster(["127.0.0.1"], port=cql, protocol_version=4)
        s = cluster.connect()
        s.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE ks.r (p int PRIMARY KEY, v int, v10 int, pad text)")
        s.execute("CREATE INDEX ON ks.r (v)")
        s.execute("CREATE INDEX ON ks.r (v10)")
        for t in ("w0", "w1", "b"):
            s.execute("CREATE TABLE ks.%s (p int PRIMARY KEY, v int)" % t)
        s.execute("CREATE INDEX ON ks.w1 (v)")
        sock = cql_connect(socket.create_connection(("127.0.0.1", cql)))
        for j in range(ROWS // 100):
            sock.sendall(batch([b"INSERT INTO ks.r (p, v, v10, pad) VALUES (%d, %d, %d, 'xxxxxxxxxxxxxxxx')"
                                % (p, p, p % (ROWS // 10)) for p in range(j * 100, j * 100 + 100)]))
            read_frames(sock, 100)

        reads = {"p": [], "v": [], "v10": []}
        rows_per = {"p": 1, "v": 1, "v10": 10}
        run(sock, read_batches("p", 20) + read_batches("v", 20) + read_batches("v10", 20), proc.pid)
        for _ in range(opts.rounds):
            for column in reads:
                cpu = run(sock, read_batches(column, opts.batches), proc.pid)
                reads[column].append(cpu * 1e6 / (100 * opts.batches * rows_per[column]))

        writes = write_rounds(sock, proc.pid, opts.rounds, opts.batches, b"(p, v) VALUES (%d, %d)")

        for j in range(opts.build_rows // 100):
            sock.sendall(batch([b"INSERT INTO ks.b (p, v) VALUES (%d, %d)" % (p, p % 1000)
                                for p in range(j * 100, j * 100 + 100)]))
            read_frames(sock, 100)
        s.execute("CREATE INDEX ON ks.b (v)")
        started = time.monotonic()
        while list(s.execute("SELECT * FROM system.index_builds_in_progress")):
            time.sleep(0.05)
        build_s = time.monotonic() - started
        check = s.execute("SELECT count(*) FROM ks.b WHERE v = 7").one()[0]
        assert check == opts.build_rows // 1000, check
        cluster.shutdown()

        med = {k: statistics.median(v) for k, v in reads.items()}
        print("| read | server µs per row returned | vs by partition key |")
        print("| --- | ---: | ---: |")
        for column, label in (("p", "WHERE p = n (partition key)"), ("v", "WHERE v = n (index, 1 row per value)"),
                              ("v10", "WHERE v10 = n (index, 10 rows per value)")):
            print("| %s | %.1f | %.2fx |" % (label, med[column], med[column] / med["p"]))
        w = {k: statistics.median(v) for k, v in writes.items()}
        print()
        print("| write | no index /server-core-s | one index /server-core-s | indexed / plain |")
        print("| --- | ---: | ---: | ---: |")
        print("| INSERT new rows | %.0f | %.0f | %.2f |" % (w["w0"], w["w1"], w["w1"] / w["w0"]))
        print("| UPDATE the indexed value | %.0f | %.0f | %.2f |" % (
            w["w0 update"], w["w1 update"], w["w1 update"] / w["w0 update"]))
        print()
        print("index build: %d rows in %.2f s = %.0f rows/s on one shard" % (
            opts.build_rows, build_s, opts.build_rows / build_s))
        print("\nrounds: reads (µs/row) %s; writes (/core-s) %s" % (
            {k: [round(x, 1) for x in v] for k, v in reads.items()},
            {k: [round(x) for x in v] for k, v in writes.items()}))
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
        shutil.rmtree(dir, ignore_errors=True)


if __name__ == "__main__":
    main()
