"""Read p99 at a fixed rate, alone and beside a write load that drives
memtable flushes and compactions, with the I/O scheduler on and off, in one
run (issue 29 items 2 and 6).

    python3 bench/io_scheduler.py [--shoal target/release/shoal] [--read-rate 3000]
        [--write-rate 8000] [--duration 15] [--keys 200000] [--json PATH]
        [--io-properties PATH]

First runs `shoal iotune` on the scratch directory (its io_properties.yaml
is passed to every server), unless --io-properties names a file to use
instead (a slower disk than the real one, to watch the queue at work). Then, for each of `on` and `off`: starts a fresh
`--smp 1` server pinned to --server-cpu with a small memtable budget,
loads --keys rows of 1 KiB, flushes, and drives with `shoal stress` pinned
to --loader-cpu:
  1. uniform point reads at --read-rate for --duration s, alone;
  2. the same reads beside uniform overwrites at --write-rate (the writes
     start 2 s earlier, so flushes and compactions run throughout).
Reports read p50/p99 of each phase, the writes' p99, and the I/O queue's
mean delay per class from /metrics. Every server and loader is stopped on
exit; the scratch directory is removed.
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def add_load_args(p):
    """The options this benchmark shares with cpu_scheduler.py: the binary,
    the load's shape, the cores and the disk's figures."""
    p.add_argument("--shoal", default=os.path.join(ROOT, "target/release/shoal"))
    p.add_argument("--read-rate", type=int, default=3000)
    p.add_argument("--write-rate", type=int, default=8000)
    p.add_argument("--duration", type=int, default=15)
    p.add_argument("--keys", type=int, default=200_000)
    p.add_argument("--memtable-mb", type=int, default=32)
    p.add_argument("--server-cpu", default="1")
    p.add_argument("--loader-cpu", default="0")
    p.add_argument("--json")
    p.add_argument("--io-properties", help="use this io_properties.yaml instead of running iotune")


def io_properties(args, tmp):
    """The io_properties.yaml every server of the run reads, and iotune's
    report: `--io-properties` as given, else one `shoal iotune` under
    `tmp` (its report then, else None)."""
    if args.io_properties:
        return os.path.abspath(args.io_properties), None
    tune = subprocess.run([args.shoal, "iotune", "--workdir", tmp, "--duration-s", "4"], check=True,
                          capture_output=True, text=True, timeout=120)
    return os.path.join(tmp, "io_properties.yaml"), tune.stdout.strip()


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_load_args(p)
    return p.parse_args(argv)


def free_ports(n):
    """`n` ports for a server: from SHOAL_BENCH_PORT_BASE on where it is
    set (a shared machine whose users each own a range), else free ones
    the kernel picks."""
    base = os.environ.get("SHOAL_BENCH_PORT_BASE")
    if base:
        return list(range(int(base), int(base) + n))
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class Server:
    def __init__(self, args, workdir, scheduler, properties, extra=()):
        self.args, self.workdir = args, workdir
        self.cql, self.aware, self.api, self.storage = free_ports(4)
        cmd = ["taskset", "-c", args.server_cpu, args.shoal, "--workdir", workdir, "--smp", "1",
               "--memory", getattr(args, "memory", "2G"), "--memtable-space-in-mb", str(args.memtable_mb),
               "--native-transport-port", str(self.cql), "--native-shard-aware-transport-port", str(self.aware),
               "--api-port", str(self.api), "--memcache-port", "0", "--storage-port", str(self.storage),
               "--io-scheduler", scheduler, "--io-properties-file", properties, *extra]
        self.log = open(os.path.join(workdir + ".log"), "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit("server exited at start; see %s.log" % workdir)
            if "ready" in open(workdir + ".log").read():
                return
            time.sleep(0.2)
        raise SystemExit("server did not start")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()

    def metrics(self):
        import urllib.request
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.api, timeout=10) as r:
            return r.read().decode()

    def nodetool(self, *what):
        subprocess.run([self.args.shoal, "nodetool", "--api-port", str(self.api), *what], check=True,
                       capture_output=True, timeout=600)


def stress(args, server, extra, json_path):
    cmd = ["taskset", "-c", args.loader_cpu, args.shoal, "stress", "--port", str(server.cql),
           "--keys", str(args.keys), "--value-size", "1024", "--quiet", "--json", json_path] + extra
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def finish(proc, json_path):
    _, err = proc.communicate(timeout=900)
    if proc.returncode != 0:
        raise SystemExit("stress failed: %s" % err)
    return json.load(open(json_path))


def queue_delays(metrics):
    """Mean queue delay in µs per class (scheduler on only)."""
    totals = {}
    for name in ("shoal_io_queue_delay_seconds_total", "shoal_io_queue_dispatched_total"):
        for cls, value in re.findall(r'^%s\{[^}]*class="(\w+)"[^}]*\} (\S+)$' % name, metrics, re.M):
            totals.setdefault(cls, {})[name] = totals.get(cls, {}).get(name, 0.0) + float(value)
    return {cls: round(1e6 * t["shoal_io_queue_delay_seconds_total"] / t["shoal_io_queue_dispatched_total"], 1)
            for cls, t in totals.items() if t.get("shoal_io_queue_dispatched_total")}


def read_args(args):
    """`shoal stress` arguments of the fixed-rate uniform reads."""
    return ["--workload", "read", "--pop", "uniform", "--rate", str(args.read_rate), "--warmup", "2",
            "--duration", str(args.duration), "--no-schema"]


def load_read_alone_and_beside_writes(args, server, j):
    """Loads --keys rows and flushes, then reads alone and beside writes
    (started 2 s earlier); `j(name)` names each phase's json file.
    Returns the phases' reports: (alone, beside, writes)."""
    finish(stress(args, server, ["--workload", "write", "--pop", "seq", "--count", str(args.keys)],
                  j("populate")), j("populate"))
    server.nodetool("flush")
    alone = finish(stress(args, server, read_args(args), j("alone")), j("alone"))
    writer = stress(args, server, ["--workload", "write", "--pop", "uniform", "--rate", str(args.write_rate),
                                   "--warmup", "0", "--duration", str(args.duration + 4), "--no-schema"],
                    j("writes"))
    time.sleep(2)
    beside = finish(stress(args, server, read_args(args), j("beside")), j("beside"))
    return alone, beside, finish(writer, j("writes"))


def run_mode(args, tmp, scheduler, properties):
    workdir = os.path.join(tmp, "node-" + scheduler)
    server = Server(args, workdir, scheduler, properties)
    out = {}
    try:
        j = lambda name: os.path.join(tmp, "%s-%s.json" % (scheduler, name))
        alone, beside, writes = load_read_alone_and_beside_writes(args, server, j)
        out = {
            "read_alone": alone["latency_us"], "read_alone_ops_per_s": alone["ops_per_s"],
            "read_beside_writes": beside["latency_us"], "read_beside_ops_per_s": beside["ops_per_s"],
            "writes": writes["latency_us"], "writes_ops_per_s": writes["ops_per_s"],
            "errors": alone["errors"] + beside["errors"] + writes["errors"],
            "queue_delay_us_by_class": queue_delays(server.metrics()),
        }
    finally:
        server.stop()
    return out


def main(argv):
    args = parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="shoal-io-scheduler-")
    try:
        properties, report = io_properties(args, tmp)
        if report is not None:
            print(report, flush=True)
        results = {"iotune": open(properties).read(), "args": vars(args)}
        for scheduler in ("on", "off"):
            results[scheduler] = run_mode(args, tmp, scheduler, properties)
            r = results[scheduler]
            print("scheduler %-3s read p50/p99 alone %6.0f/%6.0f us; beside writes %6.0f/%6.0f us; "
                  "writes p99 %6.0f us (%.0f/s); errors %d; queue delay us %s" % (
                      scheduler, r["read_alone"]["p50"], r["read_alone"]["p99"], r["read_beside_writes"]["p50"],
                      r["read_beside_writes"]["p99"], r["writes"]["p99"], r["writes_ops_per_s"], r["errors"],
                      r["queue_delay_us_by_class"]), flush=True)
        if args.json:
            json.dump(results, open(args.json, "w"), indent=2)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
