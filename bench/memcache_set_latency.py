"""A set's latency under a sustained set load at half the maximum rate, with
the flushes and compactions that load brings, on Shoal and on memcached
1.6 `-t 1` in one run (issue 31 item 3: "set p99 at half load over 5
minutes with flushes and compactions", the goal p99 <= 2 ms).

    python3 bench/memcache_set_latency.py [--shoal target/release/shoal] [--duration 300]
        [--systems shoal,memcached] [--keys 200000] [--memory 1G] [--sync periodic]
        [--port-base 24000] [--json PATH] [--png PATH]

Each server runs alone on --server-cpu (Shoal `--smp 1`, memcached `-t 1`)
in a fresh workdir; the loader is `shoal stress` (memcached text `set`, or
`ms` with --dialect meta; 1 KiB values, uniform keys out of --keys) on
--loader-cpu. Per server:
  phase 1  the maximum *sustained* set rate: unthrottled, --connections x
           --pipeline in flight, for --max-duration s (60: long enough for
           Shoal's memtable to fill and a steady train of flushes and
           compactions to run). The sustained maximum is the mean rate over
           the phase's second half; the burst (the whole phase's mean, what
           a 10 s phase measured before) is reported beside it. A 10 s
           burst holds about three flushes and no compaction, so half of it
           was ~90% of what Shoal sustains once compactions run;
  search   (--max-from search) the highest *fixed* rate the server keeps
           up with: a bisection below phase 1's sustained rate, each probe
           --search-duration s at a fixed rate; a probe keeps up when
           under 1% of its sets were left unstarted and the median of its
           last third's per-second p50 is under 20 ms (a queue that grows
           shows there). A fixed-rate load batches less than a pipelined
           one, so each set costs the server more (the µs/set columns):
           this is the maximum of the load phase 2 offers;
  phase 2  half of the maximum (--fraction; --max-from burst for the old
           rule, search for the fixed-rate one) offered at a fixed rate
           for --duration s.
           `shoal stress --rate` schedules operation i at t0 + i/rate and
           measures each from that intended start, so a stall is charged to
           every set it delays (no coordinated omission).
Reported per server: the maximum rate; phase 2's overall p50/p99/p99.9, its
per-second p50/p99/p99.9 (the worst second, the seconds over 2 ms), the
flushes and compactions finished during it (Shoal's shoal_memtable_flushes_total
and shoal_compactions_total on the API port), and the server's busy share of
its core (/proc/<pid>/stat) in each phase, beside that core's busy share from
every process (/proc/stat: what else ran there), and the server's CPU per
set in each phase (µs: a fixed-rate load batches less than a pipelined
one, so a set costs more in phase 2, memcached's too). For Shoal also,
per phase, from its /metrics: the time flushes spent in each step
(shoal_flush_phase_seconds: writing the SSTable, finishing it (its syncs), opening it,
merging the memtable into the row cache, freeing the memtable), the time
compactions took (shoal_compaction_seconds), and the commitlog's write
latency (shoal_commitlog_write_seconds: p99 and the worst bucket of the
time a segment write took, and of the time appended bytes waited for the
writer to start them). With matplotlib, --png plots
each second's p99 with the seconds in which a flush or a compaction finished
marked.

On a shared machine note the load average (printed) and the server core's
busy share from every process, and compare the servers within one run.
Where other processes keep both cores busy, --rt-priority 10 (as root)
runs the servers and the loader SCHED_RR, ahead of them: on this
project's 2-core machine with seven compilers running, memcached's set p99
at 40,000/s was 182 ms at nice -20 and 0.8 ms under SCHED_RR (the
kernel's RT throttling still leaves others 5% of each core). But SCHED_RR
starves the kernel's per-CPU workers on the server core too, and Shoal's
O_DIRECT writes need them: kblockd (`kworker/N:*H`) to dispatch a block
request and a `kworker/N:*` to complete a write into a new extent (the
commitlog's segments, sized by ftruncate, are holes). While the shard
thread stays busy (a flush encoding its SSTable or merging the row cache)
a commitlog write then waits 0.2-0.9 s with the disk idle, until the shard
idles or throttling lets the worker in; the sets wait with it (seen as the
`commitlog write` column's worst bucket). memcached writes no disk, so
under --rt-priority Shoal's tail is overstated beside it: take Shoal's
figures of record without --rt-priority on a quiet machine.
Exit 0 when every phase ran, 1 otherwise.
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
from harness.cpu import process_ticks  # noqa: E402
from harness.node import MemcachedNode, ShoalNode, ServerError, scrape, taskset  # noqa: E402
from harness.report import loadavg  # noqa: E402

TICK_S = 1 / os.sysconf("SC_CLK_TCK")
SLACK_S = 60
GOAL_US = 2000
PROGRESS = re.compile(r"^\s*(\d+)s\s+(\d+) ops/s\s+p50\s+(\d+) us\s+p99\s+(\d+) us\s+errors (\d+)"
                      r"(?:\s+p99\.9\s+(\d+) us\s+max\s+(\d+) us)?(\s+\(warm-up\))?")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shoal", default="target/release/shoal")
    p.add_argument("--stress", help="the loader binary (default: --shoal)")
    p.add_argument("--memcached", default="memcached")
    p.add_argument("--systems", default="shoal,memcached")
    p.add_argument("--duration", type=int, default=300, help="phase 2 seconds")
    p.add_argument("--max-duration", type=int, default=60, help="phase 1 seconds")
    p.add_argument("--max-from", choices=("sustained", "burst", "search"), default="sustained",
                   help="phase 2's rate is --fraction of phase 1's second half (sustained), of all of it (burst), "
                        "or of the highest fixed rate kept up with (search)")
    p.add_argument("--search-duration", type=int, default=30, help="seconds of each fixed-rate probe (search)")
    p.add_argument("--search-steps", type=int, default=5, help="probes of the bisection (search)")
    p.add_argument("--fraction", type=float, default=0.5, help="phase 2's rate over phase 1's")
    p.add_argument("--rate", type=float, help="phase 2's rate for every server (skips phase 1)")
    p.add_argument("--keys", type=int, default=200_000)
    p.add_argument("--value-size", type=int, default=1024)
    p.add_argument("--connections", type=int, default=40)
    p.add_argument("--pipeline", type=int, default=16)
    p.add_argument("--dialect", choices=("text", "meta"), default="text")
    p.add_argument("--memory", default="1G", help="Shoal's --memory (memcached gets -m of the same MiB)")
    p.add_argument("--sync", choices=("periodic", "batch"), default="periodic", help="Shoal's --commitlog-sync")
    p.add_argument("--shoal-arg", action="append", default=[], help="one more Shoal option (repeatable)")
    p.add_argument("--server-cpu", default="1")
    p.add_argument("--loader-cpu", default="0")
    p.add_argument("--rt-priority", type=int, default=0,
                   help="run the servers and the loader SCHED_RR at this priority (chrt -r; as root; 0: off)")
    p.add_argument("--port-base", type=int, help="Shoal on base..base+4, memcached on base+5 (default: free ports)")
    p.add_argument("--json")
    p.add_argument("--png")
    return p.parse_args(argv)


def prioritized(args):
    """The prefix that runs a server or the loader ahead of other processes (--rt-priority)."""
    return ["chrt", "-r", str(args.rt_priority)] if args.rt_priority else []


def memory_mb(text):
    units = {"K": 1 / 1024, "M": 1, "G": 1024}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units else int(text) >> 20


def counter(api_port, name):
    try:
        return scrape(api_port, timeout=2).sum(name)
    except (OSError, ValueError):
        return None


def core_ticks(cpu):
    """Busy clock ticks of one CPU since boot (all processes), from /proc/stat; None if unreadable."""
    try:
        with open("/proc/stat") as f:
            for line in f:
                if line.startswith(f"cpu{cpu} "):
                    user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in line.split()[1:8])
                    return user + nice + system + irq + softirq
    except (OSError, ValueError):
        pass
    return None


class Sampler:
    """Each second: the server's CPU ticks, its core's, and, for Shoal, its flush and compaction counters."""

    def __init__(self, pid, api_port, cpu):
        self.pid, self.api_port, self.cpu, self.samples = pid, api_port, cpu, []
        self.first = self.scrape_all()
        self.last = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.t0 = time.monotonic()
        self.thread.start()

    def scrape_all(self):
        """Every metric of Shoal's (for the histograms' deltas over the phase); None for memcached."""
        try:
            return scrape(self.api_port, timeout=5) if self.api_port else None
        except (OSError, ValueError):
            return None

    def sample(self):
        s = {"t_s": round(time.monotonic() - self.t0, 2), "ticks": process_ticks(self.pid),
             "core_ticks": core_ticks(self.cpu)}
        if self.api_port:
            s["flushes"] = counter(self.api_port, "shoal_memtable_flushes_total")
            s["compactions"] = counter(self.api_port, "shoal_compactions_total")
        self.samples.append(s)

    def run(self):
        self.sample()
        while not self.done.wait(1.0):
            self.sample()

    def stop(self):
        self.done.set()
        self.thread.join()
        self.sample()
        self.last = self.scrape_all()
        return self.samples


def histogram_delta(first, last, name, **want):
    """(count, sum in s, [(le, cumulative count)]) of a Prometheus histogram over a phase (the
    samples matching `want`, summed over shards); None when either scrape lacks it."""
    if first is None or last is None or not last.has(name + "_bucket"):
        return None

    def read(m):
        buckets = {}
        for n, labels, v in m.samples:
            if n == name + "_bucket" and all(labels.get(k) == str(x) for k, x in want.items()):
                buckets[labels["le"]] = buckets.get(labels["le"], 0.0) + v
        return m.sum(name + "_count", **want) or 0.0, m.sum(name + "_sum", **want) or 0.0, buckets

    (c0, s0, b0), (c1, s1, b1) = read(first), read(last)
    les = sorted(b1, key=lambda le: float("inf") if le == "+Inf" else float(le))
    return c1 - c0, s1 - s0, [(le, b1[le] - b0.get(le, 0.0)) for le in les]


def quantile_bound_ms(buckets, q):
    """The upper bound (ms) of the bucket holding quantile q of a histogram delta; None if empty."""
    total = buckets[-1][1] if buckets else 0
    for le, cumulative in buckets:
        if total and cumulative >= q * total:
            return None if le == "+Inf" else round(float(le) * 1000, 3)
    return None


def shoal_phase_metrics(first, last):
    """Flush steps' and compactions' seconds and the commitlog's write latency over one phase."""
    out = {}
    flush = {}
    for step in ("write", "finish", "open", "cache_merge", "release", "discard_segments"):
        h = histogram_delta(first, last, "shoal_flush_phase_seconds", phase=step)
        if h:
            flush[step] = {"count": int(h[0]), "total_s": round(h[1], 3), "max_ms": quantile_bound_ms(h[2], 1.0)}
    if flush:
        out["flush_steps"] = flush
    h = histogram_delta(first, last, "shoal_compaction_seconds")
    if h:
        out["compaction"] = {"count": int(h[0]), "total_s": round(h[1], 3), "max_ms": quantile_bound_ms(h[2], 1.0)}
    if first is not None and last is not None:
        ms0 = first.by_label("scylla_scheduler_runtime_ms", "group")
        ms1 = last.by_label("scylla_scheduler_runtime_ms", "group")
        out["group_cpu_ms"] = {g: round(ms1[g] - ms0.get(g, 0.0)) for g in ms1}
        # The commitlog's writes' wait in the shard's I/O queue, behind flushes' and compactions' writes.
        waited = [m.sum("shoal_io_queue_delay_seconds_total", **{"class": "commitlog"}) for m in (first, last)]
        dispatched = [m.sum("shoal_io_queue_dispatched_total", **{"class": "commitlog"}) for m in (first, last)]
        if None not in waited + dispatched and dispatched[1] > dispatched[0]:
            out["commitlog_io_queue_mean_us"] = round(
                1e6 * (waited[1] - waited[0]) / (dispatched[1] - dispatched[0]), 1)
    for stage in ("queued", "open", "write"):
        h = histogram_delta(first, last, "shoal_commitlog_write_seconds", stage=stage)
        if h and h[0]:
            out[f"commitlog_{stage}"] = {"count": int(h[0]), "mean_us": round(1e6 * h[1] / h[0], 1),
                                         "p99_ms": quantile_bound_ms(h[2], 0.99),
                                         "max_ms": quantile_bound_ms(h[2], 1.0)}
    return out


def delta(samples, key):
    values = [s.get(key) for s in samples if s.get(key) is not None]
    return int(values[-1] - values[0]) if len(values) >= 2 else None


def event_times(samples, key):
    """The seconds (from the sampler's start) in which `key` went up."""
    out = []
    for a, b in zip(samples, samples[1:]):
        if a.get(key) is not None and b.get(key) is not None and b[key] > a[key]:
            out.extend([b["t_s"]] * int(b[key] - a[key]))
    return out


def busy_pct(samples, key="ticks"):
    """% of one core: the server's own CPU (ticks) or its core's, every process on it (core_ticks)."""
    a, b = samples[0], samples[-1]
    if a[key] is None or b[key] is None or b["t_s"] <= a["t_s"]:
        return None
    return round(100 * (b[key] - a[key]) * TICK_S / (b["t_s"] - a["t_s"]), 1)


def stress(args, port, extra, json_path, server_pid, api_port, timeout_s):
    cmd = [*prioritized(args), *taskset(args.loader_cpu), args.stress or args.shoal, "stress", "--protocol", "memcache",
           "--memcache-protocol", args.dialect, "--port", str(port), "--threads", "1", "--json", json_path,
           "--workload", "write", "--pop", "uniform", "--keys", str(args.keys), "--value-size", str(args.value_size),
           "--connections", str(args.connections), "--pipeline", str(args.pipeline), *extra]
    log("  $ " + " ".join(cmd))
    sampler = Sampler(server_pid, api_port, args.server_cpu)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    seconds = []
    timer = threading.Timer(timeout_s, proc.kill)
    timer.start()
    try:
        for line in proc.stdout:
            hit = PROGRESS.match(line)
            if hit and not hit.group(8):
                t, ops, p50, p99, errors, p999, mx = (int(g) if g else None for g in hit.groups()[:7])
                seconds.append({"t_s": t, "ops": ops, "p50_us": p50, "p99_us": p99, "p999_us": p999,
                                "max_us": mx, "errors": errors})
        rc = proc.wait()
    finally:
        timer.cancel()
    samples = sampler.stop()
    if rc != 0:
        raise RuntimeError("shoal stress exited %d: %s" % (rc, proc.stderr.read()[-300:]))
    with open(json_path) as f:
        summary = json.load(f)
    return summary, seconds, samples, shoal_phase_metrics(sampler.first, sampler.last)


def search_rate(args, name, port, server_pid, api_port, tmp, upper):
    """The highest fixed rate below `upper` the server keeps up with (bisection), and the probes."""
    lo, hi, probes = 0, upper, []
    for step in range(args.search_steps):
        rate = round((lo + hi) / 2)
        s, seconds, samples, _ = stress(args, port, ["--rate", str(rate), "--warmup", "1",
                                                     "--duration", str(args.search_duration)],
                                        os.path.join(tmp, f"{name}-probe{step}.json"), server_pid, api_port,
                                        args.search_duration + 1 + SLACK_S)
        last = sorted(x["p50_us"] for x in seconds[len(seconds) * 2 // 3:]) or [0]
        kept_up = s.get("not_started", 0) <= 0.01 * rate * args.search_duration and last[len(last) // 2] < 20_000
        probes.append({"rate": rate, "kept_up": kept_up, "ops_per_s": round(s["ops_per_s"]),
                       "not_started": s.get("not_started", 0), "last_third_p50_us": last[len(last) // 2],
                       "busy_pct": busy_pct(samples), "flushes": delta(samples, "flushes"),
                       "compactions": delta(samples, "compactions")})
        log(f"   probe {rate:,}/s: {'kept up' if kept_up else 'fell behind'} ({probes[-1]})")
        lo, hi = (rate, hi) if kept_up else (lo, rate)
    return lo, probes


def cpu_us_per_op(samples, ops_per_s):
    """The server's CPU per operation over a phase (µs), from its busy share and the phase's rate."""
    busy = busy_pct(samples)
    return round(busy / 100 * 1e6 / ops_per_s, 1) if busy is not None and ops_per_s else None


def phase_summary(samples, metrics):
    out = {"busy_pct": busy_pct(samples), "core_busy_pct": busy_pct(samples, "core_ticks"),
           "flushes": delta(samples, "flushes"), "compactions": delta(samples, "compactions"), **metrics}
    span_s = samples[-1]["t_s"] - samples[0]["t_s"]
    if "group_cpu_ms" in metrics and span_s > 0:
        # Each scheduling group's CPU in % of the core: where the server's busy share went.
        out["group_cpu_pct"] = {g: round(ms / 10 / span_s, 1) for g, ms in metrics["group_cpu_ms"].items()}
    return out


def run_system(name, server, port, api_port, args, tmp):
    server.start(log)
    try:
        phase1 = None
        if not args.rate:
            log(f"== {name}: phase 1, the maximum sustained rate ({args.max_duration} s unthrottled)")
            s, seconds1, samples1, metrics1 = stress(
                args, port, ["--warmup", "1", "--duration", str(args.max_duration)],
                os.path.join(tmp, f"{name}-max.json"), server.pid, api_port, args.max_duration + 1 + SLACK_S)
            half = [x["ops"] for x in seconds1 if x["t_s"] > args.max_duration / 2]
            sustained = sum(half) / len(half) if half else s["ops_per_s"]
            second_half = samples1[len(samples1) // 2:]
            phase1 = {"burst_ops_per_s": round(s["ops_per_s"]), "sustained_ops_per_s": round(sustained),
                      **phase_summary(samples1, metrics1),
                      "second_half_busy_pct": busy_pct(second_half),
                      "cpu_us_per_op": cpu_us_per_op(second_half, sustained),
                      "per_second_ops": [x["ops"] for x in seconds1]}
            log(f"   burst {s['ops_per_s']:,.0f} sets/s, sustained (second half) {sustained:,.0f} sets/s, "
                f"server busy {phase1['busy_pct']}%, flushes {phase1['flushes']}, "
                f"compactions {phase1['compactions']}")
        base = phase1 and phase1["burst_ops_per_s" if args.max_from == "burst" else "sustained_ops_per_s"]
        if phase1 and args.max_from == "search":
            base, phase1["probes"] = search_rate(args, name, port, server.pid, api_port, tmp, base)
            phase1["searched_ops_per_s"] = base
        rate = args.rate or base * args.fraction
        log(f"== {name}: phase 2, {rate:,.0f} sets/s for {args.duration} s")
        s, seconds, samples, metrics2 = stress(args, port, ["--rate", str(round(rate)), "--warmup", "1",
                                                            "--duration", str(args.duration)],
                                               os.path.join(tmp, f"{name}-half.json"), server.pid, api_port,
                                               args.duration + 1 + SLACK_S)
    finally:
        server.stop(log)
    lat = s["latency_us"]
    p99s = [x["p99_us"] for x in seconds]
    phase2 = phase_summary(samples, metrics2)
    phase2["cpu_us_per_op"] = cpu_us_per_op(samples, s["ops_per_s"])
    return {"system": name, "phase1": phase1, "phase2": phase2,
            "searched_ops_per_s": phase1 and phase1.get("searched_ops_per_s"),
            "max_ops_per_s": phase1 and phase1["burst_ops_per_s"],
            "sustained_ops_per_s": phase1 and phase1["sustained_ops_per_s"],
            "max_busy_pct": phase1 and phase1["busy_pct"],
            "rate": round(rate), "ops_per_s": round(s["ops_per_s"]), "errors": s["errors"],
            "not_started": s.get("not_started", 0),
            "p50_us": lat["p50"], "p99_us": lat["p99"], "p999_us": lat["p999"], "max_us": lat["max"],
            "worst_second_p99_us": max(p99s) if p99s else None,
            "seconds": len(seconds), "seconds_over_goal": sum(1 for p in p99s if p > GOAL_US),
            "flushes": delta(samples, "flushes"), "compactions": delta(samples, "compactions"),
            "flush_times_s": event_times(samples, "flushes"),
            "compaction_times_s": event_times(samples, "compactions"),
            "busy_pct": busy_pct(samples), "core_busy_pct": busy_pct(samples, "core_ticks"),
            "per_second": seconds}


def fmt(x):
    return "—" if x is None else (f"{x:,}" if isinstance(x, int) else str(x))


def fmt_ms(us):
    return f"{us / 1000:.2f}" if us is not None else "—"


def fmt_total(h):
    """A flush step's or compactions' total seconds (count, slowest bucket's bound in ms)."""
    return f"{h['total_s']} s ({h['count']}, {h['max_ms']})" if h else "—"


def fmt_latency(h):
    return f"{h['mean_us']} / {h['p99_ms']} / {h['max_ms']}" if h else "—"


def report(results):
    """The tables, in Markdown: latency at the offered rate, CPU per phase, Shoal's background work."""
    print()
    print("| server | burst max sets/s | sustained max sets/s | fixed-rate max sets/s | offered /s | "
          "p50 / p99 / p99.9 ms | worst second's p99 ms | seconds p99 > 2 ms | flushes | compactions |")
    print("| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    for r in results:
        print(f"| {r['system']} | {fmt(r['max_ops_per_s'])} | {fmt(r['sustained_ops_per_s'])} | "
              f"{fmt(r['searched_ops_per_s'])} | {r['rate']:,} | "
              f"{fmt_ms(r['p50_us'])} / {fmt_ms(r['p99_us'])} / {fmt_ms(r['p999_us'])} | "
              f"{fmt_ms(r['worst_second_p99_us'])} | {r['seconds_over_goal']} of {r['seconds']} | "
              f"{fmt(r['flushes'])} | {fmt(r['compactions'])} |")
    print()
    print("The server's CPU in each phase: its busy % of its core (in brackets the core's busy % from every "
          "process: above the server's, something else ran there), its CPU µs per set; flushes / compactions "
          "in phase 1.")
    print()
    print("| server | phase 1 busy % | phase 1 second half: busy %, µs/set | phase 1 flushes / compactions | "
          "phase 2 busy % | phase 2 µs/set |")
    print("| --- | --- | --- | --- | --- | ---: |")
    for r in results:
        p1, p2 = r["phase1"] or {}, r["phase2"]
        print(f"| {r['system']} | {fmt(p1.get('busy_pct'))} ({fmt(p1.get('core_busy_pct'))}) | "
              f"{fmt(p1.get('second_half_busy_pct'))}, {fmt(p1.get('cpu_us_per_op'))} | "
              f"{fmt(p1.get('flushes'))} / {fmt(p1.get('compactions'))} | "
              f"{fmt(p2['busy_pct'])} ({fmt(p2['core_busy_pct'])}) | {fmt(p2['cpu_us_per_op'])} |")
    shoal = [r for r in results if "flush_steps" in r["phase2"] or "commitlog_write" in r["phase2"]]
    if not shoal:
        return
    print()
    print("Shoal's background work and commitlog in each phase (its /metrics): each scheduling group's CPU "
          "in % of the core (work outside every group, the reactor's own included, is in none); "
          "each flush step's total "
          "seconds (how many, the slowest one's bucket bound in ms); the same for compactions; commitlog "
          "segment writes (`write`: the write call, I/O queue included; `queued`: appended bytes waiting "
          "for the writer to take them; `open`: a new segment's creation) as mean µs / p99 ms / worst ms "
          "(bucket bounds: powers of two); the mean wait of a commitlog request in the I/O queue.")
    print()
    print("| server, phase | CPU % by group: statement / commitlog / memtable / compaction / main | "
          "flush: write | finish (syncs) | open | cache merge | release | discard segments | "
          "compactions | commitlog write | commitlog queued | commitlog open | commitlog I/O queue wait µs |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | ---: |")
    for r in shoal:
        for label, p in (("phase 1", r["phase1"]), ("phase 2", r["phase2"])):
            if p is None:
                continue  # --rate: no phase 1.
            steps = p.get("flush_steps", {})
            cells = [fmt_total(steps.get(k)) for k in
                     ("write", "finish", "open", "cache_merge", "release", "discard_segments")]
            groups = p.get("group_cpu_pct", {})
            by_group = " / ".join(fmt(groups.get(g))
                                  for g in ("statement", "commitlog", "memtable", "compaction", "main"))
            print(f"| {r['system']}, {label} | {by_group} | {' | '.join(cells)} | {fmt_total(p.get('compaction'))} | "
                  f"{fmt_latency(p.get('commitlog_write'))} | {fmt_latency(p.get('commitlog_queued'))} | "
                  f"{fmt_latency(p.get('commitlog_open'))} | {fmt(p.get('commitlog_io_queue_mean_us'))} |")


def plot(results, path):
    try:
        import matplotlib
    except ImportError:
        log("matplotlib is not installed: no plot")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 5), dpi=100)
    for r in results:
        xs = [x["t_s"] for x in r["per_second"]]
        ax.plot(xs, [x["p99_us"] / 1000 for x in r["per_second"]], label=f"{r['system']} p99")
        for i, t in enumerate(r["flush_times_s"]):
            ax.axvline(t, color="tab:red", alpha=0.2, label="flush" if i == 0 else None)
        for i, t in enumerate(r["compaction_times_s"]):
            ax.axvline(t, color="tab:green", alpha=0.2, ls="--", label="compaction" if i == 0 else None)
    ax.axhline(GOAL_US / 1000, color="black", ls=":", label="2 ms")
    ax.set_xlabel("seconds")
    ax.set_ylabel("set p99 in the second (ms)")
    ax.set_yscale("log")
    ax.legend()
    fig.savefig(path)


def main(argv):
    args = parse_args(argv)
    args.shoal = os.path.abspath(args.shoal)
    tmp = tempfile.mkdtemp(prefix="shoal-set-latency-", dir=os.environ.get("SHOAL_BENCH_DIR"))
    results, ok = [], True
    load_before = loadavg()
    try:
        for name in args.systems.split(","):
            if name == "shoal":
                server = ShoalNode(args.shoal, os.path.join(tmp, "node"), args.memory, args.server_cpu,
                                   os.path.join(tmp, "shoal.log"),
                                   extra=args.shoal_arg)
                base_cmd = server.cmd
                # The harness starts Shoal with periodic sync; a repeated option is an error.
                server.cmd = lambda: [*prioritized(args), *(args.sync if (a, b) == ("--commitlog-sync", "periodic") else b
                                                      for a, b in zip([None, *base_cmd()], base_cmd()))]
                if args.port_base:
                    b = args.port_base
                    (server.cql_port, server.aware_port, server.api_port, server.storage_port,
                     server.memcache_port) = b, b + 1, b + 2, b + 3, b + 4
                port, api_port = server.memcache_port, server.api_port
            elif name == "memcached":
                server = MemcachedNode(MemcachedNode.find_or_install(args.memcached, log), memory_mb(args.memory),
                                       args.server_cpu, os.path.join(tmp, "memcached.log"))
                if args.port_base:
                    server.port = args.port_base + 5
                memcached_cmd = server.cmd
                server.cmd = lambda: [*prioritized(args), *memcached_cmd()]
                port, api_port = server.port, None
            else:
                raise SystemExit(f"unknown system {name}")
            try:
                results.append(run_system(name, server, port, api_port, args, tmp))
            except (RuntimeError, OSError, ServerError) as e:
                log(f"   {name} failed: {e}")
                ok = False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    phases = (f"phase 1 skipped; phase 2: {args.duration} s at --rate {args.rate:,.0f}" if args.rate else
              f"phase 1: {args.max_duration} s unthrottled; phase 2: {args.duration} s at {args.fraction} of the "
              f"{args.max_from} maximum")
    print(f"load average before {load_before}, after {loadavg()}; {phases}; {args.dialect} sets of "
          f"{args.value_size} B over {args.keys} keys; --rt-priority {args.rt_priority}")
    report(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "loadavg": [load_before, loadavg()], "results": results}, f, indent=1)
    if args.png and results:
        plot(results, args.png)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
