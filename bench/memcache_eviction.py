"""What memcached-style eviction costs: writes and reads of a key set four times
larger than the items' bound, on Shoal evicting (`--memcache-max-size`), on Shoal
not evicting (`--memcache-max-size 0`: the same writes without the deletes), and
on memcached with the same `-m`.

    python3 bench/memcache_eviction.py [--shoal target/release/shoal] [--max-mb 64]
                                       [--keys 250000] [--duration 5] [--json PATH]

Each server runs alone, one core (`taskset -c 1`; Shoal `--smp 1 --memory 1G
--commitlog-sync periodic`, memcached `-t 1`), in a fresh workdir; the loader is
`shoal stress` on CPU 0 (text protocol, 40 connections x 16 pipelined, 1 KiB
values). Per server:
  fill   every key written once in order (--pop seq): the bound is passed after
         about a quarter of them, and from then on each write evicts;
  write  uniform sets over all the keys (most replace an evicted item: a write
         that evicts one);
  read   uniform gets over all the keys (hits are the quarter still held).
Reported per phase: ops/s, p50/p99 (ms), the server's CPU (% of its core, from
/proc/<pid>/stat), ops per server-core-second, and after it `stats` curr_items,
bytes, evictions; and the RSS. Compare the ops per server-core-second of the
three rows: evicting / not evicting is what the deletes cost; Shoal / memcached
the gap to memcached on this shape.

Bounded: every `shoal stress` run is killed 60 s past its planned length; about
2 minutes in all. Exit 0 when every phase ran, 1 otherwise.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness.cpu import process_ticks  # noqa: E402
from harness.node import MemcachedNode, ShoalNode, memcache_stats, proc_rss_bytes, taskset  # noqa: E402
from harness.runner import wait_with_rusage  # noqa: E402

TICK_S = 1 / os.sysconf("SC_CLK_TCK")
SERVER_CPU, LOADER_CPU = 1, 0
SLACK_S = 60


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def stress(stress_bin, port, extra, json_path, server_pid, timeout_s):
    cmd = [*taskset(LOADER_CPU), stress_bin, "stress", "--protocol", "memcache", "--memcache-protocol", "text",
           "--port", str(port), "--threads", "1", "--quiet", "--json", json_path,
           "--connections", "40", "--pipeline", "16", *extra]
    log("  $ " + " ".join(cmd))
    t0, cpu0 = time.monotonic(), process_ticks(server_pid)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    rc, _ = wait_with_rusage(proc, timeout_s)
    if rc is None:
        proc.kill()
        proc.wait()
        raise RuntimeError("shoal stress killed after %d s" % timeout_s)
    wall_s, cpu1 = time.monotonic() - t0, process_ticks(server_pid)
    if rc != 0:
        raise RuntimeError("shoal stress exited %d: %s" % (rc, proc.stderr.read().decode(errors="replace")[-300:]))
    with open(json_path) as f:
        summary = json.load(f)
    server_s = (cpu1 - cpu0) * TICK_S
    # The whole run's CPU (warm-up included) over the whole run's wall time.
    summary["server_pct"] = round(100 * server_s / wall_s, 1)
    return summary


def run_system(name, server, port, args, tmp):
    rows = []
    server.start(log)
    try:
        phases = [
            ("fill", ["--workload", "write", "--pop", "seq", "--keys", str(args.keys), "--count", str(args.keys)]),
            ("write", ["--workload", "write", "--pop", "uniform", "--keys", str(args.keys),
                       "--warmup", "1", "--duration", str(args.duration)]),
            ("read", ["--workload", "read", "--pop", "uniform", "--keys", str(args.keys),
                      "--warmup", "1", "--duration", str(args.duration)]),
        ]
        for phase, extra in phases:
            s = stress(args.stress or args.shoal, port, extra, os.path.join(tmp, f"{name}-{phase}.json"),
                       server.pid, args.duration + 1 + SLACK_S)
            stats = memcache_stats(port)
            ops = s.get("ops_per_s", 0)
            pct = s["server_pct"]
            lat = s.get("latency_us") or {}
            row = {"system": name, "phase": phase, "ops_per_s": round(ops), "server_pct": pct,
                   "ops_per_core_s": round(ops / (pct / 100)) if pct else None,
                   "p50_ms": round(float(lat.get("p50") or 0) / 1000, 2),
                   "p99_ms": round(float(lat.get("p99") or 0) / 1000, 2),
                   "errors": s.get("errors", 0), "misses": s.get("misses"),
                   "curr_items": int(stats.get("curr_items", 0)), "bytes": int(stats.get("bytes", 0)),
                   "evictions": int(stats.get("evictions", 0)), "rss_mb": round(proc_rss_bytes(server.pid) / 2**20)}
            log("    %s" % row)
            rows.append(row)
    finally:
        server.stop(log)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shoal", default="target/release/shoal")
    ap.add_argument("--stress", help="the loader binary (default: --shoal)")
    ap.add_argument("--memcached", default="memcached")
    ap.add_argument("--max-mb", type=int, default=64)
    ap.add_argument("--keys", type=int, default=250_000)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    args.shoal = os.path.abspath(args.shoal)
    tmp = tempfile.mkdtemp(prefix="shoal-evict-bench-")
    rows, ok = [], True
    try:
        memcached = MemcachedNode.find_or_install(args.memcached, log)
        systems = []
        for label, max_size in (("shoal evicting", f"{args.max_mb}M"), ("shoal not evicting", "0")):
            workdir = tempfile.mkdtemp(dir=tmp)
            node = ShoalNode(args.shoal, workdir, "1G", SERVER_CPU, os.path.join(tmp, "shoal.log"),
                             extra=["--memcache-max-size", max_size])
            systems.append((label, node, node.memcache_port))
        mc = MemcachedNode(memcached, args.max_mb, SERVER_CPU, os.path.join(tmp, "memcached.log"))
        systems.append((f"memcached -m {args.max_mb}", mc, mc.port))
        for label, server, port in systems:
            log(f"== {label}")
            try:
                rows += run_system(label, server, port, args, tmp)
            except (RuntimeError, OSError) as e:
                log(f"   failed: {e}")
                ok = False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("| server | phase | ops/s | p50 / p99 ms | server CPU % | ops per server-core-s | curr_items | bytes | "
          "evictions | RSS MiB |")
    print("| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['system']} | {r['phase']} | {r['ops_per_s']:,} | {r['p50_ms']} / {r['p99_ms']} | "
              f"{r['server_pct']} | {r['ops_per_core_s'] or 0:,} | {r['curr_items']:,} | {r['bytes']:,} | "
              f"{r['evictions']:,} | {r['rss_mb']} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
