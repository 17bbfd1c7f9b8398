"""ScyllaDB 2.2's write test: the highest write rate one shard sustains over
a long run while compactions accumulate, with the backlog controllers and
with fixed shares, in one run (issue 29, "compaction controller").

    python3 bench/long_writes.py [--shoal target/release/shoal] [--duration 300]
        [--keys 20000000] [--modes controller,static] [--json PATH] [--png PATH]

For each mode, a fresh `--smp 1` server pinned to --server-cpu (memtable
budget --memtable-mb) takes `shoal stress` writes of 1 KiB values to
uniformly random keys out of --keys (so the data grows and compactions pile
up) at full speed from --loader-cpu for --duration s. Modes:
  controller  the default: compaction's and flush's shares follow their backlog;
  static      `--compaction-static-shares 1000 --memtable-flush-static-shares
              1000`, ScyllaDB's fixed shares (compaction as urgent as requests);
  off         `--cpu-scheduler off` (no throttling of background work).
Every 10 s the script records the writes per second of that window (from
stress's per-second lines), the compaction backlog and shares, and the
SSTables on disk. Reports per mode the first minute's rate, the rate of
the last third of the run, their ratio (the goal: ≥ 0.8, no collapse) and
the writes' p99; with matplotlib, a PNG of the rate over time.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from io_scheduler import ROOT, Server, io_properties  # noqa: E402

MODES = {
    "controller": (),
    "static": ("--compaction-static-shares", "1000", "--memtable-flush-static-shares", "1000"),
    "off": ("--cpu-scheduler", "off"),
}
WINDOW_S = 10
PROGRESS = re.compile(r"^\s*(\d+)s\s+(\d+) ops/s\s+p50\s+(\d+) us\s+p99\s+(\d+) us")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shoal", default=os.path.join(ROOT, "target/release/shoal"))
    p.add_argument("--duration", type=int, default=300)
    p.add_argument("--keys", type=int, default=20_000_000)
    p.add_argument("--memory", default="2G")
    p.add_argument("--memtable-mb", type=int, default=64)
    p.add_argument("--concurrency", type=int, default=128)
    p.add_argument("--modes", default="controller,static")
    p.add_argument("--server-cpu", default="1")
    p.add_argument("--loader-cpu", default="0")
    p.add_argument("--io-properties", help="use this io_properties.yaml instead of running iotune")
    p.add_argument("--json")
    p.add_argument("--png")
    return p.parse_args(argv)


def metric(metrics, name, label=None):
    pattern = r"^%s(\{[^}]*%s[^}]*\})? (\S+)$" % (name, re.escape(label) if label else "")
    values = [float(v) for _, v in re.findall(pattern, metrics, re.M)]
    return sum(values) if values else None


def sstables(workdir):
    return sum(1 for _, _, files in os.walk(os.path.join(workdir, "data")) for f in files if f.endswith("Data.db"))


def run_mode(args, tmp, mode, properties):
    workdir = os.path.join(tmp, "node-" + mode)
    server = Server(args, workdir, "on", properties, extra=MODES[mode])
    seconds, samples = [], []
    try:
        cmd = ["taskset", "-c", args.loader_cpu, args.shoal, "stress", "--port", str(server.cql),
               "--workload", "write", "--pop", "uniform", "--keys", str(args.keys), "--value-size", "1024",
               "--concurrency", str(args.concurrency), "--warmup", "0", "--duration", str(args.duration),
               "--json", os.path.join(tmp, mode + ".json")]
        loader = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        done = threading.Event()

        def sample():
            while not done.wait(WINDOW_S):
                m = server.metrics()
                samples.append({"t_s": len(samples) * WINDOW_S + WINDOW_S, "sstables": sstables(workdir),
                                "backlog_bytes": metric(m, "scylla_compaction_manager_backlog"),
                                "compaction_shares": metric(m, "scylla_scheduler_shares", 'group="compaction"'),
                                "compaction_runtime_ms": metric(m, "scylla_scheduler_runtime_ms", 'group="compaction"')})
        sampler = threading.Thread(target=sample)
        sampler.start()
        for line in loader.stdout:
            hit = PROGRESS.match(line)
            if hit:
                seconds.append(int(hit.group(2)))
        loader.wait(timeout=120)
        done.set()
        sampler.join()
        if loader.returncode != 0:
            raise SystemExit("stress failed: %s" % loader.stderr.read())
        summary = json.load(open(os.path.join(tmp, mode + ".json")))
    finally:
        server.stop()
    windows = [sum(seconds[i:i + WINDOW_S]) / len(seconds[i:i + WINDOW_S]) for i in range(0, len(seconds), WINDOW_S)]
    first = seconds[:60]
    last = seconds[-max(1, len(seconds) // 3):]
    rate = lambda xs: round(sum(xs) / len(xs)) if xs else 0
    return {"per_window_ops_per_s": [round(w) for w in windows], "samples": samples,
            "first_minute_ops_per_s": rate(first), "last_third_ops_per_s": rate(last),
            "steady_over_first": round(rate(last) / max(1, rate(first)), 3),
            "ops_per_s": round(summary["ops_per_s"]), "latency_us": summary["latency_us"],
            "errors": summary["errors"]}


def plot(results, path):
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: no plot", file=sys.stderr)
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 5), dpi=100)
    for mode, r in results.items():
        xs = [WINDOW_S * (i + 1) for i in range(len(r["per_window_ops_per_s"]))]
        ax.plot(xs, r["per_window_ops_per_s"], label=mode)
    ax.set_xlabel("seconds")
    ax.set_ylabel("writes per second (10 s windows)")
    ax.set_ylim(bottom=0)
    ax.legend()
    fig.savefig(path)


def main(argv):
    args = parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="shoal-long-writes-", dir=os.environ.get("SHOAL_BENCH_DIR"))
    try:
        properties, _ = io_properties(args, tmp)
        results = {}
        for mode in args.modes.split(","):
            r = results[mode] = run_mode(args, tmp, mode, properties)
            print("%-10s first minute %7d/s  last third %7d/s  ratio %.2f  p99 %6.0f us  sstables at end %s  "
                  "per 10 s: %s" % (mode, r["first_minute_ops_per_s"], r["last_third_ops_per_s"],
                                    r["steady_over_first"], r["latency_us"]["p99"],
                                    r["samples"][-1]["sstables"] if r["samples"] else "?",
                                    r["per_window_ops_per_s"]), flush=True)
        if args.json:
            json.dump({"args": vars(args), "results": results}, open(args.json, "w"), indent=2)
        if args.png:
            plot(results, args.png)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
