"""Read p99 beside a major compaction and beside a bootstrap that streams
out of the node, against the same reads on the quiet node, with the
schedulers on and off, in one run (issue 29: "background work vs queries"
and "read p99 while a bootstrap streams").

    python3 bench/background_events.py [--shoal target/release/shoal] [--keys 100000]
        [--sstables 8] [--duration 20] [--modes on,off] [--json PATH] [--io-properties PATH]

For each mode (`on`: the CPU and I/O schedulers, the default; `off`:
`--cpu-scheduler off --io-scheduler off`, for contrast), a fresh node
(127.0.0.2, `--smp 1`, pinned to --server-cpu):
  1. gets --keys rows of 1 KiB at RF 1, each written --sstables times and
     flushed after each pass, with automatic compaction off, so a major
     compaction has --sstables versions of every row to merge;
  2. is read as fast as it answers for 5 s, which gives its maximum rate;
  3. is read uniformly at a sixth of that rate for --duration s, quiet,
     then again with `nodetool compact` started 2 s into the reads;
  4. is read at half its maximum rate for --duration s, quiet, then again
     while a second node (127.0.0.3, pinned to --loader-cpu beside the
     loader) bootstraps and streams its half of the ring out of the first;
     the reads go on at ONE to the first node.

The loader (`shoal stress`, pinned to --loader-cpu) prints a line per
second. A quiet phase's p99 is its summary's; an event's p99 is given as
the median and the worst of the p99s of the seconds the event
overlapped (a second's p99 is the finest grain the loader reports), beside
the same two figures for the quiet phase's seconds. The goal (DESIGN.md
§6): an event's p99 ≤ 2× the quiet one.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_replication import Node, common_free_port  # noqa: E402
from io_scheduler import ROOT, io_properties  # noqa: E402
from long_writes import PROGRESS  # noqa: E402
from node_ops import post  # noqa: E402

ADDRESSES = ("127.0.0.2", "127.0.0.3")
MODES = {"on": (), "off": ("--cpu-scheduler", "off", "--io-scheduler", "off")}
KEYSPACE = "shoal_stress"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shoal", default=os.path.join(ROOT, "target/release/shoal"))
    p.add_argument("--keys", type=int, default=100_000)
    p.add_argument("--sstables", type=int, default=8)
    p.add_argument("--duration", type=int, default=20)
    p.add_argument("--modes", default="on,off")
    p.add_argument("--server-cpu", default="1")
    p.add_argument("--loader-cpu", default="0")
    p.add_argument("--io-properties", help="use this io_properties.yaml instead of running iotune")
    p.add_argument("--json")
    return p.parse_args(argv)


class Reads:
    """One `shoal stress` read phase against `node`, its per-second lines
    timestamped as they arrive."""

    def __init__(self, args, node, rate, duration_s, json_path):
        self.json_path = json_path
        self.seconds = []  # (monotonic time the line came, p99 µs)
        self.proc = subprocess.Popen(
            ["taskset", "-c", args.loader_cpu, args.shoal, "stress", "--host", node.address, "--port", str(node.cql),
             "--workload", "read", "--pop", "uniform", "--keys", str(args.keys), "--value-size", "1024",
             "--rate", str(rate), "--warmup", "0", "--duration", str(duration_s), "--no-schema",
             "--json", json_path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.reader = threading.Thread(target=self._read_lines)
        self.reader.start()

    def _read_lines(self):
        for line in self.proc.stdout:
            hit = PROGRESS.match(line)
            if hit:
                self.seconds.append((time.monotonic(), int(hit.group(4))))

    def finish(self):
        self.reader.join(timeout=900)
        self.proc.wait(timeout=60)
        if self.proc.returncode != 0:
            raise SystemExit("stress failed: %s" % self.proc.stderr.read())
        with open(self.json_path) as f:
            return json.load(f)

    def p99s_during(self, start, end):
        """The p99s of the seconds that overlap [start, end]."""
        return [p99 for at, p99 in self.seconds if at - 1.0 < end and at > start]


def seconds_summary(p99s):
    return {"seconds": len(p99s), "median_p99_us": statistics.median(p99s) if p99s else None,
            "worst_p99_us": max(p99s) if p99s else None}


def quiet_and_beside(args, node, rate, event, tmp, name):
    """Reads at `rate` quiet, then beside `event()` started 2 s into them;
    returns the phase's figures."""
    quiet = Reads(args, node, rate, args.duration, os.path.join(tmp, name + "-quiet.json"))
    quiet_summary = quiet.finish()
    busy = Reads(args, node, rate, args.duration, os.path.join(tmp, name + "-event.json"))
    time.sleep(2)
    started = time.monotonic()
    event()
    ended = time.monotonic()
    busy_summary = busy.finish()
    quiet_seconds = seconds_summary([p99 for _, p99 in quiet.seconds])
    event_seconds = seconds_summary(busy.p99s_during(started, ended))
    ratio = None
    if event_seconds["median_p99_us"] and quiet_seconds["median_p99_us"]:
        ratio = round(event_seconds["median_p99_us"] / quiet_seconds["median_p99_us"], 2)
    return {"rate": rate, "event_s": round(ended - started, 1),
            "quiet": {"latency_us": quiet_summary["latency_us"], "errors": quiet_summary["errors"], **quiet_seconds},
            "event": {"latency_us": busy_summary["latency_us"], "errors": busy_summary["errors"], **event_seconds},
            "median_ratio": ratio}


def load(args, node):
    """Every one of --keys rows written --sstables times, each time
    flushed to an SSTable of its own, automatic compaction off: a major
    compaction then reads --sstables versions of each row to keep one."""
    for part in range(args.sstables):
        subprocess.run(["taskset", "-c", args.loader_cpu, args.shoal, "stress", "--host", node.address,
                        "--port", str(node.cql), "--workload", "write", "--pop", "seq", "--keys", str(args.keys),
                        "--count", str(args.keys), "--value-size", "1024", "--concurrency", "256", "--quiet"]
                       + (["--no-schema"] if part else []),
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=1800)
        if part == 0:
            nodetool(args, node, "disableautocompaction", KEYSPACE)
        nodetool(args, node, "flush", KEYSPACE)


def nodetool(args, node, *what):
    subprocess.run([args.shoal, "nodetool", "--host", node.address, "--api-port", str(node.api), *what],
                   check=True, capture_output=True, timeout=1800)


def max_read_rate(args, node, tmp):
    reads = Reads(args, node, 0, 5, os.path.join(tmp, "max.json"))
    return reads.finish()["ops_per_s"]


def run_mode(args, tmp, mode, properties):
    root = os.path.join(tmp, mode)
    os.makedirs(root)
    port = common_free_port(ADDRESSES)
    extra = ("--io-properties-file", properties, *MODES[mode])
    first = Node(args.shoal, root, ADDRESSES[0], port, cpu=args.server_cpu)
    joiner = Node(args.shoal, root, ADDRESSES[1], port, cpu=args.loader_cpu)
    seeds = "%s:%d" % (first.address, first.storage)
    try:
        first.start(seeds, extra=extra)
        load(args, first)
        top = max_read_rate(args, first, tmp)
        print("mode %s: %d rows in %d SSTables; max read rate %.0f/s" % (mode, args.keys, args.sstables, top),
              flush=True)
        compaction = quiet_and_beside(args, first, int(top / 6), lambda: nodetool(args, first, "compact", KEYSPACE),
                                      root, "compaction")
        bootstrap = quiet_and_beside(args, first, int(top / 2),
                                     lambda: joiner.start(seeds, timeout=1800, extra=extra), root, "bootstrap")
        return {"max_read_ops_per_s": round(top), "compaction": compaction, "bootstrap": bootstrap}
    finally:
        joiner.stop()
        first.stop()


def line(mode, name, r):
    q, e = r["quiet"], r["event"]
    return ("| %s | %s | %d | %.1f | %s / %s | %s / %s | %s | %d |" % (
        mode, name, r["rate"], r["event_s"], q["median_p99_us"], q["worst_p99_us"], e["median_p99_us"],
        e["worst_p99_us"], r["median_ratio"], q["errors"] + e["errors"]))


def main(argv):
    args = parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="shoal-background-events-", dir=os.environ.get("SHOAL_BENCH_DIR"))
    try:
        properties, _ = io_properties(args, tmp)
        results = {"args": vars(args)}
        for mode in args.modes.split(","):
            results[mode] = run_mode(args, tmp, mode, properties)
        print()
        print("| schedulers | event | reads/s | event s | quiet p99 µs (median / worst second) "
              "| beside the event | median ratio | errors |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for mode in args.modes.split(","):
            for name in ("compaction", "bootstrap"):
                print(line(mode, name, results[mode][name]))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=2)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
