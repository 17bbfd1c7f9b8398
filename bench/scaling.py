"""How Shoal's throughput grows with shards: `python3 bench/scaling.py --shards 1,2,4,8`.

The side-by-side comparison (compare.py) pins one shard to one CPU. This
script asks the other question of a shard-per-core design: with N shards on N
dedicated CPUs, does throughput grow N times? For each N it starts
`shoal --smp N` pinned to the first N of --server-cpus, loads 100,000 keys per
shard (1 KiB values), and runs `shoal stress` (token- and shard-aware, one
connection per shard, 64 operations in flight per shard) for a max-throughput read, write and mixed (1:1) run, as one
single-threaded loader process per --loader-cpus CPU. memcached
with `-t N` runs the same GET load over the memcached protocol as a reference
point when its binary is found (--memcached).

It needs a machine with more CPUs than the 2-core development VM: server and
loader CPUs must not overlap, and the loader gets enough CPUs to keep N
shards busy (its CPU use is in the table: a loader near 100% x its CPUs means
the figure is the loader's limit, not the server's).

Writes bench/results/<date>-scaling<suffix>.md and the raw JSON of every run
under bench/results/<date>-scaling<suffix>/raw/. Every server is stopped on
exit; every run is bounded in time.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import types
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import cpu  # noqa: E402
from harness.runner import RUN_SLACK_S, wait_with_rusage  # noqa: E402
from harness.systems import port_open  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CQL_PORT, SHARD_AWARE_PORT, API_PORT, MEMCACHE_PORT, STORAGE_PORT = 9242, 19242, 10300, 11411, 7300
KEYS_PER_SHARD = 100_000
IN_FLIGHT_PER_SHARD = 64
START_TIMEOUT_S = 60
CQL_RUNS = (("read", []), ("write", []), ("mixed", ["--ratio", "1:1"]))


def cpu_list(spec):
    """"0-3,8" -> [0, 1, 2, 3, 8]."""
    cpus = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def in_flight(n, loaders):
    """Operations in flight per loader process when `loaders` processes share n shards' load."""
    return max(1, IN_FLIGHT_PER_SHARD * n // loaders)


def combine(summaries):
    """One summary of loader processes that ran side by side (see Scaling.stress)."""
    ops = sum(s["ops"] for s in summaries)
    weights = [s["ops"] / ops if ops else 1 / len(summaries) for s in summaries]
    lat = {}
    for p in ("p50", "mean"):
        lat[p] = sum(w * s["latency_us"][p] for w, s in zip(weights, summaries))
    for p in ("p90", "p99", "p999", "max"):
        lat[p] = max(s["latency_us"][p] for s in summaries)
    return {"loaders": len(summaries), "ops": ops,
            "ops_per_s": sum(s["ops_per_s"] for s in summaries),
            "errors": sum(s["errors"] for s in summaries), "latency_us": lat,
            "runs": summaries}


def server_counters(pid):
    """Requests and forwarded requests summed over shards (from /metrics), and CPU ticks
    per thread name (from /proc): what a scaling shortfall is made of."""
    counters = {}
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{API_PORT}/metrics", timeout=5) as r:
            for line in r.read().decode().splitlines():
                name = line.split("{")[0].split(" ")[0]
                if name in ("shoal_cql_requests_total", "shoal_cql_forwarded_requests_total"):
                    counters[name] = counters.get(name, 0) + float(line.rsplit(" ", 1)[1])
    except OSError:
        pass
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = "thread " + stat[stat.find("(") + 1:stat.rfind(")")]
        rest = stat[stat.rfind(")") + 2:].split()
        counters[name] = counters.get(name, 0) + int(rest[11]) + int(rest[12])
    return counters


def counter_deltas(before, after):
    return {k: round(v - before.get(k, 0), 2) for k, v in after.items() if v != before.get(k, 0)}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shards", default="1,2,4,8", help="shard counts to run (default 1,2,4,8)")
    p.add_argument("--server-cpus", default="0-7", help="CPUs for the server, first N used")
    p.add_argument("--loader-cpus", default="8-15", help="CPUs for shoal stress (all used)")
    p.add_argument("--workloads", default="read,write,mixed",
                   help="CQL workloads to run (default read,write,mixed)")
    p.add_argument("--duration", type=int, default=10, help="recorded seconds per run")
    p.add_argument("--warmup", type=int, default=2, help="warm-up seconds per run")
    p.add_argument("--shoal-bin", default=os.path.join(ROOT, "target/release/shoal"))
    p.add_argument("--memcached", default=shutil.which("memcached"),
                   help="memcached binary for the reference rows (default: from PATH; '' = none)")
    p.add_argument("--results", default=os.path.join(ROOT, "bench", "results"))
    p.add_argument("--name", default="scaling", help="report name (default scaling)")
    p.add_argument("--tmp", default=os.path.join(ROOT, "bench", "results", "tmp", "scaling"),
                   help="server data and logs")
    return p.parse_args(argv)


class Server:
    """One server process in its own session, killed (with its data) on exit."""

    def __init__(self, cmd, port, log_path):
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not port_open(port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{cmd[0]} did not open port {port}; see {log_path}")
            time.sleep(0.1)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class Scaling:
    def __init__(self, args):
        self.args = args
        self.loader_cpus = cpu_list(args.loader_cpus)
        self.server_cpus = cpu_list(args.server_cpus)
        stamp = datetime.date.today().isoformat()
        self.report_path = os.path.join(args.results, f"{stamp}-{args.name}.md")
        self.raw_dir = os.path.join(args.results, f"{stamp}-{args.name}", "raw")
        os.makedirs(self.raw_dir, exist_ok=True)
        os.makedirs(args.tmp, exist_ok=True)
        self.rows = []   # (system, shards, workload, summary)

    def stress(self, tag, server_pid, extra, split=True):
        """Runs `shoal stress` and returns its summary, with CPU accounting under "cpu".

        split: one single-threaded loader process per loader CPU, each with its share of
        the in-flight operations, and their figures combined (ops/s summed; p50 and mean
        weighted by ops; p90 and above: the worst loader's). One tokio runtime spread over
        many threads spends most of its time waking threads, so it would measure itself
        (seen: 8 worker threads used 4.5 cores for 230k reads/s). Without split: one process
        with a thread per loader CPU (for populating, where only completion matters).
        """
        window = cpu.Window(server_pid, None)
        loaders = self.loader_cpus if split else [",".join(map(str, self.loader_cpus))]
        procs = []
        for i, cpus in enumerate(loaders):
            json_path = os.path.join(self.raw_dir, f"{tag}.{i}.json")
            threads = "1" if split else str(len(self.loader_cpus))
            cmd = ["taskset", "-c", str(cpus), self.args.shoal_bin, "stress", "--threads",
                   threads, "--quiet", "--json", json_path, *extra(len(loaders))]
            if i == 0:
                print(f"  {len(loaders)} x $", " ".join(cmd).replace(ROOT + "/", ""), flush=True)
            log = open(os.path.join(self.args.tmp, f"{tag}.{i}.log"), "wb")
            procs.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL,
                                           env=dict(os.environ, RUST_LOG="warn")), log, json_path))
        summaries, loader_s = [], 0.0
        timeout_s = self.args.warmup + self.args.duration + RUN_SLACK_S + 60
        for proc, log, json_path in procs:
            rc, rusage = wait_with_rusage(proc, timeout_s)
            log.close()
            if rc is None:
                for p, _, _ in procs:
                    p.kill()
                raise RuntimeError(f"{tag}: timed out")
            if rc != 0:
                raise RuntimeError(f"{tag}: shoal stress exited {rc}; see {log.name}")
            loader_s += rusage.ru_utime + rusage.ru_stime
            with open(json_path) as f:
                summaries.append(json.load(f))
        summary = combine(summaries)
        summary["cpu"] = window.stop(types.SimpleNamespace(ru_utime=loader_s, ru_stime=0.0))
        with open(os.path.join(self.raw_dir, tag + ".json"), "w") as f:
            json.dump(summary, f, indent=1)
        lat = summary["latency_us"]
        print(f"    {summary['ops_per_s']:,.0f} ops/s p50 {lat['p50']:,.0f} us "
              f"p99 {lat['p99']:,.0f} us  server {summary['cpu']['server_pct']}% "
              f"loader {summary['cpu']['loader_pct']}%", flush=True)
        return summary

    def timed(self, n, loaders):
        """Options of a recorded run, for one of `loaders` processes sharing n shards' load."""
        return ["--concurrency", str(in_flight(n, loaders)), "--warmup", str(self.args.warmup),
                "--duration", str(self.args.duration)]

    def shoal(self, n):
        workdir = os.path.join(self.args.tmp, f"shoal-{n}")
        shutil.rmtree(workdir, ignore_errors=True)
        cmd = ["taskset", "-c", ",".join(map(str, self.server_cpus[:n])), self.args.shoal_bin,
               "--smp", str(n), "--memory", f"{2 * n}G", "--workdir", workdir,
               "--native-transport-port", str(CQL_PORT),
               "--native-shard-aware-transport-port", str(SHARD_AWARE_PORT),
               "--api-port", str(API_PORT), "--memcache-port", str(MEMCACHE_PORT),
               "--storage-port", str(STORAGE_PORT)]
        keys = KEYS_PER_SHARD * n
        common = ["--port", str(CQL_PORT), "--keys", str(keys)]
        print(f"[shoal --smp {n}]", flush=True)
        with Server(cmd, CQL_PORT, os.path.join(self.args.tmp, f"shoal-{n}.log")) as server:
            pid = server.proc.pid
            self.stress(f"shoal-{n}-populate", pid,
                        lambda _: [*common, "--workload", "write", "--pop", "seq", "--count",
                                   str(keys), "--concurrency", str(IN_FLIGHT_PER_SHARD * n)],
                        split=False)
            for workload, extra in CQL_RUNS:
                if workload not in self.args.workloads.split(","):
                    continue
                before = server_counters(pid)
                s = self.stress(f"shoal-{n}-{workload}", pid,
                                lambda loaders: [*common, "--workload", workload, "--pop",
                                                 "uniform", *extra, *self.timed(n, loaders)])
                s["server"] = counter_deltas(before, server_counters(pid))
                print(f"    server: {s['server']}", flush=True)
                self.rows.append(("Shoal CQL", n, workload, s))
        shutil.rmtree(workdir, ignore_errors=True)

    def memcached(self, n):
        keys = KEYS_PER_SHARD * n
        cmd = ["taskset", "-c", ",".join(map(str, self.server_cpus[:n])), self.args.memcached,
               "-t", str(n), "-m", str(2048 * n), "-p", str(MEMCACHE_PORT), "-l", "127.0.0.1",
               "-U", "0", "-c", "4096", "-u", "root"]
        common = ["--protocol", "memcache", "--port", str(MEMCACHE_PORT), "--keys", str(keys)]
        print(f"[memcached -t {n}]", flush=True)
        with Server(cmd, MEMCACHE_PORT, os.path.join(self.args.tmp, f"memcached-{n}.log")) as srv:
            pid = srv.proc.pid
            self.stress(f"memcached-{n}-populate", pid,
                        lambda _: [*common, "--workload", "write", "--pop", "seq", "--count",
                                   str(keys), "--connections", str(4 * n)], split=False)
            # One request in flight per connection (no pipelining), as many as CQL has.
            s = self.stress(f"memcached-{n}-get", pid,
                            lambda loaders: [*common, "--workload", "read", "--pop", "uniform",
                                             "--connections", str(in_flight(n, loaders)),
                                             *self.timed(n, loaders)])
            self.rows.append(("memcached GET", n, "read", s))

    def run(self):
        for n in (int(x) for x in self.args.shards.split(",")):
            assert n <= len(self.server_cpus), f"{n} shards but --server-cpus has fewer CPUs"
            self.shoal(n)
            if self.args.memcached:
                self.memcached(n)
        self.write_report()

    def write_report(self):
        base = {(sys_, w): s["ops_per_s"] for sys_, n, w, s in self.rows if n == 1}
        lines = [
            f"# Shard scaling — {datetime.date.today().isoformat()}",
            "",
            f"`python3 bench/scaling.py --shards {self.args.shards} --server-cpus "
            f"{self.args.server_cpus} --loader-cpus {self.args.loader_cpus}` on "
            f"{os.cpu_count()} CPUs ({platform.processor() or platform.machine()}, "
            f"kernel {platform.release()}). Server on the first N server CPUs, "
            "`shoal stress` as one single-threaded process per loader CPU "
            f"({len(self.loader_cpus)}), sharing the load; "
            f"{KEYS_PER_SHARD:,} keys x 1 KiB per shard, {IN_FLIGHT_PER_SHARD} ops in flight per "
            f"shard, {self.args.duration} s recorded after {self.args.warmup} s warm-up, uniform "
            "keys. p50: weighted over the loaders; p99: the worst loader's. CPU columns: % of one "
            "core over the run.",
            "",
            "| system | workload | shards | ops/s | ops/s per shard | x 1 shard | p50 ms | p99 ms "
            "| server CPU % | loader CPU % |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for sys_, n, w, s in sorted(self.rows, key=lambda r: (r[0], r[2], r[1])):
            ops, lat, c = s["ops_per_s"], s["latency_us"], s["cpu"]
            one = base.get((sys_, w))
            lines.append(f"| {sys_} | {w} | {n} | {ops:,.0f} | {ops / n:,.0f} | "
                         f"{ops / one if one else float('nan'):.2f} | {lat['p50'] / 1000:.2f} | "
                         f"{lat['p99'] / 1000:.2f} | {c['server_pct']} | {c['loader_pct']} |")
        with open(self.report_path, "w") as f:
            f.write("\n".join(lines) + "\n")
        print("\n".join(lines))
        print(f"report: {self.report_path}")


def main(argv):
    args = parse_args(argv)
    overlap = set(cpu_list(args.server_cpus)) & set(cpu_list(args.loader_cpus))
    if overlap:
        sys.exit(f"server and loader CPUs overlap: {sorted(overlap)}")
    Scaling(args).run()


if __name__ == "__main__":
    main(sys.argv[1:])
