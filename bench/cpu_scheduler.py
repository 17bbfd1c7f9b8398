"""Read p99 at a fixed rate alone, beside writes that drive memtable
flushes and compactions, and beside a major compaction, with the CPU
scheduler on and off (issue 29 items 4 and 5), alternating on and off over
several rounds because the machine is shared.

    python3 bench/cpu_scheduler.py [--shoal target/release/shoal] [--rounds 3]
        [--read-rate 3000] [--write-rate 8000] [--duration 15] [--keys 200000]
        [--io-properties PATH] [--json PATH]

Servers, loaders and metrics come from bench/io_scheduler.py (the I/O
scheduler stays on in every run; only `--cpu-scheduler` changes). For each
round and mode (`on`, `off`; the order alternates between rounds): a fresh
`--smp 1` server pinned to --server-cpu with a small memtable budget, --keys
rows of 1 KiB loaded and flushed, then `shoal stress` pinned to
--loader-cpu:
  1. uniform point reads at --read-rate for --duration s, alone;
  2. the same reads beside uniform overwrites at --write-rate (started 2 s
     earlier, so flushes and compactions run throughout);
  3. the same reads beside `nodetool compact` (a major compaction of what
     phases 1-2 left; its duration is reported).
Reports read p50/p99 per phase, the writes' p99, and per CPU group the
runtime, the time spent giving the core back and the final shares, from
/metrics. Prints each run, then the median p99 per mode and phase and the
on/off ratios.
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
from io_scheduler import Server, add_load_args, finish, io_properties, load_read_alone_and_beside_writes, read_args, stress  # noqa: E402


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_load_args(p)
    p.add_argument("--rounds", type=int, default=3)
    return p.parse_args(argv)


def groups(metrics):
    """Per CPU group: runtime ms, time given back ms, shares."""
    out = {}
    for name, key in (("scylla_scheduler_runtime_ms", "runtime_ms"), ("scylla_scheduler_waittime_ms", "wait_ms"),
                      ("scylla_scheduler_shares", "shares")):
        for group, value in re.findall(r'^%s\{[^}]*group="(\w+)"[^}]*\} (\S+)$' % name, metrics, re.M):
            out.setdefault(group, {})[key] = round(float(value))
    return out


def run_mode(args, tmp, mode, properties, tag):
    workdir = os.path.join(tmp, "node-%s" % tag)
    server = Server(args, workdir, "on", properties, extra=("--cpu-scheduler", mode))
    try:
        j = lambda name: os.path.join(tmp, "%s-%s.json" % (tag, name))
        alone, beside, writes = load_read_alone_and_beside_writes(args, server, j)
        server.nodetool("flush")
        started = time.time()
        compact = subprocess.Popen([args.shoal, "nodetool", "--api-port", str(server.api), "compact"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        compacted = []
        waiter = threading.Thread(target=lambda: (compact.communicate(timeout=900), compacted.append(time.time())))
        waiter.start()
        major = finish(stress(args, server, read_args(args), j("major")), j("major"))
        waiter.join()
        return {
            "read_alone": alone["latency_us"], "read_beside_writes": beside["latency_us"],
            "read_beside_major": major["latency_us"], "writes": writes["latency_us"],
            "writes_ops_per_s": writes["ops_per_s"], "major_compaction_s": round(compacted[0] - started, 1),
            "errors": alone["errors"] + beside["errors"] + writes["errors"] + major["errors"],
            "groups": groups(server.metrics()),
        }
    finally:
        server.stop()


def main(argv):
    args = parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="shoal-cpu-scheduler-")
    try:
        properties, _ = io_properties(args, tmp)
        runs = []
        for round_ in range(args.rounds):
            order = ("on", "off") if round_ % 2 == 0 else ("off", "on")
            for mode in order:
                r = run_mode(args, tmp, mode, properties, "%d-%s" % (round_, mode))
                r.update(round=round_, mode=mode, load=os.getloadavg()[0])
                runs.append(r)
                print("round %d cpu-scheduler %-3s read p50/p99 us: alone %5.0f/%6.0f, beside writes %5.0f/%6.0f, "
                      "beside major %5.0f/%6.0f (major %.1f s); writes p99 %6.0f us at %.0f/s; errors %d; load %.1f; "
                      "groups %s" % (
                          round_, mode, r["read_alone"]["p50"], r["read_alone"]["p99"],
                          r["read_beside_writes"]["p50"], r["read_beside_writes"]["p99"],
                          r["read_beside_major"]["p50"], r["read_beside_major"]["p99"], r["major_compaction_s"],
                          r["writes"]["p99"], r["writes_ops_per_s"], r["errors"], r["load"], r["groups"]),
                      flush=True)
        summary = {}
        for phase in ("read_alone", "read_beside_writes", "read_beside_major", "writes"):
            med = {m: statistics.median(r[phase]["p99"] for r in runs if r["mode"] == m) for m in ("on", "off")}
            summary[phase] = dict(med, ratio_on_off=round(med["on"] / med["off"], 2) if med["off"] else None)
            print("median p99 %-19s on %7.0f us, off %7.0f us, on/off %s" % (
                phase, med["on"], med["off"], summary[phase]["ratio_on_off"]), flush=True)
        if args.json:
            json.dump({"args": vars(args), "runs": runs, "summary": summary}, open(args.json, "w"), indent=2)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
