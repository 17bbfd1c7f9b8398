"""Hit path and miss path of CQL point reads on one Shoal shard.

    python3 bench/cache_paths.py [--shoal target/release/shoal] [--only hit,miss]
                                 [--duration 10] [--json PATH] [--quick]

The server runs `--smp 1` pinned to CPU 1 (`taskset -c 1`), bound to 127.0.0.1 on
free ports, in a fresh workdir under /tmp that is removed at the end; the loader is
`shoal stress` (`--stress`, default the --shoal binary) pinned to CPU 0 with one
thread, 4 connections x 256 requests in flight (the bench/ab.py shape; on the
2-core VM one loader thread and one shard work in lock step, so a shard that
answers fast -- memtable or row cache -- stays at ~45-70% of its core whatever the
depth: compare ops per server-core-second), 1 KiB values, table (pk bigint, ck int,
v blob) as in bench/. A SCHED_IDLE busy loop keeps the loader's CPU awake
(harness.runner.IdleSpinner).

Rows are loaded by harness/cqlload.py (a few lines of the CQL protocol, run by this
script on the loader CPU): every row gets its own random value, so SSTables hold
incompressible data as a real data set would (`shoal stress --workload write` puts
one value in every row, which LZ4 shrinks ~10x; --load-with stress uses it anyway).

Hit path (`--memory 2G`, --hit-keys 100,000 rows, all of which fit in memory):
  load   every key written once (the memtable holds them all: 1/4 of --memory);
  (a)    uniform point reads while every row is still in the memtable;
         then `shoal nodetool flush`;
  (b)    SIGTERM, restart on the same workdir, and read at once (no warm-up): the
         first reads after a restart, cold (the OS page cache still holds the
         SSTable unless --drop-caches; the per-second ops/s show the warming);
  (c)    one pass reading every key once (seq), then uniform point reads again.
  Reported per phase: ops/s, p50/p99, the server's CPU (% of its core, from
  /proc/<pid>/stat), ops per server-core-second (server-side reads over server
  CPU seconds), query-class disk reads per read, cache hits/misses; and (c)/(a).
  A build that saves its hottest cached keys for a warm restart (saved_caches/,
  every row_cache_save_period) makes (b) less cold when a save happened before the
  restart; the report says whether such files were there (--server-arg passes
  e.g. --row-cache-save-period=0 to rule it out).

Miss path (`--memory 512M`, --miss-keys 2,000,000 rows: 2 GiB of values, 4x the
whole node's memory and more so of any cache inside it):
  load, flush, major compaction (one SSTable: every read has the same work; skip
  with --no-compact), --miss-warmup s of uniform reads to fill the caches, then
  uniform reads measured: ops/s, p99, server CPU, and per read: disk reads
  (shoal_io_operations_total{class="query"} delta over the server's reads delta),
  bytes read by Shoal, bytes the kernel fetched from the device for the server
  (/proc/<pid>/io read_bytes: page-cache misses; the page cache is not bounded
  here, so after the load it mostly holds the data: --drop-caches empties it
  before the warm-up), and shoal_cache_hits_total / shoal_cache_misses_total deltas
  when the build has them.

Each measured phase checks the server was >= 95% busy (median of 1 s samples of
its CPU) and otherwise says what limited it: the loader's core, other processes,
or neither (lock step between one loader thread and one shard, or the server
waiting on I/O).

Bounded: every `shoal stress` run is killed 60 s past its planned length, each
load and full pass after --load-timeout (300 s), major compaction after 120 s; with
the defaults the whole script takes about 3-4 minutes on the 2-core VM (hit path
~40 s, miss path ~2.5 min, most of it loading and compacting 2 GiB; --quick:
shorter runs and a 1M-row miss set, ~1.5 min). Exit 0 when every phase ran, 1
otherwise.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness.cpu import machine_ticks, TICK_S  # noqa: E402
from harness.node import (ServerError, ShoalNode, du, proc_cpu_s, proc_io,  # noqa: E402
                          proc_rss_bytes, taskset, version_of)
from harness.runner import IdleSpinner, wait_with_rusage  # noqa: E402
from harness import cqlload  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEYSPACE, TABLE = "cache_paths", "kv"
VALUE_SIZE = 1024
RUN_SLACK_S = 60
BUSY_TARGET_PCT = 95.0


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class CpuSampler(threading.Thread):
    """Samples the server's CPU seconds every `period` s while a run lasts."""

    def __init__(self, pid, spinner_pid, period=1.0):
        super().__init__(daemon=True)
        self.pid, self.spinner_pid, self.period = pid, spinner_pid, period
        self.samples = []           # (monotonic, server cpu s, machine busy ticks, spinner cpu s)
        self.stop_ev = threading.Event()

    def sample(self):
        m = machine_ticks()
        self.samples.append((time.monotonic(), proc_cpu_s(self.pid), m[0] if m else None,
                             proc_cpu_s(self.spinner_pid) if self.spinner_pid else 0.0))

    def run(self):
        while not self.stop_ev.is_set():
            self.sample()
            self.stop_ev.wait(self.period)

    def busy_pcts(self):
        out = []
        for (t0, c0, _, _), (t1, c1, _, _) in zip(self.samples, self.samples[1:]):
            if c0 is not None and c1 is not None and t1 > t0:
                out.append(100 * (c1 - c0) / (t1 - t0))
        return out

    def finish(self):
        self.stop_ev.set()
        self.join()
        self.sample()


class Bench:
    def __init__(self, args, tmp):
        self.args, self.tmp = args, tmp
        self.node = None
        self.spinner_pid = None
        self.runs = 0

    # ---- readings ----

    def snapshot(self):
        m = self.node.metrics()
        tbl = dict(keyspace=KEYSPACE, table=TABLE)
        io = proc_io(self.node.pid)
        return {
            "t": time.monotonic(),
            "cpu_s": proc_cpu_s(self.node.pid),
            "reads": m.sum("shoal_table_reads_total", **tbl),
            "io_query_ops": m.sum("shoal_io_operations_total", **{"class": "query"}),
            "io_query_bytes": m.sum("shoal_io_bytes_total", **{"class": "query"}),
            "cache_hits": m.sum("shoal_cache_hits_total", **tbl),
            "cache_misses": m.sum("shoal_cache_misses_total", **tbl),
            "cache_insertions": m.sum("shoal_cache_insertions_total", **tbl),
            "cache_evictions": m.sum("shoal_cache_evictions_total", **tbl),
            "cache_bytes": m.sum("shoal_cache_bytes", **tbl),
            "index_cache_hits": m.sum("shoal_index_cache_hits_total"),
            "index_cache_misses": m.sum("shoal_index_cache_misses_total"),
            "cache_partitions": m.sum("shoal_cache_partitions", **tbl),
            "memtable_bytes": m.sum("shoal_memtable_bytes", **tbl),
            "memtable_partitions": m.sum("shoal_memtable_partitions", **tbl),
            "sstable_partitions": m.sum("shoal_sstable_partitions", **tbl),
            "sstables": m.sum("shoal_sstables", **tbl),
            "sstable_data_bytes": m.sum("shoal_sstable_data_bytes", **tbl),
            "memory_used": m.by_label("shoal_memory_used_bytes", "kind") or None,
            "dev_read_bytes": io.get("read_bytes"),
            "rss_bytes": proc_rss_bytes(self.node.pid),
        }

    # ---- loader ----

    def stress(self, tag, extra, timeout_s, per_second=False):
        """One `shoal stress` run (CQL) with the server's readings around it."""
        a = self.args
        self.runs += 1
        json_path = os.path.join(self.tmp, f"{self.runs:02d}-{tag}.json")
        log_path = os.path.join(self.tmp, f"{self.runs:02d}-{tag}.log")
        cmd = [*taskset(a.loader_cpu), a.stress, "stress", "--threads", "1", "--protocol", "cql",
               "--host", "127.0.0.1", "--port", str(self.node.cql_port),
               "--keyspace", KEYSPACE, "--table", TABLE, "--value-size", str(VALUE_SIZE),
               "--connections", str(a.connections), "--concurrency", str(a.concurrency),
               "--json", json_path, *extra]
        shown = " ".join(cmd)
        log(f"  $ {shown}")
        before = self.snapshot()
        sampler = CpuSampler(self.node.pid, self.spinner_pid)
        sampler.start()
        with open(log_path, "wb") as f:
            proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=dict(os.environ, RUST_LOG="warn"))
            try:
                rc, rusage = wait_with_rusage(proc, timeout_s)
            finally:
                if proc.returncode is None:
                    proc.kill()
                    proc.wait()
                sampler.finish()
        after = self.snapshot()
        if rc is None:
            raise ServerError(f"{tag}: `shoal stress` killed after {timeout_s:.0f} s (see {log_path})")
        if rc != 0:
            raise ServerError(f"{tag}: `shoal stress` exited {rc}: {open(log_path).read()[-400:]}")
        with open(json_path) as f:
            s = json.load(f)
        s["command"] = shown
        s["loader_cpu_s"] = rusage.ru_utime + rusage.ru_stime
        s["server"] = self.server_figures(before, after, sampler, s)
        if per_second:
            s["per_second"] = parse_per_second(log_path)
        lat = s["latency_us"]
        sv = s["server"]
        log(f"    {s['ops_per_s']:,.0f} ops/s  p50 {lat['p50']:,.0f}  p99 {lat['p99']:,.0f} us  "
            f"errors {s['errors']}  misses {s.get('misses', 0)}  server {fmt(sv['busy_pct'], '.0f')}% "
            f"(median 1 s {fmt(sv['busy_median_pct'], '.0f')}%)  loader {fmt(sv['loader_pct'], '.0f')}%  "
            f"{fmt(sv['ops_per_core_s'], ',.0f')} ops/core-s  "
            f"disk reads/read {fmt(sv['io_reads_per_read'], '.2f')}")
        return s

    def server_figures(self, b, a, sampler, s):
        wall = a["t"] - b["t"]

        def d(k):
            return a[k] - b[k] if a.get(k) is not None and b.get(k) is not None else None

        cpu_s, reads = d("cpu_s"), d("reads")
        busy = sampler.busy_pcts()
        # The 1 s samples in the middle of the run (the first and last hold connect/teardown).
        mid = busy[1:-1] if len(busy) > 2 else busy
        loader_pct = 100 * s["loader_cpu_s"] / wall if wall > 0 else None
        busy_pct = 100 * cpu_s / wall if cpu_s is not None and wall > 0 else None
        # Everything else: all CPUs' busy time over the sampled span, less the server, the
        # loader and the loader CPU's SCHED_IDLE spinner (which fills whatever the loader leaves).
        other = None
        (t0, _, m0, sp0), (t1, _, m1, sp1) = sampler.samples[0], sampler.samples[-1]
        if t1 > t0 and None not in (m0, m1, busy_pct, loader_pct):
            spinner = (sp1 - sp0) if None not in (sp0, sp1) else 0.0
            machine = (m1 - m0) * TICK_S
            other = max(0.0, 100 * (machine - spinner) / (t1 - t0) - busy_pct - loader_pct)
        ops_per_core_s = None
        if reads and cpu_s:
            ops_per_core_s = reads / cpu_s          # server-side reads over server CPU
        elif cpu_s and wall:
            ops_per_core_s = s["ops_per_s"] / (cpu_s / wall)

        def per_read(k):
            v = d(k)
            return v / reads if v is not None and reads else None

        return {
            "wall_s": round(wall, 2), "cpu_s": cpu_s, "busy_pct": busy_pct,
            "busy_median_pct": statistics.median(mid) if mid else None,
            "busy_samples_pct": [round(x, 1) for x in busy],
            "loader_pct": loader_pct, "other_pct": other,
            "server_reads": reads, "ops_per_core_s": ops_per_core_s,
            "io_reads_per_read": per_read("io_query_ops"),
            "io_bytes_per_read": per_read("io_query_bytes"),
            "dev_bytes_per_read": per_read("dev_read_bytes"),
            "cache_hits": d("cache_hits"), "cache_misses": d("cache_misses"),
            "cache_insertions": d("cache_insertions"), "cache_evictions": d("cache_evictions"),
            "index_cache_hits": d("index_cache_hits"), "index_cache_misses": d("index_cache_misses"),
            "before": b, "after": a,
        }

    def load(self, keys, tag="load"):
        """Writes rows 0..keys-1: distinct random values (harness/cqlload.py, this process, on
        the loader CPU), or with --load-with stress one `shoal stress` seq write run (the same
        value in every row, which compresses ~10x on disk)."""
        if self.args.load_with == "stress":
            return self.stress(tag, ["--workload", "write", "--pop", "seq", "--keys", str(keys),
                                     "--count", str(keys)], timeout_s=self.args.load_timeout)
        before = self.snapshot()
        rows, secs = cqlload.load(self.node.cql_port, KEYSPACE, TABLE, keys, VALUE_SIZE, log=log,
                                  timeout_s=self.args.load_timeout)
        after = self.snapshot()
        cpu = (after["cpu_s"] - before["cpu_s"]) if None not in (after["cpu_s"], before["cpu_s"]) else None
        log(f"    {rows:,} rows in {secs:.1f} s: {rows / secs:,.0f} writes/s (Python loader), "
            f"server {fmt(100 * cpu / secs if cpu is not None else None, '.0f')}% busy")
        return {"ops": rows, "ops_per_s": rows / secs, "seconds": secs, "loader": "harness/cqlload.py",
                "server_cpu_s": cpu}

    def compact(self, deadline_s=120):
        """Major compaction down to one SSTable. `nodetool compact` leaves out SSTables that a
        background compaction holds, so it is repeated (bounded) until one is left."""
        t0 = time.monotonic()
        while True:
            self.node.nodetool("compact", log=log)
            n = self.snapshot()["sstables"]
            if n is None or n <= 1 or time.monotonic() - t0 > deadline_s:
                if n is not None and n > 1:
                    log(f"  still {n:.0f} SSTables after {deadline_s} s of compactions")
                return time.monotonic() - t0
            time.sleep(1)

    def read_uniform(self, tag, keys, warmup, duration, per_second=False):
        return self.stress(tag, ["--workload", "read", "--pop", "uniform", "--keys", str(keys),
                                 "--no-schema", "--warmup", str(warmup), "--duration", str(duration)],
                           timeout_s=warmup + duration + RUN_SLACK_S, per_second=per_second)

    def read_every_key(self, tag, keys):
        return self.stress(tag, ["--workload", "read", "--pop", "seq", "--keys", str(keys),
                                 "--no-schema", "--count", str(keys)], timeout_s=self.args.load_timeout)

    # ---- server ----

    def start(self, memory, workdir):
        self.node = ShoalNode(self.args.shoal, workdir, memory, self.args.server_cpu,
                              os.path.join(self.tmp, "shoal.log"), extra=self.args.server_arg)
        self.node.start(log)

    def restart(self):
        self.node.stop(log)
        time.sleep(0.2)
        self.node.start(log)

    def drop_caches(self):
        if not self.args.drop_caches:
            return
        subprocess.run(["sync"], check=False)
        try:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
            log("  page cache dropped (echo 3 > /proc/sys/vm/drop_caches)")
        except OSError as e:
            log(f"  could not drop the page cache: {e}")


def saved_caches(workdir):
    """{path: bytes} of the warm-restart key files (saved_caches/) under the workdir."""
    out = {}
    for root, _, files in os.walk(workdir):
        if os.path.basename(root) == "saved_caches":
            for f in files:
                p = os.path.join(root, f)
                try:
                    out[os.path.relpath(p, workdir)] = os.path.getsize(p)
                except OSError:
                    pass
    return out


def parse_per_second(path):
    """`shoal stress`'s per-second lines: [(t, ops/s, p99 us)]."""
    out = []
    try:
        with open(path, errors="replace") as f:
            for line in f:
                p = line.split()
                if len(p) >= 8 and p[2] == "ops/s" and p[0].endswith("s") and p[0][:-1].isdigit():
                    try:
                        p99 = float(p[p.index("p99") + 1]) if "p99" in p else None
                        out.append((int(p[0][:-1]), float(p[1]), p99))
                    except (ValueError, IndexError):
                        pass
    except OSError:
        pass
    return out


def fmt(x, spec):
    return format(x, spec) if isinstance(x, (int, float)) else "—"


def limit_note(s):
    """Why a throughput phase's server was not >= BUSY_TARGET_PCT busy, or None."""
    sv = s["server"]
    busy = sv["busy_median_pct"] if sv["busy_median_pct"] is not None else sv["busy_pct"]
    if busy is None or busy >= BUSY_TARGET_PCT:
        return None
    loader, other = sv["loader_pct"] or 0, sv["other_pct"] or 0
    why = []
    if loader >= 90:
        why.append(f"the loader's core ({loader:.0f}%)")
    if other >= max(10.0, (100 - busy) / 2):
        why.append(f"other processes ({other:.0f}% of a core)")
    if not why:
        why.append("neither the loader's CPU (%.0f%%) nor other processes (%.0f%%): with one "
                   "loader thread and one shard the requests in flight move in lock step, each "
                   "side idling while the other works (bench/results/2026-11-25-issue11-reads.md), "
                   "or the server waits on I/O; compare ops per server-core-second" % (loader, other))
    elif other >= 10 and not any("other" in w for w in why):
        why.append(f"(other processes also used {other:.0f}% of a core: noisy)")
    return f"server {busy:.0f}% busy (< {BUSY_TARGET_PCT:.0f}%): limited by " + " and ".join(why)


def hit_path(b, a, results):
    workdir = os.path.join(b.tmp, "hit-data")
    b.start(a.hit_memory, workdir)
    r = results["hit"] = {"memory": a.hit_memory, "keys": a.hit_keys, "command":
                          " ".join(b.node.cmd()).replace(b.tmp, "<tmp>")}
    try:
        log(f"[hit] load {a.hit_keys:,} rows")
        r["load"] = b.load(a.hit_keys)
        snap = b.snapshot()
        r["after_load"] = {k: snap[k] for k in ("memtable_bytes", "memtable_partitions", "sstables",
                                                "sstable_partitions")}
        if snap["sstables"]:
            log(f"[hit] WARNING: {snap['sstables']:.0f} SSTable(s) exist before (a): the memtable "
                "was flushed during the load, so (a) is not all memtable reads")
        log("[hit] (a) reads from the memtable")
        r["a"] = b.read_uniform("hit-a-memtable", a.hit_keys, a.warmup, a.duration)
        r["flush_s"] = b.node.nodetool("flush", log=log)
        snap = b.snapshot()
        r["after_flush"] = {k: snap[k] for k in ("memtable_bytes", "sstables", "sstable_partitions",
                                                 "cache_partitions")}
        log(f"[hit] flushed in {r['flush_s']:.1f} s: {r['after_flush']}")
        saved = saved_caches(workdir)
        r["saved_caches_at_restart"] = saved
        if saved:
            log(f"[hit] saved caches present at the restart (warm restart reads them back): {saved}")
        log("[hit] restart")
        b.restart()
        snap = b.snapshot()
        r["after_restart"] = {k: snap[k] for k in ("memtable_bytes", "memtable_partitions", "sstables",
                                                   "sstable_partitions", "cache_partitions")}
        if snap["memtable_bytes"]:
            log(f"[hit] WARNING: after the restart the memtable holds {snap['memtable_bytes']:,.0f} B "
                "(commitlog replay): phase (b) is not all SSTable reads")
        b.drop_caches()
        log("[hit] (b) cold reads right after the restart (no warm-up)")
        r["b"] = b.read_uniform("hit-b-cold", a.hit_keys, 0, a.cold_duration, per_second=True)
        log("[hit] warm-up: every key read once")
        r["warm_pass"] = b.read_every_key("hit-warm-pass", a.hit_keys)
        log("[hit] (c) reads after the warm-up pass")
        r["c"] = b.read_uniform("hit-c-warm", a.hit_keys, a.warmup, a.duration)
    finally:
        b.node.stop(log)
        r["disk_bytes"] = du(workdir)
        shutil.rmtree(workdir, ignore_errors=True)


def miss_path(b, a, results):
    workdir = os.path.join(b.tmp, "miss-data")
    b.start(a.miss_memory, workdir)
    r = results["miss"] = {"memory": a.miss_memory, "keys": a.miss_keys, "compact": a.compact,
                           "command": " ".join(b.node.cmd()).replace(b.tmp, "<tmp>")}
    try:
        log(f"[miss] load {a.miss_keys:,} rows ({a.miss_keys * VALUE_SIZE / 2**30:.2f} GiB of values)")
        r["load"] = b.load(a.miss_keys)
        r["flush_s"] = b.node.nodetool("flush", log=log)
        if a.compact:
            r["compact_s"] = b.compact()
        snap = b.snapshot()
        r["after_load"] = {k: snap[k] for k in ("memtable_bytes", "sstables", "sstable_partitions",
                                                "sstable_data_bytes", "rss_bytes")}
        r["disk_bytes"] = du(workdir)
        log(f"[miss] flushed in {r['flush_s']:.1f} s"
            + (f", compacted in {r['compact_s']:.1f} s" if a.compact else "")
            + f": {r['after_load']}, {r['disk_bytes'] / 2**30:.2f} GiB on disk")
        b.drop_caches()
        if a.miss_warmup > 0:
            log(f"[miss] warm-up: {a.miss_warmup} s of uniform reads")
            r["warmup"] = b.read_uniform("miss-warmup", a.miss_keys, 0, a.miss_warmup)
        log("[miss] uniform reads over 4x memory")
        r["reads"] = b.read_uniform("miss-reads", a.miss_keys, 0, a.duration, per_second=True)
    finally:
        b.node.stop(log)
        shutil.rmtree(workdir, ignore_errors=True)


def phase_row(name, s):
    sv, lat = s["server"], s["latency_us"]
    hits, misses = sv["cache_hits"], sv["cache_misses"]
    cache = f"{hits:,.0f} / {misses:,.0f}" if hits is not None and misses is not None else "—"
    return (f"| {name} | {s['ops_per_s']:,.0f} | {lat['p50']:,.0f} | {lat['p99']:,.0f} | "
            f"{fmt(sv['busy_pct'], '.0f')} ({fmt(sv['busy_median_pct'], '.0f')}) | "
            f"{fmt(sv['loader_pct'], '.0f')} | {fmt(sv['other_pct'], '.0f')} | "
            f"{fmt(sv['ops_per_core_s'], ',.0f')} | {fmt(sv['io_reads_per_read'], '.3f')} | "
            f"{fmt(sv['io_bytes_per_read'], ',.0f')} | {fmt(sv['dev_bytes_per_read'], ',.0f')} | "
            f"{cache} | {s['errors']} / {s.get('misses', 0)} |")


HEADER = ("| phase | ops/s | p50 µs | p99 µs | server CPU % (median 1 s) | loader % | other % | "
          "ops per server-core-s | disk reads/read | bytes read/read | device bytes/read | "
          "cache hits / misses | errors / misses |\n"
          "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")


def report(results, a):
    out = [f"# Cache paths: CQL point reads on one shard ({VALUE_SIZE}-byte values)\n",
           f"Load average at start {a.load_start}, at end "
           f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; *other %* above 10 means another "
           "process competed for the machine during that run: do not compare it.\n",
           f"Shoal: {version_of([a.shoal, '--version'])} (`{a.shoal}`); loader `shoal stress` on "
           f"CPU {a.loader_cpu}, 1 thread, {a.connections} connections x {a.concurrency} in flight; "
           f"server on CPU {a.server_cpu}. ops/s and latencies are the loader's (measured part); "
           "server CPU is over the whole stress invocation (median of 1 s samples in brackets); "
           "ops per server-core-s = the server's reads (shoal_table_reads_total) over its CPU "
           "seconds; disk reads/read and bytes read/read from shoal_io_{operations,bytes}_total"
           "{class=\"query\"}; device bytes/read from /proc/<pid>/io read_bytes (page-cache misses).\n"]
    notes = []
    h = results.get("hit")
    if h:
        out.append(f"## Hit path: `--memory {h['memory']}`, {h['keys']:,} rows\n")
        out.append(f"`{h['command']}`\n")
        out.append(HEADER)
        for key, name in (("a", "(a) memtable"), ("b", "(b) cold, right after restart"),
                          ("c", "(c) after a warm-up pass")):
            if key in h:
                out.append(phase_row(name, h[key]))
                if key != "b" and limit_note(h[key]):
                    notes.append(f"hit {name}: {limit_note(h[key])}")
                elif (h[key]["server"]["other_pct"] or 0) >= 10:
                    notes.append(f"hit {name}: other processes used "
                                 f"{h[key]['server']['other_pct']:.0f}% of a core: noisy")
        if "a" in h and "c" in h:
            ra = h["c"]["ops_per_s"] / h["a"]["ops_per_s"]
            pa, pc = h["a"]["server"]["ops_per_core_s"], h["c"]["server"]["ops_per_core_s"]
            rc = pc / pa if pa and pc else None
            out.append(f"\n(c)/(a): ops/s **{ra:.2f}**, ops per server-core-second **{fmt(rc, '.2f')}**, "
                       f"p99 {h['c']['latency_us']['p99'] / h['a']['latency_us']['p99']:.2f}")
        if "b" in h and h["b"].get("per_second"):
            ps = ", ".join(f"{ops:,.0f}" for _, ops, _ in h["b"]["per_second"])
            out.append(f"\n(b) per second, ops/s: {ps}")
        if h.get("saved_caches_at_restart"):
            out.append(f"\nWarm-restart key files were present at the restart "
                       f"({h['saved_caches_at_restart']}): (b) is not fully cold.")
        elif "after_restart" in h:
            out.append("\nNo saved_caches/ key files at the restart: (b) starts with an empty "
                       "row cache.")
        if "after_load" in h:
            out.append(f"\nBefore (a): {h['after_load']}.")
        if "after_restart" in h:
            out.append(f"After the flush: {h.get('after_flush')}; after the restart: "
                       f"{h['after_restart']}.")
        if "load" in h:
            out.append(f"Load: {h['load']['ops_per_s']:,.0f} writes/s; restart reads in (b) "
                       f"{'after dropping' if a.drop_caches else 'with'} the OS page cache "
                       f"{'' if a.drop_caches else 'warm '}(the SSTable was just written).")
    m = results.get("miss")
    if m:
        out.append(f"\n## Miss path: `--memory {m['memory']}`, {m['keys']:,} rows "
                   f"({m['keys'] * VALUE_SIZE / 2**30:.2f} GiB of values)\n")
        out.append(f"`{m['command']}`\n")
        if "after_load" in m:
            out.append(f"After load + flush{' + major compaction' if m['compact'] else ''}: "
                       f"{m['after_load']['sstables']:.0f} SSTable(s) of "
                       f"{fmt((m['after_load']['sstable_data_bytes'] or 0) / 2**30, '.2f')} GiB "
                       f"(Data), {m['disk_bytes'] / 2**30:.2f} GiB in the workdir (commitlog "
                       f"included), server RSS "
                       f"{(m['after_load']['rss_bytes'] or 0) / 2**20:,.0f} MiB; load "
                       f"{m['load']['ops_per_s']:,.0f} writes/s, flush {m['flush_s']:.1f} s"
                       + (f", compaction {m['compact_s']:.1f} s" if m.get('compact_s') else "")
                       + ".\n")
        out.append(HEADER)
        if "warmup" in m:
            out.append(phase_row(f"warm-up ({a.miss_warmup} s)", m["warmup"]))
        if "reads" in m:
            out.append(phase_row("uniform reads", m["reads"]))
            if limit_note(m["reads"]):
                notes.append(f"miss: {limit_note(m['reads'])}")
    for k in ("hit", "miss"):
        if results.get(k, {}).get("error"):
            notes.append(f"{k} path FAILED: {results[k]['error']}")
    if notes:
        out.append("\n" + "\n".join(f"- {n}" for n in notes))
    return "\n".join(out)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shoal", default=os.path.join(ROOT, "target/release/shoal"))
    p.add_argument("--stress", help="binary run as `BIN stress` (default: --shoal)")
    p.add_argument("--only", default="hit,miss", help="hit, miss or both")
    p.add_argument("--duration", type=int, default=10, help="measured seconds per read phase")
    p.add_argument("--warmup", type=int, default=2, help="unrecorded seconds before (a) and (c)")
    p.add_argument("--cold-duration", type=int, default=5, help="seconds of phase (b)")
    p.add_argument("--hit-keys", type=int, default=100_000)
    p.add_argument("--hit-memory", default="2G")
    p.add_argument("--miss-keys", type=int, default=2_000_000)
    p.add_argument("--miss-memory", default="512M")
    p.add_argument("--miss-warmup", type=int, default=10, help="seconds of reads before the measured miss run")
    p.add_argument("--no-compact", dest="compact", action="store_false",
                   help="miss path: read the flushed SSTables as they are (no major compaction)")
    p.add_argument("--drop-caches", action="store_true",
                   help="empty the OS page cache before (b) and before the miss warm-up (root)")
    p.add_argument("--load-with", choices=("python", "stress"), default="python",
                   help="python: distinct random values per row (default); stress: `shoal stress` "
                        "seq writes (one value in every row: compresses ~10x on disk)")
    p.add_argument("--server-arg", action="append", default=[],
                   help="extra shoal server flag (repeatable; e.g. --server-arg=--row-cache-save-period=0)")
    p.add_argument("--connections", type=int, default=4)
    p.add_argument("--concurrency", type=int, default=256)
    p.add_argument("--load-timeout", type=int, default=300, help="bound on each load / full pass")
    p.add_argument("--server-cpu", default="1")
    p.add_argument("--loader-cpu", default="0")
    p.add_argument("--quick", action="store_true",
                   help="--duration 5 --warmup 1 --cold-duration 3 --miss-keys 1000000 --miss-warmup 5 "
                        "(explicit values win)")
    p.add_argument("--json", help="also write every figure as JSON here")
    args = p.parse_args(argv)
    if args.quick:
        given = set(a.split("=")[0] for a in argv if a.startswith("--"))
        for k, v in (("duration", 5), ("warmup", 1), ("cold_duration", 3), ("miss_keys", 1_000_000),
                     ("miss_warmup", 5)):
            if "--" + k.replace("_", "-") not in given:
                setattr(args, k, v)
    return args


def main(argv):
    a = parse_args(argv)
    a.shoal = os.path.abspath(a.shoal)
    a.stress = os.path.abspath(a.stress or a.shoal)
    a.load_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    log(f"load average {a.load_start}; {os.cpu_count()} CPUs")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))    # run the finally blocks
    tmp = tempfile.mkdtemp(prefix="shoal-cache-paths-", dir="/tmp")
    results, ok = {}, True
    b = Bench(a, tmp)
    try:
        with IdleSpinner(a.loader_cpu, log) as spinner:
            b.spinner_pid = spinner.pid
            for which, fn in (("hit", hit_path), ("miss", miss_path)):
                if which not in a.only.split(","):
                    continue
                t0 = time.monotonic()
                try:
                    fn(b, a, results)
                except (ServerError, cqlload.CqlError, OSError, subprocess.SubprocessError, ValueError,
                        KeyError) as e:
                    ok = False
                    log(f"[{which}] FAILED: {e}")
                    log(open(os.path.join(tmp, "shoal.log"), errors="replace").read()[-2000:]
                        if os.path.exists(os.path.join(tmp, "shoal.log")) else "")
                    results.setdefault(which, {})["error"] = str(e)
                results.setdefault(which, {})["seconds"] = round(time.monotonic() - t0, 1)
                log(f"[{which}] done in {results[which]['seconds']} s")
        text = report(results, a)
        print(text)
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"args": vars(a), "results": results}, f, indent=1, default=str)
    finally:
        if b.node is not None:
            b.node.stop(log)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
